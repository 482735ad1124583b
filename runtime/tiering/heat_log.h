// The heat log (TIERMEM_HEAT_LOG): what the policy thread learned each round, appended to a file
// for a reader outside the process (`tiermem advise`, docs/advise.md). It records; it decides
// nothing, and the runtime never reads it back (with it on, the sampler's watch does not carry
// pages from round to round, so that samples stay alike: Migrator::Start).
//
// Format (binary, little-endian, x86-64 layout; docs/advise.md "The record"):
//   file header, 16 bytes:  char magic[8] = "TMHEAT01"; u32 page_size; u32 interval_ms
//   per round, 24 bytes:    u64 t_ns (since the log opened); u64 dram_pages (the DRAM tier's
//                           pages as the runtime counts them, this round); u32 entries;
//                           u32 pages_touched (before the cap)
//   then `entries` times, 16 bytes: u64 page (address / page_size); f32 weight (the accesses
//                           it stands for, in page-rounds: a write-scan sample's weight is the
//                           rounds one pass over every live page takes, a sampled access's the
//                           inverse sampling probability, Migrator::ArmablePopulation); u32
//                           flags (bit 0: a write was seen;
//                           bit 1: the write scan saw it written)
// A page appears at most once per round: its samples' weights summed, except that the write
// scan's sample, where there is one, replaces the access samples of its page (the scan sees
// every page it reads, so the page was touched this round; an access sample's weight stands for
// other pages the scan did not see written, and added on top it would count this one twice). When more than `max_pages` pages were touched in a
// round, a uniform random subset of `max_pages` is written and each weight is scaled by
// pages_touched / entries, so sums over pages stay unbiased: the file grows by at most
// 24 + 16 * max_pages bytes per round, whatever the program does.
//
// Thread safety: Round is called from the policy thread only. Failure: a write that fails
// (disk full, a closed pipe) stops the log with one warning; the program runs on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tiermem/status.hpp"
#include "runtime/pages/sampler.h"

namespace tiermem {

class HeatLog {
 public:
  static constexpr char kMagic[9] = "TMHEAT01";
  struct Entry {
    uint64_t page;
    float weight;
    uint32_t flags;  // kWrite
  };
  static constexpr uint32_t kWrite = 1;
  static constexpr uint32_t kScan = 2;
  struct RoundHeader {
    uint64_t t_ns;
    uint64_t dram_pages;
    uint32_t entries;
    uint32_t pages_touched;
  };
  static_assert(sizeof(Entry) == 16 && sizeof(RoundHeader) == 24, "the documented layout");

  // Creates (truncates) `path_template` with each "%p" replaced by this process's id and writes
  // the file header; fails with the path and the reason.
  static StatusOr<std::unique_ptr<HeatLog>> Open(const std::string& path_template, uint32_t page_size,
                                                 uint32_t interval_ms, uint64_t max_pages);
  ~HeatLog();
  HeatLog(const HeatLog&) = delete;
  HeatLog& operator=(const HeatLog&) = delete;

  // Appends one round: the round's samples (any order, a page any number of times), merged per
  // page, capped at max_pages as above. `now_ns`: os::MonotonicNanos of the round. The samples
  // from index `scan_from` on are the write scan's (none by default).
  void Round(uint64_t now_ns, uint64_t dram_pages, const std::vector<AccessSample>& samples,
             size_t scan_from = SIZE_MAX);
  const std::string& path() const { return path_; }

 private:
  HeatLog(int fd, std::string path, uint64_t start_ns, uint64_t max_pages)
      : fd_(fd), path_(std::move(path)), start_ns_(start_ns), max_pages_(max_pages) {}
  // Keeps a uniform random max_pages_ of entries_ and scales their weights to stand for all.
  void Cap();
  int fd_;
  std::string path_;
  uint64_t start_ns_;
  uint64_t max_pages_;
  uint64_t rng_ = 0x9E3779B97F4A7C15ull;  // splitmix64 state for Cap
  std::vector<Entry> entries_;            // Round's scratch
  std::vector<char> out_;                 // the round's bytes, written in one call
};


}  // namespace tiermem

// The process's live stats block: a fixed-layout struct in a shared file,
// /dev/shm/tiermem.<uid>.<pid> (0600), whose counters are the runtime's own storage for them
// (base/counters.h). Readers in other processes map it read-only (stats_reader.cc,
// include/tiermem/stats.hpp). Layout rules: plain data and lock-free atomics only, fixed sizes,
// no pointers; a change of the hand-written layout bumps kStatsLayoutVersion, while the listed
// counters (tiermem/counter_list.hpp) carry their own check, kCounterListHash.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>

#include "base/counters.h"
#include "tiermem/stats.hpp"
#include "tiermem/tiermem.hpp"

namespace tiermem {

inline constexpr uint64_t kStatsMagic = 0x3153544154534d54ull;  // "TMSTATS1"
inline constexpr int kStatsMaxRegions = 256;
inline constexpr int kStatsMaxNodes = 16;

struct StatsBlock {
  // Written once at creation (before any reader can see the file complete).
  uint64_t magic;
  uint32_t layout_version;
  uint32_t size;               // sizeof(StatsBlock)
  uint64_t counter_list_hash;  // kCounterListHash of the writer
  int32_t pid;
  uint32_t uid;
  uint64_t proc_start_ticks;   // field 22 of /proc/PID/stat: tells a reused pid from ours
  uint64_t started_unix_ns;
  uint64_t page_size;
  char command[32];
  // Tiers: set at start.
  uint32_t tier_available[kNumTiers];
  uint64_t tier_capacity_bytes[kNumTiers];
  uint64_t tier_limit_bytes[kNumTiers];
  int32_t tier_nodes[2][kStatsMaxNodes];  // kDram, kCxl; -1 ends a list
  // Live counters.
  std::atomic<uint64_t> allocated_bytes[kNumTiers];  // the runtime's per-tier accounting
  std::atomic<uint64_t> moves[kNumTiers][kNumTiers];  // pages, [from][to]
  ProcessCounters counters;
  std::atomic<uint32_t> nservers;
  char server_address[kMaxStatsServers][128];
  PagerServerCounters servers[kMaxStatsServers];
  // Managed regions (address ranges), so a reader can find the process's managed memory in
  // /proc/PID/numa_maps and smaps. An entry is filled before nregions counts it.
  std::atomic<uint32_t> nregions;
  uint64_t region_base[kStatsMaxRegions];
  uint64_t region_bytes[kStatsMaxRegions];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free,
              "the stats block needs lock-free atomics (they live in shared memory)");

// Owns this process's block. Create() never fails the runtime: without /dev/shm the block is
// private memory (counters still count; nobody outside sees them) and `path()` is empty.
class StatsPublisher {
 public:
  StatsPublisher() = default;
  ~StatsPublisher();  // unmaps (Remove() first for the file)
  StatsPublisher(const StatsPublisher&) = delete;
  StatsPublisher& operator=(const StatsPublisher&) = delete;

  void Create();
  // Removes the file (a clean stop); the mapping stays valid until destruction.
  void Remove();
  // In the child after fork(): the mapping is the parent's file; the child keeps counting in a
  // private copy at the same address and publishes no block (see the .cc for why).
  void AfterForkInChild();

  StatsBlock* block() const { return block_; }
  const std::string& path() const { return path_; }

 private:
  void FillIdentity();
  StatsBlock* block_ = nullptr;
  bool shared_ = false;
  std::string path_;
};

// A histogram of the block in its public forms: the fixed 16 buckets of kHistogramBoundsNs, and
// (ReadDuration) any bounds, carried along.
inline LatencyHistogram LoadLatency(const AtomicHistogram& a) {
  static_assert(AtomicHistogram::kBuckets == kHistogramBuckets, "LatencyHistogram has the buckets of kHistogramBoundsNs");
  LatencyHistogram h;
  for (int b = 0; b < kHistogramBuckets; ++b) h.buckets[b] = a.buckets[b].load(std::memory_order_relaxed);
  h.count = a.count.load(std::memory_order_relaxed);
  h.sum_ns = a.sum_ns.load(std::memory_order_relaxed);
  return h;
}

// Allocates: not for the fault handler or the allocator.
template <const auto& kBounds>
DurationHistogram ReadDuration(const BoundedHistogram<kBounds>& a) {
  DurationHistogram h;
  h.le_ns.assign(std::begin(kBounds), std::end(kBounds));
  for (const auto& b : a.buckets) h.buckets.push_back(b.load(std::memory_order_relaxed));
  h.count = a.count.load(std::memory_order_relaxed);
  h.sum_ns = a.sum_ns.load(std::memory_order_relaxed);
  return h;
}

// The block's counters, tiers, moves and servers into `st` (the identity and the residence are
// the caller's): ReadProcessStats for another process's block, Runtime::Counters for its own.
void ReadBlockCounters(const StatsBlock& b, ProcessStats* st);

// "/dev/shm/tiermem.<uid>.<pid>"
std::string StatsBlockPath(uint32_t uid, int pid);
// Field 22 of /proc/<pid>/stat (start time in clock ticks); 0 when unreadable.
uint64_t ProcStartTicks(int pid);

}  // namespace tiermem

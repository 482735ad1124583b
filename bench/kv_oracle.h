// tiermem-bench kv's oracle setup: the table's pages placed by their true access probability,
// with no policy thread. The probability that a request reads a page follows from the model
// (bench/kv_model.h): the Zipf generator's exact item masses, the item-to-key and key-to-slot
// hashes, and where the fill puts each key (simulated here: linear probing in fill order). The
// pages most likely to be read go to DRAM, up to the DRAM budget of the tiered setup; the rest
// stay on the remote tier. A page on the remote tier that a request touches is faulted in like
// anywhere else, so an evictor returns such pages to the remote tier every interval: DRAM holds
// the planned pages and at most one interval's faults, and the oracle stays at the budget.
//
// Under independent requests from a fixed distribution, keeping the most probable pages is the
// best placement a page-granular policy can hold at that budget: its remote faults per request
// are the probability mass of the other pages (expected_faults_per_op), which the measured
// faults_per_op meets up to a page touched twice within one evictor interval.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bench/kv_model.h"
#include "tiermem/tiermem.hpp"

namespace tiermem::bench::kv {

// Which pages a lookup of each key reads once the table is filled (keys inserted in FillOrder):
// its home slot's page and the Extra(key) pages after it (cyclically), up to the slot holding
// the key.
class LookupPages {
 public:
  LookupPages(uint64_t keys, uint64_t slots);  // simulates the fill; keys < slots
  uint64_t Extra(uint64_t key) const {
    const uint8_t e = extra_[key];
    return e < kLong ? e : long_.at(key);
  }

 private:
  static constexpr uint8_t kLong = 255;  // Extra() is in long_
  std::vector<uint8_t> extra_;           // by key
  std::unordered_map<uint64_t, uint64_t> long_;
};

// The probability that one request reads each page of the table (pages of kPageBytes).
std::vector<double> PageTouchProbability(const Zipf& zipf, uint64_t keys, uint64_t slots);

struct OraclePlan {
  std::vector<uint8_t> in_dram;        // by page of the table
  uint64_t dram_pages = 0;
  double expected_faults_per_op = 0;   // the touch probability of the pages left out of DRAM
};
// The `budget_pages` most probable pages (ties: the lower page) in DRAM.
OraclePlan PlanOracle(const std::vector<double>& touch, uint64_t budget_pages);

// Moves the plan's DRAM pages to DRAM, a Migrate per run of adjacent ones; the chunks hold the
// table's pages in order (chunk_bytes each, a multiple of kPageBytes).
Status PlaceOracle(Runtime& rt, const std::vector<char*>& chunks, size_t chunk_bytes, const OraclePlan& plan);

// A thread that, every interval_ms, finds the table's resident pages that the plan leaves out of
// DRAM (mincore) and migrates them back to the remote tier, a Migrate per run of such pages
// between two DRAM pages. `rt`, `chunks` and `plan` must outlive it.
class OracleEvictor {
 public:
  OracleEvictor(Runtime& rt, const std::vector<char*>& chunks, size_t chunk_bytes, const OraclePlan& plan,
                uint64_t interval_ms);
  ~OracleEvictor() { Stop(); }
  OracleEvictor(const OracleEvictor&) = delete;
  OracleEvictor& operator=(const OracleEvictor&) = delete;

  void Stop();
  uint64_t pages_evicted() const { return evicted_.load(std::memory_order_relaxed); }
  uint64_t cpu_ns() const { return cpu_ns_.load(std::memory_order_relaxed); }  // its thread's, as of its last sweep
  std::string error() const;  // the first Migrate that failed ("" when none did)

 private:
  void Run();
  void Sweep(std::vector<unsigned char>& resident);

  Runtime& rt_;
  const std::vector<char*>& chunks_;
  const size_t chunk_bytes_;
  const OraclePlan& plan_;
  const uint64_t interval_ms_;
  std::atomic<uint64_t> evicted_{0};
  std::atomic<uint64_t> cpu_ns_{0};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::string error_;
  std::thread thread_;
};

}  // namespace tiermem::bench::kv

// The counters each subsystem keeps, as plain structs of atomics, so that their storage can be
// the process's shared stats block (runtime/core/stats_block.h) and a reader in another process
// sees them live. Every update is a relaxed fetch_add: no lock, no fence, safe from any thread
// (and from the fault handler). A subsystem started without a block points at its own copy.
#pragma once

#include <atomic>
#include <cstdint>

#include "tiermem/stats.hpp"

namespace tiermem {

struct AtomicHistogram {
  std::atomic<uint64_t> buckets[kHistogramBuckets];
  std::atomic<uint64_t> count;
  std::atomic<uint64_t> sum_ns;

  void Record(uint64_t ns) {
    int b = 0;
    while (b < kHistogramBuckets - 1 && ns > kHistogramBoundsNs[b]) ++b;
    buckets[b].fetch_add(1, std::memory_order_relaxed);
    count.fetch_add(1, std::memory_order_relaxed);
    sum_ns.fetch_add(ns, std::memory_order_relaxed);
  }
  LatencyHistogram Load() const {
    LatencyHistogram h;
    for (int b = 0; b < kHistogramBuckets; ++b) h.buckets[b] = buckets[b].load(std::memory_order_relaxed);
    h.count = count.load(std::memory_order_relaxed);
    h.sum_ns = sum_ns.load(std::memory_order_relaxed);
    return h;
  }
};

// The remote tier's pager (runtime/paging), all servers together.
struct PagerCounters {
  std::atomic<uint64_t> faults;             // remote pages fetched by the fault handler
  std::atomic<uint64_t> zero_fills;         // faults served with a zero page
  std::atomic<uint64_t> wp_faults;          // first writes to clean pages
  std::atomic<uint64_t> evicted;            // pages dropped to the remote tier
  std::atomic<uint64_t> written;            // pages written to memory servers
  std::atomic<uint64_t> skipped_clean;      // evictions with no write: the server copy was current
  std::atomic<uint64_t> skipped_untouched;  // evictions of never-touched pages
  std::atomic<uint64_t> fetched;            // pages brought back other than by faults
  AtomicHistogram fault_latency;            // report to install, per fault
  AtomicHistogram evict_latency;            // per eviction window
};

// The servers of TIERMEM_REMOTE with counters in the stats block (more are counted in totals).
inline constexpr size_t kMaxStatsServers = 16;

// One memory server of the list.
struct PagerServerCounters {
  std::atomic<uint64_t> pages;    // pages whose copy is there now
  std::atomic<uint64_t> slots;    // slots held there
  std::atomic<uint64_t> written;
  std::atomic<uint64_t> faults;
  std::atomic<uint64_t> fetched;
  std::atomic<uint64_t> capacity_pages;  // what it said it has (hello)
  std::atomic<uint32_t> up;              // connected
};

// The tiered heap (allocator/), all heaps of a runtime together.
struct HeapCounters {
  std::atomic<uint64_t> segment_bytes;
  std::atomic<uint64_t> span_bytes;
  std::atomic<uint64_t> large_bytes;
  std::atomic<uint64_t> large_count;
};

// The policy thread (runtime/tiering), written by that thread once a round.
struct PolicyCounters {
  std::atomic<uint64_t> rounds;
  std::atomic<uint64_t> round_ns;
  std::atomic<uint64_t> samples;
  char mode[16];  // written before the thread starts
};

}  // namespace tiermem

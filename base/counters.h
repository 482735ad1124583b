// The counters each subsystem keeps, as plain structs of atomics, so that their storage can be
// the process's shared stats block (runtime/core/stats_block.h) and a reader in another process
// sees them live. Every update is a relaxed fetch_add (a total that only one thread writes may be
// a relaxed store): no lock, no fence, safe from any thread (and from the fault handler). A
// subsystem started without a block points at its own copy.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <iterator>

#include "tiermem/stats.hpp"

namespace tiermem {

// A histogram over fixed bounds (kBounds: ascending nanoseconds): bucket i counts events of at
// most kBounds[i] ns, the last bucket the rest.
template <const auto& kBounds>
struct BoundedHistogram {
  static constexpr int kBuckets = static_cast<int>(std::size(kBounds)) + 1;
  std::atomic<uint64_t> buckets[kBuckets];
  std::atomic<uint64_t> count;
  std::atomic<uint64_t> sum_ns;

  void Record(uint64_t ns) {
    int b = 0;
    while (b < kBuckets - 1 && ns > kBounds[b]) ++b;
    buckets[b].fetch_add(1, std::memory_order_relaxed);
    count.fetch_add(1, std::memory_order_relaxed);
    sum_ns.fetch_add(ns, std::memory_order_relaxed);
  }
  // The fixed-size form of stats.hpp (the 16 buckets of kHistogramBoundsNs only).
  LatencyHistogram Load() const {
    static_assert(kBuckets == kHistogramBuckets, "LatencyHistogram has the buckets of kHistogramBoundsNs");
    LatencyHistogram h;
    for (int b = 0; b < kBuckets; ++b) h.buckets[b] = buckets[b].load(std::memory_order_relaxed);
    h.count = count.load(std::memory_order_relaxed);
    h.sum_ns = sum_ns.load(std::memory_order_relaxed);
    return h;
  }
  // The public form, bounds included (allocates: not for the fault handler or the allocator).
  DurationHistogram Read() const {
    DurationHistogram h;
    h.le_ns.assign(std::begin(kBounds), std::end(kBounds));
    for (int b = 0; b < kBuckets; ++b) h.buckets.push_back(buckets[b].load(std::memory_order_relaxed));
    h.count = count.load(std::memory_order_relaxed);
    h.sum_ns = sum_ns.load(std::memory_order_relaxed);
    return h;
  }
};
using AtomicHistogram = BoundedHistogram<kHistogramBoundsNs>;

// Bounds of the policy round histogram: 10 us to 10 s, ten per decade (the E10-like series
// 1, 1.25, 1.6, 2, 2.5, 3.15, 4, 5, 6.3, 8), so a quantile read from it is within about 12%.
// Rounds run from microseconds (a small heap) to over 100 ms (a 4 GiB kv table here), past
// kHistogramBoundsNs's last bound.
inline constexpr std::array<uint64_t, 61> kPolicyRoundBoundsNs = [] {
  constexpr uint64_t kSeries[10] = {100, 125, 160, 200, 250, 315, 400, 500, 630, 800};
  std::array<uint64_t, 61> b{};
  uint64_t scale = 100;  // 100 x 100 ns = 10 us
  for (int decade = 0; decade < 6; ++decade, scale *= 10) {
    for (int i = 0; i < 10; ++i) b[decade * 10 + i] = kSeries[i] * scale;
  }
  b[60] = 10'000'000'000;
  return b;
}();

// The remote tier's pager (runtime/paging), all servers together.
struct PagerCounters {
  std::atomic<uint64_t> faults;             // remote pages fetched by the fault handler
  std::atomic<uint64_t> zero_fills;         // faults served with a zero page
  std::atomic<uint64_t> wp_faults;          // first writes to clean pages
  std::atomic<uint64_t> evict_called_off;   // pages written while their eviction was in flight: kept local
  std::atomic<uint64_t> evict_unreadable;   // pages a transport could not read to send: kept local
  std::atomic<uint64_t> evicted;            // pages dropped to the remote tier
  std::atomic<uint64_t> written;            // pages written to memory servers
  std::atomic<uint64_t> skipped_clean;      // evictions with no write: the server copy was current
  std::atomic<uint64_t> skipped_untouched;  // evictions of never-touched pages
  std::atomic<uint64_t> fetched;            // pages brought back other than by faults
  std::atomic<uint64_t> prefetched;         // pages fetched ahead of faults (TIERMEM_PREFETCH)
  // Replicas (TIERMEM_REPLICAS, docs/protocol.md).
  std::atomic<uint64_t> servers_down;       // servers down now (marked down, not back again)
  std::atomic<uint64_t> failovers;          // reads that turned to another replica
  std::atomic<uint64_t> repaired;           // page copies made to restore replicas
  std::atomic<uint64_t> degraded;           // pages in use short of a replica (the repair thread's last count)
  AtomicHistogram fault_latency;            // report to install, per fault
  AtomicHistogram fault_read_latency;       // read posted to its reply in, per fault (part of the above)
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
  std::atomic<uint32_t> up;              // connected and not marked down
  std::atomic<uint64_t> debt;            // pages whose copy here was lost and is not yet restored elsewhere
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
  // DRAM budget relief (runtime/tiering/migrator_relief.cc): pages evicted because DRAM went
  // over its limit, and the fault handler's waits for that room.
  std::atomic<uint64_t> relief_pages;
  std::atomic<uint64_t> throttle_waits;
  std::atomic<uint64_t> throttle_ns;
  // DRAM the runtime holds for itself and counts against TIERMEM_DRAM_LIMIT (the preload
  // library's runtime: glibc's heap of its own threads), as of the latest refresh (a store).
  std::atomic<uint64_t> own_bytes;
  std::atomic<uint64_t> cpu_ns;  // the thread's CPU time after its latest round (a store, not an add)
  BoundedHistogram<kPolicyRoundBoundsNs> round_time;  // wall time per round, as Loop times it
  std::atomic<uint64_t> interval_ms;  // the round interval; written before the thread starts
  char mode[16];  // written before the thread starts
};

}  // namespace tiermem

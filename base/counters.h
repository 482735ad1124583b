// The runtime's counters, as plain structs of atomics, so that their storage can be the
// process's shared stats block (runtime/stats/stats_block.h) and a reader in another process sees
// them live. The scalar counters are generated from the one list, tiermem/counter_list.hpp; the
// histograms and the per-server counters are kept here. Every update is a relaxed fetch_add (a
// level that only one thread writes may be a relaxed store): no lock, no fence, safe from any
// thread (and from the fault handler). A subsystem started without a block points at its own copy.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <iterator>

#include "tiermem/counter_list.hpp"

namespace tiermem {

// A histogram over fixed bounds (kBounds: ascending nanoseconds): bucket i counts events of at
// most kBounds[i] ns, the last bucket the rest.
template <const auto& kBounds>
struct BoundedHistogram {
  static constexpr const auto& kBoundsNs = kBounds;
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

// Every counter of the process: the listed ones, then the histograms and the sampling mode.
struct ProcessCounters {
#define TIERMEM_ATOMIC_FIELD_(sub, name, key, kind, unit, metric, help) std::atomic<uint64_t> name;
  TIERMEM_COUNTERS(TIERMEM_ATOMIC_FIELD_)
#undef TIERMEM_ATOMIC_FIELD_
  AtomicHistogram fault_latency;       // remote fault: report to install
  AtomicHistogram fault_read_latency;  // of which the read: posted to its reply in
  AtomicHistogram evict_latency;       // per eviction window
  BoundedHistogram<kPolicyRoundBoundsNs> policy_round_time;  // wall time per policy round
  char sampling_mode[16];  // written before the policy thread starts
  char track_mode[16];     // the write scan's mechanism, or "off"; the same
};

// The listed counters as plain numbers, read at one moment (each counter whole).
struct CounterValues {
#define TIERMEM_VALUE_FIELD_(sub, name, key, kind, unit, metric, help) uint64_t name = 0;
  TIERMEM_COUNTERS(TIERMEM_VALUE_FIELD_)
#undef TIERMEM_VALUE_FIELD_
};
inline CounterValues LoadCounters(const ProcessCounters& c) {
  CounterValues v;
#define TIERMEM_LOAD_FIELD_(sub, name, key, kind, unit, metric, help) \
  v.name = c.name.load(std::memory_order_relaxed);
  TIERMEM_COUNTERS(TIERMEM_LOAD_FIELD_)
#undef TIERMEM_LOAD_FIELD_
  return v;
}

}  // namespace tiermem

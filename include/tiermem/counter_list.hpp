// Every scalar counter of the runtime, defined once. The list is an X-macro: each consumer
// defines an X(subsystem, name, key, kind, unit, metric, help) and expands TIERMEM_COUNTERS(X).
// From it follow the shared stats block's atomics (runtime/stats/stats_block.h), the fields of
// RuntimeCounters (tiermem.hpp) and ProcessStats (stats.hpp), both JSON forms, the Prometheus
// text, the exit report and `tiermemctl stat`.
//
// - subsystem: pager (remote paging), policy (the policy thread), heap (the tiered heap).
// - name: the field of the stats block and of RuntimeCounters, and its key in
//   "tiermem.counters.json".
// - key: the field of ProcessStats and its key in the stats JSON (TIERMEM_STATS, `tiermemctl
//   stat --json`); the same as name unless an older key is kept.
// - kind: counter (only grows) or gauge (a level now).
// - unit: what one step is ("ns" counters are shown in seconds by Prometheus).
// - metric: the Prometheus metric name.
//
// One line per counter: adding one is its line here plus the line that counts it
// (`counters->name.fetch_add`).
// The block's layout follows from the list by itself (kCounterListHash), so a reader of another
// build refuses the block instead of misreading it. This header has no dependencies: the
// runtime's floor (base/) and the public API both read it.
#pragma once

#include <array>
#include <cstdint>

// clang-format off
#define TIERMEM_COUNTERS(X) \
  X(pager, remote_faults, remote_faults, counter, "pages", "tiermem_remote_faults_total", "Pages fetched from memory servers on a fault.") \
  X(pager, zero_fills, zero_fills, counter, "pages", "tiermem_zero_fills_total", "First touches of remote-tier pages, served with zeros.") \
  X(pager, write_protect_faults, write_protect_faults, counter, "faults", "tiermem_write_protect_faults_total", "First writes to clean pages.") \
  X(pager, pages_evicted, pages_evicted, counter, "pages", "tiermem_pages_evicted_total", "Pages evicted to memory servers.") \
  X(pager, evictions_called_off, evictions_called_off, counter, "pages", "tiermem_evictions_called_off_total", "Pages written while their eviction was in flight, kept local.") \
  X(pager, evictions_unreadable, evictions_unreadable, counter, "pages", "tiermem_evictions_unreadable_total", "Pages a transport could not read to send, kept local.") \
  X(pager, eviction_windows_failed, eviction_windows_failed, counter, "windows", "tiermem_eviction_windows_failed_total", "Eviction windows a memory server failed to write: their pages stayed local.") \
  X(pager, pages_written, pages_written, counter, "pages", "tiermem_pages_written_total", "Pages written to memory servers.") \
  X(pager, evictions_clean, evictions_clean, counter, "pages", "tiermem_evictions_clean_total", "Evictions with no write: the server's copy was current.") \
  X(pager, evictions_untouched, evictions_untouched, counter, "pages", "tiermem_evictions_untouched_total", "Evictions of never-touched pages: nothing to write.") \
  X(pager, pages_fetched, pages_fetched, counter, "pages", "tiermem_pages_fetched_total", "Pages brought back other than by faults (fork, FetchBack).") \
  X(pager, pages_prefetched, pages_prefetched, counter, "pages", "tiermem_pages_prefetched_total", "Pages fetched ahead of remote faults.") \
  X(pager, remote_servers_down, remote_servers_down, gauge, "servers", "tiermem_remote_servers_down", "Memory servers down now (TIERMEM_REPLICAS).") \
  X(pager, remote_failovers, remote_failovers, counter, "reads", "tiermem_remote_failovers_total", "Reads that turned to another replica.") \
  X(pager, remote_repaired_pages, remote_repaired_pages, counter, "pages", "tiermem_remote_repaired_pages_total", "Page copies made to restore replicas.") \
  X(pager, remote_degraded_pages, remote_degraded_pages, gauge, "pages", "tiermem_remote_degraded_pages", "Pages in use short of a replica (the repair thread's count, at least once a second).") \
  X(pager, placement_allocs, placement_allocs, counter, "requests", "tiermem_placement_allocs_total", "Slot allocations placement asked of memory servers, granted or not.") \
  X(pager, server_file_changes, server_file_changes, counter, "reads", "tiermem_server_file_changes_total", "Times TIERMEM_REMOTE_FILE was found changed and read again.") \
  X(pager, fault_handler_waits, fault_handler_waits, counter, "waits", "tiermem_fault_handler_waits_total", "Times the fault handler went to sleep in poll, for a fault or a read's reply, after any TIERMEM_FAULT_SPIN_US spin: each is a wake-up to come.") \
  X(pager, fault_sampled_spins, fault_sampled_spins, counter, "spins", "tiermem_fault_sampled_spins_total", "Polls of the fault handler before it sleeps after a batch of soft-sampled faults only (docs/tiering.md, Soft eviction).") \
  X(pager, fault_sampled_spins_met, fault_sampled_spins_met, counter, "spins", "tiermem_fault_sampled_spins_met_total", "Of fault_sampled_spins, those that met a fault before they ended; the others ended in a sleep and make the handler skip the next polls.") \
  X(pager, repair_passes, repair_passes, counter, "passes", "tiermem_repair_passes_total", "Passes the repair thread made over degraded ranges (copies made or not).") \
  X(policy, policy_rounds, policy_rounds, counter, "rounds", "tiermem_policy_rounds_total", "Rounds of the tiering policy.") \
  X(policy, policy_round_ns, policy_round_ns, counter, "ns", "tiermem_policy_round_seconds_total", "Time spent in policy rounds (scan, plan, migrate, arm).") \
  X(policy, samples, sampling_faults, counter, "accesses", "tiermem_sampling_faults_total", "Accesses caught by the access sampler.") \
  X(policy, fault_samples, fault_samples, counter, "pages", "tiermem_fault_samples_total", "Remote pages the policy saw faulted back in.") \
  X(policy, pages_armed, pages_armed, gauge, "pages", "tiermem_pages_armed", "Pages the access sampler watches, as of the latest round.") \
  X(policy, demotions, demotions, counter, "pages", "tiermem_demotions_total", "Pages moved down a tier by the policy thread (budget relief included).") \
  X(policy, promotions, promotions, counter, "pages", "tiermem_promotions_total", "Pages moved up a tier by the policy thread.") \
  X(policy, moves_failed, moves_failed, counter, "pages", "tiermem_moves_failed_total", "Planned moves the runtime refused.") \
  X(policy, moves_deferred, moves_deferred, counter, "pages", "tiermem_moves_deferred_total", "Planned moves held back by the rate limit.") \
  X(policy, migrate_calls, migrate_calls, counter, "calls", "tiermem_migrate_calls_total", "Placement calls the policy made (one per run of adjacent pages).") \
  X(policy, migrate_ns, migrate_ns, counter, "ns", "tiermem_migrate_seconds_total", "Time spent in the policy's placement calls.") \
  X(policy, policy_window_rounds, policy_window_rounds, counter, "rounds", "tiermem_policy_window_rounds_total", "Policy rounds that read a window of the page records, not all.") \
  X(policy, policy_records_read, policy_records_read, counter, "records", "tiermem_policy_records_read_total", "Page records policy rounds read; a 2 MiB chunk of free or untouched pages passed over counts one.") \
  X(policy, policy_window_listed_max, policy_window_listed_max, gauge, "pages", "tiermem_policy_window_listed_max", "The most pages one windowed round listed.") \
  X(policy, track_pages_scanned, track_pages_scanned, counter, "pages", "tiermem_track_pages_scanned_total", "Pages the write scan read (TIERMEM_TRACK=scan).") \
  X(policy, track_scan_ns, track_scan_ns, counter, "ns", "tiermem_track_scan_seconds_total", "Time spent in the write scan.") \
  X(policy, track_written_pages, track_written_pages, counter, "pages", "tiermem_track_written_pages_total", "Pages the write scan found written since their last scan.") \
  X(policy, track_sample_skips, track_sample_skips, counter, "pages", "tiermem_track_sample_skips_total", "Pages left out of the access sample because the write scan found them written.") \
  X(policy, policy_paced_rounds, policy_paced_rounds, counter, "rounds", "tiermem_policy_paced_rounds_total", "Rounds started later than their interval by TIERMEM_POLICY_CPU.") \
  X(policy, policy_paced_ns, policy_paced_ns, counter, "ns", "tiermem_policy_paced_seconds_total", "Time paced rounds waited past their interval.") \
  X(policy, policy_idle_rounds, policy_idle_rounds, counter, "rounds", "tiermem_policy_idle_rounds_total", "Rounds with nothing to place or learn: no page record read (DRAM under the sampling share of its budget, no lower tier in use).") \
  X(policy, budget_relief_pages, budget_relief_pages, counter, "pages", "tiermem_budget_relief_pages_total", "Pages moved out of DRAM because DRAM was over its limit.") \
  X(policy, fault_throttle_waits, fault_throttle_waits, counter, "waits", "tiermem_fault_throttle_waits_total", "Times the fault handler waited for DRAM to have room.") \
  X(policy, fault_throttle_ns, fault_throttle_ns, counter, "ns", "tiermem_fault_throttle_seconds_total", "Time the fault handler waited for DRAM to have room.") \
  X(policy, runtime_own_bytes, runtime_own_bytes, gauge, "bytes", "tiermem_runtime_own_bytes", "DRAM the runtime holds for itself, counted in the DRAM limit.") \
  X(policy, policy_cpu_ns, policy_cpu_ns, counter, "ns", "tiermem_policy_cpu_seconds_total", "CPU time of the policy thread, up to its latest round.") \
  X(policy, policy_interval_ms, policy_interval_ms, gauge, "ms", "tiermem_policy_interval_ms", "The policy thread's round interval (0: no policy thread).") \
  X(heap, heap_segment_bytes, heap_segment_bytes, gauge, "bytes", "tiermem_heap_segment_bytes", "Heap segments for small blocks.") \
  X(heap, heap_span_bytes, heap_span_bytes, gauge, "bytes", "tiermem_heap_span_bytes", "Of the segments, spans in use by size classes.") \
  X(heap, heap_large_bytes, heap_large_bytes, gauge, "bytes", "tiermem_heap_large_bytes", "Page runs of large blocks.") \
  X(heap, heap_large_count, heap_large_count, gauge, "blocks", "tiermem_heap_large_blocks", "Large blocks live.") \
  X(heap, heap_free_dropped_pages, heap_free_dropped_pages, counter, "pages", "tiermem_heap_free_dropped_pages_total", "Pages the heap freed under a DRAM limit, dropped: counted nowhere, never evicted.") \
  X(policy, dram_free_held_bytes, dram_free_held_bytes, gauge, "bytes", "tiermem_dram_free_held_bytes", "Of DRAM's count, resident pages the heap keeps free (as of the latest resident count).") \
  X(policy, dram_untouched_bytes, dram_untouched_bytes, gauge, "bytes", "tiermem_dram_untouched_bytes", "Allocated DRAM pages not resident, out of DRAM's count (as of the latest resident count).") \
  X(policy, dram_unseen_bytes, dram_unseen_bytes, gauge, "bytes", "tiermem_dram_unseen_bytes", "Of DRAM's count, pages counted when allocated and likely never touched, left out of the limit until the next resident count (as of the latest policy round).") \
  X(policy, resident_counts, resident_counts, counter, "counts", "tiermem_resident_counts_total", "Passes that counted DRAM's resident pages (mincore).") \
  X(policy, resident_count_ns, resident_count_ns, counter, "ns", "tiermem_resident_count_seconds_total", "Time spent counting DRAM's resident pages.")
// clang-format on

namespace tiermem {

// Latency histogram bounds (the stats block's pager histograms): bucket i counts events of at
// most kHistogramBoundsNs[i] nanoseconds; the last bucket counts the rest.
inline constexpr int kHistogramBuckets = 16;
inline constexpr std::array<uint64_t, kHistogramBuckets - 1> kHistogramBoundsNs = {
    1'000,     2'000,     5'000,      10'000,     20'000,     50'000,     100'000,   200'000,
    500'000,   1'000'000, 2'000'000,  5'000'000,  10'000'000, 50'000'000, 100'000'000};

// One listed counter, for code that walks them all (Prometheus, `tiermemctl stat`).
struct CounterInfo {
  const char* subsystem;
  const char* name;
  const char* key;
  bool gauge;  // false: a counter
  const char* unit;
  const char* metric;
  const char* help;
};

inline constexpr CounterInfo kCounterInfo[] = {
#define TIERMEM_COUNTER_IS_GAUGE_counter false
#define TIERMEM_COUNTER_IS_GAUGE_gauge true
#define TIERMEM_COUNTER_INFO_(sub, name, key, kind, unit, metric, help) \
  {#sub, #name, #key, TIERMEM_COUNTER_IS_GAUGE_##kind, unit, metric, help},
    TIERMEM_COUNTERS(TIERMEM_COUNTER_INFO_)
#undef TIERMEM_COUNTER_INFO_
};
inline constexpr int kNumCounters = static_cast<int>(sizeof(kCounterInfo) / sizeof(kCounterInfo[0]));

// FNV-1a over every name in list order: the block records it, and a reader whose list differs
// (a counter added, removed or moved) refuses the block, as it does a block of another layout
// version.
inline constexpr uint64_t kCounterListHash = [] {
  uint64_t h = 1469598103934665603ull;
  for (const CounterInfo& c : kCounterInfo) {
    for (const char* p = c.name; *p != '\0'; ++p) h = (h ^ static_cast<unsigned char>(*p)) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;  // ends a name: "ab","c" differs from "a","bc"
  }
  return h;
}();

}  // namespace tiermem

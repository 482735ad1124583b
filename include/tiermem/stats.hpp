// Live statistics of the processes running tiermem, read from another process.
//
// Each process that starts a Runtime publishes its counters in a small shared-memory block,
// /dev/shm/tiermem.<uid>.<pid> (mode 0600: only its owner, and root, can read it). The runtime
// updates the block's counters in place with relaxed atomic adds, so publishing takes no lock and
// no thread; a reader sees each counter whole, and counters that move together may be a few
// events apart. The block is removed when the runtime stops (a clean exit); a block left behind
// by a killed process is reported as stale (its pid is gone, or belongs to a newer process).
//
//   for (const tiermem::ProcessEntry& p : tiermem::ListProcesses()) { ... }
//   auto st = tiermem::ReadProcessStats(pid);   // NotFound: not a tiermem process
//
// `tiermemctl ps`, `tiermemctl stat PID`, `tiermemctl top` and `tiermemctl serve-metrics` are
// built on these two calls (docs/observability.md).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tiermem/counter_list.hpp"
#include "tiermem/status.hpp"
#include "tiermem/tiermem.hpp"

namespace tiermem {

// The layout version of the block this build writes and reads. A block of another version is
// refused with NotSupported naming both versions; so is one whose counter list
// (kCounterListHash) differs from this build's.
inline constexpr uint32_t kStatsLayoutVersion = 10;

// Latency histogram over kHistogramBoundsNs (tiermem/counter_list.hpp).
struct LatencyHistogram {
  std::array<uint64_t, kHistogramBuckets> buckets{};
  uint64_t count = 0;
  uint64_t sum_ns = 0;
};

struct TierSnapshot {
  Tier tier = Tier::kDram;
  bool available = false;
  uint64_t capacity_bytes = 0;   // the tier's nodes (or what the servers offer, for kRemote)
  uint64_t limit_bytes = 0;      // TIERMEM_*_LIMIT; 0 = none
  uint64_t allocated_bytes = 0;  // live allocations whose pages belong to the tier now
  uint64_t pages = 0;            // allocated_bytes in pages
};

// Managed memory resident on one NUMA node (read by the reader from /proc/PID/numa_maps over the
// runtime's regions, so the process pays nothing for it).
struct NodeSnapshot {
  int node = -1;
  Tier tier = Tier::kDram;       // the tier the node serves in this process
  uint64_t resident_bytes = 0;
};

struct ServerSnapshot {
  std::string address;          // "tcp://10.0.0.2:7471"
  bool up = false;              // connected and answering
  uint64_t bytes_held = 0;      // this process's pages stored there
  uint64_t slots = 0;           // slots held there (pages), used or free
  uint64_t pages_written = 0;
  uint64_t remote_faults = 0;
  uint64_t replication_debt_pages = 0;  // pages whose copy here was lost (server down) and is not yet restored elsewhere
};

struct ProcessStats {
  int pid = 0;
  std::string command;            // the process's name (its /proc comm)
  uint32_t layout_version = 0;
  bool stale = false;             // the process is gone: the figures are its last ones
  bool pid_reused = false;        // stale, and its pid names a live process that did not write it
  uint64_t started_unix_ns = 0;   // when the runtime started (CLOCK_REALTIME)
  uint64_t page_size = 4096;

  std::vector<TierSnapshot> tiers;  // kDram, kCxl, kRemote
  std::vector<NodeSnapshot> nodes;  // every node of the DRAM and CXL tiers
  uint64_t resident_bytes = 0;      // managed memory resident, all nodes (from /proc/PID/smaps)
  uint64_t dram_resident_bytes = 0; // of which on the DRAM tier's nodes
  uint64_t dram_limit_bytes = 0;

  // Page moves by the runtime (policy and API), pages: moves[from][to] over kDram, kCxl, kRemote.
  std::array<std::array<uint64_t, kNumTiers>, kNumTiers> moves{};
  // Every listed counter, by its key (tiermem/counter_list.hpp has each one's meaning and unit).
#define TIERMEM_PROCESS_COUNTER_(sub, name, key, kind, unit, metric, help) uint64_t key = 0;
  TIERMEM_COUNTERS(TIERMEM_PROCESS_COUNTER_)
#undef TIERMEM_PROCESS_COUNTER_
  LatencyHistogram fault_latency;   // remote fault: userfaultfd report to the page installed
  LatencyHistogram fault_read_latency;  // of which the read: posted to its reply in
  LatencyHistogram evict_latency;   // one eviction window: write posted to acknowledged and dropped
  DurationHistogram policy_round_time;  // wall time per round (RuntimeCounters has the same)
  std::string sampling_mode;        // protect, faults or off
  std::string track_mode;           // the write scan: pagemap_scan, soft_dirty or off

  std::vector<ServerSnapshot> servers;
};

// The listed counters of `st` in the order of kCounterInfo (tiermem/counter_list.hpp), for code
// that walks them all.
inline std::array<uint64_t, kNumCounters> ListedCounters(const ProcessStats& st) {
  return {
#define TIERMEM_LISTED_VALUE_(sub, name, key, kind, unit, metric, help) st.key,
      TIERMEM_COUNTERS(TIERMEM_LISTED_VALUE_)
#undef TIERMEM_LISTED_VALUE_
  };
}

struct ProcessEntry {
  int pid = 0;
  std::string command;
  bool stale = false;
  std::string path;  // the block's file
};

// The blocks of this user's processes (every user's, for root), by pid. Never fails: an
// unreadable /dev/shm gives an empty list.
std::vector<ProcessEntry> ListProcesses();
// One process's block. NotFound: no block for `pid` (not a tiermem process, or not started);
// PermissionDenied: another user's; NotSupported: a block of another layout version or
// not a tiermem block at all. A stale block is returned with `stale` set.
StatusOr<ProcessStats> ReadProcessStats(int pid);

// `st` as one line of JSON (no newline), the keys named as the fields above ("moves" is the
// [from][to] matrix over dram, cxl, remote; histograms carry "le_ns" bounds and "buckets",
// "policy_round_time" its own bounds).
// With t_ns != 0 it starts with "t_ns" (CLOCK_REALTIME): a line of a TIERMEM_STATS timeline.
std::string ProcessStatsJson(const ProcessStats& st, uint64_t t_ns = 0);

}  // namespace tiermem

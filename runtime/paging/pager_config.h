// The pager's plain types: its configuration (PagerConfig, from the option table), its
// servers as read back (PagerServerStats) and the limits they go by (its counters are the
// listed ones, base/counters.h). Split from
// pager.h, which keeps the Pager itself; nothing here depends on a running pager.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/clock.h"
#include "base/counters.h"
#include "base/option_checks.h"
#include "runtime/pages/region.h"
#include "runtime/paging/erasure.h"
#include "runtime/paging/paging_events.h"

namespace tiermem {

// TIERMEM_FAULT_CONNECTIONS: its bound and default (docs/protocol.md, "Paging").
inline constexpr uint32_t kMaxFaultConnections = kOptMaxFaultConnections;
inline constexpr uint32_t kDefaultFaultConnections = 1;

struct PagerConfig {
  std::string servers;  // TIERMEM_REMOTE: "tcp://127.0.0.1:7471,tcp://10.0.0.2:7471" (all used)
  // TIERMEM_REMOTE_FILE: a file of servers (server_file.h), read at start (its servers join
  // `servers`) and again once a second by the repair thread: a server added there is listed
  // and takes new pages once it answers; one taken out takes no new pages. Empty: none.
  std::string servers_file;
  std::string token;
  uint32_t timeout_ms = 5000;
  uint64_t slot_chunk = 16384;  // slots asked of memd at a time (64 MiB)
  // What the pager's waits, pauses and back-offs go by (the repair thread's second, a server's
  // rejoin back-off, the repair's pacing, a full server's pause, a fork's claim wait); never
  // null, and outlives the pager. Tests give a ManualClock.
  Clock* clock = &SystemClock();
  // What the pager reports to the layer above (paging_events.h: the region lookup, the tier
  // accounting, the fault handler's budget check, a full tier, a server listed). Required;
  // outlives the pager.
  PagingEvents* events = nullptr;
  // TIERMEM_PREFETCH: the most pages a remote fault fetches ahead along its thread's stream
  // (prefetch.h); 0: none.
  uint32_t prefetch_window = 0;
  // TIERMEM_FAULT_SPIN_US: how long the fault handler polls for the next fault after a batch
  // with remote reads before it sleeps; -1: 200 us when every server is RDMA, else 0.
  int64_t fault_spin_us = -1;
  // TIERMEM_FAULT_CONNECTIONS: the fault handler's connections to each TCP server (1 to
  // kMaxFaultConnections; RDMA servers get one, their reads take no memd thread). memd answers
  // a connection in order, one thread each: a fault's read goes to the connection with the
  // fewest reads in flight, so it waits behind no other fault's read while one is idle.
  uint32_t fault_connections = kDefaultFaultConnections;
  // TIERMEM_REPLICAS: copies of each evicted page, on distinct servers (1..kMaxReplicas, and at
  // most the number of servers listed: Start refuses more, naming both numbers).
  uint32_t replicas = 1;
  // TIERMEM_REMOTE_CODE: "k+m" (erasure.h) instead of replicas: each evicted page is k data and
  // m parity pieces on k+m distinct servers, read back from the first k that answer. Empty: off.
  // Start refuses a malformed one, one with TIERMEM_REPLICAS > 1, and one with fewer servers
  // listed than k+m, before anything connects.
  std::string code;
  // TIERMEM_REPAIR_RATE: pages per second the repair thread copies to restore lost replicas.
  uint64_t repair_rate = 50000;
  // TIERMEM_FORK: "share" (true; the runtime's default): a child forked while pages are remote is
  // served by this pager through UFFD_EVENT_FORK, and by itself once this process is gone, and the
  // pages stay remote (pager_fork.cc, pager_fork_child.cc); where the kernel refuses fork events,
  // and with "fetch" (false), every remote page comes back before fork().
  bool fork_share = false;
  // TIERMEM_TRACK=scan with this remote tier: the userfaultfd is opened with
  // UFFD_FEATURE_WP_ASYNC and UFFD_FEATURE_MOVE, so the write scan (runtime/tiering/scan_tracker.h)
  // reads the written bit of the pager's own ranges, and eviction checks its bytes by taking
  // each page out (evict_check.h) instead of waiting on write-protect faults. No soft sampler
  // and no fork sharing then (both need write faults reported). Where the kernel lacks either
  // feature the descriptor is opened as without it, and Pager::write_scan() says false.
  bool wp_async = false;
  // Where the counters live (the process's stats block); the pager's own when null.
  // `server_counters` has room for kMaxStatsServers entries (servers past them count in the
  // totals only).
  ProcessCounters* counters = nullptr;
  PagerServerCounters* server_counters = nullptr;
};

// The most servers the list may hold, those given at start and those added since together.
inline constexpr size_t kMaxServers = 64;
// No server (placement found none).
inline constexpr size_t kNoServer = ~size_t{0};

// TIERMEM_FAULT_SPIN_US, as the option table accepts it (auto or N up to kMaxFaultSpinUs): auto
// (and "") -1, else the microseconds.
inline constexpr uint64_t kMaxFaultSpinUs = kOptMaxFaultSpinUs;
inline constexpr uint64_t kAutoFaultSpinNs = 200'000;  // auto over RDMA
int64_t FaultSpinFromOption(const char* value);

// One memory server of the list, as the pager sees it.
struct PagerServerStats {
  std::string server;      // "tcp://127.0.0.1:7471"
  bool connected = false;  // reached at start (an unreachable one gets no pages)
  std::string error;       // why not, when it was not reached
  uint64_t pages = 0;      // pages whose copy (or, coded, one piece) is on this server now
  uint64_t slots = 0;      // slots this process holds there (allocated from memd)
  uint64_t written = 0;    // pages written to it
  uint64_t faults = 0;     // pages fetched from it by the fault handler
  uint64_t fetched = 0;    // pages brought back from it by FetchBack
  bool full = false;       // it refused the last allocation (placement skips it for a while)
  bool down = false;       // marked down after a failure: no new pages, no requests
  bool withdrawn = false;  // taken out of the servers file: no new pages (its pages are read)
  std::string down_reason; // why
  uint64_t rejoin_tries = 0;  // times the repair thread tried to connect to it again
};

// The most copies TIERMEM_REPLICAS may ask for.
inline constexpr uint32_t kMaxReplicas = kOptMaxReplicas;
// The most members of a group: replicas, or the pieces of an erasure code.
inline constexpr uint32_t kMaxMembers = kMaxCodePieces;
static_assert(kMaxMembers >= kMaxReplicas && kMaxMembers <= 16, "a read's cookie keeps the member in 4 bits");
// Slots per group of replicas at most (16 MiB of pages; PagerConfig::slot_chunk with one copy).
inline constexpr uint64_t kReplicaRangeSlots = 4096;

// The exit status of a process whose remote page could not be fetched, and of one started with
// TIERMEM_REMOTE_REQUIRED=1 that reached no server.
inline constexpr int kRemoteLostExitCode = 75;

// Ends the process with kRemoteLostExitCode at once (files registered with AddExitFile are
// removed first). The caller has printed the line that says why.
[[noreturn]] void ExitRemoteLost();

}  // namespace tiermem

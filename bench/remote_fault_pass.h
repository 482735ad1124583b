// tiermem-bench remote-fault's tiered pass (RunTiered): pages with known contents evicted through
// the API, touched once each in a pattern and timed, checked, with the fault floors measured
// beside them; with `kill`, a memd killed after the eviction and the repair timed.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/fault_floors.h"
#include "bench/memd_child.h"
#include "tiermem/status.hpp"

namespace tiermem::bench {

struct Tiered {
  double p50 = 0, p99 = 0, evict_rate = 0, access_gbps = 0;
  uint64_t faults = 0, prefetched = 0, servers_lost = 0, failovers = 0;
  size_t verified = 0;
  double rereplication_s = 0;  // kill to no page short of a replica (with `kill`)
  bool rebuilt = false;        // with `kill`: every page had its copies (pieces) back
  double server_pages_per_page = 0;  // server memory held per page evicted (slots / pages)
  // CPU time per page evicted, during the eviction: this process (every thread) and the
  // memds this bench started (0 with --server). On a machine where client and memds share
  // the cores, the eviction rate follows their sum.
  double evict_client_cpu_us = 0, evict_memd_cpu_us = 0;
  // Where a fault's time goes (docs/protocol.md): the touches' mean as the program sees it, the
  // handler's mean from the userfaultfd report to the page installed, and of that the read
  // (posted to its reply in); and a zero-page fault's p50 (the userfaultfd round trip with no
  // server: a first touch of memory placed on the remote tier).
  double touch_mean_us = 0, handler_mean_us = 0, read_mean_us = 0, zero_fault_p50_us = 0;
  // The floors beside it, measured right after the zero faults, with this pass's runtime still up.
  FaultFloors floor;
  double handler_waits_per_fault = 0;  // the handler's sleeps in poll per remote fault
};

// What a tiered pass (RunTiered) runs with.
struct PassArgs {
  std::string url, token, prefetch, pattern;
  size_t pages = 0, replicas = 1, threads = 1;
  std::string code;   // TIERMEM_REMOTE_CODE ("4+2"), or "" for replicas
  bool spare = true;  // with `kill`: a server is left to restore the copies on (else no wait)
  std::vector<pid_t> memd_pids;  // the memds started here (their CPU time is counted)
};

// One tiered pass: a runtime on `url` with `replicas`, pages evicted, touched in `pattern`'s
// order, checked. With `kill`, the memd holding the most of this run's copies is killed (SIGKILL)
// right after the eviction, and a watcher thread times the repair (at most 60 s) while the touches
// fault from the survivors.
Status RunTiered(const PassArgs& a, std::vector<std::unique_ptr<MemdChild>>* kill, Tiered* out);

}  // namespace tiermem::bench

// One memory server as the pager holds it: its connections, its health, the counters it shows.
// Which thread may touch each field, and under which lock, is said beside it; the pager
// (pager.h) owns every PagerServer and names it Pager::Server.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/remote/transport.h"
#include "base/counters.h"
#include "runtime/paging/fault_conns.h"

namespace tiermem {

struct PagerServer {
  std::string name;                        // as listed
  remote::Endpoint ep;                     // what `name` says, to connect again (Rejoin)
  std::string error;                       // why it was not reached at start
  // Set with the connections (at start, or by Rejoin with io_mu_ held), before `connected`
  // says so; a server not connected, or down, is touched by no thread but io_mu_'s holder.
  std::unique_ptr<remote::Transport> io;     // evictions, FetchBack, slot control; io_mu_
  FaultConns fault;  // the handler thread's own (fault_conns.h)
  std::vector<std::unique_ptr<remote::Transport>> retired;  // closed, kept: a rejoin's old ones
  std::atomic<bool> connected{false};
  std::atomic<uint32_t> gen{0};            // sessions so far: a Member of an older one is gone
  // Pages memd allows this session (hello_ok); set again by Rejoin while lock-free readers
  // (CapacityPages, DescribeServers) may still look: atomic.
  std::atomic<uint64_t> quota{0};
  // Unused slots of the ranges it leads whose members are all up: what a new page may take
  // (a range with a member down takes none). Written with io_mu_ held (CountHealthyFree
  // recounts it when health_gen_ moves); Full() reads it without a lock.
  std::atomic<uint64_t> healthy_free{0};
  size_t fill = SIZE_MAX;                  // the range it leads that TakeSlotOn takes from; io_mu_
  std::atomic<uint64_t> full_until_ns{0};  // refused an allocation: skip until then
  std::atomic<bool> refused{false};        // the last allocation asked of it was refused
  std::atomic<bool> down{false};           // failed: no requests, no placements (MarkDown)
  // Taken out of the servers file: no new pages (its copies stay where they are and are
  // read as before). Put back: it takes them again.
  std::atomic<bool> withdrawn{false};
  bool from_file = false;                  // listed by the servers file alone (set before it is published)
  bool down_counted = false;               // its pages were taken off the counters; io_mu_
  std::atomic<uint64_t> read_ns{0};        // recent read latency (EWMA; fault thread writes)
  std::string down_reason;                 // repair_mu_ (DownReason)
  // Rejoin's backoff (the repair thread only): the next try not before rejoin_at_ns, after
  // rejoin_wait_ms; both start again once it answers.
  uint64_t rejoin_at_ns = 0;
  uint32_t rejoin_wait_ms = 0;
  std::atomic<uint64_t> rejoin_tries{0};   // connection attempts by Rejoin so far
  PagerServerCounters own{};
  PagerServerCounters* c = &own;  // the stats block's entry, or `own`
};

}  // namespace tiermem

// A memory server's fault connections (TIERMEM_FAULT_CONNECTIONS): the fault handler thread's
// own, in the server's session. memd answers each connection in order, one thread per
// connection, so a read posted to the one with the fewest reads in flight waits behind no other
// fault's read while one is idle. Used by the fault thread; replaced (Connect into a fresh one,
// Drop of the old) only by the holder of the pager's io lock while the server is down or not
// connected, and at start and exit.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/remote/transport.h"
#include "runtime/paging/pager_config.h"
#include "tiermem/status.hpp"

namespace tiermem {

struct FaultConns {
  std::unique_ptr<remote::Transport> t[kMaxFaultConnections];
  uint32_t n = 0;                           // connections open (t[0..n))
  uint32_t out[kMaxFaultConnections] = {};  // reads in flight on each

  // How many a server gets: `configured` (clamped to 1..kMaxFaultConnections) over TCP, one
  // over RDMA (one-sided reads queue behind no memd thread).
  static uint32_t For(const remote::Endpoint& ep, uint32_t configured);
  // Opens For(ep, configured) connections joined to `ticket`'s session; on a failure closes
  // those it opened and returns why (none is kept).
  Status Connect(const remote::Endpoint& ep, const std::string& token, const remote::SessionTicket& ticket,
                 uint32_t timeout_ms, uint32_t configured);
  // Closes them (`retired`: where the closed ones are kept, or null), or with `release` lets go
  // of them without a goodbye (a forked child's inherited ones, the parent's streams).
  void Drop(bool release, std::vector<std::unique_ptr<remote::Transport>>* retired);
  // Connection `failed` failed: it becomes the only one (posts to it fail with its own error
  // from now on), and the others are no longer polled or posted to, so a late reply on them can
  // never match a later read. The server's next session replaces them all.
  void KeepFailed(uint32_t failed);
  uint32_t LeastBusy() const {
    uint32_t c = 0;
    for (uint32_t d = 1; d < n; ++d) {
      if (out[d] < out[c]) c = d;
    }
    return c;
  }
};

}  // namespace tiermem

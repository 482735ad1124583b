// The pager's read collection (Pager::Collect, Pager::CollectReads): templates, included by the
// pager's own .cc files that wait for replies (the fault thread, FetchBack, the fork server, the
// writer). Nothing here allocates on the fault thread's path (uffd_backlog.h says why).
#pragma once

#include <algorithm>
#include <vector>

#include "base/os.h"
#include "runtime/paging/pager.h"

namespace tiermem {

template <typename OnDone>
StatusOr<size_t> Pager::TakeReplies(bool fault_conn, size_t k, int timeout_ms, std::vector<size_t>& outstanding,
                                    OnDone& on_done, uint32_t* failed) {
  remote::Completion done[64];
  size_t total = 0;
  for (uint32_t c = 0; c < ConnCount(fault_conn, k); ++c) {
    if (!ConnBusy(fault_conn, k, c)) continue;
    *failed = c;
    auto got = Conn(fault_conn, k, c).Poll(done, 64, timeout_ms);
    if (!got.ok()) return got.status();
    if (*got == 0 && timeout_ms != 0) {
      return DeadlineExceeded("no reply within " + std::to_string(config_.timeout_ms) + " ms");
    }
    for (size_t i = 0; i < *got; ++i) on_done(k, done[i]);
    outstanding[k] -= std::min(outstanding[k], *got);
    if (fault_conn) {
      uint32_t& out = servers_[k]->fault.out[c];
      out -= std::min<uint32_t>(out, static_cast<uint32_t>(*got));
    }
    total += *got;
  }
  return total;
}

template <typename OnDone>
bool Pager::Collect(bool fault_conn, std::vector<size_t>& outstanding, CollectError* err, OnDone&& on_done,
                    int intake_fd, bool* intake) {
  auto take = [&](size_t k, int timeout_ms, uint32_t* failed) {
    return TakeReplies(fault_conn, k, timeout_ms, outstanding, on_done, failed);
  };
  int fds[kMaxWaitFds];  // no allocation: uffd_backlog.h
  uint8_t want_out[kMaxWaitFds];
  for (;;) {
    // Which servers have requests out? Take what is ready from each; when none had anything,
    // wait on all of them (and intake_fd) at once. Only listed servers can have any (the
    // tables have room for kMaxServers).
    const size_t nserv = std::min(outstanding.size(), servers_.size());
    size_t nbusy = 0, first_busy = 0;
    for (size_t k = 0; k < nserv; ++k) {
      if (outstanding[k] > 0 && nbusy++ == 0) first_busy = k;
    }
    if (nbusy == 0) return true;
    // The transport's own wait (it may spin): one server, one connection.
    const bool one_wait = nbusy == 1 && intake_fd < 0 && ConnCount(fault_conn, first_busy) == 1;
    size_t round = 0;
    for (size_t k = first_busy; k < nserv; ++k) {
      if (outstanding[k] == 0) continue;
      uint32_t failed = 0;
      auto got = take(k, one_wait ? -1 : 0, &failed);
      if (!got.ok()) {
        *err = CollectError{k, failed, got.status()};
        return false;
      }
      round += *got;
    }
    if (round > 0 && intake != nullptr) {
      *intake = true;
      return true;
    }
    if (round > 0 || one_wait) continue;
    // A connection of a kind that cannot be polled with the others (RDMA, one per server) is
    // waited on alone.
    size_t alone = nserv;
    for (size_t k = first_busy; k < nserv && alone == nserv; ++k) {
      if (outstanding[k] > 0 && ConnCount(fault_conn, k) == 1 && Conn(fault_conn, k, 0).WaitFd() < 0) alone = k;
    }
    if (alone < nserv) {
      uint32_t failed = 0;
      auto got = take(alone, -1, &failed);
      if (!got.ok()) {
        *err = CollectError{alone, failed, got.status()};
        return false;
      }
      continue;
    }
    // Every busy connection at once: readable (replies), or writable where requests are still
    // unsent (the takes above send more). Waiting on one alone while another's socket buffer
    // holds unsent writes would leave that server idle: replicas' writes go out together.
    const size_t nfds = BusyFds(fault_conn, outstanding, intake_fd, fds, want_out);
    // Past the timeout with no reply, the next Poll(.., 0) fails the silent connection.
    // The fault handler (intake_fd: its userfaultfd) polls first for TIERMEM_FAULT_SPIN_US, as
    // it does for the next fault (pager_fault.cc): a reply taken awake saves its wake-up.
    bool slept = false;
    auto ready = os::WaitAnyReady(fds, want_out, nfds, static_cast<int>(config_.timeout_ms) + 1,
                                  intake_fd >= 0 ? fault_spin_ns_ : 0, &slept);
    if (slept && intake_fd >= 0) c_->fault_handler_waits.fetch_add(1, std::memory_order_relaxed);
    if (!ready.ok()) {
      *err = CollectError{first_busy, 0, ready.status()};
      return false;
    }
    if (intake_fd >= 0 && *ready == 0) {
      *intake = true;
      return true;
    }
  }
}

template <typename Req, typename OnDone, typename OnLost>
bool Pager::CollectReads(bool fault_conn, std::vector<size_t>& outstanding, size_t n, Req&& req,
                         OnDone&& on_done, OnLost&& on_lost, bool yield, int intake_fd) {
  // With one replica a failed server is fatal to the read: the caller's one error line says so.
  const bool quiet = members_ == 1;
  std::vector<size_t> retry;
  for (;;) {
    retry.clear();
    CollectError cerr;
    bool intake = false;
    const bool ok = Collect(fault_conn, outstanding, &cerr, [&](size_t k, const remote::Completion& c) {
      const uint64_t j = c.cookie / kCookieMembers;
      ReadReq* r = req(j);
      if (r == nullptr) return;
      bool again = false;
      if (OnReadCompletion(*r, static_cast<uint32_t>(c.cookie % kCookieMembers), k, c.status, &again)) {
        on_done(j, k);
      }
      if (again) retry.push_back(j);
    }, intake_fd, yield ? &intake : nullptr);
    if (!ok) {
      // The connection failed as a whole: everything still out on the server goes elsewhere.
      if (fault_conn) servers_[cerr.server]->fault.KeepFailed(cerr.conn);
      MarkDown(cerr.server, cerr.status, quiet);
      outstanding[cerr.server] = 0;
      for (size_t j = 0; j < n; ++j) {
        ReadReq* r = req(j);
        if (r == nullptr) continue;
        bool lost_one = false;
        for (uint32_t i = 0; i < r->ref.n; ++i) {
          if (((r->out >> i) & 1u) && r->ref.m[i].server == cerr.server) {
            r->out &= ~(1u << i);
            lost_one = true;
          }
        }
        if (!lost_one) continue;
        r->last = cerr.status;
        if (!r->done) retry.push_back(j);
      }
    }
    for (size_t j : retry) {
      // Gone: whole from the pieces that came after the failure in the same round, and given
      // back by on_done (the fault handler's slots).
      ReadReq* r = req(j);
      if (r == nullptr) continue;
      c_->remote_failovers.fetch_add(1, std::memory_order_relaxed);
      if (!PostReplicaRead(fault_conn, *r, j, outstanding)) on_lost(j);
    }
    if (ok && (intake || retry.empty())) return intake;
  }
}

}  // namespace tiermem

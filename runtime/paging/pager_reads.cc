// The pager's page reads from its groups: which replica a read goes to (the fastest, in turn),
// or which pieces of an erasure-coded page (data first, k + kLateReads at once, the page whole
// from the first k), and what a completion does to the read. Used by the fault handler, the
// prefetcher and FetchBack alike (CollectReads in pager.h).
#include <algorithm>
#include <bit>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/os.h"
#include "runtime/paging/pager.h"
#include "runtime/paging/pager_internal.h"

namespace tiermem {

namespace {
// Pieces asked for beyond the k a coded page needs (Hydra's late binding): the page is whole
// when the first k answer, so one slow or lost server does not delay it.
constexpr uint32_t kLateReads = 1;
}  // namespace

std::string Pager::Redundancy() const {
  if (code_) return "TIERMEM_REMOTE_CODE=" + code_->shape().ToString();
  return "TIERMEM_REPLICAS=" + std::to_string(members_);
}

int Pager::PickReplica(const SlotRef& ref, uint32_t tried) const {
  // The members that answer about as fast as the fastest (within a quarter, or 20 us) share the
  // reads in turn; every kExploreEvery-th read goes to the slowest instead, so an estimate that
  // is out of date (a server slow once, fast again) is measured again.
  constexpr uint32_t kExploreEvery = 256;
  uint64_t ns[kMaxMembers];
  int best = -1, slowest = -1;
  uint32_t candidates = 0;
  for (uint32_t i = 0; i < ref.n; ++i) {
    if (((tried >> i) & 1u) || !Readable(ref.m[i])) continue;
    ns[i] = servers_[ref.m[i].server]->read_ns.load(std::memory_order_relaxed);
    if (best < 0 || ns[i] < ns[best]) best = static_cast<int>(i);
    if (slowest < 0 || ns[i] > ns[slowest]) slowest = static_cast<int>(i);
    candidates |= 1u << i;
  }
  if (best >= 0) {
    const uint32_t seq = pick_seq_.fetch_add(1, std::memory_order_relaxed);
    if (seq % kExploreEvery == kExploreEvery - 1) return slowest;
    const uint64_t near = ns[best] + ns[best] / 4 + 20'000;
    uint32_t near_set = 0, count = 0;
    for (uint32_t i = 0; i < ref.n; ++i) {
      if (((candidates >> i) & 1u) && ns[i] <= near) {
        near_set |= 1u << i;
        ++count;
      }
    }
    uint32_t pick = seq % count;
    for (uint32_t i = 0; i < ref.n; ++i) {
      if (((near_set >> i) & 1u) && pick-- == 0) return static_cast<int>(i);
    }
    return best;
  }
  // Last resort, a member marked down: the failure that marked it may have been its other
  // connection's (an eviction's timeout), and its copy may still be read.
  return LastResort(ref, tried);
}

int Pager::LastResort(const SlotRef& ref, uint32_t tried) const {
  for (uint32_t i = 0; i < ref.n; ++i) {
    const Server& s = *servers_[ref.m[i].server];
    if (!((tried >> i) & 1u) && s.connected.load(std::memory_order_acquire) &&
        s.gen.load(std::memory_order_acquire) == ref.m[i].gen) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

int Pager::PickPiece(const SlotRef& ref, uint32_t tried) const {
  // A data piece needs no decoding: those first, then parity, in order. A member marked down
  // whose session is still the one of its slots is the last resort (the failure that marked it
  // may have been its other connection's).
  for (uint32_t i = 0; i < ref.n; ++i) {
    if (!((tried >> i) & 1u) && Readable(ref.m[i])) return static_cast<int>(i);
  }
  return LastResort(ref, tried);
}

bool Pager::PostReplicaRead(bool fault_conn, ReadReq& r, uint64_t j, std::vector<size_t>& outstanding) {
  const uint32_t want = code_ ? std::min(r.ref.n, need_ + kLateReads) : 1;
  for (;;) {
    const uint32_t have = static_cast<uint32_t>(std::popcount(r.out | r.got));
    if (r.done || have >= want) return true;
    const int i = code_ ? PickPiece(r.ref, r.tried) : PickReplica(r.ref, r.tried);
    if (i < 0) {
      if (have >= need_) return true;  // enough are on their way
      if (r.last.ok()) {  // every member was down before this read
        const Server& s = *servers_[r.ref.m[0].server];
        r.last = Unavailable(std::string(code_ ? "too few of the page's pieces are on servers that are up"
                                         : r.ref.n > 1 ? "every replica's server is down"
                                                       : "the server is down") +
                             (s.down.load(std::memory_order_acquire) ? " (" + DownReason(r.ref.m[0].server) + ")" : ""));
      }
      return false;
    }
    r.tried |= 1u << i;
    const Member& m = r.ref.m[i];
    Server& s = *servers_[m.server];
    // The fault thread's read goes to the connection of the server with the fewest reads in
    // flight: memd answers each in order, so a read behind none waits for its own reply only.
    const uint32_t c = fault_conn ? s.fault.LeastBusy() : 0;
    remote::Transport& t = fault_conn ? *s.fault.t[c] : *s.io;
    const uint64_t cookie = j * kCookieMembers + static_cast<uint64_t>(i);
    Status st;
    if (code_) {
      const uint32_t k = code_->shape().k;
      char* dst = static_cast<uint32_t>(i) < k ? r.buf + size_t(i) * piece_ : r.spare + size_t(uint32_t(i) - k) * piece_;
      st = t.PostReadPart(m.memd, MemberSlot(r.ref, m), PieceOffset(r.ref), static_cast<uint32_t>(piece_), dst, cookie);
    } else {
      st = t.PostRead(m.memd, MemberSlot(r.ref, m), r.buf, cookie);
    }
    if (st.ok()) {
      if (r.out == 0 && r.got == 0) r.posted_ns = os::MonotonicNanos();
      r.out |= 1u << i;
      ++outstanding[m.server];
      if (fault_conn) ++s.fault.out[c];
      continue;
    }
    r.last = st;
    MarkDown(m.server, st, members_ == 1);
  }
}

void Pager::SendQueued(const std::vector<size_t>& outstanding) {
  const size_t n = std::min(outstanding.size(), servers_.size());
  for (size_t k = 0; k < n; ++k) {
    if (outstanding[k] == 0) continue;
    Server& s = *servers_[k];
    for (uint32_t c = 0; c < s.fault.n; ++c) {
      if (s.fault.out[c] > 0) (void)s.fault.t[c]->Send();
    }
  }
}

remote::Transport& Pager::Conn(bool fault_conn, size_t k, uint32_t c) const {
  return fault_conn ? *servers_[k]->fault.t[c] : *servers_[k]->io;
}

bool Pager::ConnBusy(bool fault_conn, size_t k, uint32_t c) const {
  return ConnCount(fault_conn, k) == 1 || servers_[k]->fault.out[c] > 0;
}

size_t Pager::BusyFds(bool fault_conn, const std::vector<size_t>& outstanding, int intake_fd, int* fds,
                      uint8_t* want_out) const {
  size_t n = 0;
  if (intake_fd >= 0) {
    want_out[n] = 0;
    fds[n++] = intake_fd;
  }
  const size_t nserv = std::min(outstanding.size(), servers_.size());
  for (size_t k = 0; k < nserv; ++k) {
    if (outstanding[k] == 0) continue;
    for (uint32_t c = 0; c < ConnCount(fault_conn, k) && n < kMaxWaitFds; ++c) {
      if (!ConnBusy(fault_conn, k, c)) continue;
      want_out[n] = Conn(fault_conn, k, c).WantsWritable() ? 1 : 0;
      fds[n++] = Conn(fault_conn, k, c).WaitFd();
    }
  }
  return n;
}

bool Pager::OnReadCompletion(ReadReq& r, uint32_t i, size_t server, const Status& st, bool* retry) {
  *retry = false;
  // Not in flight (any more) from that server: a late answer to a read already given up on.
  if (i >= r.ref.n || !((r.out >> i) & 1u) || r.ref.m[i].server != server) return false;
  r.out &= ~(1u << i);
  if (!st.ok()) {
    r.last = st;
    MarkDown(server, st, members_ == 1);
    *retry = !r.done;
    return false;
  }
  NoteReadLatency(server, os::MonotonicNanos() - r.posted_ns);
  if (r.done) return false;
  if (!code_) {
    r.done = true;
    return true;
  }
  r.got |= 1u << i;
  if (static_cast<uint32_t>(std::popcount(r.got)) < need_) return false;
  // k pieces: the data pieces missing from buf are decoded from them.
  const uint32_t k = code_->shape().k;
  const uint32_t data_mask = (1u << k) - 1;
  if ((r.got & data_mask) != data_mask) {
    uint32_t have[kMaxCodeData], want[kMaxCodeData], nh = 0, nw = 0;
    const uint8_t* present[kMaxCodeData];
    uint8_t* out[kMaxCodeData];
    for (uint32_t p = 0; p < r.ref.n && nh < k; ++p) {
      if (!((r.got >> p) & 1u)) continue;
      have[nh] = p;
      present[nh++] = reinterpret_cast<const uint8_t*>(p < k ? r.buf + size_t(p) * piece_ : r.spare + size_t(p - k) * piece_);
    }
    for (uint32_t d = 0; d < k; ++d) {
      if ((r.got >> d) & 1u) continue;
      want[nw] = d;
      out[nw++] = reinterpret_cast<uint8_t*>(r.buf + size_t(d) * piece_);
    }
    Status ds = code_->Decode(piece_, have, present, want, nw, out);
    if (!ds.ok()) {  // cannot happen with k distinct pieces; never install a wrong page
      r.last = ds;
      *retry = true;
      return false;
    }
  }
  r.done = true;
  return true;
}

void Pager::FatalAll(const void* addr, const SlotRef& ref, const Status& why) {
  if (ref.n <= 1) Fatal(addr, ref.n == 1 ? ref.m[0].server : first_connected_, why);
  TM_LOG_ERROR("remote tier: the page at %p could not be fetched from %s of its memory servers "
               "(%s): %s; exiting (status %d) rather than hand the program a zero page",
               addr, code_ ? ("enough (" + std::to_string(need_) + ")").c_str() : "any", MemberNames(ref).c_str(),
               why.message().c_str(), kRemoteLostExitCode);
  ExitRemoteLost();
}


}  // namespace tiermem

// The pager and fork(), the child's side: a child that outlives its parent serves its fork-time
// remote pages itself (the design in docs/design-notes.md, "fork: remote pages shared with the
// child"; the parent's side is pager_fork.cc).
//
// The kernel keeps the child's copies of the parent's registered ranges registered, with a
// userfaultfd context of their own, and the parent serves them. The parent's fault thread also
// sends the child a copy of that descriptor over a socket pair made for the fork. In its atfork
// handler (before fork() returns there) the child takes it, and starts one thread that waits for
// end of file on its end of the pair: the parent's end closes when the parent is killed, execs,
// stops its runtime or hands the serving over (a page no server gave it). The thread then opens
// connections of its own to every server, joining the parent's memd sessions (the same slots;
// the child's inherited copies of the parent's sockets keep them alive meanwhile: they are never
// used here), wakes every thread the parent left waiting on a fault it had read, and serves the
// descriptor: a missing fault on a snapshot page not installed yet is read with the snapshot
// pages after it through the usual replica/code read path and installed; any other missing page
// gets a zero page; a write-protect fault is let through.
//
// Threads and page states here: while the parent lives only its thread reads the descriptor;
// after, only ours. Our thread and ChildDrop (a free or discard on any thread) take self_mu_
// around the snapshot's `served` marks and each install, so a range freed here is never
// installed afterwards. The page records are not touched by either server: snapshot pages stay
// kRemote in them (kInFlight ones of the parent's fault thread became kRemote at the fork).
#include <condition_variable>
#include <cstring>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include "base/log.h"
#include "base/os.h"
#include "base/runtime_thread.h"
#include "runtime/pages/page_table.h"
#include "runtime/paging/pager.h"
#include "runtime/paging/pager_internal.h"
#include "runtime/paging/uffd_backlog.h"

namespace tiermem {

using pager_internal::kPage;
using pager_internal::S;

namespace {
// Pages installed per fault at most: the faulted page and the snapshot pages after it (a child
// reading its data in order takes one round trip per this many pages).
constexpr size_t kReadAhead = 32;
// How long the child's handler waits for its descriptor: the parent's fault thread sends it as it
// reads the fork event, which the kernel may let the child outrun by a little.
constexpr int kDescriptorWaitMs = 10000;
}  // namespace

void Pager::AfterForkChild(ForkSnapshot* snap) {
  forked_child_ = true;
  // The parent's end of each other child's pair is a copy here: closed, so that their end of
  // file comes with the parent's (children_mu_ was held across the fork: the list is whole).
  for (const auto& c : children_) {
    if (c->sock >= 0) (void)os::Close(c->sock);
  }
  // Locks the parent's other threads may have held at the fork (the forking thread holds io_mu_
  // and children_mu_), and the parent's children (its, not ours).
  new (&slots_mu_) std::mutex();
  new (&repair_mu_) std::mutex();
  new (&repair_cv_) std::condition_variable();
  new (&children_mu_) std::mutex();
  new (&children_) std::vector<std::unique_ptr<ForkChild>>();
  new (&self_mu_) std::mutex();
  fork_children_.store(0, std::memory_order_relaxed);
  fork_snapshot_.store(nullptr, std::memory_order_relaxed);  // the same object as snap
  fork_pending_ = nullptr;
  parent_serves_ = snap != nullptr;
  // Pages the parent's fault thread was installing are missing here: remote, served.
  for (Region* region : fork_regions_) {
    const uint64_t hw = region->high_water();
    for (uint64_t i = 0; i < hw; ++i) {
      PageRecord& rec = region->record(i);
      if (rec.state.load(std::memory_order_relaxed) == S(PageState::kInFlight)) {
        rec.state.store(S(PageState::kRemote), std::memory_order_relaxed);
      }
    }
  }
  fork_regions_.clear();
  const int sock = fork_sock_[1];
  if (fork_sock_[0] >= 0) (void)os::Close(fork_sock_[0]);  // the parent's end
  fork_sock_[0] = fork_sock_[1] = -1;
  fork_send_.store(-1, std::memory_order_relaxed);
  if (snap != nullptr && sock >= 0) {
    int fd = -EBADF;
    if (os::WaitReadableFor(sock, -1, kDescriptorWaitMs) == 0) fd = os::RecvFd(sock);
    auto stop = fd >= 0 ? os::EventFd() : StatusOr<int>(ErrnoToStatus(-fd, "descriptor from the parent"));
    if (stop.ok()) {
      (void)os::Close(fork_stop_fd_);  // the parent's
      fork_stop_fd_ = *stop;
      self_ = std::make_unique<ForkChild>();
      self_->fd = fd;
      self_->sock = sock;
      self_->snap.reset(snap);
      NewRuntimeThreadSignals quiet;
      self_->thread = std::thread([this] {
        OnRuntimeThreadStart();
        StandBy();
      });
    } else {
      TM_LOG_WARN("remote tier: forked child: no descriptor of its own (%s): its remote pages are "
                  "served only while its parent lives", stop.status().message().c_str());
      if (fd >= 0) (void)os::Close(fd);
      (void)os::Close(sock);
    }
  } else if (sock >= 0) {
    (void)os::Close(sock);
  }
  io_mu_.unlock();
}

void Pager::StandBy() {
  ForkChild& me = *self_;
  for (;;) {  // until the parent's end closes (nothing else ever comes after the descriptor)
    const int w = os::WaitReadableFor(me.sock, fork_stop_fd_, -1);
    if (w == 2) continue;  // interrupted
    if (w == 1 || w < 0) {
      me.done.store(true, std::memory_order_release);
      return;
    }
    break;
  }
  took_over_.store(true, std::memory_order_release);
  ForkSnapshot& snap = *me.snap;
  TM_LOG_INFO("remote tier: forked child: its parent no longer serves it; it serves its %zu "
              "fork-time remote pages itself", snap.entries.size());
  ConnectOwn();
  // Faults the parent's thread read and never answered (on any page of the regions): their
  // threads still wait. Woken, they fault again, to us.
  for (Region* region : snap.regions) {
    os::UffdWake(me.fd, region->PageAddress(0), region->high_water() * kPage);
  }
  // Allocated once: while this process forks, glibc's malloc locks are held until the fork event
  // is read, by this thread (the path that answers faults after TouchRemoteInChild allocates
  // nothing).
  std::vector<char> staging(kReadAhead * kPage);
  std::vector<int64_t> batch;
  batch.reserve(kReadAhead);
  os::UffdFault faults[64];
  // A grandchild's fork waits for its event to be read (uffd_backlog.h): it gets no server (this
  // process took its remote pages in first), so its descriptor is closed.
  UffdBacklog backlog(me.fd, [](void*, int fd) { (void)os::Close(fd); }, nullptr, 256);
  backlog.Install();
  for (;;) {
    const int w = backlog.empty() ? os::WaitReadableFor(me.fd, fork_stop_fd_, -1) : 0;
    if (w == 1) break;
    if (w == 2) continue;  // interrupted
    auto got = w < 0 ? StatusOr<size_t>(ErrnoToStatus(-w, "poll")) : backlog.Read(faults, 64);
    if (!got.ok()) {
      TM_LOG_ERROR("remote tier: forked child: its fault handler failed (%s); exiting (status %d) "
                   "rather than leave a thread waiting for a page", got.status().message().c_str(),
                   kRemoteLostExitCode);
      ExitRemoteLost();
    }
    for (size_t k = 0; k < *got; ++k) ServeSelfFault(faults[k], staging.data(), batch);
  }
  UffdBacklog::Uninstall();
  me.done.store(true, std::memory_order_release);
}

void Pager::ConnectOwn() {
  // The inherited transports are the parent's request streams: left alone (a goodbye there would
  // close the parent's connection), never used here.
  for (size_t k = 0; k < servers_.size(); ++k) {
    Server& s = *servers_[k];
    std::unique_ptr<remote::Transport> inherited = std::move(s.io);
    s.fault.Drop(/*release=*/true, nullptr);
    if (!inherited) continue;  // never connected
    const remote::SessionTicket ticket = inherited->ticket();
    (void)inherited.release();
    Status st = Unavailable("down before the fork");
    if (!s.down.load(std::memory_order_acquire)) {
      auto t = remote::MakeTransport(s.ep);
      st = t.ok() ? (*t)->Connect(config_.token, config_.timeout_ms, &ticket) : t.status();
      if (st.ok()) {
        s.io = std::move(*t);
        continue;
      }
    }
    // No connection here, not even a last resort for a read (LastResort asks connected ones).
    // Quiet: a read that needs it says so, naming every server of the page.
    MarkDown(k, st, /*quiet=*/true);
    s.connected.store(false, std::memory_order_release);
  }
}

void Pager::ServeSelfFault(const os::UffdFault& f, char* staging, std::vector<int64_t>& batch) {
  const int fd = self_->fd;
  char* addr = reinterpret_cast<char*>(f.address & ~uint64_t(kPage - 1));
  if (f.wp) {  // a write to a page shared write-protected at the fork: nothing tracks it here
    (void)os::UffdWriteProtect(fd, addr, kPage, false);
    os::UffdWake(fd, addr, kPage);
    return;
  }
  ForkSnapshot& snap = *self_->snap;
  std::lock_guard<std::mutex> lock(self_mu_);
  Region* region = config_.events->RegionOf(addr);
  const int64_t j = region != nullptr ? snap.Find(region, region->PageIndex(addr)) : -1;
  if (j < 0 || snap.served[j]) {
    // Not remote at the fork (dropped or never touched since), or installed here and dropped
    // since: zeros (present already: left as it is).
    (void)os::UffdZeroPage(fd, addr, kPage);
    os::UffdWake(fd, addr, kPage);
    fork_zero_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  batch.clear();
  const auto& e = snap.entries;
  for (int64_t x = j; x < int64_t(e.size()) && batch.size() < kReadAhead; ++x) {
    if (x > j && (e[x].region != e[j].region || e[x].index != e[x - 1].index + 1)) break;
    if (snap.served[x]) break;
    batch.push_back(x);
  }
  InstallSnapshotPages(batch, staging);
}

void Pager::InstallSnapshotPages(const std::vector<int64_t>& e, char* staging) {
  ForkSnapshot& snap = *self_->snap;
  uint64_t slots[kReadAhead];
  for (size_t i = 0; i < e.size(); ++i) slots[i] = snap.entries[e[i]].slot;
  size_t lost = 0;
  Status why;
  if (!ReadSlots(slots, e.size(), staging, &lost, &why)) {
    const ForkSnapshot::Entry& en = snap.entries[e[lost]];
    const void* addr = snap.RegionOf(en)->PageAddress(en.index);
    SlotRef ref;
    if (Locate(slots[lost], &ref)) FatalAll(addr, ref, why);
    Fatal(addr, first_connected_, why);
  }
  // Pages the parent installed before it went are present and never fault; a page present
  // already (EEXIST) is left as it is.
  const ForkSnapshot::Entry& first = snap.entries[e[0]];
  char* at = snap.RegionOf(first)->PageAddress(first.index);
  if (Status cs = os::UffdCopy(self_->fd, at, staging, e.size() * kPage, false); !cs.ok()) {
    TM_LOG_ERROR("remote tier: forked child: the page at %p could not be installed (%s); exiting "
                 "(status %d) rather than hand the program a zero page", static_cast<void*>(at),
                 cs.message().c_str(), kRemoteLostExitCode);
    ExitRemoteLost();
  }
  for (int64_t x : e) snap.served[x] = 1;
  fork_served_.fetch_add(e.size(), std::memory_order_relaxed);  // counted before anyone wakes
  os::UffdWake(self_->fd, at, e.size() * kPage);
}

void Pager::TouchRemoteInChild(Region* const* regions, int nregions) {
  for (int r = 0; r < nregions; ++r) {
    Region& region = *regions[r];
    const uint64_t hw = region.high_water();
    for (uint64_t i = 0; i < hw; ++i) {
      PageRecord& rec = region.record(i);
      if (rec.state.load(std::memory_order_relaxed) != S(PageState::kRemote)) continue;
      if (rec.remote_slot.load(std::memory_order_relaxed) == 0) continue;  // zeros either way
      // A read: whoever serves this child installs it (or it is here already).
      (void)*reinterpret_cast<volatile const char*>(region.PageAddress(i));
      rec.remote_slot.store(0, std::memory_order_relaxed);
      rec.flags.fetch_and(uint8_t(~(kPageRemoteClean | kPageAhead)), std::memory_order_relaxed);
      config_.events->OnResident(region, i, 1, true);
      rec.state.store(S(PageState::kLocal), std::memory_order_relaxed);
    }
  }
}

void Pager::ChildDrop(Region& region, uint64_t first, uint64_t n, bool discard) {
  // A snapshot page not installed yet would come back with its fork-time bytes on the next
  // touch, where the program expects zeros: such ranges get fresh memory instead (unregistered
  // in this child, so nobody installs anything there any more). Under self_mu_ with this
  // child's own installs, which skip the entries marked here.
  std::unique_lock<std::mutex> own;
  if (self_) {
    own = std::unique_lock<std::mutex>(self_mu_);
    ForkSnapshot& snap = *self_->snap;
    for (int64_t j = snap.LowerBound(&region, first); j >= 0 && j < int64_t(snap.entries.size()); ++j) {
      const ForkSnapshot::Entry& e = snap.entries[j];
      if (snap.RegionOf(e) != &region || e.index >= first + n) break;
      snap.served[j] = 1;
    }
  }
  bool served_here = false;
  for (uint64_t i = first; i < first + n && !served_here; ++i) {
    const PageRecord& rec = region.record(i);
    served_here = parent_serves_ && rec.state.load(std::memory_order_relaxed) == S(PageState::kRemote) &&
                  rec.remote_slot.load(std::memory_order_relaxed) != 0;
  }
  char* addr = region.PageAddress(first);
  if (served_here) {
    const int rc = os::ReplaceAnonymous(addr, n * kPage);
    if (rc != 0) TM_LOG_WARN("remote tier: fork child: replacing freed memory failed: %s", strerror(-rc));
  } else {
    (void)os::Discard(addr, n * kPage);
  }
  for (uint64_t i = first; i < first + n; ++i) {
    PageRecord& rec = region.record(i);
    rec.remote_slot.store(0, std::memory_order_relaxed);
    rec.flags.fetch_and(uint8_t(~(kPageRemoteClean | kPageAhead)), std::memory_order_relaxed);
    if (discard && rec.state.load(std::memory_order_relaxed) == S(PageState::kRemote)) {
      config_.events->OnResident(region, i, 1, false);
      rec.state.store(S(PageState::kLocal), std::memory_order_release);
    }
  }
}

void Pager::DestroyInChild() {
  // No fault, repair or writer thread exists here: their objects are the parent's copies.
  new (&thread_) std::thread();
  new (&repair_thread_) std::thread();
  new (&writer_thread_) std::thread();
  StopChildren();  // our own serving thread ends
  const bool own = took_over_.load(std::memory_order_acquire);
  for (auto& s : servers_) {
    // Ours (ConnectOwn) are closed; the parent's, inherited, are left to it.
    if (own && s->io) {
      s->io->Close();
    } else {
      (void)s->io.release();
    }
    s->fault.Drop(/*release=*/true, nullptr);
  }
  if (self_) {
    (void)os::Close(self_->fd);
    (void)os::Close(self_->sock);
    (void)os::Close(fork_stop_fd_);
  }
}

}  // namespace tiermem

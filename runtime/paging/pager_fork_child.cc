// The pager and fork(), the child's side: a child serves its fork-time remote pages itself (the
// design in docs/design-notes.md, "fork: remote pages shared with the child"; the parent's side
// is pager_fork.cc).
//
// The kernel gives the child plain copies of the parent's registered ranges (no fork events), so
// each page that was remote at the fork is missing here. Before fork() returns in the child (its
// atfork handler: the only thread, running our code alone, its allocations glibc's), the child
// opens a userfaultfd of its own, registers the snapshot's pages with it (missing faults only)
// and starts one thread that serves it. That thread first opens connections of its own to every
// server, joining the parent's memd sessions (the slots are the parent's; the inherited sockets
// carry the parent's requests and are never used here, and while this process holds them open
// the sessions live even if the parent is gone before the thread has joined). A missing fault on
// a snapshot page: that page and the snapshot pages after it are read through the usual
// replica/code read path and installed. Nothing here depends on the parent once fork() returned.
//
// Threads and page states here: the serving thread alone reads the descriptor, uses the io
// connections and installs pages; it and ChildDrop (a free or discard on any thread) take
// self_mu_ around the snapshot's `served` marks and each install, so a page freed here is never
// installed afterwards (its next touch faults and reads zeros). The page records are not touched
// by the serving thread: snapshot pages stay kRemote in them, and kInFlight ones of the parent's
// fault thread became kRemote (AfterForkChild).
#include <cstring>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include "base/log.h"
#include "base/os.h"
#include "base/runtime_thread.h"
#include "runtime/core/page_table.h"
#include "runtime/paging/pager.h"
#include "runtime/paging/pager_collect.h"
#include "runtime/paging/pager_internal.h"

namespace tiermem {

using pager_internal::kPage;
using pager_internal::S;

namespace {
// Pages installed per fault at most: the faulted page and the snapshot pages after it (a child
// reading its data in order takes one round trip per this many pages).
constexpr size_t kReadAhead = 32;
// Snapshot runs this close (in pages) are registered as one range: fewer mappings (a registered
// range is a VMA of its own, and max_map_count bounds them). A missing page of such a gap faults
// too and gets a zero page, which is what it would read unregistered.
constexpr uint64_t kRegisterGap = 256;
}  // namespace

void Pager::AfterForkChild() {
  // Locks the parent's other threads may have held at the fork (the forking thread holds io_mu_
  // and slots_mu_: released below), and the parent's children (its, not ours).
  new (&repair_mu_) std::mutex();
  new (&repair_cv_) std::condition_variable();
  new (&children_mu_) std::mutex();
  new (&children_) std::vector<std::unique_ptr<ForkChild>>();
  new (&self_mu_) std::mutex();
  fork_children_.store(0, std::memory_order_relaxed);
  ForkSnapshot* const snap = fork_pending_;
  fork_pending_ = nullptr;
  if (forked_child_) {
    // A grandchild: its parent touched in every page it served, and nothing here is registered
    // (no fork events). Its parent's serving thread, pipe and descriptor are not ours.
    if (self_) {
      (void)os::Close(self_->fd);
      (void)self_.release();  // its thread does not exist here
      (void)os::Close(uffd_);
      uffd_ = -1;
    }
    slots_mu_.unlock();
    io_mu_.unlock();
    return;
  }
  forked_child_ = true;
  // Pages the parent's fault thread was installing at the fork may be missing here: remote.
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
  if (snap != nullptr) {
    (void)os::Close(fork_pipe_[0]);  // the parent's end
    StartServingSelf(snap, fork_pipe_[1]);
    fork_pipe_[0] = fork_pipe_[1] = -1;
  }
  slots_mu_.unlock();
  io_mu_.unlock();
}

void Pager::StartServingSelf(ForkSnapshot* snap, int alive_fd) {
  // Before anything touches a snapshot page: unregistered, a missing page reads as zeros.
  auto uffd = os::UffdOpen();
  Status st = uffd.ok() ? RegisterSnapshot(*snap, uffd->fd) : uffd.status();
  StatusOr<int> stop = st.ok() ? os::EventFd() : StatusOr<int>(st);
  if (!stop.ok()) {
    TM_LOG_ERROR("remote tier: a forked child cannot serve the %zu pages that were remote at the "
                 "fork (%s); exiting (status %d) rather than read them as zeros",
                 snap->entries.size(), stop.status().message().c_str(), kRemoteLostExitCode);
    ExitRemoteLost();
  }
  // The inherited descriptors are the parent's (its ranges, its threads): closing our copies
  // changes nothing there.
  (void)os::Close(uffd_);
  uffd_ = uffd->fd;
  (void)os::Close(fork_stop_fd_);
  fork_stop_fd_ = *stop;
  self_ = std::make_unique<ForkChild>();
  self_->fd = alive_fd;
  self_->snap.reset(snap);
  NewRuntimeThreadSignals quiet;
  self_->thread = std::thread([this] {
    OnRuntimeThreadStart();
    ServeSelf();
  });
}

Status Pager::RegisterSnapshot(const ForkSnapshot& snap, int uffd) {
  const auto& e = snap.entries;
  for (size_t i = 0; i < e.size();) {
    size_t j = i + 1;  // [i, j): one range, runs kRegisterGap pages apart at most
    while (j < e.size() && e[j].region == e[i].region && e[j].index - e[j - 1].index <= kRegisterGap + 1) ++j;
    Region* region = snap.RegionOf(e[i]);
    const uint64_t pages = e[j - 1].index - e[i].index + 1;
    if (!os::UffdRegister(uffd, region->PageAddress(e[i].index), pages * kPage, false).ok()) {
      // The range spans a mapping userfaultfd refuses (or a hole): each run alone, each was
      // registered in the parent.
      for (size_t k = i; k < j;) {
        size_t m = k + 1;
        while (m < j && e[m].index == e[m - 1].index + 1) ++m;
        TIERMEM_RETURN_IF_ERROR(os::UffdRegister(uffd, region->PageAddress(e[k].index),
                                                 (e[m - 1].index - e[k].index + 1) * kPage, false));
        k = m;
      }
    }
    i = j;
  }
  return Status::Ok();
}

void Pager::ConnectOwn() {
  // The inherited transports are the parent's request streams: left alone (a goodbye there would
  // close the parent's connection), never used here.
  for (size_t k = 0; k < servers_.size(); ++k) {
    Server& s = *servers_[k];
    std::unique_ptr<remote::Transport> inherited = std::move(s.io);
    (void)s.fault.release();
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
      TM_LOG_WARN("remote tier: forked child: memory server %s cannot be reached (%s); its pages "
                  "are read from their other copies where they have some", s.name.c_str(), st.message().c_str());
    }
    // No connection here: not even a last resort for a read (LastResort asks connected ones).
    MarkDown(k, st, /*quiet=*/true);
    s.connected.store(false, std::memory_order_release);
  }
}

void Pager::ServeSelf() {
  ConnectOwn();
  std::vector<char> staging(kReadAhead * kPage);
  os::UffdFault faults[64];
  for (;;) {
    const int w = os::WaitReadableFor(uffd_, fork_stop_fd_, -1);
    if (w == 1) break;
    if (w == 2) continue;  // interrupted
    auto got = w < 0 ? StatusOr<size_t>(ErrnoToStatus(-w, "poll")) : os::UffdReadFaults(uffd_, faults, 64);
    if (!got.ok()) {
      TM_LOG_ERROR("remote tier: forked child: its fault handler failed (%s); exiting (status %d) "
                   "rather than leave a thread waiting for a page", got.status().message().c_str(),
                   kRemoteLostExitCode);
      ExitRemoteLost();
    }
    for (size_t k = 0; k < *got; ++k) ServeSelfFault(faults[k], staging.data());
  }
  // The runtime stops in this process: its regions go right after the pager (Runtime::Stop), so
  // nothing is left to install.
  self_->done.store(true, std::memory_order_release);
}

void Pager::ServeSelfFault(const os::UffdFault& f, char* staging) {
  char* addr = reinterpret_cast<char*>(f.address & ~uint64_t(kPage - 1));
  ForkSnapshot& snap = *self_->snap;
  std::lock_guard<std::mutex> lock(self_mu_);
  Region* region = config_.region_of(addr);
  const int64_t j = region != nullptr ? snap.Find(region, region->PageIndex(addr)) : -1;
  if (j < 0 || snap.served[j]) {
    // A page of a gap taken into the registration, or one installed and freed here since
    // (ChildDrop): zeros, as it reads unregistered (present already: left as it is).
    (void)os::UffdZeroPage(uffd_, addr, kPage);
    os::UffdWake(uffd_, addr, kPage);
    fork_zero_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  std::vector<int64_t> batch;
  batch.reserve(kReadAhead);
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
  if (!ReadSnapshotSlots(slots, e.size(), staging, &lost, &why)) {
    const ForkSnapshot::Entry& en = snap.entries[e[lost]];
    const void* addr = snap.RegionOf(en)->PageAddress(en.index);
    SlotRef ref;
    if (Locate(slots[lost], &ref)) FatalAll(addr, ref, why);
    Fatal(addr, first_connected_, why);
  }
  // Consecutive pages (a fault and its read-ahead) in one copy, else page by page. A page
  // present already (EEXIST: one the parent's fault thread installed just before the fork) is
  // left as it is.
  const ForkSnapshot::Entry& first = snap.entries[e[0]];
  const ForkSnapshot::Entry& last = snap.entries[e.back()];
  const bool run = last.region == first.region && last.index - first.index + 1 == e.size();
  for (size_t i = 0; i < e.size(); i += run ? e.size() : 1) {
    const ForkSnapshot::Entry& en = snap.entries[e[i]];
    char* at = snap.RegionOf(en)->PageAddress(en.index);
    const size_t bytes = (run ? e.size() : 1) * kPage;
    if (Status cs = os::UffdCopy(uffd_, at, staging + i * kPage, bytes, false); !cs.ok()) {
      TM_LOG_ERROR("remote tier: forked child: the page at %p could not be installed (%s); exiting "
                   "(status %d) rather than hand the program a zero page", static_cast<void*>(at),
                   cs.message().c_str(), kRemoteLostExitCode);
      ExitRemoteLost();
    }
    for (size_t k = i; k < i + bytes / kPage; ++k) snap.served[e[k]] = 1;
    fork_served_.fetch_add(bytes / kPage, std::memory_order_relaxed);  // counted before anyone wakes
    os::UffdWake(uffd_, at, bytes);
  }
}

bool Pager::ReadSnapshotSlots(const uint64_t* slots, size_t n, char* staging, size_t* lost, Status* why) {
  const size_t spare_bytes = SpareBytes();  // coded pages: their parity pieces
  std::vector<char> spare(n * spare_bytes);
  std::vector<ReadReq> reqs(n);
  std::vector<size_t> outstanding(kMaxServers);
  bool ok = true;
  size_t posted = 0;
  for (; posted < n; ++posted) {
    ReadReq& r = reqs[posted];
    r.buf = staging + posted * kPage;
    r.spare = spare.data() + posted * spare_bytes;
    if (!Locate(slots[posted], &r.ref)) {
      *why = Internal("page slot " + std::to_string(slots[posted]) + " has no server");
    } else if (!PostReplicaRead(false, r, posted, outstanding)) {
      *why = r.last;
    } else {
      continue;
    }
    *lost = posted;
    ok = false;
    break;
  }
  CollectReads(
      false, outstanding, posted, [&](size_t j) { return j < posted ? &reqs[j] : nullptr; },
      [&](size_t, size_t) {},
      [&](size_t j) {
        if (ok) {
          *lost = j;
          *why = reqs[j].last;
        }
        ok = false;
      });
  return ok;
}

void Pager::ChildDrop(Region& region, uint64_t first, uint64_t n, bool discard) {
  if (self_) {
    // Snapshot pages of the range are never installed from now on: a later touch faults and
    // reads zeros, as freed or discarded memory must. Under self_mu_: an install in progress
    // ends before the drop below, and none comes after it.
    std::lock_guard<std::mutex> lock(self_mu_);
    ForkSnapshot& snap = *self_->snap;
    int64_t j = snap.LowerBound(&region, first);
    for (; j >= 0 && j < int64_t(snap.entries.size()); ++j) {
      const ForkSnapshot::Entry& e = snap.entries[j];
      if (snap.RegionOf(e) != &region || e.index >= first + n) break;
      snap.served[j] = 1;
    }
  }
  (void)os::Discard(region.PageAddress(first), n * kPage);
  for (uint64_t i = first; i < first + n; ++i) {
    PageRecord& rec = region.record(i);
    rec.remote_slot.store(0, std::memory_order_relaxed);
    rec.flags.fetch_and(uint8_t(~(kPageRemoteClean | kPageAhead)), std::memory_order_relaxed);
    if (discard && rec.state.load(std::memory_order_relaxed) == S(PageState::kRemote)) {
      if (config_.on_resident) config_.on_resident(region, i, 1, false);
      rec.state.store(S(PageState::kLocal), std::memory_order_release);
    }
  }
}

void Pager::DestroyInChild() {
  // No fault, repair or writer thread exists here: their objects are the parent's copies.
  new (&thread_) std::thread();
  new (&repair_thread_) std::thread();
  new (&writer_thread_) std::thread();
  const bool serving = self_ != nullptr;
  StopChildren();  // our serving thread installs what is left, then ends
  for (auto& s : servers_) {
    // Ours (ConnectOwn) are closed; the parent's, inherited, are left to it.
    if (serving && s->io) {
      s->io->Close();
    } else {
      (void)s->io.release();
    }
    (void)s->fault.release();
  }
  if (serving) {
    (void)os::Close(self_->fd);
    (void)os::Close(uffd_);
    (void)os::Close(fork_stop_fd_);
  }
}

}  // namespace tiermem

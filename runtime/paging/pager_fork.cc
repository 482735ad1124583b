// The pager and fork(), the parent's side: remote pages stay remote, shared with the child (the
// design, and why, in docs/design-notes.md, "fork: remote pages shared with the child"; the
// child's side is pager_fork_child.cc).
//
// With UFFD_FEATURE_EVENT_FORK, the kernel gives the child's copies of our registered ranges a
// userfaultfd of their own and hands its descriptor to our fault thread (fork() waits until that
// thread has read the event). At the prepare handler the pager records which pages are remote and
// in which slot (the snapshot), holds those slots and makes a socket pair; the fault thread, as it
// reads the event, sends the child's descriptor to the child over the pair and passes it on, and a
// thread of ours serves the child from then on: a missing fault on a snapshot page is read from
// the servers (through the usual replica/code read path, on the io connections) and installed in
// the child; one on any other page gets a zero page; a write to a page shared write-protected is
// let through. The child keeps its copy of the descriptor and its end of the pair: when our end
// closes (this process killed or exec'd, its runtime stopped, or a page no server could give) the
// child's own thread serves it (pager_fork_child.cc), so the child never depends on us to live.
// While a child lives, the parent never overwrites or frees a held slot: a page it writes and
// evicts again goes to a new slot (PlanPage), and slots it frees stay allocated
// (SlotHolds::Defer). When the child's address space is gone (exit or exec: UffdMmGone), the
// holds are released and the slots the parent let go of are freed.
#include <algorithm>
#include <cstdlib>
#include <mutex>
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
#include "runtime/paging/pager_collect.h"
#include "runtime/paging/pager_internal.h"
#include "runtime/paging/uffd_backlog.h"

namespace tiermem {

using pager_internal::kBatch;
using pager_internal::kPage;
using pager_internal::S;

namespace {
// Pages installed in a child per fault at most: the faulted page and the snapshot pages after it
// (a child reading its data in order takes one round trip per this many pages).
constexpr size_t kChildReadAhead = 32;
// How often a child that does not fault is checked for its end (one ioctl).
constexpr int kChildProbeMs = 50;
// How long the forking thread waits for the fault thread to hand the child's descriptor over
// (it has read the event when fork() returns; this only bounds a broken kernel contract).
constexpr uint64_t kClaimWaitNs = 10'000'000'000;
// Pagers with children, for the exit handler: a parent that returns from main or calls exit()
// while a child still reads its pages installs them all first (docs/protocol.md). Plain array.
std::mutex g_exit_mu;
Pager* g_exit_pagers[16];

void DrainChildrenAtExit() {
  std::lock_guard<std::mutex> lock(g_exit_mu);
  for (Pager*& p : g_exit_pagers) {
    // A forked child inherits the list: its own serving thread must outlive its exit handlers
    // (code after this one may still touch its remote pages), so it is not stopped here.
    if (p != nullptr && !p->forked_child()) p->StopChildren();
    p = nullptr;
  }
}

void RegisterForExit(Pager* pager) {
  static std::atomic<bool> registered{false};
  if (!registered.exchange(true)) atexit(&DrainChildrenAtExit);
  std::lock_guard<std::mutex> lock(g_exit_mu);
  for (Pager* p : g_exit_pagers) {
    if (p == pager) return;
  }
  for (Pager*& p : g_exit_pagers) {
    if (p == nullptr) {
      p = pager;
      return;
    }
  }
}

}  // namespace

void Pager::ForgetAtExit() {
  std::lock_guard<std::mutex> lock(g_exit_mu);
  for (Pager*& p : g_exit_pagers) {
    if (p == this) p = nullptr;
  }
}

void Pager::PrepareFork(Region* const* regions, int nregions) {
  io_mu_.lock();  // no eviction runs across the fork
  DrainWrites();  // and no eviction write is in flight across it
  if (forked_child_) {
    // A child forking: it is served (by its parent, or its own thread), but nobody would serve
    // the grandchild.
    // slots_mu_ stays free: this child's own thread, once it serves, reads the grandchild's fork
    // event during fork() and may Locate a page meanwhile.
    if (parent_serves_) TouchRemoteInChild(regions, nregions);
    children_mu_.lock();
    return;
  }
  // Sampled pages are put back first (the child would read them as zeros), and stay so.
  if (sampler_) sampler_->Freeze();
  if (!fork_share_) {
    FetchAllForFork(regions, nregions);
    slots_mu_.lock();
    children_mu_.lock();
    return;
  }
  // slots_mu_ stays free: the fault thread reads the fork event during fork() and may Locate a
  // page meanwhile. The child starts with a fresh one (AfterForkChild). children_mu_ is held
  // across the fork (the fault thread never takes it): the child then sees every other child's
  // socket end as it is, and closes its copies (pager_fork_child.cc).
  SnapshotForFork(regions, nregions);
  children_mu_.lock();
}

void Pager::SnapshotForFork(Region* const* regions, int nregions) {
  auto snap = std::make_unique<ForkSnapshot>();
  for (int r = 0; r < nregions; ++r) {
    Region& region = *regions[r];
    const uint64_t hw = region.high_water();
    for (uint64_t i = 0; i < hw; ++i) {
      PageRecord& rec = region.record(i);
      const uint8_t st = rec.state.load(std::memory_order_acquire);
      // kInFlight: the fault thread may be installing it; the child's copy is missing then, and
      // the slot holds its contents (evictions and frees wait for io_mu_, which we hold).
      if (st != S(PageState::kRemote) && st != S(PageState::kInFlight)) continue;
      const uint32_t slot1 = rec.remote_slot.load(std::memory_order_relaxed);
      if (slot1 == 0) continue;  // never written: a zero page in the child too
      snap->entries.push_back({static_cast<uint32_t>(r), slot1 - 1, i});
      holds_.Hold(slot1 - 1);
    }
  }
  fork_regions_.assign(regions, regions + nregions);
  if (snap->entries.empty()) return;  // nothing remote: the child gets no server
  // The child's way to its own descriptor, and to our end (pager_fork_child.cc). Without it the
  // child is served as long as this process lives, no longer.
  if (const int rc = os::SocketPairCloexec(fork_sock_); rc != 0) {
    TM_LOG_WARN("remote tier: fork(): no socket pair for the child (%s): it is served only while "
                "this process lives", strerror(-rc));
    fork_sock_[0] = fork_sock_[1] = -1;
  }
  fork_send_.store(fork_sock_[0], std::memory_order_release);
  snap->regions = fork_regions_;
  snap->Seal();
  fork_pending_ = snap.get();
  fork_snapshot_.store(snap.release(), std::memory_order_release);
}

void Pager::FetchAllForFork(Region* const* regions, int nregions) {
  // The child gets no fault handler and no userfaultfd registration (its evicted pages would
  // read as zeros), so every remote page comes back before the fork. Cheap when nothing is
  // remote: the scan stops at each region's high-water mark.
  for (int r = 0; r < nregions; ++r) {
    Region& region = *regions[r];
    const uint64_t hw = region.high_water();
    for (uint64_t i = 0; i < hw; ++i) {
      uint8_t st = region.record(i).state.load(std::memory_order_acquire);
      if (st != S(PageState::kRemote) && st != S(PageState::kInFlight)) continue;
      uint64_t j = i;
      while (j < hw && region.record(j).state.load(std::memory_order_acquire) != S(PageState::kLocal) &&
             region.record(j).state.load(std::memory_order_acquire) != S(PageState::kFree)) {
        ++j;
      }
      auto got = FetchBackLocked(region, i, j - i);
      if (!got.ok()) Fatal(region.PageAddress(i), first_connected_, got.status());
      // Pages the fault handler is installing right now (kInFlight) finish on their own.
      for (uint64_t k = i; k < j; ++k) {
        while (region.record(k).state.load(std::memory_order_acquire) == S(PageState::kInFlight)) {
          std::this_thread::yield();
        }
      }
      i = j;
    }
  }
}

void Pager::OnForkEvent(int fd) {
  // Runs inside fork() (the forking thread waits for this read): no allocation, no lock.
  ForkSnapshot* snap = fork_snapshot_.exchange(nullptr, std::memory_order_acq_rel);
  if (snap == nullptr) {
    // Nothing of the parent's was remote (or a fork without our handlers): closing the child's
    // descriptor unregisters its ranges, and its memory behaves as plain memory.
    (void)os::Close(fd);
    return;
  }
  // Kept for the child's life: moved out of the numbers the program reuses (os::KeepHigh).
  fd = os::KeepHigh(fd);
  // The child's copy first (sendmsg: no allocation, no lock): it is queued before the child runs.
  const int sock = fork_send_.exchange(-1, std::memory_order_acq_rel);
  // Where that fails the child finds no descriptor and says so (a line here would allocate); it
  // is served only while this process lives.
  if (sock >= 0) (void)os::SendFd(sock, fd);
  fork_taken_.store(snap, std::memory_order_relaxed);
  fork_fd_.store(fd, std::memory_order_release);
}

void Pager::AfterFork(bool child) {
  if (child && !forked_child_ && fork_share_) {
    AfterForkChild(fork_pending_);  // releases the locks
    return;
  }
  if (forked_child_ || !fork_share_) {
    AfterForkUnshared(child);
    return;
  }
  fork_regions_.clear();
  ForkSnapshot* const pending = fork_pending_;
  fork_pending_ = nullptr;
  int fd = -1;
  ForkSnapshot* snap = nullptr;
  if (pending != nullptr) ClaimForkEvent(pending, &fd, &snap);
  if (fd >= 0 && snap != nullptr) StartServingChild(fd, snap);
  fork_sock_[0] = fork_sock_[1] = -1;
  children_mu_.unlock();
  if (sampler_) sampler_->Thaw();
  io_mu_.unlock();
}

// A child's own fork (its remote pages were touched in: the grandchild's descriptor is closed
// by whoever serves this child), or no sharing: the locks PrepareFork took are released, and a
// child forgets the serving that was its parent's.
void Pager::AfterForkUnshared(bool child) {
  const bool slots_locked = !forked_child_;  // PrepareFork took slots_mu_ (fetch)
  if (child && forked_child_) {
    // Locks this child's serving thread may have held at the fork.
    new (&slots_mu_) std::mutex();
    new (&repair_mu_) std::mutex();
    new (&self_mu_) std::mutex();
  }
  if (child) {
    forked_child_ = true;
    parent_serves_ = false;
    if (self_) {  // the child's serving is not the grandchild's (its thread is not here)
      (void)os::Close(self_->fd);
      (void)os::Close(self_->sock);
      (void)self_.release();
    }
    took_over_.store(false, std::memory_order_relaxed);  // the connections are the child's
  }
  if (sampler_ && !child && !forked_child_) sampler_->Thaw();
  children_mu_.unlock();
  if (slots_locked) slots_mu_.unlock();
  io_mu_.unlock();
}

// The parent, after fork() returned: the fault thread has read the fork event and hands its
// descriptor over (OnForkEvent) right after; waits for it, a bounded time. *fd stays -1 and the
// snapshot is released when no event came (the child then gets none of the remote pages).
void Pager::ClaimForkEvent(ForkSnapshot* pending, int* fd, ForkSnapshot** snap) {
  const uint64_t until = Now() + kClaimWaitNs;
  for (;;) {
    *fd = fork_fd_.exchange(-1, std::memory_order_acq_rel);
    if (*fd >= 0) {
      *snap = fork_taken_.exchange(nullptr, std::memory_order_relaxed);
      break;
    }
    ForkSnapshot* mine = pending;
    if (Now() > until && fork_snapshot_.compare_exchange_strong(mine, nullptr, std::memory_order_acq_rel)) {
      TM_LOG_WARN("remote tier: fork(): no userfaultfd fork event came; the child was not given "
                  "this process's remote pages");
      ReleaseSnapshot(*pending);
      delete pending;
      break;
    }
    config_.clock->SleepUntil(Now() + 50'000);
  }
  fork_send_.store(-1, std::memory_order_relaxed);
  (void)os::Close(fork_sock_[1]);  // the child's end, the child's alone
  if (*fd < 0) (void)os::Close(fork_sock_[0]);
}

// A thread of its own serves the new child's faults from `snap` (ServeChild); children that
// ended are joined first (each of their threads is done with everything). children_mu_ held.
void Pager::StartServingChild(int fd, ForkSnapshot* snap) {
  std::erase_if(children_, [](const std::unique_ptr<ForkChild>& c) {
    if (!c->done.load(std::memory_order_acquire)) return false;
    c->thread.join();
    return true;
  });
  auto c = std::make_unique<ForkChild>();
  c->fd = fd;
  c->sock = fork_sock_[0];
  c->snap.reset(snap);
  ForkChild* raw = c.get();
  {
    NewRuntimeThreadSignals quiet;
    c->thread = std::thread([this, raw] {
      OnRuntimeThreadStart();
      ServeChild(raw);
    });
  }
  children_.push_back(std::move(c));
  fork_children_.fetch_add(1, std::memory_order_relaxed);
  RegisterForExit(this);
}

void Pager::HandOver(ForkChild* c) {
  std::lock_guard<std::mutex> lock(children_mu_);  // the socket ends are read by a forking child
  (void)os::Close(c->sock);
  c->sock = -1;
}

void Pager::ServeChild(ForkChild* c) {
  ForkSnapshot& snap = *c->snap;
  const auto& entries = snap.entries;
  std::vector<char> staging(kChildReadAhead * kPage);
  // A snapshot page: registered with write-protect in the child (UffdMmGone's probe).
  char* probe = snap.RegionOf(entries[0])->PageAddress(entries[0].index);
  os::UffdFault faults[64];
  std::vector<int64_t> batch;
  batch.reserve(kBatch);
  // The child's own fork waits for this thread to read its event (uffd_backlog.h): a grandchild
  // gets no server (its parent took its remote pages in first), so its descriptor is closed.
  UffdBacklog backlog(c->fd, [](void*, int fd) { (void)os::Close(fd); }, nullptr, 256);
  backlog.Install();
  bool gone = false, stop = false;
  while (!gone && !stop) {
    if (c->sock < 0) {
      // Handed over (a page no server could give us): the child serves itself; we only wait
      // for its end to release the holds.
      if (os::WaitStop(fork_stop_fd_, kChildProbeMs) == 1) break;
      gone = os::UffdMmGone(c->fd, probe, kPage);
      continue;
    }
    const int w = backlog.empty() ? os::WaitReadableFor(c->fd, fork_stop_fd_, kChildProbeMs) : 0;
    if (w == 1 || w < 0) {
      stop = true;
      break;
    }
    if (w == 2) {
      gone = os::UffdMmGone(c->fd, probe, kPage);
      continue;
    }
    auto got = backlog.Read(faults, 64);
    if (!got.ok()) {
      TM_LOG_ERROR("remote tier: serving a forked child: %s", got.status().message().c_str());
      stop = true;
      break;
    }
    for (size_t k = 0; k < *got && !gone && c->sock >= 0; ++k) {
      gone = !ServeChildFault(c, faults[k], &batch, staging.data());
    }
  }
  // The parent is going away: everything the child may still read is installed now. All in:
  // the child needs no slot any more.
  const bool all_in = stop && !gone && c->sock >= 0 && InstallAllInChild(c, &batch, staging.data(), &gone);
  UffdBacklog::Uninstall();
  if (c->sock >= 0) HandOver(c);  // whatever is left the child serves itself
  if (gone || all_in) {
    std::lock_guard<std::mutex> lock(io_mu_);
    ReleaseSnapshot(snap);
  }
  // Otherwise (this runtime stops after a handover) the holds stay: the child may still read
  // the slots, and memd ends the sessions with their last connection.
  (void)os::Close(c->fd);
  c->fd = -1;
  c->done.store(true, std::memory_order_release);
}

// One fault of the child (a grandchild's descriptor was closed before): a write to a page
// shared write-protected is let through, a page not remote at the fork gets zeros, and a
// snapshot page is installed with the ones that follow it. False when the child is gone.
bool Pager::ServeChildFault(ForkChild* c, const os::UffdFault& f, std::vector<int64_t>* batch, char* staging) {
  ForkSnapshot& snap = *c->snap;
  const auto& entries = snap.entries;
  char* addr = reinterpret_cast<char*>(f.address & ~uint64_t(kPage - 1));
  if (f.wp) {  // a write to a page shared write-protected: the child does not track it
    (void)os::UffdWriteProtect(c->fd, addr, kPage, false);
    os::UffdWake(c->fd, addr, kPage);
    return true;
  }
  Region* region = config_.events->RegionOf(addr);
  const int64_t j = region != nullptr ? snap.Find(region, region->PageIndex(addr)) : -1;
  if (j < 0 || snap.served[j]) {
    // Not remote at the fork (dropped or never touched since), or installed before and
    // dropped by the child since: zeros (present already: left as it is).
    (void)os::UffdZeroPage(c->fd, addr, kPage);
    os::UffdWake(c->fd, addr, kPage);
    fork_zero_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  batch->clear();
  for (int64_t x = j; x < int64_t(entries.size()) && batch->size() < kChildReadAhead; ++x) {
    if (x > j && (entries[x].region != entries[j].region || entries[x].index != entries[x - 1].index + 1)) break;
    if (snap.served[x]) break;
    batch->push_back(x);
  }
  return InstallInChild(c, *batch, staging);
}

// Installs every snapshot page the child has not had yet. True when all went in; *gone when
// the child went away meanwhile.
bool Pager::InstallAllInChild(ForkChild* c, std::vector<int64_t>* batch, char* staging, bool* gone) {
  ForkSnapshot& snap = *c->snap;
  const size_t n = snap.entries.size();
  batch->clear();
  for (size_t x = 0; x < n && !*gone && c->sock >= 0; ++x) {
    if (!snap.served[x]) batch->push_back(int64_t(x));
    if (batch->size() == kChildReadAhead || (x + 1 == n && !batch->empty())) {
      *gone = !InstallInChild(c, *batch, staging);
      batch->clear();
    }
  }
  return !*gone && c->sock >= 0;
}

bool Pager::InstallInChild(ForkChild* c, const std::vector<int64_t>& e, char* staging) {
  ForkSnapshot& snap = *c->snap;
  uint64_t slots[kChildReadAhead];
  for (size_t i = 0; i < e.size(); ++i) slots[i] = snap.entries[e[i]].slot;
  size_t lost = 0;
  Status why;
  bool ok;
  {
    std::lock_guard<std::mutex> lock(io_mu_);
    DrainWrites();
    ok = ReadSlots(slots, e.size(), staging, &lost, &why);
  }
  if (!ok) {
    // The child reads it itself (its own connections), fails the same way and exits 75 with a
    // line naming the page's servers: it is handed the serving, and we stop reading its faults.
    const ForkSnapshot::Entry& en = snap.entries[e[lost]];
    TM_LOG_WARN("remote tier: the page at %p of a forked child could not be read (%s); the child "
                "serves itself from now on", static_cast<void*>(snap.RegionOf(en)->PageAddress(en.index)),
                why.message().c_str());
    HandOver(c);
    return true;
  }
  // Consecutive pages (a fault and its read-ahead) in one copy; else, or where that fails (the
  // child replaced part of the range), page by page. A page present there already is left.
  const ForkSnapshot::Entry& first = snap.entries[e[0]];
  const ForkSnapshot::Entry& last = snap.entries[e.back()];
  const bool run = last.region == first.region && last.index - first.index + 1 == e.size();
  char* at = snap.RegionOf(first)->PageAddress(first.index);
  if (!(run && os::UffdCopy(c->fd, at, staging, e.size() * kPage, false).ok())) {
    for (size_t i = 0; i < e.size(); ++i) {
      const ForkSnapshot::Entry& en = snap.entries[e[i]];
      char* addr = snap.RegionOf(en)->PageAddress(en.index);
      if (!os::UffdCopy(c->fd, addr, staging + i * kPage, kPage, false).ok() &&
          os::UffdMmGone(c->fd, addr, kPage)) {
        return false;
      }
    }
  }
  for (size_t i = 0; i < e.size(); ++i) {
    snap.served[e[i]] = 1;
    if (!run) {
      const ForkSnapshot::Entry& en = snap.entries[e[i]];
      os::UffdWake(c->fd, snap.RegionOf(en)->PageAddress(en.index), kPage);
    }
  }
  fork_served_.fetch_add(e.size(), std::memory_order_relaxed);
  if (run) os::UffdWake(c->fd, at, e.size() * kPage);
  return true;
}

bool Pager::ReadSlots(const uint64_t* slots, size_t n, char* staging, size_t* lost, Status* why) {
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

void Pager::ReleaseSnapshot(ForkSnapshot& snap) {
  for (const ForkSnapshot::Entry& e : snap.entries) {
    if (holds_.Release(e.slot)) GiveSlotNow(e.slot);
  }
}

void Pager::StopChildren() {
  std::vector<std::unique_ptr<ForkChild>> children;
  {
    std::lock_guard<std::mutex> lock(children_mu_);
    children.swap(children_);
  }
  const bool own = self_ != nullptr && self_->thread.joinable();  // a child's own thread
  if (children.empty() && !own) return;
  os::EventFdSignal(fork_stop_fd_);
  for (auto& c : children) {
    if (c->thread.joinable()) c->thread.join();
  }
  if (own) self_->thread.join();
}

Pager::ForkStats Pager::fork_stats() const {
  ForkStats s;
  s.children = fork_children_.load(std::memory_order_relaxed);
  s.served = fork_served_.load(std::memory_order_relaxed);
  s.zero_filled = fork_zero_.load(std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(children_mu_);
    for (const auto& c : children_) s.live += c->done.load(std::memory_order_acquire) ? 0 : 1;
  }
  {
    std::lock_guard<std::mutex> lock(const_cast<std::mutex&>(io_mu_));
    s.held_slots = holds_.size();
  }
  s.took_over = took_over_.load(std::memory_order_acquire);
  return s;
}

}  // namespace tiermem

// The pager and fork(), the parent's side: remote pages stay remote and the child serves them
// itself (the design, and why, in docs/design-notes.md, "fork: remote pages shared with the
// child"; the child's side is pager_fork_child.cc).
//
// The pager's userfaultfd asks for no fork events, so the kernel gives a child plain copies of
// the registered ranges: a page remote here is simply missing there. At the prepare handler
// (evictions stopped and drained: io_mu_) the pager records which pages are remote and in which
// slot (the snapshot), holds those slots, and makes a pipe. The child, in its handler, registers
// the snapshot's pages with a userfaultfd of its own and serves them from the slots with a thread
// and memd connections of its own (they join this pager's sessions); it needs nothing of this
// process after fork() returns. This process keeps the pipe's read end, the child its write end
// (close-on-exec): end of file once the child exited or exec'd. While a child lives, the parent
// never overwrites or frees a held slot: a page it writes and evicts again goes to a new slot
// (PlanPage), and slots it frees stay allocated (SlotHolds::Defer). At the child's end the holds
// are released and the slots the parent let go of are freed. A parent that dies first changes
// nothing for the child: memd frees a session's slots when its last connection closes, the
// child's included.
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
#include "runtime/paging/pager_internal.h"

namespace tiermem {

using pager_internal::S;

void Pager::PrepareFork(Region* const* regions, int nregions) {
  io_mu_.lock();  // no eviction runs across the fork
  DrainWrites();  // and no eviction write is in flight across it
  // slots_mu_ is held across the fork too (every path): the child starts with it free.
  if (forked_child_) {
    // A child forking: its thread serves its remote pages, but the grandchild gets neither that
    // thread nor a registration, so they come in first (served by that thread, which takes
    // self_mu_ and never io_mu_).
    if (self_) TouchRemoteInChild(regions, nregions);
    slots_mu_.lock();
    return;
  }
  // Sampled pages are put back first (the child would read them as zeros), and stay so.
  if (sampler_) sampler_->Freeze();
  if (fork_share_) {
    SnapshotForFork(regions, nregions);
  } else {
    FetchAllForFork(regions, nregions);
  }
  slots_mu_.lock();
}

void Pager::SnapshotForFork(Region* const* regions, int nregions) {
  auto snap = std::make_unique<ForkSnapshot>();
  for (int r = 0; r < nregions; ++r) {
    Region& region = *regions[r];
    const uint64_t hw = region.high_water();
    for (uint64_t i = 0; i < hw; ++i) {
      PageRecord& rec = region.record(i);
      const uint8_t st = rec.state.load(std::memory_order_acquire);
      // kInFlight: the fault thread may be installing it; the child's copy is missing then (or
      // present and whole: UFFDIO_COPY and the fork's copy of the page tables exclude each
      // other), and the slot holds its contents (evictions and frees wait for io_mu_).
      if (st != S(PageState::kRemote) && st != S(PageState::kInFlight)) continue;
      const uint32_t slot1 = rec.remote_slot.load(std::memory_order_relaxed);
      if (slot1 == 0) continue;  // never written: a zero page in the child too
      snap->entries.push_back({static_cast<uint32_t>(r), slot1 - 1, i});
    }
  }
  fork_regions_.assign(regions, regions + nregions);
  if (snap->entries.empty()) return;  // nothing remote: the child is left alone
  if (const int rc = os::PipeCloexec(fork_pipe_); rc != 0) {
    TM_LOG_WARN("remote tier: fork(): no pipe to see the child's end (%s); its remote pages are "
                "brought back instead", strerror(-rc));
    FetchAllForFork(regions, nregions);
    return;
  }
  for (const ForkSnapshot::Entry& e : snap->entries) holds_.Hold(e.slot);
  snap->regions = fork_regions_;
  snap->Seal();
  fork_pending_ = snap.release();
}

void Pager::FetchAllForFork(Region* const* regions, int nregions) {
  // TIERMEM_FORK=fetch: the child gets no userfaultfd registration (its evicted pages would read
  // as zeros), so every remote page comes back before the fork. Cheap when nothing is remote:
  // the scan stops at each region's high-water mark.
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

void Pager::AfterFork(bool child) {
  if (child) {
    AfterForkChild();
  } else {
    AfterForkParent();
  }
}

void Pager::AfterForkParent() {
  fork_regions_.clear();
  ForkSnapshot* const snap = fork_pending_;
  fork_pending_ = nullptr;
  if (snap != nullptr) {
    (void)os::Close(fork_pipe_[1]);  // the child's alone from now on
    std::lock_guard<std::mutex> lock(children_mu_);
    // Children that ended: their threads are joined here (each is done with everything).
    std::erase_if(children_, [](const std::unique_ptr<ForkChild>& c) {
      if (!c->done.load(std::memory_order_acquire)) return false;
      c->thread.join();
      return true;
    });
    auto c = std::make_unique<ForkChild>();
    c->fd = fork_pipe_[0];
    c->snap.reset(snap);
    ForkChild* raw = c.get();
    {
      NewRuntimeThreadSignals quiet;
      c->thread = std::thread([this, raw] {
        OnRuntimeThreadStart();
        WatchChild(raw);
      });
    }
    TM_LOG_INFO("remote tier: fork(): %zu pages stay remote, their slots held until the child "
                "exits or execs (it serves them itself)", raw->snap->entries.size());
    children_.push_back(std::move(c));
    fork_children_.fetch_add(1, std::memory_order_relaxed);
    fork_pipe_[0] = fork_pipe_[1] = -1;
  }
  if (sampler_ && !forked_child_) sampler_->Thaw();
  slots_mu_.unlock();
  io_mu_.unlock();
}

void Pager::WatchChild(ForkChild* c) {
  for (;;) {
    const int w = os::WaitReadableFor(c->fd, fork_stop_fd_, -1);
    if (w == 2) continue;  // interrupted
    if (w == 0) {
      // End of file: every copy of the write end is closed (the child exited or exec'd), so
      // nobody reads these slots any more.
      std::lock_guard<std::mutex> lock(io_mu_);
      DrainWrites();
      ReleaseSnapshot(*c->snap);
    } else if (w < 0) {
      TM_LOG_WARN("remote tier: a forked child's end cannot be watched (%s): its slots stay held",
                  strerror(-w));
    }
    // w == 1, the runtime stops: the holds stay. The child goes on reading; memd frees the
    // slots with the session once its last connection, the child's or ours, is closed.
    break;
  }
  (void)os::Close(c->fd);
  c->fd = -1;
  c->done.store(true, std::memory_order_release);
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
  const bool serving = self_ != nullptr && self_->thread.joinable();
  if (children.empty() && !serving) return;
  os::EventFdSignal(fork_stop_fd_);
  for (auto& c : children) {
    if (c->thread.joinable()) c->thread.join();
  }
  if (serving) self_->thread.join();
}

void Pager::TouchRemoteInChild(Region* const* regions, int nregions) {
  for (int r = 0; r < nregions; ++r) {
    Region& region = *regions[r];
    const uint64_t hw = region.high_water();
    for (uint64_t i = 0; i < hw; ++i) {
      PageRecord& rec = region.record(i);
      if (rec.state.load(std::memory_order_relaxed) != S(PageState::kRemote)) continue;
      if (rec.remote_slot.load(std::memory_order_relaxed) == 0) continue;  // zeros either way
      // A read: this process's serving thread installs it (or it is here already).
      (void)*reinterpret_cast<volatile const char*>(region.PageAddress(i));
      rec.remote_slot.store(0, std::memory_order_relaxed);
      rec.flags.fetch_and(uint8_t(~(kPageRemoteClean | kPageAhead)), std::memory_order_relaxed);
      if (config_.on_resident) config_.on_resident(region, i, 1, true);
      rec.state.store(S(PageState::kLocal), std::memory_order_relaxed);
    }
  }
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
  return s;
}

}  // namespace tiermem

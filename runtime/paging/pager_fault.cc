// The pager, second half: the fault handler thread's loop and its installs. It takes the queued
// userfaultfd faults in batches (pager_fault_intake.cc reads them and posts the reads of the
// remote ones, pipelined over each server's fault connections), and installs each page as its
// read completes; pages fetched ahead are installed by window. System calls go through base/os.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/exit_files.h"
#include "base/log.h"
#include "base/os.h"
#include "base/own_memory.h"
#include "runtime/pages/page_table.h"
#include "runtime/paging/pager.h"
#include "runtime/paging/pager_collect.h"
#include "runtime/paging/pager_fault_batch.h"
#include "runtime/paging/pager_internal.h"
#include "runtime/paging/uffd_backlog.h"

namespace tiermem {

using pager_internal::HandlerFails;
using pager_internal::kBatch;
using pager_internal::kPage;
using pager_internal::kZeroBatch;
using pager_internal::S;

void ExitRemoteLost() {
  RemoveExitFiles();
  std::_Exit(kRemoteLostExitCode);
}

void pager_internal::HandlerFails(const Status& why) {
  TM_LOG_ERROR("remote tier: fault handler: %s", why.message().c_str());
  ExitRemoteLost();
}

void Pager::Fatal(const void* addr, size_t server, const Status& why) {
  const std::string& name = server < servers_.size() ? servers_[server]->name : server_;
  TM_LOG_ERROR("remote tier: the page at %p could not be fetched from memory server %s: %s; "
               "exiting (status %d) rather than hand the program a zero page",
               addr, name.c_str(), why.message().c_str(), kRemoteLostExitCode);
  RemoveExitFiles();
  std::_Exit(kRemoteLostExitCode);
}

bool Pager::InstallOneAhead(Region& region, uint64_t index, const char* page, bool copied) {
  PageRecord& rec = region.record(index);
  if (!copied && !os::UffdCopy(uffd_, region.PageAddress(index), page, kPage, wp_).ok()) {
    rec.state.store(S(PageState::kRemote), std::memory_order_release);  // its copy is on the server
    return false;
  }
  if (wp_) rec.flags.fetch_or(kPageRemoteClean, std::memory_order_relaxed);  // clean until written
  else rec.flags.fetch_and(uint8_t(~kPageRemoteClean), std::memory_order_relaxed);
  rec.flags.fetch_or(kPageAhead, std::memory_order_relaxed);  // before on_resident reads it
  config_.events->OnResident(region, index, 1, true);
  rec.state.store(S(PageState::kLocal), std::memory_order_release);
  c_->pages_prefetched.fetch_add(1, std::memory_order_relaxed);
  return true;
}

template <typename At>
void Pager::InstallAhead(size_t n, const char* staging, const At& at) {
  // In runs of one stride (a window is one run): one wake per run, and for a sequential run one
  // UFFDIO_COPY. A thread that reached one of these pages while it was in flight sleeps until
  // its run is in; installed and woken page by page, a thread reading through a window slept and
  // woke once per page (about 8 us each here). The wake covers the run's whole span: a thread
  // waiting there on a page of no run retries and faults again (its fault is still queued).
  // Pages of strided runs were installed as they arrived (AheadPage::installed): only woken here.
  for (size_t a = 0; a < n;) {
    const AheadPage first = at(a);
    if (first.region == nullptr) {
      ++a;
      continue;
    }
    size_t b = a + 1;
    int64_t stride = 0;
    for (; b < n; ++b) {
      const AheadPage next = at(b);
      if (next.region != first.region) break;
      const int64_t step = static_cast<int64_t>(next.index - at(b - 1).index);
      if (stride == 0) stride = step;
      if (step != stride || step == 0) break;
    }
    Region& region = *first.region;
    const size_t pages = b - a;
    // A sequential run that crosses into another mapping cannot be one copy: page by page then
    // (a page the failed copy installed counts as installed); one that still fails stays remote,
    // its copy on the server.
    const bool whole = stride == 1 && !first.installed &&
        os::UffdCopy(uffd_, region.PageAddress(first.index), staging + a * kPage, pages * kPage, wp_).ok();
    uint64_t lo = first.index, hi = first.index;
    for (size_t k = a; k < b; ++k) {
      const AheadPage page = at(k);
      lo = std::min(lo, page.index);
      hi = std::max(hi, page.index);
      if (!page.installed) (void)InstallOneAhead(region, page.index, staging + k * kPage, whole);
    }
    Wake(region.PageAddress(lo), (hi - lo + 1) * kPage);
    a = b;
  }
}

void Pager::FaultLoop() {
  UffdBacklog backlog(uffd_, [](void* self, int fd) { static_cast<Pager*>(self)->OnForkEvent(fd); }, this);
  FaultBatch b(&backlog);
  int err = 0;
  b.staging = b.staging_map.Map((kBatch + 1) * kPage, &err);
  b.zeros = b.staging == nullptr ? nullptr : os::Reserve(kZeroBatch * kPage, &err);
  // Coded pages: room for the parity pieces each read may bring (a page's share of `spare`).
  b.spare_bytes = SpareBytes();
  b.spare = b.spare_bytes == 0 || b.zeros == nullptr ? nullptr : b.spare_map.Map(kBatch * b.spare_bytes, &err);
  if (b.zeros == nullptr || (b.spare_bytes > 0 && b.spare == nullptr)) {
    HandlerFails(Internal(std::string("cannot map its buffers: ") + strerror(-err)));
  }
  b.pending.reserve(kBatch);
  b.window_open.reserve(kBatch);
  // The faults read while one of our ioctls waits out a fork (uffd_backlog.h): read from here first.
  backlog.Install();
  // Everything this thread allocates is allocated now (its first malloc sets up glibc's
  // per-thread cache and arena, under locks a fork() holds): Start returns only after this, so
  // the program cannot fork while this thread is still in malloc.
  fault_ready_.store(true, std::memory_order_release);
  fault_ready_.notify_all();
  // After a batch of soft-sampled faults only (served here, no server involved), the handler
  // polls for kSampledSpinNs before it sleeps: a thread sweeping through sampled pages faults
  // again within microseconds, and waking a sleeping handler across CPUs costs tens of them on
  // virtual machines (docs/tiering.md, "Soft eviction"). After remote reads it polls for
  // fault_spin_ns_ (TIERMEM_FAULT_SPIN_US; by default only when every server is RDMA, whose
  // reads take no memd CPU: spinning takes memd's CPU where the two share few cores, TCP on
  // loopback), which saves the faulting thread's wake-up of a sleeping handler on its next
  // fault (docs/protocol.md, "Where a fault's time goes").
  constexpr uint64_t kSampledSpinNs = 50'000;
  bool sampled_only = false, read_remote = false;
  for (;;) {
    if (backlog.empty()) {
      const uint64_t spin = sampled_only ? kSampledSpinNs : read_remote ? fault_spin_ns_ : 0;
      auto ready = os::WaitReadable(uffd_, stop_fd_, spin);
      if (!ready.ok()) HandlerFails(ready.status());
      if (*ready == 1) break;  // stop
    }
    // Take every fault queued now (up to kBatch), post the reads, then install as they arrive.
    b.Reset();
    TakeFaults(b);
    CollectFaults(b);
    // Throttle: the core may hold the handler back here while DRAM is over its budget.
    config_.events->AfterFaults();
    sampled_only = b.sampled > 0 && b.pending.empty() && b.zero_filled == 0;
    read_remote = !b.pending.empty();
  }
  UffdBacklog::Uninstall();
  os::Unmap(b.zeros, kZeroBatch * kPage);
}

void Pager::CollectFaults(FaultBatch& b) {
  // The replies are taken as they come, from every connection of every server at once; faults
  // that come meanwhile are read and posted too while staging has room, so a slow server (or
  // connection) holds its own pages only, not the faults behind them. A window fetched ahead
  // is installed once it is all in (or at the batch's end).
  for (;;) {
    const bool more = CollectReads(
        true, b.outstanding, b.pending.size(),
        [&](size_t j) { return j < b.pending.size() ? &b.pending[j].rr : nullptr; },
        [&](size_t j, size_t server) {
          if (b.pending[j].ahead) {
            AheadArrived(b, j);
          } else {
            InstallFault(b, j, server);
          }
        },
        [&](size_t j) {
          FaultBatch::Pending& p = b.pending[j];
          // A prefetch no replica could serve: it stays remote. A thread that faulted on it
          // while it was in flight is woken to fault again (and meets the trouble itself).
          if (p.ahead) {
            p.region->record(p.index).state.store(S(PageState::kRemote), std::memory_order_release);
            p.lost = true;
            Wake(p.region->PageAddress(p.index), kPage);
            return;
          }
          FatalAll(p.region->PageAddress(p.index), p.rr.ref, p.rr.last);
        },
        b.Room() ? uffd_ : -1);
    const size_t posted = b.pending.size();
    FinishWindows(b, more);
    if (!more && b.pending.size() == posted) break;
    if (more) TakeFaults(b);
  }
}

void Pager::InstallFault(FaultBatch& b, size_t j, size_t server) {
  FaultBatch::Pending& p = b.pending[j];
  c_->fault_read_latency.Record(os::MonotonicNanos() - p.rr.posted_ns);
  char* dst = p.region->PageAddress(p.index);
  // Installed write-protected after a read fault: it stays clean until written. The wake is a
  // call of its own, after the record says kLocal: a thread woken before would find its page
  // kInFlight, and a Migrate of it right after the fault (an evictor leaves kInFlight pages
  // alone) would skip it.
  const bool protect = wp_ && !p.write;
  Status cs = os::UffdCopy(uffd_, dst, p.rr.buf, kPage, protect);
  if (!cs.ok()) Fatal(dst, server, cs);
  PageRecord& rec = p.region->record(p.index);
  if (protect) rec.flags.fetch_or(kPageRemoteClean, std::memory_order_relaxed);
  else rec.flags.fetch_and(uint8_t(~kPageRemoteClean), std::memory_order_relaxed);
  c_->remote_faults.fetch_add(1, std::memory_order_relaxed);  // before the wake: counted when seen
  servers_[server]->c->faults.fetch_add(1, std::memory_order_relaxed);
  c_->fault_latency.Record(os::MonotonicNanos() - p.reported_ns);
  config_.events->OnResident(*p.region, p.index, 1, true);
  rec.state.store(S(PageState::kLocal), std::memory_order_release);
  Wake(dst, kPage);
}

void Pager::AheadArrived(FaultBatch& b, size_t j) {
  // A strided window cannot be one UFFDIO_COPY: each of its pages is placed as it arrives,
  // while the server still sends the rest, and woken with its window once the window is in. A
  // page that cannot be placed now stays remote; a thread waiting there is woken to fault again
  // (its earlier fault met it in flight).
  FaultBatch::Pending& p = b.pending[j];
  p.arrived = true;
  if (!p.early) return;
  p.installed = InstallOneAhead(*p.region, p.index, p.rr.buf, false);
  if (!p.installed) {
    p.arrived = false;
    p.lost = true;
    Wake(p.region->PageAddress(p.index), kPage);
  }
}

void Pager::FinishWindows(FaultBatch& b, bool more) {
  // Windows with a read still out wait (installing part of one would make its thread sleep and
  // wake more than once); at the batch's end every arrived page is installed.
  b.window_open.assign(b.pending.size(), false);
  if (more) {
    for (const FaultBatch::Pending& p : b.pending) {
      if (p.ahead && !p.arrived && !p.lost) b.window_open[p.window] = true;
    }
  }
  InstallAhead(b.pending.size(), b.staging, [&](size_t j) -> AheadPage {
    const FaultBatch::Pending& p = b.pending[j];
    const bool now = p.ahead && p.arrived && !p.woken && !b.window_open[p.window];
    return {now ? p.region : nullptr, p.index, p.installed};
  });
  // A stream's window in: its next one may be asked for now (Prefetcher::OnWindowIn).
  const size_t posted = b.pending.size();
  for (size_t j = 0; j < posted; ++j) {
    FaultBatch::Pending& p = b.pending[j];
    if (!p.ahead || !p.arrived || p.woken || b.window_open[p.window]) continue;
    p.woken = true;
    const bool part_end = j + 1 == posted || !b.pending[j + 1].ahead || b.pending[j + 1].window != p.window;
    if (part_end && prefetcher_.max_window() > 0) {
      FetchAhead(b, p.region, p.tid, prefetcher_.OnWindowIn(p.tid, reinterpret_cast<uintptr_t>(p.region), p.index), 64);
    }
  }
}

}  // namespace tiermem

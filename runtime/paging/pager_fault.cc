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
void Pager::InstallAhead(size_t n, const At& at) {
  // In runs of one stride (a window is one run): one wake per run, and for a sequential run
  // whose pages lie side by side in staging one UFFDIO_COPY. A thread that reached one of these
  // pages while it was in flight sleeps until its run is in; installed and woken page by page, a
  // thread reading through a window slept and woke once per page. The wake covers the run's
  // whole span: a thread waiting there on a page of no run retries and faults again (its fault
  // is still queued). Pages of strided runs were installed as they arrived
  // (AheadPage::installed): only woken here.
  for (size_t a = 0; a < n;) {
    const AheadPage first = at(a);
    if (first.region == nullptr) {
      ++a;
      continue;
    }
    size_t b = a + 1;
    int64_t stride = 0;
    bool adjacent = true;  // each page's staging right after the one before
    for (; b < n; ++b) {
      const AheadPage next = at(b);
      if (next.region != first.region) break;
      const AheadPage before = at(b - 1);
      const int64_t step = static_cast<int64_t>(next.index - before.index);
      if (stride == 0) stride = step;
      if (step != stride || step == 0) break;
      adjacent = adjacent && next.page == before.page + kPage;
    }
    Region& region = *first.region;
    const size_t pages = b - a;
    // A sequential run that crosses into another mapping cannot be one copy: page by page then
    // (a page the failed copy installed counts as installed); one that still fails stays remote,
    // its copy on the server.
    const bool whole = stride == 1 && adjacent && !first.installed &&
        os::UffdCopy(uffd_, region.PageAddress(first.index), first.page, pages * kPage, wp_).ok();
    uint64_t lo = first.index, hi = first.index;
    for (size_t k = a; k < b; ++k) {
      const AheadPage page = at(k);
      lo = std::min(lo, page.index);
      hi = std::max(hi, page.index);
      if (!page.installed) (void)InstallOneAhead(region, page.index, page.page, whole);
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
  // The faults read while one of our ioctls waits out a fork (uffd_backlog.h): read from here first.
  backlog.Install();
  // Everything this thread allocates is allocated now (its first malloc sets up glibc's
  // per-thread cache and arena, under locks a fork() holds): Start returns only after this, so
  // the program cannot fork while this thread is still in malloc.
  fault_ready_.store(true, std::memory_order_release);
  fault_ready_.notify_all();
  // After soft-sampled faults only (served here, no server involved), the handler polls for
  // kSampledSpinNs before it sleeps: a thread sweeping through sampled pages faults again within
  // microseconds, and waking a sleeping handler across CPUs costs tens of them on virtual
  // machines (docs/tiering.md, "Soft eviction"). After remote reads it polls for fault_spin_ns_
  // (TIERMEM_FAULT_SPIN_US; by default only when every server is RDMA, whose reads take no memd
  // CPU: spinning takes memd's CPU where the two share few cores, TCP on loopback), which saves
  // the faulting thread's wake-up of a sleeping handler on its next fault (docs/protocol.md,
  // "Where a fault's time goes").
  // The spin after sampled faults adapts: one that met no fault (the program was not sweeping,
  // or had no CPU to fault on while this thread held one) doubles the number of sampled
  // batches after which the handler sleeps at once, up to kSampledSpinSkipMax; one that met a
  // fault resets it.
  constexpr uint64_t kSampledSpinNs = 50'000;
  constexpr uint32_t kSampledSpinSkipMax = 64;
  uint32_t spin_skip = 0, spin_skipped = 0;
  bool sampled_only = false, read_remote = false;
  for (;;) {
    if (backlog.empty()) {
      const bool sampled_spin = sampled_only && spin_skipped++ >= spin_skip;
      const uint64_t spin = sampled_spin ? kSampledSpinNs : read_remote ? fault_spin_ns_ : 0;
      bool slept = false;
      auto ready = os::WaitReadable(uffd_, stop_fd_, spin, &slept);
      if (!ready.ok()) HandlerFails(ready.status());
      if (*ready == 1) break;  // stop
      if (slept) c_->fault_handler_waits.fetch_add(1, std::memory_order_relaxed);
      if (sampled_spin) {
        c_->fault_sampled_spins.fetch_add(1, std::memory_order_relaxed);
        if (!slept) c_->fault_sampled_spins_met.fetch_add(1, std::memory_order_relaxed);
        spin_skip = slept ? std::min(kSampledSpinSkipMax, std::max(1u, spin_skip * 2)) : 0;
        spin_skipped = 0;
      }
    }
    b.sampled = b.posted = 0;
    b.zeroed = false;
    // Take every fault queued now, post the reads, then install each page as its read lands
    // while taking the faults that come meanwhile, until no read is out.
    TakeFaults(b);
    while (b.ReadsOut()) CollectFaults(b);
    if (b.read_faults > 0 || b.reads > 0) ThrottleFaults(b);  // not again right after another call
    sampled_only = b.sampled > 0 && b.posted == 0 && !b.zeroed;
    read_remote = b.posted > 0;
  }
  UffdBacklog::Uninstall();
  os::Unmap(b.zeros, kZeroBatch * kPage);
}

void Pager::ThrottleFaults(FaultBatch& b) {
  // The core may hold the handler back here while DRAM is over its budget; reads still out
  // meanwhile wait in their sockets (and their threads with them) as new faults wait in the
  // userfaultfd.
  config_.events->AfterFaults();
  b.read_faults = b.zero_filled = b.reads = 0;
}

void Pager::CollectFaults(FaultBatch& b) {
  // One collection: the replies are taken as they come, from every connection of every server
  // at once, until a round took some or the userfaultfd has faults (watched while staging has
  // room). Then what came is installed, and the faults that came meanwhile are taken and
  // their reads posted: a slow server (or connection) holds its own pages only, not the faults
  // behind them, and its slots only. A part of a window fetched ahead is installed once all of
  // it is in.
  const bool more = CollectReads(
      true, b.outstanding, FaultBatch::kSlots, [&](size_t j) { return b.Req(j); },
      [&](size_t j, size_t server) {
        if (b.slots[j].ahead) {
          AheadArrived(b, j);
        } else {
          InstallFault(b, j, server);
        }
      },
      [&](size_t j) {
        FaultBatch::Pending& p = b.slots[j];
        // A prefetch no replica could serve: it stays remote. A thread that faulted on it
        // while it was in flight is woken to fault again (and meets the trouble itself).
        if (p.ahead) {
          if (p.lost || p.arrived) return;  // listed twice in one round: counted in its part once
          p.region->record(p.index).state.store(S(PageState::kRemote), std::memory_order_release);
          p.lost = true;
          Wake(p.region->PageAddress(p.index), kPage);
          b.PartIn(j);
          return;
        }
        FatalAll(p.region->PageAddress(p.index), p.rr.ref, p.rr.last);
      },
      true, b.Room() ? uffd_ : -1);
  FinishWindows(b);
  b.Reclaim();
  if (more) TakeFaults(b);
  if (b.Due()) ThrottleFaults(b);  // windows asked for meanwhile (FinishWindows) count too
}

void Pager::InstallFault(FaultBatch& b, size_t j, size_t server) {
  FaultBatch::Pending& p = b.slots[j];
  c_->fault_read_latency.Record(os::MonotonicNanos() - p.rr.posted_ns);
  char* dst = p.region->PageAddress(p.index);
  // Installed write-protected after a read fault: it stays clean until written. The wake is a
  // call of its own, after the record says kLocal: a thread woken before would find its page
  // kInFlight, and a Migrate of it right after the fault (an evictor leaves kInFlight pages
  // alone) would skip it. Only this thread touches a page it claimed (kInFlight) until that
  // store, so its slot is given back right after: nothing reads the staging copy again.
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
  b.Give(j);
}

void Pager::AheadArrived(FaultBatch& b, size_t j) {
  // A strided window cannot be one UFFDIO_COPY: each of its pages is placed as it arrives,
  // while the server still sends the rest, and woken with its part once the part is in. A
  // page that cannot be placed now stays remote; a thread waiting there is woken to fault again
  // (its earlier fault met it in flight).
  FaultBatch::Pending& p = b.slots[j];
  p.arrived = true;
  if (p.early) {
    p.installed = InstallOneAhead(*p.region, p.index, p.rr.buf, false);
    if (!p.installed) {
      p.arrived = false;
      p.lost = true;
      Wake(p.region->PageAddress(p.index), kPage);
    }
  }
  b.PartIn(j);
}

void Pager::FinishWindows(FaultBatch& b) {
  // The parts whose pages are all in (arrived, or lost and left remote), one after the other in
  // the order they became complete: InstallAhead installs a run that spans parts in one copy.
  // A part with a read still out waits (installing part of one would make its thread sleep and
  // wake more than once).
  if (b.nready == 0) return;
  size_t n = 0;
  for (size_t r = 0; r < b.nready; ++r) {
    for (uint16_t j = b.ready[r]; j != FaultBatch::kNone; j = b.slots[j].next) b.order[n++] = j;
  }
  b.nready = 0;
  InstallAhead(n, [&](size_t k) -> AheadPage {
    const FaultBatch::Pending& p = b.slots[b.order[k]];
    return {p.arrived ? p.region : nullptr, p.index, p.installed, p.rr.buf};
  });
  // A part in whose last page arrived: its stream's next window may be asked for now
  // (Prefetcher::OnWindowIn). Its slots are given back first, for that window's reads.
  for (size_t k = 0; k < n; ++k) {
    const FaultBatch::Pending& p = b.slots[b.order[k]];
    Region* region = p.region;
    const uint32_t tid = p.tid;
    const uint64_t index = p.index;
    const bool window_in = p.next == FaultBatch::kNone && p.arrived && prefetcher_.max_window() > 0;
    b.Give(b.order[k]);
    if (window_in) FetchAhead(b, region, tid, prefetcher_.OnWindowIn(tid, reinterpret_cast<uintptr_t>(region), index), 64);
  }
}

}  // namespace tiermem

// The pager, second half: the fault handler thread. It takes the queued userfaultfd faults in
// batches, posts the reads of the remote ones to the server each page lives on (pipelined, one
// connection per server), and installs each page as its read completes. System calls go through
// runtime/os.
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
#include "runtime/paging/pager_internal.h"
#include "runtime/paging/uffd_backlog.h"

namespace tiermem {

using pager_internal::CallOffEviction;
using pager_internal::Cas;
using pager_internal::kBatch;
using pager_internal::kPage;
using pager_internal::kZeroBatch;
using pager_internal::S;

void ExitRemoteLost() {
  RemoveExitFiles();
  std::_Exit(kRemoteLostExitCode);
}

// The handler thread cannot go on (its descriptors or buffers failed): no fault could be served
// again, so the process ends as when a page is lost.
[[noreturn]] static void HandlerFails(const Status& why) {
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
  rec.flags.fetch_or(kPageAhead, std::memory_order_relaxed);  // before OnResident reads it
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
  constexpr uint32_t kAheadPart = 8;
  int err = 0;
  // Staging and spare count as the runtime's own DRAM as far as reads have used them (stage).
  OwnMapping staging_map;
  char* staging = staging_map.Map((kBatch + 1) * kPage, &err);
  // The source of zero fills: never written, so every page of it reads as the zero page (in no
  // process's RSS, so not counted).
  void* zeros = staging == nullptr ? nullptr : os::Reserve(kZeroBatch * kPage, &err);
  // Coded pages: room for the parity pieces each read may bring (a page's share of `spare`).
  const size_t spare_bytes = SpareBytes();
  OwnMapping spare_map;
  char* spare = spare_bytes == 0 || zeros == nullptr ? nullptr : spare_map.Map(kBatch * spare_bytes, &err);
  if (zeros == nullptr || (spare_bytes > 0 && spare == nullptr)) {
    HandlerFails(Internal(std::string("cannot map its buffers: ") + strerror(-err)));
  }
  auto stage = [&](ReadReq& rr, size_t j) {
    staging_map.Touched((j + 1) * kPage);
    if (spare != nullptr) spare_map.Touched((j + 1) * spare_bytes);
    rr.buf = staging + j * kPage;
    rr.spare = spare + j * spare_bytes;
  };
  auto resident = [&](Region& region, uint64_t first, uint64_t n) {
    config_.events->OnResident(region, first, n, true);
  };
  struct Pending {
    Region* region;
    uint64_t index;
    bool write;
    uint64_t reported_ns;  // when the fault was read from userfaultfd
    bool ahead;            // fetched ahead by the prefetcher: no thread waits for it
    bool arrived = false;  // ahead: read, in staging (or installed) for InstallAhead
    bool early = false;    // ahead, on a strided stream: installed as it arrives
    bool installed = false;
    bool lost = false;     // ahead: no replica could serve it (left remote)
    bool woken = false;    // ahead: handed to InstallAhead (installed and woken, or left remote)
    size_t window = 0;     // ahead: its part of a window (the part's first index in `pending`)
    uint32_t tid = 0;      // ahead: the thread whose stream it is
    ReadReq rr{};          // its read, with the replicas tried
  };
  // Allocated here, once: inside fork() glibc holds its malloc locks until this thread has read
  // the fork event, so the loop allocates nothing (uffd_backlog.h).
  std::vector<Pending> pending;
  pending.reserve(kBatch);
  std::vector<bool> window_open;  // per batch: the windows with a read still out
  window_open.reserve(kBatch);
  std::vector<size_t> outstanding(kMaxServers);
  // After a remote fault (Prefetcher::OnFault) or a fault on a page of a window in flight
  // (OnHit): the pages the prefetcher predicts along the thread's stream (prefetch.h) that are
  // remote with a copy on a server are claimed and their reads posted (behind the fault's own),
  // leaving `reserve` staging pages for the faults still to post. A faulted page's thread is
  // woken as its page is in (a connection answers in order), so no thread waits for its
  // prefetches; a window is installed once all of it is in.
  auto fetch_ahead = [&](Region* region, uint32_t tid, const Prefetcher::Ahead& a, size_t reserve) {
    // Installed in parts of kAheadPart pages, each once all of it is in (its first page's place
    // in `pending` names it): the reader wakes after the first part while the rest is still in
    // flight, meets the next part in flight, and that hit asks for the next window (OnHit), so
    // the stream keeps a window in flight ahead of the reader.
    size_t window = pending.size();
    for (uint32_t k = 1; k <= a.count && pending.size() + reserve < kBatch; ++k) {
      if ((k - 1) % kAheadPart == 0) window = pending.size();
      const int64_t at = static_cast<int64_t>(a.from) + a.stride * static_cast<int64_t>(k);
      if (at < 0 || static_cast<uint64_t>(at) >= region->pages()) break;
      PageRecord& r = region->record(static_cast<uint64_t>(at));
      if (!Cas(r, PageState::kRemote, PageState::kInFlight)) continue;  // resident, free or busy
      const uint32_t slot = r.remote_slot.load(std::memory_order_relaxed);
      SlotRef ref;
      if (slot == 0 || !Locate(slot - 1, &ref)) {  // never written: its first touch zero-fills it
        r.state.store(S(PageState::kRemote), std::memory_order_release);
        continue;
      }
      const size_t j = pending.size();
      Pending& p = pending.emplace_back(Pending{region, static_cast<uint64_t>(at), false, 0, true});
      p.early = a.stride != 1;
      p.window = window;
      p.tid = tid;
      p.rr.ref = ref;
      stage(p.rr, j);
      // No replica to read from: nobody needs the page yet; a fault on it meets the trouble.
      if (!PostReplicaRead(true, p.rr, j, outstanding)) {
        r.state.store(S(PageState::kRemote), std::memory_order_release);
        pending.pop_back();
      }
    }
  };
  os::UffdFault faults[64];
  // The faults read while one of our ioctls waits out a fork (uffd_backlog.h): read from here first.
  UffdBacklog backlog(uffd_, [](void* self, int fd) { static_cast<Pager*>(self)->OnForkEvent(fd); }, this);
  backlog.Install();
  // Everything this thread allocates is allocated now (its first malloc sets up glibc's
  // per-thread cache and arena, under locks a fork() holds): Start returns only after this, so
  // the program cannot fork while this thread is still in malloc.
  fault_ready_.store(true, std::memory_order_release);
  fault_ready_.notify_all();
  // After a batch of soft-sampled faults only (served here, no server involved), the handler
  // polls for kSampledSpinNs before it sleeps: a thread sweeping through sampled pages faults
  // again within microseconds, and waking a sleeping handler across CPUs costs tens of them on
  // virtual machines (docs/tiering.md, "Soft eviction"). Never after remote reads by default:
  // spinning there takes memd's CPU where the two share few cores (TCP on loopback). That is TCP's case:
  // after remote reads it polls for fault_spin_ns_ (TIERMEM_FAULT_SPIN_US; by default only when
  // every server is RDMA, whose reads take no memd CPU), which saves the faulting thread's wake-up
  // of a sleeping handler on its next fault (docs/protocol.md, "Where a fault's time goes").
  constexpr uint64_t kSampledSpinNs = 50'000;
  bool sampled_only = false, read_remote = false;
  for (;;) {
    if (backlog.empty()) {
      const uint64_t spin = sampled_only ? kSampledSpinNs : read_remote ? fault_spin_ns_ : 0;
      auto ready = os::WaitReadable(uffd_, stop_fd_, spin);
      if (!ready.ok()) HandlerFails(ready.status());
      if (*ready == 1) break;  // stop
    }
    pending.clear();
    std::fill(outstanding.begin(), outstanding.end(), 0);
    // Take every fault queued now (up to kBatch), post the reads, then install as they arrive.
    // A batch ends after kBatch pages zero-filled or kBatch faults read: faults served at once
    // let their threads fault again right away, and a batch that took those too would not reach
    // AfterFaults (DRAM's budget check) while a thread streams through fresh memory.
    size_t read_faults = 0, zero_filled = 0, sampled = 0;
    auto room = [&] { return pending.size() + 64 <= kBatch && read_faults < kBatch && zero_filled < kBatch; };
    auto intake = [&] {
      while (room()) {
        auto got = backlog.Read(faults, 64);
        if (!got.ok()) HandlerFails(got.status());
        if (*got == 0) break;
        // Fewer than asked: the queue is empty now (os::UffdReadFaults). Asking again would
        // cost a read that answers nothing before the reads posted here go out; a fault
        // reported meanwhile makes uffd_ readable, which the waits below watch.
        const bool drained = *got < 64;
        read_faults += *got;
        for (size_t k = 0; k < *got; ++k) {
          const os::UffdFault& f = faults[k];  // a page fault (fork events went to OnForkEvent)
          char* addr = reinterpret_cast<char*>(f.address & ~uint64_t(kPage - 1));
          Region* region = config_.events->RegionOf(addr);
          if (region == nullptr) {  // not ours: cannot happen; never leave a thread hanging
            (void)os::UffdZeroPage(uffd_, addr, kPage);
            Wake(addr, kPage);
            continue;
          }
          uint64_t index = region->PageIndex(addr);
          PageRecord& rec = region->record(index);
          if (f.wp) {
            // A write to a write-protected page. Clean local page: it becomes dirty (claimed
            // first, so an evictor cannot take it between our check and the unprotect). Page
            // whose eviction is in flight: the eviction is called off (CallOffEviction) and the
            // write goes on at once. Page the writer thread already committed to dropping, or
            // claimed by anyone else: wait for them (they wake us; we fault again).
            if (Cas(rec, PageState::kLocal, PageState::kInFlight)) {
              rec.flags.fetch_and(uint8_t(~(kPageRemoteClean | kPageAhead)), std::memory_order_relaxed);
              c_->write_protect_faults.fetch_add(1, std::memory_order_relaxed);
              (void)os::UffdWriteProtect(uffd_, addr, kPage, false);
              rec.state.store(S(PageState::kLocal), std::memory_order_release);
              Wake(addr, kPage);
            } else if (CallOffEviction(rec)) {
              c_->evictions_called_off.fetch_add(1, std::memory_order_relaxed);
              (void)os::UffdWriteProtect(uffd_, addr, kPage, false);
              Wake(addr, kPage);
            } else if (rec.state.load(std::memory_order_acquire) != S(PageState::kInFlight)) {
              Wake(addr, kPage);
            }
            continue;
          }
          // A page the soft sampler holds: put back from its copy, the access recorded.
          if (sampler_ && (rec.flags.load(std::memory_order_acquire) & kPageSampled) &&
              sampler_->OnMissing(*region, index, f.write)) {
            ++sampled;
            continue;
          }
          if (Cas(rec, PageState::kRemote, PageState::kInFlight)) {
            uint32_t slot1 = rec.remote_slot.load(std::memory_order_relaxed);
            if (slot1 == 0) {
              // Allocated on kRemote, never written: zeros, and so are the fresh pages after it
              // in its run (claimed here, up to kZeroBatch): one round trip for a batch of first
              // touches. A page whose claim shows a slot was written out meanwhile: left as it is.
              uint64_t n = 1;
              const uint64_t end = std::min<uint64_t>(region->pages(), index + kZeroBatch);
              while (index + n < end) {
                PageRecord& next = region->record(index + n);
                if (next.flags.load(std::memory_order_relaxed) & kPageRunHead) break;  // another run
                if (!Cas(next, PageState::kRemote, PageState::kInFlight)) break;
                if (next.remote_slot.load(std::memory_order_relaxed) != 0) {
                  next.state.store(S(PageState::kRemote), std::memory_order_release);
                  break;
                }
                ++n;
              }
              Status z = os::UffdCopy(uffd_, addr, zeros, n * kPage, false);
              if (!z.ok()) {
                // One UFFDIO_COPY must stay inside one mapping: the batch crossed into the next
                // (another run, bound elsewhere). The fault's own page first, then the neighbours
                // up to the first that cannot be installed; the rest stay remote, untouched.
                z = os::UffdCopy(uffd_, addr, zeros, kPage, false);
                if (!z.ok()) Fatal(addr, first_connected_, z);
                uint64_t done = 1;
                while (done < n && os::UffdCopy(uffd_, addr + done * kPage, zeros, kPage, false).ok()) ++done;
                for (uint64_t i = index + done; i < index + n; ++i) {
                  region->record(i).state.store(S(PageState::kRemote), std::memory_order_release);
                }
                n = done;
              }
              resident(*region, index, n);
              for (uint64_t i = index; i < index + n; ++i) {
                PageRecord& r = region->record(i);
                r.flags.fetch_and(uint8_t(~kPageRemoteClean), std::memory_order_relaxed);
                r.state.store(S(PageState::kLocal), std::memory_order_release);
              }
              c_->zero_fills.fetch_add(n, std::memory_order_relaxed);
              zero_filled += n;
              Wake(addr, n * kPage);
              continue;
            }
            size_t j = pending.size();
            Pending& p = pending.emplace_back(Pending{region, index, f.write, os::MonotonicNanos(), false});
            if (!Locate(slot1 - 1, &p.rr.ref)) {
              Fatal(addr, first_connected_, Internal("page slot " + std::to_string(slot1 - 1) + " has no server"));
            }
            stage(p.rr, j);
            if (!PostReplicaRead(true, p.rr, j, outstanding)) FatalAll(addr, p.rr.ref, p.rr.last);
            if (prefetcher_.max_window() > 0) {
            fetch_ahead(region, f.tid, prefetcher_.OnFault(f.tid, reinterpret_cast<uintptr_t>(region), index), *got - k - 1);
          }
            continue;
          }
          // Local (or free) and missing: a fresh page of a registered range, or one another thread
          // has just installed. Claimed like any other, then a zero page, or a wake if it is there.
          bool mine = Cas(rec, PageState::kLocal, PageState::kInFlight);
          if (!mine) {
            const uint8_t st = rec.state.load(std::memory_order_acquire);
            // Ours in this batch, or an evictor's or fetcher's: they wake it. A page of a window
            // fetched ahead: its thread reads through the window, so the next one is asked for.
            if (st == S(PageState::kInFlight)) {
              if (prefetcher_.max_window() > 0) {
                fetch_ahead(region, f.tid, prefetcher_.OnHit(f.tid, reinterpret_cast<uintptr_t>(region), index), *got - k - 1);
              }
              continue;
            }
            if (st == S(PageState::kRemote) || st == S(PageState::kLocal)) {
              // Its owner finished between our two claims: an eviction made it remote (dropped,
              // its data on the server), or a fetch or a failed eviction left it local. A zero page
              // here would stand in for that data; the thread faults again and is served from the
              // state the page has now.
              Wake(addr, kPage);
              continue;
            }
          }
          // The page was dropped here (the heap returns empty spans with MADV_DONTNEED) or never
          // touched: it becomes a zero page that is not write-protected, so whatever copy the
          // server holds is no longer current. Without clearing the flag, the next eviction
          // would skip the write and a later fault would bring back stale data. A page another
          // thread's fault installed meanwhile is there (EEXIST) and keeps its flag: clean, it
          // is not written again at its next eviction. (Claimed, nobody else acts on the page
          // between the zero page and the flag.)
          size_t present = 0;
          (void)os::UffdZeroPage(uffd_, addr, kPage, &present);
          if (mine && present == 0) rec.flags.fetch_and(uint8_t(~kPageRemoteClean), std::memory_order_relaxed);
          if (mine) rec.state.store(S(PageState::kLocal), std::memory_order_release);
          Wake(addr, kPage);
        }
        // Threads wait for the reads this read's faults posted: they go out now, together (one
        // send per server: sent one by one, each would wake the server for one page), before
        // the next read or wait, so the servers work meanwhile.
        SendQueued(outstanding);
        if (drained) break;
      }
    };
    intake();
    // The replies are taken as they come, from every server at once; faults that come meanwhile
    // are read and posted too while staging has room, so a slow server holds its own pages only,
    // not the faults behind them (nor the pages of other servers). A window fetched ahead is
    // installed once it is all in (or at the batch's end).
    for (;;) {
      const bool more = CollectReads(
          true, outstanding, pending.size(), [&](size_t j) { return j < pending.size() ? &pending[j].rr : nullptr; },
          [&](size_t j, size_t server) {
            Pending& p = pending[j];
            if (p.ahead) {
              // A strided window cannot be one UFFDIO_COPY: each of its pages is placed as it
              // arrives, while the server still sends the rest, and woken with its window once
              // the window is in. A page that cannot be placed now stays remote; a thread
              // waiting there is woken to fault again (its earlier fault met it in flight).
              p.arrived = true;
              if (p.early) {
                p.installed = InstallOneAhead(*p.region, p.index, p.rr.buf, false);
                if (!p.installed) {
                  p.arrived = false;
                  p.lost = true;
                  Wake(p.region->PageAddress(p.index), kPage);
                }
              }
              return;
            }
            c_->fault_read_latency.Record(os::MonotonicNanos() - p.rr.posted_ns);
            char* dst = p.region->PageAddress(p.index);
            // Installed write-protected after a read fault: it stays clean until written. The
            // wake is a call of its own, after the record says kLocal: a thread woken before
            // would find its page kInFlight, and a Migrate of it right after the fault (an
            // evictor leaves kInFlight pages alone) would skip it.
            const bool protect = wp_ && !p.write;
            Status cs = os::UffdCopy(uffd_, dst, p.rr.buf, kPage, protect);
            if (!cs.ok()) Fatal(dst, server, cs);
            PageRecord& rec = p.region->record(p.index);
            if (protect) rec.flags.fetch_or(kPageRemoteClean, std::memory_order_relaxed);
            else rec.flags.fetch_and(uint8_t(~kPageRemoteClean), std::memory_order_relaxed);
            c_->remote_faults.fetch_add(1, std::memory_order_relaxed);  // before the wake: counted when seen
            servers_[server]->c->faults.fetch_add(1, std::memory_order_relaxed);
            c_->fault_latency.Record(os::MonotonicNanos() - p.reported_ns);
            resident(*p.region, p.index, 1);
            rec.state.store(S(PageState::kLocal), std::memory_order_release);
            Wake(dst, kPage);
          },
          [&](size_t j) {
            Pending& p = pending[j];
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
          room() ? uffd_ : -1);
      // Windows with a read still out wait (installing part of one would make its thread sleep
      // and wake more than once); at the batch's end every arrived page is installed.
      window_open.assign(pending.size(), false);
      if (more) {
        for (const Pending& p : pending) {
          if (p.ahead && !p.arrived && !p.lost) window_open[p.window] = true;
        }
      }
      InstallAhead(pending.size(), staging, [&](size_t j) -> AheadPage {
        const Pending& p = pending[j];
        const bool now = p.ahead && p.arrived && !p.woken && !window_open[p.window];
        return {now ? p.region : nullptr, p.index, p.installed};
      });
      // A stream's window in: its next one may be asked for now (Prefetcher::OnWindowIn).
      const size_t posted = pending.size();
      for (size_t j = 0; j < posted; ++j) {
        Pending& p = pending[j];
        if (!p.ahead || !p.arrived || p.woken || window_open[p.window]) continue;
        p.woken = true;
        const bool part_end = j + 1 == posted || !pending[j + 1].ahead || pending[j + 1].window != p.window;
        if (part_end && prefetcher_.max_window() > 0) {
          fetch_ahead(p.region, p.tid, prefetcher_.OnWindowIn(p.tid, reinterpret_cast<uintptr_t>(p.region), p.index), 64);
        }
      }
      if (!more && pending.size() == posted) break;
      if (more) intake();
    }
    config_.events->AfterFaults();
    sampled_only = sampled > 0 && pending.empty() && zero_filled == 0;
    read_remote = !pending.empty();
  }
  UffdBacklog::Uninstall();
  os::Unmap(zeros, kZeroBatch * kPage);
}

}  // namespace tiermem

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
#include "runtime/core/page_table.h"
#include "runtime/paging/pager.h"
#include "runtime/paging/pager_internal.h"

namespace tiermem {

using pager_internal::Cas;
using pager_internal::kBatch;
using pager_internal::kPage;
using pager_internal::S;

void Pager::Fatal(const void* addr, size_t server, const Status& why) {
  const std::string& name = server < servers_.size() ? servers_[server]->name : server_;
  TM_LOG_ERROR("remote tier: the page at %p could not be fetched from memory server %s: %s; "
               "exiting (status %d) rather than hand the program a zero page",
               addr, name.c_str(), why.message().c_str(), kRemoteLostExitCode);
  RemoveExitFiles();
  std::_Exit(kRemoteLostExitCode);
}

void Pager::FaultLoop() {
  int err = 0;
  void* mem = os::Reserve((kBatch + 1) * kPage, &err);
  if (mem == nullptr) {
    TM_LOG_ERROR("remote tier: fault handler cannot map its buffers: %s", strerror(-err));
    RemoveExitFiles();
    std::_Exit(kRemoteLostExitCode);
  }
  auto* staging = static_cast<char*>(mem);
  struct Pending {
    Region* region;
    uint64_t index;
    size_t server;
    bool write;
    uint64_t reported_ns;  // when the fault was read from userfaultfd
  };
  std::vector<Pending> pending;
  pending.reserve(kBatch);
  std::vector<size_t> outstanding(servers_.size());
  os::UffdFault faults[64];
  for (;;) {
    auto ready = os::WaitReadable(uffd_, stop_fd_);
    if (!ready.ok()) {
      TM_LOG_ERROR("remote tier: fault handler: %s", ready.status().message().c_str());
      RemoveExitFiles();
      std::_Exit(kRemoteLostExitCode);
    }
    if (*ready == 1) break;  // stop
    pending.clear();
    std::fill(outstanding.begin(), outstanding.end(), 0);
    // Take every fault queued now (up to kBatch), post the reads, then install as they arrive.
    while (pending.size() + 64 <= kBatch) {
      auto got = os::UffdReadFaults(uffd_, faults, 64);
      if (!got.ok()) {
        TM_LOG_ERROR("remote tier: fault handler: %s", got.status().message().c_str());
        RemoveExitFiles();
        std::_Exit(kRemoteLostExitCode);
      }
      if (*got == 0) break;
      for (size_t k = 0; k < *got; ++k) {
        const os::UffdFault& f = faults[k];
        char* addr = reinterpret_cast<char*>(f.address & ~uint64_t(kPage - 1));
        Region* region = config_.region_of(addr);
        if (region == nullptr) {  // not ours: cannot happen; never leave a thread hanging
          (void)os::UffdZeroPage(uffd_, addr, kPage);
          Wake(addr, kPage);
          continue;
        }
        uint64_t index = region->PageIndex(addr);
        PageRecord& rec = region->record(index);
        if (f.wp) {
          // A write to a write-protected page. Clean local page: it becomes dirty. Page being
          // evicted: wait for the eviction to finish (it wakes us; we fault again).
          // Claim it first, so an evictor cannot take it between our check and the unprotect.
          if (Cas(rec, PageState::kLocal, PageState::kInFlight)) {
            rec.flags.fetch_and(uint8_t(~kPageRemoteClean), std::memory_order_relaxed);
            c_->wp_faults.fetch_add(1, std::memory_order_relaxed);
            (void)os::UffdWriteProtect(uffd_, addr, kPage, false);
            rec.state.store(S(PageState::kLocal), std::memory_order_release);
            Wake(addr, kPage);
          } else if (rec.state.load(std::memory_order_acquire) != S(PageState::kInFlight)) {
            Wake(addr, kPage);
          }
          continue;
        }
        if (Cas(rec, PageState::kRemote, PageState::kInFlight)) {
          uint32_t slot1 = rec.remote_slot.load(std::memory_order_relaxed);
          if (slot1 == 0) {  // allocated on kRemote, never written: zero
            Status z = os::UffdZeroPage(uffd_, addr, kPage);
            if (!z.ok()) Fatal(addr, first_connected_, z);
            rec.flags.fetch_and(uint8_t(~kPageRemoteClean), std::memory_order_relaxed);
            c_->zero_fills.fetch_add(1, std::memory_order_relaxed);
            rec.state.store(S(PageState::kLocal), std::memory_order_release);
            Wake(addr, kPage);
            continue;
          }
          SlotRef ref;
          if (!Locate(slot1 - 1, &ref)) {
            Fatal(addr, first_connected_, Internal("page slot " + std::to_string(slot1 - 1) + " has no server"));
          }
          size_t j = pending.size();
          pending.push_back(Pending{region, index, ref.server, f.write, os::MonotonicNanos()});
          Status s = servers_[ref.server]->fault->PostRead(ref.range, ref.slot, staging + j * kPage, j);
          if (!s.ok()) Fatal(addr, ref.server, s);
          ++outstanding[ref.server];
          continue;
        }
        // Local (or free) and missing: a fresh page of a registered range, or one another thread
        // has just installed. Claimed like any other, then a zero page, or a wake if it is there.
        bool mine = Cas(rec, PageState::kLocal, PageState::kInFlight);
        if (!mine && rec.state.load(std::memory_order_acquire) == S(PageState::kInFlight)) {
          continue;  // ours in this batch, or an evictor's or fetcher's: they wake it
        }
        // The page was dropped here (the heap returns empty spans with MADV_DONTNEED) or never
        // touched: it becomes a zero page that is not write-protected, so whatever copy the
        // server holds is no longer current. Without clearing the flag, the next eviction
        // would skip the write and a later fault would bring back stale data.
        if (mine) rec.flags.fetch_and(uint8_t(~kPageRemoteClean), std::memory_order_relaxed);
        (void)os::UffdZeroPage(uffd_, addr, kPage);
        if (mine) rec.state.store(S(PageState::kLocal), std::memory_order_release);
        Wake(addr, kPage);
      }
    }
    CollectError cerr;
    bool ok = Collect(true, outstanding, &cerr, [&](size_t server, const remote::Completion& c) {
      Pending& p = pending[c.cookie];
      char* dst = p.region->PageAddress(p.index);
      if (!c.status.ok()) Fatal(dst, server, c.status);
      // Installed write-protected after a read fault: it stays clean until written.
      const bool protect = wp_ && !p.write;
      Status cs = os::UffdCopy(uffd_, dst, staging + c.cookie * kPage, kPage, protect);
      if (!cs.ok()) Fatal(dst, server, cs);
      PageRecord& rec = p.region->record(p.index);
      if (protect) rec.flags.fetch_or(kPageRemoteClean, std::memory_order_relaxed);
      else rec.flags.fetch_and(uint8_t(~kPageRemoteClean), std::memory_order_relaxed);
      c_->faults.fetch_add(1, std::memory_order_relaxed);  // before the wake: counted when seen
      servers_[server]->c->faults.fetch_add(1, std::memory_order_relaxed);
      c_->fault_latency.Record(os::MonotonicNanos() - p.reported_ns);
      p.server = servers_.size();  // done
      rec.state.store(S(PageState::kLocal), std::memory_order_release);
      Wake(dst, kPage);
    });
    if (!ok) {
      // Name a page of the failed server that is still waiting.
      for (const Pending& p : pending) {
        if (p.server == cerr.server) Fatal(p.region->PageAddress(p.index), cerr.server, cerr.status);
      }
      Fatal(nullptr, cerr.server, cerr.status);
    }
  }
  os::Unmap(mem, (kBatch + 1) * kPage);
}

}  // namespace tiermem

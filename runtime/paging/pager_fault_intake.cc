// The fault handler thread, reading faults and posting reads: each fault read from the
// userfaultfd is served at once where no server is needed (a write-protect fault, a soft-sampled
// page, a zero fill, a page just installed) or claimed and its page's read posted to the server
// it lives on, with the pages its thread's stream predicts behind it. The reads of one read of
// the userfaultfd go out together, before the next read or wait (pager_fault.cc collects them).
#include <algorithm>
#include <string>

#include "base/os.h"
#include "runtime/pages/page_table.h"
#include "runtime/paging/pager.h"
#include "runtime/paging/pager_fault_batch.h"
#include "runtime/paging/pager_internal.h"

namespace tiermem {

using pager_internal::CallOffEviction;
using pager_internal::Cas;
using pager_internal::kBatch;
using pager_internal::kPage;
using pager_internal::kZeroBatch;
using pager_internal::S;

void Pager::TakeFaults(FaultBatch& b) {
  // Until kBatch faults read, pages zero-filled or reads posted since the last AfterFaults
  // (FaultBatch::Due), while staging has a slot for each fault of another read; then DRAM's
  // budget is checked, reads out or not.
  while (b.Room()) {
    auto got = b.backlog->Read(b.faults, 64);
    if (!got.ok()) pager_internal::HandlerFails(got.status());
    if (*got == 0) break;
    // Fewer than asked: the queue is empty now (os::UffdReadFaults). Asking again would cost a
    // read that answers nothing before the reads posted here go out; a fault reported
    // meanwhile makes uffd_ readable, which the waits watch.
    const bool drained = *got < 64;
    b.read_faults += *got;
    for (size_t k = 0; k < *got; ++k) OnFault(b, b.faults[k], *got - k - 1);
    // Threads wait for the reads this read's faults posted: they go out now, together (one send
    // per connection: sent one by one, each would wake the server for one page), before the
    // next read or wait, so the servers work meanwhile.
    SendQueued(b.outstanding);
    if (drained) break;
  }
  if (b.Due()) ThrottleFaults(b);
}

void Pager::OnFault(FaultBatch& b, const os::UffdFault& f, size_t left) {
  // A page fault (fork events went to OnForkEvent).
  char* addr = reinterpret_cast<char*>(f.address & ~uint64_t(kPage - 1));
  Region* region = config_.events->RegionOf(addr);
  if (region == nullptr) {  // not ours: cannot happen; never leave a thread hanging
    (void)os::UffdZeroPage(uffd_, addr, kPage);
    Wake(addr, kPage);
    return;
  }
  const uint64_t index = region->PageIndex(addr);
  PageRecord& rec = region->record(index);
  if (f.wp) {
    OnWriteProtectFault(addr, rec);
    return;
  }
  // A page the soft sampler holds: put back from its copy, the access recorded.
  if (sampler_ && (rec.flags.load(std::memory_order_acquire) & kPageSampled) &&
      sampler_->OnMissing(*region, index, f.write)) {
    ++b.sampled;
    return;
  }
  if (Cas(rec, PageState::kRemote, PageState::kInFlight)) {
    const uint32_t slot1 = rec.remote_slot.load(std::memory_order_relaxed);
    if (slot1 == 0) {
      b.zero_filled += ZeroFillRun(*region, index, addr, b.zeros);
      b.zeroed = true;
    } else {
      PostFault(b, *region, index, slot1, f, left);
    }
    return;
  }
  // Local (or free) and missing: a fresh page of a registered range, or one another thread has
  // just installed. Claimed like any other, then a zero page, or a wake if it is there.
  const bool mine = Cas(rec, PageState::kLocal, PageState::kInFlight);
  if (!mine) {
    const uint8_t st = rec.state.load(std::memory_order_acquire);
    // Ours (its read is out), or an evictor's or fetcher's: they wake it. A page of a window fetched
    // ahead: its thread reads through the window, so the next one is asked for.
    if (st == S(PageState::kInFlight)) {
      if (prefetcher_.max_window() > 0) {
        FetchAhead(b, region, f.tid, prefetcher_.OnHit(f.tid, reinterpret_cast<uintptr_t>(region), index), left);
      }
      return;
    }
    if (st == S(PageState::kRemote) || st == S(PageState::kLocal)) {
      // Its owner finished between our two claims: an eviction made it remote (dropped, its
      // data on the server), or a fetch or a failed eviction left it local. A zero page here
      // would stand in for that data; the thread faults again and is served from the state the
      // page has now.
      Wake(addr, kPage);
      return;
    }
  }
  // The page was dropped here (the heap returns empty spans with MADV_DONTNEED) or never
  // touched: it becomes a zero page that is not write-protected, so whatever copy the server
  // holds is no longer current. Without clearing the flag, the next eviction would skip the
  // write and a later fault would bring back stale data. A page another thread's fault
  // installed meanwhile is there (EEXIST) and keeps its flag: clean, it is not written again at
  // its next eviction. (Claimed, nobody else acts on the page between the zero page and the
  // flag.)
  // Write-scan mode: an empty entry may hold a write-protect marker (the scan matches only pages
  // with contents, os::PagemapScanWritten, but a marker left by any other protect of the range
  // would do the same), which UFFDIO_ZEROPAGE takes for a page (EEXIST, and the thread would
  // fault again forever) while UFFDIO_COPY replaces it: zeros are copied there, and the page
  // counts as written whoever installed it.
  size_t present = 0;
  if (wp_async_) {
    (void)os::UffdCopy(uffd_, addr, b.zeros, kPage, false);
  } else {
    (void)os::UffdZeroPage(uffd_, addr, kPage, &present);
  }
  if (mine && present == 0) rec.flags.fetch_and(uint8_t(~kPageRemoteClean), std::memory_order_relaxed);
  if (mine) rec.state.store(S(PageState::kLocal), std::memory_order_release);
  Wake(addr, kPage);
}

void Pager::OnWriteProtectFault(char* addr, PageRecord& rec) {
  // Clean local page: it becomes dirty (claimed first, so an evictor cannot take it between our
  // check and the unprotect). Page whose eviction is in flight: the eviction is called off
  // (CallOffEviction) and the write goes on at once. Page the writer thread already committed
  // to dropping, or claimed by anyone else: wait for them (they wake us; we fault again).
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
}

uint64_t Pager::ZeroFillRun(Region& region, uint64_t index, char* addr, const void* zeros) {
  // Allocated on kRemote, never written: zeros, and so are the fresh pages around it in its run
  // (claimed here, kZeroBatch in all): the pages after it for a writer going up through memory,
  // then the pages before it for one going down (GNU sort fills its buffer from both ends): one
  // round trip for a batch of first touches. A page whose claim shows a slot was written out
  // meanwhile: left as it is, and the batch ends there.
  const auto claim_fresh = [&](PageRecord& r) {
    if (!Cas(r, PageState::kRemote, PageState::kInFlight)) return false;
    if (r.remote_slot.load(std::memory_order_relaxed) == 0) return true;
    r.state.store(S(PageState::kRemote), std::memory_order_release);
    return false;
  };
  uint64_t lo = index, hi = index + 1;  // claimed: [lo, hi)
  const uint64_t end = std::min<uint64_t>(region.pages(), index + kZeroBatch);
  while (hi < end && !(region.record(hi).flags.load(std::memory_order_relaxed) & kPageRunHead) &&
         claim_fresh(region.record(hi))) {
    ++hi;
  }
  while (hi - lo < kZeroBatch && lo > 0 && !(region.record(lo).flags.load(std::memory_order_relaxed) & kPageRunHead) &&
         claim_fresh(region.record(lo - 1))) {
    --lo;
  }
  if (!os::UffdCopy(uffd_, region.PageAddress(lo), zeros, (hi - lo) * kPage, false).ok()) {
    // One UFFDIO_COPY must stay inside one mapping: the batch crossed into another (a part of
    // the run bound elsewhere). The fault's own page first, then its neighbours one by one out
    // to the first that cannot be installed on each side; the rest stay remote, untouched.
    Status z = os::UffdCopy(uffd_, addr, zeros, kPage, false);
    if (!z.ok()) Fatal(addr, first_connected_, z);
    const auto one = [&](uint64_t i) { return os::UffdCopy(uffd_, region.PageAddress(i), zeros, kPage, false).ok(); };
    uint64_t up = index + 1, down = index;
    while (up < hi && one(up)) ++up;
    while (down > lo && one(down - 1)) --down;
    for (uint64_t i = up; i < hi; ++i) region.record(i).state.store(S(PageState::kRemote), std::memory_order_release);
    for (uint64_t i = lo; i < down; ++i) region.record(i).state.store(S(PageState::kRemote), std::memory_order_release);
    lo = down;
    hi = up;
  }
  const uint64_t n = hi - lo;
  config_.events->OnResident(region, lo, n, true);
  for (uint64_t i = lo; i < hi; ++i) {
    PageRecord& r = region.record(i);
    r.flags.fetch_and(uint8_t(~kPageRemoteClean), std::memory_order_relaxed);
    r.state.store(S(PageState::kLocal), std::memory_order_release);
  }
  region.ClearQuiet(lo, n);  // resident now: the scan reads their chunk again (Region::PageQuiet)
  c_->zero_fills.fetch_add(n, std::memory_order_relaxed);
  Wake(region.PageAddress(lo), n * kPage);
  return n;
}

void Pager::PostFault(FaultBatch& b, Region& region, uint64_t index, uint32_t slot1, const os::UffdFault& f,
                      size_t left) {
  char* addr = region.PageAddress(index);
  const size_t j = b.Take(FaultBatch::kNone);
  FaultBatch::Pending& p = b.slots[j];
  p.region = &region;
  p.index = index;
  p.write = f.write;
  p.reported_ns = os::MonotonicNanos();
  if (!Locate(slot1 - 1, &p.rr.ref)) {
    Fatal(addr, first_connected_, Internal("page slot " + std::to_string(slot1 - 1) + " has no server"));
  }
  b.Stage(p.rr, j);
  ++b.posted;
  ++b.reads;
  if (!PostReplicaRead(true, p.rr, j, b.outstanding)) FatalAll(addr, p.rr.ref, p.rr.last);
  if (prefetcher_.max_window() > 0) {
    FetchAhead(b, &region, f.tid, prefetcher_.OnFault(f.tid, reinterpret_cast<uintptr_t>(&region), index), left);
  }
}

void Pager::FetchAhead(FaultBatch& b, Region* region, uint32_t tid, const Prefetcher::Ahead& a, size_t reserve) {
  // After a remote fault (Prefetcher::OnFault) or a fault on a page of a window in flight
  // (OnHit): the pages the prefetcher predicts along the thread's stream (prefetch.h) that are
  // remote with a copy on a server are claimed and their reads posted (behind the fault's own),
  // leaving `reserve` staging slots for the faults still to post. A faulted page's thread is
  // woken as its page is in, so no thread waits for its prefetches. Installed in parts of
  // kAheadPart pages, each once all of it is in (its pages linked from its first page's slot):
  // the reader wakes after the first part while the rest is still in flight, meets the next
  // part in flight, and that hit asks for the next window (OnHit), so the stream keeps a window
  // in flight ahead of the reader.
  size_t head = FaultBatch::kNone, prev = FaultBatch::kNone;
  for (uint32_t k = 1; k <= a.count && b.nfree > reserve; ++k) {
    if ((k - 1) % FaultBatch::kAheadPart == 0) head = prev = FaultBatch::kNone;
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
    // Beside the part's page before it in staging where that slot is free: one copy installs both.
    const size_t j = b.Take(prev == FaultBatch::kNone ? FaultBatch::kNone : prev + 1);
    FaultBatch::Pending& p = b.slots[j];
    p.region = region;
    p.index = static_cast<uint64_t>(at);
    p.ahead = true;
    p.early = a.stride != 1;
    p.tid = tid;
    p.rr.ref = ref;
    b.Stage(p.rr, j);
    // No replica to read from: nobody needs the page yet; a fault on it meets the trouble.
    if (!PostReplicaRead(true, p.rr, j, b.outstanding)) {
      r.state.store(S(PageState::kRemote), std::memory_order_release);
      b.Give(j);
      continue;
    }
    ++b.posted;
    ++b.reads;
    if (head == FaultBatch::kNone) head = j;
    else b.slots[prev].next = static_cast<uint16_t>(j);
    p.window = static_cast<uint16_t>(head);
    ++b.slots[head].left;
    prev = j;
  }
}

}  // namespace tiermem

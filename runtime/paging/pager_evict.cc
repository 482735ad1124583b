// The pager's eviction path: claim, write-protect and plan the writes of a window of pages, then
// hand the window to the writer thread (pager_writer.cc), which writes, drops and wakes (Evict
// for a run of pages, EvictPages for scattered ones, EvictPagesQueued without waiting). Split
// from pager.cc, which keeps connection, slots and placement, fetching back, free/discard and
// fork.
//
// Two paths keep the bytes that reach the servers the bytes that are dropped:
// - Synchronous write-protect (the default; TIERMEM_TRACK other than scan): the evicting thread
//   claims the pages (kInFlight, kPageEvicting) and write-protects them; the writer thread sends
//   the page itself and drops it. A program thread that writes the page meanwhile takes a
//   write-protect fault, which the fault handler thread answers by calling the eviction off
//   (CallOffEviction: whoever clears kPageEvicting decides) and unprotecting, so the write goes
//   on and the writer keeps the page; once the writer has taken the flag, the write waits until
//   the page is dropped and faults it back from the copy sent. A page is never read by the
//   writer while writable.
// - Write-scan mode (wp_async_: the descriptor resolves write-protect faults in the kernel and
//   reports none): the evicting thread claims the pages and copies each page with contents into
//   the job (CopyForSend); the copy is what is sent (and encoded), never the page. Program
//   threads keep writing the page unhindered. Once every write is acknowledged the writer thread
//   takes each page out in one step (TakeOutIfSent: UFFDIO_MOVE into its scratch page) and
//   compares it with the copy: the same, and it is dropped; else it is moved back, kept local
//   and dirty (evictions_called_off). A move the kernel reports failed is judged by the pagemap
//   (it has said EEXIST for a swapped page it had moved): the scratch page is emptied only before
//   a move, so bytes moved there are never thrown away as leftovers. While a page is out, a
//   touch is a missing fault that the handler thread leaves waiting (the page is kInFlight)
//   until the writer wakes it. A clean page (kPageRemoteClean, nothing sent) is trusted only
//   where pagemap bit 57, read after the copy and outside any write scan, still shows the
//   protection its install set: a write clears it in the kernel; the scan, which protects
//   written pages again, clears the mark first.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "base/tsan.h"
#include "base/os.h"
#include "base/os_pagemap.h"
#include "runtime/paging/pager.h"
#include "runtime/paging/pager_internal.h"

namespace tiermem {

using pager_internal::Cas;
using pager_internal::ForRuns;
using pager_internal::kBatch;
using pager_internal::kPage;
using pager_internal::S;

StatusOr<uint64_t> Pager::Evict(Region& region, uint64_t first, uint64_t n) {
  std::lock_guard<std::mutex> io_lock(io_mu_);
  if (forked_child_) return Unavailable(kForkedMessage);
  TIERMEM_RETURN_IF_ERROR(Register(region.PageAddress(first), n * kPage));
  std::vector<uint64_t> idx(n);
  for (uint64_t i = 0; i < n; ++i) idx[i] = first + i;
  return EvictAndWait(region, idx.data(), idx.size());
}

StatusOr<uint64_t> Pager::EvictPages(Region& region, const std::vector<uint64_t>& pages) {
  std::lock_guard<std::mutex> io_lock(io_mu_);
  if (forked_child_) return Unavailable(kForkedMessage);
  TIERMEM_RETURN_IF_ERROR(RegisterRuns(region, pages));
  return EvictAndWait(region, pages.data(), pages.size());
}

StatusOr<uint64_t> Pager::EvictPagesQueued(Region& region, const std::vector<uint64_t>& pages) {
  return EvictPagesBegin(region, pages, nullptr);  // nobody waits
}

Status Pager::RegisterRuns(Region& region, const std::vector<uint64_t>& pages) {
  for (size_t i = 0; i < pages.size();) {  // register each run of adjacent pages
    size_t j = i + 1;
    while (j < pages.size() && pages[j] == pages[j - 1] + 1) ++j;
    TIERMEM_RETURN_IF_ERROR(Register(region.PageAddress(pages[i]), (j - i) * kPage));
    i = j;
  }
  return Status::Ok();
}

StatusOr<uint64_t> Pager::EvictPagesBegin(Region& region, const std::vector<uint64_t>& pages, EvictTicket* ticket) {
  std::lock_guard<std::mutex> io_lock(io_mu_);
  if (forked_child_) return Unavailable(kForkedMessage);
  TIERMEM_RETURN_IF_ERROR(RegisterRuns(region, pages));
  EvictScratch w;
  uint64_t queued = 0;
  for (size_t b = 0; b < pages.size(); b += kBatch) {
    TIERMEM_RETURN_IF_ERROR(QueueWindow(region, pages.data() + b, std::min(kBatch, pages.size() - b), &w, ticket));
    queued += w.queued;
  }
  return queued;
}

Status Pager::EvictWait(EvictTicket* ticket, uint64_t* became_remote) {
  if (writer_) writer_->Wait(ticket);
  Status failure;
  if (!ticket->lost_windows.empty()) {
    std::lock_guard<std::mutex> io_lock(io_mu_);
    failure = RequeueLost(ticket);
  }
  *became_remote = ticket->became_remote;
  return SettleTicket(ticket, failure).status();
}

Status Pager::RequeueLost(EvictTicket* t) {
  // A window that failed because a server went down is queued again for the others (a server is
  // marked down once, so this ends). io_mu_ held.
  Status failure;
  EvictScratch w;
  while (failure.ok() && t->failure.ok() && !t->lost_windows.empty()) {
    std::vector<EvictTicket::LostWindow> lost = std::move(t->lost_windows);
    t->lost_windows.clear();
    w.placement = kNoServer;
    for (size_t k = 0; k < lost.size() && failure.ok(); ++k) {
      failure = QueueWindow(*lost[k].region, lost[k].idx.data(), lost[k].idx.size(), &w, t);
    }
    writer_->Wait(t);
  }
  return failure;
}

StatusOr<uint64_t> Pager::SettleTicket(EvictTicket* t, const Status& failure) {
  // The ticket is empty again whatever the outcome, ready for its owner's next evictions.
  const uint64_t became_remote = t->became_remote;
  Status job_failure = std::move(t->failure);
  const std::string server = std::move(t->failure_server);
  *t = EvictTicket();
  if (!failure.ok()) return failure;
  if (!job_failure.ok()) {
    if (server.empty()) return job_failure.WithContext("evicting to the memory servers");
    return job_failure.WithContext("evicting to memory server " + server);
  }
  return became_remote;
}

StatusOr<uint64_t> Pager::EvictAndWait(Region& region, const uint64_t* idx, size_t n) {
  // Every window is queued before any is waited for: the writer thread has up to
  // EvictWriter::kMaxJobs windows' writes in flight, to every server at once, while this thread
  // prepares the next.
  EvictScratch w;
  EvictTicket t;
  Status failure;
  for (size_t b = 0; b < n && failure.ok(); b += kBatch) {
    failure = QueueWindow(region, idx + b, std::min(kBatch, n - b), &w, &t);
  }
  writer_->Wait(&t);
  if (failure.ok()) failure = RequeueLost(&t);
  return SettleTicket(&t, failure);
}

Status Pager::QueueWindow(Region& region, const uint64_t* idx, size_t m, EvictScratch* w, EvictTicket* t) {
  std::vector<uint64_t>& pm = w->pm;
  auto job = std::make_unique<EvictJob>();
  job->region = &region;
  job->idx.assign(idx, idx + m);
  job->claimed.assign(m, 0);
  job->planned.assign(m, 0);
  job->ticket = t;
  job->t0_ns = os::MonotonicNanos();
  uint8_t* claimed = job->claimed.data();
  // 1. Claim: kLocal -> kInFlight, marked kPageEvicting. Until the writer thread commits a page
  //    (FinishJob), a write to it calls its eviction off instead of waiting (pager_fault_intake.cc).
  w->queued = 0;
  for (size_t i = 0; i < m; ++i) {
    PageRecord& rec = region.record(idx[i]);
    claimed[i] = Cas(rec, PageState::kLocal, PageState::kInFlight);
    if (claimed[i]) rec.flags.fetch_or(kPageEvicting, std::memory_order_release);
    w->queued += claimed[i];
  }
  //    A page armed by the protect tracker before the claim is lifted now (WatchClaims).
  if (AccessSampler* watch = claim_watch_.load(std::memory_order_acquire)) {
    ForRuns(idx, m, claimed, [&](size_t i, size_t j) { watch->Release(region.PageAddress(idx[i]), (j - i) * kPage); });
  }
  // 2. Write-protect, so the contents we send are the contents we drop, unless a write calls
  //    the page's eviction off (then what was sent is never read: the page stays dirty).
  //    (Write-scan mode: nothing to protect; CopyForSend below instead.)
  if (wp_ && !wp_async_) {
    ForRuns(idx, m, claimed, [&](size_t i, size_t j) {
      Status s = os::UffdWriteProtect(uffd_, region.PageAddress(idx[i]), (j - i) * kPage, true);
      if (!s.ok()) TM_LOG_WARN("remote tier: write-protect before eviction failed: %s", s.message().c_str());
    });
  }
  // 3. Which pages have contents (present or swapped)? Untouched ones need no write.
  bool have_pm = true;
  ForRuns(idx, m, nullptr, [&](size_t i, size_t j) {
    have_pm = have_pm && os::ReadPagemap(pagemap_fd_, region.PageAddress(idx[i]), j - i, pm.data() + i);
  });
  if (wp_async_) CopyForSend(region, have_pm, w, job.get());
  // 4. The writes of the dirty pages, each to the server(s) of its slot (new slots: the placement).
  if (code_) job->parity.resize(m * SpareBytes());
  Status failure;
  for (size_t i = 0; i < m && failure.ok(); ++i) {
    if (claimed[i]) failure = PlanPage(region, idx[i], have_pm ? &pm[i] : nullptr, i, w, job.get());
  }
  if (!failure.ok()) {
    GiveBack(*job);
    return failure.WithContext("evicting to the memory servers");
  }
  if (!writer_->Push(std::move(job))) return Aborted("the remote tier is stopping");
  return Status::Ok();
}

Status Pager::PlanPage(Region& region, uint64_t index, const uint64_t* pm, size_t i, EvictScratch* w, EvictJob* job) {
  size_t& placement = w->placement;
  PageRecord& rec = region.record(index);
  const bool populated = pm == nullptr || os::PagemapPopulated(*pm);
  uint32_t slot1 = rec.remote_slot.load(std::memory_order_relaxed);
  auto no_server = [&] { return Internal("remote tier: page slot " + std::to_string(slot1 - 1) + " has no server"); };
  if (!populated) {
    if (slot1 != 0) GiveSlot(slot1 - 1);
    rec.remote_slot.store(0, std::memory_order_relaxed);
    c_->evictions_untouched.fetch_add(1, std::memory_order_relaxed);
    return Status::Ok();
  }
  SlotRef ref;
  if (slot1 != 0) {
    if (!Locate(slot1 - 1, &ref)) return no_server();
    // A slot with a replica on a down server: the page moves to a healthy group when one has
    // room (written again even when clean), so it has all its replicas once dropped. When
    // none has, it stays and is written to the members that are up; the repair thread
    // restores the rest.
    if (!Healthy(*ranges_[ref.range]) && !w->no_fresh) {
      auto fresh = TakeSlot(&placement, /*announce_full=*/false);
      w->no_fresh = !fresh.ok();  // not asked again for the rest of this eviction
      if (fresh.ok()) {
        GiveSlot(slot1 - 1);
        slot1 = uint32_t(*fresh + 1);
        rec.remote_slot.store(slot1, std::memory_order_relaxed);
        rec.flags.fetch_and(uint8_t(~kPageRemoteClean), std::memory_order_relaxed);  // not there yet
        if (!Locate(slot1 - 1, &ref)) return no_server();
      }
    }
  }
  if (wp_ && (!wp_async_ || w->clean_ok[i]) && slot1 != 0 && (rec.flags.load(std::memory_order_relaxed) & kPageRemoteClean)) {
    c_->evictions_clean.fetch_add(1, std::memory_order_relaxed);
    return Status::Ok();
  }
  // A forked child may still read the fork-time copy in this slot: the new contents go to a
  // new slot, and the old one is freed when the child lets go of it.
  if (slot1 != 0 && !holds_.empty() && holds_.Held(slot1 - 1)) {
    GiveSlot(slot1 - 1);
    slot1 = 0;
    rec.remote_slot.store(0, std::memory_order_relaxed);
  }
  if (slot1 == 0) {
    auto s = TakeSlot(&placement);
    if (!s.ok()) return s.status();
    slot1 = uint32_t(*s + 1);
    rec.remote_slot.store(slot1, std::memory_order_relaxed);
    if (!Locate(slot1 - 1, &ref)) return no_server();
  }
  return PlanWrites(region, index, i, ref, job);
}

// PlanPage's writes of page `i` of the window (slot placed in `ref`): to every member, and to a
// replacement being filled (join); all must acknowledge. Coded: member p gets piece p (a slice
// of the page, or parity computed here). The bytes are the page's, or its copy in write-scan
// mode. Unavailable when fewer members than a read needs are up (the page stays local).
Status Pager::PlanWrites(Region& region, uint64_t index, size_t i, const SlotRef& ref, EvictJob* job) {
  const char* page = job->copy.empty() ? region.PageAddress(index) : job->copy.data() + i * kPage;
  char* parity = nullptr;
  if (code_) {
    const CodeShape& shape = code_->shape();
    parity = job->parity.data() + i * SpareBytes();
    const uint8_t* data[kMaxCodeData];
    uint8_t* out[kMaxCodeParity];
    for (uint32_t d = 0; d < shape.k; ++d) data[d] = reinterpret_cast<const uint8_t*>(page + d * piece_);
    for (uint32_t q = 0; q < shape.m; ++q) out[q] = reinterpret_cast<uint8_t*>(parity + q * piece_);
    TsanIgnoreAccesses read_under_protection;  // see base/tsan.h
    code_->Encode(piece_, data, out);
  }
  uint32_t up = 0;
  auto plan = [&](const Member& mem, uint32_t piece) {
    if (!Usable(mem.server)) return;  // down: the repair thread restores this copy
    EvictWrite wr;
    wr.server = mem.server;
    wr.memd = mem.memd;
    wr.slot = MemberSlot(ref, mem);
    wr.page = static_cast<uint32_t>(i);
    if (code_) {
      const uint32_t k = code_->shape().k;
      wr.src = piece < k ? page + size_t(piece) * piece_ : parity + size_t(piece - k) * piece_;
      wr.offset = PieceOffset(ref);
      wr.length = static_cast<uint32_t>(piece_);
    } else {
      wr.src = page;
    }
    job->writes.push_back(wr);
    ++up;
  };
  for (uint32_t r = 0; r < ref.n; ++r) plan(ref.m[r], r);
  if (ref.has_join) plan(ref.join, ref.join_of);
  job->planned[i] = 1;
  if (up < need_) {
    // Too many servers of its group are down and no healthy group had room: it stays local.
    return Unavailable(code_ ? "fewer than " + std::to_string(need_) + " memory servers of the page's pieces are up (" +
                                   MemberNames(ref) + ")"
                             : "no memory server of the page's replicas is up (" + MemberNames(ref) + ")");
  }
  return Status::Ok();
}

void Pager::GiveBack(EvictJob& job) {
  // Nothing is dropped: pages go back to local, unprotected, and any waiter retries. A clean
  // page becomes dirty: once unprotected, a write to it is no longer seen, and the next
  // eviction would skip it and leave the server's old copy to be faulted back.
  Region& region = *job.region;
  const uint64_t* idx = job.idx.data();
  const size_t m = job.idx.size();
  for (size_t i = 0; i < m; ++i) {
    if (!job.claimed[i]) continue;
    PageRecord& rec = region.record(idx[i]);
    rec.flags.fetch_and(uint8_t(~(kPageRemoteClean | kPageEvicting)), std::memory_order_relaxed);
    rec.state.store(S(PageState::kLocal), std::memory_order_release);
  }
  if (wp_ && !wp_async_) {
    ForRuns(idx, m, job.claimed.data(), [&](size_t i, size_t j) {
      (void)os::UffdWriteProtect(uffd_, region.PageAddress(idx[i]), (j - i) * kPage, false);
    });
  }
  ForRuns(idx, m, nullptr, [&](size_t i, size_t j) { Wake(region.PageAddress(idx[i]), (j - i) * kPage); });
}

void Pager::CopyForSend(Region& region, bool have_pm, EvictScratch* w, EvictJob* job) {
  // Write-scan mode, io_mu_ held, the window's pages claimed. The copy is taken first: what a
  // page held before any later write, sent and then compared at its take-out. A page without
  // contents (w->pm) is not read: reading it would fault it in.
  const size_t m = job->idx.size();
  job->copy.resize(m * kPage);
  w->clean_ok.assign(m, 0);
  // A page whose entry may be the scan's marker is not read (its fault would wait on this
  // thread's claim): its claim is given back, and it stays as it is (empty, or in swap).
  for (size_t i = 0; i < m; ++i) {
    if (!job->claimed[i] || (have_pm && !os::PagemapMaybeMarker(w->pm[i]))) continue;
    PageRecord& rec = region.record(job->idx[i]);
    rec.flags.fetch_and(uint8_t(~kPageEvicting), std::memory_order_relaxed);
    rec.state.store(S(PageState::kLocal), std::memory_order_release);
    job->claimed[i] = 0;
    --w->queued;
  }
  {
    TsanIgnoreAccesses racing_writes;  // program threads may write the page meanwhile (see base/tsan.h)
    for (size_t i = 0; i < m; ++i) {
      if (!job->claimed[i] || (have_pm && !os::PagemapPopulated(w->pm[i]))) continue;
      memcpy(job->copy.data() + i * kPage, region.PageAddress(job->idx[i]), kPage);
    }
  }
  if (!have_pm) return;  // nothing known about protection: every page is written
  // Then whether each clean mark still holds: bit 57 read after the copy says no write came
  // before it (the copy is the server's bytes); a write scan running meanwhile may have
  // protected a written page again before clearing its mark, so a read that overlapped one is
  // read again (a few times; then none is trusted, and the window is sent whole).
  std::vector<uint64_t>& pm2 = w->pm2;
  pm2.resize(m);
  for (int attempt = 0; attempt < 4; ++attempt) {
    const uint64_t seq = scan_seq_.load(std::memory_order_seq_cst);
    if (seq & 1) {
      std::this_thread::yield();
      continue;
    }
    bool read = true;
    ForRuns(job->idx.data(), m, nullptr, [&](size_t i, size_t j) {
      read = read && os::ReadPagemap(pagemap_fd_, region.PageAddress(job->idx[i]), j - i, pm2.data() + i);
    });
    if (!read) return;
    for (size_t i = 0; i < m; ++i) {
      const bool marked = region.record(job->idx[i]).flags.load(std::memory_order_acquire) & kPageRemoteClean;
      w->clean_ok[i] = job->claimed[i] && marked && os::PagemapUffdWp(pm2[i]);
    }
    if (scan_seq_.load(std::memory_order_seq_cst) == seq) return;
    w->clean_ok.assign(m, 0);
  }
}

}  // namespace tiermem

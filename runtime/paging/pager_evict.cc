// The pager's eviction path: claim, write-protect, write to the memory servers and drop, a
// window of pages at a time (Evict for a run of pages, EvictPages for scattered ones). Split from
// pager.cc, which keeps connection, slots and placement, fetching back, free/discard and fork.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/os.h"
#include "runtime/paging/pager.h"
#include "runtime/paging/pager_internal.h"

namespace tiermem {

using pager_internal::Cas;
using pager_internal::kBatch;
using pager_internal::kPage;
using pager_internal::S;

StatusOr<uint64_t> Pager::Evict(Region& region, uint64_t first, uint64_t n) {
  std::lock_guard<std::mutex> io_lock(io_mu_);
  if (forked_child_) return Unavailable(kForkedMessage);
  TIERMEM_RETURN_IF_ERROR(Register(region.PageAddress(first), n * kPage));
  EvictScratch w(servers_.size());
  std::vector<uint64_t> idx(kBatch);
  for (uint64_t b = first; b < first + n; b += kBatch) {
    const uint64_t m = std::min<uint64_t>(kBatch, first + n - b);
    for (uint64_t i = 0; i < m; ++i) idx[i] = b + i;
    const uint64_t t0 = os::MonotonicNanos();
    TIERMEM_RETURN_IF_ERROR(EvictWindowRetrying(region, idx.data(), m, &w));
    c_->evict_latency.Record(os::MonotonicNanos() - t0);
  }
  c_->evicted.fetch_add(w.became_remote, std::memory_order_relaxed);
  return w.became_remote;
}

StatusOr<uint64_t> Pager::EvictPages(Region& region, const std::vector<uint64_t>& pages) {
  std::lock_guard<std::mutex> io_lock(io_mu_);
  if (forked_child_) return Unavailable(kForkedMessage);
  for (size_t i = 0; i < pages.size();) {  // register each run of adjacent pages
    size_t j = i + 1;
    while (j < pages.size() && pages[j] == pages[j - 1] + 1) ++j;
    TIERMEM_RETURN_IF_ERROR(Register(region.PageAddress(pages[i]), (j - i) * kPage));
    i = j;
  }
  EvictScratch w(servers_.size());
  for (size_t b = 0; b < pages.size(); b += kBatch) {
    const uint64_t t0 = os::MonotonicNanos();
    TIERMEM_RETURN_IF_ERROR(EvictWindowRetrying(region, pages.data() + b, std::min(kBatch, pages.size() - b), &w));
    c_->evict_latency.Record(os::MonotonicNanos() - t0);
  }
  c_->evicted.fetch_add(w.became_remote, std::memory_order_relaxed);
  return w.became_remote;
}

Status Pager::EvictWindowRetrying(Region& region, const uint64_t* idx, size_t m, EvictScratch* w) {
  // A window that failed because a server went down is tried again on the others (a server is
  // marked down once, so this ends).
  for (;;) {
    Status s = EvictWindow(region, idx, m, w);
    if (s.ok() || !w->server_lost) return s;
    w->placement = servers_.size();
  }
}

Status Pager::EvictWindow(Region& region, const uint64_t* idx, size_t m, EvictScratch* w) {
  std::vector<uint64_t>& pm = w->pm;
  std::vector<uint8_t>& claimed = w->claimed;
  std::vector<size_t>& outstanding = w->outstanding;
  std::vector<size_t>& written = w->written;
  size_t& placement = w->placement;
  // 1. Claim: kLocal -> kInFlight. Faults on claimed pages now wait for us.
  for (size_t i = 0; i < m; ++i) claimed[i] = Cas(region.record(idx[i]), PageState::kLocal, PageState::kInFlight);
  // Applies fn to each maximal run of claimed, adjacent pages: pages we did not claim (being
  // fetched by the fault handler right now, say) must not be protected or dropped by us.
  auto for_claimed_runs = [&](auto&& fn) {
    for (size_t i = 0; i < m;) {
      if (!claimed[i]) {
        ++i;
        continue;
      }
      size_t j = i + 1;
      while (j < m && claimed[j] && idx[j] == idx[j - 1] + 1) ++j;
      fn(region.PageAddress(idx[i]), (j - i) * kPage);
      i = j;
    }
  };
  // Runs of adjacent pages, claimed or not (one pagemap read and one wake each).
  auto for_runs = [&](auto&& fn) {
    for (size_t i = 0; i < m;) {
      size_t j = i + 1;
      while (j < m && idx[j] == idx[j - 1] + 1) ++j;
      fn(i, j);
      i = j;
    }
  };
  // 2. Write-protect, so the contents we send are the contents we drop.
  if (wp_) {
    for_claimed_runs([&](char* a, size_t len) {
      Status s = os::UffdWriteProtect(uffd_, a, len, true);
      if (!s.ok()) TM_LOG_WARN("remote tier: write-protect before eviction failed: %s", s.message().c_str());
    });
  }
  // 3. Which pages have contents (present or swapped)? Untouched ones need no write.
  bool have_pm = true;
  for_runs([&](size_t i, size_t j) {
    have_pm = have_pm && os::ReadPagemap(pagemap_fd_, region.PageAddress(idx[i]), j - i, pm.data() + i);
  });
  // 4. Write the dirty pages, each to the server of its slot (new slots: the placement).
  std::fill(outstanding.begin(), outstanding.end(), 0);
  std::fill(written.begin(), written.end(), 0);
  Status failure;
  std::string failure_server;
  size_t failed_server = SIZE_MAX;  // the server whose write failed: marked down
  for (size_t i = 0; i < m; ++i) {
    if (!claimed[i]) continue;
    PageRecord& rec = region.record(idx[i]);
    const bool populated = !have_pm || os::PagemapPopulated(pm[i]);
    uint32_t slot1 = rec.remote_slot.load(std::memory_order_relaxed);
    if (!populated) {
      if (slot1 != 0) GiveSlot(slot1 - 1);
      rec.remote_slot.store(0, std::memory_order_relaxed);
      c_->skipped_untouched.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    SlotRef ref;
    if (slot1 != 0) {
      if (!Locate(slot1 - 1, &ref)) {
        failure = Internal("remote tier: page slot " + std::to_string(slot1 - 1) + " has no server");
        break;
      }
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
          if (!Locate(slot1 - 1, &ref)) {
            failure = Internal("remote tier: page slot " + std::to_string(slot1 - 1) + " has no server");
            break;
          }
        }
      }
    }
    if (wp_ && slot1 != 0 && (rec.flags.load(std::memory_order_relaxed) & kPageRemoteClean)) {
      c_->skipped_clean.fetch_add(1, std::memory_order_relaxed);
      continue;
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
      if (!s.ok()) {
        failure = s.status();
        break;
      }
      slot1 = uint32_t(*s + 1);
      rec.remote_slot.store(slot1, std::memory_order_relaxed);
      if (!Locate(slot1 - 1, &ref)) {
        failure = Internal("remote tier: page slot " + std::to_string(slot1 - 1) + " has no server");
        break;
      }
    }
    // To every member, and to a replacement being filled (join): all must acknowledge. Coded:
    // member p gets piece p (a slice of the page, or parity computed here).
    const char* page = region.PageAddress(idx[i]);
    char* parity = nullptr;
    if (code_) {
      const CodeShape& shape = code_->shape();
      if (w->parity.empty()) w->parity.resize(kBatch * SpareBytes());
      parity = w->parity.data() + i * SpareBytes();
      const uint8_t* data[kMaxCodeData];
      uint8_t* out[kMaxCodeParity];
      for (uint32_t d = 0; d < shape.k; ++d) data[d] = reinterpret_cast<const uint8_t*>(page + d * piece_);
      for (uint32_t q = 0; q < shape.m; ++q) out[q] = reinterpret_cast<uint8_t*>(parity + q * piece_);
      code_->Encode(piece_, data, out);
    }
    auto post = [&](const Member& mem, uint32_t piece) {
      if (!Usable(mem.server)) return true;  // down: the repair thread restores this copy
      Server& srv = *servers_[mem.server];
      Status s;
      if (code_) {
        const uint32_t k = code_->shape().k;
        const char* src = piece < k ? page + size_t(piece) * piece_ : parity + size_t(piece - k) * piece_;
        s = srv.io->PostWritePart(mem.memd, MemberSlot(ref, mem), PieceOffset(ref), static_cast<uint32_t>(piece_), src, i);
      } else {
        s = srv.io->PostWrite(mem.memd, MemberSlot(ref, mem), page, i);
      }
      if (!s.ok()) {
        failure = s;
        failure_server = srv.name;
        failed_server = mem.server;
        return false;
      }
      ++outstanding[mem.server];
      ++written[mem.server];
      return true;
    };
    const size_t before = std::accumulate(written.begin(), written.end(), size_t{0});
    bool posted = true;
    for (uint32_t r = 0; r < ref.n && posted; ++r) posted = post(ref.m[r], r);
    if (posted && ref.has_join) posted = post(ref.join, ref.join_of);
    if (!posted) break;
    const size_t wrote = std::accumulate(written.begin(), written.end(), size_t{0}) - before;
    if (wrote < need_) {
      // Too many servers of its group are down and no healthy group had room: it stays local.
      failure = Unavailable(code_ ? "fewer than " + std::to_string(need_) + " memory servers of the page's pieces are up (" +
                                        MemberNames(ref) + ")"
                                  : "no memory server of the page's replicas is up (" + MemberNames(ref) + ")");
      break;
    }
  }
  CollectError err;
  bool collected = Collect(false, outstanding, &err, [&](size_t k, const remote::Completion& c) {
    if (!c.status.ok() && failure.ok()) {
      failure = c.status;
      failure_server = servers_[k]->name;
      failed_server = k;
    }
  });
  if (!collected && failure.ok()) {
    failure = err.status;
    failure_server = servers_[err.server]->name;
    failed_server = err.server;
  }
  // A server that failed a write is down: the caller may try the window again, and the pages
  // then go to healthy groups.
  w->server_lost = false;
  if (failed_server < servers_.size()) {
    MarkDown(failed_server, failure);
    w->server_lost = true;
  }
  auto wake = [&] { for_runs([&](size_t i, size_t j) { Wake(region.PageAddress(idx[i]), (j - i) * kPage); }); };
  if (!failure.ok()) {
    // Nothing is dropped: pages go back to local, unprotected, and any waiter retries. A clean
    // page becomes dirty: once unprotected, a write to it is no longer seen, and the next
    // eviction would skip it and leave the server's old copy to be faulted back.
    for (size_t i = 0; i < m; ++i) {
      if (!claimed[i]) continue;
      PageRecord& rec = region.record(idx[i]);
      rec.flags.fetch_and(uint8_t(~kPageRemoteClean), std::memory_order_relaxed);
      rec.state.store(S(PageState::kLocal), std::memory_order_release);
    }
    if (wp_) for_claimed_runs([&](char* a, size_t len) { (void)os::UffdWriteProtect(uffd_, a, len, false); });
    wake();
    if (failure_server.empty()) return failure.WithContext("evicting to the memory servers");
    return failure.WithContext("evicting to memory server " + failure_server);
  }
  for (size_t k = 0; k < servers_.size(); ++k) {
    servers_[k]->c->written.fetch_add(written[k], std::memory_order_relaxed);
    c_->written.fetch_add(written[k], std::memory_order_relaxed);
  }
  // 5. Drop, mark remote (the server copy is current: clean), and wake waiters to fault again.
  for_claimed_runs([&](char* a, size_t len) {
    int rc = os::Discard(a, len);
    if (rc != 0) TM_LOG_WARN("remote tier: madvise(DONTNEED) after eviction: %s", strerror(-rc));
  });
  for (size_t i = 0; i < m; ++i) {
    if (!claimed[i]) continue;
    PageRecord& rec = region.record(idx[i]);
    rec.flags.fetch_or(kPageRemoteClean, std::memory_order_relaxed);
    rec.flags.fetch_and(uint8_t(~kPageAhead), std::memory_order_relaxed);  // back only by a fault or a fetch
    if (config_.on_evicted) config_.on_evicted(region, idx[i]);
    rec.state.store(S(PageState::kRemote), std::memory_order_release);
    ++w->became_remote;
  }
  wake();
  return Status::Ok();
}

}  // namespace tiermem

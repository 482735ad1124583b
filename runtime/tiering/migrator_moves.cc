// Carrying a round's moves out (the policy thread's execute step, split from migrator.cc's
// Round): the Policy decided them (Policy::PlanRound, block expansion included); here they become
// runs of adjacent pages through the PageMover.
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "backends/numa/numa_backend.h"
#include "base/log.h"
#include "base/os.h"
#include "runtime/tiering/migrator.h"
#include "runtime/tiering/tracker.h"

namespace tiermem {
namespace {

constexpr uint8_t kStateRemote = static_cast<uint8_t>(PageState::kRemote);
constexpr uint64_t kJoinGap = 256;  // evictions join across this many remote pages (1 MiB)

}  // namespace

Migrator::Executed Migrator::Execute(std::vector<PageMove>& moves, bool cxl, uint64_t now,
                                     std::unordered_set<uint64_t>* moved) {
  const size_t page = config_.page_size;
  const ViewIndex& index = index_;
  AccessSampler* tracker = sampler_;
  // Carry the moves out in runs of adjacent pages with the same destination.
  std::sort(moves.begin(), moves.end(), [](const PageMove& a, const PageMove& b) {
    return a.to != b.to ? a.to > b.to : a.page < b.page;  // demotions (to lower tiers) first
  });
  Executed ex;
  uint64_t& demoted = ex.demoted;
  uint64_t& promoted = ex.promoted;
  uint64_t& failed = ex.failed;
  uint64_t& calls = ex.calls;
  uint64_t& migrate_ns = ex.migrate_ns;
  std::string& last_error = ex.last_error;
  std::unordered_set<uint64_t>& moved_now = *moved;
  auto account = [&](size_t k, bool ok) {
    if (moves[k].noop) return;
    if (!ok) {
      ++failed;
      return;
    }
    policy_->Moved(moves[k].page, now);
    if (moves[k].to == Tier::kRemote) policy_->NoteEviction(moves[k].page);
    if (moves[k].to > moves[k].from) {
      ++demoted;
    } else {
      ++promoted;
    }
  };
  auto note_error = [&](Tier to, char* addr, size_t len, const Status& st) {
    last_error = std::string("migrate to ") + std::string(TierName(to)) + ": " + st.ToString();
    TM_LOG_DEBUG("tiering: migrate %p+%zu to %s: %s", static_cast<void*>(addr), len,
                 std::string(TierName(to)).c_str(), st.ToString().c_str());
  };
  // Evictions (moves to remote) of every run go to the pager in one call, which shares its
  // round trips among them: scattered victims (cold pages faulted in at random) cost one call
  // each before, ~75-140 us apiece here, and the policy thread could not keep DRAM within its
  // budget while GUPS faulted ~10k pages per second.
  std::vector<size_t> evict;                          // indices into moves
  std::vector<std::pair<char*, size_t>> evict_runs;  // their runs
  auto flush_evictions = [&] {
    if (evict.empty()) return;
    std::vector<char*> pages;
    for (size_t k : evict) pages.push_back(reinterpret_cast<char*>(moves[k].page * page));
    if (sampling_) {
      // Protection is lifted over spans of victims with no other watched page between them
      // (one mprotect for many: the pages between are accessible already, or remote).
      const std::vector<uint64_t> kept = policy_->WatchedPages();
      for (size_t a = 0; a < evict.size();) {
        size_t b = a + 1;
        while (b < evict.size()) {
          const uint64_t lo = moves[evict[b - 1]].page, hi = moves[evict[b]].page;
          auto w = std::upper_bound(kept.begin(), kept.end(), lo);
          if ((w != kept.end() && *w < hi) || !index.SameRegion(lo, hi)) break;
          ++b;
        }
        const uint64_t first = moves[evict[a]].page, last = moves[evict[b - 1]].page;
        tracker->Release(reinterpret_cast<char*>(first * page), (last - first + 1) * page);
        a = b;
      }
    }
    const uint64_t t_call = os::MonotonicNanos();
    auto r = config_.evict_background ? mover_->EvictPagesBackground(pages) : mover_->EvictPages(pages);
    if (r.ok() && config_.evict_background) evictions_queued_ += r->pages_moved;
    migrate_ns += os::MonotonicNanos() - t_call;
    ++calls;
    for (auto& [addr, len] : evict_runs) {
      // Pages demoted from CXL keep the CXL node binding of their range; when the program
      // touches them again they should come back into DRAM (they are hot then), so rebind.
      if (!r.ok() || !cxl) break;
      Status b = NumaBackend::BindRange(addr, len, mover_->TierNodes(Tier::kDram));
      if (!b.ok()) TM_LOG_DEBUG("tiering: rebinding %p+%zu to DRAM: %s", static_cast<void*>(addr), len,
                                b.ToString().c_str());
    }
    for (size_t k : evict) account(k, r.ok());
    if (!r.ok()) note_error(Tier::kRemote, pages[0], page, r.status());
    evict.clear();
    evict_runs.clear();
  };
  for (size_t i = 0; i < moves.size();) {
    // A run joins adjacent pages, and for evictions also the next victim past a gap of pages
    // that are all remote already (skipped by the pager): scattered victims (cold pages faulted
    // in at random) take one pager call for many instead of one each.
    auto joins = [&](const PageMove& prev, const PageMove& next) {
      if (next.to != prev.to || next.page <= prev.page) return false;
      if (next.page == prev.page + 1) return true;
      if (next.to != Tier::kRemote || next.page - prev.page > kJoinGap) return false;
      // Remote pages are not listed in the views: their records say.
      for (uint64_t k = prev.page + 1; k < next.page; ++k) {
        if (index.Find(k) != nullptr || index.State(k) != kStateRemote) return false;
      }
      return true;
    };
    size_t j = i + 1;
    while (j < moves.size() && joins(moves[j - 1], moves[j])) ++j;
    // Runs of no-ops alone are not worth a call.
    bool any = false;
    for (size_t k = i; k < j; ++k) any |= !moves[k].noop;
    if (!any) {
      i = j;
      continue;
    }
    char* addr = reinterpret_cast<char*>(moves[i].page * page);
    const size_t len = (moves[j - 1].page - moves[i].page + 1) * page;
    // Released (by Runtime::Migrate, or in flush_evictions): no longer watched, and not armed again this round
    // (the views predate the move).
    for (size_t k = i; k < j; ++k) {
      moved_now.insert(moves[k].page);
      policy_->LeftWatch(moves[k].page);  // back in DRAM later only by a fault: a fresh page
    }
    if (moves[i].to == Tier::kRemote) {
      for (size_t k = i; k < j; ++k) {
        if (!moves[k].noop) evict.push_back(k);
      }
      evict_runs.push_back({addr, len});
      i = j;
      continue;
    }
    flush_evictions();  // demotions make room before anything moves up (Migrate lifts sampling)
    const uint64_t t_call = os::MonotonicNanos();
    auto r = mover_->Migrate(addr, len, moves[i].to);
    migrate_ns += os::MonotonicNanos() - t_call;
    ++calls;
    for (size_t k = i; k < j; ++k) account(k, r.ok());
    if (!r.ok()) note_error(moves[i].to, addr, len, r.status());
    i = j;
  }
  flush_evictions();
  return ex;
}

void Migrator::SettleEvictions() {
  if (!config_.evict_background) return;
  uint64_t became_remote = 0;
  const Status st = mover_->WaitEvictions(&became_remote);
  const uint64_t queued = evictions_queued_;
  evictions_queued_ = 0;
  if (st.ok()) return;
  // The pages of the failed windows are local and intact again; the next round sees them there.
  TM_LOG_DEBUG("tiering: background evictions: %s", st.ToString().c_str());
  const uint64_t failed = queued - std::min(queued, became_remote);
  counters_->moves_failed.fetch_add(failed, std::memory_order_relaxed);
  // The round counted them as demotions; the policy thread alone writes demotions here and there.
  const uint64_t demoted = counters_->demotions.load(std::memory_order_relaxed);
  counters_->demotions.fetch_sub(std::min(demoted, failed), std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.last_error = "migrate to remote: " + st.ToString();
}

}  // namespace tiermem

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

// One round's moves carried out (Execute's steps): runs of adjacent pages with one destination
// through Migrate, the evictions of every run gathered into one pager call (FlushEvictions),
// each move reported to the policy (Account).
class Migrator::MoveBatch {
 public:
  MoveBatch(Migrator& m, std::vector<PageMove>& moves, bool cxl, uint64_t now)
      : m_(m), moves_(moves), cxl_(cxl), now_(now), page_(m.config_.page_size) {}
  void Run(std::unordered_set<uint64_t>* moved);
  Executed ex;

 private:
  // A run joins adjacent pages, and for evictions also the next victim past a gap of pages that
  // are all remote already (skipped by the pager): scattered victims (cold pages faulted in at
  // random) take one pager call for many instead of one each.
  bool Joins(const PageMove& prev, const PageMove& next) const;
  void Account(size_t k, bool ok);
  void NoteError(Tier to, char* addr, size_t len, const Status& st);
  // Evictions (moves to remote) of every run go to the pager in one call, which shares its
  // round trips among them: scattered victims (cold pages faulted in at random) cost one call
  // each before, too many for the policy thread to keep DRAM within its budget under GUPS.
  void FlushEvictions();
  void ReleaseVictims();  // the sampler's protection lifted over the victims, before they leave
  void MigrateRun(size_t i, size_t j);

  Migrator& m_;
  std::vector<PageMove>& moves_;
  const bool cxl_;
  const uint64_t now_;
  const size_t page_;
  std::vector<size_t> evict_;                          // indices into moves_
  std::vector<std::pair<char*, size_t>> evict_runs_;  // their runs
};

Migrator::Executed Migrator::Execute(std::vector<PageMove>& moves, bool cxl, uint64_t now,
                                     std::unordered_set<uint64_t>* moved) {
  // Carry the moves out in runs of adjacent pages with the same destination.
  std::sort(moves.begin(), moves.end(), [](const PageMove& a, const PageMove& b) {
    return a.to != b.to ? a.to > b.to : a.page < b.page;  // demotions (to lower tiers) first
  });
  MoveBatch batch(*this, moves, cxl, now);
  batch.Run(moved);
  return std::move(batch.ex);
}

void Migrator::MoveBatch::Run(std::unordered_set<uint64_t>* moved) {
  for (size_t i = 0; i < moves_.size();) {
    size_t j = i + 1;
    while (j < moves_.size() && Joins(moves_[j - 1], moves_[j])) ++j;
    // Runs of no-ops alone are not worth a call.
    bool any = false;
    for (size_t k = i; k < j; ++k) any |= !moves_[k].noop;
    if (!any) {
      i = j;
      continue;
    }
    // Released (by Runtime::Migrate, or in FlushEvictions): no longer watched, and not armed
    // again this round (the views predate the move).
    for (size_t k = i; k < j; ++k) {
      moved->insert(moves_[k].page);
      m_.policy_->LeftWatch(moves_[k].page);  // back in DRAM later only by a fault: a fresh page
    }
    if (moves_[i].to == Tier::kRemote) {
      for (size_t k = i; k < j; ++k) {
        if (!moves_[k].noop) evict_.push_back(k);
      }
      evict_runs_.push_back({reinterpret_cast<char*>(moves_[i].page * page_), (moves_[j - 1].page - moves_[i].page + 1) * page_});
    } else {
      FlushEvictions();  // demotions make room before anything moves up (Migrate lifts sampling)
      MigrateRun(i, j);
    }
    i = j;
  }
  FlushEvictions();
}

bool Migrator::MoveBatch::Joins(const PageMove& prev, const PageMove& next) const {
  if (next.to != prev.to || next.page <= prev.page) return false;
  if (next.page == prev.page + 1) return true;
  if (next.to != Tier::kRemote || next.page - prev.page > kJoinGap) return false;
  // Remote pages are not listed in the views: their records say.
  for (uint64_t k = prev.page + 1; k < next.page; ++k) {
    if (m_.index_.Find(k) != nullptr || m_.index_.State(k) != kStateRemote) return false;
  }
  return true;
}

void Migrator::MoveBatch::Account(size_t k, bool ok) {
  const PageMove& mv = moves_[k];
  if (mv.noop) return;
  if (!ok) {
    ++ex.failed;
    return;
  }
  m_.policy_->Moved(mv.page, now_);
  if (mv.to == Tier::kRemote) m_.policy_->NoteEviction(mv.page);
  if (mv.to > mv.from) {
    ++ex.demoted;
  } else {
    ++ex.promoted;
  }
}

void Migrator::MoveBatch::NoteError(Tier to, char* addr, size_t len, const Status& st) {
  ex.last_error = std::string("migrate to ") + std::string(TierName(to)) + ": " + st.ToString();
  TM_LOG_DEBUG("tiering: migrate %p+%zu to %s: %s", static_cast<void*>(addr), len,
               std::string(TierName(to)).c_str(), st.ToString().c_str());
}

void Migrator::MoveBatch::ReleaseVictims() {
  // Protection is lifted over spans of victims with no other watched page between them (one
  // mprotect for many: the pages between are accessible already, or remote).
  const std::vector<uint64_t> kept = m_.policy_->WatchedPages();
  for (size_t a = 0; a < evict_.size();) {
    size_t b = a + 1;
    while (b < evict_.size()) {
      const uint64_t lo = moves_[evict_[b - 1]].page, hi = moves_[evict_[b]].page;
      auto w = std::upper_bound(kept.begin(), kept.end(), lo);
      if ((w != kept.end() && *w < hi) || !m_.index_.SameRegion(lo, hi)) break;
      ++b;
    }
    const uint64_t first = moves_[evict_[a]].page, last = moves_[evict_[b - 1]].page;
    m_.sampler_->Release(reinterpret_cast<char*>(first * page_), (last - first + 1) * page_);
    a = b;
  }
}

void Migrator::MoveBatch::FlushEvictions() {
  if (evict_.empty()) return;
  std::vector<char*> pages;
  for (size_t k : evict_) pages.push_back(reinterpret_cast<char*>(moves_[k].page * page_));
  if (m_.sampling_) ReleaseVictims();
  PageMover& mover = *m_.mover_;
  const uint64_t t_call = os::MonotonicNanos();
  auto r = m_.config_.evict_background ? mover.EvictPagesBackground(pages) : mover.EvictPages(pages);
  if (r.ok() && m_.config_.evict_background) m_.evictions_queued_ += r->pages_moved;
  ex.migrate_ns += os::MonotonicNanos() - t_call;
  ++ex.calls;
  for (auto& [addr, len] : evict_runs_) {
    // Pages demoted from CXL keep the CXL node binding of their range; when the program
    // touches them again they should come back into DRAM (they are hot then), so rebind.
    if (!r.ok() || !cxl_) break;
    Status b = NumaBackend::BindRange(addr, len, mover.TierNodes(Tier::kDram));
    if (!b.ok()) TM_LOG_DEBUG("tiering: rebinding %p+%zu to DRAM: %s", static_cast<void*>(addr), len,
                              b.ToString().c_str());
  }
  for (size_t k : evict_) Account(k, r.ok());
  if (!r.ok()) NoteError(Tier::kRemote, pages[0], page_, r.status());
  evict_.clear();
  evict_runs_.clear();
}

void Migrator::MoveBatch::MigrateRun(size_t i, size_t j) {
  char* addr = reinterpret_cast<char*>(moves_[i].page * page_);
  const size_t len = (moves_[j - 1].page - moves_[i].page + 1) * page_;
  const uint64_t t_call = os::MonotonicNanos();
  auto r = m_.mover_->Migrate(addr, len, moves_[i].to);
  ex.migrate_ns += os::MonotonicNanos() - t_call;
  ++ex.calls;
  for (size_t k = i; k < j; ++k) Account(k, r.ok());
  if (!r.ok()) NoteError(moves_[i].to, addr, len, r.status());
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

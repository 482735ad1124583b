// A policy round (policy.h, "A policy round"): the placement decisions the policy thread used to
// make itself around Plan (confirmation of DRAM victims, the carried watch, block expansion,
// budget relief's second chance). Pure like Plan: no OS calls, every call takes the time.
#include <algorithm>
#include <iterator>
#include <unordered_set>
#include <utility>

#include "runtime/tiering/policy.h"

namespace tiermem {
namespace {

int Idx(Tier t) { return static_cast<int>(t); }

}  // namespace

void Policy::Watched(std::span<const uint64_t> untouched, std::span<const AccessSample> samples, uint64_t now_ns) {
  // Pages sampled without an access for confirm_ns_ (or a whole sampler round when they were not
  // under the carried watch) are confirmed cold. Pages under watch that were touched leave it:
  // only the untouched ones were carried by the sampler.
  // The next watch is rebuilt from the untouched pages (PageMap: a probe or two a page, no
  // allocation once its table has grown to the watch's size).
  confirmed_cold_.clear();
  PageMap<uint64_t>& still = watch_next_;
  still.clear();
  for (uint64_t k : untouched) {
    const uint64_t* since = watch_since_.find(k);
    if (since == nullptr) {
      confirmed_cold_.push_back(k);  // sampled one whole round
      continue;
    }
    if (now_ns - *since >= confirm_ns_) confirmed_cold_.push_back(k);
    still.insert(k, *since);  // still armed: the sampler carried it
  }
  std::sort(confirmed_cold_.begin(), confirmed_cold_.end());
  confirmed_cold_.erase(std::unique(confirmed_cold_.begin(), confirmed_cold_.end()), confirmed_cold_.end());
  watch_since_.swap(still);
  if (watch_order_.size() > 2 * watch_since_.size() + 1024) {
    // Mostly stale: rebuilt from the watch itself, oldest first.
    watch_order_.clear();
    watch_since_.for_each([this](uint64_t page, uint64_t since) { watch_order_.push_back({since, page}); });
    std::sort(watch_order_.begin(), watch_order_.end());
  }
  if (!carry_) return;
  // A page caught in use is not put under watch again for a while; expired marks are dropped.
  hot_until_.erase_if([now_ns](uint64_t, uint64_t until) { return until <= now_ns; });
  for (const AccessSample& a : samples) hot_until_[a.page] = now_ns + kHotRecheck * confirm_ns_;
}

void Policy::WatchStarted(uint64_t page, uint64_t now_ns) {
  if (!carry_ || !watch_since_.insert(page, now_ns)) return;
  // In the order the watches began: the policy thread starts them at ever later times, so this
  // is an append but for a caller that does not.
  auto at = watch_order_.end();
  while (at != watch_order_.begin() && std::prev(at)->first > now_ns) --at;
  watch_order_.insert(at, {now_ns, page});
}

void Policy::TakeWatched(size_t max, uint64_t now_ns, std::vector<uint64_t>* out) {
  while (out->size() < max && !watch_order_.empty()) {
    const auto [since, page] = watch_order_.front();
    const uint64_t* at = watch_since_.find(page);
    if (at == nullptr || *at != since) {
      watch_order_.pop_front();  // left the watch
      continue;
    }
    if (now_ns < since + confirm_ns_) break;  // the oldest watch is too young to say anything
    watch_order_.pop_front();
    out->push_back(page);
  }
}

std::vector<uint64_t> Policy::WatchedPages() const {
  std::vector<uint64_t> kept;
  kept.reserve(watch_since_.size());
  watch_since_.for_each([&kept](uint64_t page, uint64_t) { kept.push_back(page); });
  std::sort(kept.begin(), kept.end());
  return kept;
}

bool Policy::RoomBelowLowWatermark(Tier tier, uint64_t usage, uint64_t pages) const {
  const int t = Idx(tier);
  if (t < 0 || t >= kNumTiers || !config_.present[t]) return false;
  if (config_.budget_pages[t] == 0) return true;
  return static_cast<double>(usage + pages) <= config_.low_watermark * static_cast<double>(config_.budget_pages[t]);
}

bool Policy::AboveHighWatermark(Tier tier, uint64_t usage) const {
  const int t = Idx(tier);
  if (t < 0 || t >= kNumTiers || config_.budget_pages[t] == 0) return false;
  return static_cast<double>(usage) > config_.high_watermark * static_cast<double>(config_.budget_pages[t]);
}

std::vector<PageMove> Policy::PlanRound(const RoundInput& in, uint64_t now_ns, PlanStats* stats) {
  uint64_t dram_pages = 0, lower_pages = 0;
  for (const PageView& v : in.views) (v.tier == Tier::kDram ? dram_pages : lower_pages)++;
  for (int t = 0; t < kNumTiers; ++t) {
    (t == Idx(Tier::kDram) ? dram_pages : lower_pages) += in.unlisted[t] + in.reserved[t];
  }
  // Pages that left DRAM since they were listed are out of its count, as unseen ones are.
  TierPageCounts gone = in.unseen;
  gone[Idx(Tier::kDram)] += in.left_dram;
  dram_pages -= std::min(dram_pages, gone[Idx(Tier::kDram)]);
  PlanStats ps;
  // Nothing to decide while every page is in DRAM and DRAM is below its high watermark (no
  // demotion is due and nothing can be promoted): the plan is skipped, so a runtime whose data
  // fits costs one scan per idle round.
  const bool idle = lower_pages == 0 && in.samples == 0 && config_.budget_pages[Idx(Tier::kDram)] != 0 &&
                    !AboveHighWatermark(Tier::kDram, dram_pages);
  std::vector<PlannedMove> plan;
  if (!idle) plan = Plan(in.views, in.unlisted, now_ns, &ps, in.reserved, gone);
  if (in.sampling && in.lookup != nullptr) ps.held = ConfirmVictims(&plan, *in.lookup, dram_pages, now_ns);
  ps.deferred += ps.held;
  ps.planned = plan.size();
  ps.confirmed_cold = confirmed_cold_.size();
  if (stats != nullptr) *stats = ps;
  return ExpandBlocks(plan, in, now_ns);
}

// DRAM pages not in `plan` that may replace its unconfirmed victims: `spare`, the confirmed-cold
// ones, coldest first (under the carried watch: the longest watched first); `partial`, those
// watched without an access but not yet for confirm_ns_, the longest watched first.
void Policy::SpareVictims(const std::vector<PlannedMove>& plan, const ViewLookup& lookup, uint64_t now_ns,
                          std::vector<std::pair<double, uint64_t>>* spare,
                          std::vector<std::pair<double, uint64_t>>* partial) const {
  std::unordered_set<uint64_t> in_plan;
  for (const PlannedMove& m : plan) in_plan.insert(m.page);
  auto spare_page = [&](uint64_t k) {
    const PageView* v = lookup.Find(k);
    return v != nullptr && !in_plan.count(k) && v->tier == Tier::kDram && !v->pinned;
  };
  for (uint64_t k : confirmed_cold_) {
    if (!spare_page(k)) continue;
    const uint64_t* since = watch_since_.find(k);
    spare->push_back({since != nullptr ? static_cast<double>(*since) : Heat(k, now_ns), k});
  }
  watch_since_.for_each([&](uint64_t k, uint64_t since) {
    if (!ConfirmedCold(k) && spare_page(k)) partial->push_back({static_cast<double>(since), k});
  });
  std::sort(spare->begin(), spare->end());
  std::sort(partial->begin(), partial->end());
}

uint64_t Policy::ConfirmVictims(std::vector<PlannedMove>* plan_in, const ViewLookup& lookup, uint64_t dram_pages,
                                uint64_t now_ns) {
  // Why heat alone is not enough for DRAM's victims: a round may find DRAM far over its budget
  // (pages faulted back while the last, slow round ran), and then the plan's victims are pages of
  // equal, decayed heat, hot ones included; a hot page demoted to CXL is used there without a
  // fault and found again only by sampling. And a hot page is sampled once in seconds, so its
  // heat has decayed long before pages faulted in a moment ago, which look hotter.
  std::vector<PlannedMove>& plan = *plan_in;
  // Nothing to confirm: the lists below (every page under watch, sorted) are not made.
  if (std::none_of(plan.begin(), plan.end(), [this](const PlannedMove& m) {
        return m.from == Tier::kDram && m.to > m.from && !ConfirmedCold(m.page);
      })) {
    return 0;
  }
  const bool cxl = config_.present[Idx(Tier::kCxl)];
  const uint64_t dram_budget = config_.budget_pages[Idx(Tier::kDram)];
  std::vector<std::pair<double, uint64_t>> spare, partial;
  SpareVictims(plan, lookup, now_ns, &spare, &partial);
  size_t next_partial = 0, next_spare = 0, spare_end = spare.size();
  uint64_t held = 0;
  // Victims bound for remote need confirmation too, except for DRAM's excess over 1.5x its
  // budget: there the pages faulted back from remote outrun the sampler (a round confirms at most
  // the pages it sampled), and that excess leaves by heat alone (a hot page evicted by mistake
  // comes back at its next touch). Evicting everything down to the budget by heat alone took
  // hundreds of hot pages at once in the guest. Without a CXL tier the watch confirms many pages
  // per round (it carries them), so only DRAM's excess over its budget itself leaves unconfirmed.
  const uint64_t unconfirmed_above = cxl ? dram_budget * 3 / 2 : dram_budget;
  uint64_t remote_unconfirmed = dram_pages > unconfirmed_above ? dram_pages - unconfirmed_above : 0;
  std::erase_if(plan, [&](PlannedMove& m) {
    if (m.from != Tier::kDram || m.to <= m.from || ConfirmedCold(m.page)) return false;
    if (carry_ && next_spare < spare_end) {  // confirmed pages first, the longest watched
      m.page = spare[next_spare++].second;
      return false;
    }
    if (m.to == Tier::kRemote && remote_unconfirmed > 0) {
      --remote_unconfirmed;
      // Under the carried watch the longest watched untouched pages go first, then the plan's
      // pick (the coldest by heat: after the hot set moves, the old one).
      if (carry_ && next_partial < partial.size()) m.page = partial[next_partial++].second;
      return false;
    }
    // Replacements keep the plan's order: the coldest go furthest (remote), the warmest of the
    // confirmed-cold pages to CXL (else CXL fills with the coldest pages, and the warm set, whose
    // pages are rarely untouched for a whole round, finds no room there).
    if (next_spare < spare_end) {
      m.page = m.to == Tier::kRemote ? spare[next_spare++].second : spare[--spare_end].second;
      return false;
    }
    ++held;
    return true;
  });
  if (held > 0) {
    // DRAM stays over its budget this round: a page comes up into it only in exchange for one
    // that leaves (the hottest first: promotions are planned hottest first).
    uint64_t out = 0, in = 0;
    for (const PlannedMove& m : plan) out += m.from == Tier::kDram && m.to > m.from;
    std::erase_if(plan, [&](const PlannedMove& m) {
      if (m.to != Tier::kDram || m.from == Tier::kDram || ++in <= out) return false;
      ++held;
      return true;
    });
  }
  return held;
}

std::vector<PageMove> Policy::ExpandBlocks(const std::vector<PlannedMove>& plan, const RoundInput& in,
                                           uint64_t now_ns) const {
  std::vector<PageMove> moves;
  std::unordered_set<uint64_t> planned;
  for (const PlannedMove& m : plan) planned.insert(m.page);
  for (const PlannedMove& m : plan) moves.push_back({m.page, m.from, m.to, false});
  if (in.lookup == nullptr) return moves;
  // Room left on each destination after the plan: expansion never pushes a tier past its budget
  // (the mover would refuse the whole run).
  std::array<int64_t, kNumTiers> room{};
  {
    std::array<int64_t, kNumTiers> usage{};
    for (int t = 0; t < kNumTiers; ++t) usage[t] = static_cast<int64_t>(in.unlisted[t] + in.reserved[t]);
    for (const PageView& v : in.views) ++usage[Idx(v.tier)];
    for (const PlannedMove& m : plan) --usage[Idx(m.from)], ++usage[Idx(m.to)];
    for (int t = 0; t < kNumTiers; ++t) {
      const uint64_t b = config_.budget_pages[t];
      room[t] = b == 0 ? INT64_MAX / 2
                       : static_cast<int64_t>(static_cast<double>(b) * config_.low_watermark) - usage[t];
    }
  }
  for (const PlannedMove& m : plan) {
    if (m.to <= m.from) continue;  // promotions are not expanded
    const uint64_t block = m.page & ~(kBlockPages - 1);
    for (uint64_t k = block; k < block + kBlockPages; ++k) {
      if (planned.count(k)) continue;
      const PageView* v = in.lookup->Find(k);
      if (v == nullptr || v->pinned) continue;
      if (v->tier == m.to) {
        moves.push_back({k, v->tier, m.to, true});
      } else if (v->tier == m.from && room[Idx(m.to)] > 0 && (!in.sampling || ConfirmedCold(k)) &&
                 Heat(k, now_ns) < config_.promote_heat) {
        moves.push_back({k, m.from, m.to, false});
        --room[Idx(m.to)];
      } else {
        continue;
      }
      planned.insert(k);
    }
  }
  return moves;
}

}  // namespace tiermem

#include "runtime/tiering/policy.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace tiermem {
namespace {

int Idx(Tier t) { return static_cast<int>(t); }

}  // namespace

void Policy::Ranked::Reset(bool hottest) {
  items_.clear();
  ready_ = 0;
  hottest_ = hottest;
}

const Policy::Candidate& Policy::Ranked::at(size_t i) {
  if (i >= ready_) {
    // The next chunk of the order: at least up to i, and twice what was ready (at least 256), so
    // taking n candidates one by one costs O(size * log(n)) at most, not a sort of them all.
    const size_t want = std::min(items_.size(), std::max({i + 1, ready_ * 2, size_t{256}}));
    auto before = [this](const Candidate& a, const Candidate& b) { return Before(a, b); };
    if (want < items_.size()) {
      std::nth_element(items_.begin() + static_cast<ptrdiff_t>(ready_),
                       items_.begin() + static_cast<ptrdiff_t>(want), items_.end(), before);
    }
    std::sort(items_.begin() + static_cast<ptrdiff_t>(ready_), items_.begin() + static_cast<ptrdiff_t>(want), before);
    ready_ = want;
  }
  return items_[i];
}

Policy::Policy(const PolicyConfig& config) : config_(config), tokens_(config.max_burst) {}

double Policy::Decayed(const PageHeat& h, uint64_t now_ns) const {
  if (h.heat == 0 || now_ns <= h.updated_ns || config_.half_life_ms <= 0) return h.heat;
  double dt_ms = static_cast<double>(now_ns - h.updated_ns) / 1e6;
  return h.heat * std::exp2(-dt_ms / config_.half_life_ms);
}

void Policy::KeepUnlisted(const Entry& e, bool some_unlisted, uint64_t now_ns) {
  // The stored heat bounds the decayed one: most forgotten pages cost no exp2. (A page evicted
  // lately is remembered by its stamp in evicted_, whatever its heat: not here.)
  if (!some_unlisted) return;
  if (e.h.heat < config_.forget_heat || Decayed(e.h, now_ns) < config_.forget_heat) return;
  next_.push_back(e);
}

bool Policy::Settled(const PageHeat& h, uint64_t now_ns) const {
  if (h.moved_ns == 0) return true;
  return now_ns >= h.moved_ns &&
         static_cast<double>(now_ns - h.moved_ns) >= config_.min_residence_ms * 1e6;
}

Tier Policy::Below(Tier t) const {
  for (int i = Idx(t) + 1; i < kNumTiers; ++i) {
    if (config_.present[i]) return static_cast<Tier>(i);
  }
  return Tier::kAuto;
}

Policy::PageHeat* Policy::Find(uint64_t page) {
  return const_cast<PageHeat*>(static_cast<const Policy*>(this)->Find(page));
}

const Policy::PageHeat* Policy::Find(uint64_t page) const {
  // pages_ holds distinct pages in ascending order, so page p can only be at an index in
  // [p - last + n - 1, p - first]: one probe where the live pages are dense (a region's pages
  // mostly are), a binary search over the gap otherwise.
  const size_t n = pages_.size();
  if (n > 0 && page >= pages_.front().page && page <= pages_.back().page) {
    const uint64_t hi = std::min<uint64_t>(n - 1, page - pages_.front().page);
    const uint64_t from_end = pages_.back().page - page;  // pages after it, at most
    const uint64_t lo = from_end >= n - 1 ? 0 : n - 1 - from_end;
    auto it = std::lower_bound(pages_.begin() + static_cast<ptrdiff_t>(lo),
                               pages_.begin() + static_cast<ptrdiff_t>(hi) + 1, page,
                               [](const Entry& e, uint64_t p) { return e.page < p; });
    if (it != pages_.end() && it->page == page) return &it->h;
  }
  auto f = fresh_.find(page);
  return f == fresh_.end() ? nullptr : &f->second;
}

Policy::PageHeat& Policy::Get(uint64_t page) {
  if (PageHeat* h = Find(page)) return *h;
  return fresh_[page];
}

void Policy::Record(std::span<const AccessSample> samples) {
  for (const AccessSample& s : samples) {
    PageHeat& h = Get(s.page);
    uint64_t t = std::max(s.time_ns, h.updated_ns);  // samples may arrive slightly out of order
    h.heat = static_cast<float>(Decayed(h, t) + s.weight);
    h.updated_ns = t;
  }
}

double Policy::Heat(uint64_t page, uint64_t now_ns) const {
  const PageHeat* h = Find(page);
  return h == nullptr ? 0 : Decayed(*h, now_ns);
}

void Policy::Moved(uint64_t page, uint64_t now_ns) {
  PageHeat& h = Get(page);
  h.moved_ns = now_ns == 0 ? 1 : now_ns;
}

void Policy::Evicted(uint64_t page, uint64_t now_ns) {
  if (PageHeat* h = Find(page); h != nullptr && now_ns > h->updated_ns) h->updated_ns = now_ns;
}

void Policy::FaultedBack(uint64_t page, uint64_t now_ns) {
  if (PageHeat* h = Find(page)) h->moved_ns = 0;
  auto e = evicted_.find(page);
  if (e == evicted_.end()) return;
  // Its stamp counts once: a second fault without an eviction between says nothing more.
  if (carry_ && evictions_ - e->second <= refault_window()) hot_until_[page] = now_ns + kHotRecheck * confirm_ns_;
  evicted_.erase(e);
}

void Policy::NoteEviction(uint64_t page) {
  ++evictions_;
  const uint64_t window = refault_window();
  // Only a page the policy knows (listed, or sampled lately) is stamped: under a window of the
  // page records a page evicted from outside it (by relief's ring) is not, as before the stamps
  // moved out of the table (stamping those too held more pages as in use and made relief spare
  // them: kv at 16 GiB, relief 4.3 s of rounds against 4 ms).
  if (window == 0 || Find(page) == nullptr) return;
  evicted_[page] = evictions_;
  evicted_order_.push_back({evictions_, page});
  // Stamps older than the window are forgotten, oldest first (a page evicted again since has a
  // newer stamp, and its old entry here is skipped).
  while (!evicted_order_.empty() && evictions_ - evicted_order_.front().first > window) {
    const auto [stamp, old] = evicted_order_.front();
    evicted_order_.pop_front();
    auto it = evicted_.find(old);
    if (it != evicted_.end() && it->second == stamp) evicted_.erase(it);
  }
}

uint64_t Policy::TakeTokens(uint64_t now_ns, uint64_t wanted) {
  if (tokens_ns_ != 0 && now_ns > tokens_ns_) {
    tokens_ += config_.max_moves_per_s * static_cast<double>(now_ns - tokens_ns_) / 1e9;
  }
  tokens_ns_ = std::max(tokens_ns_, now_ns);
  tokens_ = std::min(tokens_, config_.max_burst);
  uint64_t got = std::min<uint64_t>(wanted, static_cast<uint64_t>(tokens_));
  tokens_ -= static_cast<double>(got);
  return got;
}

// Plan's working state: the moves so far and what they change.
struct Policy::PlanState {
  std::array<uint64_t, kNumTiers> usage{};  // pages per tier, as if the plan so far were done
  std::vector<PlannedMove> plan;
  std::vector<double> plan_heat;           // heat of each planned page (parallel to plan)
  std::unordered_set<uint64_t> planned;    // a page moves at most once per plan
  // Each tier's movable pages, coldest first (selected as far as they are taken); `taken[t]`
  // counts those already chosen as victims.
  std::array<size_t, kNumTiers> taken{};
  uint64_t budget = 0;  // moves the rate limit still allows
  PlanStats st;
  void Emit(uint64_t page, Tier from, Tier to, double heat = 0) {
    planned.insert(page);
    plan.push_back({page, from, to});
    plan_heat.push_back(heat);
    --usage[Idx(from)];
    ++usage[Idx(to)];
  }
};

std::vector<PlannedMove> Policy::Plan(std::span<const PageView> pages, const TierPageCounts& unlisted,
                                      uint64_t now_ns, PlanStats* stats, const TierPageCounts& reserved,
                                      const TierPageCounts& unseen) {
  PlanState s;
  s.usage = unlisted;
  for (int t = 0; t < kNumTiers; ++t) s.usage[t] += reserved[t];
  MergeListed(pages, unlisted, now_ns, &s.usage);
  for (int t = 0; t < kNumTiers; ++t) s.usage[t] -= std::min(s.usage[t], unseen[t]);
  s.budget = TakeTokens(now_ns, ~0ull);
  PlanDemotions(unlisted, s);
  PlanCxlSwaps(s);
  PlanPromotions(s);
  // Unused tokens go back to the bucket.
  tokens_ += static_cast<double>(s.budget);
  if (stats != nullptr) *stats = s.st;
  return std::move(s.plan);
}

void Policy::MergeListed(std::span<const PageView> pages, const TierPageCounts& unlisted, uint64_t now_ns,
                         std::array<uint64_t, kNumTiers>* usage) {
  // Movable pages of each tier with their heat now. The live pages are merged with pages_ (both
  // sorted by page: the policy thread lists them in address order; any other order is sorted
  // here first), and the merge makes the next pages_, so pages no longer listed are forgotten.
  std::array<Ranked, kNumTiers>& movable = movable_;
  for (Ranked& r : movable) r.Reset(false);
  bool ascending = true;
  for (size_t i = 1; i < pages.size() && ascending; ++i) ascending = pages[i - 1].page < pages[i].page;
  std::vector<uint32_t> order;
  if (!ascending) {
    order.resize(pages.size());
    for (size_t i = 0; i < pages.size(); ++i) order[i] = static_cast<uint32_t>(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return pages[a].page < pages[b].page; });
  }
  next_.clear();
  next_.reserve(pages.size());
  size_t j = 0;  // merge cursor in pages_
  // Heat of pages not listed is kept only where the caller says some live pages are unlisted:
  // otherwise `pages` is every live page, and one not listed was freed.
  bool some_unlisted = false;
  for (uint64_t n : unlisted) some_unlisted |= n > 0;
  for (size_t k = 0; k < pages.size(); ++k) {
    const PageView& v = ascending ? pages[k] : pages[order[k]];
    int t = Idx(v.tier);
    if (t >= kNumTiers) continue;
    if (!next_.empty() && next_.back().page == v.page) continue;  // listed twice: once
    PageHeat h;
    while (j < pages_.size() && pages_[j].page < v.page) KeepUnlisted(pages_[j++], some_unlisted, now_ns);
    if (j < pages_.size() && pages_[j].page == v.page) {
      h = pages_[j++].h;
    } else if (!fresh_.empty()) {
      auto it = fresh_.find(v.page);
      if (it != fresh_.end()) {
        h = it->second;
        fresh_.erase(it);  // taken: what is left are pages sampled but not listed
      }
    }
    next_.push_back({v.page, h});
    ++(*usage)[t];
    if (v.pinned || !Settled(h, now_ns)) continue;
    if (t == kNumTiers - 1) {
      // The bottom tier is never relieved nor a swap's victim: its pages matter only as
      // promotions, at promote_heat or above (the stored heat bounds the decayed one, so most
      // pages cost no exp2). At several GiB most live pages are here.
      if (h.heat < config_.promote_heat) continue;
      const double heat = Decayed(h, now_ns);
      if (heat >= config_.promote_heat) movable[t].items().push_back({v.page, heat});
      continue;
    }
    movable[t].items().push_back({v.page, Decayed(h, now_ns)});
  }
  while (j < pages_.size()) KeepUnlisted(pages_[j++], some_unlisted, now_ns);
  if (some_unlisted) KeepFreshUnlisted(now_ns);
  pages_.swap(next_);
  fresh_.clear();
}

void Policy::KeepFreshUnlisted(uint64_t now_ns) {
  // Pages sampled since the last plan and not listed (a page that faulted back and was evicted
  // again in between) are kept like the others not listed, merged in page order.
  if (fresh_.empty()) return;
  const size_t listed = next_.size();
  for (const auto& [page, h] : fresh_) KeepUnlisted({page, h}, true, now_ns);
  if (next_.size() > listed) {
    std::sort(next_.begin() + static_cast<ptrdiff_t>(listed), next_.end(),
              [](const Entry& a, const Entry& b) { return a.page < b.page; });
    std::inplace_merge(next_.begin(), next_.begin() + static_cast<ptrdiff_t>(listed), next_.end(),
                       [](const Entry& a, const Entry& b) { return a.page < b.page; });
  }
}

uint64_t Policy::LimitAt(int t, double share) const {
  return static_cast<uint64_t>(std::floor(static_cast<double>(config_.budget_pages[t]) * share));
}

// 1. Demotions: relieve every tier above its high watermark, bottom up (a lower tier's relief
//    makes room for the tier above it). A tier's victims go to the nearest tiers below with
//    room under their high watermark, the coldest victims the furthest down: a full CXL tier
//    never blocks DRAM's relief (its overflow goes straight to remote).
void Policy::PlanDemotions(const TierPageCounts& unlisted, PlanState& s) {
  for (int t = kNumTiers - 2; t >= 0; --t) {
    if (!config_.present[t] || config_.budget_pages[t] == 0) continue;
    if (!AboveHighWatermark(static_cast<Tier>(t), s.usage[t])) continue;
    uint64_t need = s.usage[t] - std::min(s.usage[t], LimitAt(t, config_.low_watermark));
    // How many go to each tier below, nearest first.
    std::array<uint64_t, kNumTiers> share{};
    uint64_t placed = 0;
    for (int d = t + 1; d < kNumTiers && placed < need; ++d) {
      if (!config_.present[d]) continue;
      uint64_t room = need - placed;
      if (config_.budget_pages[d] != 0) {
        uint64_t cap = LimitAt(d, config_.high_watermark);
        room = std::min(room, cap > s.usage[d] ? cap - s.usage[d] : 0);
      }
      share[d] = room;
      placed += room;
    }
    // A tier listed only in part (the policy thread read a window of its pages): its victims are
    // the coldest quarter of what is listed (one at least), not all of it, so a window of hot
    // pages is not emptied to make the whole tier's room; the next rounds' windows give the rest.
    const uint64_t avail = movable_[t].size() - s.taken[t];
    const uint64_t total =
        std::min<uint64_t>(placed, unlisted[t] > 0 ? std::max<uint64_t>(avail > 0 ? 1 : 0, avail / 4) : avail);
    const uint64_t now_moves = std::min<uint64_t>(total, s.budget);
    if (total > now_moves) s.st.deferred += total - now_moves;
    // Victims coldest first; assign the furthest destination first.
    uint64_t left = now_moves;
    for (int d = kNumTiers - 1; d > t && left > 0; --d) {
      for (uint64_t k = 0; k < share[d] && left > 0; ++k, --left) {
        const Candidate v = movable_[t].at(s.taken[t]++);
        s.Emit(v.page, static_cast<Tier>(t), static_cast<Tier>(d), v.heat);
        --s.budget;
        ++s.st.demotions;
      }
    }
  }
}

// 1b. Warmer pages to CXL: while the CXL tier sits below its high watermark it is not relieved,
//     so it keeps whatever reached it first, and DRAM's victims go past it to remote however
//     warm they are (in the QEMU full guest the CXL node held 1600-2300 cold pages while 8-31%
//     of the warm set was remote). A DRAM victim bound for remote (warmest first) takes the
//     place of a CXL page colder than it by swap_margin, which goes to remote instead.
void Policy::PlanCxlSwaps(PlanState& s) {
  const int kC = Idx(Tier::kCxl), kR = Idx(Tier::kRemote);
  if (!config_.present[kC] || !config_.present[kR] || s.budget == 0) return;
  std::vector<size_t> to_remote;  // DRAM victims bound for remote, in plan order (coldest first)
  for (size_t i = 0; i < s.plan.size(); ++i) {
    if (s.plan[i].from == Tier::kDram && s.plan[i].to == Tier::kRemote) to_remote.push_back(i);
  }
  Ranked& cxl = movable_[kC];
  for (auto it = to_remote.rbegin(); it != to_remote.rend() && s.budget > 0; ++it) {
    while (s.taken[kC] < cxl.size() && s.planned.count(cxl.at(s.taken[kC]).page)) ++s.taken[kC];
    if (s.taken[kC] >= cxl.size()) break;
    const Candidate cold = cxl.at(s.taken[kC]);
    if (cold.heat + config_.swap_margin > s.plan_heat[*it]) break;  // the rest are colder still
    ++s.taken[kC];
    s.plan[*it].to = Tier::kCxl;
    --s.usage[kR];
    ++s.usage[kC];
    s.Emit(cold.page, Tier::kCxl, Tier::kRemote, cold.heat);
    --s.budget;
    ++s.st.demotions;
  }
}

// 2. Promotions: hottest pages of the lower tiers, into the highest tier with room, or by
//    swapping with a clearly colder page of the tier just above.
void Policy::PlanPromotions(PlanState& s) {
  for (int src = 1; src < kNumTiers; ++src) {
    if (!config_.present[src]) continue;
    // Only pages at promote_heat or above, hottest first (selected as far as they are taken).
    Ranked& hot = hot_;
    hot.Reset(true);
    for (size_t i = 0; i < movable_[src].size(); ++i) {
      // Pages already planned as demotion victims of this tier (its first taken[src] in rank
      // order) are not promoted back.
      if (i < s.taken[src]) continue;
      const Candidate& c = movable_[src].items()[i];
      if (c.heat >= config_.promote_heat && !s.planned.count(c.page)) hot.items().push_back(c);
    }
    for (size_t i = 0; i < hot.size(); ++i) {
      if (s.budget == 0) {
        s.st.deferred += hot.size() - i;
        break;
      }
      const Candidate c = hot.at(i);
      if (!PromoteInto(src, c, s)) SwapUp(src, c, s);
    }
  }
}

bool Policy::PromoteInto(int src, const Candidate& c, PlanState& s) {
  // The highest tier above with room below its low watermark (or no budget).
  for (int up = 0; up < src; ++up) {
    if (!config_.present[up]) continue;
    if (config_.budget_pages[up] == 0 || s.usage[up] < LimitAt(up, config_.low_watermark)) {
      s.Emit(c.page, static_cast<Tier>(src), static_cast<Tier>(up));
      --s.budget;
      ++s.st.promotions;
      return true;
    }
  }
  return false;
}

void Policy::SwapUp(int src, const Candidate& c, PlanState& s) {
  // Every tier above is full: swap with the coldest page of the nearest tier above.
  int up = src - 1;
  while (up >= 0 && !config_.present[up]) --up;
  if (up < 0 || s.budget < 2) return;
  Ranked& above = movable_[up];
  while (s.taken[up] < above.size() && s.planned.count(above.at(s.taken[up]).page)) ++s.taken[up];
  if (s.taken[up] >= above.size()) return;
  const Candidate victim = above.at(s.taken[up]);
  if (victim.heat + config_.swap_margin > c.heat) return;  // not clearly hotter: stay
  ++s.taken[up];
  s.Emit(victim.page, static_cast<Tier>(up), Below(static_cast<Tier>(up)));
  s.Emit(c.page, static_cast<Tier>(src), static_cast<Tier>(up));
  s.budget -= 2;
  ++s.st.demotions;
  ++s.st.promotions;
}

}  // namespace tiermem

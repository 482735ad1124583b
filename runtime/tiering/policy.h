// The tiering policy: turns access samples and page records into a migration plan.
//
// Pure: no OS calls, no threads, no clock of its own (every call takes `now_ns`), so unit tests
// drive it with a fake clock and synthetic traces. The policy thread (runtime/tiering/migrator.h) feeds it
// samples from the tracker, the page records of every live page, and carries out the plan.
//
// Model
// - Heat: every page has a heat value that decays exponentially with time (half-life
//   `half_life_ms`) and grows by 1 per access sample. Decay is applied lazily (heat and the time
//   it was last brought up to date are stored), so idle pages cost nothing.
// - Budgets: per-tier page budgets (DRAM from TIERMEM_DRAM_LIMIT, CXL from TIERMEM_CXL_LIMIT,
//   remote from the memory servers' capacity). A tier above `high_watermark` of its budget is
//   demoted to `low_watermark`: coldest pages first, to the nearest present tiers below with
//   room (DRAM -> CXL -> remote), the coldest the furthest down; tiers are relieved bottom up,
//   so a full CXL tier is emptied towards remote while DRAM's overflow goes past it.
// - Promotions: a page on a lower tier whose heat reaches `promote_heat` moves to the highest tier
//   with room below its low watermark; when that tier is full, it may swap with that tier's
//   coldest page, but only when it is hotter by `swap_margin` (hysteresis).
// - Hysteresis: besides the promote/demote gap above, a page that was moved stays put for
//   `min_residence_ms` (no ping-pong between two tiers under a noisy signal).
// - Rate limit: a token bucket of `max_moves_per_s` pages (burst `max_burst`); demotions that a
//   budget needs are planned before promotions, so an over-full tier is relieved first.
// - Pinned pages (kPagePinned, the API's kAllocPin) are never moved and never chosen as victims;
//   they still count against their tier's budget.
//
// Thread safety: none; one thread (the policy thread) owns a Policy.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/page_map.h"
#include "runtime/pages/sampler.h"

#include "tiermem/tiermem.hpp"

namespace tiermem {

struct PolicyConfig {
  // Budget in pages per tier (kDram, kCxl, kRemote); 0 = unlimited. A tier that is absent
  // (`present` false) is skipped by demotions and promotions.
  std::array<uint64_t, kNumTiers> budget_pages{};
  std::array<bool, kNumTiers> present{true, false, false};
  double high_watermark = 0.98;  // demote when a tier holds more than this share of its budget
  double low_watermark = 0.95;   // ... down to this share; promotions fill up to it
  double half_life_ms = 200;     // heat halves in this time without accesses
  double promote_heat = 1.5;     // heat at which a page on a lower tier is promoted
  double forget_heat = 0.25;     // an unlisted page's heat is kept while at least this (two
                                 // half-lives after one access): see Plan
  double swap_margin = 1.0;      // a promotion into a full tier must beat its coldest page by this
  double min_residence_ms = 500; // a moved page stays where it went at least this long
  double max_moves_per_s = 50000;// token bucket rate (pages per second)
  double max_burst = 8192;       // token bucket depth (pages)
};

// AccessSample (runtime/pages/sampler.h): one access seen by a sampler (or a remote fault).
// `page` is the policy's page key; `weight` the heat it adds.

// A live page as the page records describe it.
struct PageView {
  uint64_t page = 0;
  Tier tier = Tier::kDram;
  bool pinned = false;
};

struct PlannedMove {
  uint64_t page = 0;
  Tier from = Tier::kDram;
  Tier to = Tier::kDram;
};

struct PlanStats {
  uint64_t demotions = 0;
  uint64_t promotions = 0;
  uint64_t deferred = 0;  // moves the rate limit (or PlanRound's confirmation) held back
  // PlanRound only:
  uint64_t held = 0;            // DRAM victims (and promotions into DRAM) waiting for confirmation
  uint64_t planned = 0;         // the plan's moves after confirmation, before block expansion
  uint64_t confirmed_cold = 0;  // DRAM pages the last sampler round confirmed cold
};

// One page move as the policy thread carries it out: a planned move, or one block expansion
// added. `noop`: the page is already on the destination (it only joins a run of adjacent pages,
// so that scattered victims become one mover call).
struct PageMove {
  uint64_t page = 0;
  Tier from = Tier::kDram;
  Tier to = Tier::kDram;
  bool noop = false;
};

// A round's page views found by page key (the policy thread indexes them densely per region;
// tests use a map). Null for a page not listed.
class ViewLookup {
 public:
  virtual const PageView* Find(uint64_t page) const = 0;

 protected:
  ~ViewLookup() = default;
};

class Policy {
 public:
  explicit Policy(const PolicyConfig& config);

  const PolicyConfig& config() const { return config_; }
  void set_config(const PolicyConfig& config) { config_ = config; }

  // Adds access samples. Samples for pages the policy has not seen are kept (the page may be
  // listed in the next Plan).
  void Record(std::span<const AccessSample> samples);
  // Current heat of a page at `now_ns` (0 for an unknown page).
  double Heat(uint64_t page, uint64_t now_ns) const;
  // The caller evicted `page` at `now_ns` from a tier where its accesses were not sampled
  // (remote-fault sampling sees a page only when it faults back): its heat is carried to
  // `now_ns` undecayed, so what decides how hot it comes back is the time from its eviction to
  // its next fault (the kernel's refault distance, in time), not how long it sat unobserved.
  // An unknown page is left unknown.
  void Evicted(uint64_t page, uint64_t now_ns);
  // Whether budget relief, which evicts the pages the pager brought back in the order they came,
  // gives this DRAM page a second chance at `now_ns`: its heat is at least promote_heat.
  // `resident_sampled`: accesses to resident pages are sampled (protection sampling), and the
  // heat is taken decayed, as it is now. Otherwise (remote-fault sampling) a resident page is
  // never seen, its heat could only fall while it is in use, and the heat is taken as it was at
  // its last sample, undecayed: a page that faulted back within about a half-life of its
  // eviction (Evicted). How often one page is spared is relief's (migrator_relief.cc).
  bool SparedFromRelief(uint64_t page, uint64_t now_ns, bool resident_sampled) const {
    const PageHeat* h = Find(page);
    if (h == nullptr) return false;
    return (resident_sampled ? Decayed(*h, now_ns) : static_cast<double>(h->heat)) >= config_.promote_heat;
  }

  using TierPageCounts = std::array<uint64_t, kNumTiers>;
  // Plans moves for the live pages `pages` (every live page, each once). Pages that are no longer
  // listed are forgotten. The plan is ordered: demotions first (a tier's room is made before it
  // is filled), then promotions. The caller reports what it actually did with Moved(); a planned
  // move that failed is simply not reported.
  std::vector<PlannedMove> Plan(std::span<const PageView> pages, uint64_t now_ns,
                                PlanStats* stats = nullptr) {
    return Plan(pages, TierPageCounts{}, now_ns, stats);
  }
  // The same, where `pages` lists only the pages the policy may move and `unlisted[t]` counts the
  // other live pages of tier t: they count against the tier's budget and are never moved. Their
  // heat is kept while it is at least forget_heat (a hot page evicted by mistake is still known
  // hot when a fault brings it back, and is not the next victim again; a page that faults back
  // twice within two half-lives comes back hot, though under remote-fault sampling it is never
  // seen while resident), and forgotten once it has cooled below: the pages kept are those
  // sampled lately, so their number follows the samples, not memory. The policy thread lists no remote page (they are most of the pages at
  // large sizes, and one comes back by a fault when touched), so a round's cost follows the
  // resident pages and the hot ones, not all of memory.
  // A tier with unlisted pages (the policy thread read a window of them) gives as victims at most
  // the coldest quarter of its listed pages (one at least).
  // `reserved[t]`: pages of tier t that are no page of the program's (the runtime's own DRAM,
  // PageMover::OwnPages): they count against the budget like unlisted ones, and nothing else.
  // `unseen[t]`: pages of tier t, listed or not, that count against no budget: they may hold no
  // memory (allocated and not looked at since, PageMover::UnseenPages), or they left the tier
  // after they were listed (PlanRound's `left_dram`).
  std::vector<PlannedMove> Plan(std::span<const PageView> pages, const TierPageCounts& unlisted,
                                uint64_t now_ns, PlanStats* stats = nullptr, const TierPageCounts& reserved = {},
                                const TierPageCounts& unseen = {});
  // Tells the policy that `page` now lives on `tier` (starts its residence time).
  void Moved(uint64_t page, uint64_t now_ns);
  // The program brought `page` back from the remote tier by touching it: it is where it is by
  // the program's doing, not a move of the policy's, so no residence time holds it there (a
  // cold page faulted back in must be demotable again, or DRAM's budget cannot be kept).
  // Under the carried watch, a page that comes back within refault_window() evictions of its
  // own (NoteEviction) is held as caught in use (CaughtInUse): it was evicted without being
  // seen in use (by relief's ring order, or confirmed cold by a watch shorter than the time
  // between its accesses), and a page used that often belongs in DRAM (the kernel's refault
  // distance, counted in evictions here too).
  void FaultedBack(uint64_t page, uint64_t now_ns = 0);
  // `page` left DRAM for the remote tier (relief or the plan): a page the policy knows is
  // stamped with the eviction count, and the stamp is kept while it is within refault_window()
  // evictions (see FaultedBack); its heat is kept as any unlisted page's.
  void NoteEviction(uint64_t page);
  // Evictions after which a page that comes back is no longer taken as one in use: a quarter of
  // DRAM's budget (0 without one). A page touched every few seconds comes back well within it
  // (the evictions of that time are its faults' and the cold pages'), a cold page far past it.
  uint64_t refault_window() const { return config_.budget_pages[0] / 4; }

  size_t tracked_pages() const { return pages_.size() + fresh_.size(); }

  // ---- A policy round (policy_round.cc): the whole placement decision of the policy thread ----
  //
  // The thread scans (collects the sampler's round, reads the page records), calls Watched and
  // Record, then PlanRound, and carries the moves out through its PageMover; budget relief asks
  // ReliefSpares and RoomBelowLowWatermark. Every decision is here, every call takes the time.
  static constexpr uint64_t kBlockPages = 16;  // block expansion's aligned blocks (64 KiB)
  // A page caught in use is not put under watch again for this many confirmation times.
  static constexpr uint64_t kHotRecheck = 25;

  // Confirmation of DRAM victims (second chance under access sampling). `carry`: DRAM pages put
  // under watch stay armed from sampler round to sampler round until touched (carried
  // protection), and are confirmed cold after `confirm_ns` untouched; otherwise a page armed one
  // whole sampler round untouched is confirmed cold. Called once, before the first round.
  void ConfigureWatch(bool carry, uint64_t confirm_ns) {
    carry_ = carry;
    confirm_ns_ = confirm_ns;
  }
  bool carry() const { return carry_; }
  // Whether the sampler keeps `page` armed into its next round (its Collect's `keep`).
  bool Carried(uint64_t page) const { return carry_ && watch_since_.contains(page); }
  // A sampler round ended at `now_ns`: `untouched` were armed all round and never touched,
  // `samples` are the accesses it caught. Confirms pages cold (as they were watched long enough),
  // ends the watch of the pages touched, and marks those caught in use (WatchBusy).
  void Watched(std::span<const uint64_t> untouched, std::span<const AccessSample> samples, uint64_t now_ns);
  // Whether `page` is not to be armed as a victim check now: under watch already, or caught in use
  // lately (each check of a hot page costs a sampled fault).
  bool WatchBusy(uint64_t page) const { return watch_since_.contains(page) || hot_until_.contains(page); }
  // The sampler armed DRAM page `page` at `now_ns` (carried protection only: its watch begins).
  void WatchStarted(uint64_t page, uint64_t now_ns);
  // No sampler round is running: every watch ends.
  void WatchEnded() {
    watch_since_.clear();
    watch_order_.clear();
  }
  // Budget relief's first victims under the carried watch (after the pages fetched ahead): up to
  // `max` pages watched untouched for at least the confirmation time at `now_ns`, the longest
  // watched first, appended to `out`. They went untouched the longest of any page with a record
  // of it, where the relief ring's order says only how long ago a page came in; a page watched
  // for less says nothing yet (one in use may not have been touched since). Each page is handed
  // out once per watch; the caller checks that it is still untouched (its record), evicts it and
  // calls LeftWatch.
  void TakeWatched(size_t max, uint64_t now_ns, std::vector<uint64_t>* out);
  // The policy thread moved `page` (its protection is lifted): its watch ends, and it is a fresh
  // page when it comes back.
  void LeftWatch(uint64_t page) {
    watch_since_.erase(page);
    hot_until_.erase(page);
  }
  // The pages under watch, ascending (the mover lifts protection in spans between them).
  std::vector<uint64_t> WatchedPages() const;
  bool ConfirmedCold(uint64_t page) const {
    return std::binary_search(confirmed_cold_.begin(), confirmed_cold_.end(), page);
  }

  struct RoundInput {
    std::span<const PageView> views;  // the resident pages, ascending (Plan's `pages`)
    const ViewLookup* lookup = nullptr;  // the same views by page
    TierPageCounts unlisted{};        // live pages not listed (remote), per tier
    TierPageCounts reserved{};        // the runtime's own pages, per tier (Plan's `reserved`)
    TierPageCounts unseen{};          // pages that may hold no memory, per tier (Plan's `unseen`)
    // DRAM pages that left DRAM after the views were read (budget relief between the scan and
    // the plan): the views still show them on DRAM, and a plan that counted them demoted their
    // number twice, leaving DRAM that far below its low watermark.
    uint64_t left_dram = 0;
    uint64_t samples = 0;             // samples recorded for this round (accesses and faults)
    // Accesses to resident pages are sampled (protect, uffd): DRAM victims then need
    // confirmation, and block expansion takes confirmed-cold pages only.
    bool sampling = false;
  };
  // Plan (skipped while every page is in DRAM below its high watermark and nothing was sampled),
  // then second chance for DRAM's victims (ConfirmVictims), then block expansion (ExpandBlocks).
  std::vector<PageMove> PlanRound(const RoundInput& in, uint64_t now_ns, PlanStats* stats);
  // Second chance (under sampling): a DRAM victim not confirmed cold is replaced by a
  // confirmed-cold DRAM page or held for a later round, except for DRAM's excess over 1.5x its
  // budget (with a CXL tier; over the budget itself without one), which leaves by heat alone.
  // While victims are held, a page comes up into DRAM only in exchange for one that leaves.
  // Returns the moves held. Public for tests.
  uint64_t ConfirmVictims(std::vector<PlannedMove>* plan, const ViewLookup& lookup, uint64_t dram_pages,
                          uint64_t now_ns);
  // The pages that may replace ConfirmVictims's unconfirmed victims (policy_round.cc).
  void SpareVictims(const std::vector<PlannedMove>& plan, const ViewLookup& lookup, uint64_t now_ns,
                    std::vector<std::pair<double, uint64_t>>* spare,
                    std::vector<std::pair<double, uint64_t>>* partial) const;
  // Block expansion: a demotion victim takes along the pages of its aligned block that are on its
  // source tier, not pinned, not hot (below promote_heat) and, under sampling, confirmed cold, as
  // far as the destination has room below its low watermark; pages of the block already on the
  // destination join as no-ops. Promotions are not expanded. Public for tests.
  std::vector<PageMove> ExpandBlocks(const std::vector<PlannedMove>& plan, const RoundInput& in, uint64_t now_ns) const;

  // Budget relief's second chance for a DRAM page popped from its FIFO ring: true = requeue it
  // (SparedFromRelief), false = evict it. `spared_before`: its entry was requeued once already;
  // under remote-fault sampling each residency gets one second chance (CLOCK's bit), under access
  // sampling a page is spared while it is caught in use. `spare_left`: second chances this relief
  // may still give (decremented), so relief ends and the limit holds.
  // Under access sampling a page the watch caught in use is spared until it may be checked
  // again (CaughtInUse): its heat from the catch has decayed long before that, and nothing but
  // relief's second chance would keep it meanwhile.
  bool ReliefSpares(uint64_t page, bool spared_before, bool sampling, uint64_t* spare_left, uint64_t now_ns) const {
    if (*spare_left == 0 || (!sampling && spared_before)) return false;
    if (!SparedFromRelief(page, now_ns, sampling) && !(sampling && CaughtInUse(page, now_ns))) return false;
    --*spare_left;
    return true;
  }
  // Whether the watch caught `page` in use and will not check it again before now_ns (kHotRecheck
  // confirmation times after the catch; carried watch only).
  bool CaughtInUse(uint64_t page, uint64_t now_ns) const {
    const uint64_t* until = hot_until_.find(page);
    return until != nullptr && *until > now_ns;
  }
  // Whether `pages` more fit on `tier` (holding `usage` pages) below its low watermark; a tier
  // without a budget always has room, an absent one never.
  bool RoomBelowLowWatermark(Tier tier, uint64_t usage, uint64_t pages) const;
  // Whether `tier`, holding `usage` pages, is above its high watermark: the plan demotes from it.
  // A tier without a budget never is.
  bool AboveHighWatermark(Tier tier, uint64_t usage) const;

  // A page and its heat now, as Plan ranks them.
  struct Candidate {
    uint64_t page;
    double heat;
  };
  // The candidates of one tier, taken coldest (or hottest) first without sorting them all: the
  // front is selected and sorted in growing chunks as it is consumed (std::nth_element, then a
  // sort of the chunk only). A plan takes a few thousand victims from a tier of up to millions of
  // pages; sorting every candidate each round was most of a round's time at several GiB.
  // Ties in heat are broken by a mix of the page (Scatter), so the order is the same as a full
  // sort's. Public for tests.
  class Ranked {
   public:
    // `hottest`: descending heat, else ascending.
    void Reset(bool hottest);
    std::vector<Candidate>& items() { return items_; }
    size_t size() const { return items_.size(); }
    // The i-th in rank order (selects further as needed); i < size().
    const Candidate& at(size_t i);
    // Ties in heat (pages never sampled have heat 0) go in an order unrelated to the address
    // (a bijective mix of the page): by address, the lowest pages would always go first.
    static uint64_t Scatter(uint64_t page) {
      page ^= page >> 31;
      page *= 0x7fb5d329728ea185ull;
      page ^= page >> 27;
      page *= 0x81dadef4bc2dd44dull;
      return page ^ (page >> 33);
    }

   private:
    bool Before(const Candidate& a, const Candidate& b) const {
      if (a.heat != b.heat) return hottest_ ? a.heat > b.heat : a.heat < b.heat;
      return Scatter(a.page) < Scatter(b.page);
    }
    std::vector<Candidate> items_;
    size_t ready_ = 0;  // items_[0, ready_) are the first in rank order, in order
    bool hottest_ = false;
  };

 private:
  struct PageHeat {
    float heat = 0;
    uint64_t updated_ns = 0;   // heat is valid as of this time
    uint64_t moved_ns = 0;     // last move, 0 = never
  };
  struct Entry {
    uint64_t page;
    PageHeat h;
  };
  double Decayed(const PageHeat& h, uint64_t now_ns) const;
  bool Settled(const PageHeat& h, uint64_t now_ns) const;
  // Plan's merge: an entry of a page no longer listed goes on to next_ while some live pages are
  // unlisted and its heat is at least promote_heat, and is forgotten otherwise.
  void KeepUnlisted(const Entry& e, bool some_unlisted, uint64_t now_ns);
  // Plan's steps (policy.cc), in order, on one PlanState: MergeListed merges the listed pages
  // with the known heat (the next pages_), ranks each tier's movable pages (movable_) and counts
  // them into `usage`; KeepFreshUnlisted keeps pages sampled but not listed. Then the moves:
  // PlanDemotions relieves tiers over their high watermark, PlanCxlSwaps trades DRAM victims
  // bound for remote with colder CXL pages, PlanPromotions lifts hot pages (PromoteInto a tier
  // with room, else SwapUp with a colder page of the tier above).
  struct PlanState;
  void MergeListed(std::span<const PageView> pages, const TierPageCounts& unlisted, uint64_t now_ns,
                   std::array<uint64_t, kNumTiers>* usage);
  void KeepFreshUnlisted(uint64_t now_ns);
  void PlanDemotions(const TierPageCounts& unlisted, PlanState& s);
  void PlanCxlSwaps(PlanState& s);
  void PlanPromotions(PlanState& s);
  bool PromoteInto(int src, const Candidate& c, PlanState& s);
  void SwapUp(int src, const Candidate& c, PlanState& s);
  uint64_t LimitAt(int t, double share) const;  // floor(budget_pages[t] * share)
  // The page's state, or nullptr when the policy does not know it.
  PageHeat* Find(uint64_t page);
  const PageHeat* Find(uint64_t page) const;
  // The page's state, made (zero) when unknown.
  PageHeat& Get(uint64_t page);
  // Next present tier below `t`, or kAuto when none.
  Tier Below(Tier t) const;
  uint64_t TakeTokens(uint64_t now_ns, uint64_t wanted);

  PolicyConfig config_;
  // Pages the last Plan listed, sorted by page: Plan merges the (sorted) live pages with it in one
  // pass, and pages no longer listed drop out. A hash map of every live page, looked up once per
  // page and swept for forgotten pages each plan, was most of a plan's time at 1M pages.
  std::vector<Entry> pages_;
  std::vector<Entry> next_;  // Plan's scratch: the next pages_
  // Pages samples or moves named since the last Plan that it did not list (few).
  std::unordered_map<uint64_t, PageHeat> fresh_;
  // The victim watch (ConfigureWatch, Watched).
  bool carry_ = false;
  uint64_t confirm_ns_ = 0;
  std::vector<uint64_t> confirmed_cold_;                 // watched long enough, untouched (ascending)
  PageMap<uint64_t> watch_since_;                        // carried: page -> when its watch began
  PageMap<uint64_t> watch_next_;                         // Watched's scratch (keeps its table)
  // The watches in the order they began (when, page); entries whose page left the watch, or was
  // handed to relief, are skipped (TakeWatched) and dropped when they outnumber the watch.
  std::deque<std::pair<uint64_t, uint64_t>> watch_order_;
  PageMap<uint64_t> hot_until_;                          // caught in use: not watched before then
  std::array<Ranked, kNumTiers> movable_;  // Plan's scratch
  Ranked hot_;                             // Plan's scratch
  double tokens_ = 0;
  uint64_t tokens_ns_ = 0;
  uint64_t evictions_ = 0;  // NoteEviction's clock
  // The pages that left DRAM within the last refault_window() evictions, with the clock then,
  // and the same in eviction order (to forget them as the window passes). Kept beside the heat
  // table, not in it: a window's round merges only the pages it lists and the hot ones with the
  // table, where keeping every evicted page there made the merge a quarter of DRAM's budget
  // long (up to 290k entries a round at 16 GiB).
  std::unordered_map<uint64_t, uint64_t> evicted_;
  std::deque<std::pair<uint64_t, uint64_t>> evicted_order_;
};

}  // namespace tiermem

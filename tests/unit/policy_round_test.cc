// A policy round (Policy::PlanRound and the decisions around it: the carried watch, second chance
// for DRAM's victims, block expansion, budget relief's second chance), driven by a fake clock
// and synthetic traces (no OS, no threads).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "runtime/tiering/policy.h"
#include "tests/unit/policy_test_config.h"

namespace tiermem {
namespace {

constexpr uint64_t kMs = 1000000;

PolicyConfig Config(uint64_t dram, uint64_t cxl, bool has_cxl) { return TestPolicyConfig(dram, cxl, has_cxl, true); }

// The round's resident pages (remote ones are counted only, as the policy thread does).
struct Pages : ViewLookup {
  std::map<uint64_t, PageView> by_page;
  std::vector<PageView> list;
  uint64_t remote = 0;
  void Add(uint64_t first, uint64_t n, Tier t, bool pinned = false) {
    for (uint64_t p = first; p < first + n; ++p) by_page[p] = {p, t, pinned};
  }
  const PageView* Find(uint64_t page) const override {
    auto it = by_page.find(page);
    return it == by_page.end() ? nullptr : &it->second;
  }
  Policy::RoundInput Input(bool sampling, uint64_t samples = 0) {
    list.clear();
    for (auto& [p, v] : by_page) list.push_back(v);
    Policy::RoundInput in;
    in.views = list;
    in.lookup = this;
    in.unlisted[static_cast<int>(Tier::kRemote)] = remote;
    in.samples = samples;
    in.sampling = sampling;
    return in;
  }
};

void Touch(Policy& p, uint64_t page, uint64_t now, int times) {
  for (int i = 0; i < times; ++i) {
    AccessSample s{page, false, now};
    p.Record({&s, 1});
  }
}

std::set<uint64_t> Demoted(const std::vector<PageMove>& moves, Tier to) {
  std::set<uint64_t> out;
  for (const PageMove& m : moves) {
    if (!m.noop && m.to == to && m.from < m.to) out.insert(m.page);
  }
  return out;
}

TEST(PolicyRoundTest, CarriedWatchConfirmsPagesUntouchedForTheConfirmTime) {
  Policy p(Config(100, 0, false));
  p.ConfigureWatch(true, 100 * kMs);
  const uint64_t t0 = 1000 * kMs;
  p.WatchStarted(1, t0);
  p.WatchStarted(2, t0);
  EXPECT_TRUE(p.Carried(1));
  EXPECT_FALSE(p.Carried(3));
  const uint64_t untouched_12[] = {1, 2};
  p.Watched(untouched_12, {}, t0 + 50 * kMs);  // untouched, not yet for the confirm time
  EXPECT_FALSE(p.ConfirmedCold(1));
  EXPECT_TRUE(p.Carried(1));
  // Page 2 is touched: its watch ends and it is not watched again for a while; page 1 is
  // confirmed once untouched for 100 ms.
  const uint64_t untouched_1[] = {1};
  const AccessSample touched[] = {{2, false, t0 + 120 * kMs}};
  p.Watched(untouched_1, touched, t0 + 120 * kMs);
  EXPECT_TRUE(p.ConfirmedCold(1));
  EXPECT_FALSE(p.ConfirmedCold(2));
  EXPECT_FALSE(p.Carried(2));
  EXPECT_TRUE(p.WatchBusy(2));
  EXPECT_EQ(p.WatchedPages(), std::vector<uint64_t>{1});
  // The mark of a page caught in use expires after kHotRecheck confirm times.
  p.Watched({}, {}, t0 + 120 * kMs + Policy::kHotRecheck * 100 * kMs);
  EXPECT_FALSE(p.WatchBusy(2));
  // A moved page leaves the watch.
  p.WatchStarted(5, t0);
  p.LeftWatch(5);
  EXPECT_FALSE(p.Carried(5));
}

TEST(PolicyRoundTest, WithoutCarryAPageUntouchedOneSamplerRoundIsConfirmed) {
  Policy p(Config(100, 100, true));
  p.ConfigureWatch(false, 0);
  p.WatchStarted(1, 0);
  EXPECT_FALSE(p.Carried(1));
  EXPECT_FALSE(p.WatchBusy(1));
  const uint64_t untouched[] = {1};
  p.Watched(untouched, {}, 10 * kMs);
  EXPECT_TRUE(p.ConfirmedCold(1));
  p.Watched({}, {}, 20 * kMs);  // the next sampler round did not arm it: no longer confirmed
  EXPECT_FALSE(p.ConfirmedCold(1));
}

TEST(PolicyRoundTest, UnconfirmedDramVictimsAreReplacedByTheLongestWatchedConfirmedPages) {
  // No CXL tier, carried watch. DRAM holds 12 pages against a budget of 10: the plan by heat
  // picks the never-sampled pages 1 and 2, but the watch confirmed 7 and 8 cold (7 the longest).
  Policy p(Config(10, 0, false));
  p.ConfigureWatch(true, 100 * kMs);
  const uint64_t t0 = 1000 * kMs;
  for (uint64_t k = 3; k <= 12; ++k) Touch(p, k * 100, t0, 1);  // (pages are k * 100: no blocks)
  p.WatchStarted(700, t0);
  p.WatchStarted(800, t0 + 10 * kMs);
  const uint64_t untouched[] = {700, 800};
  const uint64_t now = t0 + 200 * kMs;
  p.Watched(untouched, {}, now);
  Pages pages;
  for (uint64_t k = 1; k <= 12; ++k) pages.Add(k * 100, 1, Tier::kDram);
  PlanStats st;
  const auto moves = p.PlanRound(pages.Input(true), now, &st);
  EXPECT_EQ(Demoted(moves, Tier::kRemote), (std::set<uint64_t>{700, 800}));
  EXPECT_EQ(moves.size(), 2u);
  EXPECT_EQ(st.held, 0u);
  // The same round without sampling goes by heat alone.
  Policy q(Config(10, 0, false));
  for (uint64_t k = 3; k <= 12; ++k) Touch(q, k * 100, t0, 1);
  EXPECT_EQ(Demoted(q.PlanRound(pages.Input(false), now, nullptr), Tier::kRemote), (std::set<uint64_t>{100, 200}));
}

TEST(PolicyRoundTest, UnconfirmedVictimsAreHeldAndPromotionsIntoDramWaitForRoom) {
  // A CXL tier: DRAM (budget 10) holds 12 pages, none confirmed cold; CXL holds a hot page.
  Policy p(Config(10, 100, true));
  p.ConfigureWatch(false, 0);
  const uint64_t now = 1000 * kMs;
  Pages pages;
  pages.Add(0, 12, Tier::kDram);
  pages.Add(100, 1, Tier::kCxl);
  Touch(p, 100, now, 5);
  p.Watched({}, {}, now);
  PlanStats st;
  auto moves = p.PlanRound(pages.Input(true, 5), now, &st);
  EXPECT_TRUE(moves.empty());
  EXPECT_EQ(st.held, 4u);  // two demotions, the swap's victim and the promotion
  // The next sampler round confirms pages 0-2 cold: they leave (to CXL), and the hot page comes
  // up in exchange for one of them.
  const uint64_t untouched[] = {0, 1, 2};
  p.Watched(untouched, {}, now + 20 * kMs);
  moves = p.PlanRound(pages.Input(true), now + 20 * kMs, &st);
  EXPECT_EQ(Demoted(moves, Tier::kCxl), (std::set<uint64_t>{0, 1, 2}));
  ASSERT_EQ(std::count_if(moves.begin(), moves.end(), [](const PageMove& m) { return m.to == Tier::kDram; }), 1);
  EXPECT_EQ(st.held, 0u);
  for (const PageMove& m : moves) {
    if (m.to == Tier::kDram) {
      EXPECT_EQ(m.page, 100u);
    }
  }
}

TEST(PolicyRoundTest, WithCxlOnlyDramsExcessOverOneAndAHalfBudgetsLeavesUnconfirmed) {
  // CXL is full, so DRAM's victims go to remote: of the 10 pages over the budget of 10, the 5
  // over 15 leave by heat alone and 5 wait for confirmation.
  Policy p(Config(10, 1, true));
  p.ConfigureWatch(false, 0);
  const uint64_t now = 1000 * kMs;
  Pages pages;
  for (uint64_t k = 0; k < 20; ++k) pages.Add(k * 100, 1, Tier::kDram);
  pages.Add(5000, 1, Tier::kCxl);
  Touch(p, 5000, now, 1);  // not hot enough to come up, warmer than DRAM's pages
  p.Watched({}, {}, now);
  PlanStats st;
  const auto moves = p.PlanRound(pages.Input(true), now, &st);
  EXPECT_EQ(Demoted(moves, Tier::kRemote).size(), 5u);
  EXPECT_EQ(st.held, 5u);
}

TEST(PolicyRoundTest, BlockExpansionTakesTheColdMovablePagesOfTheVictimsBlock) {
  Policy p(Config(0, 0, false));
  const uint64_t now = 1000 * kMs;
  Pages pages;
  pages.Add(32, 16, Tier::kDram);  // the block of page 33
  pages.Add(40, 1, Tier::kDram, /*pinned=*/true);
  pages.Add(48, 4, Tier::kDram);   // the next block
  Touch(p, 41, now, 3);            // hot
  const std::vector<PlannedMove> plan = {{33, Tier::kDram, Tier::kRemote}};
  std::set<uint64_t> want;
  for (uint64_t k = 32; k < 48; ++k) {
    if (k != 40 && k != 41) want.insert(k);
  }
  EXPECT_EQ(Demoted(p.ExpandBlocks(plan, pages.Input(false), now), Tier::kRemote), want);
  // Under sampling only the pages confirmed cold join.
  p.ConfigureWatch(false, 0);
  const uint64_t untouched[] = {34, 35, 41, 49};
  p.Watched(untouched, {}, now);
  EXPECT_EQ(Demoted(p.ExpandBlocks(plan, pages.Input(true), now), Tier::kRemote),
            (std::set<uint64_t>{33, 34, 35}));
}

TEST(PolicyRoundTest, BlockExpansionKeepsTheDestinationsBudgetAndJoinsPagesAlreadyThere) {
  Policy p(Config(0, 5, true));
  const uint64_t now = 1000 * kMs;
  Pages pages;
  pages.Add(0, 16, Tier::kDram);
  pages.Add(8, 2, Tier::kCxl);      // already on the destination: joined as no-ops
  pages.Add(200, 2, Tier::kCxl);    // a promotion's page and its neighbour: not expanded
  // CXL: 4 pages, budget 5; the plan moves page 0 there and page 200 out (4): room for one more.
  const std::vector<PlannedMove> plan = {{0, Tier::kDram, Tier::kCxl}, {200, Tier::kCxl, Tier::kDram}};
  const auto moves = p.ExpandBlocks(plan, pages.Input(false), now);
  EXPECT_EQ(Demoted(moves, Tier::kCxl).size(), 2u);
  EXPECT_TRUE(Demoted(moves, Tier::kCxl).count(0));
  std::set<uint64_t> noops, up;
  for (const PageMove& m : moves) {
    if (m.noop) noops.insert(m.page);
    if (m.to == Tier::kDram) up.insert(m.page);
  }
  EXPECT_EQ(noops, (std::set<uint64_t>{8, 9}));
  EXPECT_EQ(up, std::set<uint64_t>{200});
}

TEST(PolicyRoundTest, AnIdleRoundPlansNothing) {
  // Every page in DRAM below its budget and nothing sampled: no plan (the policy does not even
  // learn the pages), so a runtime whose data fits costs one scan a round.
  Policy p(Config(100, 0, false));
  Pages pages;
  pages.Add(0, 50, Tier::kDram);
  EXPECT_TRUE(p.PlanRound(pages.Input(true), kMs, nullptr).empty());
  EXPECT_EQ(p.tracked_pages(), 0u);
  pages.remote = 1;  // a page below DRAM: there is something to decide
  p.PlanRound(pages.Input(true), 2 * kMs, nullptr);
  EXPECT_EQ(p.tracked_pages(), 50u);
}

TEST(PolicyRoundTest, PagesReliefTookSinceTheScanAreNotDemotedAgain) {
  // 60 DRAM pages listed against a budget of 50 (watermarks at 1.0, no sampling): the plan
  // demotes 10. Had budget relief taken 6 of them out since the views were read, the views
  // still show them on DRAM and the plan demotes only the 4 DRAM is still over; had it taken
  // 10 or more, nothing.
  const auto demoted = [](uint64_t left) {
    Policy p(Config(50, 0, false));
    Pages pages;
    for (uint64_t k = 0; k < 60; ++k) pages.Add(k * Policy::kBlockPages, 1, Tier::kDram);  // no block expansion
    pages.remote = 1;
    Policy::RoundInput in = pages.Input(false);
    in.left_dram = left;
    return Demoted(p.PlanRound(in, 1000 * kMs, nullptr), Tier::kRemote).size();
  };
  EXPECT_EQ(demoted(0), 10u);
  EXPECT_EQ(demoted(6), 4u);
  EXPECT_EQ(demoted(10), 0u);
  EXPECT_EQ(demoted(80), 0u);
}

TEST(PolicyRoundTest, ReliefSparesAHotPageOncePerResidencyUnderRemoteFaultSampling) {
  Policy p(Config(10, 0, false));
  const uint64_t t0 = 1000 * kMs;
  Touch(p, 7, t0, 2);  // faulted back twice: hot
  uint64_t left = 5;
  EXPECT_TRUE(p.ReliefSpares(7, false, false, &left, t0 + 10'000 * kMs));  // undecayed: still hot
  EXPECT_EQ(left, 4u);
  EXPECT_FALSE(p.ReliefSpares(7, true, false, &left, t0));  // its second chance is used
  EXPECT_FALSE(p.ReliefSpares(8, false, false, &left, t0));  // never seen: evicted
  left = 0;
  EXPECT_FALSE(p.ReliefSpares(7, false, false, &left, t0));  // no second chances left
}

TEST(PolicyRoundTest, ReliefSparesAPageWhileItIsCaughtInUseUnderAccessSampling) {
  Policy p(Config(10, 0, false));
  const uint64_t t0 = 1000 * kMs;
  Touch(p, 7, t0, 2);
  uint64_t left = 5;
  EXPECT_TRUE(p.ReliefSpares(7, true, true, &left, t0));  // spared again: its heat is current
  EXPECT_FALSE(p.ReliefSpares(7, false, true, &left, t0 + 200 * kMs));  // decayed to 0.5
  EXPECT_EQ(left, 4u);
}

TEST(PolicyRoundTest, ReliefSparesAPageCaughtInUseUntilTheWatchMayCheckItAgain) {
  Policy p(Config(100, 0, false));
  p.ConfigureWatch(true, 100 * kMs);
  const uint64_t t0 = 1000 * kMs;
  p.WatchStarted(7, t0);
  const AccessSample caught[] = {{7, true, t0 + 10 * kMs}};
  p.Record(caught);  // weight 1: its heat alone is below promote_heat
  p.Watched({}, caught, t0 + 20 * kMs);
  EXPECT_TRUE(p.CaughtInUse(7, t0 + 20 * kMs));
  uint64_t left = 5;
  // Long after its heat has decayed, while the watch will not look at it again: spared.
  const uint64_t later = t0 + 20 * kMs + (Policy::kHotRecheck * 100 - 1) * kMs;
  EXPECT_TRUE(p.ReliefSpares(7, false, true, &left, later));
  EXPECT_FALSE(p.ReliefSpares(7, false, false, &left, later)) << "remote-fault sampling: by heat only";
  // Once it may be checked again, relief takes it like any page.
  EXPECT_FALSE(p.ReliefSpares(7, false, true, &left, t0 + 20 * kMs + Policy::kHotRecheck * 100 * kMs));
  EXPECT_EQ(left, 4u);
}

TEST(PolicyRoundTest, ReliefTakesTheLongestWatchedPagesFirstAndEachOnce) {
  Policy p(Config(100, 0, false));
  p.ConfigureWatch(true, 100 * kMs);
  const uint64_t t0 = 1000 * kMs;
  p.WatchStarted(30, t0 + 2 * kMs);
  p.WatchStarted(10, t0);
  p.WatchStarted(20, t0 + 1 * kMs);
  p.WatchStarted(10, t0 + 5 * kMs);  // watched already: its watch began at t0
  // Page 20 is touched: it leaves the watch, and relief never gets it.
  const uint64_t untouched[] = {10, 30};
  const AccessSample touched[] = {{20, false, t0 + 3 * kMs}};
  p.Watched(untouched, touched, t0 + 4 * kMs);
  std::vector<uint64_t> got;
  p.TakeWatched(5, t0 + 99 * kMs, &got);
  EXPECT_TRUE(got.empty()) << "watched for less than the confirmation time: nothing known yet";
  p.TakeWatched(1, t0 + 101 * kMs, &got);
  EXPECT_EQ(got, (std::vector<uint64_t>{10}));
  p.TakeWatched(5, t0 + 101 * kMs, &got);
  EXPECT_EQ(got, (std::vector<uint64_t>{10})) << "page 30's watch began 2 ms later";
  p.TakeWatched(5, t0 + 102 * kMs, &got);
  EXPECT_EQ(got, (std::vector<uint64_t>{10, 30}));
  got.clear();
  p.TakeWatched(5, t0 + 500 * kMs, &got);
  EXPECT_TRUE(got.empty()) << "each page is handed out once per watch";
  // A page watched again after it left the watch is handed out again.
  p.LeftWatch(30);
  p.WatchStarted(30, t0 + 500 * kMs);
  p.TakeWatched(5, t0 + 600 * kMs, &got);
  EXPECT_EQ(got, (std::vector<uint64_t>{30}));
  p.WatchEnded();
  got.clear();
  p.TakeWatched(5, t0 + 1000 * kMs, &got);
  EXPECT_TRUE(got.empty());
}

TEST(PolicyRoundTest, APageBackSoonAfterItsEvictionIsHeldAsInUse) {
  // DRAM budget 40: a page back within 10 evictions of its own counts as in use.
  Policy p(Config(40, 0, false));
  p.ConfigureWatch(true, 100 * kMs);
  ASSERT_EQ(p.refault_window(), 10u);
  const uint64_t t0 = 1000 * kMs;
  Touch(p, 1, t0, 1);  // faulted in once (heat 1), never seen again
  Touch(p, 2, t0, 1);
  p.NoteEviction(1);
  p.NoteEviction(2);
  for (uint64_t k = 100; k < 109; ++k) p.NoteEviction(k);  // 9 more (pages it does not know)
  // Page 1 comes back 10 evictions after its own: in use, though its heat is low.
  p.FaultedBack(1, t0 + 500 * kMs);
  EXPECT_TRUE(p.CaughtInUse(1, t0 + 500 * kMs));
  EXPECT_TRUE(p.WatchBusy(1));
  uint64_t left = 5;
  EXPECT_TRUE(p.ReliefSpares(1, false, true, &left, t0 + 600 * kMs));
  // Page 2, 11 evictions after its own: an ordinary page.
  p.NoteEviction(200);
  p.NoteEviction(201);
  p.FaultedBack(2, t0 + 500 * kMs);
  EXPECT_FALSE(p.CaughtInUse(2, t0 + 500 * kMs));
  // Its stamp is used once: the next fault of page 1 without an eviction between counts for nothing.
  p.Watched({}, {}, t0 + 500 * kMs + Policy::kHotRecheck * 100 * kMs);  // the mark expires
  p.FaultedBack(1, t0 + 500 * kMs + Policy::kHotRecheck * 100 * kMs);
  EXPECT_FALSE(p.CaughtInUse(1, t0 + 500 * kMs + Policy::kHotRecheck * 100 * kMs));
}

TEST(PolicyRoundTest, AnEvictedPageIsRememberedUntilItsRefaultWindowHasPassed) {
  // The policy keeps an evicted page's stamp while a refault would still count (its heat alone
  // is forgotten), and forgets it after.
  Policy p(Config(40, 0, false));
  p.ConfigureWatch(true, 100 * kMs);
  const uint64_t t0 = 1000 * kMs;
  Pages pages;
  pages.Add(1, 1, Tier::kDram);
  pages.remote = 1;
  Touch(p, 1, t0, 1);
  p.PlanRound(pages.Input(true, 1), t0, nullptr);  // listed: known
  pages.by_page.clear();
  pages.remote = 2;  // page 1 evicted
  p.NoteEviction(1);
  // Ten half-lives later its heat is far below forget_heat, but it left DRAM 1 eviction ago.
  p.PlanRound(pages.Input(true), t0 + 1000 * kMs, nullptr);
  // Its heat is forgotten (the table a round merges holds what heat keeps), its stamp is not.
  EXPECT_EQ(p.tracked_pages(), 0u);
  p.FaultedBack(1, t0 + 1000 * kMs);
  EXPECT_TRUE(p.CaughtInUse(1, t0 + 1000 * kMs));
  // Without the window, forgotten: a page out for more evictions than the window comes back cold.
  Touch(p, 3, t0, 1);
  pages.by_page.clear();
  pages.Add(3, 1, Tier::kDram);
  p.PlanRound(pages.Input(true, 1), t0, nullptr);
  pages.by_page.clear();
  p.NoteEviction(3);
  for (uint64_t k = 100; k < 111; ++k) p.NoteEviction(k);
  p.PlanRound(pages.Input(true), t0 + 2000 * kMs, nullptr);
  p.FaultedBack(3, t0 + 2000 * kMs);
  EXPECT_FALSE(p.CaughtInUse(3, t0 + 2000 * kMs));
}

TEST(PolicyRoundTest, RoomBelowLowWatermark) {
  PolicyConfig c = Config(100, 100, true);
  c.low_watermark = 0.5;
  Policy p(c);
  EXPECT_TRUE(p.RoomBelowLowWatermark(Tier::kCxl, 40, 10));
  EXPECT_FALSE(p.RoomBelowLowWatermark(Tier::kCxl, 41, 10));
  EXPECT_TRUE(p.RoomBelowLowWatermark(Tier::kRemote, 1u << 30, 10));  // no budget: unlimited
  Policy q(Config(100, 100, false));
  EXPECT_FALSE(q.RoomBelowLowWatermark(Tier::kCxl, 0, 1));  // absent
}

// The one test of "the plan demotes from this tier", shared by the plan (idle rounds, demotions)
// and the migrator (a round that will demote counts DRAM's resident pages first).
TEST(PolicyRoundTest, AboveHighWatermark) {
  PolicyConfig c = Config(100, 100, true);
  c.high_watermark = 0.9;
  Policy p(c);
  EXPECT_FALSE(p.AboveHighWatermark(Tier::kDram, 90));
  EXPECT_TRUE(p.AboveHighWatermark(Tier::kDram, 91));
  EXPECT_TRUE(p.AboveHighWatermark(Tier::kCxl, 91));
  EXPECT_FALSE(p.AboveHighWatermark(Tier::kRemote, 1u << 30));  // no budget: never
  // The plan demotes exactly when DRAM is above it (the test config's watermark is the budget):
  // 101 DRAM pages give up some, 100 none.
  Policy q(Config(100, 0, false));
  for (uint64_t held : {100u, 101u}) {
    Pages pages;
    for (uint64_t k = 1; k <= held; ++k) pages.Add(k * 100, 1, Tier::kDram);  // (no blocks)
    const auto moves = q.PlanRound(pages.Input(false), 1000 * kMs, nullptr);
    EXPECT_EQ(!Demoted(moves, Tier::kRemote).empty(), q.AboveHighWatermark(Tier::kDram, held)) << held << " pages";
  }
}

}  // namespace
}  // namespace tiermem

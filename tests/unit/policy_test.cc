// The tiering policy, driven by a fake clock and synthetic access traces (no OS, no threads).
#include "runtime/tiering/policy.h"
#include "tests/unit/policy_test_config.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

namespace tiermem {
namespace {

constexpr uint64_t kMs = 1000000;

PolicyConfig Config(uint64_t dram, uint64_t cxl, bool has_cxl, bool has_remote) {
  return TestPolicyConfig(dram, cxl, has_cxl, has_remote);
}

// A simulated machine: page -> tier, with plans applied as the migrator would.
struct Sim {
  std::map<uint64_t, Tier> tier;
  std::map<uint64_t, bool> pinned;
  uint64_t moves = 0;
  std::vector<PageView> Views() const {
    std::vector<PageView> v;
    for (auto& [p, t] : tier) v.push_back({p, t, pinned.count(p) ? pinned.at(p) : false});
    return v;
  }
  size_t Count(Tier t) const {
    size_t n = 0;
    for (auto& kv : tier) n += kv.second == t;
    return n;
  }
  void Apply(Policy& policy, const std::vector<PlannedMove>& plan, uint64_t now) {
    for (const PlannedMove& m : plan) {
      EXPECT_EQ(tier[m.page], m.from) << "page " << m.page;
      EXPECT_NE(m.from, m.to);
      tier[m.page] = m.to;
      policy.Moved(m.page, now);
      ++moves;
    }
  }
};

TEST(PolicyTest, HeatDecaysWithHalfLife) {
  Policy p(Config(10, 0, false, true));
  AccessSample s{7, false, 1000 * kMs};
  p.Record({&s, 1});
  EXPECT_DOUBLE_EQ(p.Heat(7, 1000 * kMs), 1.0);
  EXPECT_NEAR(p.Heat(7, 1100 * kMs), 0.5, 1e-6);
  EXPECT_NEAR(p.Heat(7, 1200 * kMs), 0.25, 1e-6);
  p.Record({&s, 1});  // an older sample counts as of the latest time seen
  EXPECT_NEAR(p.Heat(7, 1000 * kMs), 2.0, 1e-6);
  EXPECT_EQ(p.Heat(8, 1000 * kMs), 0.0);
}

TEST(PolicyTest, DemotesColdestDramPagesToRemoteWhenNoCxl) {
  Policy p(Config(8, 0, false, true));
  Sim sim;
  for (uint64_t i = 0; i < 12; ++i) sim.tier[i] = Tier::kDram;
  // Pages 0..7 are accessed, 8..11 are not.
  std::vector<AccessSample> s;
  for (uint64_t i = 0; i < 8; ++i) s.push_back({i, i % 2 == 0, kMs});
  p.Record(s);
  auto plan = p.Plan(sim.Views(), 2 * kMs);
  ASSERT_EQ(plan.size(), 4u);
  for (auto& m : plan) {
    EXPECT_GE(m.page, 8u);
    EXPECT_EQ(m.to, Tier::kRemote);
  }
  sim.Apply(p, plan, 2 * kMs);
  EXPECT_EQ(sim.Count(Tier::kDram), 8u);
  EXPECT_TRUE(p.Plan(sim.Views(), 3 * kMs).empty()) << "a tier at its budget is left alone";
}

// The policy thread lists no remote page, only their count: they still fill the remote tier's
// budget, and unlisted DRAM pages count against DRAM's.
TEST(PolicyTest, UnlistedPagesCountAgainstTheirTiersBudget) {
  PolicyConfig c = Config(4, 0, false, true);
  c.budget_pages[static_cast<int>(Tier::kRemote)] = 100;
  Sim sim;
  for (uint64_t i = 0; i < 6; ++i) sim.tier[i] = Tier::kDram;
  Policy::TierPageCounts unlisted{};
  unlisted[static_cast<int>(Tier::kRemote)] = 100;
  Policy full(c);
  EXPECT_TRUE(full.Plan(sim.Views(), unlisted, kMs).empty()) << "remote is full of unlisted pages";
  Policy empty(c);
  auto plan = empty.Plan(sim.Views(), Policy::TierPageCounts{}, kMs);
  ASSERT_EQ(plan.size(), 2u);
  for (auto& m : plan) EXPECT_EQ(m.to, Tier::kRemote);
  // `listed` DRAM pages listed and `unlisted` more against a DRAM budget of `budget`: how many
  // the plan moves. A tier listed only in part gives at most the coldest quarter of what is
  // listed (one at least).
  auto moved = [](uint64_t budget, uint64_t listed, uint64_t unlisted_dram) {
    Sim sim;
    for (uint64_t i = 0; i < listed; ++i) sim.tier[i] = Tier::kDram;
    Policy::TierPageCounts u{};
    u[static_cast<int>(Tier::kDram)] = unlisted_dram;
    Policy p(Config(budget, 0, false, true));
    return p.Plan(sim.Views(), u, kMs).size();
  };
  EXPECT_EQ(moved(4, 3, 3), 1u);    // two are over; the quarter of 3 is none, one at least
  EXPECT_EQ(moved(16, 16, 3), 3u);  // three are over; the quarter is four
  EXPECT_EQ(moved(16, 8, 11), 2u);  // three are over; the quarter is two
}

// DRAM pages allocated and not yet seen resident (PageMover::UnseenPages) may hold no memory:
// they count against no budget, so a tier over by them alone gives no victim.
TEST(PolicyTest, UnseenPagesCountAgainstNoBudget) {
  Sim sim;
  for (uint64_t i = 0; i < 12; ++i) sim.tier[i] = Tier::kDram;
  Policy::TierPageCounts unseen{};
  auto moved = [&](uint64_t n) {
    unseen[static_cast<int>(Tier::kDram)] = n;
    Policy p(Config(8, 0, false, true));
    return p.Plan(sim.Views(), Policy::TierPageCounts{}, kMs, nullptr, Policy::TierPageCounts{}, unseen).size();
  };
  EXPECT_EQ(moved(0), 4u);
  EXPECT_EQ(moved(3), 1u);
  EXPECT_EQ(moved(4), 0u);
  EXPECT_EQ(moved(40), 0u) << "more unseen than listed";
}

// A page that leaves the listed pages (evicted to remote: the policy thread lists no remote
// page) keeps its heat while it is hot, so when a fault brings it back it is not the coldest
// DRAM page; a cool one is forgotten.
TEST(PolicyTest, HotPagesKeepTheirHeatWhileUnlisted) {
  Policy p(Config(10, 0, false, true));
  std::vector<AccessSample> s;
  for (int k = 0; k < 4; ++k) s.push_back({5, false, 10 * kMs});  // page 5: heat 4
  s.push_back({6, false, 10 * kMs});                               // page 6: heat 1
  p.Record(s);
  Sim sim;
  for (uint64_t i = 0; i < 8; ++i) sim.tier[i] = Tier::kDram;
  p.Plan(sim.Views(), 10 * kMs);
  EXPECT_NEAR(p.Heat(5, 10 * kMs), 4.0, 1e-6);
  // Pages 5 and 6 go remote and are unlisted: their heat is kept while it is at least
  // forget_heat (0.25), so 5 is still hot after a half-life (4 halved once = 2) and 6 is warm.
  sim.tier.erase(5), sim.tier.erase(6);
  Policy::TierPageCounts unlisted{};
  unlisted[static_cast<int>(Tier::kRemote)] = 2;
  p.Plan(sim.Views(), unlisted, 110 * kMs);
  EXPECT_NEAR(p.Heat(5, 110 * kMs), 2.0, 1e-5);
  EXPECT_NEAR(p.Heat(6, 110 * kMs), 0.5, 1e-5);
  // Three half-lives after its one access, 6 has cooled below forget_heat and is forgotten.
  p.Plan(sim.Views(), unlisted, 310 * kMs);
  EXPECT_NEAR(p.Heat(5, 310 * kMs), 0.5, 1e-5);
  EXPECT_EQ(p.Heat(6, 310 * kMs), 0.0);
  // Page 5 faulted back: listed again, with its heat and the fault's; once it has cooled,
  // unlisted again, it is forgotten too.
  sim.tier[5] = Tier::kDram;
  p.Record(std::vector<AccessSample>{{5, false, 320 * kMs}});
  p.Plan(sim.Views(), 320 * kMs);
  EXPECT_GT(p.Heat(5, 320 * kMs), 1.4);
  sim.tier.erase(5);
  p.Plan(sim.Views(), unlisted, 800 * kMs);
  EXPECT_EQ(p.Heat(5, 800 * kMs), 0.0);
  EXPECT_EQ(p.tracked_pages(), 6u) << "the listed pages only";
}

// Relief's second chance: a page faulted back twice within a half-life is spared, and stays
// spared while nothing more is seen of it (a resident page is not sampled by faults); one fault,
// or a fault after a long pause, is not spared.
TEST(PolicyTest, PagesFaultedBackTwiceAreSparedFromRelief) {
  Policy p(Config(10, 0, false, true));
  p.Record(std::vector<AccessSample>{{1, false, 10 * kMs}, {2, false, 10 * kMs}, {2, false, 20 * kMs}});
  EXPECT_FALSE(p.SparedFromRelief(1, 20 * kMs, false)) << "one fault: heat 1";
  EXPECT_TRUE(p.SparedFromRelief(2, 20 * kMs, false)) << "two faults 10 ms apart: heat about 2";
  EXPECT_TRUE(p.SparedFromRelief(2, 500 * kMs, false)) << "not seen since, under fault sampling";
  EXPECT_FALSE(p.SparedFromRelief(2, 500 * kMs, true)) << "not seen since, under access sampling";
  EXPECT_FALSE(p.SparedFromRelief(3, 20 * kMs, false)) << "unknown";
  p.Record(std::vector<AccessSample>{{2, false, 1000 * kMs}});
  EXPECT_FALSE(p.SparedFromRelief(2, 1000 * kMs, false)) << "its next fault ten half-lives later: heat about 1";
  // Evicted after a long stay unobserved: the heat it had when it came is carried to the
  // eviction, and a fault soon after makes it hot again.
  p.Evicted(2, 5000 * kMs);
  EXPECT_NEAR(p.Heat(2, 5000 * kMs), 1.0, 0.01);
  p.Record(std::vector<AccessSample>{{2, false, 5050 * kMs}});
  EXPECT_TRUE(p.SparedFromRelief(2, 5050 * kMs, false)) << "faulted back half a half-life after its eviction";
  p.Evicted(7, 5000 * kMs);
  EXPECT_EQ(p.Heat(7, 5000 * kMs), 0.0) << "an unknown page stays unknown";
}

TEST(PolicyTest, DemotionCascadesDramToCxlToRemote) {
  Policy p(Config(4, 4, true, true));
  Sim sim;
  for (uint64_t i = 0; i < 6; ++i) sim.tier[i] = Tier::kDram;
  for (uint64_t i = 10; i < 16; ++i) sim.tier[i] = Tier::kCxl;  // CXL over its budget too
  std::vector<AccessSample> s;
  for (uint64_t i : {0, 1, 2, 3, 4}) s.push_back({i, false, kMs});  // DRAM's hot pages (4 warm)
  for (uint64_t i : {0, 1, 2, 3}) s.push_back({i, false, kMs});
  for (uint64_t i : {10, 11, 12, 13}) s.push_back({i, false, kMs});  // CXL's warm pages
  p.Record(s);
  sim.Apply(p, p.Plan(sim.Views(), kMs), kMs);
  // CXL relieved first (its two coldest to remote); DRAM's overflow goes where there is room:
  // none in CXL now, so to remote.
  EXPECT_EQ(sim.Count(Tier::kDram), 4u);
  EXPECT_EQ(sim.Count(Tier::kCxl), 4u);
  EXPECT_EQ(sim.Count(Tier::kRemote), 4u);
  EXPECT_EQ(sim.tier[14], Tier::kRemote);
  EXPECT_EQ(sim.tier[15], Tier::kRemote);
  EXPECT_EQ(sim.tier[4], Tier::kRemote);
  EXPECT_EQ(sim.tier[5], Tier::kRemote);
  EXPECT_EQ(sim.tier[10], Tier::kCxl);
}

TEST(PolicyTest, DemotionFillsCxlBeforeRemoteColdestFurthest) {
  Policy p(Config(4, 6, true, true));
  Sim sim;
  for (uint64_t i = 0; i < 8; ++i) sim.tier[i] = Tier::kDram;
  for (uint64_t i = 10; i < 14; ++i) sim.tier[i] = Tier::kCxl;  // room for 2 more
  std::vector<AccessSample> s;
  for (uint64_t i : {0, 1, 2, 3}) s.push_back({i, false, kMs});
  for (uint64_t i : {0, 1, 2, 3, 4, 5}) s.push_back({i, false, kMs});  // 4 and 5 warm, 6, 7 cold
  p.Record(s);
  sim.Apply(p, p.Plan(sim.Views(), kMs), kMs);
  EXPECT_EQ(sim.Count(Tier::kDram), 4u);
  EXPECT_EQ(sim.tier[4], Tier::kCxl);
  EXPECT_EQ(sim.tier[5], Tier::kCxl);
  EXPECT_EQ(sim.tier[6], Tier::kRemote);
  EXPECT_EQ(sim.tier[7], Tier::kRemote);
}

// A full CXL tier (below its high watermark, so never relieved by itself) of cold pages gives
// its place to DRAM's warmer victims: they go to CXL and the cold pages to remote. Victims as
// cold as CXL's pages go past it, as before.
TEST(PolicyTest, WarmerDramVictimsTakeTheCxlPlaceOfColderPages) {
  for (bool warm : {true, false}) {
    SCOPED_TRACE(warm ? "warm victims" : "cold victims");
    Policy p(Config(4, 4, true, true));
    Sim sim;
    for (uint64_t i = 0; i < 6; ++i) sim.tier[i] = Tier::kDram;
    for (uint64_t i = 10; i < 14; ++i) sim.tier[i] = Tier::kCxl;  // full, untouched
    std::vector<AccessSample> s;
    for (int k = 0; k < 3; ++k) {
      for (uint64_t i : {0, 1, 2, 3}) s.push_back({i, false, kMs});  // hot
    }
    if (warm) {
      for (int k = 0; k < 2; ++k) s.push_back({4, false, kMs}), s.push_back({5, false, kMs});
    }
    p.Record(s);
    sim.Apply(p, p.Plan(sim.Views(), kMs), kMs);
    EXPECT_EQ(sim.Count(Tier::kDram), 4u);
    EXPECT_EQ(sim.Count(Tier::kCxl), 4u);
    EXPECT_EQ(sim.Count(Tier::kRemote), 2u);
    const Tier victims = warm ? Tier::kCxl : Tier::kRemote;
    EXPECT_EQ(sim.tier[4], victims);
    EXPECT_EQ(sim.tier[5], victims);
    size_t cxl_left = 0;
    for (uint64_t i = 10; i < 14; ++i) cxl_left += sim.tier[i] == Tier::kCxl;
    EXPECT_EQ(cxl_left, warm ? 2u : 4u);
  }
}

TEST(PolicyTest, PinnedPagesAreNeverMoved) {
  Policy p(Config(2, 0, false, true));
  Sim sim;
  for (uint64_t i = 0; i < 6; ++i) sim.tier[i] = Tier::kDram;
  sim.pinned[0] = sim.pinned[1] = sim.pinned[2] = true;  // cold but pinned
  std::vector<AccessSample> s = {{3, false, kMs}, {4, false, kMs}, {5, false, kMs}};
  p.Record(s);
  auto plan = p.Plan(sim.Views(), kMs);
  for (auto& m : plan) EXPECT_GE(m.page, 3u) << "pinned page " << m.page << " was moved";
  // Pinned pages count against the budget: all three unpinned pages must go.
  EXPECT_EQ(plan.size(), 3u);
  // A hot pinned page on a lower tier is not promoted either.
  Sim sim2;
  sim2.tier[9] = Tier::kRemote;
  sim2.pinned[9] = true;
  for (int i = 0; i < 5; ++i) p.Record(std::vector<AccessSample>{{9, true, 2 * kMs}});
  EXPECT_TRUE(p.Plan(sim2.Views(), 2 * kMs).empty());
}

TEST(PolicyTest, PromotesHotPagesIntoRoom) {
  Policy p(Config(4, 0, true, true));
  Sim sim;
  sim.tier[0] = Tier::kDram;
  sim.tier[1] = Tier::kCxl;
  sim.tier[2] = Tier::kRemote;
  sim.tier[3] = Tier::kRemote;
  std::vector<AccessSample> s = {{1, false, kMs}, {1, true, kMs}, {2, false, kMs},
                                 {2, false, kMs}, {3, false, kMs}};
  p.Record(s);
  auto plan = p.Plan(sim.Views(), kMs);
  sim.Apply(p, plan, kMs);
  EXPECT_EQ(sim.tier[1], Tier::kDram);
  EXPECT_EQ(sim.tier[2], Tier::kDram);
  EXPECT_EQ(sim.tier[3], Tier::kRemote) << "heat 1 is below promote_heat";
}

TEST(PolicyTest, SwapsOnlyWhenClearlyHotter) {
  PolicyConfig c = Config(2, 0, false, true);
  c.swap_margin = 1.5;
  Policy p(c);
  Sim sim;
  sim.tier[0] = Tier::kDram;
  sim.tier[1] = Tier::kDram;
  sim.tier[2] = Tier::kRemote;
  // DRAM pages heat 1 each, the remote page heat 2: hotter, but by less than the margin.
  p.Record(std::vector<AccessSample>{{0, false, kMs}, {1, false, kMs}});
  p.Record(std::vector<AccessSample>{{2, false, kMs}});
  p.Record(std::vector<AccessSample>{{2, false, kMs}});
  EXPECT_TRUE(p.Plan(sim.Views(), kMs).empty()) << "no swap inside the hysteresis margin";
  p.Record(std::vector<AccessSample>{{2, false, kMs}, {2, false, kMs}});
  auto plan = p.Plan(sim.Views(), kMs);
  ASSERT_EQ(plan.size(), 2u);
  sim.Apply(p, plan, kMs);
  EXPECT_EQ(sim.tier[2], Tier::kDram);
  EXPECT_EQ(sim.Count(Tier::kDram), 2u);
}

TEST(PolicyTest, MinimumResidenceStopsPingPong) {
  Policy p(Config(1, 0, false, true));
  Sim sim;
  sim.tier[0] = Tier::kDram;
  sim.tier[1] = Tier::kRemote;
  uint64_t now = kMs;
  // Page 1 gets hot: it swaps with page 0.
  for (int i = 0; i < 4; ++i) p.Record(std::vector<AccessSample>{{1, false, now}});
  sim.Apply(p, p.Plan(sim.Views(), now), now);
  ASSERT_EQ(sim.tier[1], Tier::kDram);
  uint64_t moves = sim.moves;
  // Now page 0 is suddenly hotter: within the residence time nothing moves.
  now += 10 * kMs;
  for (int i = 0; i < 8; ++i) p.Record(std::vector<AccessSample>{{0, false, now}});
  sim.Apply(p, p.Plan(sim.Views(), now), now);
  EXPECT_EQ(sim.moves, moves);
  // After it, the swap back is allowed.
  now += 60 * kMs;
  sim.Apply(p, p.Plan(sim.Views(), now), now);
  EXPECT_EQ(sim.tier[0], Tier::kDram);
}

TEST(PolicyTest, APageFaultedBackIsNotHeldByItsResidence) {
  // DRAM holds 2 pages (watermarks 0.98/0.95 of 2: one page leaves when both are used).
  Policy p(Config(2, 0, false, true));
  Sim sim;
  sim.tier[0] = Tier::kDram;
  sim.tier[1] = Tier::kDram;
  sim.tier[2] = Tier::kDram;
  uint64_t now = kMs;
  p.Record(std::vector<AccessSample>{{0, false, now}, {1, false, now}});
  sim.Apply(p, p.Plan(sim.Views(), now), now);
  ASSERT_EQ(sim.tier[2], Tier::kRemote);  // the coldest went, and started its residence
  // The program touches it at once: it comes back to DRAM by a fault, not by the policy.
  now += kMs;
  sim.tier[2] = Tier::kDram;
  p.Record(std::vector<AccessSample>{{2, false, now}});
  // Without FaultedBack its residence would keep it in DRAM, over the budget.
  auto held = p.Plan(sim.Views(), now);
  EXPECT_TRUE(std::none_of(held.begin(), held.end(), [](const PlannedMove& m) { return m.page == 2; }));
  // Pages 0 and 1 are hot, page 2 was touched once (the plan above is not carried out): told
  // that it came back, the policy may move it again.
  for (int i = 0; i < 4; ++i) p.Record(std::vector<AccessSample>{{0, false, now}, {1, false, now}});
  p.FaultedBack(2);
  auto plan = p.Plan(sim.Views(), now);
  ASSERT_FALSE(plan.empty());
  EXPECT_EQ(plan[0].page, 2u);
  EXPECT_EQ(plan[0].to, Tier::kRemote);
}

TEST(PolicyTest, RateLimitDefersMovesAndDemotionsComeFirst) {
  PolicyConfig c = Config(10, 0, false, true);
  c.max_moves_per_s = 1000;  // 1 page per ms
  c.max_burst = 5;
  Policy p(c);
  Sim sim;
  for (uint64_t i = 0; i < 20; ++i) sim.tier[i] = Tier::kDram;
  sim.tier[100] = Tier::kRemote;
  for (int i = 0; i < 4; ++i) p.Record(std::vector<AccessSample>{{100, false, kMs}});
  PlanStats st;
  auto plan = p.Plan(sim.Views(), kMs, &st);
  ASSERT_EQ(plan.size(), 5u);
  for (auto& m : plan) EXPECT_EQ(m.to, Tier::kRemote) << "demotions first";
  EXPECT_GT(st.deferred, 0u);
  sim.Apply(p, plan, kMs);
  plan = p.Plan(sim.Views(), 3 * kMs);  // 2 ms later: 2 tokens
  EXPECT_EQ(plan.size(), 2u);
  sim.Apply(p, plan, 3 * kMs);
  plan = p.Plan(sim.Views(), 1000 * kMs);  // the bucket is full again: the last 3 demotions
  EXPECT_EQ(plan.size(), 3u);
  sim.Apply(p, plan, 1000 * kMs);
  EXPECT_EQ(sim.Count(Tier::kDram), 10u);
}

TEST(PolicyTest, ForgetsPagesThatAreNoLongerLive) {
  Policy p(Config(10, 0, false, true));
  p.Record(std::vector<AccessSample>{{1, false, kMs}, {2, false, kMs}});
  std::vector<PageView> live = {{1, Tier::kDram, false}};
  (void)p.Plan(live, kMs);
  EXPECT_EQ(p.tracked_pages(), 1u);
  EXPECT_EQ(p.Heat(2, kMs), 0.0);
}

// Plan keeps what it learnt of a page between plans, also for pages first named by a sample or
// a move before any plan listed them; a page that a plan does not list is forgotten.
TEST(PolicyTest, KeepsHeatAndResidenceOfPagesNamedBeforeTheirFirstPlan) {
  Policy p(Config(10, 0, false, true));
  p.Record(std::vector<AccessSample>{{5, false, kMs}, {5, false, kMs}});
  p.Moved(9, kMs);
  std::vector<PageView> live = {{3, Tier::kDram, false}, {5, Tier::kRemote, false}, {9, Tier::kRemote, false}};
  (void)p.Plan(live, kMs);
  EXPECT_EQ(p.tracked_pages(), 3u);
  EXPECT_DOUBLE_EQ(p.Heat(5, kMs), 2.0);
  p.Record(std::vector<AccessSample>{{5, false, kMs}, {9, false, kMs}, {9, false, kMs}});
  EXPECT_DOUBLE_EQ(p.Heat(5, kMs), 3.0);
  // Page 9 is hot but moved at kMs: it stays put for min_residence_ms (50 ms); page 5 goes up.
  auto plan = p.Plan(live, 2 * kMs);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].page, 5u);
  EXPECT_EQ(plan[0].to, Tier::kDram);
  live.pop_back();
  (void)p.Plan(live, 3 * kMs);
  EXPECT_EQ(p.Heat(9, 3 * kMs), 0.0);
  EXPECT_EQ(p.tracked_pages(), 2u);
}

// Pages of the bottom tier are promotion candidates only while their heat, decayed to now, is at
// promote_heat: one that was hot two half-lives ago stays below, one hot now comes up.
TEST(PolicyTest, RemotePagesArePromotedOnlyWhileTheirDecayedHeatIsHighEnough) {
  Policy p(Config(10, 0, false, true));
  p.Record(std::vector<AccessSample>{{1, false, kMs}, {1, false, kMs}, {1, false, kMs}});  // heat 3
  p.Record(std::vector<AccessSample>{{2, false, 201 * kMs}, {2, false, 201 * kMs}});      // heat 2
  std::vector<PageView> live = {{1, Tier::kRemote, false}, {2, Tier::kRemote, false}};
  EXPECT_DOUBLE_EQ(p.Heat(1, 201 * kMs), 0.75);  // two half-lives of 100 ms
  auto plan = p.Plan(live, 201 * kMs);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].page, 2u);
  EXPECT_EQ(plan[0].to, Tier::kDram);
}

// The ranked candidates (partial selection in growing chunks) come out in the order of a full
// sort by heat, ties broken by Scatter(page), however far and in whatever steps they are taken.
TEST(PolicyTest, RankedTakesCandidatesInFullSortOrder) {
  std::mt19937_64 rng(7);
  for (bool hottest : {false, true}) {
    for (size_t n : {0u, 1u, 5u, 300u, 5000u}) {
      Policy::Ranked r;
      r.Reset(hottest);
      std::vector<Policy::Candidate> all;
      for (size_t i = 0; i < n; ++i) {
        // Few distinct heats: many ties.
        Policy::Candidate c{rng() % 100000, static_cast<double>(rng() % 20) / 4};
        all.push_back(c);
        r.items().push_back(c);
      }
      std::sort(all.begin(), all.end(), [&](const Policy::Candidate& a, const Policy::Candidate& b) {
        if (a.heat != b.heat) return hottest ? a.heat > b.heat : a.heat < b.heat;
        return Policy::Ranked::Scatter(a.page) < Policy::Ranked::Scatter(b.page);
      });
      ASSERT_EQ(r.size(), n);
      // Jump ahead first (selects past what is read), then read everything in order.
      if (n > 0) {
        EXPECT_EQ(r.at(n / 2).page, all[n / 2].page);
      }
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(r.at(i).page, all[i].page) << "n " << n << " i " << i << " hottest " << hottest;
        ASSERT_EQ(r.at(i).heat, all[i].heat);
      }
    }
  }
}

// A tier of many pages over its budget gives up exactly its coldest pages (ties by
// Scatter(page)), as a full sort of its candidates would pick them; the order of the listed
// pages does not matter.
TEST(PolicyTest, DemotesExactlyTheColdestOfALargeTierInAnyListingOrder) {
  constexpr uint64_t kPages = 20000;
  PolicyConfig c = Config(kPages - 1500, 0, false, true);
  std::mt19937_64 rng(11);
  std::vector<PageView> live;
  std::vector<AccessSample> samples;
  std::vector<std::pair<double, uint64_t>> by_heat;
  for (uint64_t i = 0; i < kPages; ++i) {
    const uint64_t page = 1000 + i * 3;
    live.push_back({page, Tier::kDram, false});
    const int hits = static_cast<int>(rng() % 8);  // 0..7 samples: heat 0..7, many ties
    for (int k = 0; k < hits; ++k) samples.push_back({page, false, kMs});
    by_heat.push_back({static_cast<double>(hits), page});
  }
  std::sort(by_heat.begin(), by_heat.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    return Policy::Ranked::Scatter(a.second) < Policy::Ranked::Scatter(b.second);
  });
  std::vector<uint64_t> want;
  for (size_t k = 0; k < 1500; ++k) want.push_back(by_heat[k].second);
  std::sort(want.begin(), want.end());
  std::vector<PageView> shuffled = live;
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  for (const std::vector<PageView>* views : {&live, &shuffled}) {
    Policy p(c);
    p.Record(samples);
    auto plan = p.Plan(*views, kMs);
    std::vector<uint64_t> got;
    for (const PlannedMove& m : plan) {
      EXPECT_EQ(m.from, Tier::kDram);
      EXPECT_EQ(m.to, Tier::kRemote);
      got.push_back(m.page);
    }
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want) << (views == &live ? "ascending" : "shuffled");
    EXPECT_EQ(p.tracked_pages(), kPages);
    // Heat is found again after the plan, for the pages at both ends, in between, and not for
    // keys between listed pages.
    for (size_t k : {size_t{0}, size_t{1}, kPages / 2, size_t{kPages - 1}}) {
      EXPECT_DOUBLE_EQ(p.Heat(by_heat[k].second, kMs), by_heat[k].first);
      EXPECT_DOUBLE_EQ(p.Heat(live[k].page, kMs),
                       std::count_if(samples.begin(), samples.end(),
                                     [&](const AccessSample& a) { return a.page == live[k].page; }));
    }
    EXPECT_EQ(p.Heat(1001, kMs), 0.0);
    EXPECT_EQ(p.Heat(999, kMs), 0.0);
    EXPECT_EQ(p.Heat(1000 + kPages * 3, kMs), 0.0);
  }
}

// A GUPS-like synthetic trace: 1000 pages, DRAM budget 200, hot set of 100 pages taking 90% of
// the samples; the hot set moves halfway. Sampling is partial (a random tenth of the accesses
// is seen), as with the real tracker.
TEST(PolicyTest, SyntheticHotSetEndsInDramAndFollowsTheMove) {
  PolicyConfig c = Config(200, 0, false, true);
  c.high_watermark = 0.98;
  c.low_watermark = 0.95;
  c.max_moves_per_s = 20000;
  c.max_burst = 400;
  Policy p(c);
  Sim sim;
  for (uint64_t i = 0; i < 1000; ++i) sim.tier[i] = i < 200 ? Tier::kDram : Tier::kRemote;
  std::mt19937_64 rng(42);
  auto run_phase = [&](uint64_t hot_base, uint64_t* now) {
    for (int epoch = 0; epoch < 100; ++epoch) {
      std::vector<AccessSample> s;
      for (int k = 0; k < 300; ++k) {
        uint64_t page = rng() % 10 < 9 ? hot_base + rng() % 100 : rng() % 1000;
        *now += kMs / 10;
        // A remote page is touched only through a fault, which is always seen; otherwise a
        // tenth of the accesses is sampled.
        if (sim.tier[page] == Tier::kRemote || rng() % 10 == 0) s.push_back({page, true, *now});
      }
      p.Record(s);
      sim.Apply(p, p.Plan(sim.Views(), *now), *now);
    }
  };
  auto hot_in_dram = [&](uint64_t base) {
    int n = 0;
    for (uint64_t i = base; i < base + 100; ++i) n += sim.tier[i] == Tier::kDram;
    return n;
  };
  uint64_t now = kMs;
  run_phase(500, &now);
  EXPECT_GE(hot_in_dram(500), 90);
  uint64_t moves_first = sim.moves;
  run_phase(800, &now);
  EXPECT_GE(hot_in_dram(800), 90) << "the policy follows the moved hot set";
  EXPECT_LE(sim.Count(Tier::kDram), 200u);
  // No ping-pong: moves stay within a small multiple of what the two hot sets need.
  EXPECT_LE(sim.moves - moves_first, 4u * 200u);
}

}  // namespace
}  // namespace tiermem

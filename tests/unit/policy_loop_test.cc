// The policy thread's schedule (Migrator::Loop, RoundPacer) on a ManualClock: rounds start only
// when the clock reaches them, an idle round is followed by five intervals without one, and Stop
// ends a wait at once. No sleeps: every step of time is the test's.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "base/clock.h"
#include "base/counters.h"
#include "runtime/tiering/migrator.h"
#include "tests/integration/test_util.h"

namespace tiermem {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kInterval = 20 * kMs;

// A machine with no pages: every round finds nothing to do (idle).
class NoPages final : public PageMover {
 public:
  StatusOr<MigrateResult> Migrate(void*, size_t, Tier) override { return MigrateResult{}; }
  StatusOr<MigrateResult> EvictPages(const std::vector<char*>&) override { return NotSupported("no remote tier"); }
  StatusOr<MigrateResult> MovePages(const std::vector<char*>&, Tier) override { return MigrateResult{}; }
  const std::vector<int>& TierNodes(Tier) const override { return nodes_; }
  uint64_t TierPages(Tier) const override { return 0; }

 private:
  std::vector<int> nodes_;
};

class PolicyLoop : public ::testing::Test {
 protected:
  void SetUp() override {
    TieringConfig c;
    c.mode = "faults";  // rounds, and no sampler to install
    c.interval_ms = kInterval / kMs;
    c.evict_background = false;
    c.policy.budget_pages = {1000, 0, 0};
    c.policy.present = {true, true, false};
    c.clock = &clock_;
    migrator_ = std::make_unique<Migrator>(&mover_, c, counters_.get());
    ASSERT_TRUE(migrator_->Start().ok());
    ASSERT_TRUE(migrator_->running());
    // The first round starts at once; then the thread waits on the clock.
    ASSERT_TRUE(testing::WaitFor([&] { return rounds() == 1 && clock_.waits() >= 1; }, 30));
  }
  void TearDown() override { migrator_->Stop(); }

  uint64_t rounds() const { return counters_->policy_rounds.load(); }
  // Moves the clock by `ns` and waits (bounded, in real time) until the thread has done what
  // that let it do and waits on the clock again.
  void Step(uint64_t ns) {
    const uint64_t waits = clock_.waits();
    clock_.Advance(ns);
    ASSERT_TRUE(testing::WaitFor([&] { return clock_.waits() > waits; }, 30)) << "the policy thread did not wait again";
  }

  ManualClock clock_;
  NoPages mover_;
  std::unique_ptr<ProcessCounters> counters_ = std::make_unique<ProcessCounters>();
  std::unique_ptr<Migrator> migrator_;
};

TEST_F(PolicyLoop, NoRoundStartsWhileTheClockStandsStill) {
  // Waking the thread (a nudge from the fault handler would) without moving the clock: the
  // thread looks again and waits, with no round.
  for (int i = 0; i < 3; ++i) Step(0);
  EXPECT_EQ(rounds(), 1u);
}

TEST_F(PolicyLoop, AnIdleRoundIsFollowedByFiveIntervalsWithoutOne) {
  for (int idle = 0; idle < 3; ++idle) {
    Step(4 * kInterval);
    EXPECT_EQ(rounds(), 1u + idle) << "a round four intervals after an idle one";
    Step(kInterval - 1);
    EXPECT_EQ(rounds(), 1u + idle) << "a round a nanosecond early";
    Step(1);
    EXPECT_EQ(rounds(), 2u + idle) << "no round five intervals after an idle one";
  }
  // Nothing was paced: the thread's CPU share is unbounded here.
  EXPECT_EQ(counters_->policy_paced_rounds.load(), 0u);
}

TEST_F(PolicyLoop, StopEndsTheWaitWithoutTheClockMoving) {
  migrator_->Stop();
  EXPECT_FALSE(migrator_->running());
  EXPECT_EQ(clock_.NowNanos(), ManualClock::kStartNs);
}

}  // namespace
}  // namespace tiermem

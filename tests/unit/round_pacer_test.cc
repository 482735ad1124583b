// RoundPacer (runtime/tiering/round_pacer.h): when the policy thread's next round may start under
// TIERMEM_POLICY_CPU, driven by made-up wall and CPU times.
#include "runtime/tiering/round_pacer.h"

#include <gtest/gtest.h>

namespace tiermem {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kInterval = 20 * kMs;

// No bound (0, or 100 and above): the next round is one interval after the last one's end, five
// after an idle one, whatever the rounds cost.
TEST(RoundPacer, WithoutABoundRoundsKeepTheirInterval) {
  for (uint64_t share : {0, 100, 250}) {
    RoundPacer p(share, kInterval);
    EXPECT_FALSE(p.bounded());
    p.Start(0, 0);
    EXPECT_EQ(p.NextRound(500 * kMs, 500 * kMs, false), 520 * kMs);
    EXPECT_EQ(p.NextRound(600 * kMs, 600 * kMs, true), 700 * kMs);
  }
}

// Rounds within the share are never held back.
TEST(RoundPacer, CheapRoundsKeepTheirInterval) {
  RoundPacer p(5, kInterval);
  ASSERT_TRUE(p.bounded());
  p.Start(0, 0);
  uint64_t now = 0, cpu = 0;
  for (int round = 0; round < 1000; ++round) {
    now += kMs / 2;  // a round of 0.5 ms, all of it CPU
    cpu += kMs / 2;
    const uint64_t next = p.NextRound(now, cpu, false);
    ASSERT_EQ(next, now + kInterval) << "round " << round;
    now = next;
  }
}

// A 50 ms round at 5% of a CPU, once the bucket (4 intervals' worth: 4 ms) is spent, is followed
// by 920 ms without rounds: the 46 ms it overdrew, paid back at 5%. Then the credit is zero.
TEST(RoundPacer, ACostlyRoundIsFollowedByItsPayback) {
  RoundPacer p(5, kInterval);
  p.Start(0, 0);
  const uint64_t next = p.NextRound(50 * kMs, 50 * kMs, false);
  EXPECT_EQ(next, 50 * kMs + 920 * kMs);
  EXPECT_NEAR(p.Credit(next, 50 * kMs), 0.0, 1.0);
  // The next round, if as cheap as the share allows, goes at its interval.
  EXPECT_EQ(p.NextRound(next + kMs, 51 * kMs, false), next + kMs + kInterval);
}

// CPU the thread spent between rounds (budget relief) counts: it delays the next round, though
// the round itself was cheap.
TEST(RoundPacer, ReliefBetweenRoundsCountsAgainstTheShare) {
  RoundPacer p(10, kInterval);
  p.Start(0, 0);
  uint64_t next = p.NextRound(kMs, kMs, false);
  EXPECT_EQ(next, 21 * kMs);
  // 100 ms of relief while waiting, then a 1 ms round.
  next = p.NextRound(122 * kMs, 102 * kMs, false);
  EXPECT_GT(next, 122 * kMs + kInterval);
  // What the thread earned since (12.1 ms) fills the bucket only to its 8 ms, and the 101 ms
  // used is taken from that: 93 ms owed, paid back in 930 ms. (Earnings are capped before what
  // was used is taken, so the share is never exceeded, at the price of a bucket at most.)
  EXPECT_NEAR(static_cast<double>(next - 122 * kMs), 930.0 * kMs, 1.0 * kMs);
}

// Over a long run of rounds that each cost 10 ms of CPU against a 20 ms interval (a third of a
// CPU unbounded), the thread's CPU time over wall time stays within the share plus the bucket.
TEST(RoundPacer, TheThreadStaysWithinItsShareOverAnyRun) {
  for (uint64_t share : {1, 5, 20}) {
    RoundPacer p(share, kInterval);
    p.Start(0, 0);
    uint64_t now = 0, cpu = 0;
    for (int round = 0; round < 2000; ++round) {
      now += 10 * kMs;
      cpu += 10 * kMs;
      now = p.NextRound(now, cpu, false);
      const double bucket = static_cast<double>(share) / 100 * kInterval * RoundPacer::kBurstIntervals;
      ASSERT_LE(static_cast<double>(cpu), static_cast<double>(share) / 100 * static_cast<double>(now) + bucket + 1)
          << "share " << share << "%, round " << round;
    }
    // And it is not held back more than needed: the fraction is close to the share.
    EXPECT_GT(static_cast<double>(cpu) / static_cast<double>(now), static_cast<double>(share) / 100 * 0.95);
  }
}

// However much the thread spent (a storm of relief), the next round is at most 100 intervals
// away: the debt is bounded, and once paid the rounds go at their interval again.
TEST(RoundPacer, AStormOfReliefDelaysTheRoundsABoundedTime) {
  RoundPacer p(5, kInterval);
  p.Start(0, 0);
  const uint64_t next = p.NextRound(60'000 * kMs, 60'000 * kMs, false);  // a minute of CPU
  EXPECT_EQ(next, 60'000 * kMs + RoundPacer::kMaxPaybackIntervals * kInterval);
  EXPECT_EQ(p.NextRound(next + kMs, 60'000 * kMs, false), next + kMs + kInterval);
}

// A quiet spell refills the bucket, only up to its size: a burst after it is not paid for in
// advance.
TEST(RoundPacer, AQuietSpellRefillsTheBucketOnlyToItsSize) {
  RoundPacer p(5, kInterval);
  p.Start(0, 0);
  EXPECT_NEAR(p.Credit(3600'000 * kMs, 0), 4.0 * kMs, 1.0);
  // A 3 ms round fits the 4 ms bucket; a further 3 ms does not.
  const uint64_t t = 3600'000 * kMs;
  EXPECT_EQ(p.NextRound(t + 3 * kMs, 3 * kMs, false), t + 3 * kMs + kInterval);
  EXPECT_GT(p.NextRound(t + 6 * kMs, 6 * kMs, false), t + 6 * kMs + kInterval);
}

}  // namespace
}  // namespace tiermem

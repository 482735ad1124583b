// The policy thread's cost figures: the round-time histogram (base/counters.h), the quantiles the
// public DurationHistogram reads from it, and the per-thread CPU clock of base/os.h.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "base/counters.h"
#include "base/once_per.h"
#include "base/os.h"
#include "runtime/stats/stats_block.h"
#include "tiermem/tiermem.hpp"

namespace tiermem {
namespace {

TEST(Counters, RoundHistogramBucketsByItsBoundsAndReadsThemBack) {
  static BoundedHistogram<kPolicyRoundBoundsNs> h{};  // zeroed, as in the stats block
  EXPECT_EQ(kPolicyRoundBoundsNs.front(), 10'000u);
  EXPECT_EQ(kPolicyRoundBoundsNs.back(), 10'000'000'000u);
  for (size_t i = 1; i < kPolicyRoundBoundsNs.size(); ++i) {
    EXPECT_LT(kPolicyRoundBoundsNs[i - 1], kPolicyRoundBoundsNs[i]);
    EXPECT_LE(kPolicyRoundBoundsNs[i], kPolicyRoundBoundsNs[i - 1] * 13 / 10) << i;  // ten per decade
  }
  h.Record(5'000);           // below the first bound
  h.Record(10'000);          // on it: a bound is inclusive
  h.Record(10'001);          // the next bucket (12.5 us)
  h.Record(120'000'000);     // 120 ms: <= 125 ms
  h.Record(60'000'000'000);  // past the last bound
  const DurationHistogram r = ReadDuration(h);
  ASSERT_EQ(r.le_ns.size(), kPolicyRoundBoundsNs.size());
  ASSERT_EQ(r.buckets.size(), r.le_ns.size() + 1);
  EXPECT_EQ(r.count, 5u);
  EXPECT_EQ(r.sum_ns, 5'000u + 10'000 + 10'001 + 120'000'000 + 60'000'000'000);
  EXPECT_EQ(r.buckets[0], 2u);
  EXPECT_EQ(r.buckets[1], 1u);
  EXPECT_EQ(r.le_ns[1], 12'500u);
  size_t at_120ms = 0;
  while (r.le_ns[at_120ms] < 120'000'000) ++at_120ms;
  EXPECT_EQ(r.le_ns[at_120ms], 125'000'000u);
  EXPECT_EQ(r.buckets[at_120ms], 1u);
  EXPECT_EQ(r.buckets.back(), 1u);
}

TEST(Counters, QuantilesInterpolateInsideTheirBucket) {
  DurationHistogram h;
  EXPECT_EQ(h.QuantileNs(0.5), 0.0);  // empty
  h.le_ns = {1000, 2000, 4000};
  h.buckets = {0, 4, 4, 2};  // 4 in (1000, 2000], 4 in (2000, 4000], 2 above 4000
  h.count = 10;
  EXPECT_DOUBLE_EQ(h.QuantileNs(0.2), 1500);   // rank 2 of the 4 in (1000, 2000]
  EXPECT_DOUBLE_EQ(h.QuantileNs(0.4), 2000);   // the end of that bucket
  EXPECT_DOUBLE_EQ(h.QuantileNs(0.6), 3000);   // half way through (2000, 4000]
  EXPECT_DOUBLE_EQ(h.QuantileNs(0.99), 4000);  // the open bucket answers its lower bound
  EXPECT_DOUBLE_EQ(h.QuantileNs(0.0), 1000);   // the lower bound of the first non-empty bucket
  EXPECT_DOUBLE_EQ(h.QuantileNs(2.0), h.QuantileNs(1.0));  // q is clamped
}

TEST(Counters, ThreadCpuClockCountsOnlyTheCallingThread) {
  uint64_t mine0 = 0;
  ASSERT_EQ(os::ThreadCpuNanos(&mine0), 0);
  // Another thread burns 20 ms of its own CPU time while this one waits in join.
  uint64_t spun = 0;
  std::thread spinner([&spun] {
    uint64_t start = 0, now = 0;
    ASSERT_EQ(os::ThreadCpuNanos(&start), 0);
    do {
      ASSERT_EQ(os::ThreadCpuNanos(&now), 0);
    } while (now - start < 20'000'000);
    spun = now - start;
  });
  spinner.join();
  uint64_t mine1 = 0;
  ASSERT_EQ(os::ThreadCpuNanos(&mine1), 0);
  EXPECT_GE(spun, 20'000'000u);
  EXPECT_GE(mine1, mine0);
  EXPECT_LT(mine1 - mine0, spun) << "the waiting thread was charged the spinner's CPU time";
  // And this thread's own work shows on its own clock.
  volatile uint64_t x = 0;
  for (int i = 0; i < 20'000'000; ++i) x = x + static_cast<uint64_t>(i);
  uint64_t mine2 = 0;
  ASSERT_EQ(os::ThreadCpuNanos(&mine2), 0);
  EXPECT_GT(mine2, mine1);
}

// The rate limit of the remote-full warning: once, then once per interval, on a fake clock.
TEST(OncePer, FirstCallThenOncePerInterval) {
  OncePer once(1000);
  EXPECT_FALSE(once.taken());
  EXPECT_TRUE(once.Take(5));
  EXPECT_TRUE(once.taken());
  EXPECT_FALSE(once.Take(5));
  EXPECT_FALSE(once.Take(1004));
  EXPECT_TRUE(once.Take(1005));
  EXPECT_FALSE(once.Take(3));  // a clock read before the last turn: not due, no wrap-around
  EXPECT_FALSE(once.Take(2004));
  EXPECT_TRUE(once.Take(5000));
}

// Threads racing for one turn: exactly one gets it, however many try.
TEST(OncePer, ExactlyOneOfManyRacingThreadsGetsTheTurn) {
  for (int round = 0; round < 50; ++round) {
    OncePer once(1000000);
    std::atomic<int> got{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        while (!go.load(std::memory_order_acquire)) {
        }
        for (int i = 0; i < 100; ++i) got += once.Take(100 + static_cast<uint64_t>(t * 100 + i));
      });
    }
    go.store(true, std::memory_order_release);
    for (auto& th : threads) th.join();
    EXPECT_EQ(got.load(), 1) << "round " << round;
  }
}

}  // namespace
}  // namespace tiermem

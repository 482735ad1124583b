// base/clock.h: the real clock's waits end at their deadline or when done, and a ManualClock
// moves only when told (a sleep on it moves it), waking its waiters without a lost wake-up.
#include "base/clock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "tests/integration/test_util.h"

namespace tiermem {
namespace {

constexpr uint64_t kSecond = 1'000'000'000;

TEST(SystemClock, WaitsEndAtTheDeadlineOrWhenDone) {
  Clock& clock = SystemClock();
  std::mutex mu;
  std::condition_variable cv;
  std::unique_lock<std::mutex> lock(mu);
  const uint64_t t0 = clock.NowNanos();
  EXPECT_GT(t0, 0u);
  EXPECT_TRUE(clock.WaitUntil(cv, lock, t0 + 60 * kSecond, [] { return true; }));  // done: at once
  EXPECT_FALSE(clock.WaitUntil(cv, lock, t0, [] { return false; }));              // past: at once
  const uint64_t deadline = clock.NowNanos() + 1'000'000;                          // 1 ms ahead
  EXPECT_FALSE(clock.WaitUntil(cv, lock, deadline, [] { return false; }));
  EXPECT_GE(clock.NowNanos(), deadline);
  EXPECT_TRUE(lock.owns_lock());
}

TEST(ManualClock, StandsStillUntilMovedAndNeverGoesBack) {
  ManualClock clock;
  EXPECT_EQ(clock.NowNanos(), ManualClock::kStartNs);
  clock.Advance(5);
  EXPECT_EQ(clock.NowNanos(), ManualClock::kStartNs + 5);
  clock.Set(ManualClock::kStartNs);  // earlier: ignored
  EXPECT_EQ(clock.NowNanos(), ManualClock::kStartNs + 5);
  clock.Set(3 * kSecond);
  EXPECT_EQ(clock.NowNanos(), 3 * kSecond);
}

TEST(ManualClock, ASleepTakesNoRealTimeAndMovesTheClock) {
  ManualClock clock;
  const uint64_t t0 = clock.NowNanos();
  clock.SleepUntil(t0 + 3600 * kSecond);  // an hour, at once
  EXPECT_EQ(clock.NowNanos(), t0 + 3600 * kSecond);
  clock.SleepUntil(t0);  // already past: no move
  EXPECT_EQ(clock.NowNanos(), t0 + 3600 * kSecond);
  EXPECT_EQ(clock.slept_ns(), 3600 * kSecond);
}

// A thread waits a second on the manual clock: half a second does not end the wait, the second
// half does (done() still false), and the clock never moved by itself meanwhile.
TEST(ManualClock, AWaitEndsWhenTheClockIsMovedToItsDeadline) {
  ManualClock clock;
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<int> result{-1};
  std::thread waiter([&] {
    std::unique_lock<std::mutex> lock(mu);
    result = clock.WaitUntil(cv, lock, clock.NowNanos() + kSecond, [] { return false; }) ? 1 : 0;
  });
  ASSERT_TRUE(testing::WaitFor([&] { return clock.waits() == 1; }, 30));
  clock.Advance(kSecond / 2);
  // A wait that ended early would most likely show by now (its wake-up was sent under `mu`).
  { std::lock_guard<std::mutex> lock(mu); }
  EXPECT_EQ(result.load(), -1) << "a wait ended before its deadline";
  clock.Advance(kSecond / 2);
  ASSERT_TRUE(testing::WaitFor([&] { return result.load() != -1; }, 30));
  waiter.join();
  EXPECT_EQ(result.load(), 0);
  EXPECT_EQ(clock.NowNanos(), ManualClock::kStartNs + kSecond);
}

// done() made true and notified ends the wait with the clock standing still.
TEST(ManualClock, AWaitEndsWhenDoneWithoutTheClockMoving) {
  ManualClock clock;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::atomic<int> result{-1};
  std::thread waiter([&] {
    std::unique_lock<std::mutex> lock(mu);
    result = clock.WaitUntil(cv, lock, clock.NowNanos() + kSecond, [&] { return done; }) ? 1 : 0;
  });
  ASSERT_TRUE(testing::WaitFor([&] { return clock.waits() == 1; }, 30));
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  ASSERT_TRUE(testing::WaitFor([&] { return result.load() != -1; }, 30));
  waiter.join();
  EXPECT_EQ(result.load(), 1);
  EXPECT_EQ(clock.NowNanos(), ManualClock::kStartNs);
}

}  // namespace
}  // namespace tiermem

// RingQueue: first in, first out across wrap-around and growth; popped slots hold nothing; a queue
// used within its capacity never allocates again.
#include "base/ring_queue.h"

#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <random>
#include <string>

namespace tiermem {
namespace {

TEST(RingQueue, KeepsOrderAcrossWrapAndGrowthLikeADeque) {
  RingQueue<int> q(4);
  std::deque<int> ref;
  std::mt19937 rng(7);
  int next = 0;
  for (int step = 0; step < 20000; ++step) {
    if (rng() % 3 != 0 || ref.empty()) {
      q.push_back(next);
      ref.push_back(next++);
    } else {
      ASSERT_EQ(q.front(), ref.front());
      q.pop_front();
      ref.pop_front();
    }
    ASSERT_EQ(q.size(), ref.size());
    if (step % 997 == 0) {
      size_t i = 0;
      for (int v : q) ASSERT_EQ(v, ref[i++]);
      ASSERT_EQ(i, ref.size());
      for (size_t k = 0; k < ref.size(); ++k) ASSERT_EQ(q[k], ref[k]);
    }
  }
}

TEST(RingQueue, PoppedSlotsReleaseWhatTheyHeld) {
  auto held = std::make_shared<int>(1);
  RingQueue<std::shared_ptr<int>> q(2);
  q.push_back(held);
  q.push_back(held);
  EXPECT_EQ(held.use_count(), 3);
  q.pop_front();
  EXPECT_EQ(held.use_count(), 2);
  q.clear();
  EXPECT_EQ(held.use_count(), 1);
  EXPECT_TRUE(q.empty());
}

TEST(RingQueue, WithinItsCapacityItNeverGrows) {
  RingQueue<std::string> q(8);
  for (int round = 0; round < 1000; ++round) {
    for (int k = 0; k < 8; ++k) q.push_back("x");
    for (int k = 0; k < 8; ++k) q.pop_front();
  }
  EXPECT_EQ(q.capacity(), 8u);
  for (int k = 0; k < 9; ++k) q.push_back(std::to_string(k));
  EXPECT_EQ(q.capacity(), 16u);
  for (int k = 0; k < 9; ++k) {
    EXPECT_EQ(q.front(), std::to_string(k));
    q.pop_front();
  }
}

}  // namespace
}  // namespace tiermem

// The pager's prefetcher on synthetic fault streams (no OS, no pager).
#include "runtime/paging/prefetch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

namespace tiermem {
namespace {

// Replays a thread that touches `pages` in order, with the prefetcher's pages counted as
// resident (touched without a fault). Returns the faults taken.
size_t Replay(Prefetcher& p, uint32_t tid, const std::vector<uint64_t>& pages, size_t* fetched = nullptr) {
  std::set<uint64_t> resident;
  size_t faults = 0;
  for (uint64_t page : pages) {
    if (resident.count(page)) continue;
    ++faults;
    resident.insert(page);
    Prefetcher::Ahead a = p.OnFault(tid, 1, page);
    for (uint32_t k = 1; k <= a.count; ++k) {
      resident.insert(page + static_cast<uint64_t>(a.stride * k));
      if (fetched) ++*fetched;
    }
  }
  return faults;
}

TEST(PrefetcherTest, SequentialStreamGrowsItsWindowToTheLimit) {
  Prefetcher p(32);
  std::vector<uint64_t> seq;
  for (uint64_t i = 0; i < 4096; ++i) seq.push_back(1000 + i);
  size_t fetched = 0;
  const size_t faults = Replay(p, 7, seq, &fetched);
  // 3 faults to see the trend, then windows of 4, 8, 16 and 32 pages: 1 fault per 33 pages.
  EXPECT_LT(faults, 4096u / 30);
  EXPECT_GT(faults, 4096u / 34);
  EXPECT_LE(fetched, 4096u + 32);  // nothing fetched far past the end
}

TEST(PrefetcherTest, StridedAndDescendingStreams) {
  Prefetcher p(16);
  std::vector<uint64_t> stride, down;
  for (uint64_t i = 0; i < 2048; ++i) stride.push_back(i * 3);
  for (uint64_t i = 0; i < 2048; ++i) down.push_back(100000 - i);
  EXPECT_LT(Replay(p, 1, stride), 2048u / 12);
  EXPECT_LT(Replay(p, 2, down), 2048u / 12);
}

TEST(PrefetcherTest, AStridedStreamGrowsToTwiceTheWindow) {
  // Faults each just past the last window: a stride of 4 grows to kStrideWindowFactor times the
  // window given, a stride of 1 (and -1) to the window itself.
  for (const int64_t step : {int64_t{4}, int64_t{1}, int64_t{-1}, int64_t{-3}}) {
    Prefetcher p(16);
    uint64_t page = 1u << 20;
    uint32_t widest = 0;
    for (int i = 0; i < 64; ++i) {
      const Prefetcher::Ahead a = p.OnFault(2, 1, page);
      widest = std::max(widest, a.count);
      page += static_cast<uint64_t>(step * static_cast<int64_t>(a.count + 1));
    }
    const uint32_t want = step == 1 || step == -1 ? 16u : 16u * Prefetcher::kStrideWindowFactor;
    EXPECT_EQ(widest, want) << "step " << step;
    EXPECT_EQ(Prefetcher::WindowFor(16, step), want);
  }
  // Never past kMaxWindow (half a fault batch's staging).
  EXPECT_EQ(Prefetcher::WindowFor(Prefetcher::kMaxWindow, 4), Prefetcher::kMaxWindow);
  EXPECT_EQ(Prefetcher::WindowFor(100, 4), Prefetcher::kMaxWindow);
}

TEST(PrefetcherTest, RandomFaultsFetchNothing) {
  Prefetcher p(32);
  std::mt19937_64 rng(3);
  std::vector<uint64_t> pages;
  for (int i = 0; i < 5000; ++i) pages.push_back(rng() % 100000);
  size_t fetched = 0;
  Replay(p, 1, pages, &fetched);
  EXPECT_LT(fetched, 50u) << "a random stream has no trend";
}

TEST(PrefetcherTest, StreamsOfThreadsInterleavedAreKeptApart) {
  Prefetcher p(32);
  // Two threads scanning two parts of one region, faults interleaved one by one.
  size_t faults = 0;
  std::set<uint64_t> resident;
  for (uint64_t i = 0; i < 2048; ++i) {
    for (uint32_t tid : {10u, 11u}) {
      const uint64_t page = (tid == 10 ? 0 : 50000) + i;
      if (resident.count(page)) continue;
      ++faults;
      Prefetcher::Ahead a = p.OnFault(tid, 1, page);
      for (uint32_t k = 1; k <= a.count; ++k) resident.insert(page + static_cast<uint64_t>(a.stride * k));
    }
  }
  EXPECT_LT(faults, 2 * 2048u / 25);
}

TEST(PrefetcherTest, AHitInTheLastWindowAsksForTheNextOnce) {
  Prefetcher p(32);
  // A strided stream (every 4th page) until it asks for a window.
  Prefetcher::Ahead a;
  uint64_t page = 100;
  for (int i = 0; i < 4 && a.count == 0; ++i, page += 4) a = p.OnFault(3, 1, page);
  ASSERT_GT(a.count, 0u);
  ASSERT_EQ(a.stride, 4);
  const uint64_t first = a.from + 4, last = a.from + 4 * a.count;
  // A hit on the window's first page: the next window, right after it, along the stride.
  Prefetcher::Ahead next = p.OnHit(3, 1, first);
  EXPECT_EQ(next.stride, 4);
  EXPECT_EQ(next.from, last);
  EXPECT_GT(next.count, 0u);
  // Another hit in the window already followed, another thread's, another region's, a page off
  // the stride or outside any window: nothing.
  EXPECT_EQ(p.OnHit(3, 1, first + 4).count, 0u);
  EXPECT_EQ(p.OnHit(4, 1, next.from + 4).count, 0u);
  EXPECT_EQ(p.OnHit(3, 2, next.from + 4).count, 0u);
  EXPECT_EQ(p.OnHit(3, 1, next.from + 5).count, 0u);
  EXPECT_EQ(p.OnHit(3, 1, next.from + 4 * (next.count + 1)).count, 0u);
  // A hit in the new window follows it in turn.
  Prefetcher::Ahead third = p.OnHit(3, 1, next.from + 4);
  EXPECT_EQ(third.from, next.from + 4 * next.count);
  // The reader faulting just past the last window still sees its trend: the window grows.
  Prefetcher::Ahead after = p.OnFault(3, 1, third.from + 4 * third.count + 4);
  EXPECT_EQ(after.stride, 4);
  EXPECT_GE(after.count, third.count);
  // Off: nothing on hits either.
  Prefetcher off(0);
  EXPECT_EQ(off.OnHit(3, 1, first).count, 0u);
}

TEST(PrefetcherTest, AWindowInAsksForOneMoreAtFullDepthOnly) {
  Prefetcher p(32);
  Prefetcher::Ahead a;
  uint64_t page = 1000;
  // Sequential faults, each just past the last window: the depth grows 4, 8, 16, 32.
  for (int i = 0; i < 64 && (a.count < 32 || i < 8); ++i) {
    a = p.OnFault(5, 1, page);
    const uint64_t last = a.count > 0 ? a.from + a.count : page;
    // Below full depth, a window in asks for nothing.
    if (a.count > 0 && a.count < 32) {
      EXPECT_EQ(p.OnWindowIn(5, 1, last).count, 0u);
    }
    page = last + 1;
  }
  ASSERT_EQ(a.count, 32u);
  const uint64_t last = a.from + 32;
  EXPECT_EQ(p.OnWindowIn(5, 1, last - 1).count, 0u);  // not the window's last page
  EXPECT_EQ(p.OnWindowIn(6, 1, last).count, 0u);      // another thread's
  Prefetcher::Ahead next = p.OnWindowIn(5, 1, last);
  EXPECT_EQ(next.from, last);
  EXPECT_EQ(next.count, 32u);
  // One window beyond the reader: the next window in asks for nothing until it faults or hits.
  EXPECT_EQ(p.OnWindowIn(5, 1, next.from + 32).count, 0u);
  Prefetcher::Ahead hit = p.OnHit(5, 1, next.from + 1);
  EXPECT_EQ(hit.from, next.from + 32);
  EXPECT_EQ(p.OnWindowIn(5, 1, hit.from + 32).from, hit.from + 32);
}

TEST(PrefetcherTest, BrokenTrendBacksOffAndOffFetchesNothing) {
  Prefetcher p(32);
  std::vector<uint64_t> seq;
  for (uint64_t i = 0; i < 400; ++i) seq.push_back(i);
  Replay(p, 1, seq);  // a long stream: its window is at 32
  // The thread jumps: the trend (7 steps of 1 in the last 8) still holds, but the step was off:
  // the window halves. Jumps that keep breaking it end the trend: nothing is fetched.
  Prefetcher::Ahead a = p.OnFault(1, 1, 90000);
  EXPECT_EQ(a.stride, 1);
  EXPECT_EQ(a.count, 16u);
  uint32_t last = a.count;
  for (uint64_t j = 1; j <= 4; ++j) last = p.OnFault(1, 1, 90000 + j * 7777).count;
  EXPECT_EQ(last, 0u);
  Prefetcher off(0);
  for (uint64_t i = 0; i < 100; ++i) EXPECT_EQ(off.OnFault(1, 1, i).count, 0u);
}

}  // namespace
}  // namespace tiermem

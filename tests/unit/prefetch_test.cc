// The pager's prefetcher on synthetic fault streams (no OS, no pager).
#include "runtime/paging/prefetch.h"

#include <gtest/gtest.h>

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

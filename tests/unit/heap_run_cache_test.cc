// The heap's run cache (allocator/run_cache.h) on its own; heap_test.cc tests it through the heap.
#include <gtest/gtest.h>

#include "allocator/run_cache.h"

namespace tiermem {
namespace {

using alloc::RunCache;

char* Addr(uintptr_t a) { return reinterpret_cast<char*>(a << 20); }

TEST(RunCacheTest, TakeFindsTheSmallestOrLargestRunInRange) {
  RunCache c(1000, 1000);
  RunCache::Run out[RunCache::kSlots + 1];
  EXPECT_EQ(c.Put(Addr(1), 10, 0, out), 0);
  EXPECT_EQ(c.Put(Addr(2), 40, 0, out), 0);
  EXPECT_EQ(c.Put(Addr(3), 20, 0, out), 0);
  EXPECT_EQ(c.pages(), 70u);
  uint64_t pages = 0;
  int nexp = -1;
  EXPECT_EQ(c.Take(50, 100, false, 0, &pages, out, &nexp), nullptr);
  EXPECT_EQ(nexp, 0);
  EXPECT_EQ(c.Take(15, 40, false, 0, &pages, out, &nexp), Addr(3));
  EXPECT_EQ(pages, 20u);
  EXPECT_EQ(c.Take(5, 40, true, 0, &pages, out, &nexp), Addr(2));
  EXPECT_EQ(pages, 40u);
  EXPECT_EQ(c.pages(), 10u);
}

TEST(RunCacheTest, PutEvictsTheOldestBeyondTheBoundAndIgnoresADoubleFree) {
  RunCache c(100, 1000);
  RunCache::Run out[RunCache::kSlots + 1];
  EXPECT_EQ(c.Put(Addr(1), 40, 0, out), 0);
  EXPECT_EQ(c.Put(Addr(2), 40, 0, out), 0);
  EXPECT_EQ(c.Put(Addr(2), 40, 0, out), 0);  // already there
  EXPECT_EQ(c.pages(), 80u);
  ASSERT_EQ(c.Put(Addr(3), 40, 0, out), 1);  // 120 > 100: the oldest goes
  EXPECT_EQ(out[0].start, Addr(1));
  ASSERT_EQ(c.Put(Addr(4), 500, 0, out), 1);  // larger than the bound: straight back
  EXPECT_EQ(out[0].start, Addr(4));
  EXPECT_EQ(c.pages(), 80u);
  EXPECT_EQ(c.TakeAll(out), 2);
  EXPECT_EQ(c.pages(), 0u);
}

TEST(RunCacheTest, RunsPastTheAgeLimitComeBackAtTheNextCall) {
  RunCache c(100, 50);
  RunCache::Run out[RunCache::kSlots + 1];
  EXPECT_EQ(c.Put(Addr(1), 10, 0, out), 0);
  EXPECT_EQ(c.Put(Addr(2), 10, 40, out), 0);
  uint64_t pages = 0;
  int nexp = 0;
  EXPECT_EQ(c.Take(100, 200, false, 60, &pages, out, &nexp), nullptr);
  ASSERT_EQ(nexp, 1);
  EXPECT_EQ(out[0].start, Addr(1));
  ASSERT_EQ(c.Put(Addr(3), 10, 100, out), 1);
  EXPECT_EQ(out[0].start, Addr(2));
  EXPECT_EQ(c.pages(), 10u);
}

TEST(RunCacheTest, TheSlotLimitEvictsTheOldest) {
  RunCache c(1 << 20, 1000);
  RunCache::Run out[RunCache::kSlots + 1];
  for (int i = 0; i < RunCache::kSlots; ++i) EXPECT_EQ(c.Put(Addr(i + 1), 1, 0, out), 0);
  ASSERT_EQ(c.Put(Addr(100), 1, 0, out), 1);
  EXPECT_EQ(out[0].start, Addr(1));
}

TEST(RunCacheTest, YieldGivesUpOnlyRunsTooSmallUpToTheFreshPages) {
  RunCache c(1000, 1000);
  RunCache::Run out[RunCache::kSlots + 1];
  EXPECT_EQ(c.Put(Addr(1), 30, 0, out), 0);
  EXPECT_EQ(c.Put(Addr(2), 200, 0, out), 0);
  EXPECT_EQ(c.Put(Addr(3), 40, 0, out), 0);
  EXPECT_EQ(c.Put(Addr(4), 20, 0, out), 0);
  // A request of 100 pages missed: of the runs under 100 pages, the oldest first while they add
  // up to at most 100 (30 + 40 + 20 = 90); the 200-page run stays.
  ASSERT_EQ(c.Yield(100, 100, out), 3);
  EXPECT_EQ(out[0].start, Addr(1));
  EXPECT_EQ(out[1].start, Addr(3));
  EXPECT_EQ(out[2].start, Addr(4));
  EXPECT_EQ(c.pages(), 200u);
  EXPECT_EQ(c.Put(Addr(5), 60, 0, out), 0);
  EXPECT_EQ(c.Put(Addr(6), 30, 0, out), 0);
  // 60 would pass the 50 fresh pages; the younger 30 does not.
  ASSERT_EQ(c.Yield(100, 50, out), 1);
  EXPECT_EQ(out[0].start, Addr(6));
  EXPECT_EQ(c.pages(), 260u);
}

}  // namespace
}  // namespace tiermem

#include "runtime/pages/region.h"

#include <random>
#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace tiermem {
namespace {

TEST(Region, AllocFreeCoalesce) {
  Region r;
  ASSERT_TRUE(r.Init(1024 * 4096).ok());
  EXPECT_EQ(r.pages(), 1024u);
  EXPECT_EQ(r.free_pages(), 1024u);
  uint64_t a = r.AllocRun(10), b = r.AllocRun(20), c = r.AllocRun(30);
  ASSERT_NE(a, Region::kNoRun);
  ASSERT_NE(b, Region::kNoRun);
  ASSERT_NE(c, Region::kNoRun);
  EXPECT_EQ(r.free_pages(), 1024u - 60);
  EXPECT_EQ(r.RunLength(b), 20u);
  EXPECT_EQ(r.RunLength(b + 1), 0u);  // not a head
  EXPECT_EQ(r.RunHeadOf(b + 5), b);
  EXPECT_EQ(r.FreeRun(b), 20u);
  EXPECT_EQ(r.FreeRun(b), 0u);  // double free is refused
  EXPECT_EQ(r.FreeRun(a), 10u);
  EXPECT_EQ(r.FreeRun(c), 30u);
  EXPECT_EQ(r.free_pages(), 1024u);
  EXPECT_EQ(r.largest_free_run(), 1024u);  // everything coalesced back into one run
  EXPECT_EQ(r.AllocRun(1024), 0u);
  EXPECT_EQ(r.AllocRun(1), Region::kNoRun);  // full
}

TEST(Region, RandomChurnKeepsRunsDisjoint) {
  Region r;
  ASSERT_TRUE(r.Init(4096 * 4096).ok());
  std::mt19937 rng(42);
  std::vector<std::pair<uint64_t, uint64_t>> live;
  std::vector<uint8_t> owner(r.pages(), 0);
  for (int step = 0; step < 20000; ++step) {
    if (live.empty() || rng() % 3 != 0) {
      uint64_t n = 1 + rng() % 64;
      uint64_t f = r.AllocRun(n);
      if (f == Region::kNoRun) continue;
      for (uint64_t i = f; i < f + n; ++i) {
        ASSERT_EQ(owner[i], 0) << "page " << i << " handed out twice";
        owner[i] = 1;
      }
      live.push_back({f, n});
    } else {
      size_t k = rng() % live.size();
      auto [f, n] = live[k];
      ASSERT_EQ(r.FreeRun(f), n);
      for (uint64_t i = f; i < f + n; ++i) owner[i] = 0;
      live[k] = live.back();
      live.pop_back();
    }
  }
  for (auto [f, n] : live) ASSERT_EQ(r.FreeRun(f), n);
  EXPECT_EQ(r.free_pages(), r.pages());
  EXPECT_EQ(r.largest_free_run(), r.pages());
}

TEST(Region, MetadataUnderOnePercent) {
  // 20 bytes of metadata per 4 KiB page (a PageRecord and the free-run links).
  EXPECT_LT(sizeof(PageRecord) + 3 * sizeof(uint32_t), 4096 / 100);
}

TEST(Region, DataIsWholeHugePages) {
  // Start and size on 2 MiB boundaries: no transparent huge page straddles the region's edge,
  // where a neighbour's fault would bring in the region's first pages (on whatever node).
  Region r;
  ASSERT_TRUE(r.Init(3 * 4096).ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(r.base()) % (2u << 20), 0u);
  EXPECT_EQ(r.bytes(), 2u << 20);
  EXPECT_EQ(r.free_pages(), r.pages());
  EXPECT_EQ(r.AllocRun(r.pages()), 0u);
}

// A quiet chunk (region.h) is passed over by the policy's scan; whatever hands its pages out
// again clears the bit, and only free or untouched pages are quiet.
TEST(Region, AllocationClearsTheQuietBitsOfItsChunks) {
  Region r;
  ASSERT_TRUE(r.Init(8 * Region::kChunkPages * 4096).ok());
  for (uint64_t c = 0; c < 8; ++c) {
    EXPECT_FALSE(r.Quiet(c));
    r.MarkQuiet(c);
    EXPECT_TRUE(r.Quiet(c));
  }
  // Pages 100..1100: chunks 0, 1 and 2.
  const uint64_t a = r.AllocRun(100), b = r.AllocRun(1000);
  ASSERT_EQ(a, 0u);
  ASSERT_EQ(b, 100u);
  for (uint64_t c = 0; c < 3; ++c) EXPECT_FALSE(r.Quiet(c)) << "chunk " << c;
  for (uint64_t c = 3; c < 8; ++c) EXPECT_TRUE(r.Quiet(c)) << "chunk " << c;
  // A run just allocated has no tier yet: not quiet. Untouched (and not held free by the heap)
  // it is; a free page is.
  EXPECT_FALSE(r.PageQuiet(b));
  r.record(b).tier.store(kUntouchedTier);
  EXPECT_TRUE(r.PageQuiet(b));
  r.record(b).flags.fetch_or(kPageHeapFree);
  EXPECT_FALSE(r.PageQuiet(b));
  r.record(b + 1).tier.store(0);  // on DRAM's count
  EXPECT_FALSE(r.PageQuiet(b + 1));
  EXPECT_TRUE(r.PageQuiet(3 * Region::kChunkPages));
  r.MarkQuiet(1);
  r.ClearQuiet(Region::kChunkPages - 1, 2);  // the last page of chunk 0 and the first of 1
  EXPECT_FALSE(r.Quiet(1));
  EXPECT_TRUE(r.Quiet(3));
}

TEST(Region, RejectsBadSizes) {
  Region r;
  EXPECT_FALSE(r.Init(0).ok());
}

}  // namespace
}  // namespace tiermem

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

TEST(Region, RejectsBadSizes) {
  Region r;
  EXPECT_FALSE(r.Init(0).ok());
}

}  // namespace
}  // namespace tiermem

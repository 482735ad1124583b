#include <atomic>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/integration/test_util.h"
#include "tiermem/tiermem.hpp"

namespace tiermem {
namespace {

using testing::CheckPattern;
using testing::FillPattern;

std::unique_ptr<Runtime> StartOrDie(const Options& o = {}) {
  auto rt = Runtime::Start(o);
  EXPECT_TRUE(rt.ok()) << rt.status().ToString();
  return rt.ok() ? std::move(rt).value() : nullptr;
}

uint64_t Allocated(const Runtime& rt, Tier t) {
  for (const TierStats& s : rt.Stats()) {
    if (s.tier == t) return s.allocated_bytes;
  }
  return ~0ull;
}

// The acceptance test: 256 MiB on DRAM, pattern, Migrate to DRAM (node 0 here),
// Locate reports node 0 for every page, pattern intact.
TEST(RuntimeApi, Migrate256MiBAndLocateEveryPage) {
  auto rt = StartOrDie();
  ASSERT_NE(rt, nullptr);
  const size_t bytes = 256u << 20;
  auto p = rt->Allocate(bytes, Tier::kDram);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  FillPattern(*p, bytes, 0xC0FFEE);
  const int dram0 = rt->topology().NodesOf(NodeKind::kDram).front();
  auto moved = rt->Migrate(*p, bytes, Tier::kDram);
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  const uint64_t pages = bytes / 4096;
  EXPECT_EQ(moved->pages_moved + moved->pages_already_there + moved->pages_not_resident +
                moved->pages_failed,
            pages);
  EXPECT_EQ(moved->pages_failed, 0u);
  EXPECT_EQ(moved->pages_not_resident, 0u);
  auto to_node = rt->MigrateToNode(*p, bytes, dram0);
  ASSERT_TRUE(to_node.ok()) << to_node.status().ToString();
  EXPECT_EQ(to_node->pages_already_there + to_node->pages_moved, pages);
  auto where = rt->Locate(*p, bytes);
  ASSERT_TRUE(where.ok()) << where.status().ToString();
  ASSERT_EQ(where->size(), pages);
  size_t wrong = 0;
  for (const PageLocation& l : *where) {
    if (!l.resident || l.tier != Tier::kDram) ++wrong;
    if (rt->topology().Node(l.node) == nullptr ||
        rt->topology().Node(l.node)->kind != NodeKind::kDram) {
      ++wrong;
    }
  }
  EXPECT_EQ(wrong, 0u);
  if (rt->topology().NodesOf(NodeKind::kDram).size() == 1) {
    for (const PageLocation& l : *where) ASSERT_EQ(l.node, dram0);
  }
  EXPECT_EQ(CheckPattern(*p, bytes, 0xC0FFEE), SIZE_MAX);
  EXPECT_EQ(Allocated(*rt, Tier::kDram), bytes);
  EXPECT_TRUE(rt->Free(*p).ok());
  EXPECT_EQ(Allocated(*rt, Tier::kDram), 0u);
}

TEST(RuntimeApi, UntouchedPagesAreNotResident) {
  auto rt = StartOrDie();
  auto p = rt->Allocate(16 * 4096, Tier::kDram);
  ASSERT_TRUE(p.ok());
  static_cast<char*>(*p)[0] = 1;
  auto where = rt->Locate(*p, 16 * 4096);
  ASSERT_TRUE(where.ok());
  EXPECT_TRUE((*where)[0].resident);
  EXPECT_GE((*where)[0].node, 0);
  for (size_t i = 1; i < 16; ++i) {
    EXPECT_FALSE((*where)[i].resident);
    EXPECT_EQ((*where)[i].node, -1);
    EXPECT_EQ((*where)[i].tier, Tier::kDram);
  }
  EXPECT_TRUE(rt->Free(*p).ok());
}

TEST(RuntimeApi, PopulateAndAllocationSize) {
  auto rt = StartOrDie();
  auto p = rt->Allocate(10000, Tier::kDram, kAllocPopulate);
  ASSERT_TRUE(p.ok());
  auto size = rt->AllocationSize(*p);
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, 3u * 4096);
  auto where = rt->Locate(*p, *size);
  ASSERT_TRUE(where.ok());
  for (const PageLocation& l : *where) EXPECT_TRUE(l.resident);
  EXPECT_TRUE(rt->Free(*p).ok());
}

TEST(RuntimeApi, FreedMemoryIsReused) {
  auto rt = StartOrDie();
  auto a = rt->Allocate(1 << 20, Tier::kDram);
  ASSERT_TRUE(a.ok());
  std::memset(*a, 0xAB, 1 << 20);
  ASSERT_TRUE(rt->Free(*a).ok());
  auto b = rt->Allocate(1 << 20, Tier::kDram);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*a, *b);
  // Freed pages were dropped: the new allocation reads zeros.
  for (size_t i = 0; i < (1 << 20); i += 4096) ASSERT_EQ(static_cast<char*>(*b)[i], 0);
  EXPECT_TRUE(rt->Free(*b).ok());
}

TEST(RuntimeApi, ConcurrentAllocateFree) {
  auto rt = StartOrDie();
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::pair<void*, size_t>> mine;
      for (int i = 0; i < 2000; ++i) {
        size_t bytes = 4096 * (1 + (i * 7 + t) % 13);
        auto p = rt->Allocate(bytes, Tier::kDram);
        if (!p.ok()) {
          ++errors;
          continue;
        }
        FillPattern(*p, bytes, static_cast<uint64_t>(t) << 32 | static_cast<uint64_t>(i));
        mine.push_back({*p, bytes});
        if (mine.size() > 8) {
          auto [q, n] = mine.front();
          mine.erase(mine.begin());
          if (!rt->Free(q).ok()) ++errors;
        }
      }
      for (size_t k = 0; k < mine.size(); ++k) {
        if (!rt->Free(mine[k].first).ok()) ++errors;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(Allocated(*rt, Tier::kDram), 0u);
}

TEST(RuntimeApi, PmrContainersLiveOnATier) {
  auto rt = StartOrDie();
  std::pmr::memory_resource* mr = rt->Resource(Tier::kDram);
  ASSERT_NE(mr, nullptr);
  {
    std::pmr::vector<uint64_t> v(mr);
    for (uint64_t i = 0; i < 1000000; ++i) v.push_back(i * 3);
    std::pmr::map<int, std::pmr::string> m(mr);
    for (int i = 0; i < 10000; ++i) m.emplace(i, std::pmr::string(40, static_cast<char>('a' + i % 26), mr));
    for (uint64_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], i * 3);
    EXPECT_EQ(m.at(27)[0], 'b');
    auto where = rt->Locate(v.data(), v.size() * sizeof(uint64_t));
    ASSERT_TRUE(where.ok()) << where.status().ToString();
    for (const PageLocation& l : *where) EXPECT_EQ(l.tier, Tier::kDram);
    EXPECT_GT(Allocated(*rt, Tier::kDram), 8000000u);
  }
  // An absent tier's resource refuses with bad_alloc (pmr's way) instead of giving DRAM.
  if (!rt->HasTier(Tier::kCxl)) {
    std::pmr::memory_resource* cxl = rt->Resource(Tier::kCxl);
    ASSERT_NE(cxl, nullptr);
    EXPECT_THROW(std::pmr::vector<int>(1000, 0, cxl), std::bad_alloc);
  }
}

TEST(RuntimeApi, TierLimitIsEnforced) {
  Options o;
  o.Set("dram_limit", 1 << 20);
  auto rt = StartOrDie(o);
  auto a = rt->Allocate(768 << 10, Tier::kDram);
  ASSERT_TRUE(a.ok());
  auto b = rt->Allocate(512 << 10, Tier::kDram);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(b.status().message().find("limit 1048576"), std::string::npos);
  // kAuto goes to the next tier with room, or says every tier is full.
  auto c = rt->Allocate(512 << 10, Tier::kAuto);
  if (rt->HasTier(Tier::kCxl)) {
    EXPECT_TRUE(c.ok());
  } else {
    EXPECT_EQ(c.status().code(), StatusCode::kResourceExhausted);
  }
  EXPECT_TRUE(rt->Free(*a).ok());
  auto d = rt->Allocate(1 << 20, Tier::kDram);
  EXPECT_TRUE(d.ok());
}

TEST(RuntimeApi, StopReleasesAndRefusesFurtherCalls) {
  auto rt = StartOrDie();
  auto p = rt->Allocate(1 << 20, Tier::kDram);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(rt->Stop().ok());
  EXPECT_TRUE(rt->Stop().ok());  // idempotent
  auto q = rt->Allocate(4096, Tier::kDram);
  EXPECT_EQ(q.status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tiermem

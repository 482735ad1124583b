// PageMap: the same answers as std::unordered_map over random inserts, lookups and erases
// (backward-shift deletion keeps every key reachable), erase_if, growth and clear.
#include "base/page_map.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <unordered_map>

namespace tiermem {
namespace {

// Every key of `ref` is found with its value, and the map holds nothing else.
void ExpectSame(const PageMap<uint64_t>& m, const std::unordered_map<uint64_t, uint64_t>& ref) {
  ASSERT_EQ(m.size(), ref.size());
  for (const auto& [k, v] : ref) {
    const uint64_t* got = m.find(k);
    ASSERT_NE(got, nullptr) << "key " << k;
    EXPECT_EQ(*got, v) << "key " << k;
  }
  size_t seen = 0;
  m.for_each([&](uint64_t k, uint64_t v) {
    ++seen;
    auto it = ref.find(k);
    ASSERT_NE(it, ref.end()) << "extra key " << k;
    EXPECT_EQ(it->second, v);
  });
  EXPECT_EQ(seen, ref.size());
}

TEST(PageMap, RandomOperationsAgreeWithUnorderedMap) {
  // Keys from a small range collide often (long probe runs, shifts across the wrap); keys that
  // are neighbouring pages are what the policy stores.
  for (const uint64_t range : {64ull, 5000ull, 1ull << 40}) {
    std::mt19937_64 rng(range);
    PageMap<uint64_t> m;
    std::unordered_map<uint64_t, uint64_t> ref;
    for (int op = 0; op < 60000; ++op) {
      const uint64_t k = rng() % range;
      switch (rng() % 4) {
        case 0:
          EXPECT_EQ(m.insert(k, op), ref.emplace(k, op).second);
          break;
        case 1:
          m[k] = op;
          ref[k] = op;
          break;
        case 2:
          EXPECT_EQ(m.erase(k), ref.erase(k) == 1);
          break;
        default:
          EXPECT_EQ(m.contains(k), ref.count(k) == 1);
      }
      if (op % 10000 == 0) ExpectSame(m, ref);
    }
    ExpectSame(m, ref);
  }
}

TEST(PageMap, EraseIfRemovesExactlyTheMatchingEntries) {
  PageMap<uint64_t> m;
  std::unordered_map<uint64_t, uint64_t> ref;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    const uint64_t k = rng() % 30000;
    m[k] = k % 7;
    ref[k] = k % 7;
  }
  m.erase_if([](uint64_t, uint64_t v) { return v < 3; });
  std::erase_if(ref, [](const auto& kv) { return kv.second < 3; });
  ExpectSame(m, ref);
  m.erase_if([](uint64_t, uint64_t) { return true; });
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.find(ref.begin()->first), nullptr);
}

TEST(PageMap, ClearAndSwapKeepWorking) {
  PageMap<uint64_t> a, b;
  for (uint64_t k = 0; k < 1000; ++k) a.insert(k, k + 1);
  a.swap(b);
  EXPECT_TRUE(a.empty());
  ASSERT_EQ(b.size(), 1000u);
  EXPECT_EQ(*b.find(999), 1000u);
  b.clear();
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.find(5), nullptr);
  EXPECT_TRUE(b.insert(5, 9));  // a cleared table takes entries again, with their new values
  EXPECT_FALSE(b.insert(5, 10));
  EXPECT_EQ(*b.find(5), 9u);
  EXPECT_EQ(a.find(1), nullptr);  // an empty map with no table
  EXPECT_FALSE(a.erase(1));
}

}  // namespace
}  // namespace tiermem

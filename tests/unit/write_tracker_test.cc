// tiermem::WriteTracker (include/tiermem/track.hpp): a scan reports every page written in the
// round and nothing else, each round afresh; protect reports the written pages of its sample
// only and moves its sample on; bad names, ranges and sample sizes are refused, naming them.
#include "tiermem/track.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "tests/unit/test_mapping.h"

namespace tiermem {
namespace {

constexpr size_t kPage = TestMapping::kPage;

std::set<size_t> RoundSet(WriteTracker& t, size_t* looked = nullptr) {
  std::vector<size_t> w;
  auto n = t.Round(&w);
  EXPECT_TRUE(n.ok()) << n.status().ToString();
  if (looked != nullptr && n.ok()) *looked = *n;
  return std::set<size_t>(w.begin(), w.end());
}

TEST(WriteTracker, EveryScanReportsTheRoundsWritesAndNothingElse) {
  for (const std::string& mech : {std::string("pagemap_scan"), std::string("soft_dirty")}) {
    std::string why;
    if (!WriteTracker::Available(mech, &why)) {
      EXPECT_FALSE(why.empty());
      fprintf(stderr, "%s skipped: %s\n", mech.c_str(), why.c_str());
      continue;
    }
    TestMapping m(256, 1);
    ASSERT_NE(m.base, nullptr);
    auto t = WriteTracker::Start(mech, m.base, m.bytes, 0);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_STREQ((*t)->mechanism(), mech.c_str());
    for (size_t p : {1, 2, 50, 255}) m.base[p * kPage] = 2;
    size_t looked = 0;
    EXPECT_EQ(RoundSet(**t, &looked), (std::set<size_t>{1, 2, 50, 255})) << mech;
    EXPECT_EQ(looked, 256u);
    EXPECT_TRUE(RoundSet(**t).empty()) << mech;
    m.base[7 * kPage + 9] = 3;
    EXPECT_EQ(RoundSet(**t), (std::set<size_t>{7})) << mech;
  }
}

TEST(WriteTracker, ProtectSeesOnlyItsSampleAndMovesItOn) {
  std::string why;
  if (!WriteTracker::Available("protect", &why)) GTEST_SKIP() << why;
  TestMapping m(8, 1);
  ASSERT_NE(m.base, nullptr);
  auto t = WriteTracker::Start("protect", m.base, m.bytes, 4);  // pages 0-3 armed
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  m.base[1 * kPage] = 2;
  m.base[6 * kPage] = 2;  // not in the sample
  size_t looked = 0;
  EXPECT_EQ(RoundSet(**t, &looked), (std::set<size_t>{1}));
  EXPECT_EQ(looked, 4u);
  m.base[6 * kPage] = 3;  // pages 4-7 armed now
  m.base[1 * kPage] = 3;
  EXPECT_EQ(RoundSet(**t), (std::set<size_t>{6}));
}

TEST(WriteTracker, BadNamesRangesAndSamplesAreRefused) {
  TestMapping m(4, 1);
  ASSERT_NE(m.base, nullptr);
  auto bad_name = WriteTracker::Start("dirty_bits", m.base, m.bytes, 0);
  ASSERT_FALSE(bad_name.ok());
  EXPECT_EQ(bad_name.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_name.status().message().find("dirty_bits"), std::string::npos);
  auto unaligned = WriteTracker::Start("pagemap_scan", m.base + 1, kPage, 0);
  ASSERT_FALSE(unaligned.ok());
  EXPECT_EQ(unaligned.status().code(), StatusCode::kInvalidArgument);
  std::string why;
  if (WriteTracker::Available("protect", &why)) {
    auto no_sample = WriteTracker::Start("protect", m.base, m.bytes, 0);
    ASSERT_FALSE(no_sample.ok());
    EXPECT_NE(no_sample.status().message().find("sample_pages"), std::string::npos);
  }
  const std::vector<std::string> names = WriteTracker::Mechanisms();
  EXPECT_NE(std::find(names.begin(), names.end(), "pagemap_scan"), names.end());
}

}  // namespace
}  // namespace tiermem

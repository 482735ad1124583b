// The write scan (runtime/tiering/scan_tracker.h): the mechanism chosen from what the kernel has,
// with every reason when none; a window scanned reports its own writes and leaves the rest of the
// range's for their own window (pagemap_scan), while soft-dirty's clear takes the whole process
// (its stated limit).
#include "runtime/tiering/scan_tracker.h"

#include <gtest/gtest.h>

#include <set>

#include "tests/unit/test_mapping.h"

namespace tiermem {
namespace {

constexpr size_t kPage = TestMapping::kPage;

os::TrackingSupport Support(bool scan, bool async, bool dirty) {
  os::TrackingSupport s;
  s.pagemap_scan = scan ? os::Mechanism{true, ""} : os::Mechanism{false, "no PAGEMAP_SCAN here"};
  s.wp_async = async ? os::Mechanism{true, ""} : os::Mechanism{false, "no WP_ASYNC here"};
  s.soft_dirty = dirty ? os::Mechanism{true, ""} : os::Mechanism{false, "no soft-dirty here"};
  return s;
}

TEST(ScanTracker, ChoosesTheScanThenSoftDirtyAndSaysWhyNeither) {
  EXPECT_EQ(*ScanTracker::Choose(Support(true, true, true)), ScanTracker::Mechanism::kPagemapScan);
  EXPECT_EQ(*ScanTracker::Choose(Support(true, false, true)), ScanTracker::Mechanism::kSoftDirty);
  auto none = ScanTracker::Choose(Support(true, false, false));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(none.status().message().find("no WP_ASYNC here"), std::string::npos);
  EXPECT_NE(none.status().message().find("no soft-dirty here"), std::string::npos);
}

std::set<size_t> ScanWindow(ScanTracker& t, char* base, size_t first, size_t pages) {
  std::set<size_t> out;
  const os::Span span{base + first * kPage, pages * kPage};
  auto n = t.Scan(&span, 1, [&](uintptr_t s, uintptr_t e) {
    for (uintptr_t a = s; a < e; a += kPage) out.insert((a - reinterpret_cast<uintptr_t>(base)) / kPage);
  });
  EXPECT_TRUE(n.ok()) << n.status().ToString();
  if (n.ok()) {
    EXPECT_EQ(*n, pages);
  }
  return out;
}

TEST(ScanTracker, AWindowReportsItsOwnWritesAndKeepsTheOthers) {
  for (auto m : {ScanTracker::Mechanism::kPagemapScan, ScanTracker::Mechanism::kSoftDirty}) {
    std::string why;
    if (!ScanTracker::Usable(m, os::ProbeTracking(), &why)) {
      fprintf(stderr, "%s skipped: %s\n", ScanTracker::Name(m), why.c_str());
      continue;
    }
    TestMapping map(64, 1);
    ASSERT_NE(map.base, nullptr);
    auto t = ScanTracker::Open(m);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    ASSERT_TRUE((*t)->Track(map.base, map.bytes).ok());
    map.base[5 * kPage] = 2;
    map.base[40 * kPage] = 2;
    EXPECT_EQ(ScanWindow(**t, map.base, 0, 32), (std::set<size_t>{5}));
    if (m == ScanTracker::Mechanism::kPagemapScan) {
      EXPECT_EQ(ScanWindow(**t, map.base, 32, 32), (std::set<size_t>{40}));
    } else {  // the first window's clear took page 40's bit too
      EXPECT_TRUE(ScanWindow(**t, map.base, 32, 32).empty());
    }
    EXPECT_TRUE(ScanWindow(**t, map.base, 0, 64).empty());
    EXPECT_TRUE((*t)->Untrack(map.base, map.bytes).ok());
  }
}

}  // namespace
}  // namespace tiermem

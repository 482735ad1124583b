// TieringConfigFromOptions: how many page records a round reads, by mode (TIERMEM_SCAN_PAGES).
// RingSizesFor: the policy thread's rings and fault log by the DRAM budget.
#include "runtime/tiering/mover.h"
#include "runtime/tiering/ring_sizes.h"

#include <gtest/gtest.h>

#include <cstdio>

namespace tiermem {
namespace {

TieringConfig ConfigWith(const char* mode, uint64_t scan_pages) {
  OptionValues o;
  LoadDefaultOptions(&o);
  std::snprintf(o.sample_mode, sizeof(o.sample_mode), "%s", mode);
  o.dram_limit = uint64_t{1} << 30;
  o.scan_pages = scan_pages;
  return TieringConfigFromOptions(o, 4096, false, true, false, 4096, nullptr);
}

// By default a window only where rounds arm no sample: remote-fault sampling reads 32768
// resident pages' worth, protection sampling every page; a number given is used in every mode,
// 1024 at least.
TEST(TieringConfig, ScanPagesByModeUnlessGiven) {
  EXPECT_EQ(ConfigWith("faults", 0).scan_pages, 32768u);
  EXPECT_EQ(ConfigWith("protect", 0).scan_pages, 0u);
  EXPECT_EQ(ConfigWith("protect", 65536).scan_pages, 65536u);
  EXPECT_EQ(ConfigWith("faults", 100).scan_pages, 1024u);
}

constexpr uint64_t kPagesPerMiB = 256;  // 4 KiB pages

// Small limits get small relief rings (3/256 of the limit together, 64 KiB each at least); from
// 1 GiB the sizes they had before they went by the limit (2^18, 2^16); the fault log is whole at
// every limit (a late round must not lose the samples of pages still in DRAM); no budget,
// however large, overflows them.
TEST(RingSizes, FollowTheDramBudget) {
  const RingSizes at32m = RingSizesFor(32 * kPagesPerMiB);
  EXPECT_EQ(at32m.relief, 32768u);
  EXPECT_EQ(at32m.ahead, 16384u);
  EXPECT_EQ(at32m.log, kMaxLogEntries);
  EXPECT_EQ((at32m.relief + at32m.ahead) * 8, (32u << 20) * 3 / 256);
  for (uint64_t pages : {uint64_t{0}, uint64_t{1}, 2 * kPagesPerMiB, 8 * kPagesPerMiB}) {
    const RingSizes r = RingSizesFor(pages);
    EXPECT_EQ(r.relief, kMinRingEntries) << pages;
    EXPECT_EQ(r.ahead, kMinRingEntries) << pages;
    EXPECT_EQ(r.log, kMaxLogEntries) << pages;
  }
  for (uint64_t pages : {1024 * kPagesPerMiB, 64 * 1024 * kPagesPerMiB, ~uint64_t{0}}) {
    const RingSizes r = RingSizesFor(pages);
    EXPECT_EQ(r.relief, size_t{1} << 18) << pages;
    EXPECT_EQ(r.ahead, size_t{1} << 16) << pages;
    EXPECT_EQ(r.log, size_t{1} << 16) << pages;
  }
  // In between, never smaller for a larger budget.
  RingSizes last = RingSizesFor(1);
  for (uint64_t pages = 1; pages <= 2048 * kPagesPerMiB; pages = pages * 3 / 2 + 1) {
    const RingSizes r = RingSizesFor(pages);
    EXPECT_GE(r.relief, last.relief);
    EXPECT_GE(r.ahead, last.ahead);
    EXPECT_GE(r.log, last.log);
    last = r;
  }
}

}  // namespace
}  // namespace tiermem

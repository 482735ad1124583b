// TieringConfigFromOptions: how many page records a round reads, by mode (TIERMEM_SCAN_PAGES).
#include "runtime/tiering/mover.h"

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

}  // namespace
}  // namespace tiermem

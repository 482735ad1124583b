// TieringConfigFromOptions: how many page records a round reads, by mode (TIERMEM_SCAN_PAGES).
// RingSizesFor: the policy thread's rings and fault log by the DRAM budget.
#include "runtime/tiering/mover.h"
#include "runtime/tiering/ring_sizes.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "tiermem/options.hpp"

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

// TIERMEM_TRACK: the write scan is opt-in (auto and off leave it out), runs the policy thread's
// rounds even with no budget to keep (heat only), takes TIERMEM_TRACK_PAGES, and bad values are
// refused by the option table with the option's name.
TEST(TieringConfig, TrackScanIsOptInAndRunsRoundsWithoutABudget) {
  OptionValues o;
  LoadDefaultOptions(&o);
  EXPECT_STREQ(o.track, "auto");
  EXPECT_FALSE(TieringConfigFromOptions(o, 4096, false, false, false, 4096, nullptr).track_scan);
  EXPECT_EQ(TieringConfigFromOptions(o, 4096, false, false, false, 4096, nullptr).mode, "off");
  ASSERT_TRUE(SetOption(&o, *FindOption("track"), "SCAN"));
  ASSERT_TRUE(SetOption(&o, *FindOption("track_pages"), "4096"));
  const TieringConfig c = TieringConfigFromOptions(o, 4096, false, false, false, 4096, nullptr);
  EXPECT_TRUE(c.track_scan);
  EXPECT_EQ(c.track_pages, 4096u);
  EXPECT_EQ(c.mode, "faults");  // rounds run: no sampling, nothing to move
  ASSERT_TRUE(SetOption(&o, *FindOption("track"), "off"));
  EXPECT_FALSE(TieringConfigFromOptions(o, 4096, false, false, false, 4096, nullptr).track_scan);

  for (const char* bad : {"scanning", "", "pagemap_scan", "scan|off"}) {
    EXPECT_FALSE(SetOption(&o, *FindOption("track"), bad)) << bad;
    const Status st = Options().Set("track", bad).status();
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.ToString().find("TIERMEM_TRACK"), std::string::npos) << st.ToString();
  }
  for (const char* bad : {"0", "511", "-1", "lots", "99999999999"}) {
    EXPECT_FALSE(SetOption(&o, *FindOption("track_pages"), bad)) << bad;
    const Status st = Options().Set("track_pages", bad).status();
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.ToString().find("TIERMEM_TRACK_PAGES"), std::string::npos) << st.ToString();
  }
}

// With a remote tier the scan runs through the pager's descriptor, which it makes asynchronous
// for write-protect: what needs write faults reported is refused by name (fork sharing, the
// default, and the soft sampler); without a remote tier, or without the scan, nothing is.
TEST(TieringConfig, TrackScanWithARemoteTierRefusesWhatNeedsWriteFaults) {
  OptionValues o;
  LoadDefaultOptions(&o);
  EXPECT_TRUE(CheckTrackOptions(o).ok());
  std::snprintf(o.remote, sizeof(o.remote), "tcp://127.0.0.1:7471");
  EXPECT_TRUE(CheckTrackOptions(o).ok());
  std::snprintf(o.track, sizeof(o.track), "scan");
  Status st = CheckTrackOptions(o);  // TIERMEM_FORK=share by default
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  for (const char* name : {"TIERMEM_TRACK=scan", "TIERMEM_REMOTE", "TIERMEM_FORK=fetch"}) {
    EXPECT_NE(st.ToString().find(name), std::string::npos) << st.ToString();
  }
  std::snprintf(o.fork, sizeof(o.fork), "fetch");
  EXPECT_TRUE(CheckTrackOptions(o).ok()) << CheckTrackOptions(o).ToString();
  std::snprintf(o.sample_mode, sizeof(o.sample_mode), "uffd");
  st = CheckTrackOptions(o);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("TIERMEM_SAMPLE_MODE=uffd"), std::string::npos) << st.ToString();
  std::snprintf(o.sample_mode, sizeof(o.sample_mode), "protect");
  EXPECT_TRUE(CheckTrackOptions(o).ok());
  o.remote[0] = '\0';
  std::snprintf(o.remote_file, sizeof(o.remote_file), "/etc/tiermem/servers");
  std::snprintf(o.fork, sizeof(o.fork), "share");
  st = CheckTrackOptions(o);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("TIERMEM_REMOTE_FILE"), std::string::npos) << st.ToString();
  o.remote_file[0] = '\0';
  EXPECT_TRUE(CheckTrackOptions(o).ok());  // no remote tier: its own descriptor, fork as it likes
  std::snprintf(o.sample_mode, sizeof(o.sample_mode), "uffd");
  EXPECT_TRUE(CheckTrackOptions(o).ok());
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

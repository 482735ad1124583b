// The write scan inside the runtime (TIERMEM_TRACK=scan; runtime/tiering/migrator_track.cc):
// the policy thread learns which pages are written from the scan, demotes the unwritten ones
// and keeps the written ones, counts what it scanned, and refuses fork sharing with a remote tier.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/os_pagemap.h"
#include "runtime/pages/region.h"
#include "runtime/core/runtime_impl.h"
#include "runtime/tiering/migrator.h"
#include "runtime/tiering/scan_tracker.h"
#include "test_util.h"
#include "tiermem/tiermem.hpp"

namespace tiermem {
namespace {

constexpr size_t kPage = 4096;
using testing::WaitFor;

// The kernel's write scan, or the reason the tests skip (neither mechanism).
std::string NoScanReason() {
  StatusOr<ScanTracker::Mechanism> m = ScanTracker::Choose(os::ProbeTracking());
  return m.ok() ? "" : m.status().ToString();
}

// A PageMover over one Region's records alone: DRAM and a CXL tier that are both this machine's
// memory (a move sets the record's tier and counts it), so the policy's decisions can be seen
// on a machine without a CXL node.
class RecordMover final : public PageMover {
 public:
  explicit RecordMover(Region* r) : r_(r) {}
  StatusOr<MigrateResult> Migrate(void* addr, size_t len, Tier tier) override {
    MigrateResult res;
    for (size_t off = 0; off < len; off += kPage) {
      PageRecord& rec = r_->record(r_->PageIndex(static_cast<char*>(addr) + off));
      const auto from = static_cast<Tier>(rec.tier.load());
      if (from == tier) {
        ++res.pages_already_there;
        continue;
      }
      rec.tier.store(static_cast<uint8_t>(tier));
      pages_[static_cast<int>(from)].fetch_sub(1);
      pages_[static_cast<int>(tier)].fetch_add(1);
      ++res.pages_moved;
    }
    return res;
  }
  StatusOr<MigrateResult> EvictPages(const std::vector<char*>&) override {
    return NotSupported("no remote tier here");
  }
  StatusOr<MigrateResult> MovePages(const std::vector<char*>& pages, Tier tier) override {
    MigrateResult res;
    for (char* p : pages) {
      auto r = Migrate(p, kPage, tier);
      if (!r.ok()) return r.status();
      res.pages_moved += r->pages_moved;
    }
    return res;
  }
  const std::vector<int>& TierNodes(Tier) const override { return nodes_; }
  uint64_t TierPages(Tier tier) const override { return pages_[static_cast<int>(tier)].load(); }
  void Placed(uint64_t n) { pages_[0].fetch_add(n); }

 private:
  Region* r_;
  std::vector<int> nodes_;
  std::atomic<uint64_t> pages_[kNumTiers]{};
};

// Mirrors TieringTest.HotPagesStayInDramColdPagesGoRemote with the write scan as the only
// source of heat (no access sampling): 4096 pages written once, then a quarter of them (every
// fourth page, so no run of hot pages lines up with the scan's windows or the policy's blocks)
// written all the time, DRAM's budget half the pages. The scan reads 1024 pages a round, so it takes
// four rounds to see them all. Every written page must end in DRAM, DRAM within its budget.
TEST(TrackScan, WrittenPagesStayInDramUnwrittenOnesAreDemoted) {
  if (const std::string why = NoScanReason(); !why.empty()) GTEST_SKIP() << why;
  Region region;
  ASSERT_TRUE(region.Init(size_t{64} << 20).ok());
  constexpr uint64_t kPages = 4096, kHot = 1024, kBudget = 2048;
  const uint64_t first = region.AllocRun(kPages);
  for (uint64_t i = first; i < first + kPages; ++i) region.record(i).tier.store(static_cast<uint8_t>(Tier::kDram));
  RecordMover mover(&region);
  mover.Placed(kPages);
  TieringConfig c;
  c.mode = "faults";
  c.interval_ms = 5;
  c.track_scan = true;
  c.track_pages = 1024;
  c.evict_background = false;
  c.policy.budget_pages = {kBudget, 0, 0};
  c.policy.present = {true, true, false};
  c.policy.half_life_ms = 100;
  c.policy.min_residence_ms = 50;
  auto counters = std::make_unique<ProcessCounters>();
  Migrator m(&mover, c, counters.get());
  char* base = region.PageAddress(first);
  for (uint64_t i = 0; i < kPages; ++i) base[i * kPage] = 1;  // resident, written once
  m.OnAllocate(&region, first, kPages);
  ASSERT_TRUE(m.Start().ok());
  EXPECT_EQ(m.stats().track, ScanTracker::Name(*ScanTracker::Choose(os::ProbeTracking())));
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (uint64_t round = 0; !stop.load(std::memory_order_relaxed); ++round) {
      for (uint64_t i = 0; i < kHot; ++i) base[4 * i * kPage + 8] = static_cast<char>(round);
    }
  });
  auto hot_in_dram = [&] {
    for (uint64_t i = 0; i < kHot; ++i) {
      if (region.record(first + 4 * i).tier.load() != static_cast<uint8_t>(Tier::kDram)) return false;
    }
    return true;
  };
  const bool settled = WaitFor([&] { return mover.TierPages(Tier::kDram) <= kBudget && hot_in_dram(); }, 30);
  stop = true;
  writer.join();
  const CounterValues v = m.counters();
  m.Stop();
  EXPECT_TRUE(settled) << "dram " << mover.TierPages(Tier::kDram) << " of " << kBudget << ", demotions "
                       << v.demotions << ", promotions " << v.promotions;
  EXPECT_GE(v.demotions, kPages - kBudget);
  EXPECT_GE(v.track_pages_scanned, kPages);
  EXPECT_GT(v.track_written_pages, kHot);
  EXPECT_GT(v.track_scan_ns, 0u);
  EXPECT_EQ(v.samples, 0u);  // no access sampling: the scan alone decided
  for (uint64_t i = 0; i < kPages; ++i) ASSERT_EQ(base[i * kPage], 1) << i;  // bytes kept
}

// A runtime in scan mode with no limit learns heat only (TIERMEM_TRACK_PAGES by default: every
// live page each round here): the stats say the mechanism, and its
// counters move with the pages written; the data is intact.
TEST(TrackScan, RuntimeInScanModeCountsWhatItScans) {
  if (const std::string why = NoScanReason(); !why.empty()) GTEST_SKIP() << why;
  setenv("TIERMEM_TRACK", "scan", 1);
  setenv("TIERMEM_SAMPLE_INTERVAL_MS", "5", 1);
  auto rt = Runtime::Start();
  unsetenv("TIERMEM_TRACK");
  unsetenv("TIERMEM_SAMPLE_INTERVAL_MS");
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  Migrator* m = ImplOf(**rt)->migrator();
  ASSERT_TRUE(m->running());
  const size_t bytes = 16 << 20;
  auto p = (*rt)->Allocate(bytes, Tier::kDram);
  ASSERT_TRUE(p.ok());
  char* base = static_cast<char*>(*p);
  testing::FillPattern(base, bytes, 3);
  // Written pages are found again after every pass of the window over them.
  const bool found = WaitFor(
      [&] {
        volatile char* v = base;  // a store the compiler keeps, of the byte already there
        for (size_t off = 0; off < bytes / 4; off += kPage) v[off] = v[off];
        return m->counters().track_written_pages >= 3 * bytes / kPage;
      },
      60);
  const RuntimeCounters rc = (*rt)->Counters();
  EXPECT_TRUE(found) << "written " << rc.track_written_pages << ", scanned " << rc.track_pages_scanned;
  EXPECT_EQ(rc.track_mode, ScanTracker::Name(*ScanTracker::Choose(os::ProbeTracking())));
  EXPECT_EQ(rc.sampling_mode, "faults");
  EXPECT_GE(rc.track_pages_scanned, bytes / kPage);
  std::string json;
  ASSERT_TRUE((*rt)->GetProperty("tiermem.counters.json", &json));
  EXPECT_NE(json.find("\"track_mode\":\"" + rc.track_mode + "\""), std::string::npos) << json;
  EXPECT_EQ(testing::CheckPattern(base, bytes, 3), SIZE_MAX);
  ASSERT_TRUE((*rt)->Free(base).ok());
  ASSERT_TRUE((*rt)->Stop().ok());
}

// Protection sampling beside the scan: pages being written are left out of the sample (counted),
// pages only read are still sampled, and every byte stays as written.
TEST(TrackScan, TheAccessSampleLeavesWrittenPagesOut) {
  if (const std::string why = NoScanReason(); !why.empty()) GTEST_SKIP() << why;
  setenv("TIERMEM_TRACK", "scan", 1);
  setenv("TIERMEM_SAMPLE_MODE", "protect", 1);
  setenv("TIERMEM_SAMPLE_INTERVAL_MS", "5", 1);
  auto rt = Runtime::Start();
  unsetenv("TIERMEM_TRACK");
  unsetenv("TIERMEM_SAMPLE_MODE");
  unsetenv("TIERMEM_SAMPLE_INTERVAL_MS");
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  Migrator* m = ImplOf(**rt)->migrator();
  const size_t bytes = 4 << 20;
  auto p = (*rt)->Allocate(bytes, Tier::kDram);
  ASSERT_TRUE(p.ok());
  char* base = static_cast<char*>(*p);
  testing::FillPattern(base, bytes, 5);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> sum{0};
  std::thread worker([&] {  // writes the first half (the same bytes again), reads the second
    volatile char* v = base;
    while (!stop.load(std::memory_order_relaxed)) {
      uint64_t s = 0;
      for (size_t off = 0; off < bytes / 2; off += kPage) v[off] = v[off];
      for (size_t off = bytes / 2; off < bytes; off += kPage) s += static_cast<unsigned char>(v[off]);
      sum.fetch_add(s, std::memory_order_relaxed);
    }
  });
  const bool seen = WaitFor(
      [&] {
        const CounterValues c = m->counters();
        return c.track_sample_skips > 0 && c.samples > 0;
      },
      60);
  stop = true;
  worker.join();
  const CounterValues c = m->counters();
  EXPECT_TRUE(seen) << "skips " << c.track_sample_skips << ", samples " << c.samples;
  EXPECT_EQ(m->stats().mode, "protect");
  EXPECT_EQ(testing::CheckPattern(base, bytes, 5), SIZE_MAX);
  ASSERT_TRUE((*rt)->Free(base).ok());
  ASSERT_TRUE((*rt)->Stop().ok());
}

// With a remote tier the scan runs through the pager's descriptor, but fork sharing (the default)
// needs write faults reported: Start refuses it, naming the options
// (tests/integration/remote_track_scan_test.cc runs the scan with TIERMEM_FORK=fetch).
TEST(TrackScan, ARemoteTierWithForkSharingIsRefusedByName) {
  setenv("TIERMEM_TRACK", "scan", 1);
  setenv("TIERMEM_REMOTE", "tcp://127.0.0.1:9", 1);
  setenv("TIERMEM_FORK", "share", 1);
  auto rt = Runtime::Start();
  unsetenv("TIERMEM_TRACK");
  unsetenv("TIERMEM_REMOTE");
  unsetenv("TIERMEM_FORK");
  ASSERT_FALSE(rt.ok());
  for (const char* name : {"TIERMEM_TRACK=scan", "TIERMEM_REMOTE", "TIERMEM_FORK=fetch"}) {
    EXPECT_NE(rt.status().ToString().find(name), std::string::npos) << rt.status().ToString();
  }
}

}  // namespace
}  // namespace tiermem

// The write scan with a remote tier (TIERMEM_TRACK=scan, TIERMEM_FORK=fetch): the pager's
// userfaultfd is asynchronous for write-protect, the scan reads its ranges, and eviction checks
// each page by taking it out (runtime/paging/pager_evict.cc): writes made while pages are
// evicted are kept, pages fault back with their bytes, read-only pages are not sent again, the
// scan's counters move, and only pages holding data become write samples.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "runtime/core/runtime_impl.h"
#include "runtime/paging/pager.h"
#include "runtime/tiering/migrator.h"
#include "tests/integration/remote_memd_fixture.h"
#include "test_util.h"
#include "tiermem/tiermem.hpp"

namespace tiermem {
namespace {

using testing::CheckPage;
using testing::FillPage;
using testing::MemdProcess;

constexpr size_t kPage = 4096;

// A runtime on `memd` in scan mode, or null with the reason in *why when this kernel gives the
// pager no write scan (no WP_ASYNC or no UFFDIO_MOVE).
// `interval_ms`: the policy round, each with a write scan.
std::unique_ptr<Runtime> StartScanRuntime(const MemdProcess& memd, std::string* why, int interval_ms = 5) {
  setenv("TIERMEM_TRACK", "scan", 1);
  setenv("TIERMEM_FORK", "fetch", 1);
  setenv("TIERMEM_SAMPLE_INTERVAL_MS", std::to_string(interval_ms).c_str(), 1);
  std::unique_ptr<Runtime> rt = testing::StartRemoteRuntime(memd.url(), "", "off");
  unsetenv("TIERMEM_TRACK");
  unsetenv("TIERMEM_FORK");
  unsetenv("TIERMEM_SAMPLE_INTERVAL_MS");
  if (rt != nullptr && !ImplOf(*rt)->pager()->write_scan()) {
    *why = "the kernel gives the pager's userfaultfd no WP_ASYNC with UFFDIO_MOVE";
    return nullptr;
  }
  return rt;
}

// memd on loopback and a runtime on it in scan mode (StartRuntime); skipped, naming why, where
// the kernel gives the pager no write scan.
class RemoteTrackScan : public ::testing::Test {
 protected:
  // The caller returns when this skipped or failed (IsSkipped() || HasFatalFailure()).
  void StartRuntime(int interval_ms = 5) {
    ASSERT_TRUE(memd_.Start({"--capacity", "64M", "--no-rdma"}));
    std::string why;
    rt_ = StartScanRuntime(memd_, &why, interval_ms);
    if (rt_ == nullptr && !why.empty()) GTEST_SKIP() << why;
    ASSERT_NE(rt_, nullptr);
  }
  bool Stopped() const { return IsSkipped() || HasFatalFailure(); }
  MemdProcess memd_;
  std::unique_ptr<Runtime> rt_;  // (destroyed before memd_)
};

TEST_F(RemoteTrackScan, ScanRunsWithARemoteTierAndEvictionKeepsEveryWrite) {
  StartRuntime();
  if (Stopped()) return;
  Runtime* rt = rt_.get();
  Migrator* m = ImplOf(*rt)->migrator();
  ASSERT_TRUE(m->running());
  constexpr size_t kPages = 256;
  auto p = rt->Allocate(kPages * kPage, Tier::kDram);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto* counters = static_cast<std::atomic<uint64_t>*>(*p);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> written{0};
  // The first half of the pages is written on every pass, the second half on one pass in 64.
  // A page written while its eviction is under way stays local (its eviction is called off), so
  // with every page written on every pass a writer that keeps its core evicts nothing at all;
  // the rarely written half is evicted, and faults back when its turn comes.
  constexpr uint64_t kColdEvery = 64;
  std::thread writer([&] {  // each page's first word counts the writes made to it
    for (uint64_t n = 0; !stop; ++n) {
      const uint64_t page = n % kPages;
      if (page >= kPages / 2 && (n / kPages) % kColdEvery != 0) continue;
      counters[page * (kPage / 8)].fetch_add(1);
      ++written;
    }
  });
  // At least 50 rounds, then more until the scan has read pages being written and some page was
  // evicted (bounded wait, not a sleep).
  for (int round = 0; round < 50; ++round) ASSERT_TRUE(rt->Migrate(*p, kPages * kPage, Tier::kRemote).ok());
  Status migrated;
  const bool settled = testing::WaitFor(
      [&] {
        migrated = rt->Migrate(*p, kPages * kPage, Tier::kRemote).status();
        return !migrated.ok() || (m->counters().track_written_pages > 0 && rt->Counters().pages_evicted > 0);
      },
      30);
  stop = true;
  writer.join();
  ASSERT_TRUE(migrated.ok()) << migrated.ToString();
  uint64_t sum = 0;
  for (size_t i = 0; i < kPages; ++i) sum += counters[i * (kPage / 8)].load();
  EXPECT_EQ(sum, written.load());
  const RuntimeCounters rc = rt->Counters();
  EXPECT_TRUE(settled) << "scanned " << rc.track_pages_scanned << ", written " << rc.track_written_pages
                       << ", evicted " << rc.pages_evicted;
  EXPECT_EQ(rc.track_mode, "pagemap_scan");
  EXPECT_GT(rc.track_pages_scanned, 0u);
  EXPECT_GT(rc.pages_evicted, 0u);
  ASSERT_TRUE(rt->Free(*p).ok());
}

TEST_F(RemoteTrackScan, PagesFaultBackWithTheirBytesAndReadOnlyOnesAreNotSentAgain) {
  // Rounds far apart: a window's clean check that meets a running scan is read again, and after
  // four such meetings the window is sent whole; with a scan every 5 ms on a busy machine that
  // happened to more than one window of the 512 pages.
  StartRuntime(500);
  if (Stopped()) return;
  Runtime* rt = rt_.get();
  Pager* pager = ImplOf(*rt)->pager();
  constexpr size_t kPages = 512;
  auto p = rt->Allocate(kPages * kPage, Tier::kDram);
  ASSERT_TRUE(p.ok());
  auto* base = static_cast<uint8_t*>(*p);
  for (size_t i = 0; i < kPages; ++i) FillPage(base + i * kPage, i);
  ASSERT_TRUE(rt->Migrate(base, kPages * kPage, Tier::kRemote).ok());
  EXPECT_EQ(pager->stats().pages_written, kPages);
  for (size_t i = 0; i < kPages; ++i) ASSERT_TRUE(CheckPage(base + i * kPage, i)) << i;  // read faults
  // Read only: evicted again, nearly all of them without a write (a window whose clean check met
  // a running scan four times over is sent whole, which is rare and never wrong).
  ASSERT_TRUE(rt->Migrate(base, kPages * kPage, Tier::kRemote).ok());
  const CounterValues after = pager->stats();
  EXPECT_GE(after.evictions_clean, kPages / 2);
  EXPECT_LE(after.pages_written, kPages + kPages / 2);
  // One page written: sent again, and every page reads back as it should.
  base[7 * kPage] ^= 0xFF;
  ASSERT_TRUE(rt->Migrate(base, kPages * kPage, Tier::kRemote).ok());
  EXPECT_GT(pager->stats().pages_written, after.pages_written);
  base[7 * kPage] ^= 0xFF;
  for (size_t i = 0; i < kPages; ++i) ASSERT_TRUE(CheckPage(base + i * kPage, i)) << i;
  ASSERT_TRUE(rt->Free(base).ok());
}

// The kernel shows an empty entry (a page never touched, or dropped) as written. Before the scan
// asked for pages with contents, each such page became a write sample: every untouched page of
// a fresh run, and every page a churning heap dropped, took a heat entry in the policy's tables,
// whose memory counts against the DRAM limit under the preload library (a preloaded sort at 90M
// ran with half its budget and faulted 17 times more). Only pages written with data are samples.
TEST_F(RemoteTrackScan, OnlyPagesWrittenWithDataAreWriteSamples) {
  StartRuntime();
  if (Stopped()) return;
  Runtime* rt = rt_.get();
  Migrator* m = ImplOf(*rt)->migrator();
  ASSERT_TRUE(m->running());
  const uint64_t written0 = m->counters().track_written_pages;
  // Waits until the scan has read `pages` more pages than when asked (bounded), so that every
  // live page was read at least once since.
  auto scan_past = [&](uint64_t pages) {
    const uint64_t from = m->counters().track_pages_scanned;
    return testing::WaitFor([&] { return m->counters().track_pages_scanned >= from + pages; }, 30);
  };
  // A run of 4096 pages with one page in 64 written: the rest were never touched.
  constexpr size_t kPages = 4096, kStride = 64, kChurnPages = 1024, kChurns = 6;
  auto p = rt->Allocate(kPages * kPage, Tier::kDram);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto* base = static_cast<char*>(*p);
  for (size_t i = 0; i < kPages; i += kStride) base[i * kPage] = 1;
  ASSERT_TRUE(scan_past(2 * (kPages + kChurnPages)));
  // Churn: runs written whole and freed (their pages dropped), each after the scan passed.
  for (size_t r = 0; r < kChurns; ++r) {
    auto q = rt->Allocate(kChurnPages * kPage, Tier::kDram);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    memset(*q, int(r + 1), kChurnPages * kPage);
    ASSERT_TRUE(scan_past(2 * (kPages + kChurnPages)));
    ASSERT_TRUE(rt->Free(*q).ok());
    ASSERT_TRUE(scan_past(2 * (kPages + kChurnPages)));
  }
  // Each page written once per allocation is a sample once, or twice where a scan passed it in
  // the middle of its memset (its later stores are a new write): a few pages per scan, far fewer
  // than a quarter of a run. The untouched and the dropped pages (10,176 here) are none.
  const uint64_t samples = m->counters().track_written_pages - written0;
  EXPECT_GE(samples, kPages / kStride);
  EXPECT_LE(samples, kPages / kStride + kChurns * kChurnPages + kChurnPages / 4);
  for (size_t i = 0; i < kPages; i += kStride) EXPECT_EQ(base[i * kPage], 1) << i;
  ASSERT_TRUE(rt->Free(*p).ok());
}

}  // namespace
}  // namespace tiermem

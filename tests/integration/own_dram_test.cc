// The preload library's runtime counts the DRAM it holds for itself (glibc's heap, which under
// the preload library serves the runtime's own threads alone) against TIERMEM_DRAM_LIMIT: the
// program's pages get the limit less that, so the process stays near its limit. A runtime that
// is not the preload library's (no runtime-thread hook) counts nothing: glibc's heap is then
// the program's own. Here the hook is installed by the test, as the preload library does, and
// a glibc block of the test's stands for the runtime's own heap. What the runtime maps for itself
// outside that heap (its buffers, its threads' stacks) counts too.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/os.h"
#include "base/own_memory.h"
#include "base/runtime_thread.h"
#include "base/tsan.h"
#include "remote_memd_fixture.h"
#include "test_util.h"
#include "tiermem/tiermem.hpp"

namespace tiermem {
namespace {

constexpr size_t kPage = 4096;
constexpr uint64_t kMiB = 1 << 20;

void NoHook() {}

// A runtime with `limit` bytes of DRAM and `memd` as its remote tier, sampling by remote faults.
StatusOr<std::unique_ptr<Runtime>> StartOnMemd(testing::MemdProcess& memd, uint64_t limit) {
  Options o;
  o.Set("dram_limit", limit);
  o.Set("remote", memd.url());
  o.Set("sample_mode", "faults");
  return Runtime::Start(o);
}

struct FillRun {
  uint64_t own_bytes = 0;   // RuntimeCounters::runtime_own_bytes after the fill
  uint64_t dram_after = 0;  // the DRAM tier's pages after the fill and a read pass (the most of three), in bytes
  uint64_t heap_bytes = 0;  // glibc's heap (os::LibcHeapBytes) as own_bytes was read
  bool started = false;     // Fill: its memd started
};

// 128 MiB placed on the remote tier, written and read back under a 64 MiB limit, then its first
// 52 MiB read again and again, with 24 MiB of glibc's heap held (and touched) throughout.
FillRun FillUnderLimit(testing::MemdProcess& memd) {
  FillRun out;
  const size_t held_bytes = 24 * kMiB;
  char* held = static_cast<char*>(malloc(held_bytes));
  memset(held, 1, held_bytes);
  auto rt = StartOnMemd(memd, 64 * kMiB);
  EXPECT_TRUE(rt.ok()) << rt.status().ToString();
  if (!rt.ok() || !(*rt)->HasTier(Tier::kRemote)) {
    free(held);
    return out;
  }
  const size_t bytes = 128 * kMiB;
  auto p = (*rt)->Allocate(bytes, Tier::kRemote);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  char* base = static_cast<char*>(*p);
  testing::FillPattern(base, bytes, 5);
  EXPECT_EQ(testing::CheckPattern(base, bytes, 5), SIZE_MAX) << "data lost";
  // Where DRAM stands after a pass over the whole allocation depends on how far relief ran
  // ahead of the faults (on a loaded machine, far): so a 52 MiB prefix, more than the limit less
  // the held heap and less than the whole limit, is read until a pass brings no page in. With
  // the whole limit that happens and DRAM holds the prefix; with 24 MiB counted it cannot.
  const size_t prefix = 52 * kMiB;
  auto read_prefix_until_quiet = [&] {
    for (int pass = 0; pass < 20; ++pass) {
      const RuntimeCounters before = (*rt)->Counters();
      EXPECT_EQ(testing::CheckPattern(base, prefix, 5), SIZE_MAX) << "data lost";
      const RuntimeCounters after = (*rt)->Counters();
      if (after.remote_faults == before.remote_faults && after.zero_fills == before.zero_fills) break;
    }
  };
  read_prefix_until_quiet();
  // Relief settles: two policy rounds pass in which it moves no page (however long a loaded
  // machine makes them). Then the prefix again until a pass brings nothing in, and DRAM is read
  // at once: a round that ran in the pause may have moved part of the idle prefix out (a
  // clean-clone CI run read 47.3 MiB).
  RuntimeCounters mark = (*rt)->Counters();
  const bool settled = testing::WaitFor([&] {
    const RuntimeCounters c = (*rt)->Counters();
    if (c.budget_relief_pages != mark.budget_relief_pages) mark = c;  // moved pages: count again
    return c.policy_rounds >= mark.policy_rounds + 2;
  }, 60);
  EXPECT_TRUE(settled) << "relief did not settle, or no policy round ran, in 60 s";
  // The most of three readings, each right after a pass that brought nothing in: on a loaded
  // machine a round between a pass and its reading can move part of the idle prefix out
  // (seen beside two busy loops and a parallel test run). The most is what a limit
  // less the held heap could never exceed, and what the whole limit lets DRAM reach.
  for (int reading = 0; reading < 3; ++reading) {
    read_prefix_until_quiet();
    for (const TierStats& t : (*rt)->Stats()) {
      if (t.tier == Tier::kDram) out.dram_after = std::max<uint64_t>(out.dram_after, t.allocated_bytes);
    }
  }
  out.own_bytes = (*rt)->Counters().runtime_own_bytes;
  out.heap_bytes = os::LibcHeapBytes();
  EXPECT_TRUE((*rt)->Free(base).ok());
  EXPECT_TRUE((*rt)->Stop().ok());
  free(held);
  return out;
}

// FillUnderLimit on a memd of its own, as the preload library's runtime (the runtime-thread hook
// installed) or as any other. `started` is false when memd did not start.
FillRun Fill(bool preloaded) {
  testing::MemdProcess memd;
  if (!memd.Start({"--capacity", "512M"})) {
    ADD_FAILURE() << memd.Log();
    return FillRun{};
  }
  if (preloaded) SetRuntimeThreadHook(&NoHook);
  FillRun r = FillUnderLimit(memd);
  SetRuntimeThreadHook(nullptr);
  r.started = true;
  return r;
}

TEST(OwnDram, ThePreloadLibrarysRuntimeCountsItsOwnHeapInTheDramLimit) {
  if (kSanitizedBuild) GTEST_SKIP() << "the sanitizer's allocator serves malloc, so glibc's heap (mallinfo2) holds nothing";
  const FillRun r = Fill(true);
  ASSERT_TRUE(r.started);
  EXPECT_GE(r.own_bytes, 24 * kMiB) << "the held heap was not counted";
  // The program's pages stay within the limit less what was counted (24 MiB and more), plus
  // relief's slack (4 MiB) and a fault batch (1.25 MiB): without the count they fill the limit.
  EXPECT_LE(r.dram_after, 64 * kMiB - 24 * kMiB + 4 * kMiB + 320 * kPage)
      << "DRAM holds " << r.dram_after / kMiB << " MiB with " << r.own_bytes / kMiB << " MiB counted";
  EXPECT_GT(r.dram_after, 16 * kMiB) << "the program kept at least the rest of its budget";
}

// Beside glibc's heap the runtime counts what it maps for itself as far as it is written: for
// 32768 pages made resident through the remote tier, the fault log and the relief ring (an entry
// of 8 bytes per page each: 256 KiB apiece), the region's metadata (20 bytes per page: 640 KiB),
// the fault handler's staging, its threads' stacks. Counting the heap alone falls short of that.
TEST(OwnDram, ThePreloadLibrarysRuntimeCountsItsOwnMappingsBesideItsHeap) {
  const FillRun r = Fill(true);
  ASSERT_TRUE(r.started);
  EXPECT_GE(r.own_bytes, r.heap_bytes + kMiB)
      << r.own_bytes / 1024 << " KiB counted, glibc's heap " << r.heap_bytes / 1024 << " KiB";
}

// The relief ring and the ahead ring are sized by the limit (ring_sizes.h): at 8 MiB they hold
// 8192 entries each (64 KiB), where at their fixed sizes a run that brought in more than 100,000
// pages counted 800 KiB of the relief ring alone. Beside them the ledger holds the fault log
// (65,536 entries at every limit: 512 KiB), the fault handler's staging (at most 257 pages,
// 1028 KiB) and nothing else here (no coded pages, no tiered heap).
TEST(OwnDram, TheRingsAndTheFaultLogAtASmallLimitTakeLittleOfIt) {
  testing::MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "512M"})) << memd.Log();
  const uint64_t before = OwnBufferBytes();
  auto rt = StartOnMemd(memd, 8 * kMiB);
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  ASSERT_TRUE((*rt)->HasTier(Tier::kRemote));
  const size_t bytes = 64 * kMiB;
  auto p = (*rt)->Allocate(bytes, Tier::kRemote);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  char* base = static_cast<char*>(*p);
  testing::FillPattern(base, bytes, 9);
  // Passes over the whole allocation until more than 100,000 pages have come in: more than the
  // fault log's fixed 65,536 entries, so that it would have been written whole.
  uint64_t in = 0;
  for (int pass = 0; pass < 12 && in <= 100000; ++pass) {
    EXPECT_EQ(testing::CheckPattern(base, bytes, 9), SIZE_MAX) << "data lost";
    const RuntimeCounters c = (*rt)->Counters();
    in = c.remote_faults + c.zero_fills + c.pages_prefetched + c.pages_fetched;
  }
  EXPECT_GT(in, 100000u) << "too few pages came in to fill the rings";
  const uint64_t counted = OwnBufferBytes() - before;
  const uint64_t staging = 257 * kPage;
  const uint64_t fault_log = 65536 * 8;
  EXPECT_LE(counted, staging + fault_log + 2 * 64 * 1024)
      << counted / 1024 << " KiB of buffers counted at an 8 MiB limit after " << in << " pages came in";
  EXPECT_TRUE((*rt)->Free(base).ok());
  EXPECT_TRUE((*rt)->Stop().ok());
}

TEST(OwnDram, AnyOtherRuntimeCountsNothing) {
  const FillRun r = Fill(false);
  ASSERT_TRUE(r.started);
  EXPECT_EQ(r.own_bytes, 0u);
  EXPECT_GT(r.dram_after, 48 * kMiB) << "the program's pages had the whole limit";
}

}  // namespace
}  // namespace tiermem

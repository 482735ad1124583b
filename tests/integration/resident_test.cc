// DRAM's limit kept against resident pages with live data (docs/tiering.md, "What DRAM counts"):
// the heap's free pages are never sent to memd nor faulted back from it, and allocation churn
// under a limit of 3x its live set makes no remote fault. A memd on loopback is the remote tier.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "base/tsan.h"
#include "runtime/core/runtime_impl.h"
#include "tests/integration/remote_memd_fixture.h"
#include "tests/integration/test_util.h"
#include "tiermem/heap.hpp"
#include "tiermem/tiermem.hpp"

namespace tiermem {
namespace {

constexpr size_t kPage = 4096;

class Resident : public ::testing::Test {
 protected:
  // A runtime with `limit` of DRAM and the memd as its remote tier; no access sampling (by
  // default), so only budget relief moves pages.
  void Start(const char* limit, const char* sample_mode = "off") {
    ASSERT_TRUE(memd_.Start({"--capacity", "256M", "--no-rdma"}));
    Options o;
    o.Set("remote", memd_.url()).Set("remote_timeout_ms", 5000).Set("dram_limit", limit);
    o.Set("log", "warn").Set("sample_mode", sample_mode);
    auto rt = Runtime::Start(o);
    ASSERT_TRUE(rt.ok()) << rt.status().ToString();
    rt_ = std::move(*rt);
  }
  void TearDown() override {
    heap_.reset();
    rt_.reset();
  }
  const PageRecord& Record(const void* p) {
    Region* r = ImplOf(*rt_)->RegionOf(p);
    EXPECT_NE(r, nullptr);
    return r->record(r->PageIndex(p));
  }
  testing::MemdProcess memd_;
  std::unique_ptr<Runtime> rt_;
  std::unique_ptr<Heap> heap_;
};

// Large blocks of a heap on the remote tier are written (each page a zero fill by the pager,
// then in relief's ring) and freed (the runtime takes them back, or the run cache keeps them). Then DRAM goes over its limit with a run written page by
// page, and relief evicts from the ring's old end, where the freed pages were queued first: none
// of them may be sent out (a free page held by the heap has no data worth a write), and the
// blocks allocated again are not faulted back from memd. (Free small blocks that wait in the
// heap's thread caches and transfer lists, in spans that still hold live blocks, are not known
// free page by page: not covered here.)
TEST_F(Resident, PagesTheHeapFreedAreNeitherEvictedNorFaultedBack) {
  ASSERT_NO_FATAL_FAILURE(Start("16M"));
  auto h = Heap::Create(*rt_, Tier::kRemote);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  heap_ = std::move(*h);
  constexpr size_t kBlock = 256 * 1024, kBlocks = 16;  // 4 MiB of page runs
  std::vector<void*> blocks;
  for (size_t i = 0; i < kBlocks; ++i) {
    blocks.push_back(heap_->Allocate(kBlock));
    ASSERT_NE(blocks.back(), nullptr);
    testing::FillPattern(blocks.back(), kBlock, i);
  }
  // The run that will press DRAM is placed first, so that it cannot take the freed runs' place.
  constexpr size_t kOver = 64u << 20;
  auto big = rt_->Allocate(kOver, Tier::kRemote);
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  auto* b = static_cast<char*>(*big);
  for (void* p : blocks) heap_->Free(p);
  const uint64_t relief0 = rt_->Counters().budget_relief_pages;
  for (size_t off = 0; off < kOver; off += kPage) memset(b + off, 0x5a, kPage);
  // Relief has made room and come to rest: DRAM within its limit, no eviction in flight, and
  // no page relieved over five polls in a row. (While it runs it may evict the blocks handed
  // out again below: they are live pages then.)
  uint64_t last = 0;
  int still = 0;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        const uint64_t now = rt_->Counters().budget_relief_pages;
        still = now == last ? still + 1 : 0;
        last = now;
        return now >= relief0 + (8u << 20) / kPage && still >= 5 &&
               ImplOf(*rt_)->TierPages(Tier::kDram) * kPage <= (16u << 20) && ImplOf(*rt_)->EvictionsPending() == 0;
      },
      60))
      << "relief evicted " << rt_->Counters().budget_relief_pages - relief0 << " pages";

  size_t sent = 0;
  for (void* p : blocks) {
    for (size_t off = 0; off < kBlock; off += kPage) {
      const PageRecord& rec = Record(static_cast<char*>(p) + off);
      sent += rec.state.load() == static_cast<uint8_t>(PageState::kRemote) || rec.remote_slot.load() != 0;
    }
  }
  EXPECT_EQ(sent, 0u) << "pages of freed blocks on memd";

  const uint64_t faults0 = rt_->Counters().remote_faults;
  std::vector<void*> again;
  for (size_t i = 0; i < kBlocks; ++i) {
    again.push_back(heap_->Allocate(kBlock));
    ASSERT_NE(again.back(), nullptr);
    testing::FillPattern(again.back(), kBlock, i + kBlocks);
  }
  EXPECT_EQ(rt_->Counters().remote_faults, faults0) << "blocks handed out again were read from memd";
  for (size_t i = 0; i < kBlocks; ++i) {
    EXPECT_EQ(testing::CheckPattern(again[i], kBlock, i + kBlocks), SIZE_MAX) << i;
    heap_->Free(again[i]);
  }
  for (size_t off = 0; off < kOver; off += kPage) {
    ASSERT_EQ(b[off], 0x5a) << off;  // the evicted pages come back intact
  }
  ASSERT_TRUE(rt_->Free(b).ok());
}

// Allocation churn (blocks of 16 B to 32 KiB replaced at random, each written whole and checked
// before it is freed, and now and then a 256 KiB block) with at most 8 MiB live, under a DRAM
// limit of 3x that: the heap's free and untouched pages do not count, so nothing is evicted and
// nothing is faulted back.
TEST_F(Resident, ChurnUnderThreeTimesTheLiveSetMakesNoRemoteFault) {
  ASSERT_NO_FATAL_FAILURE(Start("24M"));
  auto h = Heap::Create(*rt_, Tier::kAuto);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  heap_ = std::move(*h);
  constexpr size_t kWindow = 240, kOps = 100000;
  struct Block {
    void* p = nullptr;
    size_t n = 0;
    uint64_t tag = 0;
  };
  std::vector<Block> win(kWindow);
  uint64_t s = 88172645463325252ull, peak_live = 0, live = 0;
  for (size_t i = 0; i < kOps; ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    Block& k = win[s % kWindow];
    if (k.p != nullptr) {
      ASSERT_EQ(testing::CheckPattern(k.p, k.n, k.tag), SIZE_MAX) << "op " << i;
      heap_->Free(k.p);
      live -= k.n;
    }
    const uint64_t x = s >> 16;
    k.n = x % 500 == 0 ? 256 * 1024 : 16 + (x >> 8) % (32 * 1024 - 16) / 8 * 8;
    k.tag = i;
    k.p = heap_->Allocate(k.n);
    ASSERT_NE(k.p, nullptr);
    testing::FillPattern(k.p, k.n, k.tag);
    live += k.n;
    peak_live = std::max(peak_live, live);
  }
  for (Block& k : win) heap_->Free(k.p);
  EXPECT_LE(peak_live, 8u << 20);  // the live set the limit is 3x of
  const RuntimeCounters c = rt_->Counters();
  EXPECT_EQ(c.remote_faults, 0u);
  EXPECT_EQ(c.pages_evicted, 0u);
  EXPECT_EQ(c.budget_relief_pages, 0u);
}

// Large blocks (256-512 KiB) of which a program touches only the first bytes (as the malloc
// workload `mixed` does), replaced at random: each fresh run counts whole in DRAM when it is
// handed out, so DRAM's count runs far past its limit although a page of each is resident.
// Neither relief nor the plan may evict for pages nobody looked at: the count is taken first
// (UnseenPages), and nothing is evicted nor faulted back.
TEST_F(Resident, LargeBlocksTouchedOnOnePageEvictNothing) {
  // Room for a fresh run beyond DRAM's count is checked against the process's resident memory
  // (UnseenRoom), which a sanitizer's shadow memory puts past this test's 16M on its own.
  if (kSanitizedBuild) GTEST_SKIP() << "the process's resident memory includes the sanitizer's shadow memory";
  ASSERT_NO_FATAL_FAILURE(Start("16M"));
  auto h = Heap::Create(*rt_, Tier::kAuto);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  heap_ = std::move(*h);
  constexpr size_t kWindow = 96, kOps = 20000;  // 96 x 384 KiB on average: 36 MiB asked for
  std::vector<std::pair<void*, uint64_t>> win(kWindow, {nullptr, 0});
  uint64_t s = 2463534242ull;
  size_t wrong = 0;
  for (size_t i = 0; i < kOps; ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    auto& [p, tag] = win[s % kWindow];
    if (p != nullptr) {
      wrong += memcmp(p, &tag, sizeof(tag)) != 0;
      heap_->Free(p);
    }
    p = heap_->Allocate(256 * 1024 + (s >> 20) % (256 * 1024));
    ASSERT_NE(p, nullptr);
    tag = s;
    memcpy(p, &tag, sizeof(tag));
  }
  for (auto& [p, tag] : win) {
    wrong += memcmp(p, &tag, sizeof(tag)) != 0;
    heap_->Free(p);
  }
  EXPECT_EQ(wrong, 0u);
  const RuntimeCounters c = rt_->Counters();
  EXPECT_EQ(c.remote_faults, 0u);
  EXPECT_EQ(c.pages_evicted, 0u);
  EXPECT_EQ(c.zero_fills, 0u) << "blocks went to the remote tier for room DRAM had";
}

// The stats say what DRAM's count leaves out: allocated pages never touched show in
// dram_untouched_bytes after a resident count, and leave it once written.
TEST_F(Resident, UntouchedPagesShowInTheStatsAndLeaveThemWhenWritten) {
  ASSERT_NO_FATAL_FAILURE(Start("64M"));
  constexpr size_t kBytes = 8u << 20, kHalf = kBytes / 2;
  auto p = rt_->Allocate(kBytes, Tier::kDram);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto* b = static_cast<char*>(*p);
  memset(b, 1, kHalf);
  // Two counts after the allocation: the second began after the first half was written.
  const uint64_t counts0 = rt_->Counters().resident_counts;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        const RuntimeCounters c = rt_->Counters();
        return c.resident_counts >= counts0 + 2 && c.dram_untouched_bytes >= kHalf;
      },
      60))
      << "untouched " << rt_->Counters().dram_untouched_bytes << " after "
      << rt_->Counters().resident_counts - counts0 << " counts";
  const uint64_t untouched = rt_->Counters().dram_untouched_bytes;
  memset(b + kHalf, 2, kHalf);
  const uint64_t counts1 = rt_->Counters().resident_counts;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        const RuntimeCounters c = rt_->Counters();
        return c.resident_counts >= counts1 + 2 && c.dram_untouched_bytes + kHalf <= untouched;
      },
      60))
      << "untouched " << rt_->Counters().dram_untouched_bytes << ", was " << untouched;
  EXPECT_GT(rt_->Counters().resident_count_ns, 0u);
  ASSERT_TRUE(rt_->Free(b).ok());
}

// A run larger than DRAM's room goes to DRAM untouched only as far as the process has room
// (no zero fill through the pager there); the rest is the remote tier's, zero-filled by the
// pager at its first touch, so a program that writes all of it is held to its limit as it
// goes (before, a run untouched whole let a fast writer run far past the limit until the next
// count). Once written, DRAM is within the limit and its slack; every byte reads back.
TEST_F(Resident, ARunPastTheRoomIsUntouchedAsFarAsTheRoomAndZeroFilledPastIt) {
  ASSERT_NO_FATAL_FAILURE(Start("16M"));
  constexpr size_t kBytes = 64u << 20, kWritten = 40u << 20;
  auto p = rt_->Allocate(kBytes, Tier::kAuto);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto* b = static_cast<char*>(*p);
  size_t head = 0, tail = 0;
  for (size_t off = 0; off < kBytes; off += kPage) {
    const PageRecord& r = Record(b + off);
    if (r.tier.load() == kUntouchedTier && r.state.load() == static_cast<uint8_t>(PageState::kLocal)) {
      ASSERT_EQ(tail, 0u) << "an untouched page after the remote tail began, at " << off;
      ++head;
    } else {
      ASSERT_EQ(r.tier.load(), static_cast<uint8_t>(Tier::kRemote)) << "page at " << off;
      ASSERT_EQ(r.state.load(), static_cast<uint8_t>(PageState::kRemote)) << "page at " << off;
      ++tail;
    }
  }
  EXPECT_LE(head * kPage, uint64_t{16} << 20) << "more untouched than the limit";
  EXPECT_GT(tail, 0u);
  auto dram = [&] { return rt_->Stats()[static_cast<int>(Tier::kDram)].allocated_bytes; };
  EXPECT_LT(dram(), uint64_t{16} << 20) << "the untouched part counted in DRAM";
  for (size_t off = 0; off < kWritten; off += kPage) memset(b + off, static_cast<int>(off / kPage % 251) + 1, kPage);
  // The tail's pages written went through the pager, each counted at its first touch.
  EXPECT_GE(rt_->Counters().zero_fills, kWritten / kPage - std::min(head, kWritten / kPage));
  // Relief keeps the limit: DRAM back within it and its slack (4 MiB), pages sent out.
  ASSERT_TRUE(testing::WaitFor(
      [&] { return dram() <= (uint64_t{20} << 20) && rt_->Counters().pages_evicted > 0; }, 60))
      << "DRAM " << dram() << " bytes, " << rt_->Counters().pages_evicted << " evicted";
  size_t wrong = 0;
  for (size_t off = 0; off < kWritten; off += kPage) {
    const char want = static_cast<char>(off / kPage % 251 + 1);
    wrong += b[off] != want || b[off + kPage - 1] != want;
  }
  EXPECT_EQ(wrong, 0u) << "pages read back wrong";
  ASSERT_TRUE(rt_->Free(b).ok());
}

// A large run the program touches in part: once a resident count has found a 2 MiB chunk with
// no page touched (Region::Quiet), the policy's rounds pass over it whole instead of reading
// its 512 records; a chunk written later is read, and listed, again after the next count.
TEST_F(Resident, RoundsPassOverChunksNobodyTouched) {
  ASSERT_NO_FATAL_FAILURE(Start("24M", "faults"));  // policy rounds (remote faults their only samples)
  constexpr size_t kBytes = 64u << 20, kWritten = 19u << 20, kChunk = 2u << 20;
  constexpr uint64_t kRunPages = kBytes / kPage;
  auto p = rt_->Allocate(kBytes, Tier::kAuto);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto* b = static_cast<char*>(*p);
  memset(b, 7, kWritten);  // above three quarters of the budget: the rounds do not idle
  // Records read per round, over rounds that began after two more counts.
  auto per_round = [&](const char* when) -> double {
    const uint64_t counts0 = rt_->Counters().resident_counts;
    EXPECT_TRUE(testing::WaitFor([&] { return rt_->Counters().resident_counts >= counts0 + 2; }, 60))
        << "no resident count " << when;
    const RuntimeCounters c0 = rt_->Counters();
    EXPECT_TRUE(testing::WaitFor([&] { return rt_->Counters().policy_rounds >= c0.policy_rounds + 5; }, 60))
        << "no policy round " << when;
    const RuntimeCounters c1 = rt_->Counters();
    return double(c1.policy_records_read - c0.policy_records_read) / double(c1.policy_rounds - c0.policy_rounds);
  };
  const double part = per_round("after the first write");
  // 10 chunks hold written pages (5,120 records), 22 are quiet (a record each).
  EXPECT_LT(part, kRunPages / 2.0) << "the rounds read the untouched chunks page by page";
  EXPECT_GE(part, kWritten / kPage) << "the rounds did not read the written pages";
  memset(b + 20 * kChunk, 9, kChunk);  // a quiet chunk written: its pages are the program's now
  const double more = per_round("after the second write");
  EXPECT_GE(more, part + 0.75 * (kChunk / kPage)) << "the chunk written later is still passed over";
  EXPECT_EQ(rt_->Counters().remote_faults, 0u);
  ASSERT_TRUE(rt_->Free(b).ok());
}

// Pages counted at allocation and freed before the next count leave the unseen estimate with
// DRAM's count: otherwise the estimate, subtracted from DRAM's count between counts, would hide
// pages the program does hold. First a count learns that such pages go untouched (runs with one
// page written); then a run counted at allocation is freed at once, and the estimate must not
// exceed what DRAM's count grew since the last count.
TEST_F(Resident, PagesCountedAtAllocationAndFreedLeaveTheUnseenEstimate) {
  ASSERT_NO_FATAL_FAILURE(Start("64M"));
  Runtime::Impl* impl = ImplOf(*rt_);
  constexpr size_t kRun = 2u << 20, kRuns = 4;  // 512 pages a run, one of them written
  std::vector<void*> kept;
  for (size_t i = 0; i < kRuns; ++i) {
    auto p = rt_->Allocate(kRun, Tier::kDram);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    static_cast<char*>(*p)[0] = 1;
    kept.push_back(*p);
  }
  // A count after the allocations (the policy thread counts in the background) learns the share.
  const uint64_t counts0 = rt_->Counters().resident_counts;
  ASSERT_TRUE(testing::WaitFor([&] { return rt_->Counters().resident_counts >= counts0 + 2; }, 60));
  // A run counted at allocation is unseen until the next count; freed, it must leave the
  // estimate. Tried until no count came between the allocation and the first look (a count
  // takes the unseen pages in at once), a bounded number of times.
  bool looked = false;
  for (int attempt = 0; attempt < 200 && !looked; ++attempt) {
    auto p = rt_->Allocate(kRun, Tier::kDram);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    const uint64_t unseen = impl->UnseenPages();
    ASSERT_TRUE(rt_->Free(*p).ok());
    const uint64_t after = impl->UnseenPages();
    if (unseen < kRun / kPage / 2) continue;  // a count came first, or the share is not learned
    looked = true;
    EXPECT_LE(after, uint64_t{16}) << "the freed run's pages stayed in the unseen estimate (" << unseen
                                   << " before the free)";
  }
  EXPECT_TRUE(looked) << "no allocation was ever seen unseen";
  for (void* p : kept) ASSERT_TRUE(rt_->Free(p).ok());
}

}  // namespace
}  // namespace tiermem

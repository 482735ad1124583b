// The tiered heap through tiermem::Heap and the entry points: size classes, alignment, realloc,
// calloc, large blocks, cross-thread frees, thread exit, usage accounting.
#include <gtest/gtest.h>
#include <errno.h>
#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "allocator/entry_points.h"
#include "allocator/heap_internal.h"
#include "allocator/size_classes.h"
#include "allocator/span_map.h"
#include "tiermem/heap.hpp"
#include "tiermem/tiermem.hpp"

namespace tiermem {
namespace {

using alloc::ClassSize;
using alloc::kMaxSmall;
using alloc::kNumClasses;
using alloc::SizeClass;

TEST(HeapSizeClassTest, EverySizeMapsToTheSmallestClassThatHoldsIt) {
  for (size_t n = 0; n <= kMaxSmall; ++n) {
    int c = SizeClass(n);
    ASSERT_GE(c, 0);
    ASSERT_LT(c, kNumClasses);
    ASSERT_GE(ClassSize(c), n == 0 ? 1 : n) << n;
    if (c > 0) {
      ASSERT_LT(ClassSize(c - 1), n) << n;
    }
  }
  for (int c = 1; c < kNumClasses; ++c) {
    EXPECT_EQ(ClassSize(c) % 16, 0u);
    EXPECT_GT(ClassSize(c), ClassSize(c - 1));
    EXPECT_LE(ClassSize(c) - ClassSize(c - 1), ClassSize(c - 1) / 4 + 16) << c;  // <= 25% waste
  }
  for (size_t p = 16; p <= kMaxSmall; p *= 2) {
    EXPECT_EQ(ClassSize(SizeClass(p)), p);
  }
}

class HeapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto rt = Runtime::Start();
    ASSERT_TRUE(rt.ok()) << rt.status().ToString();
    rt_ = std::move(*rt);
    auto h = Heap::Create(*rt_, Tier::kDram);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    heap_ = std::move(*h);
  }
  void TearDown() override {
    heap_.reset();
    if (rt_) {
      EXPECT_TRUE(rt_->Stop().ok());
    }
  }
  alloc::HeapCore& core() { return *alloc::CoreOf(*heap_); }

  std::unique_ptr<Runtime> rt_;
  std::unique_ptr<Heap> heap_;
};

TEST_F(HeapTest, SmallBlocksAreDistinctWritableAndOwned) {
  std::set<void*> seen;
  std::vector<void*> blocks;
  for (size_t n : {0, 1, 8, 16, 17, 100, 1000, 4096, 5000, 65536, 131072}) {
    for (int i = 0; i < 50; ++i) {
      void* p = heap_->Allocate(n);
      ASSERT_NE(p, nullptr);
      EXPECT_TRUE(seen.insert(p).second) << "duplicate block for size " << n;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 16, 0u);
      EXPECT_GE(heap_->UsableSize(p), n);
      EXPECT_TRUE(heap_->Owns(p));
      memset(p, 0xab, n);
      blocks.push_back(p);
    }
  }
  for (void* p : blocks) heap_->Free(p);
  int local = 0;
  EXPECT_FALSE(heap_->Owns(&local));
  EXPECT_EQ(heap_->UsableSize(&local), 0u);
  heap_->Free(nullptr);
}

TEST_F(HeapTest, AFreshClassFaultsInOnlyTheBlocksItHandsOut) {
  // The first 4 KiB block of a fresh class: the refill links at most a page of new objects
  // (linking writes to them), so the rest of its 64 KiB span stays untouched.
  // With transparent huge pages "always", the first touch brings in a whole 2 MiB page.
  FILE* f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  char thp[128] = "";
  if (f != nullptr) {
    if (fgets(thp, sizeof(thp), f) == nullptr) thp[0] = '\0';
    fclose(f);
  }
  if (strstr(thp, "[always]") != nullptr) GTEST_SKIP() << "transparent_hugepage is 'always'";
  void* p = heap_->Allocate(4096);
  ASSERT_NE(p, nullptr);
  const size_t page = 4096, granule = 64 * 1024;
  auto* span = reinterpret_cast<unsigned char*>(reinterpret_cast<uintptr_t>(p) & ~(granule - 1));
  unsigned char vec[granule / page];
  ASSERT_EQ(mincore(span, granule, vec), 0) << strerror(errno);
  int resident = 0;
  for (unsigned char v : vec) resident += v & 1;
  EXPECT_LE(resident, 2) << "pages of the span faulted in by one 4 KiB malloc";
  heap_->Free(p);
}

TEST_F(HeapTest, ZeroSizeGivesUniquePointers) {
  void* a = heap_->Allocate(0);
  void* b = heap_->Allocate(0);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  heap_->Free(a);
  heap_->Free(b);
}

TEST_F(HeapTest, LargeBlocksArePageRunsAndGoBack) {
  const size_t n = 3 * 1024 * 1024 + 5;
  char* p = static_cast<char*>(heap_->Allocate(n));
  ASSERT_NE(p, nullptr);
  EXPECT_GE(heap_->UsableSize(p), n);
  EXPECT_TRUE(heap_->Owns(p));
  memset(p, 1, n);
  EXPECT_GE(heap_->Usage().large_bytes, n);
  EXPECT_EQ(heap_->Usage().large_count, 1u);
  heap_->Free(p);
  EXPECT_EQ(heap_->Usage().large_bytes, 0u);
}

TEST_F(HeapTest, AlignedAllocationsHonourAlignmentAndFreeCleanly) {
  for (size_t align = 16; align <= (4u << 20); align *= 2) {
    for (size_t n : {1ul, align / 2 + 1, align, 3 * align + 7, 200000ul}) {
      void* p = heap_->AllocateAligned(align, n);
      ASSERT_NE(p, nullptr) << align << " " << n;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u) << align << " " << n;
      EXPECT_GE(heap_->UsableSize(p), n);
      memset(p, 7, n);
      heap_->Free(p);
    }
  }
  errno = 0;
  EXPECT_EQ(heap_->AllocateAligned(24, 10), nullptr);
  EXPECT_EQ(errno, EINVAL);
  void* p = nullptr;
  EXPECT_EQ(alloc::entry::PosixMemalign(core(), &p, 4, 10), EINVAL);
  EXPECT_EQ(alloc::entry::PosixMemalign(core(), &p, 48, 10), EINVAL);
  ASSERT_EQ(alloc::entry::PosixMemalign(core(), &p, 256, 10), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
  heap_->Free(p);
  void* v = alloc::entry::Valloc(core(), 10);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v) % 4096, 0u);
  void* pv = alloc::entry::Pvalloc(core(), 0);
  ASSERT_NE(pv, nullptr);
  EXPECT_GE(heap_->UsableSize(pv), 4096u);
  void* m = alloc::entry::Memalign(core(), 48, 10);  // rounded up to 64, as glibc does
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m) % 64, 0u);
  heap_->Free(v);
  heap_->Free(pv);
  heap_->Free(m);
}

// Free takes a block by the pointer malloc returned, as is; a span rounds a freed pointer down to
// its object's start only once it has handed out an aligned block (Span::aligned).
TEST_F(HeapTest, OnlySpansThatHandedOutAlignedBlocksRoundAFreedPointer) {
  void* plain = heap_->Allocate(3000);  // class 3072, which nothing else here uses
  ASSERT_NE(plain, nullptr);
  alloc::Span* span = alloc::GlobalSpanMap().Lookup(plain);
  ASSERT_NE(span, nullptr);
  EXPECT_FALSE(span->aligned.load());
  EXPECT_EQ(span->local_list.load(), nullptr);  // not the primary heap: no primary fast path
  heap_->Free(plain);
  EXPECT_EQ(heap_->Allocate(3000), plain);  // freed as it was, handed out again
  heap_->Free(plain);

  // 1 KiB-aligned blocks of up to 1 KiB come from class 1024.
  void* a = heap_->AllocateAligned(1024, 1000);
  ASSERT_NE(a, nullptr);
  alloc::Span* aspan = alloc::GlobalSpanMap().Lookup(a);
  ASSERT_NE(aspan, nullptr);
  EXPECT_TRUE(aspan->aligned.load());
  heap_->Free(static_cast<char*>(a) + 100);  // a pointer inside the block (FreeSmall)
  EXPECT_EQ(heap_->AllocateAligned(1024, 1000), a);  // the whole block came back
  alloc::HeapCore::FreeInSpan(aspan, static_cast<char*>(a) + 1023);  // the thread-cache path
  void* again = heap_->Allocate(1024);
  EXPECT_EQ(again, a);
  EXPECT_EQ(heap_->UsableSize(again), 1024u);
  heap_->Free(again);
}

TEST_F(HeapTest, ReallocKeepsContentsAcrossClassesAndIntoPageRuns) {
  char* p = static_cast<char*>(heap_->Allocate(1));
  p[0] = 0;
  size_t n = 1;
  for (size_t next : {7ul, 33ul, 500ul, 4100ul, 70000ul, 140000ul, 1ul << 21, 5000ul, 10ul}) {
    p = static_cast<char*>(heap_->Reallocate(p, next));
    ASSERT_NE(p, nullptr);
    for (size_t i = 0; i < std::min(n, next); ++i) ASSERT_EQ(p[i], static_cast<char>(i * 7)) << i;
    for (size_t i = 0; i < next; ++i) p[i] = static_cast<char>(i * 7);
    n = next;
  }
  EXPECT_EQ(heap_->Reallocate(p, 0), nullptr);  // glibc: frees
  void* q = heap_->Reallocate(nullptr, 10);
  ASSERT_NE(q, nullptr);
  heap_->Free(q);
  errno = 0;
  EXPECT_EQ(alloc::entry::ReallocArray(core(), nullptr, SIZE_MAX / 2, 3), nullptr);
  EXPECT_EQ(errno, ENOMEM);
}

TEST_F(HeapTest, CallocZeroesReusedMemoryAndChecksOverflow) {
  for (size_t n : {24ul, 3000ul, 200000ul}) {
    char* p = static_cast<char*>(heap_->Allocate(n));
    memset(p, 0xff, n);
    heap_->Free(p);
    char* z = static_cast<char*>(heap_->AllocateZeroed(1, n));
    ASSERT_NE(z, nullptr);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(z[i], 0) << n << " " << i;
    heap_->Free(z);
  }
  errno = 0;
  EXPECT_EQ(heap_->AllocateZeroed(SIZE_MAX / 2, 4), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(heap_->Allocate(SIZE_MAX - 10), nullptr);
  EXPECT_EQ(errno, ENOMEM);
}

TEST_F(HeapTest, AFreedPageRunIsReusedForTheNextLargeBlock) {
  const size_t n = 300000;
  void* p = heap_->Allocate(n);
  ASSERT_NE(p, nullptr);
  memset(p, 0x5a, n);
  heap_->Free(p);
  EXPECT_EQ(heap_->Usage().large_bytes, 0u);
  EXPECT_EQ(heap_->Usage().large_count, 0u);
  void* q = heap_->Allocate(n);
  EXPECT_EQ(q, p);
  EXPECT_GE(heap_->UsableSize(q), n);
  heap_->Free(q);
  // calloc on the reused run still gives zeroes.
  char* z = static_cast<char*>(heap_->AllocateZeroed(n, 1));
  ASSERT_NE(z, nullptr);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(z[i], 0) << i;
  heap_->Free(z);
}

TEST_F(HeapTest, BlocksOfVaryingSizeReuseTheLargestFreedRun) {
  constexpr size_t kMiB = size_t{1} << 20;
  // One live block at a time, growing: each miss gives back the smaller runs cached before it.
  void* runs[3];
  for (size_t i = 0; i < 3; ++i) {
    runs[i] = heap_->Allocate((i + 2) * kMiB);
    ASSERT_NE(runs[i], nullptr);
    memset(runs[i], static_cast<int>(i + 1), (i + 2) * kMiB);
    heap_->Free(runs[i]);
  }
  // Smaller blocks now take the 4 MiB run, pages and all, rather than fresh pages beside it.
  for (size_t mib : {1, 3, 2}) {
    void* q = heap_->Allocate(mib * kMiB);
    EXPECT_EQ(q, runs[2]) << mib;
    EXPECT_EQ(heap_->Usage().large_bytes, 4 * kMiB) << mib;
    EXPECT_GE(heap_->UsableSize(q), 4 * kMiB) << mib;
    heap_->Free(q);
  }
  // The 2 and 3 MiB runs went back to the runtime at the misses: a 2 MiB request is served by
  // the 4 MiB run still, not by a cached 2 MiB one.
  void* a = heap_->Allocate(2 * kMiB);
  void* b = heap_->Allocate(2 * kMiB);
  EXPECT_EQ(a, runs[2]);
  EXPECT_EQ(heap_->Usage().large_bytes, 6 * kMiB);
  heap_->Free(a);
  heap_->Free(b);
}

TEST_F(HeapTest, ReallocGrowthIntoPageRunsMovesRarelyAndKeepsContents) {
  char* b = nullptr;
  size_t have = 0;
  int moves_past_small = 0;
  for (size_t n = 16; n <= (4u << 20); n += n / 8 + 1) {
    char* q = static_cast<char*>(heap_->Reallocate(b, n));
    ASSERT_NE(q, nullptr) << n;
    if (q != b && have > kMaxSmall) {
      ++moves_past_small;
    }
    for (size_t i = 0; i < have; ++i) ASSERT_EQ(q[i], static_cast<char>(i * 7)) << n << " " << i;
    for (size_t i = have; i < n; ++i) q[i] = static_cast<char>(i * 7);
    b = q;
    have = n;
  }
  // 128 KiB -> 1 MiB of room, then doubling: 1 -> 2 -> 4 MiB.
  EXPECT_LE(moves_past_small, 2);
  heap_->Free(b);
}

TEST_F(HeapTest, BlocksFreedByOtherThreadsAreReused) {
  constexpr int kN = 20000;
  std::vector<void*> blocks(kN);
  for (int round = 0; round < 5; ++round) {
    std::thread producer([&] {
      for (int i = 0; i < kN; ++i) {
        blocks[i] = heap_->Allocate(48);
        memset(blocks[i], i & 0xff, 48);
      }
    });
    producer.join();
    std::thread consumer([&] {
      for (int i = 0; i < kN; ++i) {
        auto* b = static_cast<unsigned char*>(blocks[i]);
        for (int j = 0; j < 48; ++j) ASSERT_EQ(b[j], i & 0xff);
        heap_->Free(blocks[i]);
      }
    });
    consumer.join();
  }
  // Five rounds of 20000 x 48 bytes fit in the first spans again: memory was reused, not grown.
  EXPECT_LE(heap_->Usage().span_bytes, 4u << 20);
}

TEST_F(HeapTest, AThreadThatOnlyFreesPassesBlocksBackWithinABatch) {
  // A consumer thread frees what this thread allocated and never allocates that class itself:
  // it keeps at most half a batch, so most of the blocks come back to this thread's next
  // allocations instead of fresh memory. (With the two-batch limit of an allocating thread, the
  // consumer held all 2 x batch blocks and this thread carved new ones.) The consumer stays
  // alive until the end: its exit would flush its cache and hide the difference.
  const size_t kSize = 48;
  const size_t batch = alloc::BatchSize(SizeClass(kSize));
  std::vector<void*> first(2 * batch);
  for (void*& p : first) {
    p = heap_->Allocate(kSize);
    ASSERT_NE(p, nullptr);
  }
  std::atomic<int> stage{0};
  std::thread consumer([&] {
    for (void* p : first) heap_->Free(p);
    stage.store(1);
    while (stage.load() != 2) std::this_thread::yield();
  });
  while (stage.load() != 1) std::this_thread::yield();
  const std::set<void*> freed(first.begin(), first.end());
  std::vector<void*> second(2 * batch);
  size_t reused = 0;
  for (void*& p : second) {
    p = heap_->Allocate(kSize);
    ASSERT_NE(p, nullptr);
    reused += freed.count(p);
  }
  stage.store(2);
  consumer.join();
  EXPECT_GE(reused, batch) << "blocks of " << 2 * batch << " freed by the consumer came back";
  for (void* p : second) heap_->Free(p);
}

TEST_F(HeapTest, ThreadExitReturnsItsCacheAndEmptySpansGoBack) {
  for (int t = 0; t < 8; ++t) {
    std::thread([&] {
      std::vector<void*> v;
      for (int i = 0; i < 5000; ++i) v.push_back(heap_->Allocate(16 + (i % 64) * 16));
      for (void* p : v) heap_->Free(p);
    }).join();
  }
  // Every block is free and every thread flushed its cache when it ended: what stays is one
  // empty span per class (the churn reserve) and the bounded transfer caches, far below the
  // 8 x 5000 blocks (20 MB) the threads made in total.
  EXPECT_LE(heap_->Usage().span_bytes, 8u << 20);
}

// The figures behind the preload library's mallctl("stats.allocated") and friends.
TEST_F(HeapTest, FootprintCountsLiveBlocksAndNotTheCallersFreeOnes) {
  const alloc::HeapFootprint before = core().Footprint();
  std::vector<void*> small;
  for (int i = 0; i < 20000; ++i) small.push_back(heap_->Allocate(100));  // class 112
  void* large = heap_->Allocate(3 << 20);
  const alloc::HeapFootprint live = core().Footprint();
  EXPECT_EQ(live.small_block_bytes, before.small_block_bytes + 20000 * 112);
  EXPECT_EQ(live.stats.large_bytes, before.stats.large_bytes + (3 << 20));
  EXPECT_GE(live.stats.span_bytes, live.small_block_bytes);
  EXPECT_GE(live.stats.segment_bytes, live.stats.span_bytes + live.dirty_bytes);
  for (void* p : small) heap_->Free(p);
  heap_->Free(large);
  // In this thread's cache, the transfer cache or back in their spans: none counts.
  const alloc::HeapFootprint after = core().Footprint();
  EXPECT_EQ(after.small_block_bytes, before.small_block_bytes);
  EXPECT_EQ(after.stats.large_bytes, before.stats.large_bytes);
}

TEST_F(HeapTest, UsableSizeForIsWhatAnAllocationGives) {
  const size_t page = core().runtime()->page_size();
  for (size_t align : {0ul, 16ul, 32ul, 64ul, 256ul, 4096ul, 65536ul, 1ul << 20}) {
    for (size_t n = 0; n <= 300000; n += n < 4096 ? 1 : 1531) {
      void* p = align == 0 ? heap_->Allocate(n) : heap_->AllocateAligned(align, n);
      ASSERT_NE(p, nullptr);
      const size_t want = alloc::HeapCore::UsableSizeFor(n, align, page);
      if (n <= alloc::kMaxSmall && align <= alloc::kGranule) {
        ASSERT_EQ(heap_->UsableSize(p), want) << n << " " << align;
      } else {  // a page run may come from the run cache, a little larger
        ASSERT_GE(heap_->UsableSize(p), want) << n << " " << align;
        ASSERT_GE(want, n);
      }
      heap_->Free(p);
    }
  }
  EXPECT_EQ(alloc::HeapCore::UsableSizeFor(SIZE_MAX / 2, 0, page), 0u);
  EXPECT_EQ(alloc::HeapCore::UsableSizeFor(100, size_t{1} << 63, page), 0u);
}

TEST_F(HeapTest, TwoHeapsOnOneRuntimeFreeEachOthersBlocks) {
  auto other = Heap::Create(*rt_, Tier::kAuto);
  ASSERT_TRUE(other.ok());
  void* a = (*other)->Allocate(100);
  void* b = (*other)->Allocate(1 << 20);
  EXPECT_TRUE((*other)->Owns(a));
  EXPECT_FALSE(heap_->Owns(a));
  heap_->Free(a);
  heap_->Free(b);
}

TEST(HeapCreateTest, AbsentTierIsUnavailableUnlessFallbackIsAllowed) {
  auto rt = Runtime::Start();
  ASSERT_TRUE(rt.ok());
  if ((*rt)->HasTier(Tier::kCxl)) GTEST_SKIP() << "this machine has a CXL tier";
  auto h = Heap::Create(**rt, Tier::kCxl);
  EXPECT_EQ(h.status().code(), StatusCode::kUnavailable);
  auto f = Heap::Create(**rt, Tier::kCxl, kAllocAllowFallback);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  void* p = (*f)->Allocate(1000);
  EXPECT_NE(p, nullptr);
  (*f)->Free(p);
}

}  // namespace
}  // namespace tiermem

// The primary heap (HeapCore::CreatePrimary), whose thread caches the preload library's malloc
// and free reach through t_thread.primary: when a thread has that pointer (a cache exists, no
// bypass, not exiting), what the fast paths take and push, and the spans they leave to the slow
// path (those that handed out aligned blocks). Its own binary: the primary heap (and its
// runtime) live for the rest of the process.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "allocator/heap_core.h"
#include "allocator/size_classes.h"
#include "allocator/span_map.h"
#include "runtime/core/runtime_impl.h"
#include "tiermem/tiermem.hpp"

namespace tiermem {
namespace {

using alloc::HeapCore;
using alloc::Span;
using alloc::t_thread;

alignas(HeapCore) unsigned char g_storage[sizeof(HeapCore)];
alignas(HeapCore) unsigned char g_storage2[sizeof(HeapCore)];

class PrimaryHeapTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto rt = Runtime::Start();
    ASSERT_TRUE(rt.ok()) << rt.status().ToString();
    runtime_ = rt->release();  // never stopped: the primary heap is never destroyed
    heap_ = HeapCore::CreatePrimary(g_storage, ImplOf(*runtime_), Tier::kDram, kAllocDefault);
    ASSERT_NE(heap_, nullptr);
  }
  static Span* SpanOf(const void* p) { return alloc::GlobalSpanMap().Lookup(p); }

  static Runtime* runtime_;
  static HeapCore* heap_;
};
Runtime* PrimaryHeapTest::runtime_ = nullptr;
HeapCore* PrimaryHeapTest::heap_ = nullptr;

TEST_F(PrimaryHeapTest, OnlyOnePrimaryHeap) {
  EXPECT_EQ(HeapCore::CreatePrimary(g_storage2, ImplOf(*runtime_), Tier::kDram, kAllocDefault),
            nullptr);
}

TEST_F(PrimaryHeapTest, FastPathsPopAndPushTheThreadsPrimaryCache) {
  void* p = heap_->Malloc(100);  // creates this thread's cache
  ASSERT_NE(p, nullptr);
  ASSERT_NE(t_thread.primary, alloc::NoCache());
  Span* span = SpanOf(p);
  ASSERT_NE(span, nullptr);
  EXPECT_EQ(span->local_list.load(), &t_thread.primary->cls[alloc::SizeClass(100)]);
  ASSERT_TRUE(HeapCore::TryFreePrimary(span, p));
  EXPECT_EQ(HeapCore::TryMallocPrimary(100), p);  // last in, first out
  EXPECT_EQ(HeapCore::TryMallocPrimary(alloc::kMaxSmall + 1), nullptr);  // not small
  heap_->Free(p);
}

TEST_F(PrimaryHeapTest, ABypassedThreadHasNoPrimaryCacheUntilItsLastScopeEnds) {
  void* p = heap_->Malloc(48);
  ASSERT_NE(p, nullptr);
  alloc::ThreadCache* tc = t_thread.primary;
  ASSERT_NE(tc, alloc::NoCache());
  alloc::EnterBypass();
  alloc::EnterBypass();
  EXPECT_EQ(t_thread.primary, alloc::NoCache());
  EXPECT_EQ(HeapCore::TryMallocPrimary(48), nullptr);
  EXPECT_EQ(HeapCore::TryMallocPrimary(5000), nullptr);  // past the class table
  EXPECT_FALSE(HeapCore::TryFreePrimary(SpanOf(p), p));
  alloc::LeaveBypass();
  EXPECT_EQ(t_thread.primary, alloc::NoCache());  // still inside the outer scope
  alloc::LeaveBypass();
  EXPECT_EQ(t_thread.primary, tc);
  heap_->Free(p);
  // The stand-in cache of bypassed threads was read, never written: all its lists still empty.
  static const alloc::ThreadCache kZero{};
  EXPECT_EQ(memcmp(alloc::NoCache(), &kZero, sizeof(kZero)), 0);
}

TEST_F(PrimaryHeapTest, ASpanThatHandedOutAnAlignedBlockLeavesTheFastPath) {
  void* a = heap_->Memalign(512, 500);  // class 512
  ASSERT_NE(a, nullptr);
  Span* span = SpanOf(a);
  ASSERT_NE(span, nullptr);
  EXPECT_TRUE(span->aligned.load());
  EXPECT_EQ(span->local_list.load(), nullptr);
  char* inside = static_cast<char*>(a) + 300;
  EXPECT_FALSE(HeapCore::TryFreePrimary(span, inside));
  HeapCore::FreeInSpan(span, inside);  // the preload library's slow path: rounds down
  EXPECT_EQ(heap_->Memalign(512, 500), a);
  heap_->Free(a);
}

// Span::local_list is rewritten whenever the span's owner changes (SetOwner); a span that handed
// out an aligned block must stay off the fast path through that: an orphan adopted by a thread.
TEST_F(PrimaryHeapTest, AnAlignedSpanStaysOffTheFastPathWhenAThreadAdoptsIt) {
  std::thread([] {
    constexpr size_t kAlign = 2048, kSize = 1800;  // class 2048, which no other test here uses
    char* a = static_cast<char*>(heap_->Memalign(kAlign, kSize));
    ASSERT_NE(a, nullptr);
    Span* span = SpanOf(a);
    ASSERT_NE(span, nullptr);
    ASSERT_EQ(span->owner.load(), t_thread.primary);  // the thread's carving span
    EXPECT_EQ(span->local_list.load(), nullptr);
    heap_->Free(a);
    HeapCore::FlushThreadCaches();  // the carving span becomes an orphan
    EXPECT_EQ(span->owner.load(), alloc::NoOwner());
    EXPECT_EQ(span->local_list.load(), nullptr);
    // Refills: the flushed blocks first, then the orphan, which this thread's new cache adopts.
    std::vector<void*> got;
    while (span->owner.load() == alloc::NoOwner() && got.size() < 64) {
      got.push_back(heap_->Malloc(kSize));
      ASSERT_NE(got.back(), nullptr);
    }
    ASSERT_EQ(span->owner.load(), t_thread.primary);
    EXPECT_EQ(span->local_list.load(), nullptr);
    void* b = nullptr;
    for (void* p : got) {
      if (SpanOf(p) == span) b = p;
    }
    ASSERT_NE(b, nullptr);
    EXPECT_FALSE(HeapCore::TryFreePrimary(span, static_cast<char*>(b) + 100));
    for (void* p : got) heap_->Free(p);
  }).join();
}

TEST_F(PrimaryHeapTest, FreesPastTheCacheLimitGoBackInBatches) {
  const int cls = alloc::SizeClass(256);
  std::vector<void*> blocks;
  for (int i = 0; i < 1000; ++i) blocks.push_back(heap_->Malloc(256));
  alloc::ThreadCache* tc = t_thread.primary;
  ASSERT_NE(tc, nullptr);
  for (void* p : blocks) {
    ASSERT_TRUE(HeapCore::TryFreePrimary(SpanOf(p), p));
    ASSERT_GE(tc->cls[cls].room, 0);
    ASSERT_LE(tc->cls[cls].count(), tc->cls[cls].max);
  }
  EXPECT_GT(tc->cls[cls].count(), 0u);
}

TEST_F(PrimaryHeapTest, AThreadLosesItsPrimaryCacheWhenItFlushesOrExits) {
  std::thread([] {
    EXPECT_EQ(t_thread.primary, alloc::NoCache());
    void* p = heap_->Malloc(64);
    ASSERT_NE(p, nullptr);
    EXPECT_NE(t_thread.primary, alloc::NoCache());
    HeapCore::FlushThreadCaches();
    EXPECT_EQ(t_thread.primary, alloc::NoCache());
    heap_->Free(p);  // a new cache
    EXPECT_NE(t_thread.primary, alloc::NoCache());
  }).join();
}

TEST_F(PrimaryHeapTest, AThreadKeepsSmallRunsItFreesForItsNextLargeBlockUntilItExits) {
  const uint64_t cached_before = heap_->Stats().cached_run_bytes;
  std::thread([&] {
    heap_->Free(heap_->Malloc(64));  // the thread's cache, which keeps its runs
    void* p = heap_->Malloc(300 << 10);
    ASSERT_NE(p, nullptr);
    const alloc::HeapStats live = heap_->Stats();
    heap_->Free(p);  // kept by this thread: still counted as large bytes, not in the run cache
    EXPECT_EQ(heap_->Stats().large_bytes, live.large_bytes);
    EXPECT_EQ(heap_->Stats().cached_run_bytes, cached_before);
    EXPECT_EQ(heap_->Malloc(200 << 10), p);  // the best fit from the thread's own runs
    void* big = heap_->Malloc(4 << 20);      // above kLocalRunMaxBytes: the run cache
    ASSERT_NE(big, nullptr);
    heap_->Free(big);
    EXPECT_GE(heap_->Stats().cached_run_bytes, cached_before + (4 << 20));
    heap_->Free(p);
  }).join();
  // At its exit the thread's runs went to the run cache (none was given back: it has room).
  EXPECT_GE(heap_->Stats().cached_run_bytes, cached_before + (4 << 20) + (300 << 10));
}

TEST_F(PrimaryHeapTest, ANewThreadTakesTheCacheOfOneThatExitedWithItsBlocks) {
  alloc::ThreadCache* parked = nullptr;
  void* freed = nullptr;
  std::thread([&] {
    freed = heap_->Malloc(48);
    ASSERT_NE(freed, nullptr);
    heap_->Free(freed);  // stays in this thread's list
    parked = t_thread.primary;
  }).join();
  std::thread([&] {
    EXPECT_EQ(heap_->Malloc(48), freed);  // the last parked cache, its list as it was
    EXPECT_EQ(t_thread.primary, parked);
    heap_->Free(freed);
  }).join();
}

TEST_F(PrimaryHeapTest, DestroyingThePrimaryHeapAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(heap_->Destroy(), "primary heap cannot be destroyed");
}

}  // namespace
}  // namespace tiermem

// Span-local free lists of the tiered heap (Span::local_*, ThreadCache::pending): blocks a thread
// frees come back to it one span at a time, spans whose blocks are all free go back beyond a
// bound, and frees by several threads into one owner's spans lose no block and hand none out
// twice.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_set>
#include <vector>

#include "allocator/heap_core.h"
#include "allocator/heap_core_internal.h"
#include "allocator/heap_internal.h"
#include "allocator/size_classes.h"
#include "allocator/span_map.h"
#include "tiermem/heap.hpp"
#include "tiermem/tiermem.hpp"

namespace tiermem {
namespace {

class HeapLocalTest : public ::testing::Test {
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

constexpr size_t kSize = 48;

// Blocks of one span: how many per span of kSize's class.
size_t PerSpan() {
  const int cls = alloc::SizeClass(kSize);
  return alloc::SpanGranules(cls) * alloc::kGranule / alloc::ClassSize(cls);
}

TEST_F(HeapLocalTest, FreedBlocksComeBackOneSpanAtATime) {
  // Four spans and a half of blocks, freed in a random order: a single list of the class would
  // hand them out again in that order, a different span almost at every step.
  std::vector<void*> blocks(PerSpan() * 9 / 2);
  for (void*& p : blocks) {
    p = heap_->Allocate(kSize);
    ASSERT_NE(p, nullptr);
  }
  std::mt19937 rng(7);
  std::shuffle(blocks.begin(), blocks.end(), rng);
  for (void* p : blocks) heap_->Free(p);
  std::vector<void*> again(PerSpan());
  int switches = 0;
  const alloc::Span* last = nullptr;
  for (void*& p : again) {
    p = heap_->Allocate(kSize);
    ASSERT_NE(p, nullptr);
    const alloc::Span* s = alloc::GlobalSpanMap().Lookup(p);
    if (last != nullptr && s != last) ++switches;
    last = s;
  }
  // A span's whole list at a time: the span changes only when one runs dry.
  EXPECT_LE(switches, 2) << "blocks of one span's worth came from spans changing " << switches
                         << " times";
  for (void* p : again) heap_->Free(p);
}

TEST_F(HeapLocalTest, SpansWhoseBlocksAreAllFreeGoBackBeyondTheKeptBound) {
  const uint64_t before = heap_->Usage().span_bytes;
  std::vector<void*> blocks(PerSpan() * 40);
  for (void*& p : blocks) {
    p = heap_->Allocate(kSize);
    ASSERT_NE(p, nullptr);
  }
  const uint64_t span_bytes = alloc::kGranule * alloc::SpanGranules(alloc::SizeClass(kSize));
  ASSERT_GE(heap_->Usage().span_bytes, before + 40 * span_bytes);
  for (void* p : blocks) heap_->Free(p);
  // Kept: KeptSpans whole spans, the current and the carving span, and the central list's one
  // empty span.
  const uint64_t bound = (alloc::KeptSpans(alloc::SizeClass(kSize)) + 3) * span_bytes;
  EXPECT_LE(heap_->Usage().span_bytes, before + bound);
}

// One owner allocates blocks and passes three of every four to three workers, which check and
// free them (remote frees into the owner's spans) while the owner frees its own (local frees)
// and allocates again. Every block carries a stamp that its holder checks before freeing, and
// every block handed out must not be live already; at the end no block may be missing.
TEST_F(HeapLocalTest, FreesFromSeveralThreadsIntoOneOwnerLoseNoBlockAndHandNoneOutTwice) {
  constexpr int kWorkers = 3, kRounds = 60, kPerRound = 8192;
  std::mutex live_mu;
  std::unordered_set<void*> live;
  struct Queue {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::pair<void*, uint64_t>> q;
    bool done = false;
  };
  std::vector<Queue> queues(kWorkers);
  std::atomic<int> bad{0};
  auto check_and_free = [&](void* p, uint64_t stamp) {
    uint64_t got;
    memcpy(&got, p, sizeof(got));
    if (got != stamp) bad.fetch_add(1);
    {
      std::lock_guard<std::mutex> lock(live_mu);
      if (live.erase(p) != 1) bad.fetch_add(1);
    }
    heap_->Free(p);
  };
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      Queue& q = queues[static_cast<size_t>(w)];
      for (;;) {
        std::unique_lock<std::mutex> lock(q.mu);
        q.cv.wait(lock, [&] { return q.done || !q.q.empty(); });
        if (q.q.empty()) return;
        std::deque<std::pair<void*, uint64_t>> mine;
        mine.swap(q.q);
        lock.unlock();
        for (auto [p, stamp] : mine) check_and_free(p, stamp);
      }
    });
  }
  std::vector<std::pair<void*, uint64_t>> kept, next;
  int doubled = 0;
  for (int r = 0; r < kRounds; ++r) {
    // The workers' remote batches parked in the transfer cache go back to their spans, so that
    // the owner's own frees often find every block of a span back (a give-back to the central
    // list while other threads free into the same spans).
    core().Trim();
    std::vector<std::vector<std::pair<void*, uint64_t>>> out(kWorkers);
    for (int i = 0; i < kPerRound; ++i) {
      void* p = heap_->Allocate(kSize + 16 * static_cast<size_t>(i % 2));
      ASSERT_NE(p, nullptr);
      const uint64_t stamp = (uint64_t(r) << 32) | static_cast<uint64_t>(i);
      memcpy(p, &stamp, sizeof(stamp));
      {
        std::lock_guard<std::mutex> lock(live_mu);
        if (!live.insert(p).second) ++doubled;
      }
      if (i % 4 == 3) {
        next.emplace_back(p, stamp);
      } else {
        out[static_cast<size_t>(i % 4)].emplace_back(p, stamp);
      }
      // The owner frees last round's blocks between its allocations.
      if (!kept.empty()) {
        check_and_free(kept.back().first, kept.back().second);
        kept.pop_back();
      }
    }
    for (int w = 0; w < kWorkers; ++w) {
      Queue& q = queues[static_cast<size_t>(w)];
      std::lock_guard<std::mutex> lock(q.mu);
      q.q.insert(q.q.end(), out[static_cast<size_t>(w)].begin(), out[static_cast<size_t>(w)].end());
      q.cv.notify_one();
    }
    for (auto [p, stamp] : kept) check_and_free(p, stamp);
    kept.swap(next);
    next.clear();
  }
  for (auto [p, stamp] : kept) check_and_free(p, stamp);
  for (Queue& q : queues) {
    std::lock_guard<std::mutex> lock(q.mu);
    q.done = true;
    q.cv.notify_one();
  }
  for (auto& th : workers) th.join();  // their caches go back at exit
  EXPECT_EQ(doubled, 0) << "blocks handed out while still live";
  EXPECT_EQ(bad.load(), 0) << "blocks whose stamp changed, or freed twice";
  EXPECT_TRUE(live.empty());
  // This thread's lists back to the central lists: then every block is back in its span.
  alloc::HeapCore::FlushThreadCaches();
  EXPECT_EQ(core().Footprint().small_block_bytes, 0u) << "blocks neither live nor free";
}

}  // namespace
}  // namespace tiermem

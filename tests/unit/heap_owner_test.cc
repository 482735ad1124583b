// Thread-owned spans of the tiered heap (Span::owner, ThreadCache::carving and remote lists):
// the fresh blocks of two threads share no cache line, a thread does not hand out a block of
// another thread's that it freed, a batch of one thread's blocks freed by another goes back to
// that thread first, remote frees come back to the thread that allocates, and the
// span an exited thread was carving is taken up by the next; frees by several threads into one
// thread's spans lose no block and hand none out twice.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_set>
#include <vector>

#include "allocator/heap_core.h"
#include "allocator/heap_internal.h"
#include "allocator/size_classes.h"
#include "allocator/span_map.h"
#include "tiermem/heap.hpp"
#include "tiermem/tiermem.hpp"

namespace tiermem {
namespace {

constexpr uintptr_t kLine = 64;

uintptr_t LineOf(const void* p) { return reinterpret_cast<uintptr_t>(p) / kLine; }

// The cache lines a block covers.
void AddLines(const void* p, size_t size, int who, std::map<uintptr_t, int>* lines, int* shared) {
  for (uintptr_t l = LineOf(p); l <= LineOf(static_cast<const char*>(p) + size - 1); ++l) {
    auto [it, fresh] = lines->emplace(l, who);
    if (!fresh && it->second != who) ++*shared;
  }
}

class HeapOwnerTest : public ::testing::Test {
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

  std::unique_ptr<Runtime> rt_;
  std::unique_ptr<Heap> heap_;
};

TEST_F(HeapOwnerTest, FreshBlocksOfTwoThreadsShareNoCacheLine) {
  // Both threads allocate the same classes at the same time, 16-256 bytes: sizes whose batches
  // do not end on a line boundary (160 bytes: 25 objects a page) included.
  constexpr int kThreads = 2, kBlocks = 3000;
  std::vector<std::vector<std::pair<void*, size_t>>> got(kThreads);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      for (int i = 0; i < kBlocks; ++i) {
        const size_t size = 16 + 16 * static_cast<size_t>((i * 7 + t) % 16);
        void* p = heap_->Allocate(size);
        ASSERT_NE(p, nullptr);
        memset(p, t + 1, size);
        got[static_cast<size_t>(t)].emplace_back(p, size);
      }
      // Both stay until both have allocated: an exit would pass a thread's cached blocks on.
      ready.fetch_add(1);
      while (ready.load() < 2 * kThreads) std::this_thread::yield();
    });
  }
  for (auto& th : threads) th.join();
  std::map<uintptr_t, int> lines;
  int shared = 0;
  for (int t = 0; t < kThreads; ++t) {
    for (auto [p, size] : got[static_cast<size_t>(t)]) AddLines(p, size, t, &lines, &shared);
  }
  EXPECT_EQ(shared, 0) << "cache lines holding blocks of both threads";
  for (auto& v : got) {
    for (auto [p, size] : v) heap_->Free(p);
  }
}

TEST_F(HeapOwnerTest, AThreadDoesNotHandOutABlockOfAnotherThreadThatItFreed) {
  // This thread allocates a block for each of two workers, side by side; each worker frees its
  // block and allocates its own of that size: neither may get one of this thread's lines (the
  // two workers would then write the same line).
  constexpr int kWorkers = 2;
  std::vector<void*> first(kWorkers);
  std::map<uintptr_t, int> lines;
  int shared = 0;
  for (int w = 0; w < kWorkers; ++w) {
    first[static_cast<size_t>(w)] = heap_->Allocate(8);
    ASSERT_NE(first[static_cast<size_t>(w)], nullptr);
  }
  std::vector<void*> mine(64);
  for (void*& p : mine) {
    p = heap_->Allocate(8);
    AddLines(p, 8, -1, &lines, &shared);
  }
  std::vector<std::vector<void*>> got(kWorkers);
  std::atomic<int> done{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      heap_->Free(first[static_cast<size_t>(w)]);
      for (int i = 0; i < 100; ++i) {
        void* p = heap_->Allocate(8);
        ASSERT_NE(p, nullptr);
        got[static_cast<size_t>(w)].push_back(p);
      }
      // Both workers stay until both have allocated: an exit would return a worker's cache.
      done.fetch_add(1);
      while (done.load() < kWorkers) std::this_thread::yield();
    });
  }
  for (auto& th : workers) th.join();
  for (int w = 0; w < kWorkers; ++w) {
    for (void* p : got[static_cast<size_t>(w)]) AddLines(p, 8, w, &lines, &shared);
  }
  EXPECT_EQ(shared, 0) << "a worker got a block on a line of this thread's or the other's";
  for (auto& v : got) {
    for (void* p : v) heap_->Free(p);
  }
  for (void* p : mine) heap_->Free(p);
}

// Allocates 2 * batch 16-byte blocks side by side (four to a line): every other one is kept
// (its lines go into `lines` as `who`'s), the rest are given away.
void AllocateHalfToGive(Heap& heap, uint32_t batch, int who, std::vector<void*>* kept,
                        std::vector<void*>* given, std::map<uintptr_t, int>* lines) {
  int shared = 0;
  for (uint32_t i = 0; i < 2 * batch; ++i) {
    void* p = heap.Allocate(16);
    ASSERT_NE(p, nullptr);
    (i % 2 == 0 ? kept : given)->push_back(p);
    if (i % 2 == 0) AddLines(p, 16, who, lines, &shared);
  }
}

TEST_F(HeapOwnerTest, ABatchFreedByAnotherThreadGoesBackToItsOwnerFirst) {
  // This thread and a second one each keep every other block of theirs and give the rest to a
  // third, which frees this thread's first, then the second's: two remote batches, the second
  // one's on top. This thread's refills must take its own batch back, not the second thread's
  // (it would write lines whose other blocks the second thread writes).
  const uint32_t batch = alloc::BatchSize(alloc::SizeClass(16));
  std::vector<void*> kept, given, other_kept, other_given;
  std::map<uintptr_t, int> lines;
  AllocateHalfToGive(*heap_, batch, 0, &kept, &given, &lines);
  std::thread([&] {
    AllocateHalfToGive(*heap_, batch, 1, &other_kept, &other_given, &lines);
  }).join();
  std::thread([&] {
    for (void* p : given) heap_->Free(p);  // exactly one batch each: flushed at its last free
    for (void* p : other_given) heap_->Free(p);
  }).join();
  // Within what this thread's list holds plus one refill.
  std::set<void*> back(given.begin(), given.end());
  std::vector<void*> mine;
  size_t found = 0;
  int shared = 0;
  for (uint32_t i = 0; i < 4 * batch && found < back.size(); ++i) {
    mine.push_back(heap_->Allocate(16));
    ASSERT_NE(mine.back(), nullptr);
    found += back.count(mine.back());
    AddLines(mine.back(), 16, 0, &lines, &shared);
  }
  EXPECT_EQ(found, back.size()) << "this thread's freed batch did not come back to it";
  EXPECT_EQ(shared, 0) << "this thread got blocks on the second thread's lines";
  for (const auto* v : {&mine, &kept, &other_kept}) {  // other_given: freed above
    for (void* p : *v) heap_->Free(p);
  }
}

TEST_F(HeapOwnerTest, RemoteFreesComeBackToTheThreadThatAllocates) {
  // Two threads that live throughout: one allocates 64-byte blocks, the other frees them. The
  // freed blocks return through the remote lists and the central list to the producer, so the
  // heap does not grow with the number of rounds.
  constexpr int kRounds = 50, kN = 4096;
  std::vector<void*> blocks(kN);
  std::atomic<int> turn{0};  // even: the producer's, odd: the consumer's
  std::thread producer([&] {
    for (int r = 0; r < kRounds; ++r) {
      while (turn.load() != 2 * r) std::this_thread::yield();
      for (int i = 0; i < kN; ++i) {
        blocks[static_cast<size_t>(i)] = heap_->Allocate(64);
        memset(blocks[static_cast<size_t>(i)], r, 64);
      }
      turn.store(2 * r + 1);
    }
  });
  std::thread consumer([&] {
    for (int r = 0; r < kRounds; ++r) {
      while (turn.load() != 2 * r + 1) std::this_thread::yield();
      for (void* p : blocks) {
        const auto* b = static_cast<const unsigned char*>(p);
        for (int j = 0; j < 64; ++j) ASSERT_EQ(b[j], r);
        heap_->Free(p);
      }
      turn.store(2 * r + 2);
    }
  });
  producer.join();
  consumer.join();
  // 50 rounds of 256 KiB: without reuse 12.5 MiB of spans.
  EXPECT_LE(heap_->Usage().span_bytes, 2u << 20);
}

TEST_F(HeapOwnerTest, TheSpanAnExitedThreadWasCarvingIsTakenUp) {
  void* first = nullptr;
  std::thread([&] { first = heap_->Allocate(32); }).join();  // the thread's cache is flushed
  ASSERT_NE(first, nullptr);
  const alloc::Span* span = alloc::GlobalSpanMap().Lookup(first);
  ASSERT_NE(span, nullptr);
  EXPECT_EQ(span->owner.load(), alloc::NoOwner());
  // The next thread to need fresh blocks of the class (this one: it has no carving span of the
  // class) takes the exited thread's cached blocks, then carves on in that span, and owns it.
  std::vector<void*> next(3 * alloc::BatchSize(alloc::SizeClass(32)));
  for (void*& p : next) {
    p = heap_->Allocate(32);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(alloc::GlobalSpanMap().Lookup(p), span);
  }
  EXPECT_NE(span->owner.load(), alloc::NoOwner());
  for (void* p : next) heap_->Free(p);
  heap_->Free(first);
}

using Stamped = std::pair<void*, uint64_t>;  // a block and the stamp written into it

// The blocks handed out and not yet freed, across threads: a block handed out while live, a
// stamp that changed, or a block freed that is not live are counted.
struct Ledger {
  std::mutex mu;
  std::unordered_set<void*> live;
  int doubled = 0;
  std::atomic<int> bad{0};

  void Handed(void* p) {
    std::lock_guard<std::mutex> lock(mu);
    if (!live.insert(p).second) ++doubled;
  }
  // Checked and taken off the ledger before the free: once freed, the heap may hand it out.
  void CheckAndFree(Heap& heap, Stamped b) {
    uint64_t got;
    memcpy(&got, b.first, sizeof(got));
    if (got != b.second) bad.fetch_add(1);
    {
      std::lock_guard<std::mutex> lock(mu);
      if (live.erase(b.first) != 1) bad.fetch_add(1);
    }
    heap.Free(b.first);
  }
};

// Blocks passed to one worker thread. Take waits for some; false once closed and empty.
struct WorkQueue {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Stamped> q;
  bool closed = false;

  void Put(const std::vector<Stamped>& blocks) {
    std::lock_guard<std::mutex> lock(mu);
    q.insert(q.end(), blocks.begin(), blocks.end());
    cv.notify_one();
  }
  void Close() {
    std::lock_guard<std::mutex> lock(mu);
    closed = true;
    cv.notify_one();
  }
  bool Take(std::deque<Stamped>* out) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return closed || !q.empty(); });
    out->swap(q);
    q.clear();
    return !out->empty();
  }
};

// One owner allocates blocks and passes three of every four to three workers, which check and
// free them (remote frees into the owner's spans) while the owner frees its own and allocates
// again. Every block carries a stamp that its holder checks before freeing, and every block
// handed out must not be live already; at the end no block may be missing.
TEST_F(HeapOwnerTest, FreesFromSeveralThreadsIntoOneOwnerLoseNoBlockAndHandNoneOutTwice) {
  constexpr int kWorkers = 3, kRounds = 60, kPerRound = 8192;
  Ledger ledger;
  std::vector<WorkQueue> queues(kWorkers);
  std::vector<std::thread> workers;
  for (WorkQueue& q : queues) {
    workers.emplace_back([&] {
      std::deque<Stamped> mine;
      while (q.Take(&mine)) {
        for (const Stamped& b : mine) ledger.CheckAndFree(*heap_, b);
      }
    });
  }
  std::vector<Stamped> kept, next;
  for (int r = 0; r < kRounds; ++r) {
    // The workers' remote batches parked in the transfer cache go back to their spans, so that
    // the owner's refills also take blocks from span lists that other threads are filling.
    alloc::CoreOf(*heap_)->Trim();
    std::vector<std::vector<Stamped>> out(kWorkers);
    for (int i = 0; i < kPerRound; ++i) {
      void* p = heap_->Allocate(48 + 16 * static_cast<size_t>(i % 2));
      ASSERT_NE(p, nullptr);
      const uint64_t stamp = (uint64_t(r) << 32) | static_cast<uint64_t>(i);
      memcpy(p, &stamp, sizeof(stamp));
      ledger.Handed(p);
      (i % 4 == 3 ? next : out[static_cast<size_t>(i % 4)]).emplace_back(p, stamp);
      if (!kept.empty()) {  // the owner frees last round's blocks between its allocations
        ledger.CheckAndFree(*heap_, kept.back());
        kept.pop_back();
      }
    }
    for (size_t w = 0; w < queues.size(); ++w) queues[w].Put(out[w]);
    for (const Stamped& b : kept) ledger.CheckAndFree(*heap_, b);
    kept.swap(next);
    next.clear();
  }
  for (const Stamped& b : kept) ledger.CheckAndFree(*heap_, b);
  for (WorkQueue& q : queues) q.Close();
  for (auto& th : workers) th.join();  // their caches go back at exit
  EXPECT_EQ(ledger.doubled, 0) << "blocks handed out while still live";
  EXPECT_EQ(ledger.bad.load(), 0) << "blocks whose stamp changed, or freed twice";
  EXPECT_TRUE(ledger.live.empty());
  // This thread's lists back to the central lists: then every block is back in its span.
  alloc::HeapCore::FlushThreadCaches();
  EXPECT_EQ(alloc::CoreOf(*heap_)->Footprint().small_block_bytes, 0u)
      << "blocks neither live nor free";
}

}  // namespace
}  // namespace tiermem

// The workloads of tiermem-malloc-workload that follow the patterns of a public allocator
// benchmark suite on which the tiered heap was found behind: a steady stream of small blocks
// freed by another thread, per-thread objects written over and over (false sharing between
// objects handed to different threads), long single-thread runs of small objects of many sizes,
// and a threaded malloc/free loop after glibc's own benchmark. Each checks its bytes.
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "bench/malloc_workload.h"

namespace tiermem::bench::workload {

namespace {

// Batches of blocks from one producer to one consumer: a bounded queue under a mutex, so that a
// thread that finds it full or empty sleeps on a condition variable instead of spinning (on a
// loaded 2-core machine spinning is most of a run's time, by scheduling alone: see fanin).
class BatchQueue {
 public:
  explicit BatchQueue(size_t depth) : depth_(depth) {}
  void Put(std::vector<void*> batch) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return q_.size() < depth_; });
    q_.push_back(std::move(batch));
    cv_.notify_all();
  }
  std::vector<void*> Take() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !q_.empty(); });
    std::vector<void*> b = std::move(q_.front());
    q_.pop_front();
    cv_.notify_all();
    return b;
  }

 private:
  const size_t depth_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::vector<void*>> q_;
};

// Pairs of threads: the producer allocates 64-byte blocks and fills them, the consumer checks and
// frees them; `pairs` pairs at once, `per_pair` blocks each.
void RemoteFreePairs(int pairs, uint64_t per_pair) {
  constexpr size_t kBatch = 256, kBlock = 64;
  std::vector<BatchQueue*> queues;
  for (int p = 0; p < pairs; ++p) queues.push_back(new BatchQueue(4));
  std::vector<std::thread> threads;
  for (int p = 0; p < pairs; ++p) {
    BatchQueue* q = queues[static_cast<size_t>(p)];
    threads.emplace_back([q, per_pair, p] {
      for (uint64_t i = 0; i < per_pair; i += kBatch) {
        std::vector<void*> batch(kBatch);
        for (size_t k = 0; k < kBatch; ++k) {
          batch[k] = malloc(kBlock);
          Fill(batch[k], kBlock, i + k + static_cast<uint64_t>(p));
        }
        q->Put(std::move(batch));
      }
    });
    threads.emplace_back([q, per_pair, p] {
      for (uint64_t i = 0; i < per_pair; i += kBatch) {
        std::vector<void*> batch = q->Take();
        for (size_t k = 0; k < kBatch; ++k) {
          Check("remote_free", batch[k], kBlock, i + k + static_cast<uint64_t>(p));
          free(batch[k]);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (BatchQueue* q : queues) delete q;
}

}  // namespace

// A steady stream of 64-byte blocks allocated by one thread and freed by another: one pair of
// threads, then two pairs at once (four threads), 2M blocks per pair each time.
uint64_t RemoteFree(uint64_t scale) {
  const uint64_t per_pair = 2048 * 1024 * scale;  // a multiple of the batch
  RemoteFreePairs(1, per_pair);
  RemoteFreePairs(2, per_pair);
  return 3 * per_pair;
}

namespace {

// One object of `size` bytes written `writes` times by its thread, then checked: an object that
// shares a cache line with another thread's makes the writes slow on both.
void WriteOwn(void* p, size_t size, uint64_t writes, uint64_t tag) {
  volatile unsigned char* b = static_cast<unsigned char*>(p);
  for (uint64_t w = 0; w < writes; ++w) b[w % size] = static_cast<unsigned char>(tag);
  Check("false_share", p, size, tag);
}

}  // namespace

// Per-thread small objects written over and over, one thread and then two. Passive: the main
// thread allocates one 8-byte object per worker side by side; each worker frees it and then
// allocates, writes and frees its own objects of that size (an allocator that hands a worker the
// block it just freed gives the two workers neighbouring objects). Active: each worker allocates
// its objects itself, 8-64 bytes, a few live at a time (objects handed to different threads from
// one cache line make every write a line transfer).
uint64_t FalseShare(uint64_t scale) {
  constexpr uint64_t kWrites = 1000;
  const uint64_t per_thread = 20000 * scale;
  uint64_t ops = 0;
  for (int threads : {1, 2}) {
    std::vector<void*> first(static_cast<size_t>(threads));
    for (void*& p : first) p = malloc(8);
    std::vector<std::thread> th;
    for (int t = 0; t < threads; ++t) {
      th.emplace_back([&first, t, per_thread] {
        const auto tag = static_cast<uint64_t>(t) + 1;
        Fill(first[static_cast<size_t>(t)], 8, tag);
        free(first[static_cast<size_t>(t)]);
        for (uint64_t i = 0; i < per_thread; ++i) {  // passive
          void* p = malloc(8);
          WriteOwn(p, 8, kWrites, tag + i);
          free(p);
        }
        Rng r{tag};
        void* live[4] = {};
        for (uint64_t i = 0; i < per_thread; ++i) {  // active
          void*& slot = live[i % 4];
          free(slot);
          const size_t size = 8 + r.Next() % 57;
          slot = malloc(size);
          WriteOwn(slot, size, kWrites, tag + i);
        }
        for (void* p : live) free(p);
      });
    }
    for (auto& x : th) x.join();
    ops += 2 * per_thread * static_cast<uint64_t>(threads);
  }
  return ops;
}

// One thread, long runs of small objects of many sizes, after an arbitrary-precision number
// program (numbers of 1-40 limbs made, combined and dropped) and an n-body simulation's tree
// (built from thousands of nodes every step, then freed whole). Each object holds its size and
// a pattern, checked before its free.
uint64_t SmallChurn(uint64_t scale) {
  struct Obj {
    void* p;
    size_t size;
  };
  auto make = [](size_t size) {
    void* p = malloc(size);
    Fill(p, size, size);
    return Obj{p, size};
  };
  auto drop = [](const Obj& o) {
    Check("small_churn", o.p, o.size, o.size);
    free(o.p);
  };
  constexpr int kSteps = 40, kNodes = 20000, kNumbers = 512;
  const uint64_t reps = 6 * scale;
  uint64_t ops = 0;
  Rng r{3};
  for (uint64_t rep = 0; rep < reps; ++rep) {
    std::vector<Obj> nums(kNumbers);
    for (Obj& o : nums) o = make(8 * (1 + r.Next() % 40));
    std::vector<Obj> tree(kNodes);
    for (int step = 0; step < kSteps; ++step) {
      // The tree: nodes of 48-144 bytes (cells with 2-8 children), all built, then all freed.
      for (Obj& o : tree) o = make(48 + 16 * (r.Next() % 7));
      // Numbers: each new one from two old ones, one or two limbs longer or shorter; the one it
      // replaces is dropped, so sizes drift while the count stays.
      for (int i = 0; i < 4 * kNumbers; ++i) {
        const Obj& a = nums[r.Next() % kNumbers];
        size_t limbs = a.size / 8 + r.Next() % 3;
        limbs = limbs > 2 ? limbs - 1 : 1;
        if (limbs > 64) limbs = 64;
        Obj& slot = nums[r.Next() % kNumbers];
        Obj made = make(8 * limbs);
        drop(slot);
        slot = made;
      }
      for (const Obj& o : tree) drop(o);
      ops += kNodes + 4 * kNumbers;
    }
    for (const Obj& o : nums) drop(o);
    ops += kNumbers;
  }
  return ops;
}

namespace {

// glibc's threaded malloc benchmark (bench-malloc-thread) in kind: each of 2 threads replaces a
// random block of its working set of 1024, sizes 4 bytes to 32 KiB with small sizes far more
// likely (the chance falls with the square of the size), writing and checking the first 16 bytes
// (kTouch), or with no access to the blocks at all (thread_loop_bare: the allocator's own cost
// on this pattern, which the writes, checks and their cache misses otherwise hide).
template <bool kTouch>
uint64_t ThreadLoopRun(uint64_t scale) {
  constexpr int kThreads = 2;
  constexpr size_t kWorkingSet = 1024, kMin = 4, kMax = 32768, kHead = 16;
  const uint64_t per_thread = 3000000 * scale;
  auto work = [per_thread](int t) {
    Rng r{static_cast<uint64_t>(t) * 77 + 5};
    std::vector<void*> set(kWorkingSet);
    std::vector<size_t> sizes(kWorkingSet);
    for (uint64_t i = 0; i < per_thread; ++i) {
      const size_t k = r.Next() % kWorkingSet;
      if (set[k] != nullptr) {
        if (kTouch) Check("thread_loop", set[k], sizes[k] < kHead ? sizes[k] : kHead, sizes[k]);
        free(set[k]);
      }
      // Inverse-square: size = kMin / u for u uniform in (kMin / kMax, 1].
      const double u = static_cast<double>(r.Next() % 1000000 + 1) / 1e6;
      size_t size = static_cast<size_t>(static_cast<double>(kMin) / u);
      if (size > kMax) size = kMax;
      set[k] = malloc(size);
      sizes[k] = size;
      if (kTouch) Fill(set[k], size < kHead ? size : kHead, size);
    }
    for (size_t k = 0; k < kWorkingSet; ++k) {
      if (set[k] == nullptr) continue;
      if (kTouch) Check("thread_loop", set[k], sizes[k] < kHead ? sizes[k] : kHead, sizes[k]);
      free(set[k]);
    }
  };
  std::vector<std::thread> th;
  for (int t = 0; t < kThreads; ++t) th.emplace_back(work, t);
  for (auto& x : th) x.join();
  return per_thread * kThreads;
}

}  // namespace

uint64_t ThreadLoop(uint64_t scale) { return ThreadLoopRun<true>(scale); }
uint64_t ThreadLoopBare(uint64_t scale) { return ThreadLoopRun<false>(scale); }

}  // namespace tiermem::bench::workload

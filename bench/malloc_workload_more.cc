// The workloads of tiermem-malloc-workload that follow kinds of work of public allocator
// benchmarks (cross-thread fan-in, large touched blocks, thread churn, a small-size loop, a small
// program's whole run). Each checks every byte it wrote before it frees it.
#include <pthread.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench/malloc_workload.h"

namespace tiermem::bench::workload {

void DataError(const char* workload, const void* block, size_t offset) {
  fprintf(stderr, "tiermem-malloc-workload %s: wrong byte at offset %zu of block %p\n", workload,
          offset, block);
  exit(3);
}

// The byte of tag in every byte. Both are glibc's vector code (memset, memcmp), so that they stay
// cheap next to the allocator calls being measured: a loop comparing 8 bytes at a time was
// 60% of fanin's instructions (callgrind: 323M of 540M under tiermem, its malloc and free 50M).
void Fill(void* p, size_t n, uint64_t tag) { memset(p, static_cast<unsigned char>(tag), n); }

void Check(const char* workload, const void* p, size_t n, uint64_t tag) {
  if (n == 0) return;
  const auto* b = static_cast<const unsigned char*>(p);
  const auto byte = static_cast<unsigned char>(tag);
  // Every byte equals the next one and the first is the tag's: all n bytes are.
  if (b[0] == byte && memcmp(b, b + 1, n - 1) == 0) return;
  for (size_t i = 0; i < n; ++i) {
    if (b[i] != byte) DataError(workload, p, i);
  }
}

namespace {

constexpr size_t kPage = 4096;

// A block of the fan-in and churn workloads: its size in the first 8 bytes, then the pattern of
// that size, so the thread that frees it can check it without knowing who made it.
void* NewBlock(size_t size) {
  void* p = malloc(size);
  memcpy(p, &size, sizeof(size));
  Fill(static_cast<char*>(p) + sizeof(size), size - sizeof(size), size);
  return p;
}

void FreeBlock(const char* workload, void* p) {
  size_t size;
  memcpy(&size, p, sizeof(size));
  if (size < 16 || size > 4096) DataError(workload, p, 0);
  Check(workload, static_cast<char*>(p) + sizeof(size), size - sizeof(size), size);
  free(p);
}

}  // namespace

// 4 threads, each allocating 16..512-byte blocks and sending each to one of the other three in
// turn, while freeing what the others sent it: every free is of another thread's block.
//
// The hand-off is in rounds, not through rings that a thread polls: in round r each thread
// allocates kRound blocks into this round's boxes for the others and, one for one, frees the
// blocks the others put in its boxes in round r - 1; a barrier ends the round. Every thread does
// the same work in every run, and a thread whose partners are behind sleeps in the barrier
// (glibc's pthread_barrier_wait: a futex, no spinning) instead of polling. With rings, a thread
// that found its ring full or empty spun and called sched_yield: on the 2-core build machine
// (4 threads, other work beside them) that spinning was up to three quarters of a run's CPU
// time (0.07 s user and 0.23 s system with 286k context switches in one run, 0.09 s and 0 in the
// next, the same allocator), so runs took about 100 or about 300 ms by scheduling alone.
uint64_t FanIn(uint64_t scale) {
  constexpr int kThreads = 4, kOthers = kThreads - 1;
  constexpr uint64_t kPerDst = 1024;                // blocks to each other thread per round
  constexpr uint64_t kRound = kOthers * kPerDst;    // blocks each thread allocates per round
  const uint64_t rounds = 100 * scale;              // 307,200 blocks per thread at scale 1
  // boxes[parity][dst][src]: the blocks src allocated for dst in a round of that parity. A box
  // written in round r is emptied in round r + 1 and written again in round r + 2, after the
  // barrier that ends round r + 1.
  std::vector<void*> boxes(2 * kThreads * kThreads * kPerDst);
  auto box = [&](uint64_t round, int dst, int src) {
    return &boxes[((round % 2 * kThreads + dst) * kThreads + src) * kPerDst];
  };
  pthread_barrier_t barrier;
  pthread_barrier_init(&barrier, nullptr, kThreads);
  auto work = [&](int t) {
    Rng r{static_cast<uint64_t>(t) + 1};
    for (uint64_t round = 0; round <= rounds; ++round) {
      for (uint64_t i = 0; i < kRound; ++i) {
        const int other = (t + 1 + static_cast<int>(i % kOthers)) % kThreads;
        if (round > 0) FreeBlock("fanin", box(round - 1, t, other)[i / kOthers]);
        if (round < rounds) box(round, other, t)[i / kOthers] = NewBlock(16 + r.Next() % 497);
      }
      pthread_barrier_wait(&barrier);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(work, t);
  for (auto& th : threads) th.join();
  pthread_barrier_destroy(&barrier);
  return rounds * kRound * kThreads;
}

// One block of 5..25 MiB at a time: every page written, read back, freed.
uint64_t LargeTouch(uint64_t scale) {
  const uint64_t n = 60 * scale;
  Rng r{11};
  for (uint64_t i = 0; i < n; ++i) {
    const size_t size = (5 + r.Next() % 21) << 20;
    auto* p = static_cast<unsigned char*>(malloc(size));
    for (size_t off = 0; off < size; off += kPage) p[off] = static_cast<unsigned char>(i + off / kPage);
    p[size - 1] = static_cast<unsigned char>(i);
    for (size_t off = 0; off < size; off += kPage) {
      if (p[off] != static_cast<unsigned char>(i + off / kPage)) DataError("large_touch", p, off);
    }
    if (p[size - 1] != static_cast<unsigned char>(i)) DataError("large_touch", p, size - 1);
    free(p);
  }
  return n;
}

// Rounds of 4 short-lived threads, each a burst of 1024 small allocations (16..256 bytes, a window
// of 128 live) before it exits: per-thread allocator state is made and torn down all the time.
uint64_t ThreadChurn(uint64_t scale) {
  constexpr int kThreads = 4, kBurst = 1024, kWindow = 128;
  const uint64_t rounds = 150 * scale;
  for (uint64_t round = 0; round < rounds; ++round) {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([t, round] {
        void* win[kWindow] = {};
        Rng r{round * kThreads + static_cast<uint64_t>(t) + 1};
        for (int i = 0; i < kBurst; ++i) {
          void*& slot = win[i % kWindow];
          if (slot != nullptr) FreeBlock("thread_churn", slot);
          slot = NewBlock(16 + r.Next() % 241);
        }
        for (void* p : win) FreeBlock("thread_churn", p);
      });
    }
    for (auto& th : threads) th.join();
  }
  return rounds * kThreads * kBurst;
}

// One thread: stacks of 1..16 blocks of 8..128 bytes, allocated, written, checked and freed last
// in first out (the shape of a small program's temporary strings and nodes).
uint64_t SmallLoop(uint64_t scale) {
  const uint64_t n = 5000000 * scale;
  Rng r{5};
  uint64_t ops = 0;
  void* stack[16];
  size_t sizes[16];
  while (ops < n) {
    const int depth = 1 + static_cast<int>(r.Next() % 16);
    for (int d = 0; d < depth; ++d) {
      sizes[d] = 8 + r.Next() % 121;
      stack[d] = malloc(sizes[d]);
      Fill(stack[d], sizes[d], ops + d);
    }
    for (int d = depth - 1; d >= 0; --d) {
      Check("small_loop", stack[d], sizes[d], ops + d);
      free(stack[d]);
    }
    ops += depth;
  }
  return ops;
}

// A small program's whole run: factors 400,000 integers from 1,000,000 up by trial division into a
// std::vector, formats "N: f1 f2 ..." into a std::string and keeps the last 64 lines; each
// factorisation is multiplied back and each line's number read back.
uint64_t Factor(uint64_t scale) {
  const uint64_t first = 1000000, n = 400000 * scale;
  std::vector<std::string> lines(64);
  for (uint64_t x = first; x < first + n; ++x) {
    std::vector<uint64_t> factors;
    uint64_t rest = x;
    for (uint64_t d = 2; d * d <= rest; d += d == 2 ? 1 : 2) {
      while (rest % d == 0) {
        factors.push_back(d);
        rest /= d;
      }
    }
    if (rest > 1) factors.push_back(rest);
    uint64_t product = 1;
    std::string line = std::to_string(x) + ":";
    for (uint64_t f : factors) {
      product *= f;
      line += " " + std::to_string(f);
    }
    if (product != x) DataError("factor", factors.data(), 0);
    std::string& slot = lines[x % lines.size()];
    if (!slot.empty() && strtoull(slot.c_str(), nullptr, 10) != x - lines.size()) {
      DataError("factor", slot.data(), 0);
    }
    slot = std::move(line);
  }
  return n;
}

}  // namespace tiermem::bench::workload

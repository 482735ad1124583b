// The workloads of tiermem-malloc-workload that follow kinds of work of public allocator
// benchmarks (cross-thread fan-in, large touched blocks, thread churn, a small-size loop, a small
// program's whole run). Each checks every byte it wrote before it frees it.
#include <atomic>
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

// The byte of tag in every byte, written and compared 8 bytes at a time: cheap next to the
// allocator calls being measured, under -O2 as well.
void Fill(void* p, size_t n, uint64_t tag) { memset(p, static_cast<unsigned char>(tag), n); }

void Check(const char* workload, const void* p, size_t n, uint64_t tag) {
  const auto* b = static_cast<const unsigned char*>(p);
  const auto byte = static_cast<unsigned char>(tag);
  const uint64_t word = byte * 0x0101010101010101ull;
  uint64_t bad = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v;
    memcpy(&v, b + i, sizeof(v));
    bad |= v ^ word;
  }
  for (; i < n; ++i) bad |= b[i] ^ byte;
  if (bad == 0) return;
  for (i = 0; i < n; ++i) {
    if (b[i] != byte) DataError(workload, p, i);
  }
}

namespace {

constexpr size_t kPage = 4096;

// One producer, one consumer: thread src hands blocks to thread dst.
struct alignas(64) Ring {
  static constexpr uint64_t kSize = 1024;
  alignas(64) std::atomic<uint64_t> head{0};  // next slot the consumer takes
  alignas(64) std::atomic<uint64_t> tail{0};  // next slot the producer fills
  void* slots[kSize];
};

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
uint64_t FanIn(uint64_t scale) {
  constexpr int kThreads = 4;
  // A multiple of kThreads - 1, so that each thread receives exactly per_thread blocks.
  const uint64_t per_thread = 3 * 100000 * scale;
  std::vector<Ring> rings(kThreads * kThreads);  // rings[src * kThreads + dst]
  auto drain = [&](int t) {
    uint64_t got = 0;
    for (int src = 0; src < kThreads; ++src) {
      Ring& ring = rings[src * kThreads + t];
      const uint64_t head = ring.head.load(std::memory_order_relaxed);
      const uint64_t tail = ring.tail.load(std::memory_order_acquire);
      for (uint64_t i = head; i < tail; ++i) FreeBlock("fanin", ring.slots[i % Ring::kSize]);
      ring.head.store(tail, std::memory_order_release);
      got += tail - head;
    }
    return got;
  };
  auto work = [&](int t) {
    Rng r{static_cast<uint64_t>(t) + 1};
    uint64_t received = 0;
    for (uint64_t i = 0; i < per_thread; ++i) {
      Ring& ring = rings[t * kThreads + (t + 1 + static_cast<int>(i % (kThreads - 1))) % kThreads];
      void* p = NewBlock(16 + r.Next() % 497);
      const uint64_t tail = ring.tail.load(std::memory_order_relaxed);
      while (tail - ring.head.load(std::memory_order_acquire) >= Ring::kSize) {
        const uint64_t got = drain(t);  // the receiver is behind; keep freeing meanwhile
        if (got == 0) std::this_thread::yield();
        received += got;
      }
      ring.slots[tail % Ring::kSize] = p;
      ring.tail.store(tail + 1, std::memory_order_release);
      if (i % 16 == 15) received += drain(t);
    }
    while (received < per_thread) {
      const uint64_t got = drain(t);
      if (got == 0) std::this_thread::yield();
      received += got;
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(work, t);
  for (auto& th : threads) th.join();
  return per_thread * kThreads;
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

// A small program's whole run: factors the integers from 1,000,000 up by trial division into a
// std::vector, formats "N: f1 f2 ..." into a std::string and keeps the last 64 lines; each
// factorisation is multiplied back and each line's number read back.
uint64_t Factor(uint64_t scale) {
  const uint64_t first = 1000000, n = 100000 * scale;
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

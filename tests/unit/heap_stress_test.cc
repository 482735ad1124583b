// Stress: 8 threads x 10 million mixed operations over every entry point of the heap (malloc,
// calloc, realloc, reallocarray, memalign, posix_memalign, aligned_alloc, valloc, pvalloc,
// malloc_usable_size, free), a third of the frees made by another thread, and every block
// checked by content (a pattern derived from a unique tag over its head and its last byte) when
// it is reallocated or freed. Sanitizer builds run fewer operations; HEAP_STRESS_OPS (per
// thread) overrides.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "allocator/entry_points.h"
#include "allocator/heap_internal.h"
#include "base/tsan.h"
#include "tiermem/heap.hpp"

namespace tiermem {
namespace {

constexpr uint64_t kDefaultOps = kSanitizedBuild ? 200000 : 10000000;
constexpr int kThreads = 8;
constexpr int kSlots = 2048;

struct Block {
  unsigned char* p = nullptr;
  size_t size = 0;
  uint64_t tag = 0;
};

// The byte at offset i of a block with `tag`: the same function everywhere, so the head and the
// last byte never disagree.
inline unsigned char Pattern(uint64_t tag, size_t i) {
  return static_cast<unsigned char>((tag ^ (tag >> 8) ^ (tag >> 48)) + i * 13);
}

void Fill(const Block& b) {
  const size_t head = b.size < 64 ? b.size : 64;
  for (size_t i = 0; i < head; ++i) b.p[i] = Pattern(b.tag, i);
  if (b.size > 0) b.p[b.size - 1] = Pattern(b.tag, b.size - 1);
}

bool Check(const Block& b) {
  const size_t head = b.size < 64 ? b.size : 64;
  for (size_t i = 0; i < head; ++i) {
    if (b.p[i] != Pattern(b.tag, i)) return false;
  }
  return b.size == 0 || b.p[b.size - 1] == Pattern(b.tag, b.size - 1);
}

struct Mailbox {
  std::mutex mu;
  std::vector<Block> blocks;
};

TEST(HeapStressTest, EightThreadsMixedEntryPointsCrossThreadFreesContentChecked) {
  uint64_t ops = kDefaultOps;
  if (const char* e = getenv("HEAP_STRESS_OPS")) ops = strtoull(e, nullptr, 10);
  auto rt = Runtime::Start();
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  auto heap = Heap::Create(**rt, Tier::kAuto);
  ASSERT_TRUE(heap.ok()) << heap.status().ToString();
  alloc::HeapCore& h = *alloc::CoreOf(**heap);

  std::vector<Mailbox> mail(kThreads);
  std::atomic<uint64_t> corrupt{0}, failed{0}, done_ops{0};
  auto worker = [&](int id) {
    namespace e = alloc::entry;
    std::mt19937_64 rng(0x9e3779b97f4a7c15ull * (id + 1));
    std::vector<Block> slots(kSlots);
    std::vector<Block> outgoing;
    uint64_t next_tag = static_cast<uint64_t>(id) << 48;
    auto release = [&](Block& b, bool cross) {
      if (b.p == nullptr) return;
      if (!Check(b) && corrupt.fetch_add(1) < 5) {
        fprintf(stderr, "corrupt block %p size %zu tag %llx usable %zu\n", b.p, b.size,
                (unsigned long long)b.tag, alloc::entry::UsableSize(h, b.p));
      }
      if (cross) {
        outgoing.push_back(b);
        if (outgoing.size() >= 64) {
          Mailbox& m = mail[(id + 1 + rng() % (kThreads - 1)) % kThreads];
          std::lock_guard<std::mutex> lock(m.mu);
          m.blocks.insert(m.blocks.end(), outgoing.begin(), outgoing.end());
          outgoing.clear();
        }
      } else {
        e::Free(h, b.p);
      }
      b = Block{};
    };
    for (uint64_t op = 0; op < ops; ++op) {
      if ((op & 1023) == 0) {  // free what other threads sent us
        std::vector<Block> in;
        {
          std::lock_guard<std::mutex> lock(mail[id].mu);
          in.swap(mail[id].blocks);
        }
        for (Block& b : in) {
          if (!Check(b)) corrupt.fetch_add(1);
          e::Free(h, b.p);
        }
      }
      const uint64_t r = rng();
      Block& b = slots[r % kSlots];
      if (b.p != nullptr && (r >> 12) % 4 != 0) {
        const uint64_t kind = (r >> 20) % 8;
        if (kind == 0) {  // realloc, keeping the checked part
          if (!Check(b)) corrupt.fetch_add(1);
          size_t n = (r >> 32) % 2048;
          void* q = (r >> 40) % 2 ? e::Realloc(h, b.p, n) : e::ReallocArray(h, b.p, n / 8 + 1, 8);
          if ((r >> 40) % 2 == 0) n = (n / 8 + 1) * 8;
          if (q == nullptr && n != 0) {
            failed.fetch_add(1);
            continue;
          }
          b.p = static_cast<unsigned char*>(q);
          b.size = n;
          b.tag = ++next_tag;
          if (b.p != nullptr) Fill(b);
        } else if (kind == 1) {  // usable size covers the request
          if (e::UsableSize(h, b.p) < b.size) corrupt.fetch_add(1);
        } else {
              release(b, kind >= 6);
        }
        continue;
      }
      if (b.p != nullptr) release(b, false);
      // Mostly small, some medium, a few page runs.
      const uint64_t pick = (r >> 16) % 1000;
      size_t n = pick < 900 ? (r >> 32) % 512 : pick < 995 ? (r >> 32) % 65536 : (r >> 32) % (1 << 20);
      void* p = nullptr;
      size_t align = 0;
      switch ((r >> 8) % 16) {
        case 0: p = e::Calloc(h, 1, n); break;
        case 1: align = size_t{16} << ((r >> 44) % 10); p = e::Memalign(h, align, n); break;
        case 2: {
          align = size_t{8} << ((r >> 44) % 10);
          if (e::PosixMemalign(h, &p, align, n) != 0) p = nullptr;
          break;
        }
        case 3: align = size_t{16} << ((r >> 44) % 8); p = e::AlignedAlloc(h, align, n); break;
        case 4:
          if ((r >> 50) % 16 == 0) {
            align = 4096;
            p = (r >> 49) % 2 ? e::Valloc(h, n) : e::Pvalloc(h, n);
            break;
          }
          [[fallthrough]];
        default: p = e::Malloc(h, n); break;
      }
      if (p == nullptr) {
        failed.fetch_add(1);
        continue;
      }
      if (align != 0 && reinterpret_cast<uintptr_t>(p) % align != 0) corrupt.fetch_add(1);
      if ((r >> 8) % 16 == 0) {
        const size_t head = n < 256 ? n : 256;
        for (size_t i = 0; i < head; ++i) {
          if (static_cast<unsigned char*>(p)[i] != 0) corrupt.fetch_add(1);
        }
      }
      b.p = static_cast<unsigned char*>(p);
      b.size = n;
      b.tag = ++next_tag;
      Fill(b);
    }
    for (Block& b : slots) release(b, false);
    for (Block& b : outgoing) {
      if (!Check(b)) corrupt.fetch_add(1);
      e::Free(h, b.p);
    }
    done_ops.fetch_add(ops);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (auto& t : threads) t.join();
  for (Mailbox& m : mail) {
    for (Block& b : m.blocks) {
      if (!Check(b)) corrupt.fetch_add(1);
      alloc::entry::Free(h, b.p);
    }
  }
  EXPECT_EQ(corrupt.load(), 0u);
  EXPECT_EQ(failed.load(), 0u);
  EXPECT_EQ(done_ops.load(), ops * kThreads);
  // Every block is back: no page runs left, and once the heap is trimmed (the free blocks parked
  // between threads back in their spans) the spans left are the heap's working reserve, per
  // class: the one empty span kept against churn, this thread's carving span, and the carving
  // span each exited worker left behind for the next thread to adopt. (Without the trim the
  // parked blocks keep any number of spans: their count depends on which thread freed last.)
  EXPECT_EQ((*heap)->Usage().large_count, 0u);
  const uint64_t before = (*heap)->Usage().span_bytes;
  (*heap)->Trim();
  uint64_t reserve = 0;
  for (int c = 0; c < alloc::kNumClasses; ++c) reserve += (kThreads + 2) * alloc::SpanGranules(c) * alloc::kGranule;
  EXPECT_LE((*heap)->Usage().span_bytes, reserve) << "before the trim: " << before;
}

}  // namespace
}  // namespace tiermem

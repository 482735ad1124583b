// tiermem-malloc-workload NAME [SCALE]: one allocator workload, run in its own process by
// `tiermem-bench malloc` (under glibc, or LD_PRELOAD'ed jemalloc, mimalloc or tiermem). Prints
// "OPS SECONDS PEAK_RSS START_RSS" on stdout: the process's own peak RSS (VmHWM) at the end and
// its RSS when main started (libraries loaded, allocator started), in bytes. The parent's
// ru_maxrss would not do: it also counts the parent's RSS from before the exec. It links nothing but libc/libstdc++, so the allocator under test is
// the only one in the process. Workloads:
//   small        one thread: malloc/free of 16..256 bytes with a window of 64 live blocks
//   prodcons     a producer thread allocates 16..512 bytes, a consumer thread frees them
//   larson       4 threads replace random slots (16..1024 bytes); every round, each thread's
//                slots pass to the next thread, which frees them (larson-style churn)
//   realloc      buffers grown by realloc in ~12% steps from 16 bytes to 1 MiB
//   mixed        two threads: sizes 16 B..64 KiB (1% up to 512 KiB), window of 4096 blocks
// and, in malloc_workload_more.cc, each checking every byte it wrote:
//   fanin        4 threads each allocate 16..512 bytes for the others in rounds, while freeing
//                what the others made for them the round before (all frees cross-thread)
//   large_touch  blocks of 5..25 MiB, one at a time: every page written, read back, freed
//   thread_churn rounds of 4 threads that each make a burst of 1024 small blocks and exit
//   small_loop   one thread: stacks of 1..16 blocks of 8..128 bytes, freed last in first out
//   factor       a small program: factors integers into vectors and formats them as strings
// and, in malloc_workload_patterns.cc, each checking its bytes:
//   remote_free  64-byte blocks allocated by one thread and freed by another, one pair of
//                threads and then two pairs
//   false_share  per-thread 8..64-byte objects written over and over, one thread and then two
//   small_churn  one thread: trees of small nodes built and freed, numbers of 1..64 limbs
//   thread_loop  2 threads, each replacing random blocks of a working set of 1024 (4 B..32 KiB,
//                small sizes far more likely), after glibc's threaded malloc benchmark
// and, not run by default, thread_loop_bare: thread_loop without touching the blocks (the
// allocator's own cost on that pattern).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench/malloc_workload.h"

namespace {

using tiermem::bench::workload::Rng;

uint64_t Small(uint64_t scale) {
  const uint64_t n = 20000000 * scale;
  void* win[64] = {};
  Rng r{42};
  for (uint64_t i = 0; i < n; ++i) {
    size_t k = i & 63;
    free(win[k]);
    win[k] = malloc(16 + r.Next() % 241);
    static_cast<char*>(win[k])[0] = 1;
  }
  for (void* p : win) free(p);
  return n;
}

uint64_t ProdCons(uint64_t scale) {
  const uint64_t n = 5000000 * scale;
  constexpr size_t kRing = 4096;
  std::vector<std::atomic<void*>> ring(kRing);
  std::thread producer([&] {
    Rng r{7};
    for (uint64_t i = 0; i < n; ++i) {
      void* p = malloc(16 + r.Next() % 497);
      static_cast<char*>(p)[0] = 1;
      std::atomic<void*>& slot = ring[i % kRing];
      while (slot.load(std::memory_order_acquire) != nullptr) std::this_thread::yield();
      slot.store(p, std::memory_order_release);
    }
  });
  std::thread consumer([&] {
    for (uint64_t i = 0; i < n; ++i) {
      std::atomic<void*>& slot = ring[i % kRing];
      void* p;
      while ((p = slot.load(std::memory_order_acquire)) == nullptr) std::this_thread::yield();
      slot.store(nullptr, std::memory_order_release);
      free(p);
    }
  });
  producer.join();
  consumer.join();
  return n;
}

uint64_t Larson(uint64_t scale) {
  constexpr int kThreads = 4, kSlots = 1000, kRounds = 50;
  const uint64_t per_round = 40000 * scale;
  std::vector<std::vector<void*>> slots(kThreads, std::vector<void*>(kSlots));
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::thread> th;
    for (int t = 0; t < kThreads; ++t) {
      // Thread t works on (and frees from) the slots thread t-1 filled last round.
      th.emplace_back([&, t, round] {
        std::vector<void*>& s = slots[(t + round) % kThreads];
        Rng r{static_cast<uint64_t>(t * 1000 + round + 1)};
        for (uint64_t i = 0; i < per_round; ++i) {
          size_t k = r.Next() % kSlots;
          free(s[k]);
          s[k] = malloc(16 + r.Next() % 1009);
          static_cast<char*>(s[k])[0] = 1;
        }
      });
    }
    for (auto& x : th) x.join();
  }
  for (auto& s : slots) {
    for (void* p : s) free(p);
  }
  return per_round * kThreads * kRounds;
}

uint64_t Realloc(uint64_t scale) {
  const int reps = static_cast<int>(200 * scale);
  uint64_t ops = 0;
  std::vector<char*> bufs(8);
  for (int rep = 0; rep < reps; ++rep) {
    for (auto& b : bufs) b = nullptr;
    for (size_t n = 16; n <= (1u << 20); n += n / 8 + 1) {
      for (auto& b : bufs) {
        b = static_cast<char*>(realloc(b, n));
        b[n - 1] = 1;
        ++ops;
      }
    }
    for (auto& b : bufs) free(b);
  }
  return ops;
}

uint64_t Mixed(uint64_t scale) {
  const uint64_t per = 2000000 * scale;
  auto work = [per](uint64_t seed) {
    std::vector<void*> win(4096);
    Rng r{seed};
    for (uint64_t i = 0; i < per; ++i) {
      size_t k = r.Next() % win.size();
      free(win[k]);
      uint64_t x = r.Next();
      size_t n = x % 100 == 0 ? 16 + x % (512 * 1024) : 16 + (x >> 8) % (1u << (4 + (x >> 40) % 13));
      win[k] = malloc(n);
      memset(win[k], 1, n < 64 ? n : 64);
    }
    for (void* p : win) free(p);
  };
  std::thread a(work, 1), b(work, 2);
  a.join();
  b.join();
  return 2 * per;
}

// A "VmHWM:" or "VmRSS:" line of /proc/self/status, in bytes (0 if absent).
uint64_t StatusBytes(const char* key) {
  FILE* f = fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  uint64_t kib = 0;
  const size_t n = strlen(key);
  while (fgets(line, sizeof(line), f) != nullptr) {
    if (strncmp(line, key, n) == 0) {
      kib = strtoull(line + n, nullptr, 10);
      break;
    }
  }
  fclose(f);
  return kib * 1024;
}

}  // namespace

int main(int argc, char** argv) {
  namespace w = tiermem::bench::workload;
  struct Workload {
    const char* name;
    uint64_t (*run)(uint64_t scale);
  };
  static constexpr Workload kWorkloads[] = {
      {"small", Small},       {"prodcons", ProdCons},     {"larson", Larson},
      {"realloc", Realloc},   {"mixed", Mixed},           {"fanin", w::FanIn},
      {"large_touch", w::LargeTouch}, {"thread_churn", w::ThreadChurn},
      {"small_loop", w::SmallLoop},   {"factor", w::Factor},
      {"remote_free", w::RemoteFree}, {"false_share", w::FalseShare},
      {"small_churn", w::SmallChurn}, {"thread_loop", w::ThreadLoop},
      {"thread_loop_bare", w::ThreadLoopBare},
  };
  const Workload* workload = nullptr;
  for (const Workload& k : kWorkloads) {
    if (argc >= 2 && strcmp(argv[1], k.name) == 0) workload = &k;
  }
  if (workload == nullptr) {
    fprintf(stderr, "usage: tiermem-malloc-workload NAME [scale], NAME one of:");
    for (const Workload& k : kWorkloads) fprintf(stderr, " %s", k.name);
    fprintf(stderr, "\n");
    return 2;
  }
  const uint64_t scale = argc > 2 ? strtoull(argv[2], nullptr, 10) : 1;
  const uint64_t start_rss = StatusBytes("VmRSS:");
  auto t0 = std::chrono::steady_clock::now();
  const uint64_t ops = workload->run(scale);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  printf("%llu %.6f %llu %llu\n", static_cast<unsigned long long>(ops), s,
         static_cast<unsigned long long>(StatusBytes("VmHWM:")),
         static_cast<unsigned long long>(start_rss));
  return 0;
}

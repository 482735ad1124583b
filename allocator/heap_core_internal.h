// Internals shared by heap_core.cc (thread caches, central lists, the public operations, fork)
// and page_heap.cc (segments, spans, page runs and the run cache). Not for other layers.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <mutex>

#include "allocator/heap_core.h"
#include "runtime/core/heap_runtime.h"

namespace tiermem::alloc {

struct Segment {
  char* run = nullptr;   // what the runtime returned (Free takes this)
  char* base = nullptr;  // first granule (64 KiB aligned)
  uint64_t used_mask = 0;
  uint64_t dirty_mask = 0;  // free granules whose pages were not discarded (see FreeSpan)
  Segment* next = nullptr;
};

inline constexpr int kSegmentGranules = 64;  // 4 MiB of spans per segment
inline constexpr size_t kSegmentBytes = kSegmentGranules * kGranule;
// Freed page runs kept with their pages (RunCache): at most this much, for at most this long.
// 64 MiB holds two or three blocks of the 5-25 MiB a program allocates and frees in a loop; at
// 16 MiB every such run over 16 MiB went back and the next one was faulted in afresh.
inline constexpr uint64_t kRunCacheBytes = 64 << 20;
inline constexpr uint64_t kRunCacheAgeNs = 1000000000;
// Empty spans keep their pages up to this much per heap (reused first, without page faults);
// beyond it a freed span's pages are discarded at once.
inline constexpr uint64_t kMaxDirtyBytes = 4 << 20;

// Thread cache limits, in objects of a class (see thread_cache.cc for how a class moves between
// them). CacheLimit: two batches, at most 256 KiB; what a thread that has refilled the class
// from the central list may hold. A transfer batch may be this long (a thread's whole list,
// released at its exit), so a refill always fits the list.
inline constexpr uint32_t kMaxCacheBytes = 256 * 1024;
inline constexpr uint32_t CacheLimit(int cls) {
  const uint32_t by_bytes = kMaxCacheBytes / static_cast<uint32_t>(ClassSize(cls));
  const uint32_t two = 2 * BatchSize(cls);
  return by_bytes < 2 ? 2 : by_bytes < two ? by_bytes : two;
}
// GrowLimit: a class refilled again and again (a thread that allocates and frees it at random)
// grows its limit by a batch per refill up to this. Classes above 2 KiB move 2-16 objects per
// batch, so their lists hit both ends every few operations; 512 KiB of objects (at most eight
// batches) makes that rarer (mixed: central operations 116k -> ~30k per 4M). Smaller classes
// (full batches of 32) grow to 256 KiB of objects: a thread that builds and drops thousands of
// small objects of a class at a time (a tree, a number program's limbs) otherwise moved every
// 32 of them through the central list twice, and a refill also walked a span's list. Only a
// thread that keeps allocating the class grows it; a thread that only frees blocks of other
// threads keeps none of them (remote lists).
inline constexpr uint32_t kMaxGrowBytes = 512 * 1024;
inline constexpr uint32_t kMaxSmallGrowBytes = 256 * 1024;
inline constexpr uint32_t GrowLimit(int cls) {
  const bool full_batches = BatchSize(cls) >= 32;
  const uint32_t by_bytes =
      (full_batches ? kMaxSmallGrowBytes : kMaxGrowBytes) / static_cast<uint32_t>(ClassSize(cls));
  const uint32_t most = full_batches ? by_bytes : 8 * BatchSize(cls);
  const uint32_t grow = by_bytes < most ? by_bytes : most;
  return grow > CacheLimit(cls) ? grow : CacheLimit(cls);
}

// Memory kept for reuse is allocated memory to the runtime: under a DRAM limit
// (TIERMEM_DRAM_LIMIT) it counts in DRAM (resident, flagged free: never evicted), so it must not
// push the program's own data to slower tiers. It may keep a sixteenth of the limit, or half the
// room DRAM has now where that is more: a program well below its limit keeps as much as without
// one (a fixed sixteenth made every large block of the malloc workload `mixed` a fresh run, an
// mbind and a drop, at three times its peak RSS), and as DRAM fills the bound comes down to the
// sixteenth. The room is a moment's figure; the bound is read where memory is put back.
inline uint64_t RetainBound(const HeapRuntime* rt, uint64_t bytes) {
  const uint64_t limit = rt->options().dram_limit;
  if (limit == 0) return bytes;
  const uint64_t room = rt->DramRoom() / 2, floor = limit / 16;
  const uint64_t bound = room > floor ? room : floor;
  return bound < bytes ? bound : bytes;
}

inline uint64_t GranuleBits(uint32_t first, uint32_t n) {
  return (n == 64 ? ~0ull : ((1ull << n) - 1)) << first;
}

// Serialises calls into the runtime against fork (readers: heap calls; writer: ForkPrepare), so
// a child never inherits a runtime lock held by a thread that does not exist there.
extern pthread_rwlock_t g_gate;

// Scope of a call from the heap into the runtime: the thread bypasses the heap meanwhile (the
// runtime may allocate) and holds the fork gate for reading.
class RuntimeCall {
 public:
  RuntimeCall() {
    EnterBypass();
    pthread_rwlock_rdlock(&g_gate);
  }
  ~RuntimeCall() {
    pthread_rwlock_unlock(&g_gate);
    LeaveBypass();
  }
  RuntimeCall(const RuntimeCall&) = delete;
  RuntimeCall& operator=(const RuntimeCall&) = delete;
};

// The process's heaps (slots), and the thread caches of exited threads.
struct HeapRegistry {
  std::mutex mu;  // slots, generations
  std::atomic<HeapCore*> heaps[kMaxHeaps];
  uint32_t gens[kMaxHeaps];
  std::mutex tc_mu;  // free and parked thread caches
  ThreadCache* free_tcs;
  // Caches of the primary heap whose threads exited, with their class lists as they were: the
  // next new thread takes one whole (see HeapCore::SlowCache). At most kMaxParked.
  ThreadCache* parked;
  uint32_t nparked;
  std::atomic<bool> key_ready;
  pthread_key_t key;
};
extern HeapRegistry g_reg;
// The primary heap (HeapCore::CreatePrimary), or nullptr; set once, never cleared.
extern std::atomic<HeapCore*> g_primary;

// Creates the pthread key whose destructor flushes an exiting thread's caches (thread_cache.cc).
void EnsureKey();

inline ThreadCache* HeapCore::Cache() {
  ThreadCache* tc = t_thread.cache[slot_];
  if (__builtin_expect(tc != nullptr && tc->gen == gen_, 1)) return tc;
  return SlowCache();
}

// HeapRuntime::Allocate, spilling a kAuto heap's memory to the remote tier when its NUMA tiers
// are at their limits (page_heap.cc). Call inside a RuntimeCall.
StatusOr<void*> RuntimeAllocate(HeapRuntime* rt, size_t bytes, Tier tier, uint32_t flags);

}  // namespace tiermem::alloc

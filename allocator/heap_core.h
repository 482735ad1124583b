// HeapCore: the tiered heap. One HeapCore allocates on one tier (or kAuto) from one runtime.
//
//   thread cache (per thread, per heap)  --batches-->  central list (per size class, one mutex)
//        |  no lock on the fast path                        |  spans with free objects,
//        |                                                   |  a transfer cache of whole batches
//        v                                                   v
//   large requests (> kMaxSmall): page runs       page heap: 4 MiB segments from the runtime,
//   straight from HeapRuntime::Allocate          cut into spans of 64 KiB granules
//
// Each thread carves fresh objects from spans of its own (one per class: ThreadCache::carving,
// Span::owner), so objects handed to two threads share no cache line. A free of a block of the
// thread's own span goes to that thread's cache (no lock); a free of another thread's block (or
// of a span whose thread exited) goes to the thread's remote list of its class and on to the
// central list a batch at a time (one lock per batch), tagged with its blocks' owner:
// the owner's next refill takes it back before other batches (HeapCore::PickBatch).
// A thread never hands out a block of another thread's lines that it freed. Objects flow back
// to their span when a batch finds the transfer cache full.
// Empty spans are discarded (MADV_DONTNEED) and empty segments go back to the runtime, so dead
// pages are never migrated or written out.
//
// Thread safety: every method may be called from any thread. Not async-signal-safe.
// Failure: methods that allocate return nullptr and set errno (ENOMEM, EINVAL); none throws.
// Re-entrancy: while the heap calls into the runtime, InRuntimeCall() is true on that thread;
// the preload library then serves that thread's mallocs from glibc, so the runtime may allocate.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "allocator/run_cache.h"
#include "allocator/size_classes.h"
#include "allocator/span_map.h"
#include "tiermem/tiermem.hpp"

namespace tiermem {
class HeapRuntime;  // runtime/core/heap_runtime.h
}  // namespace tiermem

namespace tiermem::alloc {

class HeapCore;
struct Segment;
struct ThreadCache;

inline constexpr int kMaxHeaps = 16;  // live HeapCores per process (thread-cache slots)

struct ClassCache;

// ThreadState::primary of a thread without a usable primary cache: a cache whose lists are all
// empty and which nothing writes (a pop finds nothing and takes the slow path; no span's
// local_list points into it; the slow paths compare with it), so that malloc's fast path needs
// no test for a missing cache.
extern ThreadCache g_no_cache;
inline ThreadCache* NoCache() { return &g_no_cache; }

// Span::owner of a span no thread carves: an address no ThreadCache has.
inline ThreadCache* NoOwner() { return reinterpret_cast<ThreadCache*>(alignof(void*)); }
// Span::local_list of a primary heap's span without an owner: not null (its frees may take a
// remote list) and no address inside a ThreadCache (no free keeps its blocks).
inline ClassCache* NoOwnerList() { return reinterpret_cast<ClassCache*>(alignof(void*)); }

struct Span {
  // Set before the span is published in the span map; constant while it is live.
  char* start = nullptr;
  uint32_t obj_size = 0;
  uint32_t capacity = 0;
  uint64_t div_magic = 0;  // ceil(2^40 / obj_size): offset / obj_size without a division
  int cls = 0;
  uint32_t granules = 0;
  HeapCore* heap = nullptr;
  int heap_slot = 0;      // heap->slot_ and heap->gen_, here so that free's fast path finds the
  uint32_t heap_gen = 0;  // thread cache without reading the HeapCore
  // The preload library's free pushes a block straight onto this list while the freeing thread
  // is the span's owner (HeapCore::TryFreePrimary: one load and one compare, where a test of
  // primary_off and a compare of `owner` were two loads and two branches). For a span of the
  // primary heap that has handed out no aligned block: its owner's list of its class
  // (&owner->cls[cls]), or NoOwnerList() while it has no owner (NoOwner()); nullptr for any other
  // span, whose frees take the slow path. Set by AllocSpan before the span is published, then
  // written only under the class lock, with `owner` (HeapCore::SetOwner) and by MarkAligned.
  // Threads: read without the lock on free, which pushes onto it only when it lies inside the
  // freeing thread's own cache, so no thread ever writes another's list; a stale value (the
  // owner changed since) keeps or passes on one block as a stale `owner` would.
  std::atomic<ClassCache*> local_list{nullptr};
  // The thread cache whose thread carves this span's fresh objects (ThreadCache::carving), or
  // NoOwner() once that thread left (never nullptr). A free by another thread does not keep the
  // block in its own cache (it would hand it out next, beside the owner's live objects: false
  // sharing) but gathers it on its class's remote list, which goes back to the central list in
  // whole batches.
  // Written under the class lock; read without it on free: a stale value only sends one block
  // to the other of two lists, both correct (any block may be in any thread's lists).
  std::atomic<ThreadCache*> owner{NoOwner()};
  // Set once Memalign hands out a block of this span: only then does a free round the pointer
  // down to its object's start (ObjectStart), so a pointer inside an aligned block frees it.
  // The blocks of other spans are freed by the pointer malloc returned, as is.
  std::atomic<bool> aligned{false};
  Segment* segment = nullptr;
  uint32_t first_granule = 0;
  // Guarded by the central list lock of `cls`.
  void* free_list = nullptr;
  uint32_t used = 0;    // objects handed out (to caches, transfer cache or the program)
  uint32_t carved = 0;  // objects [0, carved) have been handed out at least once
  Span* prev = nullptr;
  Span* next = nullptr;
  bool listed = false;   // on the central list's `nonempty` list
  bool carving = false;  // some ThreadCache::carving holds it: never freed while so
  bool orphan = false;   // uncarved objects left by an exited thread: listed, any thread adopts it

  char* ObjectStart(const void* p) const {
    const uint64_t off = static_cast<uint64_t>(static_cast<const char*>(p) - start);
    return start + ((off * div_magic) >> 40) * obj_size;
  }
};

struct HeapStats {
  uint64_t segment_bytes = 0;  // reserved for spans (4 MiB segments)
  uint64_t span_bytes = 0;     // in spans now
  uint64_t large_bytes = 0;    // in page runs for large requests
  uint64_t large_count = 0;
  uint64_t cached_run_bytes = 0;  // freed page runs kept for reuse (RunCache)
};

// The heap's memory by what holds it (the preload library's jemalloc-style statistics, mallctl
// "stats.*"). Each class is read under its own lock and the page heap under its lock, one lock at
// a time: every figure is exact for its part at the moment it was read, not for the heap as one.
struct HeapFootprint {
  HeapStats stats;  // segment, span and large bytes read together under the page heap lock
  // Small blocks handed out and not back: live blocks, plus free blocks in the caches of threads
  // other than the caller (counted as live, as jemalloc counts its thread caches; at most
  // 256 KiB per class per thread, 512 KiB above 2 KiB: GrowLimit; and their remote lists, at
  // most a batch per class). Free blocks in the caller's cache and remote lists and in the
  // transfer cache are not counted. Sizes are class sizes (malloc_usable_size).
  uint64_t small_block_bytes = 0;
  uint64_t dirty_bytes = 0;  // free span granules that kept their pages
};

// The preload library is loaded at start-up, so its thread-locals can use the static TLS block
// (no __tls_get_addr call on the fast path). libtiermem.so may be dlopen'ed: default model there.
#if defined(TIERMEM_PRELOAD_BUILD)
#define TM_TLS __attribute__((tls_model("initial-exec")))
#else
#define TM_TLS
#endif

// Per-thread heap state, one constant-initialised thread-local (no TLS constructor, usable
// inside malloc): the fast paths read `primary`, `cache` and `bypass` from the same few lines.
struct ThreadState {
  // This thread's cache of the primary heap (HeapCore::CreatePrimary) while the thread may use
  // it without further checks; NoCache() before the cache exists, while bypass > 0, and once the
  // thread is exiting. The preload library's malloc and free read only this.
  ThreadCache* primary;
  ThreadCache* cache[kMaxHeaps];
  // > 0 while this thread must not enter the heap: inside a runtime call made by the heap, and
  // (preload library) on the runtime's own threads and while the runtime starts. Changed only
  // through EnterBypass / LeaveBypass, which keep `primary` null meanwhile.
  int bypass;
  uint8_t exiting;  // the pthread key destructor ran: no caching any more
  uint8_t key_set;
};
extern constinit thread_local ThreadState t_thread TM_TLS;

// True on a thread that must not enter the heap (see ThreadState::bypass).
inline bool InRuntimeCall() { return t_thread.bypass != 0; }

// Per thread, per heap: a singly linked free list per class (see heap_core.cc). `room` is
// max - (objects on the list): one decrement and sign test on free, one increment on malloc.
struct ClassCache {
  void* head;
  int32_t room;
  uint32_t max;
  uint32_t count() const { return max - static_cast<uint32_t>(room); }
};
// Page runs that this thread freed, kept for its next large request without a lock (the
// primary heap only; see HeapCore::KeepLocal). Their bytes still count as the heap's large
// bytes, as the blocks in a thread's class lists count as handed out.
inline constexpr int kLocalRuns = 8;
inline constexpr uint64_t kLocalRunMaxBytes = 512 * 1024;      // larger runs: the run cache
inline constexpr uint64_t kLocalRunsMaxBytes = 2 * 1024 * 1024;  // per thread
struct LocalRuns {
  char* start[kLocalRuns];
  uint32_t pages[kLocalRuns];
  uint32_t n;
  uint32_t total_pages;
};
// Blocks of spans another thread owns (Span::owner), freed by this thread: handed back to the
// central list in batches of BatchSize, never reused by this thread. `room` is BatchSize less
// the blocks on the list: the batch goes when it reaches 0.
struct RemoteList {
  void* head;
  int32_t room;
  uint32_t count(int cls) const { return BatchSize(cls) - static_cast<uint32_t>(room); }
};
struct ThreadCache {
  uint32_t gen;  // the generation of the heap slot this cache belongs to
  ThreadCache* next_free;
  ClassCache cls[kNumClasses];
  LocalRuns runs;
  // Per class, the span whose fresh objects this thread carves, alone (its owner): no other
  // thread's object is ever carved from the cache lines of this thread's. Guarded by the class
  // lock (the thread itself reads and writes it only in Fetch and at exit, under that lock).
  Span* carving[kNumClasses];
  RemoteList remote[kNumClasses];
};
// The byte offset of a class's list in a ThreadCache.
inline constexpr intptr_t PrimaryOffset(int cls) {
  return static_cast<intptr_t>(offsetof(ThreadCache, cls) + sizeof(ClassCache) * cls);
}
// PrimaryOffset of the class of each request size up to kClassTableMax, by ceil(size / 16), for
// the malloc fast path (kClassTable's classes, as offsets).
struct ListOffsets {
  uint16_t off[kClassTableMax / 16 + 1];
};
inline constexpr ListOffsets kListOffsets = [] {
  ListOffsets t{};
  for (size_t i = 0; i <= kClassTableMax / 16; ++i) {
    t.off[i] = static_cast<uint16_t>(PrimaryOffset(kClassTable.cls[i]));
  }
  return t;
}();

class HeapCore {
 public:
  // Creates a heap in `storage` (static storage in the preload library); nullptr when all
  // kMaxHeaps slots are taken.
  static HeapCore* Create(void* storage, HeapRuntime* rt, Tier tier, uint32_t alloc_flags);
  // The same, as the process's primary heap (the preload library's): its thread caches are
  // reached through t_thread.primary, without the slot and generation checks (TryMallocPrimary,
  // TryFreePrimary). At most one per process; nullptr when there is one already. Never destroyed.
  static HeapCore* CreatePrimary(void* storage, HeapRuntime* rt, Tier tier,
                                 uint32_t alloc_flags);
  // Releases every segment to the runtime and the slot. No block of this heap may be used after.
  // Not for the primary heap (aborts with a message).
  void Destroy();

  void* Malloc(size_t size);
  void* Calloc(size_t n, size_t size);
  void* Realloc(void* p, size_t size);  // glibc semantics: size 0 frees and returns nullptr
  // `align` must be a power of two (callers check); any size.
  void* Memalign(size_t align, size_t size);
  // Frees a block of any HeapCore of the process whose runtime is `rt`; returns false when p is
  // not one (nothing is done then).
  static bool FreeAny(void* p, HeapRuntime* rt);
  // Frees p, a small block whose span the caller looked up (GlobalSpanMap().Lookup(p)).
  static void FreeInSpan(Span* span, void* p) {
    if (!TryFreeFast(span, p)) span->heap->FreeSmall(span, p);
  }
  // Usable bytes from p to the end of its block; 0 when p is not a heap block.
  static size_t UsableSizeAny(const void* p, HeapRuntime* rt);
  // Whether p lies in a block of this heap (small), or in a page run of this heap's runtime.
  bool Owns(const void* p) const;
  void Free(void* p) { (void)FreeAny(p, rt_); }

  HeapStats Stats() const;
  // Takes each class lock in turn, then the page heap lock: for statistics, not for fast paths.
  HeapFootprint Footprint();
  // The usable size Memalign(align, size) gives (Malloc for align <= 16): exact for small blocks;
  // for a page run, the size rounded up to pages (a reused cached run, or an aligned run, may
  // give more). 0 when the request cannot be met. `align` is a power of two, or 0 for none.
  static size_t UsableSizeFor(size_t size, size_t align, size_t page_size);
  HeapRuntime* runtime() const { return rt_; }
  Tier tier() const { return tier_; }

  // fork(): lock everything before, unlock after (in parent and child). Registered once.
  static void ForkPrepare();
  static void ForkParent();
  static void UnlockHeapsAfterFork();
  static void ForkChild();

  // Flushes the calling thread's caches of every heap to the central lists (thread exit, tests).
  static void FlushThreadCaches();
  // Returns what this heap keeps for reuse to the page heap (Heap::Trim): the free blocks
  // parked in the central transfer slots go back to their spans, and spans left empty are
  // freed (one empty span per class stays, as ReleaseToSpans keeps it); cached page runs are
  // released. Blocks in threads' caches stay there (FlushThreadCaches gives this thread's).
  void Trim();

  // Inline fast paths (the preload library's malloc and free) over the primary heap: pop from /
  // push to this thread's cache. They return nullptr / false when the slow path must run (no
  // usable primary cache: not created yet, a bypassed thread, an exiting one; a size that is not
  // small; an empty list; a span of another heap or one that handed out aligned blocks); the
  // caller then calls Malloc / FreeInSpan, after checking InRuntimeCall().
  static void* TryMallocPrimary(size_t size) {
    ThreadCache* tc = t_thread.primary;  // NoCache()'s lists are empty: no test for it
    if (__builtin_expect(size <= kClassTableMax, 1)) {
      // The list's byte offset straight from the table: no index arithmetic on the common path.
      return Pop(reinterpret_cast<ClassCache*>(reinterpret_cast<char*>(tc) +
                                               kListOffsets.off[(size + 15) >> 4]));
    }
    if (size > kMaxSmall) return nullptr;
    return Pop(&tc->cls[SizeClassSlow(size)]);
  }
  static bool TryFreePrimary(Span* span, void* p) {
    ThreadCache* tc = t_thread.primary;
    ClassCache* cc = span->local_list.load(std::memory_order_relaxed);
    // One unsigned compare: cc lies inside tc only when it is tc's list of the span's class
    // (local_list is &owner->cls[cls], and thread caches do not overlap), i.e. tc owns the span.
    // NoCache(), a span without an owner (NoOwnerList) or off the fast path (nullptr) fails it.
    if (__builtin_expect(reinterpret_cast<uintptr_t>(cc) - reinterpret_cast<uintptr_t>(tc) <
                             sizeof(ThreadCache), 1)) {
      Push(span, cc, p);
      return true;
    }
    if (__builtin_expect(cc == nullptr || tc == NoCache(), 0)) return false;
    PushRemote(tc, span->cls, p);
    return true;
  }
  // Any heap: this thread's cache of the span's heap, checked by slot and generation.
  static bool TryFreeFast(Span* span, void* p) {
    ThreadCache* tc = t_thread.cache[span->heap_slot];
    if (__builtin_expect(tc == nullptr || tc->gen != span->heap_gen, 0)) return false;
    if (__builtin_expect(!Local(span, tc), 0)) return false;
    if (__builtin_expect(span->aligned.load(std::memory_order_relaxed), 0)) {
      p = span->ObjectStart(p);  // an aligned block may be freed by a pointer inside its object
    }
    Push(span, &tc->cls[span->cls], p);
    return true;
  }

  // The thread's leaving its last bypass scope: `primary` again when the cache is current.
  static void ResumePrimary();
  // Once Memalign hands out a block of `span`: frees of its blocks round the pointer down to the
  // object start from now on (Span::aligned), so they leave the primary fast path.
  void MarkAligned(Span* span);

 private:
  // Whether a free by the thread of `tc` keeps the block: the span is its own. A block of a span
  // no thread owns (its carver exited) takes the remote list too: one compare on every free.
  static bool Local(const Span* span, const ThreadCache* tc) {
    return span->owner.load(std::memory_order_relaxed) == tc;
  }
  static void* Pop(ClassCache* cc) {
    void* p = cc->head;
    if (__builtin_expect(p != nullptr, 1)) {
      void* next = *static_cast<void**>(p);
      cc->head = next;
      // The next block's link is read by the next Pop of this class; a list of blocks freed
      // long ago is scattered, so start that read now (a prefetch of nullptr does nothing).
      __builtin_prefetch(next, 1, 3);
      ++cc->room;
    }
    return p;
  }
  static void PushRemote(ThreadCache* tc, int cls, void* p) {
    RemoteList& r = tc->remote[cls];
    *static_cast<void**>(p) = r.head;
    r.head = p;
    if (__builtin_expect(--r.room == 0, 0)) FlushRemoteClass(tc, cls);
  }
  static void Push(Span* span, ClassCache* cc, void* p) {
    *static_cast<void**>(p) = cc->head;
    cc->head = p;
    if (__builtin_expect(--cc->room < 0, 0)) Overflow(span, cc);
  }
  // A list past its limit (the list of span's class): a batch goes to the central list.
  __attribute__((noinline)) static void Overflow(Span* span, ClassCache* cc);

 private:
  struct Batch {
    void* head;
    uint32_t n;
    // For a remote batch whose first two blocks have one Span::owner, that owner; nullptr (a
    // mixed batch, a thread's own overflow, an exited owner): no thread's first.
    ThreadCache* owner;
  };
  static constexpr int kMaxTransfer = 64;
  // A class's central state is one cache line; its transfer slots (full batches) are kept apart
  // in transfer_, which the constructor does not write, so a heap touches the slots' pages only
  // for the classes that use them (the preload heap lives in zeroed static storage).
  struct alignas(64) Central {
    std::mutex mu;
    Span* nonempty = nullptr;
    uint32_t empty_spans = 0;
    uint16_t max_slots = 0;  // <= kMaxTransfer
    uint16_t nslots = 0;     // full batches in transfer_[class]
    uint64_t out = 0;        // objects taken from spans and not yet back in one (Footprint)
  };
  // One cache line where std::mutex is glibc's 40 bytes (x86-64); aarch64's 48 make it two.
  static_assert(sizeof(std::mutex) > 40 || sizeof(Central) == 64, "Central outgrew a cache line");

  HeapCore(HeapRuntime* rt, Tier tier, uint32_t flags, int slot, uint32_t gen);

  // Under the class lock, c.nslots > 0: the transfer slot a refill by `tc` takes (see there).
  uint32_t PickBatch(const Central& c, int cls, const ThreadCache* tc) const;

  ThreadCache* Cache();  // nullptr once this thread is exiting
  ThreadCache* SlowCache();
  void* MallocSmall(int cls);
  void* RefillAndPop(ThreadCache* tc, int cls);
  void FreeSmall(Span* span, void* p);
  void FlushClass(ClassCache* cc, int cls, uint32_t n);
  void FlushCache(ThreadCache* tc);
  void FlushRemote(ThreadCache* tc);  // the remote lists to the central lists

  // Central list: up to n objects as a list linked through their first word; returns the count.
  // `tc`: the calling thread's cache, whose carving span gives fresh objects; nullptr for an
  // exiting thread (n == 1).
  uint32_t Fetch(int cls, uint32_t n, void** head, ThreadCache* tc);
  // Under the class lock: objects taken from the spans on the list (freed ones; an orphan's
  // fresh ones for an exiting thread, or the orphan itself as tc's new carving span).
  void TakeListed(Central& c, int cls, uint32_t n, ThreadCache* tc, void** head, uint32_t* got,
                  uint32_t* carve_left);
  // Under the class lock: fresh objects from tc's carving span (a new one when it has none left).
  void TakeCarved(Central& c, int cls, uint32_t n, ThreadCache* tc, void** head, uint32_t* got,
                  uint32_t* carve_left);
  // Under the class lock of the span's class: `owner` (a cache, or NoOwner()) and local_list.
  void SetOwner(Span* s, ThreadCache* owner);
  // Under the class lock: tc's carving span of cls given up (thread exit): an orphan.
  void Orphan(Central& c, ThreadCache* tc, int cls);
  // tc's remote list of cls (a whole batch, or what is there at exit) to the central list: one
  // transfer slot for the owner's next refill.
  __attribute__((noinline)) static void FlushRemoteClass(ThreadCache* tc, int cls);
  // `owner`: the batch's owner (Batch::owner), nullptr for none.
  void Release(int cls, void* head, uint32_t n, ThreadCache* owner = nullptr);
  void ReleaseToSpans(Central& c, void* head, uint32_t n, Span** to_free, int* nfree);

  // Page heap.
  Span* AllocSpan(int cls);
  // Under page_mu_: a segment with k free granules from *g, preferring granules whose pages are
  // still backed (dirty); nullptr when no segment has room.
  Segment* FindGranules(uint32_t k, uint32_t* g);
  void FreeSpan(Span* span);
  bool NewSegment();
  // A page run for `size` bytes; `room` > size asks for a run of up to `room` bytes (realloc
  // growth: address space only, unless a cached run is reused). *reused (if given) tells whether
  // the run came from the run cache, so its pages are not zero.
  void* AllocLarge(size_t size, size_t align, size_t room = 0, bool* reused = nullptr);
  static void FreeLarge(void* p, HeapRuntime* rt);
  // A freed run of the primary heap, of at most kLocalRunMaxBytes, goes to the calling thread's
  // LocalRuns while they have room; false when it does not (the caller caches or frees it).
  static bool KeepLocal(HeapRuntime* rt, char* start, uint64_t pages, uint8_t tier);
  // A run of `lo` to `hi` pages from the calling thread's LocalRuns (the largest when
  // `largest`, else the smallest), or nullptr.
  char* TakeLocal(uint64_t lo, uint64_t hi, bool largest, uint64_t* pages);
  // Thread exit: the thread's LocalRuns go to the run cache.
  void FlushLocalRuns(ThreadCache* tc);
  // Thread exit, primary heap: keeps tc whole for the next new thread; false when
  // kMaxParked caches are parked already (the caller flushes it).
  bool Park(ThreadCache* tc);
  static constexpr uint32_t kMaxParked = 4;
  // Gives runs that fell out of the run cache back to the runtime.
  void ReleaseRuns(const RunCache::Run* runs, int n);
  static size_t LargeUsable(const void* p, HeapRuntime* rt);

  HeapRuntime* rt_;
  Tier tier_;
  uint32_t flags_;
  int slot_;
  uint32_t gen_;
  bool primary_ = false;  // CreatePrimary
  bool local_runs_;       // threads keep LocalRuns (primary heap, no DRAM limit)
  // Under a DRAM limit the heap tells the runtime which pages hold no live block
  // (HeapRuntime::HoldFree): a segment's granules until a span takes them and a free span's
  // granules beyond the dirty bound leave the tiers' counts; dirty granules and cached runs
  // (each bounded by RetainBound) stay counted but are never evicted. ReuseFree as they are
  // handed out again.
  const bool hold_free_;
  Central central_[kNumClasses];
  std::mutex page_mu_;
  Segment* segments_ = nullptr;  // all segments of this heap
  uint32_t empty_segments_ = 0;
  uint64_t dirty_bytes_ = 0;  // in free granules that kept their pages (under page_mu_)
  Span* spare_spans_ = nullptr;  // recycled Span records
  std::atomic<uint64_t> segment_bytes_{0};
  std::atomic<uint64_t> span_bytes_{0};
  std::atomic<uint64_t> large_bytes_{0};
  std::atomic<uint64_t> large_count_{0};
  const uint64_t max_dirty_bytes_;
  RunCache run_cache_;
  // Last: the constructor writes every member above and none of these (see Central).
  Batch transfer_[kNumClasses][kMaxTransfer];  // guarded by central_[class].mu

  friend struct HeapRegistry;
};

// Enter and leave a scope in which this thread must not enter the heap (ThreadState::bypass).
inline void EnterBypass() {
  ++t_thread.bypass;
  t_thread.primary = NoCache();
}
inline void LeaveBypass() {
  if (--t_thread.bypass == 0) HeapCore::ResumePrimary();
}

}  // namespace tiermem::alloc

#include "allocator/heap_core.h"
#include "allocator/heap_core_internal.h"

#include <errno.h>
#include <stdlib.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "allocator/meta_arena.h"
#include "base/log.h"
#include "base/os.h"
#include "runtime/core/heap_runtime.h"

namespace tiermem::alloc {

constinit ThreadCache g_no_cache{};
constinit thread_local ThreadState t_thread TM_TLS{&g_no_cache, {}, 0, 0, 0};
constinit pthread_rwlock_t g_gate = PTHREAD_RWLOCK_INITIALIZER;
constinit HeapRegistry g_reg{};

namespace {

// A realloc that grows a small block into a page run reserves at least this much address space,
// so a buffer growing from kMaxSmall moves once more before it passes it (pages nobody touches
// are never backed).
constexpr size_t kMinGrowthRoom = 1 << 20;
constexpr size_t kCarveBytes = 4096;  // fresh objects carved per Fetch (see there)
constexpr uint32_t kLineBytes = 64;    // a cache line: two threads' objects never share one

}  // namespace

// ---------------------------------------------------------------- creation

HeapCore::HeapCore(HeapRuntime* rt, Tier tier, uint32_t flags, int slot, uint32_t gen)
    : rt_(rt), tier_(tier), flags_(flags), slot_(slot), gen_(gen),
      local_runs_(false),
      hold_free_(rt->options().dram_limit != 0),
      max_dirty_bytes_(RetainBound(rt, kMaxDirtyBytes)),
      run_cache_(RetainBound(rt, kRunCacheBytes) / rt->page_size(), kRunCacheAgeNs) {
  for (int c = 0; c < kNumClasses; ++c) {
    const uint32_t batch_bytes = BatchSize(c) * static_cast<uint32_t>(ClassSize(c));
    uint32_t slots = (512u * 1024) / batch_bytes;
    central_[c].max_slots =
        static_cast<uint16_t>(slots < 2 ? 2 : slots > kMaxTransfer ? kMaxTransfer : slots);
  }
}

HeapCore* HeapCore::Create(void* storage, HeapRuntime* rt, Tier tier, uint32_t alloc_flags) {
  EnsureKey();
  // Outside g_reg.mu: fork() may hold glibc's atfork lock while our prepare handler waits for it.
  static constinit std::atomic<bool> atfork_done{false};
  if (!atfork_done.exchange(true)) {
    os::AtFork(&HeapCore::ForkPrepare, &HeapCore::ForkParent, &HeapCore::ForkChild);
  }
  std::lock_guard<std::mutex> lock(g_reg.mu);
  for (int s = 0; s < kMaxHeaps; ++s) {
    if (g_reg.heaps[s].load(std::memory_order_relaxed) != nullptr) continue;
    uint32_t gen = ++g_reg.gens[s];
    HeapCore* h = new (storage) HeapCore(rt, tier, alloc_flags, s, gen);
    g_reg.heaps[s].store(h, std::memory_order_release);
    return h;
  }
  return nullptr;
}

HeapCore* HeapCore::CreatePrimary(void* storage, HeapRuntime* rt, Tier tier,
                                  uint32_t alloc_flags) {
  static constinit std::atomic<bool> claimed{false};
  if (claimed.exchange(true)) return nullptr;  // one per process
  HeapCore* h = Create(storage, rt, tier, alloc_flags);
  if (h == nullptr) {
    claimed.store(false);
    return nullptr;
  }
  // Before any span or thread cache of the heap exists: AllocSpan and SlowCache read it.
  h->primary_ = true;
  // Under a DRAM limit kept memory is bounded (RetainBound): no per-thread runs beside it.
  h->local_runs_ = h->flags_ == kAllocDefault && rt->options().dram_limit == 0;
  g_primary.store(h, std::memory_order_release);
  return h;
}

void HeapCore::Destroy() {
  if (primary_) {
    // Other threads reach its caches through t_thread.primary, which nothing could clear.
    TM_LOG_ERROR("tiermem heap: the primary heap cannot be destroyed");
    abort();
  }
  {
    std::lock_guard<std::mutex> lock(g_reg.mu);
    g_reg.heaps[slot_].store(nullptr, std::memory_order_release);
    ++g_reg.gens[slot_];
  }
  // This thread's cache of the slot is stale now; drop it (other threads drop theirs lazily).
  if (t_thread.cache[slot_] != nullptr) {
    std::lock_guard<std::mutex> lock(g_reg.tc_mu);
    t_thread.cache[slot_]->next_free = g_reg.free_tcs;
    g_reg.free_tcs = t_thread.cache[slot_];
    t_thread.cache[slot_] = nullptr;
  }
  RunCache::Run cached[RunCache::kSlots];
  ReleaseRuns(cached, run_cache_.TakeAll(cached));
  std::lock_guard<std::mutex> lock(page_mu_);
  for (Segment* s = segments_; s != nullptr; s = s->next) {
    for (uint32_t g = 0; g < kSegmentGranules; ++g) {
      if (s->used_mask & (1ull << g)) {
        (void)GlobalSpanMap().Set(s->base + g * kGranule, 1, nullptr);
      }
    }
    RuntimeCall call;
    Status st = rt_->Free(s->run);
    (void)st;
  }
  segments_ = nullptr;
  this->~HeapCore();
}

// ---------------------------------------------------------------- small objects

inline void* HeapCore::MallocSmall(int cls) {
  ThreadCache* tc = Cache();
  if (__builtin_expect(tc != nullptr, 1)) {
    ClassCache& cc = tc->cls[cls];
    void* p = cc.head;
    if (__builtin_expect(p != nullptr, 1)) {
      cc.head = *static_cast<void**>(p);
      ++cc.room;
      return p;
    }
  }
  return RefillAndPop(tc, cls);
}

void HeapCore::FreeSmall(Span* span, void* p) {
  if (span->aligned.load(std::memory_order_relaxed)) {
    p = span->ObjectStart(p);  // an aligned block may be freed by a pointer inside its object
  }
  const int cls = span->cls;
  ThreadCache* tc = Cache();
  if (__builtin_expect(tc == nullptr, 0)) {
    *static_cast<void**>(p) = nullptr;
    Release(cls, p, 1);
    return;
  }
  if (!Local(span, tc)) {
    PushRemote(tc, cls, p);
    return;
  }
  Push(span, &tc->cls[cls], p);
}

// A refill takes back a batch of the caller's own blocks (freed by another thread) before any
// other: taken by another thread, its blocks would lie on the lines of the owner's live objects
// and the two threads would write the same lines (false sharing). The newest such batch a few
// slots deep; when there is none, the newest batch. Batches of other owners are not left aside
// (measured: a refill that carved anew rather than take one filled the transfer slots and sent
// the next batches block by block to their spans).
// Threads: Batch::owner is written (Release) and read (here) only under the class lock; it is
// compared, never dereferenced, so an owner that exited, or whose cache a new thread took over,
// costs at most a preference.
uint32_t HeapCore::PickBatch(const Central& c, int cls, const ThreadCache* tc) const {
  constexpr uint32_t kLook = 8;
  const uint32_t top = c.nslots - 1;
  for (uint32_t i = 0; i < kLook && i <= top; ++i) {
    if (transfer_[cls][top - i].owner == tc) return top - i;
  }
  return top;
}

// Fresh objects are carved only from the caller's own span (ThreadCache::carving), so objects of
// two threads never share a cache line unless one thread freed the other's block and a refill
// handed it on; freed objects come from any span on the list.
uint32_t HeapCore::Fetch(int cls, uint32_t n, void** out, ThreadCache* tc) {
  Central& c = central_[cls];
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.nslots > 0 && n > 1) {
    const uint32_t i = PickBatch(c, cls, tc);
    const Batch b = transfer_[cls][i];
    transfer_[cls][i] = transfer_[cls][--c.nslots];  // the order of the slots does not matter
    *out = b.head;
    return b.n;
  }
  void* head = nullptr;
  uint32_t got = 0;
  // Fresh (never carved) objects: at most a page's worth per call, at least one. Linking an
  // object into the batch writes to it, so a full batch of 4 KiB objects would fault in 64 KiB
  // the thread may never use; a fresh object costs a page fault on first use anyway, so the
  // extra refills are cheap next to it.
  uint32_t carve_left = std::max<uint32_t>(1, static_cast<uint32_t>(kCarveBytes / ClassSize(cls)));
  TakeListed(c, cls, n, tc, &head, &got, &carve_left);
  TakeCarved(c, cls, n, tc, &head, &got, &carve_left);
  c.out += got;  // all from spans so far; a batch below was counted when it left its spans
  if (got == 0 && c.nslots > 0) {  // n == 1 (exiting thread) and no span: use a batch
    Batch& b = transfer_[cls][c.nslots - 1];
    head = b.head;
    b.head = *static_cast<void**>(head);
    *static_cast<void**>(head) = nullptr;
    if (--b.n == 0) --c.nslots;
    got = 1;
  }
  *out = head;
  return got;
}

namespace {

// Links object o of span s into the batch being built (under the class lock).
inline void TakeObject(Span* s, void* o, void** head, uint32_t* got, uint32_t* empty_spans) {
  if (s->used++ == 0) --*empty_spans;
  *static_cast<void**>(o) = *head;
  *head = o;
  ++*got;
}

inline void CarveInto(Span* s, uint32_t n, void** head, uint32_t* got, uint32_t* carve_left,
                      uint32_t* empty_spans) {
  while (*got < n && *carve_left > 0 && s->carved < s->capacity) {
    void* o = s->start + static_cast<size_t>(s->carved) * s->obj_size;
    ++s->carved;
    --*carve_left;
    TakeObject(s, o, head, got, empty_spans);
  }
}

}  // namespace

void HeapCore::TakeListed(Central& c, int cls, uint32_t n, ThreadCache* tc, void** head,
                          uint32_t* got, uint32_t* carve_left) {
  // A few spans at most: past them, a carving span gives fresh objects at once.
  constexpr int kMaxVisits = 8;
  Span* s = c.nonempty;
  for (int visit = 0; *got < n && s != nullptr && visit < kMaxVisits; ++visit) {
    Span* next = s->next;
    while (*got < n && s->free_list != nullptr) {
      void* o = s->free_list;
      s->free_list = *static_cast<void**>(o);
      TakeObject(s, o, head, got, &c.empty_spans);
    }
    if (s->orphan && s->carved < s->capacity && *got < n) {
      Span* own = tc != nullptr ? tc->carving[cls] : nullptr;
      if (tc == nullptr) {
        CarveInto(s, n, head, got, carve_left, &c.empty_spans);
      } else if (own == nullptr || own->carved == own->capacity) {
        if (own != nullptr) own->carving = false;  // full: nothing more to carve there
        s->orphan = false;
        s->carving = true;
        // From the next cache line on: the exited thread's last objects may still be in use
        // by the threads it passed them to. At most 3 objects are skipped (sizes are multiples
        // of 16); they are never handed out, and the span still empties (used counts).
        while (s->carved < s->capacity && s->carved * s->obj_size % kLineBytes != 0) ++s->carved;
        SetOwner(s, tc);
        tc->carving[cls] = s;
      }
    }
    if (s->free_list == nullptr && !(s->orphan && s->carved < s->capacity)) {  // off the list
      if (s->prev != nullptr) s->prev->next = s->next; else c.nonempty = s->next;
      if (s->next != nullptr) s->next->prev = s->prev;
      s->listed = false;
    }
    s = next;
  }
}

void HeapCore::TakeCarved(Central& c, int cls, uint32_t n, ThreadCache* tc, void** head,
                          uint32_t* got, uint32_t* carve_left) {
  while (*got < n && *carve_left > 0) {
    Span* s = tc != nullptr ? tc->carving[cls] : nullptr;
    if (s == nullptr || s->carved == s->capacity) {
      if (s != nullptr) s->carving = false;
      s = AllocSpan(cls);
      if (s == nullptr) return;
      s->next = nullptr;
      s->prev = nullptr;
      ++c.empty_spans;
      if (tc != nullptr) {
        s->carving = true;
        SetOwner(s, tc);
        tc->carving[cls] = s;
      } else {  // an exiting thread: the rest is for whoever comes next
        s->orphan = true;
        s->next = c.nonempty;
        if (c.nonempty != nullptr) c.nonempty->prev = s;
        c.nonempty = s;
        s->listed = true;
      }
    }
    CarveInto(s, n, head, got, carve_left, &c.empty_spans);
  }
}

void HeapCore::Orphan(Central& c, ThreadCache* tc, int cls) {
  Span* s = tc->carving[cls];
  if (s == nullptr) return;
  tc->carving[cls] = nullptr;
  s->carving = false;
  SetOwner(s, NoOwner());
  if (s->carved == s->capacity) return;
  s->orphan = true;
  if (!s->listed) {
    s->prev = nullptr;
    s->next = c.nonempty;
    if (c.nonempty != nullptr) c.nonempty->prev = s;
    c.nonempty = s;
    s->listed = true;
  }
}

void HeapCore::ReleaseToSpans(Central& c, void* head, uint32_t n, Span** to_free, int* nfree) {
  SpanMap& map = GlobalSpanMap();
  for (uint32_t i = 0; i < n && head != nullptr; ++i) {
    void* o = head;
    head = *static_cast<void**>(o);
    --c.out;
    Span* s = map.Lookup(o);
    *static_cast<void**>(o) = s->free_list;
    s->free_list = o;
    if (!s->listed) {
      s->prev = nullptr;
      s->next = c.nonempty;
      if (c.nonempty != nullptr) c.nonempty->prev = s;
      c.nonempty = s;
      s->listed = true;
    }
    if (--s->used == 0) {
      // Keep one empty span per class against churn, and every thread's carving span.
      if (c.empty_spans >= 1 && !s->carving) {
        if (s->prev != nullptr) s->prev->next = s->next; else c.nonempty = s->next;
        if (s->next != nullptr) s->next->prev = s->prev;
        s->listed = false;
        if (*nfree < kMaxTransfer) {
          to_free[(*nfree)++] = s;  // freed after the class lock is dropped
        } else {
          FreeSpan(s);  // lock order: class -> page heap -> gate
        }
      } else {
        ++c.empty_spans;
      }
    }
  }
}

void HeapCore::Release(int cls, void* head, uint32_t n, ThreadCache* owner) {
  Central& c = central_[cls];
  Span* to_free[kMaxTransfer];
  int nfree = 0;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (n > 1 && n <= CacheLimit(cls) && c.nslots < c.max_slots) {
      transfer_[cls][c.nslots++] = Batch{head, n, owner};
      return;
    }
    ReleaseToSpans(c, head, n, to_free, &nfree);
  }
  for (int i = 0; i < nfree; ++i) FreeSpan(to_free[i]);
}

void HeapCore::Trim() {
  for (int cls = 0; cls < kNumClasses; ++cls) {
    Central& c = central_[cls];
    for (;;) {
      Span* to_free[kMaxTransfer];
      int nfree = 0;
      {
        std::lock_guard<std::mutex> lock(c.mu);
        if (c.nslots == 0) break;
        const Batch b = transfer_[cls][--c.nslots];
        ReleaseToSpans(c, b.head, b.n, to_free, &nfree);
      }
      for (int i = 0; i < nfree; ++i) FreeSpan(to_free[i]);  // lock order: class, then page heap
    }
  }
  RunCache::Run cached[RunCache::kSlots];
  ReleaseRuns(cached, run_cache_.TakeAll(cached));
}

// ---------------------------------------------------------------- public operations

void* HeapCore::Malloc(size_t size) {
  if (__builtin_expect(size <= kMaxSmall, 1)) {
    void* p = MallocSmall(SizeClass(size));
    if (__builtin_expect(p == nullptr, 0)) errno = ENOMEM;
    return p;
  }
  return AllocLarge(size, 0);
}

void* HeapCore::Calloc(size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return nullptr;
  }
  if (total > kMaxSmall) {
    bool reused = false;
    void* p = AllocLarge(total, 0, 0, &reused);
    if (p != nullptr && reused) memset(p, 0, total);  // fresh page runs are zero-filled
    return p;
  }
  void* p = Malloc(total);
  if (p != nullptr) memset(p, 0, total);
  return p;
}

void* HeapCore::Memalign(size_t align, size_t size) {
  if (align <= 16) return Malloc(size);
  if (size <= kMaxSmall && align <= kGranule) {
    // Spans start on 64 KiB boundaries, so objects of a class whose size is a multiple of
    // `align` are aligned. Every power of two up to kMaxSmall is a class: the loop ends.
    for (int c = SizeClass(size < align ? align : size); c < kNumClasses; ++c) {
      if (ClassSize(c) % align == 0) {
        void* p = MallocSmall(c);
        if (p == nullptr) {
          errno = ENOMEM;
        } else {
          MarkAligned(GlobalSpanMap().Lookup(p));  // its frees round to the object start
        }
        return p;
      }
    }
  }
  return AllocLarge(size == 0 ? 1 : size, align);
}

bool HeapCore::FreeAny(void* p, HeapRuntime* rt) {
  if (p == nullptr) return true;
  Span* span = GlobalSpanMap().Lookup(p);
  if (__builtin_expect(span != nullptr, 1)) {
    span->heap->FreeSmall(span, p);
    return true;
  }
  if (rt == nullptr || rt->RegionOf(p) == nullptr) return false;
  FreeLarge(p, rt);
  return true;
}

size_t HeapCore::UsableSizeAny(const void* p, HeapRuntime* rt) {
  if (p == nullptr) return 0;
  Span* span = GlobalSpanMap().Lookup(p);
  if (span != nullptr) return static_cast<size_t>(span->ObjectStart(p) + span->obj_size -
                                                  static_cast<const char*>(p));
  return rt != nullptr ? LargeUsable(p, rt) : 0;
}

void* HeapCore::Realloc(void* p, size_t size) {
  if (p == nullptr) return Malloc(size);
  if (size == 0) {
    Free(p);
    return nullptr;
  }
  const size_t have = UsableSizeAny(p, rt_);
  // Same class, or a shrink to at most half of it: keep the block. A page run may hold growth
  // room (up to kMinGrowthRoom from a small block): it keeps a block down to an eighth of it.
  const bool run = GlobalSpanMap().Lookup(p) == nullptr;
  if (size <= have && (size > have / 2 || (run && have <= kMinGrowthRoom && size > have / 8))) {
    return p;
  }
  void* q;
  if (size > kMaxSmall && size > have) {
    // Growing into (or within) page runs: leave room to double (at least kMinGrowthRoom), so a
    // buffer grown step by step moves O(log n) times rather than at every step. The room is
    // address space only (pages nobody touches are never backed), or a run from the run cache,
    // whose pages are already there.
    size_t room = have <= SIZE_MAX / 2 ? 2 * have : size;
    if (room < kMinGrowthRoom) room = kMinGrowthRoom;
    q = AllocLarge(size, 0, room);
  } else {
    q = Malloc(size);
  }
  if (q == nullptr) return nullptr;
  memcpy(q, p, have < size ? have : size);
  Free(p);
  return q;
}

bool HeapCore::Owns(const void* p) const {
  Span* span = GlobalSpanMap().Lookup(p);
  if (span != nullptr) return span->heap == this;
  return rt_->RegionOf(p) != nullptr && LargeUsable(p, rt_) != 0;
}

HeapStats HeapCore::Stats() const {
  HeapStats s;
  s.segment_bytes = segment_bytes_.load(std::memory_order_relaxed);
  s.span_bytes = span_bytes_.load(std::memory_order_relaxed);
  s.large_bytes = large_bytes_.load(std::memory_order_relaxed);
  s.large_count = large_count_.load(std::memory_order_relaxed);
  s.cached_run_bytes = run_cache_.pages() * rt_->page_size();
  return s;
}

HeapFootprint HeapCore::Footprint() {
  HeapFootprint f;
  for (int cls = 0; cls < kNumClasses; ++cls) {
    Central& c = central_[cls];
    uint64_t objects;
    {
      std::lock_guard<std::mutex> lock(c.mu);
      objects = c.out;
      for (uint32_t i = 0; i < c.nslots; ++i) objects -= transfer_[cls][i].n;
    }
    f.small_block_bytes += objects * ClassSize(cls);
  }
  // Every block in the caller's cache left its span through a Fetch, so it is in `out`.
  const ThreadCache* tc = t_thread.cache[slot_];
  if (tc != nullptr && tc->gen == gen_) {
    uint64_t cached = 0;
    for (int cls = 0; cls < kNumClasses; ++cls) {
      cached += (uint64_t{tc->cls[cls].count()} + tc->remote[cls].count(cls)) * ClassSize(cls);
    }
    f.small_block_bytes -= std::min(cached, f.small_block_bytes);
  }
  {
    std::lock_guard<std::mutex> lock(page_mu_);  // segment and span bytes change under it
    f.stats.segment_bytes = segment_bytes_.load(std::memory_order_relaxed);
    f.stats.span_bytes = span_bytes_.load(std::memory_order_relaxed);
    f.dirty_bytes = dirty_bytes_;
  }
  f.stats.large_bytes = large_bytes_.load(std::memory_order_relaxed);
  f.stats.large_count = large_count_.load(std::memory_order_relaxed);
  f.stats.cached_run_bytes = run_cache_.pages() * rt_->page_size();
  return f;
}

size_t HeapCore::UsableSizeFor(size_t size, size_t align, size_t page_size) {
  // The same choices as Memalign and Malloc.
  if (align <= 16) {
    if (size <= kMaxSmall) return ClassSize(SizeClass(size));
  } else if (size <= kMaxSmall && align <= kGranule) {
    for (int c = SizeClass(size < align ? align : size); c < kNumClasses; ++c) {
      if (ClassSize(c) % align == 0) return ClassSize(c);
    }
  }
  // A page run, within AllocLarge's bound.
  constexpr size_t kMaxRun = size_t{1} << 46;
  const size_t extra = align > page_size ? align : 0;
  if (size == 0) size = 1;
  if (extra > kMaxRun || size > kMaxRun - extra) return 0;
  return (size + page_size - 1) & ~(page_size - 1);
}

// ---------------------------------------------------------------- fork

void HeapCore::ForkPrepare() {
  g_reg.mu.lock();
  for (int s = 0; s < kMaxHeaps; ++s) {
    HeapCore* h = g_reg.heaps[s].load(std::memory_order_relaxed);
    if (h == nullptr) continue;
    for (Central& c : h->central_) c.mu.lock();
    h->page_mu_.lock();
    h->run_cache_.Lock();
  }
  pthread_rwlock_wrlock(&g_gate);
  g_reg.tc_mu.lock();
  MetaLock();
}

// The heaps' locks taken by ForkPrepare, in reverse order, then the registry's.
void HeapCore::UnlockHeapsAfterFork() {
  for (int s = kMaxHeaps - 1; s >= 0; --s) {
    HeapCore* h = g_reg.heaps[s].load(std::memory_order_relaxed);
    if (h == nullptr) continue;
    h->run_cache_.Unlock();
    h->page_mu_.unlock();
    for (int c = kNumClasses - 1; c >= 0; --c) h->central_[c].mu.unlock();
  }
  g_reg.mu.unlock();
}

void HeapCore::ForkParent() {
  MetaUnlock();
  g_reg.tc_mu.unlock();
  pthread_rwlock_unlock(&g_gate);
  UnlockHeapsAfterFork();
}

void HeapCore::ForkChild() {
  // The forking thread took every lock, and it is the child's only thread: unlocking the
  // mutexes is valid. The rwlock is re-initialised instead: glibc's unlock compares the writer's
  // thread id, which differs in the child. Other threads' caches are unreachable in the child;
  // their blocks are simply not reused.
  static const pthread_rwlock_t kFresh = PTHREAD_RWLOCK_INITIALIZER;
  MetaUnlock();
  g_reg.tc_mu.unlock();
  memcpy(static_cast<void*>(&g_gate), &kFresh, sizeof(kFresh));
  UnlockHeapsAfterFork();
}

}  // namespace tiermem::alloc

#include "allocator/heap_core.h"

#include <errno.h>

#include <cstring>
#include <new>

#include "allocator/meta_arena.h"
#include "runtime/os/os.h"
#include "runtime/region.h"
#include "runtime/runtime_impl.h"

namespace tiermem::alloc {

constinit thread_local ThreadState t_thread TM_TLS;

struct Segment {
  char* run = nullptr;   // what the runtime returned (Free takes this)
  char* base = nullptr;  // first granule (64 KiB aligned)
  uint64_t used_mask = 0;
  uint64_t dirty_mask = 0;  // free granules whose pages were not discarded (see FreeSpan)
  Segment* next = nullptr;
};

namespace {

constexpr int kSegmentGranules = 64;  // 4 MiB of spans per segment
constexpr size_t kSegmentBytes = kSegmentGranules * kGranule;
constexpr uint32_t kMaxCacheBytes = 256 * 1024;  // per class, per thread
// Freed page runs kept with their pages (RunCache): at most this much, for at most this long.
constexpr uint64_t kRunCacheBytes = 16 << 20;
constexpr uint64_t kRunCacheAgeNs = 1000000000;
// A realloc that grows a small block into a page run reserves at least this much address space,
// so a buffer growing from kMaxSmall moves once more before it passes it (pages nobody touches
// are never backed).
constexpr size_t kMinGrowthRoom = 1 << 20;
// Empty spans keep their pages up to this much per heap (reused first, without page faults);
// beyond it a freed span's pages are discarded at once.
constexpr uint64_t kMaxDirtyBytes = 4 << 20;

// Memory kept for reuse is allocated memory to the runtime: under a DRAM limit
// (TIERMEM_DRAM_LIMIT), keep at most a sixteenth of it, so that it does not push the program's
// own data to slower tiers.
uint64_t RetainBound(const Runtime::Impl* rt, uint64_t bytes) {
  const uint64_t limit = rt->options().dram_limit;
  return limit != 0 && limit / 16 < bytes ? limit / 16 : bytes;
}

uint64_t GranuleBits(uint32_t first, uint32_t n) {
  return (n == 64 ? ~0ull : ((1ull << n) - 1)) << first;
}

// Serialises calls into the runtime against fork (readers: heap calls; writer: ForkPrepare), so
// a child never inherits a runtime lock held by a thread that does not exist there.
constinit pthread_rwlock_t g_gate = PTHREAD_RWLOCK_INITIALIZER;

class RuntimeCall {
 public:
  RuntimeCall() {
    ++t_thread.bypass;
    pthread_rwlock_rdlock(&g_gate);
  }
  ~RuntimeCall() {
    pthread_rwlock_unlock(&g_gate);
    --t_thread.bypass;
  }
};

}  // namespace

// A kAuto heap whose NUMA tiers are at their limits (TIERMEM_DRAM_LIMIT...) places new memory on
// the remote tier when one is configured: that is how an unmodified program gets more memory
// than its DRAM limit (the runtime's policy moves hot pages back).
static StatusOr<void*> RuntimeAllocate(Runtime::Impl* rt, size_t bytes, Tier tier,
                                       uint32_t flags) {
  StatusOr<void*> r = rt->Allocate(bytes, tier, flags);
  if (!r.ok() && tier == Tier::kAuto && r.status().code() == StatusCode::kResourceExhausted &&
      rt->HasTier(Tier::kRemote)) {
    r = rt->Allocate(bytes, Tier::kRemote, flags);
  }
  return r;
}

struct HeapRegistry {
  std::mutex mu;  // slots, generations
  std::atomic<HeapCore*> heaps[kMaxHeaps];
  uint32_t gens[kMaxHeaps];
  std::mutex tc_mu;  // free thread caches
  ThreadCache* free_tcs;
  std::atomic<bool> key_ready;
  pthread_key_t key;
};
namespace {
constinit HeapRegistry g_reg{};

void ThreadExit(void*) {
  t_thread.exiting = 1;
  HeapCore::FlushThreadCaches();
}

// Registered before the first thread cache exists; pthread_key_create does not allocate.
void EnsureKey() {
  if (g_reg.key_ready.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(g_reg.mu);
  if (g_reg.key_ready.load(std::memory_order_relaxed)) return;
  if (pthread_key_create(&g_reg.key, ThreadExit) == 0) {
    g_reg.key_ready.store(true, std::memory_order_release);
  }
}

}  // namespace

// ---------------------------------------------------------------- creation

HeapCore::HeapCore(Runtime::Impl* rt, Tier tier, uint32_t flags, int slot, uint32_t gen)
    : rt_(rt), tier_(tier), flags_(flags), slot_(slot), gen_(gen),
      max_dirty_bytes_(RetainBound(rt, kMaxDirtyBytes)),
      run_cache_(RetainBound(rt, kRunCacheBytes) / rt->page_size(), kRunCacheAgeNs) {
  for (int c = 0; c < kNumClasses; ++c) {
    const uint32_t batch_bytes = BatchSize(c) * static_cast<uint32_t>(ClassSize(c));
    uint32_t slots = (512u * 1024) / batch_bytes;
    central_[c].max_slots = slots < 2 ? 2 : slots > kMaxTransfer ? kMaxTransfer : slots;
  }
}

HeapCore* HeapCore::Create(void* storage, Runtime::Impl* rt, Tier tier, uint32_t alloc_flags) {
  EnsureKey();
  // Outside g_reg.mu: fork() may hold glibc's atfork lock while our prepare handler waits for it.
  static constinit std::atomic<bool> atfork_done{false};
  if (!atfork_done.exchange(true)) {
    pthread_atfork(&HeapCore::ForkPrepare, &HeapCore::ForkParent, &HeapCore::ForkChild);
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

void HeapCore::Destroy() {
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

// ---------------------------------------------------------------- thread caches

ThreadCache* HeapCore::SlowCache() {
  if (t_thread.exiting) return nullptr;
  ThreadCache* tc = t_thread.cache[slot_];
  if (tc != nullptr) {
    // A cache left from a destroyed heap that had this slot: its blocks are gone with it.
    memset(tc->cls, 0, sizeof(tc->cls));
  } else {
    {
      std::lock_guard<std::mutex> lock(g_reg.tc_mu);
      tc = g_reg.free_tcs;
      if (tc != nullptr) g_reg.free_tcs = tc->next_free;
    }
    if (tc == nullptr) tc = static_cast<ThreadCache*>(MetaAlloc(sizeof(ThreadCache)));
    if (tc == nullptr) return nullptr;
    memset(tc, 0, sizeof(*tc));
  }
  for (int c = 0; c < kNumClasses; ++c) {
    uint32_t by_bytes = kMaxCacheBytes / static_cast<uint32_t>(ClassSize(c));
    if (by_bytes < 2) by_bytes = 2;
    const uint32_t m = 2 * BatchSize(c);
    tc->cls[c].max = by_bytes < m ? by_bytes : m;
  }
  tc->gen = gen_;
  t_thread.cache[slot_] = tc;
  if (!t_thread.key_set && g_reg.key_ready.load(std::memory_order_acquire)) {
    // Set after t_cache so that a malloc inside pthread_setspecific finds the cache.
    t_thread.key_set = 1;
    pthread_setspecific(g_reg.key, &g_reg);
  }
  return tc;
}

inline ThreadCache* HeapCore::Cache() {
  ThreadCache* tc = t_thread.cache[slot_];
  if (__builtin_expect(tc != nullptr && tc->gen == gen_, 1)) return tc;
  return SlowCache();
}

void HeapCore::FlushClass(ClassCache* cc, int cls, uint32_t n) {
  if (n > cc->count) n = cc->count;
  if (n == 0) return;
  void* head = cc->head;
  void* tail = head;
  for (uint32_t i = 1; i < n; ++i) tail = *static_cast<void**>(tail);
  cc->head = *static_cast<void**>(tail);
  cc->count -= n;
  *static_cast<void**>(tail) = nullptr;
  Release(cls, head, n);
}

void HeapCore::FlushCache(ThreadCache* tc) {
  for (int c = 0; c < kNumClasses; ++c) FlushClass(&tc->cls[c], c, tc->cls[c].count);
}

void HeapCore::FlushThreadCaches() {
  for (int s = 0; s < kMaxHeaps; ++s) {
    ThreadCache* tc = t_thread.cache[s];
    if (tc == nullptr) continue;
    t_thread.cache[s] = nullptr;
    HeapCore* h = g_reg.heaps[s].load(std::memory_order_acquire);
    if (h != nullptr && h->gen_ == tc->gen) h->FlushCache(tc);
    std::lock_guard<std::mutex> lock(g_reg.tc_mu);
    tc->next_free = g_reg.free_tcs;
    g_reg.free_tcs = tc;
  }
}

// ---------------------------------------------------------------- small objects

void* HeapCore::RefillAndPop(ThreadCache* tc, int cls) {
  void* head = nullptr;
  if (tc == nullptr) {  // thread exiting: straight from the central list, one object
    return Fetch(cls, 1, &head) == 1 ? head : nullptr;
  }
  uint32_t n = Fetch(cls, BatchSize(cls), &head);
  if (n == 0) return nullptr;
  ClassCache& cc = tc->cls[cls];
  cc.head = *static_cast<void**>(head);
  cc.count = n - 1;
  return head;
}

inline void* HeapCore::MallocSmall(int cls) {
  ThreadCache* tc = Cache();
  if (__builtin_expect(tc != nullptr, 1)) {
    ClassCache& cc = tc->cls[cls];
    void* p = cc.head;
    if (__builtin_expect(p != nullptr, 1)) {
      cc.head = *static_cast<void**>(p);
      --cc.count;
      return p;
    }
  }
  return RefillAndPop(tc, cls);
}

void HeapCore::FreeSmall(Span* span, void* p) {
  p = span->ObjectStart(p);  // an aligned block may be freed by a pointer inside its object
  const int cls = span->cls;
  ThreadCache* tc = Cache();
  if (__builtin_expect(tc == nullptr, 0)) {
    *static_cast<void**>(p) = nullptr;
    Release(cls, p, 1);
    return;
  }
  ClassCache& cc = tc->cls[cls];
  *static_cast<void**>(p) = cc.head;
  cc.head = p;
  if (__builtin_expect(++cc.count > cc.max, 0)) FlushClass(&cc, cls, BatchSize(cls));
}

uint32_t HeapCore::Fetch(int cls, uint32_t n, void** out) {
  Central& c = central_[cls];
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.nslots > 0 && n > 1) {
    Batch b = c.slots[--c.nslots];
    *out = b.head;
    return b.n;
  }
  void* head = nullptr;
  uint32_t got = 0;
  while (got < n) {
    Span* s = c.nonempty;
    if (s == nullptr) {
      s = AllocSpan(cls);
      if (s == nullptr) break;
      s->next = nullptr;
      s->prev = nullptr;
      s->listed = true;
      c.nonempty = s;
      ++c.empty_spans;
    }
    if (s->used == 0) --c.empty_spans;
    while (got < n && s->free_list != nullptr) {
      void* o = s->free_list;
      s->free_list = *static_cast<void**>(o);
      *static_cast<void**>(o) = head;
      head = o;
      ++got;
      ++s->used;
    }
    while (got < n && s->carved < s->capacity) {
      void* o = s->start + static_cast<size_t>(s->carved) * s->obj_size;
      ++s->carved;
      *static_cast<void**>(o) = head;
      head = o;
      ++got;
      ++s->used;
    }
    if (s->free_list == nullptr && s->carved == s->capacity) {  // full: off the list
      c.nonempty = s->next;
      if (s->next != nullptr) s->next->prev = nullptr;
      s->listed = false;
    }
  }
  if (got == 0 && c.nslots > 0) {  // n == 1 (exiting thread) and no span: use a batch
    Batch& b = c.slots[c.nslots - 1];
    head = b.head;
    b.head = *static_cast<void**>(head);
    *static_cast<void**>(head) = nullptr;
    if (--b.n == 0) --c.nslots;
    got = 1;
  }
  *out = head;
  return got;
}

void HeapCore::ReleaseToSpans(Central& c, void* head, uint32_t n, Span** to_free, int* nfree) {
  SpanMap& map = GlobalSpanMap();
  for (uint32_t i = 0; i < n && head != nullptr; ++i) {
    void* o = head;
    head = *static_cast<void**>(o);
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
      if (c.empty_spans >= 1) {  // keep one empty span per class against churn
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

void HeapCore::Release(int cls, void* head, uint32_t n) {
  Central& c = central_[cls];
  Span* to_free[kMaxTransfer];
  int nfree = 0;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (n == BatchSize(cls) && c.nslots < c.max_slots) {
      c.slots[c.nslots++] = Batch{head, n};
      return;
    }
    ReleaseToSpans(c, head, n, to_free, &nfree);
  }
  for (int i = 0; i < nfree; ++i) FreeSpan(to_free[i]);
}

// ---------------------------------------------------------------- page heap

bool HeapCore::NewSegment() {
  // One run per segment, 64 KiB-aligned inside; the slack is never touched (no RSS).
  const size_t run_bytes = kSegmentBytes + kGranule - rt_->page_size();
  void* run = nullptr;
  {
    RuntimeCall call;
    StatusOr<void*> r = RuntimeAllocate(rt_, run_bytes, tier_, flags_);
    if (!r.ok()) return false;
    run = *r;
  }
  Segment* seg = static_cast<Segment*>(MetaAlloc(sizeof(Segment)));
  if (seg == nullptr) {
    RuntimeCall call;
    (void)rt_->Free(run);
    return false;
  }
  seg->run = static_cast<char*>(run);
  uintptr_t b = (reinterpret_cast<uintptr_t>(run) + kGranule - 1) & ~(kGranule - 1);
  seg->base = reinterpret_cast<char*>(b);
  seg->used_mask = 0;
  seg->next = segments_;
  segments_ = seg;
  ++empty_segments_;
  segment_bytes_.fetch_add(kSegmentBytes, std::memory_order_relaxed);
  return true;
}

Segment* HeapCore::FindGranules(uint32_t k, uint32_t* g) {
  Segment* first = nullptr;
  uint32_t first_g = 0;
  for (Segment* seg = segments_; seg != nullptr; seg = seg->next) {
    const uint64_t free = ~seg->used_mask;
    uint64_t x = free;
    uint64_t d = seg->dirty_mask;  // dirty granules are free
    for (uint32_t i = 1; i < k && x != 0; ++i) {
      x &= free >> i;
      d &= seg->dirty_mask >> i;
    }
    if (d != 0) {
      *g = static_cast<uint32_t>(__builtin_ctzll(d));
      return seg;
    }
    if (x != 0 && first == nullptr) {
      first = seg;
      first_g = static_cast<uint32_t>(__builtin_ctzll(x));
    }
  }
  *g = first_g;
  return first;
}

Span* HeapCore::AllocSpan(int cls) {
  const uint32_t k = SpanGranules(cls);
  std::lock_guard<std::mutex> lock(page_mu_);
  for (int attempt = 0; attempt < 2; ++attempt) {
    uint32_t g = 0;
    if (Segment* seg = FindGranules(k, &g)) {
      Span* s = spare_spans_;
      if (s != nullptr) {
        spare_spans_ = s->next;
      } else {
        s = static_cast<Span*>(MetaAlloc(sizeof(Span)));
        if (s == nullptr) return nullptr;
      }
      new (s) Span();
      s->start = seg->base + static_cast<size_t>(g) * kGranule;
      s->obj_size = static_cast<uint32_t>(ClassSize(cls));
      s->capacity = static_cast<uint32_t>(k * kGranule / s->obj_size);
      s->div_magic = ((uint64_t{1} << 40) + s->obj_size - 1) / s->obj_size;
      s->cls = cls;
      s->granules = k;
      s->heap = this;
      s->heap_slot = slot_;
      s->heap_gen = gen_;
      s->segment = seg;
      s->first_granule = g;
      if (!GlobalSpanMap().Set(s->start, k, s)) {
        (void)GlobalSpanMap().Set(s->start, k, nullptr);
        s->next = spare_spans_;
        spare_spans_ = s;
        return nullptr;
      }
      if (seg->used_mask == 0) --empty_segments_;
      const uint64_t bits = GranuleBits(g, k);
      seg->used_mask |= bits;
      dirty_bytes_ -= static_cast<uint64_t>(__builtin_popcountll(seg->dirty_mask & bits)) * kGranule;
      seg->dirty_mask &= ~bits;
      span_bytes_.fetch_add(k * kGranule, std::memory_order_relaxed);
      return s;
    }
    if (attempt == 0 && !NewSegment()) break;
  }
  return nullptr;
}

void HeapCore::FreeSpan(Span* s) {
  const size_t bytes = static_cast<size_t>(s->granules) * kGranule;
  (void)GlobalSpanMap().Set(s->start, s->granules, nullptr);
  const uint64_t bits = GranuleBits(s->first_granule, s->granules);
  Segment* seg = s->segment;
  std::unique_lock<std::mutex> lock(page_mu_);
  if (dirty_bytes_ + bytes <= max_dirty_bytes_) {
    // Keep the pages: the next span of any class takes these granules first, without faults.
    seg->dirty_mask |= bits;
    dirty_bytes_ += bytes;
  } else {
    // Drop the contents before the granules can be handed out again. Through the runtime, not
    // a bare madvise: pages of the span that sit on the remote tier must forget their server
    // copy, or the next touch would bring the old contents back instead of a fresh page.
    lock.unlock();
    {
      RuntimeCall scope;
      (void)rt_->DiscardPages(s->start, bytes);
    }
    lock.lock();
  }
  Segment* release = nullptr;
  {
    seg->used_mask &= ~bits;
    span_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
    s->next = spare_spans_;
    spare_spans_ = s;
    if (seg->used_mask == 0) {
      if (empty_segments_ >= 1) {  // keep one empty segment; return the others
        for (Segment** pp = &segments_; *pp != nullptr; pp = &(*pp)->next) {
          if (*pp == seg) {
            *pp = seg->next;
            break;
          }
        }
        release = seg;
        segment_bytes_.fetch_sub(kSegmentBytes, std::memory_order_relaxed);
        // The runtime drops the whole segment's pages.
        dirty_bytes_ -= static_cast<uint64_t>(__builtin_popcountll(seg->dirty_mask)) * kGranule;
        seg->dirty_mask = 0;
      } else {
        ++empty_segments_;
      }
    }
  }
  lock.unlock();
  if (release != nullptr) {
    {
      RuntimeCall call;
      (void)rt_->Free(release->run);
    }
    // Segment records are tiny and rare: recycle as spare span storage is not worth it; leak.
  }
}

// ---------------------------------------------------------------- large objects

void HeapCore::ReleaseRuns(const RunCache::Run* runs, int n) {
  for (int i = 0; i < n; ++i) {
    RuntimeCall call;
    (void)rt_->Free(runs[i].start);
  }
}

void* HeapCore::AllocLarge(size_t size, size_t align, size_t room, bool* reused) {
  const size_t page = rt_->page_size();
  const size_t extra = align > page ? align : 0;
  if (size > (size_t{1} << 46) - extra) {
    errno = ENOMEM;
    return nullptr;
  }
  if (reused != nullptr) *reused = false;
  const size_t want = room > size && room <= (size_t{1} << 46) ? room : size;
  void* run = nullptr;
  uint64_t pages = 0;
  if (extra == 0) {
    // A cached run that fits: for growth the largest up to `room` (the buffer grows in place),
    // otherwise the smallest of up to twice the request.
    const uint64_t lo = (size + page - 1) / page;
    const uint64_t hi = want > size ? (want + page - 1) / page : 2 * lo;
    RunCache::Run expired[RunCache::kSlots];
    int nexpired = 0;
    run = run_cache_.Take(lo, hi, want > size, os::MonotonicNanos(), &pages, expired, &nexpired);
    ReleaseRuns(expired, nexpired);
    if (run != nullptr && reused != nullptr) *reused = true;
  }
  if (run == nullptr) {
    RuntimeCall call;
    size_t bytes = want + extra;
    StatusOr<void*> r = RuntimeAllocate(rt_, bytes, tier_, flags_);
    if (!r.ok() && want > size) {
      bytes = size + extra;
      r = RuntimeAllocate(rt_, bytes, tier_, flags_);
    }
    if (!r.ok()) {
      errno = ENOMEM;
      return nullptr;
    }
    run = *r;
    pages = (bytes + page - 1) / page;
  }
  large_bytes_.fetch_add(pages * page, std::memory_order_relaxed);
  large_count_.fetch_add(1, std::memory_order_relaxed);
  uintptr_t p = reinterpret_cast<uintptr_t>(run);
  if (extra) p = (p + align - 1) & ~(align - 1);
  return reinterpret_cast<void*>(p);
}

void HeapCore::FreeLarge(void* p, Runtime::Impl* rt) {
  Region* r = rt->RegionOf(p);
  if (r == nullptr) return;
  const uint64_t head = r->RunHeadOf(r->PageIndex(p));
  if (head == Region::kNoRun) return;
  const uint64_t len = r->RunLength(head);
  // Large blocks are accounted to the heap that made them; any heap of this runtime may free
  // them, so the byte count is process-wide per runtime (see Stats).
  for (int s = 0; s < kMaxHeaps; ++s) {
    HeapCore* h = g_reg.heaps[s].load(std::memory_order_acquire);
    if (h != nullptr && h->rt_ == rt) {
      h->large_bytes_.fetch_sub(len * rt->page_size(), std::memory_order_relaxed);
      h->large_count_.fetch_sub(1, std::memory_order_relaxed);
      break;
    }
  }
  // Keep the run, pages and all, in the run cache of a heap that would have made it: same
  // runtime, default flags, and the heap's tier (a kAuto heap takes any).
  char* start = r->PageAddress(head);
  const uint8_t run_tier = r->record(head).tier.load(std::memory_order_relaxed);
  for (int s = 0; s < kMaxHeaps; ++s) {
    HeapCore* h = g_reg.heaps[s].load(std::memory_order_acquire);
    if (h == nullptr || h->rt_ != rt || h->flags_ != kAllocDefault ||
        (h->tier_ != Tier::kAuto && static_cast<uint8_t>(h->tier_) != run_tier)) {
      continue;
    }
    RunCache::Run evicted[RunCache::kSlots + 1];
    h->ReleaseRuns(evicted, h->run_cache_.Put(start, len, os::MonotonicNanos(), evicted));
    return;
  }
  RuntimeCall call;
  (void)rt->Free(start);
}

size_t HeapCore::LargeUsable(const void* p, Runtime::Impl* rt) {
  Region* r = rt->RegionOf(p);
  if (r == nullptr) return 0;
  const uint64_t head = r->RunHeadOf(r->PageIndex(p));
  if (head == Region::kNoRun) return 0;
  const uint64_t len = r->RunLength(head);
  const char* end = r->PageAddress(head) + len * r->page_size();
  return static_cast<size_t>(end - static_cast<const char*>(p));
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
        if (p == nullptr) errno = ENOMEM;
        return p;
      }
    }
  }
  return AllocLarge(size == 0 ? 1 : size, align);
}

bool HeapCore::FreeAny(void* p, Runtime::Impl* rt) {
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

size_t HeapCore::UsableSizeAny(const void* p, Runtime::Impl* rt) {
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

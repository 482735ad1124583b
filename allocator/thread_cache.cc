// The tiered heap's thread caches: creation, the primary heap's fast-path pointers
// (ThreadState::primary, Span::local_list), refills from and flushes to the central lists (remote
// batches with their owner), thread exit.
#include <pthread.h>

#include <algorithm>
#include <cstring>

#include "allocator/heap_core.h"
#include "allocator/heap_core_internal.h"
#include "allocator/meta_arena.h"

namespace tiermem::alloc {

constinit std::atomic<HeapCore*> g_primary{nullptr};

namespace {

// A thread's limit for a class it has only freed so far: half a batch. Blocks of other threads'
// spans go to the remote lists, not here, so only a thread whose cache was an exited thread's
// (whose spans still name it) meets it; a consumer holds at most a remote batch per class.
constexpr uint32_t FreeOnlyLimit(int cls) {
  return std::min(CacheLimit(cls), std::max<uint32_t>(2, BatchSize(cls) / 2));
}

void ThreadExit(void*) {
  t_thread.exiting = 1;
  HeapCore::FlushThreadCaches();
}

}  // namespace

// Registered before the first thread cache exists; pthread_key_create does not allocate.
void EnsureKey() {
  if (g_reg.key_ready.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(g_reg.mu);
  if (g_reg.key_ready.load(std::memory_order_relaxed)) return;
  if (pthread_key_create(&g_reg.key, ThreadExit) == 0) {
    g_reg.key_ready.store(true, std::memory_order_release);
  }
}

ThreadCache* HeapCore::SlowCache() {
  if (t_thread.exiting) return nullptr;
  ThreadCache* tc = t_thread.cache[slot_];
  bool parked = false;  // a primary cache of an exited thread: lists and limits kept
  if (tc != nullptr) {
    // A cache left from a destroyed heap that had this slot: its blocks are gone with it.
    memset(tc->cls, 0, sizeof(tc->cls));
    memset(&tc->runs, 0, sizeof(tc->runs));
    memset(tc->carving, 0, sizeof(tc->carving));
    memset(tc->remote, 0, sizeof(tc->remote));
  } else {
    {
      std::lock_guard<std::mutex> lock(g_reg.tc_mu);
      if (primary_ && g_reg.parked != nullptr) {
        tc = g_reg.parked;
        g_reg.parked = tc->next_free;
        --g_reg.nparked;
        parked = true;
      } else {
        tc = g_reg.free_tcs;
        if (tc != nullptr) g_reg.free_tcs = tc->next_free;
      }
    }
    if (tc == nullptr) tc = static_cast<ThreadCache*>(MetaAlloc(sizeof(ThreadCache)));
    if (tc == nullptr) return nullptr;
    if (!parked) memset(tc, 0, sizeof(*tc));
  }
  // A class starts with FreeOnlyLimit and gets CacheLimit at its first refill (RefillAndPop).
  for (int c = 0; c < kNumClasses && !parked; ++c) {
    tc->cls[c].max = FreeOnlyLimit(c);
    tc->cls[c].room = static_cast<int32_t>(tc->cls[c].max);
    tc->remote[c].room = static_cast<int32_t>(BatchSize(c));
  }
  tc->gen = gen_;
  t_thread.cache[slot_] = tc;
  if (primary_ && t_thread.bypass == 0) t_thread.primary = tc;
  if (!t_thread.key_set && g_reg.key_ready.load(std::memory_order_acquire)) {
    // Set after t_cache so that a malloc inside pthread_setspecific finds the cache.
    t_thread.key_set = 1;
    pthread_setspecific(g_reg.key, &g_reg);
  }
  return tc;
}

void HeapCore::ResumePrimary() {
  const HeapCore* h = g_primary.load(std::memory_order_acquire);
  if (h == nullptr || t_thread.exiting) return;
  ThreadCache* tc = t_thread.cache[h->slot_];
  if (tc != nullptr && tc->gen == h->gen_) t_thread.primary = tc;
}

// Span::aligned is read here and set (MarkAligned) under the class lock, so a span that handed out
// an aligned block never gets a local_list again: the primary fast path would push a pointer
// inside such a block as it is.
void HeapCore::SetOwner(Span* s, ThreadCache* owner) {
  s->owner.store(owner, std::memory_order_relaxed);
  ClassCache* list = nullptr;
  if (primary_ && !s->aligned.load(std::memory_order_relaxed)) {
    list = owner == NoOwner() ? NoOwnerList() : &owner->cls[s->cls];
  }
  s->local_list.store(list, std::memory_order_relaxed);
}

// Threads: local_list is cleared before `aligned` is published (release), so a thread that
// finds `aligned` set already (acquire) and hands out its block without the lock has seen the
// clear, and so has every thread it passes the block to.
void HeapCore::MarkAligned(Span* span) {
  if (span->aligned.load(std::memory_order_acquire)) return;  // set once, never cleared
  std::lock_guard<std::mutex> lock(central_[span->cls].mu);
  span->local_list.store(nullptr, std::memory_order_relaxed);
  span->aligned.store(true, std::memory_order_release);
}

void HeapCore::FlushClass(ClassCache* cc, int cls, uint32_t n) {
  if (n > cc->count()) n = cc->count();
  if (n == 0) return;
  void* head = cc->head;
  if (n == cc->count() && n <= CacheLimit(cls)) {
    // The whole list (thread exit): it ends in nullptr already, and Release takes it as one
    // transfer batch, so there is no need to walk it.
    cc->head = nullptr;
    cc->room += static_cast<int32_t>(n);
    Release(cls, head, n);
    return;
  }
  void* tail = head;
  for (uint32_t i = 1; i < n; ++i) tail = *static_cast<void**>(tail);
  cc->head = *static_cast<void**>(tail);
  cc->room += static_cast<int32_t>(n);
  *static_cast<void**>(tail) = nullptr;
  Release(cls, head, n);
}

void HeapCore::Overflow(Span* span, ClassCache* cc) {
  span->heap->FlushClass(cc, span->cls, BatchSize(span->cls));
}

void HeapCore::FlushRemoteClass(ThreadCache* tc, int cls) {
  RemoteList& r = tc->remote[cls];
  const uint32_t n = r.count(cls);
  void* head = r.head;
  r.head = nullptr;
  r.room = static_cast<int32_t>(BatchSize(cls));
  if (n == 0) return;
  // The owner is read here, once per batch, not on each free: the batch is one owner's when its
  // first two blocks are (a stream from one producer); otherwise (blocks of several threads freed
  // in turn) it is no one's: preferred by one owner, it would give it blocks on others' lines.
  // The spans are live (their blocks are on this list, so `used` is not 0: no thread can free
  // them), and Span::owner is atomic; a value stale against a carving thread's adoption or exit
  // under the class lock only makes the batch preferred by the wrong thread, never moves a block.
  SpanMap& map = GlobalSpanMap();
  Span* s = map.Lookup(head);
  ThreadCache* owner = s->owner.load(std::memory_order_relaxed);
  void* second = *static_cast<void**>(head);
  if (owner == NoOwner() || (second != nullptr &&
                             map.Lookup(second)->owner.load(std::memory_order_relaxed) != owner)) {
    owner = nullptr;
  }
  s->heap->Release(cls, head, n, owner);
}

void HeapCore::FlushRemote(ThreadCache* tc) {
  for (int c = 0; c < kNumClasses; ++c) FlushRemoteClass(tc, c);
}

void HeapCore::FlushCache(ThreadCache* tc) {
  FlushRemote(tc);
  for (int c = 0; c < kNumClasses; ++c) {
    FlushClass(&tc->cls[c], c, tc->cls[c].count());
    if (tc->carving[c] != nullptr) {
      std::lock_guard<std::mutex> lock(central_[c].mu);
      Orphan(central_[c], tc, c);
    }
  }
  FlushLocalRuns(tc);
}

// A thread that exits parks its primary cache whole, while fewer than kMaxParked are: the next
// new thread takes it with its lists, instead of this one returning every class it holds to the
// central lists and that one fetching them back, a lock each (thread_churn: 4 threads of 1024
// small blocks each per round, 16 classes: about 32 class locks per thread, now none).
bool HeapCore::Park(ThreadCache* tc) {
  FlushLocalRuns(tc);  // runs are larger than lists: they go to the run cache
  FlushRemote(tc);     // other threads' blocks go back; the carving spans stay with the cache
  std::lock_guard<std::mutex> lock(g_reg.tc_mu);
  if (g_reg.nparked >= kMaxParked) return false;
  tc->next_free = g_reg.parked;
  g_reg.parked = tc;
  ++g_reg.nparked;
  return true;
}

void HeapCore::FlushThreadCaches() {
  t_thread.primary = NoCache();  // SlowCache sets it again (not once the thread is exiting)
  for (int s = 0; s < kMaxHeaps; ++s) {
    ThreadCache* tc = t_thread.cache[s];
    if (tc == nullptr) continue;
    t_thread.cache[s] = nullptr;
    HeapCore* h = g_reg.heaps[s].load(std::memory_order_acquire);
    if (h != nullptr && h->gen_ == tc->gen) {
      if (h->primary_ && t_thread.exiting && h->Park(tc)) continue;
      h->FlushCache(tc);
    }
    std::lock_guard<std::mutex> lock(g_reg.tc_mu);
    tc->next_free = g_reg.free_tcs;
    g_reg.free_tcs = tc;
  }
}

void* HeapCore::RefillAndPop(ThreadCache* tc, int cls) {
  void* head = nullptr;
  if (tc == nullptr) {  // thread exiting: straight from the central list, one object
    return Fetch(cls, 1, &head, nullptr) == 1 ? head : nullptr;
  }
  uint32_t n = Fetch(cls, BatchSize(cls), &head, tc);
  if (n == 0) return nullptr;
  ClassCache& cc = tc->cls[cls];
  // The thread allocates this class: room for two batches, so that a thread that both frees
  // and allocates does not go to the central list at every batch boundary. A later refill means
  // the list ran dry again: a batch more, up to GrowLimit. The list was empty.
  const uint32_t limit = CacheLimit(cls);
  cc.max = cc.max < limit ? limit : std::min(GrowLimit(cls), cc.max + BatchSize(cls));
  cc.head = *static_cast<void**>(head);
  cc.room = static_cast<int32_t>(cc.max - (n - 1));
  return head;
}

}  // namespace tiermem::alloc

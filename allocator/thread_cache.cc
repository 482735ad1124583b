// The tiered heap's thread caches: creation, the primary heap's fast-path pointer
// (ThreadState::primary), refills from and flushes to the central lists, thread exit.
#include <pthread.h>

#include <algorithm>
#include <cstring>

#include "allocator/heap_core.h"
#include "allocator/heap_core_internal.h"
#include "allocator/meta_arena.h"

namespace tiermem::alloc {

constinit std::atomic<HeapCore*> g_primary{nullptr};

namespace {

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
    memset(tc->pending, 0, sizeof(tc->pending));
    memset(tc->kept, 0, sizeof(tc->kept));
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
  for (int c = 0; c < kNumClasses && !parked; ++c) {
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

void HeapCore::FlushClass(ClassCache* cc, int cls) {
  const uint32_t n = cc->n;
  if (n == 0) return;
  void* head = cc->head;  // the list ends in nullptr: Release takes it whole
  cc->head = nullptr;
  cc->n = 0;
  Release(cls, head, n);
}

// Span-local lists. A span's local_* fields and pending links are touched only by the thread
// whose cache is the span's owner (the owner test on free is exact for that thread: see
// Span::owner), so they need no lock; blocks leave them for the central list only through
// PutBack, under the class lock. The pairs of threads that meet at a span:
// - owner and a thread freeing another block of the span: the other thread's owner test fails
//   and the block goes to its remote list, then to the central list under the class lock; it
//   never touches the local list.
// - owner and a thread refilling from the span's central free_list (TakeListed) or putting
//   blocks back (PutBack): both under the class lock, on free_list and used only. The owner
//   reads `used` without the lock, as a hint: local_n <= used always holds (the blocks on the
//   local list are out of the span's free list, and only the owner moves them), so
//   local_n == used means no block of the span is anywhere else, for as long as the owner does
//   not hand one out. A stale read only delays or advances a give-back, and giving back free
//   blocks is correct at any time.
// - owner and the thread that takes its cache: at exit the lists go back under the class lock
//   (FlushPending) before Orphan clears the owner, or stay with a parked cache, which passes to
//   the next thread under g_reg.tc_mu.
// A span with local_n > 0 has used > 0, so it is never freed while on a pending list.
void HeapCore::LocalEdge(ThreadCache* tc, Span* s) {
  const int cls = s->cls;
  if (s->local_n == 1) {  // the list was empty: the span joins the pending list, newest first
    s->local_tail = s->local_head;
    s->pending_prev = nullptr;
    s->pending_next = tc->pending[cls];
    if (s->pending_next != nullptr) s->pending_next->pending_prev = s;
    tc->pending[cls] = s;
  }
  if (s->local_n != s->used.load(std::memory_order_relaxed) || s->kept ||
      s == tc->carving[cls]) {
    return;
  }
  if (tc->kept[cls] < KeptSpans(cls)) {
    s->kept = true;
    ++tc->kept[cls];
    return;
  }
  s->heap->GiveBackLocal(tc, s);
}

void* HeapCore::TakePending(ThreadCache* tc, int cls) {
  Span* s = tc->pending[cls];
  if (s == nullptr) return nullptr;
  tc->pending[cls] = s->pending_next;
  if (s->pending_next != nullptr) s->pending_next->pending_prev = nullptr;
  if (s->kept) {
    s->kept = false;
    --tc->kept[cls];
  }
  void* head = s->local_head;
  ClassCache& cc = tc->cls[cls];
  cc.head = *static_cast<void**>(head);
  cc.n = s->local_n - 1;
  s->local_head = nullptr;
  s->local_tail = nullptr;
  s->local_n = 0;
  tc->cls[cls].current = s;
  return head;
}

void HeapCore::GiveBackLocal(ThreadCache* tc, Span* s) {
  const int cls = s->cls;
  if (s->pending_prev != nullptr) {
    s->pending_prev->pending_next = s->pending_next;
  } else {
    tc->pending[cls] = s->pending_next;
  }
  if (s->pending_next != nullptr) s->pending_next->pending_prev = s->pending_prev;
  void* head = s->local_head;
  void* tail = s->local_tail;
  const uint32_t n = s->local_n;
  s->local_head = nullptr;
  s->local_tail = nullptr;
  s->local_n = 0;
  Span* to_free[kMaxTransfer];
  int nfree = 0;
  {
    std::lock_guard<std::mutex> lock(central_[cls].mu);
    PutBack(central_[cls], s, head, tail, n, to_free, &nfree);
  }
  if (nfree != 0) FreeSpan(to_free[0]);  // lock order: class, then page heap
}

void HeapCore::FlushPending(ThreadCache* tc, int cls) {
  Span* s = tc->pending[cls];
  tc->pending[cls] = nullptr;
  tc->cls[cls].current = nullptr;
  tc->kept[cls] = 0;
  if (s == nullptr) return;
  Span* to_free[kMaxTransfer];
  int nfree = 0;
  {
    std::lock_guard<std::mutex> lock(central_[cls].mu);
    while (s != nullptr) {
      Span* next = s->pending_next;
      void* head = s->local_head;
      void* tail = s->local_tail;
      const uint32_t n = s->local_n;
      s->local_head = nullptr;
      s->local_tail = nullptr;
      s->local_n = 0;
      s->kept = false;
      s->pending_prev = nullptr;
      s->pending_next = nullptr;
      PutBack(central_[cls], s, head, tail, n, to_free, &nfree);
      s = next;
    }
  }
  for (int i = 0; i < nfree; ++i) FreeSpan(to_free[i]);
}

void HeapCore::FlushRemote(ThreadCache* tc) {
  for (int c = 0; c < kNumClasses; ++c) FlushRemoteClass(tc, c);
}

void HeapCore::FlushCache(ThreadCache* tc) {
  FlushRemote(tc);
  for (int c = 0; c < kNumClasses; ++c) {
    FlushClass(&tc->cls[c], c);
    FlushPending(tc, c);  // while the spans still name tc as their owner (Orphan clears it)
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
  t_thread.primary = nullptr;  // SlowCache sets it again (not once the thread is exiting)
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
  if (void* p = TakePending(tc, cls)) return p;
  const uint32_t n = Fetch(cls, BatchSize(cls), &head, tc);
  if (n == 0) return nullptr;
  ClassCache& cc = tc->cls[cls];  // it was empty
  cc.head = *static_cast<void**>(head);
  cc.n = n - 1;
  // Mostly the carving span's fresh blocks, or blocks of one listed span: its frees come back
  // here while the list lasts.
  const Span* first = GlobalSpanMap().Lookup(head);
  tc->cls[cls].current = first->owner.load(std::memory_order_relaxed) == tc ? first : nullptr;
  return head;
}

}  // namespace tiermem::alloc

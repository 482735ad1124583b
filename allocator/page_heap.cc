// The page heap of HeapCore: 4 MiB segments from the runtime cut into spans of 64 KiB granules,
// and page runs for large requests with the run cache in front of the runtime.
#include <errno.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "allocator/heap_core.h"
#include "allocator/heap_core_internal.h"
#include "allocator/meta_arena.h"
#include "base/os.h"
#include "runtime/core/heap_runtime.h"

namespace tiermem::alloc {

// A kAuto heap whose NUMA tiers are at their limits (TIERMEM_DRAM_LIMIT...) places new memory on
// the remote tier when one is configured: that is how an unmodified program gets more memory
// than its DRAM limit (the runtime's policy moves hot pages back).
StatusOr<void*> RuntimeAllocate(HeapRuntime* rt, size_t bytes, Tier tier, uint32_t flags) {
  StatusOr<void*> r = rt->Allocate(bytes, tier, flags);
  if (!r.ok() && tier == Tier::kAuto && r.status().code() == StatusCode::kResourceExhausted &&
      rt->HasTier(Tier::kRemote)) {
    r = rt->Allocate(bytes, Tier::kRemote, flags);
  }
  return r;
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
  if (hold_free_) {
    // Untouched: nothing to drop. Its granules count as spans take them (AllocSpan); its slack
    // never does.
    RuntimeCall call;
    (void)rt_->HoldFree(run, run_bytes, HeapRuntime::FreeHold::kFresh);
  }
  segment_bytes_.fetch_add(kSegmentBytes, std::memory_order_relaxed);
  rt_->stats_block()->counters.heap_segment_bytes.fetch_add(kSegmentBytes, std::memory_order_relaxed);
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
      s->local_list.store(primary_ ? NoOwnerList() : nullptr, std::memory_order_relaxed);
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
      if (hold_free_) rt_->ReuseFree(s->start, static_cast<size_t>(k) * kGranule, tier_);
      dirty_bytes_ -= static_cast<uint64_t>(__builtin_popcountll(seg->dirty_mask & bits)) * kGranule;
      seg->dirty_mask &= ~bits;
      span_bytes_.fetch_add(k * kGranule, std::memory_order_relaxed);
      rt_->stats_block()->counters.heap_span_bytes.fetch_add(k * kGranule, std::memory_order_relaxed);
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
  // Under a DRAM limit the bound follows DRAM's room (RetainBound), read here, where it counts.
  const uint64_t max_dirty = hold_free_ ? RetainBound(rt_, kMaxDirtyBytes) : max_dirty_bytes_;
  if (dirty_bytes_ + bytes <= max_dirty) {
    // Keep the pages: the next span of any class takes these granules first, without faults.
    // Under a DRAM limit they count (at most RetainBound), and nothing evicts them.
    if (hold_free_) {
      RuntimeCall call;  // (a span with a page evicted is dropped instead: the pager's io lock)
      (void)rt_->HoldFree(s->start, bytes, HeapRuntime::FreeHold::kKeep);
    }
    seg->dirty_mask |= bits;
    dirty_bytes_ += bytes;
  } else {
    // Drop the contents before the granules can be handed out again. Through the runtime, not
    // a bare madvise: pages of the span that sit on the remote tier must forget their server
    // copy, or the next touch would bring the old contents back instead of a fresh page. Under
    // a DRAM limit they also leave the tiers' counts until a span takes them again.
    lock.unlock();
    {
      RuntimeCall scope;
      if (hold_free_) {
        (void)rt_->HoldFree(s->start, bytes, HeapRuntime::FreeHold::kDrop);
      } else {
        (void)rt_->DiscardPages(s->start, bytes);
      }
    }
    lock.lock();
  }
  Segment* release = nullptr;
  {
    seg->used_mask &= ~bits;
    span_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
    rt_->stats_block()->counters.heap_span_bytes.fetch_sub(bytes, std::memory_order_relaxed);
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
        rt_->stats_block()->counters.heap_segment_bytes.fetch_sub(kSegmentBytes, std::memory_order_relaxed);
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
    // otherwise the smallest that holds the request, with at most the larger of the request and
    // half the cache's bound to spare. The spare pages were resident in the cache already, so a
    // block that takes them costs no more memory than the cache did, and a program that frees
    // and allocates big blocks of varying sizes keeps reusing one run, as glibc reuses its heap.
    const uint64_t lo = (size + page - 1) / page;
    const uint64_t hi = want > size ? (want + page - 1) / page
                                    : lo + std::max(lo, run_cache_.max_pages() / 2);
    if (local_runs_) {  // still counted in large_bytes_ (see KeepLocal)
      run = TakeLocal(lo, hi, want > size, &pages);
      if (run != nullptr) {
        if (reused != nullptr) *reused = true;
        return run;
      }
    }
    RunCache::Run expired[RunCache::kSlots];
    int nexpired = 0;
    run = run_cache_.Take(lo, hi, want > size, os::MonotonicNanos(), &pages, expired, &nexpired);
    ReleaseRuns(expired, nexpired);
    if (run != nullptr && reused != nullptr) *reused = true;
    if (run != nullptr && hold_free_) rt_->ReuseFree(run, pages * page, tier_);
    if (run == nullptr) {
      // A miss: fresh pages for the request; give back as much of what was too small for it.
      ReleaseRuns(expired, run_cache_.Yield(lo, (want + page - 1) / page, expired));
    }
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
  rt_->stats_block()->counters.heap_large_bytes.fetch_add(pages * page, std::memory_order_relaxed);
  large_count_.fetch_add(1, std::memory_order_relaxed);
  rt_->stats_block()->counters.heap_large_count.fetch_add(1, std::memory_order_relaxed);
  uintptr_t p = reinterpret_cast<uintptr_t>(run);
  if (extra) p = (p + align - 1) & ~(align - 1);
  return reinterpret_cast<void*>(p);
}

void HeapCore::FreeLarge(void* p, HeapRuntime* rt) {
  Region* r = rt->RegionOf(p);
  if (r == nullptr) return;
  const uint64_t head = r->RunHeadOf(r->PageIndex(p));
  if (head == Region::kNoRun) return;
  const uint64_t len = r->RunLength(head);
  char* start = r->PageAddress(head);
  const uint8_t run_tier = r->record(head).tier.load(std::memory_order_relaxed);
  if (KeepLocal(rt, start, len, run_tier)) return;
  // Large blocks are accounted to the heap that made them; any heap of this runtime may free
  // them, so the byte count is process-wide per runtime (see Stats).
  for (int s = 0; s < kMaxHeaps; ++s) {
    HeapCore* h = g_reg.heaps[s].load(std::memory_order_acquire);
    if (h != nullptr && h->rt_ == rt) {
      h->large_bytes_.fetch_sub(len * rt->page_size(), std::memory_order_relaxed);
      h->large_count_.fetch_sub(1, std::memory_order_relaxed);
      rt->stats_block()->counters.heap_large_bytes.fetch_sub(len * rt->page_size(), std::memory_order_relaxed);
      rt->stats_block()->counters.heap_large_count.fetch_sub(1, std::memory_order_relaxed);
      break;
    }
  }
  // Keep the run, pages and all, in the run cache of a heap that would have made it: same
  // runtime, default flags, and the heap's tier (a kAuto heap takes any).
  for (int s = 0; s < kMaxHeaps; ++s) {
    HeapCore* h = g_reg.heaps[s].load(std::memory_order_acquire);
    if (h == nullptr || h->rt_ != rt || h->flags_ != kAllocDefault ||
        (h->tier_ != Tier::kAuto && static_cast<uint8_t>(h->tier_) != run_tier)) {
      continue;
    }
    if (h->hold_free_) {
      // Under a DRAM limit a cached run holds no live data: it counts (the cache is bounded by
      // RetainBound), but nothing evicts it; what falls out of the cache is freed.
      RuntimeCall call;
      (void)rt->HoldFree(start, len * rt->page_size(), HeapRuntime::FreeHold::kKeep);
      // The cache's bound as DRAM's room is now: what is over it leaves at this Put.
      h->run_cache_.SetMaxPages(RetainBound(rt, kRunCacheBytes) / rt->page_size());
    }
    RunCache::Run evicted[RunCache::kSlots + 1];
    h->ReleaseRuns(evicted, h->run_cache_.Put(start, len, os::MonotonicNanos(), evicted));
    return;
  }
  RuntimeCall call;
  (void)rt->Free(start);
}

// The run cache is one list behind one mutex for all threads: two threads that each free and
// allocate blocks of a few hundred KiB (the mixed workload) passed every one through it, and its
// lines, with the heap's byte counters, moved between cores at every large request. A few runs
// per thread serve most such requests without either (mixed: 78% of them).
bool HeapCore::KeepLocal(HeapRuntime* rt, char* start, uint64_t pages, uint8_t tier) {
  ThreadCache* tc = t_thread.primary;
  if (tc == NoCache()) return false;
  const HeapCore* h = g_primary.load(std::memory_order_relaxed);
  LocalRuns& lr = tc->runs;
  const uint64_t page = rt->page_size();
  if (!h->local_runs_ || h->rt_ != rt || pages * page > kLocalRunMaxBytes ||
      lr.n == kLocalRuns || (lr.total_pages + pages) * page > kLocalRunsMaxBytes ||
      (h->tier_ != Tier::kAuto && static_cast<uint8_t>(h->tier_) != tier)) {
    return false;
  }
  for (uint32_t i = 0; i < lr.n; ++i) {
    if (lr.start[i] == start) return true;  // a double free: it is cached already
  }
  lr.start[lr.n] = start;
  lr.pages[lr.n] = static_cast<uint32_t>(pages);
  ++lr.n;
  lr.total_pages += static_cast<uint32_t>(pages);
  return true;
}

char* HeapCore::TakeLocal(uint64_t lo, uint64_t hi, bool largest, uint64_t* pages) {
  ThreadCache* tc = t_thread.primary;
  if (tc == NoCache()) return nullptr;
  LocalRuns& lr = tc->runs;
  int best = -1;
  for (uint32_t i = 0; i < lr.n; ++i) {
    const uint64_t p = lr.pages[i];
    if (p < lo || p > hi) continue;
    if (best < 0 || (largest ? p > lr.pages[best] : p < lr.pages[best])) best = static_cast<int>(i);
  }
  if (best < 0) return nullptr;
  char* start = lr.start[best];
  *pages = lr.pages[best];
  lr.total_pages -= lr.pages[best];
  --lr.n;
  lr.start[best] = lr.start[lr.n];
  lr.pages[best] = lr.pages[lr.n];
  return start;
}

void HeapCore::FlushLocalRuns(ThreadCache* tc) {
  // t_thread.primary is NoCache() now (thread exit), so FreeLarge does not keep them again.
  while (tc->runs.n > 0) FreeLarge(tc->runs.start[--tc->runs.n], rt_);
  tc->runs.total_pages = 0;
}

size_t HeapCore::LargeUsable(const void* p, HeapRuntime* rt) {
  Region* r = rt->RegionOf(p);
  if (r == nullptr) return 0;
  const uint64_t head = r->RunHeadOf(r->PageIndex(p));
  if (head == Region::kNoRun) return 0;
  const uint64_t len = r->RunLength(head);
  const char* end = r->PageAddress(head) + len * r->page_size();
  return static_cast<size_t>(end - static_cast<const char*>(p));
}

}  // namespace tiermem::alloc

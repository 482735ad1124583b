// RunCache: page runs that the program freed, kept with their pages for the next large request.
//
// A fresh page run from the runtime costs a page fault (and a zeroed page) per page touched, and
// giving one back costs an madvise and, with several threads, a TLB shootdown. Programs that
// grow buffers with realloc, or free and allocate big blocks in a loop, pay that on every block;
// mimalloc and jemalloc avoid it by keeping freed memory for a while. The cache is bounded in
// pages and in entries, and an entry older than the age limit is given back at the next Put or
// Take; what falls out is returned to the caller to give back to the runtime.
//
// Thread safety: every method takes the cache's mutex (Lock/Unlock: fork only). The cache never
// calls the runtime itself, so its lock is never held across a runtime call.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

namespace tiermem::alloc {

class RunCache {
 public:
  struct Run {
    char* start;
    uint64_t pages;
    uint64_t stamp_ns;  // when it was put in the cache
  };
  static constexpr int kSlots = 64;

  constexpr RunCache(uint64_t max_pages, uint64_t max_age_ns)
      : max_pages_(max_pages), max_age_ns_(max_age_ns) {}

  // A cached run of `lo` to `hi` pages (the largest such run when `largest`, else the smallest),
  // removed from the cache; nullptr when there is none. Runs older than the age limit are moved
  // to `expired` (room for kSlots), their count to *nexpired.
  char* Take(uint64_t lo, uint64_t hi, bool largest, uint64_t now_ns, uint64_t* pages,
             Run* expired, int* nexpired);
  // Adds a run of `pages` pages. Returns in `evicted` (room for kSlots + 1) what must go back to
  // the runtime now: the oldest runs beyond the bounds, runs past the age limit, and the run
  // itself when it is larger than the whole bound. A run already in the cache (a double free)
  // is not added twice.
  int Put(char* start, uint64_t pages, uint64_t now_ns, Run* evicted);
  // Gives up cached runs too small for a request of `lo` pages, oldest first, as long as their
  // pages add up to at most `pages`; they go to `out` (room for kSlots) and the count is
  // returned. For a request the cache could not serve: the caller is about to fault in `pages`
  // fresh pages, and turning over as much of what did not fit keeps the footprint (cached runs
  // plus live blocks) from growing by the request. Without it, blocks of growing sizes leave
  // every smaller run cached beside the largest (5, 12, 20 and 25 MiB for one live block).
  int Yield(uint64_t lo, uint64_t pages, Run* out);
  // Empties the cache into `out` (room for kSlots); returns the count.
  int TakeAll(Run* out);

  uint64_t pages() const;
  uint64_t max_pages() const { return max_pages_.load(std::memory_order_relaxed); }
  // A new bound, for the next Put (under a DRAM limit the heap sets it before each Put from the
  // room DRAM has: RetainBound). Runs already cached beyond it leave at that Put.
  void SetMaxPages(uint64_t max_pages) { max_pages_.store(max_pages, std::memory_order_relaxed); }
  void Lock() { mu_.lock(); }
  void Unlock() { mu_.unlock(); }

 private:
  void RemoveAt(int i);
  int Expire(uint64_t now_ns, Run* out);

  std::atomic<uint64_t> max_pages_;
  const uint64_t max_age_ns_;
  mutable std::mutex mu_;
  Run runs_[kSlots] = {};  // oldest first
  int n_ = 0;
  uint64_t total_pages_ = 0;
};

}  // namespace tiermem::alloc

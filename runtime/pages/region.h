// A managed region: one large reserved range of address space, handed out as page runs, with a
// PageRecord per page. Metadata (records, run tags, free-list links: 20 bytes per page, 0.5%)
// lives in its own reserved mapping and is only backed where used.
//
// Run allocation: segregated free lists by floor(log2(pages)), first fit, with boundary tags so
// freed runs coalesce with free neighbours. All operations are allocation-free (no malloc), so
// they can run inside the preload allocator. Thread-safe: one mutex per region guards the run
// tags and free lists; page records are atomics (see page_table.h).
#pragma once

#include <cstddef>
#include <atomic>
#include <cstdint>
#include <mutex>

#include "runtime/pages/page_table.h"
#include "tiermem/status.hpp"

namespace tiermem {

class Region {
 public:
  static constexpr uint64_t kNoRun = ~0ull;

  Region() = default;
  ~Region();
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  // Reserves `bytes` (rounded up to whole 2 MiB, aligned to 2 MiB) of address space and its
  // metadata.
  Status Init(size_t bytes);
  // Unmaps everything. Safe to call twice.
  void Release();
  bool initialized() const { return base_ != nullptr; }

  char* base() const { return base_; }
  size_t bytes() const { return npages_ * page_size_; }
  uint64_t pages() const { return npages_; }
  size_t page_size() const { return page_size_; }
  bool Contains(const void* p) const {
    auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(base_);
    return base_ != nullptr && a >= b && a < b + npages_ * page_size_;
  }
  uint64_t PageIndex(const void* p) const {
    return (reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(base_)) / page_size_;
  }
  char* PageAddress(uint64_t index) const { return base_ + index * page_size_; }
  PageRecord& record(uint64_t index) const { return records_[index]; }

  // Takes a run of `npages` pages; returns its first page index, or kNoRun when no free run is
  // large enough. Records of the run are set to `initial` (kLocal; kInFlight for a run the caller
  // must finish before anyone may claim its pages, such as one placed on the remote tier) with
  // kPageRunHead on the first page and tier kNoTier until the caller binds it.
  uint64_t AllocRun(uint64_t npages, PageState initial = PageState::kLocal);
  // Freeing is two steps so a concurrent double free cannot drop pages that were handed out
  // again: DetachRun atomically checks that `first` heads a live run and takes the run away (its
  // pages stay allocated, no other DetachRun or RunLength sees it) and returns its length, or 0
  // when `first` is not the head of a live run (nothing changes then). The caller drops the
  // pages' contents, then ReleaseRun puts them on the free lists.
  uint64_t DetachRun(uint64_t first);
  void ReleaseRun(uint64_t first, uint64_t len);
  // DetachRun + ReleaseRun, for callers with nothing to do in between.
  uint64_t FreeRun(uint64_t first);
  // Length of the live run starting at `first`, 0 if `first` is not a run head.
  uint64_t RunLength(uint64_t first) const;
  // The head of the live run containing page `index`, or kNoRun.
  uint64_t RunHeadOf(uint64_t index) const;

  // Quiet chunks: the region's pages in aligned chunks of kChunkPages (2 MiB of 4 KiB pages),
  // and for each a bit that says "every page here is free, or allocated and nobody has touched
  // it": counted nowhere (kLocal with kUntouchedTier and no kPageHeapFree), or on the remote
  // tier with no copy on any server (kRemote, no slot: zeros at its first touch): a page the
  // policy's scan would read and pass over (a remote page is counted, never listed; the scan
  // takes the remote tier's count from the core, Migrator::Scan). A program's large buffer that it touches at
  // its ends only (GNU sort sizes its buffer by the machine's memory) is millions of such
  // records, and the scan skips each quiet chunk whole (Migrator::ScanWindow).
  //
  // The bits are set by the resident count alone (Runtime::Impl::CountResident, the policy
  // thread: MarkQuiet, then it reads the chunk's records again and takes the bit back if one
  // is no longer quiet); every other way a page leaves the quiet states starts from a state the
  // scan passes over too, and ends in AllocRun (free pages handed out), ReuseFree (the heap's
  // dropped pages handed out again) or a zero fill (Pager::ZeroFillRun, Pager::FetchBack),
  // which clear the bits of their pages after they write the records (ClearQuiet). Both sides put a sequentially consistent fence between the bit and
  // the records, so either the count's second reading sees the new records, or the clear comes
  // after its set: a set bit never hides a page the scan would list. The count's own moves from
  // "untouched" to DRAM are made before it decides the chunk's bit.
  static constexpr uint64_t kChunkPages = 512;
  bool Quiet(uint64_t chunk) const {
    return (quiet_[chunk / 64].load(std::memory_order_relaxed) >> (chunk % 64)) & 1;
  }
  void MarkQuiet(uint64_t chunk) {
    quiet_[chunk / 64].fetch_or(uint64_t{1} << (chunk % 64), std::memory_order_seq_cst);
  }
  void UnmarkQuiet(uint64_t chunk) {
    quiet_[chunk / 64].fetch_and(~(uint64_t{1} << (chunk % 64)), std::memory_order_seq_cst);
  }
  // Clears the bits of the chunks [first, first+npages) touches, after a fence.
  void ClearQuiet(uint64_t first, uint64_t npages);
  // Whether the scan passes over the page without counting it (the quiet states above).
  bool PageQuiet(uint64_t index) const;

  // One past the highest page ever handed out: pages at or beyond it were never allocated.
  uint64_t high_water() const { return high_water_.load(std::memory_order_acquire); }
  // fork(): the runtime's atfork handlers hold every region's lock across the fork, so the child
  // never inherits a lock taken by a thread that does not exist there.
  void LockForFork() { mu_.lock(); }
  void UnlockAfterFork() { mu_.unlock(); }

  uint64_t free_pages() const;
  uint64_t largest_free_run() const;

 private:
  static constexpr int kBuckets = 40;
  static constexpr size_t kHugePageBytes = 2u << 20;
  static constexpr uint32_t kNil = ~0u;
  static int Bucket(uint64_t npages);
  void PushFree(uint64_t first, uint64_t len);
  void RemoveFree(uint64_t first);
  void SetFreeTags(uint64_t first, uint64_t len);

  char* base_ = nullptr;
  uint64_t npages_ = 0;
  size_t page_size_ = 4096;
  // Metadata mapping: records_[npages_], then links_[npages_], then quiet_ (a bit per chunk).
  void* meta_ = nullptr;
  size_t meta_bytes_ = 0;
  int meta_watch_ = -1;  // WatchRange's handle: the metadata counts as the runtime's own DRAM
  PageRecord* records_ = nullptr;
  // Free-run bookkeeping of a page, in one record so that the pages at a run's edge touch one
  // metadata page rather than three. tag: at the first and last page of a free run, its length;
  // at the first page of a live run, its length (page state tells free from live). next/prev:
  // the free list of the run's size bucket, at a free run's first page.
  struct Link {
    uint32_t tag;
    uint32_t next;
    uint32_t prev;
  };
  Link* links_ = nullptr;
  std::atomic<uint64_t>* quiet_ = nullptr;
  uint32_t heads_[kBuckets];
  uint64_t free_pages_ = 0;
  std::atomic<uint64_t> high_water_{0};
  mutable std::mutex mu_;
};

}  // namespace tiermem

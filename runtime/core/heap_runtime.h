// The runtime as the allocator sees it (allocator/, the preload library): the calls its heaps
// make and the regions, options and counters they read, and nothing of the pager, the policy
// thread or the transports. Runtime::Impl (runtime_impl.h, private to runtime/core) derives from
// it and does the work; this is the only header of runtime/ the allocator includes
// (scripts/check-layering.sh).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/options.h"
#include "runtime/pages/region.h"
#include "runtime/stats/stats_block.h"
#include "tiermem/tiermem.hpp"

namespace tiermem {

class HeapRuntime {
 public:
  static constexpr int kMaxRegions = 256;

  // The runtime behind `rt` (a Heap's, the preload library's).
  static HeapRuntime* Of(Runtime& rt);

  bool running() const;
  StatusOr<void*> Allocate(size_t bytes, Tier tier, uint32_t flags);
  Status Free(void* ptr);
  bool HasTier(Tier tier) const;
  // The TIERMEM_STATS report, once: from Stop, or the preload library's exit handler.
  void FinishStats();
  // Drops the contents of [p, p+bytes) inside a live allocation, like MADV_DONTNEED: the next
  // touch sees a zero page. Pages on the remote tier forget their server copy. For the heap,
  // which recycles spans inside a run it keeps.
  Status DiscardPages(void* p, size_t bytes);
  // The heap's free pages (allocator/page_heap.cc; runtime/core/resident.cc). A DRAM limit is
  // kept against pages that hold live data, so pages of a live run in which the heap holds no
  // live block (a free span's granules, a segment's room not yet cut into spans, a cached page
  // run) leave every tier's count while they are free:
  // - HoldFree(p, bytes, kDrop): their contents are dropped as by DiscardPages (a page on the
  //   remote tier forgets its server copy: never faulted back) and they leave their tier's
  //   count (PageRecord::tier kNoTier: no plan, relief or migration takes them, and nothing of
  //   them is sent to memd). kFresh: the same without the drop, for pages the caller vouches
  //   were never touched (a fresh run). kKeep: the heap keeps them for its next request without
  //   a fault (its bounded caches of free pages): they stay resident and counted, flagged
  //   kPageHeapFree, and are never listed, sampled or evicted (a range with a page that is not
  //   local is dropped instead: kept, it would be read back from memd).
  // - ReuseFree(p, bytes, tier): the heap hands them out again: the flag goes, and the pages it
  //   dropped belong to `tier` again (kDram for kAuto and kRemote: their next touch is a zero
  //   page, here, on the run's DRAM binding). On DRAM they count once CountResident finds them
  //   resident (kUntouchedTier until then); on CXL at once.
  // Both take whole pages of one live run the calling heap owns, which no thread touches while
  // they are held free. kKeep, kFresh and ReuseFree are lock-free and allocation-free (the page
  // heap calls them under its lock); kDrop takes the pager's io lock (as DiscardPages).
  enum class FreeHold { kDrop, kFresh, kKeep };
  Status HoldFree(void* p, size_t bytes, FreeHold how);
  void ReuseFree(void* p, size_t bytes, Tier tier);
  // Bytes DRAM's count is below TIERMEM_DRAM_LIMIT now (0 at or over it); UINT64_MAX without a
  // limit. Lock-free: a moment's figure, for the heap's bounds on the free memory it keeps.
  uint64_t DramRoom() const;
  // The region holding p, or nullptr. Lock-free (the preload library asks it on every free).
  Region* RegionOf(const void* p) const;

  const OptionValues& options() const { return opts_; }
  StatsBlock* stats_block() const { return sb_; }  // the live counters (never null once made)
  size_t page_size() const { return page_size_; }

 protected:
  HeapRuntime() = default;
  ~HeapRuntime() = default;
  HeapRuntime(const HeapRuntime&) = delete;
  HeapRuntime& operator=(const HeapRuntime&) = delete;

  OptionValues opts_{};
  size_t page_size_ = 4096;
  StatsBlock* sb_ = nullptr;  // set by Runtime::Impl's constructor, then by Init
  // Allocated as the address space grows (a table of 256 Regions would cost every process about
  // 80 KB of written memory at start). regions_[i] is set before nregions_ passes i (release);
  // readers load nregions_ (acquire) and read only below it.
  std::array<std::unique_ptr<Region>, kMaxRegions> regions_;
  std::atomic<int> nregions_{0};
};

}  // namespace tiermem

// The heap's free pages out of the tiers' counts (Runtime::Impl::HoldFree / ReuseFree, see
// runtime_impl.h): under a DRAM limit the budget counts the pages that hold live data, so a page
// the heap holds with only free blocks in it is dropped here and is never evicted to memd nor
// faulted back from it.
//
// Threads, and why a page held free is never sent out or read back:
// - Discarded (HoldFree): the heap's thread that freed the span or the run, with the page heap's
//   lock released. The page's tier goes to kNoTier first: from then on budget relief (PopVictims,
//   TakeWatchedVictims: tier must be kDram), the policy thread's scan (ResidentTier: no tier, not
//   listed) and migrations working from a stale view (Retag: no tier, nothing counted) leave it
//   alone. Then the pager's OnDiscard, under its io lock, waits for a fault or an eviction that
//   claimed the page before (kInFlight) and for every queued eviction write, drops the page and
//   frees its server slot: no eviction of it is in progress afterwards, and no later one picks it.
// - Evicted: the policy thread (relief, plan) and the pager's writer thread, only for pages with
//   a tier; a page held free has none.
// - Faulted: the pager's fault thread, only when a thread touches the page. Nobody touches a page
//   the heap holds free; after ReuseFree the owner's first touch of a dropped page is a missing
//   fault on a kLocal page without a slot (a zero page, by the kernel or, in a range registered
//   with userfaultfd, by the fault thread), never a read from memd.
// ReuseFree runs on the heap's thread that hands the pages out again, before it returns them,
// so the page counts before anyone can touch it.
//
// Untouched runs (Allocate when DRAM's count has no room, ChooseTier): the allocating thread
// stores kUntouchedTier in each record before it returns the run, so no other thread knows the
// pages yet; the program's threads touch them through the kernel (they are in no userfaultfd
// range until an eviction registers them). The policy thread alone moves them onto DRAM's
// count (CountResident: a compare-exchange from kUntouchedTier, lost to a Free or HoldFree that
// exchanged the tier first) and then into relief's ring (Migrator::OnResident under its spin
// lock, as the fault thread does). From then on they are ordinary local DRAM pages.
//
// The early count (ResidentGrewPastSlack) reads the process's resident memory on the policy
// thread; resident_rss_ and resident_slack_ are that thread's alone.
#include "runtime/core/runtime_impl.h"

#include <algorithm>

#include "base/os.h"
#include "runtime/tiering/migrator.h"

namespace tiermem {

Status Runtime::Impl::HoldFree(void* p, size_t bytes, FreeHold how) {
  Region* region = RegionOf(p);
  if (region == nullptr || bytes == 0 || reinterpret_cast<uintptr_t>(p) % page_size_ != 0 ||
      bytes % page_size_ != 0 || !region->Contains(static_cast<char*>(p) + bytes - 1)) {
    return InvalidArgument("HoldFree: not whole pages of tiermem's managed memory");
  }
  const uint64_t first = region->PageIndex(p), n = bytes / page_size_;
  // A page kept must be here: one on the remote tier (or on its way) would be read back from
  // memd when the heap hands it out again, for bytes nobody needs. Such a range is dropped.
  for (uint64_t i = first; how == FreeHold::kKeep && i < first + n; ++i) {
    if (region->record(i).state.load(std::memory_order_acquire) != static_cast<uint8_t>(PageState::kLocal)) {
      how = FreeHold::kDrop;
    }
  }
  if (how == FreeHold::kKeep) {
    for (uint64_t i = first; i < first + n; ++i) {
      region->record(i).flags.fetch_or(kPageHeapFree, std::memory_order_relaxed);
    }
    return Status::Ok();
  }
  for (uint64_t i = first; i < first + n; ++i) {
    PageRecord& rec = region->record(i);
    const uint8_t t = rec.tier.exchange(kNoTier, std::memory_order_relaxed);
    if (t < kNumTiers) allocated_[t].fetch_sub(page_size_, std::memory_order_relaxed);
    rec.flags.fetch_and(uint8_t(~kPageHeapFree), std::memory_order_relaxed);
  }
  sb_->counters.heap_free_dropped_pages.fetch_add(n, std::memory_order_relaxed);
  if (how == FreeHold::kFresh) return Status::Ok();
  if (migrator_) migrator_->OnFree(region, first, n);  // lift sampling protection
  return DiscardPages(p, bytes);
}

void Runtime::Impl::ReuseFree(void* p, size_t bytes, Tier tier) {
  Region* region = RegionOf(p);
  if (region == nullptr) return;
  // A dropped page handed out again is not resident until its owner touches it: on DRAM it is
  // "untouched", and the next CountResident that finds it resident counts it. (CXL pages count
  // at once: CountResident looks at DRAM only; so do all where the limit is a cap.)
  const bool now = tier == Tier::kCxl || !CountsResident();
  const uint8_t to = now ? static_cast<uint8_t>(tier == Tier::kCxl ? Tier::kCxl : Tier::kDram) : kUntouchedTier;
  const uint64_t first = region->PageIndex(p), n = bytes / page_size_;
  uint64_t counted = 0;
  for (uint64_t i = first; i < first + n; ++i) {
    PageRecord& rec = region->record(i);
    uint8_t old = kNoTier;
    counted += rec.tier.compare_exchange_strong(old, to, std::memory_order_relaxed);
    rec.flags.fetch_and(uint8_t(~kPageHeapFree), std::memory_order_relaxed);
  }
  if (now) allocated_[to].fetch_add(counted * page_size_, std::memory_order_relaxed);
  region->ClearQuiet(first, n);  // on DRAM's count now, or held free no more: listed again
}

uint64_t Runtime::Impl::DramRoom() const {
  const uint64_t limit = tier_limit_[Index(Tier::kDram)];
  if (limit == 0) return UINT64_MAX;
  const uint64_t dram = allocated_[Index(Tier::kDram)].load(std::memory_order_relaxed);
  return limit > dram ? limit - dram : 0;
}

bool Runtime::Impl::UnseenRoom(uint64_t bytes) const {
  // All of them, not UnseenPages' estimate: the kernel's count below is the safeguard.
  if (unseen_pages_.load(std::memory_order_relaxed) * page_size_ < bytes) return false;
  const uint64_t rss = os::ProcessResidentBytes();
  return rss != 0 && rss + bytes <= tier_limit_[Index(Tier::kDram)];
}

bool Runtime::Impl::ResidentGrewPastSlack() const {
  const uint64_t rss = os::ProcessResidentBytes();
  return rss > resident_rss_ + resident_slack_;
}

// The chunk's quiet bit (Region::Quiet), after this pass's changes to its pages: set, then the
// records read again and the bit taken back if one is no longer quiet (region.h says why a set
// bit then never hides a page the policy's scan would list). Pages past `m` are past the
// region's high-water mark: free, and an allocation there clears the bit.
void Runtime::Impl::MarkQuietChunk(Region& r, uint64_t first, uint64_t m) {
  const uint64_t chunk = first / Region::kChunkPages;
  auto all_quiet = [&] {
    for (uint64_t j = 0; j < m; ++j) {
      if (!r.PageQuiet(first + j)) return false;
    }
    return true;
  };
  if (!all_quiet()) {
    if (r.Quiet(chunk)) r.UnmarkQuiet(chunk);
    return;
  }
  if (r.Quiet(chunk)) return;
  r.MarkQuiet(chunk);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!all_quiet()) r.UnmarkQuiet(chunk);
}

void Runtime::Impl::CountResident(CountWhen when) {
  const uint64_t t0 = os::MonotonicNanos();
  if (!CountsResident()) return;
  // Before an eviction (relief's, or a round's plan that would demote) with pages in DRAM's
  // count that nobody has seen touched, DRAM may be over its budget by them alone (resident.cc's
  // header, ChooseTier). A count costs a look at every live page, an eviction a write to memd and
  // a fault back: then a larger share of the time than the routine count's is worth it.
  const bool for_eviction =
      when == CountWhen::kBeforeEviction && unseen_pages_.load(std::memory_order_relaxed) > 0 &&
      t0 >= resident_eviction_next_ns_;
  // Between counts, pages handed out uncounted (an untouched run, dropped granules handed out
  // again) count only once a count finds them touched; a program that touches them fast would
  // run past the limit until then. The process's resident memory (one read of the kernel's
  // count) tells: grown by more than DRAM's room at the last count, it is counted now.
  if (!for_eviction && t0 < resident_next_ns_ && !ResidentGrewPastSlack()) return;
  // Out of unseen_pages_ as the pass ends: UnseenRoom sees them while DRAM's count holds them.
  const uint64_t unseen = unseen_pages_.load(std::memory_order_relaxed);
  uint64_t out_all = 0;  // pages this pass took out of DRAM's count
  constexpr size_t kChunk = 512;  // pages per mincore call: the vector stays on the stack
  unsigned char vec[kChunk];
  constexpr auto kDramTier = static_cast<uint8_t>(Tier::kDram);
  constexpr auto kLocalState = static_cast<uint8_t>(PageState::kLocal);
  const int n = nregions_.load(std::memory_order_acquire);
  uint64_t held = 0, untouched = 0;  // pages, after this pass's changes
  for (int k = 0; k < n; ++k) {
    Region& r = *regions_[k];
    const uint64_t end = r.high_water();
    for (uint64_t i = 0; i < end; i += kChunk) {
      const size_t m = std::min<uint64_t>(kChunk, end - i);
      if (os::ResidentMap(r.PageAddress(i), m, vec) != 0) continue;
      uint64_t in = 0, out = 0;
      Migrator* relief = live_migrator_.load(std::memory_order_acquire);
      for (size_t j = 0; j < m; ++j) {
        PageRecord& rec = r.record(i + j);
        // Only local pages: a page in flight or remote belongs to the pager, whose accounting
        // (OnResident, OnEvicted) moves its count; a free or released one counts nowhere.
        if (rec.state.load(std::memory_order_acquire) != kLocalState) continue;
        // Each change of a page between DRAM and "untouched" is one compare-exchange of its
        // tier with the count moved by its winner: Free, HoldFree and Retag exchange the tier
        // too, and move bytes only for a real tier they find, so no page counts twice or never.
        if (vec[j] & 1) {
          uint8_t expect = kUntouchedTier;
          const bool now_in = rec.tier.compare_exchange_strong(expect, kDramTier, std::memory_order_relaxed);
          in += now_in;
          // The kernel backed it on a first touch, unseen by the pager: relief's ring learns
          // of it here, or relief could never take it (an untouched run written past the limit).
          if (now_in && relief != nullptr) relief->OnResident(&r, i + j, 1, false);
          // The heap's kept free pages, for the stats only (a moment's figure).
          held += rec.tier.load(std::memory_order_relaxed) == kDramTier &&
                  (rec.flags.load(std::memory_order_relaxed) & kPageHeapFree) != 0;
        } else {
          uint8_t expect = kDramTier;
          out += rec.tier.compare_exchange_strong(expect, kUntouchedTier, std::memory_order_relaxed);
          untouched += rec.tier.load(std::memory_order_relaxed) == kUntouchedTier;
        }
      }
      if (in != out) allocated_[kDramTier].fetch_add((in - out) * page_size_, std::memory_order_relaxed);
      out_all += out;
      MarkQuietChunk(r, i, m);
    }
  }
  const uint64_t t1 = os::MonotonicNanos();
  resident_next_ns_ = t1 + kResidentCostShare * (t1 - t0);
  resident_eviction_next_ns_ = t1 + kEvictionCountShare * (t1 - t0);
  // The pages taken out are the unseen ones found untouched, and any other the kernel dropped
  // since (a page of a heap run kept free, when the machine swaps it out): an estimate.
  if (unseen >= kUnseenSample) unseen_untouched_.store(static_cast<uint32_t>(std::min(out_all, unseen) * 1024 / unseen));
  // The room DRAM has now (DramRoom), at least a 32nd of the limit: at the limit every page
  // touched would otherwise call for a count, and a count costs a look at every live page.
  const uint64_t limit = tier_limit_[kDramTier];
  resident_slack_ = limit == 0 ? 0 : std::max(DramRoom(), limit / 32);
  resident_rss_ = os::ProcessResidentBytes();
  dram_after_count_.store(TierPages(Tier::kDram), std::memory_order_relaxed);
  unseen_pages_.fetch_sub(unseen, std::memory_order_relaxed);  // only allocations add: never below zero
  ProcessCounters& c = sb_->counters;
  c.dram_free_held_bytes.store(held * page_size_, std::memory_order_relaxed);
  c.dram_untouched_bytes.store(untouched * page_size_, std::memory_order_relaxed);
  c.resident_counts.fetch_add(1, std::memory_order_relaxed);
  c.resident_count_ns.fetch_add(t1 - t0, std::memory_order_relaxed);
}

}  // namespace tiermem

// The per-page record of a managed region: 8 bytes per 4 KiB page (0.2%). Fields are separate
// atomics so the fault handler, the migrator and the policy can each update their own without a
// lock; a page's state transitions are made with compare-exchange on `state`.
#pragma once

#include <atomic>
#include <cstdint>

namespace tiermem {

enum class PageState : uint8_t {
  kFree = 0,       // not part of a live allocation
  kLocal = 1,      // allocated; mapped (or never touched) in this process, on a NUMA node
  kRemote = 2,     // allocated; contents on a memory server, not mapped here
  kInFlight = 3,   // being written out or read back; whoever set it finishes the transition
  kReleasing = 4,  // its run is being freed: nobody may claim it (not kFree: the region's
                   // boundary tags read kFree as "in the free lists", which it is not yet)
};

enum PageFlags : uint8_t {
  kPageRunHead = 1u << 0,    // first page of an allocation (Free must point here)
  kPagePinned = 1u << 1,     // the automatic policy leaves it where it is
  kPageRemoteClean = 1u << 2,// the copy on the server equals the local page (no write-back needed)
  kPageAhead = 1u << 3,      // made resident by the prefetcher, not by an access, and no access
                             // seen since (a write fault or a sampled access clears it, and so
                             // does an eviction): not a fault sample, and relief's first victim
  kPageSampled = 1u << 4,    // held by the soft sampler (runtime/paging/soft_sampler.h): state
                             // kInFlight, its bytes in the sampler's copy until its next touch;
                             // the policy counts it as resident on its tier
  kPageEvicting = 1u << 5,   // claimed (kInFlight) by an eviction window whose write is not yet
                             // acknowledged. Whoever clears it decides the page's fate: the
                             // writer thread, which then drops it, or the fault handler on a
                             // write to the page, which calls its eviction off (the page stays
                             // local and dirty; the writing thread does not wait for memd)
  kPageHeapFree = 1u << 6,   // the heap keeps it with no live block in it (a free span's granule,
                             // a cached page run: Runtime::Impl::HoldFree): resident and counted
                             // on its tier, but never listed, sampled or evicted; the heap drops
                             // it (out of every count) when it lets it go
};

// PageRecord::tier of a page whose bytes no tier counts any more (its run is being freed, or
// the heap holds it with no live block: Runtime::Impl::HoldFree).
inline constexpr uint8_t kNoTier = 0xff;
// PageRecord::tier of a live local DRAM page that was not resident when the runtime last looked
// (Runtime::Impl::CountResident: allocated, never touched or dropped): no tier counts it, and
// the count that finds it resident again puts it back on DRAM. Like kNoTier, any value from
// kNumTiers up is "counted nowhere" to every reader of the tier.
inline constexpr uint8_t kUntouchedTier = 0xfe;

struct PageRecord {
  std::atomic<uint8_t> state{0};        // PageState
  std::atomic<uint8_t> tier{0};         // Tier it is bound to (kDram, kCxl, kRemote), or kNoTier
  std::atomic<uint8_t> flags{0};        // PageFlags
  std::atomic<uint8_t> stamp{0};        // bumped each time the pager makes the page resident:
                                        // tells the relief ring's current entry from stale ones
  std::atomic<uint32_t> remote_slot{0}; // slot on the memory server + 1; 0 = none
};
static_assert(sizeof(PageRecord) == 8, "PageRecord must stay 8 bytes");

}  // namespace tiermem

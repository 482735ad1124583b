// Small helpers shared by the pager's parts (pager.cc, pager_evict.cc, the fault thread's files).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/remote/transport.h"
#include "runtime/pages/page_table.h"

namespace tiermem::pager_internal {

// Rejoin's wait after a failed attempt to connect to a server again: 1 s after the first, then
// twice the last, at most kRejoinMaxWaitMs (a server gone for good costs an attempt, and up to
// a second's connect timeout, every half minute instead of every second).
inline constexpr uint32_t kRejoinMaxWaitMs = 30000;
inline uint32_t NextRejoinWaitMs(uint32_t last_ms) {
  const uint64_t next = last_ms == 0 ? 1000 : uint64_t{last_ms} * 2;
  return next > kRejoinMaxWaitMs ? kRejoinMaxWaitMs : static_cast<uint32_t>(next);
}

constexpr size_t kPage = remote::kPage;
constexpr size_t kBatch = 256;  // faults served per round, and pages per eviction window
// Fresh pages zero-filled by one fault (256 KiB): the first touch of remote memory costs one
// handler round trip per batch. Larger batches commit more pages that may never be touched.
constexpr size_t kZeroBatch = 64;

inline uint8_t S(PageState s) { return static_cast<uint8_t>(s); }

inline bool Cas(PageRecord& r, PageState from, PageState to) {
  uint8_t f = S(from);
  return r.state.compare_exchange_strong(f, S(to), std::memory_order_acq_rel);
}

// A page claimed by an eviction window carries kPageEvicting until its fate is decided; the
// one who clears the flag decides it. TakeEvictingFlag is that step for both sides: true when
// this caller cleared it, false when it was not set (already decided by the other side, or not
// an eviction's claim). The writer thread takes it before it drops a page (the page goes
// remote); the fault handler takes it on a write to the page (CallOffEviction: the page stays
// local and dirty, its server copy no longer current).
inline bool TakeEvictingFlag(PageRecord& r) {
  uint8_t f = r.flags.load(std::memory_order_acquire);
  do {
    if (!(f & kPageEvicting)) return false;
  } while (!r.flags.compare_exchange_weak(f, uint8_t(f & ~kPageEvicting), std::memory_order_acq_rel));
  return true;
}
inline bool CallOffEviction(PageRecord& r) {
  if (r.state.load(std::memory_order_acquire) != S(PageState::kInFlight) || !TakeEvictingFlag(r)) return false;
  r.flags.fetch_and(uint8_t(~kPageRemoteClean), std::memory_order_relaxed);  // written from now on
  return true;
}

// Calls fn(i, j) for each maximal run [i, j) of adjacent pages of idx[0..m) (ascending); with
// `claimed`, runs of claimed pages only: pages an eviction did not claim (being fetched by the
// fault handler, say) must not be protected or dropped by it.
template <typename Fn>
void ForRuns(const uint64_t* idx, size_t m, const uint8_t* claimed, Fn&& fn) {
  for (size_t i = 0; i < m;) {
    if (claimed != nullptr && !claimed[i]) {
      ++i;
      continue;
    }
    size_t j = i + 1;
    while (j < m && (claimed == nullptr || claimed[j]) && idx[j] == idx[j - 1] + 1) ++j;
    fn(i, j);
    i = j;
  }
}

}  // namespace tiermem::pager_internal

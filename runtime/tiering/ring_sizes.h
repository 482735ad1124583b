// How many entries the policy thread's rings and fault log hold, by the DRAM budget. Each entry
// is 8 bytes, and the runtime counts a ring against the DRAM limit as far as it has been written
// (base/own_memory.h): a ring that cycles counts all of it, and the round's copy of the fault
// log (glibc's heap, counted too) is as large as the log. Fixed at their largest sizes (3 MiB
// together), they took a tenth of a 32 MiB limit from the program; the two relief rings sized
// by the budget take 3/256 of it, 128 KiB at least and 2.5 MiB at most, and the fault log keeps
// its 512 KiB (below; docs/results/NOTES.md, "the runtime's rings and logs sized by the DRAM
// limit").
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace tiermem {

struct RingSizes {
  size_t relief = 0;  // the relief ring: every page made resident, FIFO
  size_t ahead = 0;   // the ring of pages fetched ahead (relief's first victims)
  size_t log = 0;     // the fault log: the pages made resident since the last round
};

// The least any of them holds: 32 MiB of pages, more than relief's slack (4 MiB at small
// limits) over a small budget, and 64 KiB of DRAM.
inline constexpr size_t kMinRingEntries = size_t{1} << 13;
// The most the relief ring holds: 1 GiB of pages (2 MiB), reached at a 256 MiB limit; past it
// the pages it drops are found by the round's plan. The ahead ring and the fault log hold at
// most 2^16 (512 KiB): a round takes a few thousand faults' entries at the pager's rate.
inline constexpr size_t kMaxReliefEntries = size_t{1} << 18;
inline constexpr size_t kMaxAheadEntries = size_t{1} << 16;
inline constexpr size_t kMaxLogEntries = size_t{1} << 16;

// `budget_pages`: the DRAM limit in pages, 0 for none (the fault log then keeps its largest
// size; the relief rings are made only with a limit).
//  - The relief ring has a live entry for each page in DRAM (at most the budget and relief's
//    slack), and keeps the entries of pages that left by the round's plan or were freed until
//    relief's tail passes them, and the second chances it requeues: four entries a page.
//  - The ahead ring holds pages fetched ahead and not yet evicted or touched: all of them are
//    in DRAM, so two entries a page leave room for stale ones.
//  - The fault log keeps its largest size at every limit: it is read once a round, and a round
//    that comes late (a loaded machine) would find its oldest entries overwritten, which are the
//    samples of pages that are still in DRAM. Sized by the limit, a sequential read fetched
//    ahead through a few times the limit overwrites the faults of the pages used just before
//    it, and the round's plan takes them as never touched
//    (`TieringTest.PrefetchedPagesNobodyTouchedLeaveBeforePagesThatWereUsed` shows it).
constexpr RingSizes RingSizesFor(uint64_t budget_pages) {
  if (budget_pages == 0) return {kMinRingEntries, kMinRingEntries, kMaxLogEntries};
  auto clamp = [](uint64_t entries, size_t most) {
    return static_cast<size_t>(std::clamp<uint64_t>(entries, kMinRingEntries, most));
  };
  // Multiplied past uint64_t only for budgets of 2^62 pages: clamped first.
  const uint64_t pages = std::min<uint64_t>(budget_pages, kMaxReliefEntries);
  return {clamp(4 * pages, kMaxReliefEntries), clamp(2 * pages, kMaxAheadEntries), kMaxLogEntries};
}

}  // namespace tiermem

// The span map: address -> Span for every 64 KiB granule of heap memory, shared by all heaps of
// the process. Two levels (addr>>32, then the granule within those 4 GiB); leaves are mapped on
// first use and never unmapped. Lookups are lock-free (two acquire loads); updates are made by
// the page heap under its lock, before a span is handed out (set) and after it is retired (clear).
#pragma once

#include <atomic>
#include <cstdint>

#include "allocator/size_classes.h"

namespace tiermem::alloc {

struct Span;

class SpanMap {
 public:
  static constexpr int kLeafBits = 32 - kGranuleShift;  // 16: granules per 4 GiB
  static constexpr int kTopBits = 47 - 32;              // user space is below 2^47

  Span* Lookup(const void* p) const {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    const uintptr_t top = a >> 32;
    if (top >= (uintptr_t{1} << kTopBits)) return nullptr;
    Leaf* leaf = top_[top].load(std::memory_order_acquire);
    if (leaf == nullptr) return nullptr;
    // The granule within the 4 GiB: the low 32 bits shifted (kLeafBits wide already).
    return leaf->entry[static_cast<uint32_t>(a) >> kGranuleShift].load(std::memory_order_acquire);
  }
  // Sets `granules` entries from `start` (granule-aligned) to `span` (nullptr clears). Returns
  // false when a leaf could not be mapped (out of memory); nothing is left half-set then only
  // for entries already written, which the caller clears again.
  bool Set(const void* start, uint32_t granules, Span* span);

 private:
  struct Leaf {
    std::atomic<Span*> entry[1u << kLeafBits];
  };
  Leaf* GetLeaf(uintptr_t top_index);
  std::atomic<Leaf*> top_[1u << kTopBits] = {};
};

// The process-wide map (constant-initialised, usable before any constructor runs). Inline so
// free's lookup is no call away.
extern constinit SpanMap g_span_map;
inline SpanMap& GlobalSpanMap() { return g_span_map; }

}  // namespace tiermem::alloc

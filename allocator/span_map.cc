#include "allocator/span_map.h"

#include "base/os.h"

namespace tiermem::alloc {

constinit SpanMap g_span_map;

SpanMap::Leaf* SpanMap::GetLeaf(uintptr_t top_index) {
  Leaf* leaf = top_[top_index].load(std::memory_order_acquire);
  if (leaf != nullptr) return leaf;
  int err = 0;
  // Zero-filled anonymous memory is a valid Leaf (null atomics); only touched pages are backed.
  void* m = os::Reserve(sizeof(Leaf), &err);
  if (m == nullptr) return nullptr;
  Leaf* fresh = static_cast<Leaf*>(m);
  if (!top_[top_index].compare_exchange_strong(leaf, fresh, std::memory_order_acq_rel)) {
    (void)os::Unmap(m, sizeof(Leaf));  // another thread won; `leaf` holds its leaf
    return leaf;
  }
  return fresh;
}

bool SpanMap::Set(const void* start, uint32_t granules, Span* span) {
  uintptr_t a = reinterpret_cast<uintptr_t>(start);
  for (uint32_t i = 0; i < granules; ++i, a += kGranule) {
    if ((a >> 47) != 0) return false;
    Leaf* leaf = span != nullptr ? GetLeaf(a >> 32) : top_[a >> 32].load(std::memory_order_acquire);
    if (leaf == nullptr) {
      if (span != nullptr) return false;
      continue;
    }
    leaf->entry[(a >> kGranuleShift) & ((1u << kLeafBits) - 1)].store(span,
                                                                       std::memory_order_release);
  }
  return true;
}

}  // namespace tiermem::alloc

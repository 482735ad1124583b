// HeapRuntime's calls: the regions' lookup here, the rest done by Runtime::Impl.
#include "runtime/core/heap_runtime.h"

#include "runtime/core/runtime_impl.h"

namespace tiermem {
namespace {

Runtime::Impl* Self(HeapRuntime* h) { return static_cast<Runtime::Impl*>(h); }
const Runtime::Impl* Self(const HeapRuntime* h) { return static_cast<const Runtime::Impl*>(h); }

}  // namespace

HeapRuntime* HeapRuntime::Of(Runtime& rt) { return ImplOf(rt); }

Region* HeapRuntime::RegionOf(const void* p) const {
  const int n = nregions_.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    if (regions_[i]->Contains(p)) return regions_[i].get();
  }
  return nullptr;
}

bool HeapRuntime::running() const { return Self(this)->running(); }
StatusOr<void*> HeapRuntime::Allocate(size_t bytes, Tier tier, uint32_t flags) {
  return Self(this)->Allocate(bytes, tier, flags);
}
Status HeapRuntime::Free(void* ptr) { return Self(this)->Free(ptr); }
bool HeapRuntime::HasTier(Tier tier) const { return Self(this)->HasTier(tier); }
void HeapRuntime::FinishStats() { Self(this)->FinishStats(); }
Status HeapRuntime::DiscardPages(void* p, size_t bytes) { return Self(this)->DiscardPages(p, bytes); }
Status HeapRuntime::HoldFree(void* p, size_t bytes, FreeHold how) { return Self(this)->HoldFree(p, bytes, how); }
uint64_t HeapRuntime::DramRoom() const { return Self(this)->DramRoom(); }
void HeapRuntime::ReuseFree(void* p, size_t bytes, Tier tier) { Self(this)->ReuseFree(p, bytes, tier); }

}  // namespace tiermem

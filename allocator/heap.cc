// tiermem::Heap (include/tiermem/heap.hpp) over HeapCore.
#include "tiermem/heap.hpp"

#include <errno.h>

#include <new>

#include "allocator/entry_points.h"
#include "allocator/heap_core.h"
#include "allocator/heap_internal.h"
#include "runtime/core/heap_runtime.h"

namespace tiermem {

// The HeapCore lives in storage owned by the Heap (HeapCore::Create constructs it in place).
class Heap::Impl {
 public:
  alignas(alloc::HeapCore) unsigned char storage[sizeof(alloc::HeapCore)];
  alloc::HeapCore* core = nullptr;
};

StatusOr<std::unique_ptr<Heap>> Heap::Create(Runtime& runtime, Tier tier, uint32_t flags) {
  HeapRuntime* rt = HeapRuntime::Of(runtime);
  if (rt == nullptr || !rt->running()) return Unavailable("Heap::Create: the runtime is stopped");
  if (static_cast<int>(tier) > kNumTiers) return InvalidArgument("Heap::Create: invalid tier");
  if (tier != Tier::kAuto && !rt->HasTier(tier) && !(flags & kAllocAllowFallback) &&
      !rt->options().allow_fallback) {
    return Unavailable("Heap::Create: tier " + std::string(TierName(tier)) +
                       " is not available on this machine (see `tiermemctl tiers`)");
  }
  auto impl = std::make_unique<Impl>();
  impl->core = alloc::HeapCore::Create(impl->storage, rt, tier, flags);
  if (impl->core == nullptr) {
    return ResourceExhausted("Heap::Create: " + std::to_string(alloc::kMaxHeaps) +
                             " heaps exist already");
  }
  return std::unique_ptr<Heap>(new Heap(impl.release()));
}

Heap::~Heap() {
  impl_->core->Destroy();
  delete impl_;
}

void* Heap::Allocate(size_t size) noexcept { return impl_->core->Malloc(size); }
void* Heap::AllocateZeroed(size_t count, size_t size) noexcept {
  return impl_->core->Calloc(count, size);
}
void* Heap::Reallocate(void* p, size_t size) noexcept { return impl_->core->Realloc(p, size); }
void* Heap::AllocateAligned(size_t align, size_t size) noexcept {
  return alloc::entry::AlignedAlloc(*impl_->core, align, size);
}
void Heap::Free(void* p) noexcept { impl_->core->Free(p); }
size_t Heap::UsableSize(const void* p) const noexcept {
  return alloc::HeapCore::UsableSizeAny(p, impl_->core->runtime());
}
bool Heap::Owns(const void* p) const noexcept { return impl_->core->Owns(p); }
Tier Heap::tier() const { return impl_->core->tier(); }
void Heap::Trim() {
  alloc::HeapCore::FlushThreadCaches();
  impl_->core->Trim();
}
HeapUsage Heap::Usage() const {
  alloc::HeapStats s = impl_->core->Stats();
  HeapUsage u;
  u.segment_bytes = s.segment_bytes;
  u.span_bytes = s.span_bytes;
  u.large_bytes = s.large_bytes;
  u.large_count = s.large_count;
  return u;
}

}  // namespace tiermem

namespace tiermem::alloc {
HeapCore* CoreOf(Heap& heap) { return heap.impl_->core; }
}  // namespace tiermem::alloc

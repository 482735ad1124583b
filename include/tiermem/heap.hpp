// tiermem::Heap: a malloc-style heap whose memory lives on one tier of a Runtime.
//
//   auto rt = *tiermem::Runtime::Start();
//   auto heap = *tiermem::Heap::Create(*rt, tiermem::Tier::kCxl);
//   void* p = heap->Allocate(100);      // small: size classes, thread-local caches
//   heap->Free(p);                      // from any thread
//
// It is the same heap the LD_PRELOAD library uses for malloc; creating one does not replace the
// program's malloc. Small blocks (<= 128 KiB) come from 4 MiB segments the runtime places on the
// tier; larger blocks are page runs of their own. Freed memory goes back to the runtime (its
// pages are dropped), so the runtime never migrates or writes out dead pages.
//
// Thread safety: every method may be called from any thread, and a block may be freed by a
// thread other than the one that allocated it. No method throws; allocation failures return
// nullptr with errno set (ENOMEM, or EINVAL for a bad alignment).
// Lifetime: the Heap must be destroyed before its Runtime stops; destroying it releases all its
// memory (blocks still in use become invalid). At most 16 heaps exist at a time per process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "tiermem/status.hpp"
#include "tiermem/tiermem.hpp"

namespace tiermem {

class Heap;
namespace alloc {
class HeapCore;
HeapCore* CoreOf(Heap& heap);  // the project's own layers (allocator/heap_internal.h)
}  // namespace alloc

struct HeapUsage {
  uint64_t segment_bytes = 0;  // address space held for small blocks (4 MiB segments)
  uint64_t span_bytes = 0;     // of which in use by size-class spans
  uint64_t large_bytes = 0;    // in page runs for blocks > 128 KiB (this runtime, all heaps)
  uint64_t large_count = 0;
};

class Heap {
 public:
  // `tier`: kDram, kCxl, kRemote or kAuto; `flags`: AllocFlags passed to Runtime::Allocate
  // (kAllocAllowFallback...). Unavailable when the tier is absent and no fallback is allowed;
  // ResourceExhausted when 16 heaps already exist.
  static StatusOr<std::unique_ptr<Heap>> Create(Runtime& runtime, Tier tier,
                                                uint32_t flags = kAllocDefault);
  ~Heap();
  Heap(const Heap&) = delete;
  Heap& operator=(const Heap&) = delete;

  void* Allocate(size_t size) noexcept;                     // malloc; size 0 gives a unique block
  void* AllocateZeroed(size_t count, size_t size) noexcept;  // calloc (overflow: ENOMEM)
  void* Reallocate(void* p, size_t size) noexcept;          // realloc (size 0 frees, returns null)
  // `align` must be a power of two (EINVAL otherwise).
  void* AllocateAligned(size_t align, size_t size) noexcept;
  // Frees a block of any Heap of the same Runtime; nullptr is ignored.
  void Free(void* p) noexcept;
  // Bytes usable from p to the end of its block; 0 for a pointer that is not a heap block.
  size_t UsableSize(const void* p) const noexcept;
  bool Owns(const void* p) const noexcept;

  Tier tier() const;
  HeapUsage Usage() const;
  // Gives back what the heap keeps for reuse (as malloc_trim does): free blocks parked between
  // threads go back to their spans, emptied spans and cached page runs to the page heap. Blocks
  // in other threads' caches stay. Usage() afterwards shows what live blocks and the heap's
  // working reserve hold.
  void Trim();

  class Impl;

 private:
  friend alloc::HeapCore* alloc::CoreOf(Heap& heap);
  explicit Heap(Impl* impl) : impl_(impl) {}
  Impl* impl_;
};

}  // namespace tiermem

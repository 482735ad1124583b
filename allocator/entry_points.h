// The C allocation entry points with their POSIX/glibc semantics, over one HeapCore. The preload
// library wraps these (adding foreign-pointer handling); tests call them directly.
//   - malloc(0) returns a unique pointer; failures return nullptr with errno = ENOMEM.
//   - posix_memalign returns EINVAL (errno untouched) when align is not a power of two multiple
//     of sizeof(void*); aligned_alloc sets EINVAL when align is not a power of two; memalign
//     rounds a non-power-of-two alignment up (as glibc does).
//   - realloc(p, 0) frees p and returns nullptr (glibc); realloc(nullptr, n) is malloc(n).
#pragma once

#include <errno.h>

#include <cstddef>
#include <cstdint>

#include "allocator/heap_core.h"
#include "runtime/core/heap_runtime.h"

namespace tiermem::alloc::entry {

inline bool IsPow2(size_t x) { return x != 0 && (x & (x - 1)) == 0; }

inline void* Malloc(HeapCore& h, size_t size) { return h.Malloc(size); }
inline void* Calloc(HeapCore& h, size_t n, size_t size) { return h.Calloc(n, size); }
inline void* Realloc(HeapCore& h, void* p, size_t size) { return h.Realloc(p, size); }
inline void* ReallocArray(HeapCore& h, void* p, size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return nullptr;
  }
  return h.Realloc(p, total);
}
inline void* Memalign(HeapCore& h, size_t align, size_t size) {
  if (align > SIZE_MAX / 2 + 1) {
    errno = EINVAL;
    return nullptr;
  }
  if (!IsPow2(align)) {
    size_t a = 1;
    while (a < align) a <<= 1;
    align = a;
  }
  return h.Memalign(align, size);
}
inline int PosixMemalign(HeapCore& h, void** out, size_t align, size_t size) {
  if (align % sizeof(void*) != 0 || !IsPow2(align)) return EINVAL;
  const int saved = errno;
  void* p = h.Memalign(align, size);
  if (p == nullptr) {
    errno = saved;
    return ENOMEM;
  }
  *out = p;
  return 0;
}
inline void* AlignedAlloc(HeapCore& h, size_t align, size_t size) {
  if (!IsPow2(align)) {
    errno = EINVAL;
    return nullptr;
  }
  return h.Memalign(align, size);
}
inline void* Valloc(HeapCore& h, size_t size) {
  return h.Memalign(h.runtime()->page_size(), size);
}
inline void* Pvalloc(HeapCore& h, size_t size) {
  const size_t page = h.runtime()->page_size();
  if (size > SIZE_MAX - page) {
    errno = ENOMEM;
    return nullptr;
  }
  size = size == 0 ? page : (size + page - 1) & ~(page - 1);
  return h.Memalign(page, size);
}
inline size_t UsableSize(HeapCore& h, const void* p) {
  return HeapCore::UsableSizeAny(p, h.runtime());
}
inline void Free(HeapCore& h, void* p) { h.Free(p); }

}  // namespace tiermem::alloc::entry

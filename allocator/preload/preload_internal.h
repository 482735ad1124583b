// What the preload library's other entry points (jemalloc_api.cc) use of preload.cc: the heap and
// the malloc family with preload.cc's handling of glibc's blocks and of the start-up.
// Thread-safe; the same failure conventions as malloc (nullptr with errno = ENOMEM).
#pragma once

#include <cstddef>

#include "allocator/heap_core.h"

namespace tiermem::preload {

// The preload heap, starting the runtime if it is not up yet; nullptr when this call must not
// use it (the runtime failed or another thread is starting it, or this thread is inside a
// runtime call): allocations then go to glibc.
alloc::HeapCore* ApiHeap();

void* Allocate(size_t size);
void* AllocateZeroed(size_t size);
void* AllocateAligned(size_t align, size_t size);  // align: a power of two
void* Reallocate(void* p, size_t size);            // realloc's semantics
void Deallocate(void* p);
size_t UsableSize(const void* p);  // of a tiermem or a glibc block; 0 for nullptr

}  // namespace tiermem::preload

// Metadata memory for the heap (Span and Segment records, thread caches): carved from anonymous
// mappings, never from malloc, never returned (records are recycled by their owners).
// Thread-safe (one mutex; called only on slow paths). Zero-filled. nullptr when out of memory.
#pragma once

#include <cstddef>

namespace tiermem::alloc {

void* MetaAlloc(size_t bytes);
// Bytes MetaAlloc has handed out so far: the heap's metadata (nothing is ever given back).
size_t MetaAllocatedBytes();
// fork(): the arena's lock, taken and released around fork by HeapCore's handlers.
void MetaLock();
void MetaUnlock();

}  // namespace tiermem::alloc

// For the project's own layers: the HeapCore behind a tiermem::Heap.
#pragma once

#include "allocator/heap_core.h"
#include "tiermem/heap.hpp"

namespace tiermem::alloc {
HeapCore* CoreOf(Heap& heap);
}  // namespace tiermem::alloc

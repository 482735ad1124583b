#include "allocator/meta_arena.h"

#include <atomic>
#include <mutex>

#include "base/os.h"
#include "base/own_memory.h"

namespace tiermem::alloc {

namespace {
constexpr size_t kChunk = 1 << 20;
constinit std::mutex g_mu;
constinit char* g_cur = nullptr;
constinit size_t g_left = 0;
constinit std::atomic<size_t> g_allocated{0};
}  // namespace

void* MetaAlloc(size_t bytes) {
  bytes = (bytes + 63) & ~size_t{63};
  std::lock_guard<std::mutex> lock(g_mu);
  if (bytes > g_left) {
    size_t want = bytes > kChunk ? bytes : kChunk;
    int err = 0;
    void* m = os::Reserve(want, &err);
    if (m == nullptr) return nullptr;
    g_cur = static_cast<char*>(m);
    g_left = want;
  }
  void* p = g_cur;
  g_cur += bytes;
  g_left -= bytes;
  g_allocated.fetch_add(bytes, std::memory_order_relaxed);
  CountOwnMapped(static_cast<int64_t>(bytes));  // the runtime's own DRAM once its user writes it
  return p;
}

size_t MetaAllocatedBytes() { return g_allocated.load(std::memory_order_relaxed); }

void MetaLock() { g_mu.lock(); }
void MetaUnlock() { g_mu.unlock(); }

}  // namespace tiermem::alloc

#include "base/own_memory.h"

#include <algorithm>
#include <utility>

#include "base/os.h"

namespace tiermem {
namespace {

constinit std::atomic<int64_t> g_mapped{0};

// The watched stacks. Lock-free, so that a fork() taken while the policy thread measures leaves
// the child nothing held: a slot is claimed by its `low`, and a measure that races a thread's
// exit at worst reads a range that is gone (mincore fails: not counted) for one second.
constexpr int kMaxStacks = 64;
constexpr uint64_t kStackRefreshNs = 1000000000;
struct Slot {
  std::atomic<uintptr_t> low{0};
  std::atomic<size_t> bytes{0};
};
constinit Slot g_stacks[kMaxStacks];
constinit std::atomic<uint64_t> g_stack_bytes{0};
constinit std::atomic<uint64_t> g_stacks_at_ns{0};  // 0: measure at the next call

// Frees the thread's slot when it exits (glibc then reuses or unmaps the stack).
struct StackWatch {
  int slot = -1;
  ~StackWatch() {
    if (slot < 0) return;
    g_stacks[slot].bytes.store(0, std::memory_order_release);
    g_stacks[slot].low.store(0, std::memory_order_release);
    g_stacks_at_ns.store(0, std::memory_order_relaxed);
  }
};
thread_local StackWatch t_stack_watch;

void MeasureStacks() {
  uint64_t total = 0;
  for (Slot& s : g_stacks) {
    const size_t bytes = s.bytes.load(std::memory_order_acquire);
    const uintptr_t low = s.low.load(std::memory_order_acquire);
    if (low == 0 || bytes == 0) continue;
    const long resident = os::ResidentBytes(reinterpret_cast<const void*>(low), bytes);
    if (resident > 0) total += static_cast<uint64_t>(resident);
  }
  g_stack_bytes.store(total, std::memory_order_relaxed);
}

}  // namespace

void CountOwnMapped(int64_t bytes) { g_mapped.fetch_add(bytes, std::memory_order_relaxed); }

uint64_t OwnBufferBytes() {
  const int64_t mapped = g_mapped.load(std::memory_order_relaxed);
  return static_cast<uint64_t>(mapped > 0 ? mapped : 0);
}

uint64_t OwnStackBytes() {
  const uint64_t now = os::MonotonicNanos();
  uint64_t at = g_stacks_at_ns.load(std::memory_order_relaxed);
  // One caller measures; the others take the last figure.
  if (now >= at + kStackRefreshNs && g_stacks_at_ns.compare_exchange_strong(at, now)) MeasureStacks();
  return g_stack_bytes.load(std::memory_order_relaxed);
}

void WatchThreadStack() {
  if (t_stack_watch.slot >= 0) return;
  void* low = nullptr;
  size_t bytes = 0;
  if (os::ThreadStack(&low, &bytes) != 0 || low == nullptr) return;
  for (int i = 0; i < kMaxStacks; ++i) {
    uintptr_t free_slot = 0;
    if (g_stacks[i].low.compare_exchange_strong(free_slot, reinterpret_cast<uintptr_t>(low))) {
      g_stacks[i].bytes.store(bytes, std::memory_order_release);
      t_stack_watch.slot = i;
      g_stacks_at_ns.store(0, std::memory_order_relaxed);
      return;
    }
  }
}

OwnMapping& OwnMapping::operator=(OwnMapping&& o) noexcept {
  if (this != &o) {
    Release();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    counted_.store(o.counted_.exchange(0, std::memory_order_relaxed), std::memory_order_relaxed);
  }
  return *this;
}

char* OwnMapping::Map(size_t bytes, int* err) {
  Release();
  void* p = os::Reserve(bytes, err);
  if (p == nullptr) return nullptr;
  data_ = static_cast<char*>(p);
  size_ = bytes;
  return data_;
}

void OwnMapping::Release() {
  if (data_ == nullptr) return;
  (void)os::Unmap(data_, size_);
  CountOwnMapped(-static_cast<int64_t>(counted_.exchange(0, std::memory_order_relaxed)));
  data_ = nullptr;
  size_ = 0;
}

void OwnMapping::Raise(size_t end) {
  const size_t page = os::PageSize();
  const size_t want = std::min((end + page - 1) / page * page, size_);
  size_t cur = counted_.load(std::memory_order_relaxed);
  while (cur < want && !counted_.compare_exchange_weak(cur, want, std::memory_order_relaxed)) {
  }
  if (cur < want) CountOwnMapped(static_cast<int64_t>(want - cur));
}

}  // namespace tiermem

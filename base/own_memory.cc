#include "base/own_memory.h"

#include <algorithm>
#include <utility>

#include "base/os.h"

namespace tiermem {
namespace {

constinit std::atomic<int64_t> g_mapped{0};

// The watched ranges. Lock-free, so that a fork() taken while the policy thread measures leaves
// the child nothing held: a slot is claimed by its `low`, and a measure that races an unwatch at
// worst reads a range that is gone (mincore fails: not counted) for one second.
constexpr int kMaxWatched = 128;
constexpr uint64_t kMeasureEveryNs = 1000000000;
struct Slot {
  std::atomic<uintptr_t> low{0};
  std::atomic<size_t> bytes{0};
};
constinit Slot g_watched[kMaxWatched];
constinit std::atomic<uint64_t> g_watched_bytes{0};
constinit std::atomic<uint64_t> g_measured_at_ns{0};  // 0: measure at the next call

// Unwatches the thread's stack when it exits (glibc then reuses or unmaps it).
struct StackWatch {
  int handle = -1;
  bool tried = false;
  ~StackWatch() { UnwatchRange(handle); }
};
thread_local StackWatch t_stack_watch;

void MeasureWatched() {
  uint64_t total = 0;
  for (Slot& s : g_watched) {
    const uintptr_t low = s.low.load(std::memory_order_acquire);
    const size_t bytes = s.bytes.load(std::memory_order_acquire);
    if (low == 0 || bytes == 0) continue;
    const long resident = os::ResidentBytes(reinterpret_cast<const void*>(low), bytes);
    // The slot may have been given up and taken by another range between the loads, or during
    // the count (a start from one range and a length from another would count whatever follows
    // it): a slot that changed meanwhile is left out this time.
    if (s.bytes.load(std::memory_order_acquire) != bytes || s.low.load(std::memory_order_acquire) != low) continue;
    if (resident > 0) total += static_cast<uint64_t>(resident);
  }
  g_watched_bytes.store(total, std::memory_order_relaxed);
}

}  // namespace

void CountOwnMapped(int64_t bytes) { g_mapped.fetch_add(bytes, std::memory_order_relaxed); }

uint64_t OwnBufferBytes() {
  const int64_t mapped = g_mapped.load(std::memory_order_relaxed);
  return static_cast<uint64_t>(mapped > 0 ? mapped : 0);
}

uint64_t OwnWatchedBytes() {
  const uint64_t now = os::MonotonicNanos();
  uint64_t at = g_measured_at_ns.load(std::memory_order_relaxed);
  // One caller measures; the others take the last figure.
  if (now >= at + kMeasureEveryNs && g_measured_at_ns.compare_exchange_strong(at, now)) MeasureWatched();
  return g_watched_bytes.load(std::memory_order_relaxed);
}

int WatchRange(const void* low, size_t bytes) {
  for (int i = 0; i < kMaxWatched; ++i) {
    uintptr_t free_slot = 0;
    if (g_watched[i].low.compare_exchange_strong(free_slot, reinterpret_cast<uintptr_t>(low))) {
      g_watched[i].bytes.store(bytes, std::memory_order_release);
      g_measured_at_ns.store(0, std::memory_order_relaxed);
      return i;
    }
  }
  return -1;
}

void UnwatchRange(int handle) {
  if (handle < 0 || handle >= kMaxWatched) return;
  g_watched[handle].bytes.store(0, std::memory_order_release);
  g_watched[handle].low.store(0, std::memory_order_release);
  g_measured_at_ns.store(0, std::memory_order_relaxed);
}

void WatchThreadStack() {
  if (t_stack_watch.tried) return;
  t_stack_watch.tried = true;
  void* low = nullptr;
  size_t bytes = 0;
  if (os::ThreadStack(&low, &bytes) == 0 && low != nullptr) t_stack_watch.handle = WatchRange(low, bytes);
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

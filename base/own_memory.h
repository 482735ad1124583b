// The DRAM the runtime maps for itself outside glibc's heap: its buffers' anonymous mappings (the
// pager's staging, the migrator's rings and fault log, the tiered heap's metadata), the regions'
// page records and links, and its threads' stacks. Under the preload library the runtime counts it
// against TIERMEM_DRAM_LIMIT beside glibc's heap (PageMover::OwnPages); in memcached's process
// (200,000 keys) it came to 6.6 MiB, uncounted until then. Each owner counts what it has written,
// not what it reserved: a ring sized for the worst case costs what it has used. The ledger is
// the process's, shared by every runtime in it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace tiermem {

// Adds `bytes` to the ledger (a negative count takes them back). Lock-free; never allocates.
void CountOwnMapped(int64_t bytes);
// The ledger: the bytes its owners have counted. Any thread; O(1).
uint64_t OwnBufferBytes();
// The resident bytes of the watched ranges: the runtime threads' stacks and the regions' page
// records and links, whose residency no high-water mark tells (a stack grows down from where it
// started, a large run's links are written at its ends only). They are measured (mincore, one
// call per 2 MiB) at most once a second, and again at the next call after a range is watched or
// unwatched; in between the last figure is kept. Any thread; never allocates.
uint64_t OwnWatchedBytes();
// Both: the DRAM the runtime maps for itself outside glibc's heap.
inline uint64_t OwnMappedBytes() { return OwnBufferBytes() + OwnWatchedBytes(); }
// Counts the resident part of [low, low+bytes) (page aligned) in OwnWatchedBytes until
// UnwatchRange(handle), which comes before the range is unmapped. A handle, or -1 when the 128
// slots are all taken (the range is then not counted). Lock-free; never allocates.
int WatchRange(const void* low, size_t bytes);
void UnwatchRange(int handle);
// The calling thread's stack is watched until the thread exits. For runtime threads, once their
// malloc is glibc's (OnRuntimeThreadStart): finding the stack allocates.
void WatchThreadStack();

// An anonymous mapping (os::Reserve: zero, nothing resident until written) whose owner says how
// far it has written it, so that the ledger counts that much. Owners that fill a buffer from its
// start (staging by request index, rings by position) count their high-water mark this way.
// Movable, not copyable; Touched is thread-safe, the rest is not.
class OwnMapping {
 public:
  OwnMapping() = default;
  OwnMapping(const OwnMapping&) = delete;
  OwnMapping& operator=(const OwnMapping&) = delete;
  OwnMapping(OwnMapping&& o) noexcept { *this = static_cast<OwnMapping&&>(o); }
  OwnMapping& operator=(OwnMapping&& o) noexcept;
  ~OwnMapping() { Release(); }

  // Maps `bytes` (what was held before is released). The start, or nullptr with *err set to a
  // negative errno.
  char* Map(size_t bytes, int* err);
  // Unmaps, and takes the counted bytes back from the ledger.
  void Release();
  char* data() const { return data_; }
  size_t size() const { return size_; }
  // The first `end` bytes have been written, or are about to be: the ledger counts the mapping
  // up to there, rounded up to pages (at most its size), and never less while it is mapped. One
  // relaxed load when that is already counted.
  void Touched(size_t end) {
    if (end > counted_.load(std::memory_order_relaxed)) Raise(end);
  }
  size_t counted() const { return counted_.load(std::memory_order_relaxed); }

 private:
  void Raise(size_t end);

  char* data_ = nullptr;
  size_t size_ = 0;
  std::atomic<size_t> counted_{0};
};

}  // namespace tiermem

// jemalloc's own API, exported by libtiermem-preload.so: mallctl (and its MIB forms), nallocx,
// sallocx, malloc_stats_print, mallocx, rallocx, xallocx, dallocx and sdallocx. A program built
// against jemalloc (Debian's redis) calls these beside malloc; without them, under the preload
// library, they would still reach libjemalloc, which then reports on a heap that holds nothing,
// and a block from libjemalloc's mallocx would reach tiermem's free. Every figure comes from the
// preload heap's own counters (HeapCore::Footprint, the runtime's stats block).
//
// mallctl follows jemalloc's conventions (its ctl.c): ENOENT for a name not served here (all of
// jemalloc's other names, and interior nodes such as "stats"); EINVAL when *oldlenp or newlen is
// not the size of the value (a short read copies what fits and sets *oldlenp); EPERM when newp is
// given for a read-only name; no read when oldp or oldlenp is NULL. The "stats.*" names read the
// snapshot taken by the last write to "epoch" (or by the first read). EAGAIN when the preload
// heap is not in use (the runtime did not start; the caller is one of the runtime's threads).
// Flags: MALLOCX_LG_ALIGN / MALLOCX_ALIGN (low 6 bits) and MALLOCX_ZERO are honoured; tcache and
// arena selections are accepted and ignored (tiermem has one heap).
// Thread safety: every function may be called from any thread; none is async-signal-safe.
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <atomic>
#include <cstdarg>
#include <cstddef>
#include <cstdint>

#include "allocator/heap_core.h"
#include "allocator/meta_arena.h"
#include "allocator/preload/preload_internal.h"
#include "base/os.h"
#include "runtime/core/heap_runtime.h"

#define TM_EXPORT extern "C" __attribute__((visibility("default")))

namespace tiermem::preload {
namespace {

constexpr int kLgAlignMask = 0x3f;  // MALLOCX_LG_ALIGN(la) is la itself
constexpr int kZero = 0x40;         // MALLOCX_ZERO

// The alignment `flags` asks for; 0 for none.
size_t AlignOf(int flags) {
  const int lg = flags & kLgAlignMask;
  return lg == 0 ? 0 : size_t{1} << lg;
}

// jemalloc's figures over the preload heap ("stats.*"), indexed by Stat.
enum Stat : int { kAllocated, kActive, kMetadata, kResident, kMapped, kRetained, kNumStats };
struct Snapshot {
  // allocated: bytes in live blocks (usable sizes). active: bytes of spans and page runs in use.
  // metadata: span, segment and thread-cache records. resident: at most this many bytes have
  // pages (active, kept free memory, metadata). mapped: = resident (tiermem keeps no lazily
  // purged pages). retained: segment address space whose pages were given back.
  size_t stat[kNumStats];
};

Snapshot FromFootprint(const alloc::HeapFootprint& f) {
  Snapshot s;
  s.stat[kAllocated] = f.small_block_bytes + f.stats.large_bytes;
  s.stat[kActive] = f.stats.span_bytes + f.stats.large_bytes;
  s.stat[kMetadata] = alloc::MetaAllocatedBytes();
  s.stat[kResident] =
      s.stat[kActive] + f.dirty_bytes + f.stats.cached_run_bytes + s.stat[kMetadata];
  s.stat[kMapped] = s.stat[kResident];
  const uint64_t kept = f.stats.span_bytes + f.dirty_bytes;
  s.stat[kRetained] = f.stats.segment_bytes > kept ? f.stats.segment_bytes - kept : 0;
  return s;
}

// The snapshot mallctl reads, refreshed by a write to "epoch". Atomics, not a mutex: a child of
// fork() must never inherit a lock taken by a thread it does not have. Two refreshes at once may
// leave figures of both (each figure is whole).
constinit std::atomic<size_t> g_stats[kNumStats] = {};
constinit std::atomic<bool> g_have_snapshot{false};
constinit std::atomic<uint64_t> g_epoch{1};

void Refresh(alloc::HeapCore& heap) {
  const Snapshot s = FromFootprint(heap.Footprint());
  for (int i = 0; i < kNumStats; ++i) g_stats[i].store(s.stat[i], std::memory_order_relaxed);
  g_have_snapshot.store(true, std::memory_order_release);
}

enum class Name { kEpoch, kConfigStats, kArenasPage, kStat };
struct Entry {
  const char* name;
  Name kind;
  Stat stat;  // kStat only
};
constexpr Entry kNames[] = {
    {"epoch", Name::kEpoch, kNumStats},
    {"config.stats", Name::kConfigStats, kNumStats},
    {"arenas.page", Name::kArenasPage, kNumStats},
    {"stats.allocated", Name::kStat, kAllocated},
    {"stats.active", Name::kStat, kActive},
    {"stats.metadata", Name::kStat, kMetadata},
    {"stats.resident", Name::kStat, kResident},
    {"stats.mapped", Name::kStat, kMapped},
    {"stats.retained", Name::kStat, kRetained},
};
constexpr size_t kNumNames = sizeof(kNames) / sizeof(kNames[0]);

// kNames's index of `name`, or -1.
int FindName(const char* name) {
  if (name == nullptr) return -1;
  for (size_t i = 0; i < kNumNames; ++i) {
    if (strcmp(name, kNames[i].name) == 0) return static_cast<int>(i);
  }
  return -1;
}

// jemalloc's READ: a wrong length copies what fits and fails with EINVAL.
template <typename T>
int Read(const T& value, void* oldp, size_t* oldlenp) {
  if (oldp == nullptr || oldlenp == nullptr) return 0;
  if (*oldlenp != sizeof(T)) {
    const size_t n = *oldlenp < sizeof(T) ? *oldlenp : sizeof(T);
    memcpy(oldp, &value, n);
    *oldlenp = n;
    return EINVAL;
  }
  memcpy(oldp, &value, sizeof(T));
  return 0;
}

int ServeEpoch(void* oldp, size_t* oldlenp, const void* newp, size_t newlen) {
  if (newp != nullptr && newlen != sizeof(uint64_t)) return EINVAL;
  alloc::HeapCore* heap = ApiHeap();
  if (heap == nullptr) return EAGAIN;
  uint64_t epoch;
  if (newp != nullptr) {  // jemalloc ignores the value written: any write refreshes
    Refresh(*heap);
    epoch = g_epoch.fetch_add(1, std::memory_order_relaxed) + 1;
  } else {
    epoch = g_epoch.load(std::memory_order_relaxed);
  }
  return Read(epoch, oldp, oldlenp);
}

int ServeStat(Stat stat, void* oldp, size_t* oldlenp) {
  alloc::HeapCore* heap = ApiHeap();
  if (heap == nullptr) return EAGAIN;
  if (!g_have_snapshot.load(std::memory_order_acquire)) Refresh(*heap);
  return Read(g_stats[stat].load(std::memory_order_relaxed), oldp, oldlenp);
}

int Serve(const Entry& e, void* oldp, size_t* oldlenp, void* newp, size_t newlen) {
  if (e.kind == Name::kEpoch) return ServeEpoch(oldp, oldlenp, newp, newlen);
  if (newp != nullptr || newlen != 0) return EPERM;  // the others are read-only
  switch (e.kind) {
    case Name::kConfigStats:
      return Read(true, oldp, oldlenp);
    case Name::kArenasPage:
      return Read(os::PageSize(), oldp, oldlenp);
    default:
      return ServeStat(e.stat, oldp, oldlenp);
  }
}

// ---- malloc_stats_print

// Formats into a stack buffer and hands each line to the callback, with no lock held: the
// callback may allocate, or call mallctl.
class LineWriter {
 public:
  LineWriter(void (*cb)(void*, const char*), void* opaque) : cb_(cb), opaque_(opaque) {}
  __attribute__((format(printf, 2, 3))) void Line(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf_, sizeof(buf_) - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    size_t len = static_cast<size_t>(n) < sizeof(buf_) - 2 ? static_cast<size_t>(n) : sizeof(buf_) - 2;
    buf_[len++] = '\n';
    buf_[len] = '\0';
    if (cb_ != nullptr) {
      cb_(opaque_, buf_);
    } else {
      (void)os::WriteAll(2, buf_, len);
    }
  }

 private:
  void (*cb_)(void*, const char*);
  void* opaque_;
  char buf_[256];
};

void PrintTiers(LineWriter& out, const StatsBlock& b) {
  for (int t = 0; t < kNumTiers; ++t) {
    const std::string_view name = TierName(static_cast<Tier>(t));
    if (b.tier_available[t] == 0) {
      out.Line("Tier %.*s: absent", static_cast<int>(name.size()), name.data());
      continue;
    }
    out.Line("Tier %.*s: allocated %" PRIu64 " bytes, capacity %" PRIu64 " bytes, limit %" PRIu64
             " bytes (0: none)",
             static_cast<int>(name.size()), name.data(),
             b.allocated_bytes[t].load(std::memory_order_relaxed), b.tier_capacity_bytes[t],
             b.tier_limit_bytes[t]);
  }
}

void PrintReport(void (*write_cb)(void*, const char*), void* opaque) {
  LineWriter out(write_cb, opaque);
  out.Line("___ Begin tiermem statistics (libtiermem-preload.so) ___");
  alloc::HeapCore* heap = ApiHeap();
  if (heap == nullptr) {
    out.Line("The tiermem heap is not in use: allocations go to glibc's malloc.");
    out.Line("___ End tiermem statistics ___");
    return;
  }
  const alloc::HeapFootprint f = heap->Footprint();
  const Snapshot s = FromFootprint(f);
  out.Line("Allocated: %zu, active: %zu, metadata: %zu, resident: %zu, mapped: %zu, retained: %zu",
           s.stat[kAllocated], s.stat[kActive], s.stat[kMetadata], s.stat[kResident],
           s.stat[kMapped], s.stat[kRetained]);
  out.Line("Heap: segments %" PRIu64 " bytes, spans %" PRIu64 " bytes, kept free granules %" PRIu64
           " bytes, small blocks %" PRIu64 " bytes",
           f.stats.segment_bytes, f.stats.span_bytes, f.dirty_bytes, f.small_block_bytes);
  out.Line("Large: %" PRIu64 " bytes in %" PRIu64 " page runs, run cache %" PRIu64 " bytes",
           f.stats.large_bytes, f.stats.large_count, f.stats.cached_run_bytes);
  PrintTiers(out, *heap->runtime()->stats_block());
  out.Line("___ End tiermem statistics ___");
}

// ---- the *allocx family

void* MallocX(size_t size, int flags) {
  const size_t align = AlignOf(flags);
  if (align <= 16) return (flags & kZero) ? AllocateZeroed(size) : Allocate(size);
  if (alloc::HeapCore::UsableSizeFor(size, align, os::PageSize()) == 0) {
    errno = ENOMEM;
    return nullptr;
  }
  void* p = AllocateAligned(align, size);
  if (p != nullptr && (flags & kZero)) memset(p, 0, size);
  return p;
}

// jemalloc's rallocx: p stays valid when nullptr is returned; size 0 (undefined there) is 1.
void* RallocX(void* p, size_t size, int flags) {
  if (p == nullptr) return MallocX(size, flags);
  if (size == 0) size = 1;
  const size_t align = AlignOf(flags);
  const size_t old = UsableSize(p);
  void* q;
  if (align <= 16) {
    q = Reallocate(p, size);
  } else if (reinterpret_cast<uintptr_t>(p) % align == 0 && size <= old && size > old / 2) {
    q = p;  // realloc's rule for keeping a block, and the block has the alignment
  } else {
    q = MallocX(size, flags & kLgAlignMask);
    if (q == nullptr) return nullptr;
    memcpy(q, p, old < size ? old : size);
    Deallocate(p);
  }
  // MALLOCX_ZERO: the bytes past the old block's usable size read as zero (jemalloc's contract).
  if (q != nullptr && (flags & kZero) && size > old) memset(static_cast<char*>(q) + old, 0, size - old);
  return q;
}

}  // namespace
}  // namespace tiermem::preload

using namespace tiermem::preload;  // NOLINT: the C entry points below

TM_EXPORT int mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen) {
  const int i = FindName(name);
  return i < 0 ? ENOENT : Serve(kNames[i], oldp, oldlenp, newp, newlen);
}
// A MIB here has one component: the name's index.
TM_EXPORT int mallctlnametomib(const char* name, size_t* mibp, size_t* miblenp) {
  const int i = FindName(name);
  if (i < 0) return ENOENT;
  if (mibp == nullptr || miblenp == nullptr || *miblenp < 1) return EINVAL;
  mibp[0] = static_cast<size_t>(i);
  *miblenp = 1;
  return 0;
}
TM_EXPORT int mallctlbymib(const size_t* mib, size_t miblen, void* oldp, size_t* oldlenp,
                           void* newp, size_t newlen) {
  if (mib == nullptr || miblen != 1 || mib[0] >= kNumNames) return ENOENT;
  return Serve(kNames[mib[0]], oldp, oldlenp, newp, newlen);
}
TM_EXPORT void malloc_stats_print(void (*write_cb)(void*, const char*), void* cbopaque,
                                  const char* /*opts: jemalloc's report options; not used*/) {
  PrintReport(write_cb, cbopaque);
}
TM_EXPORT size_t nallocx(size_t size, int flags) {
  return tiermem::alloc::HeapCore::UsableSizeFor(size, AlignOf(flags), tiermem::os::PageSize());
}
TM_EXPORT size_t sallocx(const void* ptr, int /*flags*/) { return UsableSize(ptr); }
TM_EXPORT void* mallocx(size_t size, int flags) { return MallocX(size, flags); }
TM_EXPORT void* rallocx(void* ptr, size_t size, int flags) { return RallocX(ptr, size, flags); }
// Never resizes in place: the block's usable size (which may already hold size + extra).
TM_EXPORT size_t xallocx(void* ptr, size_t /*size*/, size_t /*extra*/, int /*flags*/) {
  return UsableSize(ptr);
}
TM_EXPORT void dallocx(void* ptr, int /*flags*/) { Deallocate(ptr); }
TM_EXPORT void sdallocx(void* ptr, size_t /*size*/, int /*flags*/) { Deallocate(ptr); }

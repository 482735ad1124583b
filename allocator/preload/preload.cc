// libtiermem-preload.so: malloc, free, the rest of the C allocation API and the C++ operator
// new/delete family, over one tiered HeapCore (Tier::kAuto) of a process-wide runtime.
//
// Bootstrapping. The runtime is started by the first allocation (or the library constructor,
// whichever comes first). Until it is up, and on any thread that is inside a runtime call
// (alloc::InRuntimeCall) or is starting the runtime, requests go to glibc's own allocator
// (__libc_malloc and friends, called directly: no dlsym, no getenv). Those "foreign" blocks, and
// any block a library got from glibc directly, are recognised at free/realloc time (not in the
// span map, not in a managed region) and handed back to glibc. If the runtime cannot start, the
// library warns once and the process keeps glibc's allocator.
//
// The runtime object is deliberately never stopped: blocks may be freed until the last moment of
// the process (atexit handlers, TLS destructors).
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>

#include "allocator/entry_points.h"
#include "allocator/heap_core.h"
#include "allocator/preload/preload_internal.h"
#include "allocator/span_map.h"
#include "base/os.h"
#include "base/log.h"
#include "base/os_signal.h"
#include "base/runtime_thread.h"
#include "runtime/core/heap_runtime.h"

extern "C" {
void* __libc_malloc(size_t);
void __libc_free(void*);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
}

#define TM_EXPORT extern "C" __attribute__((visibility("default")))
#define TM_CXX_EXPORT __attribute__((visibility("default")))
// The entry points that take the fast paths start on a cache line. Unaligned, where they lay
// moved with every change anywhere in the library, and with it how many 64-byte fetch blocks
// their few instructions spanned: the same code measured up to 9% apart in CPU time on a
// malloc/free loop from one build to the next (docs/results/NOTES.md, 2026-12-07).
#define TM_HOT __attribute__((aligned(64)))

namespace tiermem::preload {
namespace {

using alloc::HeapCore;

enum State : int { kUninit = 0, kStarting = 1, kReady = 2, kFailed = 3 };
constinit std::atomic<int> g_state{kUninit};
constinit HeapCore* g_heap = nullptr;
// g_heap once the state is kReady (Heap() reads only this; malloc and free first try the
// thread's primary cache, which exists only once the heap is ready).
constinit std::atomic<HeapCore*> g_ready_heap{nullptr};
constinit HeapRuntime* g_rt = nullptr;
alignas(HeapCore) unsigned char g_heap_storage[sizeof(HeapCore)];
// A thread that must use glibc has alloc::t_thread.bypass > 0 (alloc::InRuntimeCall()): the
// heap's own runtime calls, the thread starting the runtime, and the runtime's own threads
// (pager fault handler, policy thread; set through the runtime's thread hook, so a fault handler
// never faults on its own heap pages). One counter: the fast paths test one thread-local.
void MarkRuntimeThread() { alloc::EnterBypass(); }
// Runtime work on a user's thread (the fork handlers) uses glibc for its own allocations.
void EnterRuntimeCall() { alloc::EnterBypass(); }
void LeaveRuntimeCall() { alloc::LeaveBypass(); }

void PrintStats();

void Start() {
  struct Starting {  // this thread allocates from glibc while it starts the runtime
    Starting() { alloc::EnterBypass(); }
    ~Starting() { alloc::LeaveBypass(); }
  } starting;
  // The runtime's own sigaction calls go to glibc's, past signals.cc's.
  os::UseLibcSigaction();
  SetRuntimeThreadHook(&MarkRuntimeThread);
  SetRuntimeCallHooks(&EnterRuntimeCall, &LeaveRuntimeCall);
  StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Start();
  if (!rt.ok()) {
    TM_LOG_WARN("libtiermem-preload: the runtime did not start (%s); using glibc's malloc",
                rt.status().ToString().c_str());
    g_state.store(kFailed, std::memory_order_release);
    return;
  }
  Runtime* runtime = rt->release();  // never stopped: see the header comment
  g_rt = HeapRuntime::Of(*runtime);
  g_heap = HeapCore::CreatePrimary(g_heap_storage, g_rt, Tier::kAuto, kAllocDefault);
  if (g_heap == nullptr) {
    TM_LOG_WARN("libtiermem-preload: no heap slot; using glibc's malloc");
    g_state.store(kFailed, std::memory_order_release);
    return;
  }
  g_ready_heap.store(g_heap, std::memory_order_release);
  g_state.store(kReady, std::memory_order_release);
  if (g_rt->options().stats[0] != '\0') atexit(PrintStats);
}

__attribute__((noinline)) HeapCore* SlowHeap() {
  if (alloc::InRuntimeCall()) return nullptr;
  int s = g_state.load(std::memory_order_acquire);
  if (s == kReady) return g_heap;
  if (s == kUninit && g_state.compare_exchange_strong(s, kStarting)) {
    Start();
    return g_state.load(std::memory_order_acquire) == kReady ? g_heap : nullptr;
  }
  return nullptr;  // another thread is starting the runtime, or it failed: glibc
}

// The heap for this call, or nullptr when this call must go to glibc.
inline HeapCore* Heap() {
  HeapCore* h = g_ready_heap.load(std::memory_order_acquire);
  if (__builtin_expect(h != nullptr && !alloc::InRuntimeCall(), 1)) return h;
  return SlowHeap();
}

// Whether p is a tiermem block (small or page run) rather than glibc's.
inline bool Ours(const void* p) {
  if (alloc::GlobalSpanMap().Lookup(p) != nullptr) return true;
  HeapRuntime* rt = g_rt;
  return rt != nullptr && rt->RegionOf(p) != nullptr;
}

// Usable size of a glibc block, from its chunk header (glibc's musable(): size field minus the
// header, minus one more word for an mmapped chunk).
size_t ForeignUsable(const void* p) {
  const size_t field = reinterpret_cast<const size_t*>(p)[-1];
  const size_t size = field & ~size_t{7};
  return (field & 2) ? size - 2 * sizeof(size_t) : size - sizeof(size_t);
}

// Not a small block (nullptr, a page run, or glibc's).
__attribute__((noinline)) void FreeSlow(void* p) {
  if (p == nullptr) return;
  HeapRuntime* rt = g_rt;
  if (rt == nullptr || rt->RegionOf(p) == nullptr) {
    __libc_free(p);
    return;
  }
  if (alloc::InRuntimeCall()) return;  // see FreeImpl
  (void)HeapCore::FreeAny(p, rt);
}

// A small block the primary cache did not take: another heap's, a span that handed out aligned
// blocks, no primary cache yet, or a bypassed thread. A thread inside a runtime call may hold
// heap locks: never re-enter the heap from there. Such frees of heap blocks do not happen in
// practice; leaking one is the safe answer.
__attribute__((noinline)) void FreeSmallSlow(alloc::Span* span, void* p) {
  if (!alloc::InRuntimeCall()) HeapCore::FreeInSpan(span, p);
}

inline void FreeImpl(void* p) {
  alloc::Span* span = alloc::GlobalSpanMap().Lookup(p);  // nullptr for p == nullptr
  if (__builtin_expect(span != nullptr, 1)) {
    if (__builtin_expect(!HeapCore::TryFreePrimary(span, p), 0)) FreeSmallSlow(span, p);
    return;
  }
  FreeSlow(p);
}

size_t UsableImpl(const void* p) {
  if (p == nullptr) return 0;
  if (Ours(p)) return HeapCore::UsableSizeAny(p, g_rt);
  return ForeignUsable(p);
}

__attribute__((noinline)) void* MallocSlow(size_t n) {
  HeapCore* h = Heap();
  return h != nullptr ? h->Malloc(n) : __libc_malloc(n);
}

// The fast path pops from the thread's primary cache without a call (a thread has one only once
// the heap is ready, and not while it bypasses the heap); anything else goes to MallocSlow.
inline void* MallocImpl(size_t n) {
  void* p = HeapCore::TryMallocPrimary(n);
  if (__builtin_expect(p != nullptr, 1)) return p;
  return MallocSlow(n);
}

void* MemalignImpl(size_t align, size_t n) {
  HeapCore* h = Heap();
  return h != nullptr ? alloc::entry::Memalign(*h, align, n) : __libc_memalign(align, n);
}

void* ReallocImpl(void* p, size_t n) {
  if (p == nullptr) return MallocImpl(n);
  HeapCore* h = Heap();
  const bool ours = Ours(p);
  if (ours && h != nullptr) return h->Realloc(p, n);
  if (!ours && h == nullptr) return __libc_realloc(p, n);
  // A block moving between glibc and tiermem.
  if (n == 0) {
    FreeImpl(p);
    return nullptr;
  }
  void* q = MallocImpl(n);
  if (q == nullptr) return nullptr;
  const size_t have = UsableImpl(p);
  memcpy(q, p, have < n ? have : n);
  FreeImpl(p);
  return q;
}

// TIERMEM_STATS at exit: the runtime's report (text on stderr, or a JSON line in the file).
void PrintStats() {
  if (g_rt != nullptr) g_rt->FinishStats();
}

__attribute__((constructor)) void PreloadConstructor() { (void)Heap(); }

// operator new: retry through the new_handler, then throw (as the standard requires).
__attribute__((noinline)) void* NewSlow(size_t n, size_t align) {
  for (;;) {
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
    void* p = align ? MemalignImpl(align, n) : MallocImpl(n);
    if (p != nullptr) return p;
  }
}
inline void* New(size_t n) {
  void* p = MallocImpl(n);
  return __builtin_expect(p != nullptr, 1) ? p : NewSlow(n, 0);
}
inline void* NewAligned(size_t n, std::align_val_t a) {
  void* p = MemalignImpl(static_cast<size_t>(a), n);
  return __builtin_expect(p != nullptr, 1) ? p : NewSlow(n, static_cast<size_t>(a));
}
void* NewNothrow(size_t n, size_t align) noexcept {
  void* p = align ? MemalignImpl(align, n) : MallocImpl(n);
  if (p != nullptr) return p;
  try {
    return NewSlow(n, align);
  } catch (...) {
    return nullptr;
  }
}

}  // namespace

HeapCore* ApiHeap() { return Heap(); }
void* Allocate(size_t size) { return MallocImpl(size); }
void* AllocateZeroed(size_t size) {
  HeapCore* h = Heap();
  return h != nullptr ? h->Calloc(1, size) : __libc_calloc(1, size);
}
void* AllocateAligned(size_t align, size_t size) { return MemalignImpl(align, size); }
void* Reallocate(void* p, size_t size) { return ReallocImpl(p, size); }
void Deallocate(void* p) { FreeImpl(p); }
size_t UsableSize(const void* p) { return UsableImpl(p); }

}  // namespace tiermem::preload

using namespace tiermem::preload;  // NOLINT: the C entry points below

TM_EXPORT TM_HOT void* malloc(size_t n) { return MallocImpl(n); }
TM_EXPORT TM_HOT void free(void* p) { FreeImpl(p); }
TM_EXPORT void* calloc(size_t n, size_t size) {
  tiermem::alloc::HeapCore* h = Heap();
  return h != nullptr ? h->Calloc(n, size) : __libc_calloc(n, size);
}
TM_EXPORT void* realloc(void* p, size_t n) { return ReallocImpl(p, n); }
TM_EXPORT void* reallocarray(void* p, size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return nullptr;
  }
  return ReallocImpl(p, total);
}
TM_EXPORT void* memalign(size_t align, size_t n) { return MemalignImpl(align, n); }
TM_EXPORT int posix_memalign(void** out, size_t align, size_t n) {
  if (align % sizeof(void*) != 0 || !tiermem::alloc::entry::IsPow2(align)) return EINVAL;
  const int saved = errno;
  void* p = MemalignImpl(align, n);
  if (p == nullptr) {
    errno = saved;
    return ENOMEM;
  }
  *out = p;
  return 0;
}
TM_EXPORT void* aligned_alloc(size_t align, size_t n) {
  if (!tiermem::alloc::entry::IsPow2(align)) {
    errno = EINVAL;
    return nullptr;
  }
  return MemalignImpl(align, n);
}
TM_EXPORT void* valloc(size_t n) { return MemalignImpl(tiermem::os::PageSize(), n); }
TM_EXPORT void* pvalloc(size_t n) {
  const size_t page = tiermem::os::PageSize();
  if (n > SIZE_MAX - page) {
    errno = ENOMEM;
    return nullptr;
  }
  return MemalignImpl(page, n == 0 ? page : (n + page - 1) & ~(page - 1));
}
TM_EXPORT size_t malloc_usable_size(void* p) { return UsableImpl(p); }

// ---- C++ ----
TM_CXX_EXPORT TM_HOT void* operator new(size_t n) { return New(n); }
TM_CXX_EXPORT void* operator new[](size_t n) { return New(n); }
TM_CXX_EXPORT void* operator new(size_t n, const std::nothrow_t&) noexcept {
  return NewNothrow(n, 0);
}
TM_CXX_EXPORT void* operator new[](size_t n, const std::nothrow_t&) noexcept {
  return NewNothrow(n, 0);
}
TM_CXX_EXPORT void* operator new(size_t n, std::align_val_t a) { return NewAligned(n, a); }
TM_CXX_EXPORT void* operator new[](size_t n, std::align_val_t a) { return NewAligned(n, a); }
TM_CXX_EXPORT void* operator new(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return NewNothrow(n, static_cast<size_t>(a));
}
TM_CXX_EXPORT void* operator new[](size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return NewNothrow(n, static_cast<size_t>(a));
}
TM_CXX_EXPORT TM_HOT void operator delete(void* p) noexcept { FreeImpl(p); }
TM_CXX_EXPORT void operator delete[](void* p) noexcept { FreeImpl(p); }
TM_CXX_EXPORT TM_HOT void operator delete(void* p, size_t) noexcept { FreeImpl(p); }
TM_CXX_EXPORT void operator delete[](void* p, size_t) noexcept { FreeImpl(p); }
TM_CXX_EXPORT void operator delete(void* p, const std::nothrow_t&) noexcept { FreeImpl(p); }
TM_CXX_EXPORT void operator delete[](void* p, const std::nothrow_t&) noexcept { FreeImpl(p); }
TM_CXX_EXPORT void operator delete(void* p, std::align_val_t) noexcept { FreeImpl(p); }
TM_CXX_EXPORT void operator delete[](void* p, std::align_val_t) noexcept { FreeImpl(p); }
TM_CXX_EXPORT void operator delete(void* p, size_t, std::align_val_t) noexcept { FreeImpl(p); }
TM_CXX_EXPORT void operator delete[](void* p, size_t, std::align_val_t) noexcept { FreeImpl(p); }
TM_CXX_EXPORT void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  FreeImpl(p);
}
TM_CXX_EXPORT void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  FreeImpl(p);
}

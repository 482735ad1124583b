// ThreadSanitizer annotations for synchronization it cannot see.
//
// The one such case: pages write-protected through userfaultfd. A thread that writes such a
// page waits in the kernel until the pager lifts the protection, so the pager may read the page
// meanwhile without a lock; ThreadSanitizer sees the program's earlier writes and the pager's
// read with no happens-before between them and reports a race. (A write that calls a page's
// eviction off goes on while the page may still be sent; what was sent is then never read, the
// page staying dirty: a race by design.) Code that reads pages under that
// protection (TcpTransport sending them from where they are) holds a TsanIgnoreAccesses for the
// read alone. Outside ThreadSanitizer builds it is empty.
#pragma once

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_ignore_thread_begin();
extern "C" void __tsan_ignore_thread_end();
#endif

namespace tiermem {

// A ThreadSanitizer or AddressSanitizer build: the sanitizer intercepts sigaction, and its
// shadow memory counts in the process's resident memory.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitizedBuild = true;
#else
inline constexpr bool kSanitizedBuild = false;
#endif

class TsanIgnoreAccesses {
 public:
#if defined(__SANITIZE_THREAD__)
  TsanIgnoreAccesses() { __tsan_ignore_thread_begin(); }
  ~TsanIgnoreAccesses() { __tsan_ignore_thread_end(); }
#else
  TsanIgnoreAccesses() {}  // (user-provided: a guard held for its scope is not "unused")
#endif
  TsanIgnoreAccesses(const TsanIgnoreAccesses&) = delete;
  TsanIgnoreAccesses& operator=(const TsanIgnoreAccesses&) = delete;
};

}  // namespace tiermem

// Threads the runtime starts (the pager's fault handler, the policy thread) call
// OnRuntimeThreadStart() first thing. The preload library installs a hook there that routes those
// threads' own malloc calls to glibc: a fault handler whose heap memory had been evicted would
// wait forever on its own fault. Without the preload library the hook is unset and this is free.
#pragma once

namespace tiermem {

using RuntimeThreadHook = void (*)();
// Installs the hook (nullptr removes it). Call before Runtime::Start.
void SetRuntimeThreadHook(RuntimeThreadHook hook);
void OnRuntimeThreadStart();

// Brackets work the runtime does on a user's thread that must not allocate from the tiered heap
// (the fork handlers: the heap's locks are held by then). The preload library installs hooks that
// route the thread's allocations to glibc in between; unset, the scope does nothing.
void SetRuntimeCallHooks(RuntimeThreadHook enter, RuntimeThreadHook leave);
class RuntimeCallScope {
 public:
  RuntimeCallScope();
  ~RuntimeCallScope();
  RuntimeCallScope(const RuntimeCallScope&) = delete;
  RuntimeCallScope& operator=(const RuntimeCallScope&) = delete;
};

}  // namespace tiermem

// Threads the runtime starts (the pager's fault handler, the policy thread) call
// OnRuntimeThreadStart() first thing. The preload library installs a hook there that routes those
// threads' own malloc calls to glibc: a fault handler whose heap memory had been evicted would
// wait forever on its own fault. With a hook, the thread's stack then counts as the runtime's
// own DRAM (WatchThreadStack). Without the preload library the hook is unset and this is free.
#pragma once

namespace tiermem {

using RuntimeThreadHook = void (*)();
// Installs the hook (nullptr removes it). Call before Runtime::Start.
void SetRuntimeThreadHook(RuntimeThreadHook hook);
void OnRuntimeThreadStart();
// True once a hook is installed: the runtime is the preload library's (only it installs one),
// and glibc's malloc serves the runtime's own threads alone.
bool RuntimeThreadHookSet();

// Held by the code that creates a runtime thread, around the std::thread constructor: the new
// thread starts with every asynchronous signal blocked (the creator's mask comes back at the
// end of the scope). The program's signal handlers then never run on a runtime thread: a
// handler that touched an evicted page on the pager's fault handler thread would wait forever
// on its own fault (bash's SIGCHLD handler did, under the preload library). Synchronous signals
// (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP) stay deliverable.
class NewRuntimeThreadSignals {
 public:
  NewRuntimeThreadSignals();
  ~NewRuntimeThreadSignals();
  NewRuntimeThreadSignals(const NewRuntimeThreadSignals&) = delete;
  NewRuntimeThreadSignals& operator=(const NewRuntimeThreadSignals&) = delete;

 private:
  unsigned char saved_[128];  // the creator's sigset_t
};

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

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

}  // namespace tiermem

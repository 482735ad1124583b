// The access sampler's slice of the OS surface: protection, the SIGSEGV handler and perf. Same
// contract as base/os.h: ints are 0 or a negative errno, nothing allocates, and everything here
// is async-signal-safe except InstallSegvHandler and PerfPreciseAvailable.
#pragma once

#include <csignal>
#include <cstddef>

namespace tiermem::os {

// mprotect to PROT_NONE / PROT_READ|PROT_WRITE.
int ProtectNone(void* addr, size_t bytes);
int ProtectReadWrite(void* addr, size_t bytes);

using SegvHandler = void (*)(int, siginfo_t*, void*);
// Installs `handler` for SIGSEGV (SA_SIGINFO|SA_ONSTACK|SA_RESTART) and stores the previous
// action in *old.
int InstallSegvHandler(SegvHandler handler, struct sigaction* old);
// The handler now installed for SIGSEGV (nullptr when it is not an SA_SIGINFO handler).
SegvHandler CurrentSegvHandler();
// Passes a fault that is not ours on to `old` (what was installed before): its handler, or the
// default action (restored, so the faulting instruction ends the process when it runs again).
void ChainSegv(const struct sigaction& old, int sig, siginfo_t* info, void* uctx);
// True when the fault in `uctx` was a write (x86-64 page-fault error code); false elsewhere.
bool FaultWasWrite(const void* uctx);

// Tries perf_event_open for precise (PEBS-like) sampling on this thread; 0 or a negative errno.
int PerfPreciseAvailable();

}  // namespace tiermem::os

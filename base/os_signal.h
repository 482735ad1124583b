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
// SIGSEGV's hand-over (os_signal_chain.cc). tiermem's handler passes every fault that is not its
// own to "the program's action": at first the action its installation replaced; under the
// preload library, also every action the program sets later through sigaction, signal and their
// kin (allocator/preload/signals.cc), which is recorded here instead of reaching the kernel, so
// tiermem's handler stays installed. Without the preload library a program's sigaction replaces
// tiermem's handler in the kernel (the runtime notices: CurrentSegvHandler).
//
// Installs `handler` for SIGSEGV (SA_SIGINFO|SA_ONSTACK|SA_RESTART); the action it replaces
// becomes the program's action. Not async-signal-safe (registers fork handlers once).
int InstallSegvHandler(SegvHandler handler);
// The handler the kernel has for SIGSEGV (nullptr when it is not an SA_SIGINFO handler).
SegvHandler CurrentSegvHandler();
// True once the program has set a SIGSEGV handler function of its own (not SIG_DFL or SIG_IGN)
// through ProgramSigaction while tiermem's handler was installed in this process; it stays true
// (the tracker stops protection sampling for good: runtime/tiering/tracker.h). Async-signal-safe.
bool ProgramSetSegvHandler();
// Passes a fault that is not ours to the program's action as the kernel would have delivered it
// (its sa_mask and SIGSEGV unless SA_NODEFER blocked, SA_RESETHAND honoured), or, for SIG_DFL
// and SIG_IGN, to the default action (restored in the kernel, so the faulting instruction ends
// the process when it runs again; the hand-over ends).
void ChainSegv(int sig, siginfo_t* info, void* uctx);
// The preload library's sigaction, for every signal: SIGSEGV's action, while tiermem's handler is
// installed in this process, is the program's action (read and set here; `oldact` never shows
// tiermem's handler); anything else goes to glibc's sigaction. sigaction's contract, except that
// it returns 0 or a negative errno. Calling it once makes tiermem's own calls go to glibc's
// __sigaction (past the preload library's sigaction) from then on, as UseLibcSigaction does.
int ProgramSigaction(int sig, const struct sigaction* act, struct sigaction* oldact);
// The preload library calls this before the runtime starts (see ProgramSigaction).
void UseLibcSigaction();
// sigprocmask for the calling thread (pthread_sigmask); 0 or a negative errno.
int SignalMask(int how, const sigset_t* set, sigset_t* old);
// True when the fault in `uctx` was a write (x86-64 page-fault error code); false elsewhere.
bool FaultWasWrite(const void* uctx);

// Tries perf_event_open for precise (PEBS-like) sampling on this thread; 0 or a negative errno.
int PerfPreciseAvailable();

}  // namespace tiermem::os

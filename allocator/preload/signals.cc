// The calls that set a signal's action, interposed so that a program that installs its own
// SIGSEGV handler (redis-server does, at start) leaves tiermem's in the kernel: while the runtime's
// handler is installed, the program's action for SIGSEGV is recorded and tiermem's handler passes
// every fault that is not its own to it (base/os_signal.h, os::ProgramSigaction and ChainSegv).
// Other signals, and SIGSEGV before the runtime installs its handler, go to glibc's sigaction.
//
// Why all of these: glibc's signal, bsd_signal, ssignal, sysv_signal, __sysv_signal, sigset and
// siginterrupt call its hidden __sigaction directly, never the exported sigaction. They are
// rebuilt here on the interposed one as glibc (2.36, sysdeps/posix) writes them. siginterrupt
// comes along because bsd_signal's SA_RESTART depends on the set it keeps (glibc's own set is
// hidden). Each is async-signal-safe, as glibc's are: no allocation, no lock a signal handler
// could wait on (base/os_signal_chain.cc), no dlsym.
#include <errno.h>
#include <signal.h>

#include <atomic>
#include <cstdint>

#include "base/os_signal.h"

#define TM_EXPORT extern "C" __attribute__((visibility("default")))

namespace tiermem::preload {
namespace {

// Signals siginterrupt(sig, 1) asked to interrupt system calls (glibc's _sigintr), bit sig - 1.
// An atomic word, not a sigset_t: two threads calling siginterrupt at once each keep their bit
// (sigaddset's read-modify-write would lose one), with no lock a signal handler could wait on.
static_assert(NSIG - 1 <= 64, "one bit per signal");
constinit std::atomic<uint64_t> g_interrupting{0};

uint64_t SignalBit(int sig) { return uint64_t{1} << (sig - 1); }

int SetAction(int sig, const struct sigaction* act, struct sigaction* oldact) {
  const int rc = os::ProgramSigaction(sig, act, oldact);
  if (rc == 0) return 0;
  errno = -rc;
  return -1;
}

// signal/sysv_signal's checks: a handler, and a signal number sigaction may be asked about.
bool BadSignal(int sig, sighandler_t handler) {
  if (handler == SIG_ERR || sig < 1 || sig >= NSIG) {
    errno = EINVAL;
    return true;
  }
  return false;
}

sighandler_t SetHandler(int sig, sighandler_t handler, int flags, bool mask_self) {
  struct sigaction act, old;
  act.sa_handler = handler;
  sigemptyset(&act.sa_mask);
  if (mask_self) sigaddset(&act.sa_mask, sig);
  act.sa_flags = flags;
  if (SetAction(sig, &act, &old) < 0) return SIG_ERR;
  return old.sa_handler;
}

// BSD semantics: the signal blocked in its handler, system calls restarted unless siginterrupt.
sighandler_t BsdSignal(int sig, sighandler_t handler) {
  if (BadSignal(sig, handler)) return SIG_ERR;
  const bool interrupt = (g_interrupting.load(std::memory_order_relaxed) & SignalBit(sig)) != 0;
  return SetHandler(sig, handler, interrupt ? 0 : SA_RESTART, true);
}

// System V semantics: one delivery (reset to SIG_DFL), not blocked in its handler, no restart.
sighandler_t SysvSignal(int sig, sighandler_t handler) {
  if (BadSignal(sig, handler)) return SIG_ERR;
  return SetHandler(sig, handler, SA_RESETHAND | SA_NODEFER | SA_INTERRUPT, false);
}

}  // namespace
}  // namespace tiermem::preload

using tiermem::preload::BsdSignal;
using tiermem::preload::SetAction;
using tiermem::preload::SysvSignal;

TM_EXPORT int sigaction(int sig, const struct sigaction* act, struct sigaction* oldact) noexcept {
  return SetAction(sig, act, oldact);
}

TM_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler) noexcept { return BsdSignal(sig, handler); }
TM_EXPORT sighandler_t signal(int sig, sighandler_t handler) noexcept { return BsdSignal(sig, handler); }
TM_EXPORT sighandler_t ssignal(int sig, sighandler_t handler) noexcept { return BsdSignal(sig, handler); }
TM_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t handler) noexcept { return SysvSignal(sig, handler); }
TM_EXPORT sighandler_t sysv_signal(int sig, sighandler_t handler) noexcept { return SysvSignal(sig, handler); }

TM_EXPORT sighandler_t sigset(int sig, sighandler_t disp) noexcept {
  sigset_t set, oset;
  sigemptyset(&set);
  if (sigaddset(&set, sig) < 0) return SIG_ERR;
  struct sigaction act, old;
  if (disp == SIG_HOLD) {
    int rc = tiermem::os::SignalMask(SIG_BLOCK, &set, &oset);
    if (rc != 0) {
      errno = -rc;
      return SIG_ERR;
    }
    if (sigismember(&oset, sig)) return SIG_HOLD;
    if (SetAction(sig, nullptr, &old) < 0) return SIG_ERR;
    return old.sa_handler;
  }
  act.sa_handler = disp;
  sigemptyset(&act.sa_mask);
  act.sa_flags = 0;
  if (SetAction(sig, &act, &old) < 0) return SIG_ERR;
  int rc = tiermem::os::SignalMask(SIG_UNBLOCK, &set, &oset);
  if (rc != 0) {
    errno = -rc;
    return SIG_ERR;
  }
  return sigismember(&oset, sig) ? SIG_HOLD : old.sa_handler;
}

TM_EXPORT int siginterrupt(int sig, int interrupt) noexcept {
  using tiermem::preload::g_interrupting;
  using tiermem::preload::SignalBit;
  struct sigaction act;
  if (SetAction(sig, nullptr, &act) < 0) return -1;  // (EINVAL for a bad sig: before the bit)
  if (interrupt) {
    g_interrupting.fetch_or(SignalBit(sig), std::memory_order_relaxed);
    act.sa_flags &= ~SA_RESTART;
  } else {
    g_interrupting.fetch_and(~SignalBit(sig), std::memory_order_relaxed);
    act.sa_flags |= SA_RESTART;
  }
  return SetAction(sig, &act, nullptr) < 0 ? -1 : 0;
}

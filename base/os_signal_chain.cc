// SIGSEGV's hand-over between tiermem's handler and the program's (os_signal.h says what each
// call does).
//
// The state (which handler is tiermem's, the program's action) is read by ChainSegv inside the
// SIGSEGV handler, possibly on several threads at once, while another thread may be setting the
// program's action (redis-server installs its handler at start, while the runtime already
// samples). It is one plain struct under a spin lock, and why that is safe in a signal handler:
// the lock is only ever held with every blockable signal of the holding thread blocked, and the
// code that holds it touches only this file's static memory and the kernel (the program's
// `act` is copied in before the lock is taken and `oldact` written after it is dropped, both
// accesses that may fault on a sampled page), so a thread never takes a signal while it holds
// the lock and no handler can wait on a lock its own thread holds; a handler on another thread
// waits at most for a few system calls. The lock word is the holder's process id: a fork() child
// finds it held by a thread that does not exist there, and takes it over.
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "base/os.h"
#include "base/os_signal.h"
#include "base/tsan.h"

// glibc's sigaction under its second exported name (GLIBC_2.2.5): the preload library exports
// `sigaction` itself, and tiermem's own calls must not come back through it.
extern "C" int __sigaction(int sig, const struct sigaction* act, struct sigaction* oldact);

namespace tiermem::os {
namespace {

constinit std::atomic<bool> g_libc_direct{false};

// Under a sanitizer every call goes to `sigaction`, the sanitizer's interceptor: it keeps the
// handlers it is given and puts its own wrapper in the kernel, so glibc's __sigaction would read
// back the wrapper, not tiermem's handler. (The preload library's `sigaction` is never reached
// there: the sanitizer's runtime comes first.)
int RealSigaction(int sig, const struct sigaction* act, struct sigaction* oldact) {
  const bool direct = !kSanitizedBuild && g_libc_direct.load(std::memory_order_relaxed);
  const int rc = direct ? __sigaction(sig, act, oldact) : sigaction(sig, act, oldact);
  return rc == 0 ? 0 : -errno;
}

struct HandOver {
  SegvHandler ours = nullptr;  // tiermem's handler while the hand-over holds; else nullptr
  int pid = 0;                 // the process it holds in (a vfork child shares this memory)
  struct sigaction program{};  // the program's action: where ChainSegv passes faults
  // What glibc adds to an action it gives the kernel (SA_RESTORER and its restorer), added to the
  // program's actions too, so that `oldact` reads as glibc's sigaction would have returned it.
  int kernel_flags = 0;
  void (*restorer)() = nullptr;
};
// constinit: the runtime may install its handler (in the program's first malloc) before this
// library's static constructors run, which would reset a dynamically initialized state.
constinit HandOver g_state{};
constinit std::atomic<int> g_lock{0};
// Set (never cleared) when the program records a handler function under the hand-over.
constinit std::atomic<bool> g_program_handler{false};

class Locked {
 public:
  Locked() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved_);
    const int me = getpid();
    for (;;) {
      int held = 0;
      if (g_lock.compare_exchange_weak(held, me, std::memory_order_acquire)) break;
      // Held by another process's thread: the parent's, before the fork that made this one.
      if (held != 0 && held != me && g_lock.compare_exchange_weak(held, me, std::memory_order_acquire)) break;
      sched_yield();
    }
  }
  ~Locked() {
    g_lock.store(0, std::memory_order_release);
    pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
  }
  Locked(const Locked&) = delete;
  Locked& operator=(const Locked&) = delete;

 private:
  sigset_t saved_;
};

// A fork() child keeps tiermem's handler and the program's action (its own copy of them).
void ForkChild() {
  if (g_state.ours != nullptr) g_state.pid = getpid();
}

// `act` as the program's action: what the kernel keeps of it, and glibc's additions.
void Record(const struct sigaction& act) {
  g_state.program = act;
  sigdelset(&g_state.program.sa_mask, SIGKILL);
  sigdelset(&g_state.program.sa_mask, SIGSTOP);
  g_state.program.sa_flags |= g_state.kernel_flags;
  g_state.program.sa_restorer = g_state.restorer;
}

bool IsDefault(const struct sigaction& a) {
  const bool info = (a.sa_flags & SA_SIGINFO) != 0;
  return info ? a.sa_sigaction == nullptr : (a.sa_handler == SIG_DFL || a.sa_handler == SIG_IGN);
}

// One line (write(2) only: this runs in a signal handler), so that a crash inside tiermem's
// memory can be told from others.
void SayDefault(const siginfo_t* info) {
  char msg[96] = "tiermem: SIGSEGV at 0x";
  size_t n = strlen(msg);
  uintptr_t a = reinterpret_cast<uintptr_t>(info->si_addr);
  char hex[17];
  int h = 0;
  do {
    hex[h++] = "0123456789abcdef"[a & 15];
    a >>= 4;
  } while (a != 0 && h < 16);
  while (h > 0) msg[n++] = hex[--h];
  const char* tail = info->si_code == SEGV_ACCERR ? " (access error), not a sampled page\n" : " (not mapped)\n";
  for (const char* t = tail; *t && n < sizeof(msg) - 1; ++t) msg[n++] = *t;
  ssize_t w = write(2, msg, n);
  (void)w;
}

}  // namespace

void UseLibcSigaction() { g_libc_direct.store(true, std::memory_order_relaxed); }

int SignalMask(int how, const sigset_t* set, sigset_t* old) { return -pthread_sigmask(how, set, old); }

int InstallSegvHandler(SegvHandler handler) {
  static std::atomic<bool> fork_handler{false};
  if (!fork_handler.exchange(true)) AtFork(nullptr, nullptr, &ForkChild);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = handler;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  Locked lock;
  struct sigaction old, now;
  int rc = RealSigaction(SIGSEGV, &sa, &old);
  if (rc != 0) return rc;
  if (RealSigaction(SIGSEGV, nullptr, &now) == 0) {
    g_state.kernel_flags = now.sa_flags & ~sa.sa_flags;
    g_state.restorer = now.sa_restorer;
  }
  // Installed again over itself: the program's action stays the one recorded before.
  if (!((old.sa_flags & SA_SIGINFO) && old.sa_sigaction == handler)) g_state.program = old;
  g_state.ours = handler;
  g_state.pid = getpid();
  return 0;
}

SegvHandler CurrentSegvHandler() {
  struct sigaction cur;
  if (RealSigaction(SIGSEGV, nullptr, &cur) != 0) return nullptr;
  if (!(cur.sa_flags & SA_SIGINFO)) return nullptr;
  return cur.sa_sigaction;
}

bool ProgramSetSegvHandler() { return g_program_handler.load(std::memory_order_acquire); }

int ProgramSigaction(int sig, const struct sigaction* act, struct sigaction* oldact) {
  UseLibcSigaction();
  if (sig != SIGSEGV) return RealSigaction(sig, act, oldact);
  struct sigaction want, had;
  if (act != nullptr) memcpy(&want, act, sizeof(want));  // (may fault on a sampled page: not under the lock)
  const int me = getpid();
  int rc = 0;
  {
    Locked lock;
    if (g_state.ours != nullptr && g_state.pid == me && CurrentSegvHandler() != g_state.ours) {
      g_state.ours = nullptr;  // replaced behind our back (the raw system call): the kernel's again
    }
    if (g_state.ours != nullptr && g_state.pid == me) {
      had = g_state.program;
      if (act != nullptr) {
        Record(want);
        if (!IsDefault(g_state.program)) g_program_handler.store(true, std::memory_order_release);
      }
    } else {
      rc = RealSigaction(SIGSEGV, act != nullptr ? &want : nullptr, &had);
    }
  }
  if (rc == 0 && oldact != nullptr) memcpy(oldact, &had, sizeof(had));
  return rc;
}

void ChainSegv(int sig, siginfo_t* info, void* uctx) {
  // A SIGSEGV another process or thread sent (kill, tgkill, sigqueue) rather than a fault.
  const bool sent = info == nullptr || info->si_code <= 0;
  struct sigaction act;
  bool ignore = false;
  {
    Locked lock;
    act = g_state.program;
    if (IsDefault(act)) {
      // SIG_IGN ignores a sent signal; a fault ends the process whatever the program set.
      ignore = sent && !(act.sa_flags & SA_SIGINFO) && act.sa_handler == SIG_IGN;
      if (!ignore) {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof(dfl));
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        RealSigaction(SIGSEGV, &dfl, nullptr);
        g_state.ours = nullptr;
      }
    } else if (act.sa_flags & SA_RESETHAND) {
      g_state.program.sa_handler = SIG_DFL;  // what the kernel does as it delivers it
    }
  }
  if (IsDefault(act)) {
    if (ignore) return;
    // Default action: returning re-executes the access, which now ends the process with SIGSEGV
    // exactly as it would have without tiermem; a sent signal is sent again (it is blocked until
    // this handler returns).
    if (sent) {
      raise(sig);
    } else {
      SayDefault(info);
    }
    return;
  }
  // The mask the kernel would have set for the program's handler (ours runs with an empty sa_mask
  // and SIGSEGV blocked); sigreturn puts the thread's own back after.
  sigset_t block = act.sa_mask;
  pthread_sigmask(SIG_BLOCK, &block, nullptr);
  if (act.sa_flags & SA_NODEFER) {
    sigset_t self;
    sigemptyset(&self);
    sigaddset(&self, sig);
    pthread_sigmask(SIG_UNBLOCK, &self, nullptr);
  }
  if (act.sa_flags & SA_SIGINFO) {
    act.sa_sigaction(sig, info, uctx);
  } else {
    act.sa_handler(sig);
  }
}

}  // namespace tiermem::os

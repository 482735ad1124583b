/* The calls that set a signal's action, as the preload library rebuilds them
 * (allocator/preload/signals.cc): run by compare.sh without and with the library, whose outputs
 * must be equal, so each line is glibc's own answer. For SIGUSR1, SIGUSR2 and SIGSEGV (which
 * the runtime's hand-over records rather than gives the kernel) it prints the action each call
 * leaves, as sigaction reads it back: handler, SA_RESTART, SA_RESETHAND, SA_NODEFER, the signal
 * in its own mask, and what the call returned.
 *   signal_calls          the calls, one line each (compare.sh: glibc's answers and the library's)
 * With WAIT_SEGV_HANDLER set and LD_PRELOAD (the library's run of compare.sh), it first churns
 * 8 MiB of heap until the kernel's action for SIGSEGV is a handler (the runtime's, installed when
 * protection sampling starts: read with the raw system call, which the library does not see), so
 * that SIGSEGV's calls go through the runtime's hand-over; 60 s at most.
 *   signal_calls race     two threads call siginterrupt at once, each on its own signal, 2,000
 *                         times; each signal's action must then follow its own thread's last call
 *                         (a lost update of the set siginterrupt keeps would leave one the other
 *                         way round). Under the library only: glibc's own set is updated without
 *                         an atomic, so glibc can lose one. Prints "ok", or why not and exits 1. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

// The calls under test are the old ones glibc marks deprecated; bsd_signal is exported but no
// longer declared by glibc's headers.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
extern sighandler_t bsd_signal(int sig, sighandler_t handler);

static void HandlerA(int sig) { (void)sig; }
static void HandlerB(int sig) { (void)sig; }

static const char* Name(sighandler_t h) {
  if (h == SIG_DFL) return "SIG_DFL";
  if (h == SIG_IGN) return "SIG_IGN";
  if (h == SIG_ERR) return "SIG_ERR";
  if (h == SIG_HOLD) return "SIG_HOLD";
  if (h == HandlerA) return "A";
  if (h == HandlerB) return "B";
  return "other";
}

static void Show(const char* what, int sig, sighandler_t returned) {
  struct sigaction now;
  if (sigaction(sig, NULL, &now) != 0) {
    printf("%s: sigaction failed\n", what);
    exit(1);
  }
  printf("%-28s sig %2d returned %-8s now %-8s restart %d resethand %d nodefer %d self-masked %d\n", what, sig,
         Name(returned), Name(now.sa_handler), !!(now.sa_flags & SA_RESTART), !!(now.sa_flags & SA_RESETHAND),
         !!(now.sa_flags & SA_NODEFER), sigismember(&now.sa_mask, sig));
}

static void Calls(int sig) {
  Show("signal(A)", sig, signal(sig, HandlerA));
  Show("siginterrupt(1)", sig, siginterrupt(sig, 1) == 0 ? SIG_DFL : SIG_ERR);
  Show("signal(B) interrupting", sig, signal(sig, HandlerB));
  Show("bsd_signal(A) interrupting", sig, bsd_signal(sig, HandlerA));
  Show("siginterrupt(0)", sig, siginterrupt(sig, 0) == 0 ? SIG_DFL : SIG_ERR);
  Show("ssignal(B)", sig, ssignal(sig, HandlerB));
  Show("sysv_signal(A)", sig, sysv_signal(sig, HandlerA));
  Show("sigset(B)", sig, sigset(sig, HandlerB));
  Show("sigset(SIG_HOLD)", sig, sigset(sig, SIG_HOLD));
  Show("sigset(A) after hold", sig, sigset(sig, HandlerA));
  Show("signal(SIG_DFL)", sig, signal(sig, SIG_DFL));
}

enum { kRounds = 2000 };
static pthread_barrier_t g_start;

static void* Toggle(void* arg) {
  const int sig = *(const int*)arg;
  pthread_barrier_wait(&g_start);
  for (int i = 0; i < kRounds; ++i) {
    if (siginterrupt(sig, i % 2) != 0) return (void*)1;
  }
  return NULL;
}

// The kernel's handler for SIGSEGV, not the one the library's sigaction reports.
static int KernelHandlesSegv(void) {
  struct {
    void* handler;
    unsigned long flags;
    void* restorer;
    unsigned long mask;
  } k;
  if (syscall(SYS_rt_sigaction, SIGSEGV, NULL, &k, sizeof(k.mask)) != 0) return 0;
  return k.handler != (void*)SIG_DFL && k.handler != (void*)SIG_IGN;
}

static int WaitForRuntimeHandler(void) {
  enum { kBlocks = 512, kBlockBytes = 16384 };
  static char* blocks[kBlocks];
  const time_t end = time(NULL) + 60;
  for (unsigned round = 0; !KernelHandlesSegv(); ++round) {
    if (time(NULL) > end) {
      printf("the runtime installed no SIGSEGV handler in 60 s\n");
      return 0;
    }
    const unsigned i = round % kBlocks;
    free(blocks[i]);
    blocks[i] = malloc(kBlockBytes);
    if (blocks[i] != NULL) memset(blocks[i], (int)round, kBlockBytes);
  }
  for (unsigned i = 0; i < kBlocks; ++i) free(blocks[i]);
  return 1;
}

static int Race(void) {
  // Last call of each thread: siginterrupt(sig, 1) (kRounds is even, i = kRounds - 1 is odd).
  int a = SIGUSR1, b = SIGUSR2;
  pthread_t ta, tb;
  pthread_barrier_init(&g_start, NULL, 2);
  pthread_create(&ta, NULL, Toggle, &a);
  pthread_create(&tb, NULL, Toggle, &b);
  void *ra, *rb;
  pthread_join(ta, &ra);
  pthread_join(tb, &rb);
  if (ra != NULL || rb != NULL) {
    printf("siginterrupt failed in a thread\n");
    return 1;
  }
  // siginterrupt(sig, 1) cleared SA_RESTART, and signal() after it must not set it again.
  const int sigs[] = {SIGUSR1, SIGUSR2};
  for (int i = 0; i < 2; ++i) {
    struct sigaction now;
    signal(sigs[i], HandlerA);
    sigaction(sigs[i], NULL, &now);
    if (now.sa_flags & SA_RESTART) {
      printf("signal %d: SA_RESTART after siginterrupt(%d, 1): an update of the set was lost\n", sigs[i], sigs[i]);
      return 1;
    }
  }
  printf("ok\n");
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "race") == 0) return Race();
  if (getenv("WAIT_SEGV_HANDLER") != NULL && getenv("LD_PRELOAD") != NULL && !WaitForRuntimeHandler()) return 1;
  const int sigs[] = {SIGUSR1, SIGUSR2, SIGSEGV};
  for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); ++i) Calls(sigs[i]);
  errno = 0;
  sighandler_t got = signal(0, HandlerA);
  printf("signal(0): %s errno %s\n", Name(got), errno == EINVAL ? "EINVAL" : "other");
  errno = 0;
  got = signal(SIGKILL, HandlerA);
  printf("signal(SIGKILL): %s errno %s\n", Name(got), errno == EINVAL ? "EINVAL" : "other");
  printf("siginterrupt(NSIG): %d\n", siginterrupt(NSIG, 1));
  return 0;
}

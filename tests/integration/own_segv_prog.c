/* A program with a SIGSEGV handler of its own, as redis-server has (for its crash report): the
 * handler is installed first thing in main, then MiB megabytes are allocated and written once,
 * and READS word reads follow, nine in ten on the first tenth of the pages, none written again
 * (fixed work). Prints the reads' sum; exits 0, or 139 from its handler on a fault. With "raw",
 * the handler is installed with the rt_sigaction system call, past the preload library's
 * sigaction (which tiermem's handler would chain to): it replaces tiermem's.
 *   own_segv_prog MiB READS [raw] */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static void OnSegv(int sig) {
  (void)sig;
  static const char msg[] = "own_segv_prog: SIGSEGV reached the program's own handler\n";
  ssize_t n = write(2, msg, sizeof(msg) - 1);
  (void)n;
  _exit(139);
}

static void Nothing(int sig) { (void)sig; }

/* The kernel's struct sigaction (x86-64). The restorer and its flag are glibc's, read back from
 * an action glibc installed for SIGUSR2. */
struct KernelAction {
  void (*handler)(int);
  unsigned long flags;
  void (*restorer)(void);
  uint64_t mask;
};
static int InstallRaw(void) {
  struct sigaction probe;
  memset(&probe, 0, sizeof(probe));
  probe.sa_handler = Nothing;
  sigemptyset(&probe.sa_mask);
  struct KernelAction k;
  if (sigaction(SIGUSR2, &probe, NULL) != 0 || syscall(SYS_rt_sigaction, SIGUSR2, NULL, &k, 8) != 0) return -1;
  signal(SIGUSR2, SIG_DFL);
  k.handler = OnSegv;
  k.mask = 0;
  return (int)syscall(SYS_rt_sigaction, SIGSEGV, &k, NULL, 8);
}

int main(int argc, char** argv) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = OnSegv;
  sigemptyset(&sa.sa_mask);
  if (argc == 4 && strcmp(argv[3], "raw") == 0) {
    if (InstallRaw() != 0) return 3;
  } else if (sigaction(SIGSEGV, &sa, NULL) != 0) {
    return 3;
  }
  if (argc != 3 && argc != 4) {
    fprintf(stderr, "usage: own_segv_prog MiB READS [raw]\n");
    return 2;
  }
  const size_t pages = (size_t)atol(argv[1]) * 256, reads = (size_t)atol(argv[2]);
  const size_t hot = pages / 10 > 0 ? pages / 10 : 1;
  uint64_t* mem = malloc(pages * 4096);
  if (mem == NULL || pages == 0) return 3;
  for (size_t i = 0; i < pages * 512; ++i) mem[i] = i;
  uint64_t x = 88172645463325252ull, sum = 0;
  for (size_t r = 0; r < reads; ++r) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
    const size_t page = (x % 10 != 0) ? (x >> 8) % hot : (x >> 8) % pages;
    sum += mem[page * 512 + (x >> 40) % 512];
  }
  printf("%llu\n", (unsigned long long)sum);
  free(mem);
  return 0;
}

/* A program that installs its own SIGSEGV handler while protection sampling runs over its heap
 * (run by segv_chain.sh under the preload library, as redis-server is): it churns 32 MiB of heap
 * blocks until GO_FILE exists, then sets its handler twice (with sigaction, or with signal), each
 * time checking what the call returns as the previous action: first SIG_DFL (what was there
 * before tiermem), then its own first handler, never tiermem's. Right after, it reads every page
 * of its heap once, so that the pages tiermem armed before the hand-over are touched before the
 * runtime can lift them. It churns on until STOP_FILE exists, then faults once on a page of its
 * own (mmap, PROT_NONE), which must reach its handler (with that address, where the handler sees
 * one); a SIGSEGV at any other time (a page tiermem sampled) ends it with status 139. Checks its
 * heap, prints "ok" and exits 0.
 *   segv_chain sigaction|signal GO_FILE STOP_FILE */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum { kBlocks = 2048, kBlockBytes = 16384, kPage = 4096 };

static char* g_own_page;
static volatile sig_atomic_t g_expect, g_caught;
static void* volatile g_addr;

static void Die(const char* msg) {
  ssize_t n = write(2, msg, strlen(msg));
  (void)n;
  _exit(139);
}

static void Caught(void* addr) {
  if (!g_expect) Die("segv_chain: a SIGSEGV that is not the program's own reached its handler\n");
  g_addr = addr;
  g_caught++;
  mprotect(g_own_page, kPage, PROT_READ | PROT_WRITE);
}
static void OnSegvInfo(int sig, siginfo_t* info, void* uc) {
  (void)sig, (void)uc;
  Caught(info->si_addr);
}
static void OnSegvPlain(int sig) {
  (void)sig;
  Caught(NULL);
}
static void FirstHandler(int sig) {
  (void)sig;
  Die("segv_chain: SIGSEGV reached the replaced handler\n");
}

static uint64_t* g_blocks[kBlocks];
static uint64_t g_seed[kBlocks];

static void Fill(int b, uint64_t seed) {
  for (size_t i = 0; i < kBlockBytes / 8; ++i) g_blocks[b][i] = seed + i;
  g_seed[b] = seed;
}

/* Reads and writes random blocks, and frees and allocates some again, until `file` exists. */
static void Churn(const char* file, uint64_t* x) {
  for (unsigned long it = 0;; ++it) {
    if (it % 4096 == 0 && access(file, F_OK) == 0) return;
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17; /* xorshift64 */
    const int b = (int)(*x % kBlocks);
    const size_t i = (*x >> 20) % (kBlockBytes / 8);
    if (g_blocks[b][i] != g_seed[b] + i) Die("segv_chain: heap data lost\n");
    if (*x % 64 == 0) {
      free(g_blocks[b]);
      g_blocks[b] = malloc(kBlockBytes);
      if (g_blocks[b] == NULL) Die("segv_chain: malloc failed\n");
      Fill(b, *x >> 8);
    }
  }
}

/* Reads every page of every block once (a page tiermem armed faults on the read). */
static void Sweep(void) {
  for (int b = 0; b < kBlocks; ++b) {
    /* A word every page, and the last (a block need not start on a page). */
    for (size_t i = 0; i < kBlockBytes / 8; i += kPage / 8) {
      if (g_blocks[b][i] != g_seed[b] + i) Die("segv_chain: heap data lost\n");
    }
    const size_t last = kBlockBytes / 8 - 1;
    if (g_blocks[b][last] != g_seed[b] + last) Die("segv_chain: heap data lost\n");
  }
}

static int SameAction(const struct sigaction* a, void (*handler)(int), int siginfo) {
  return a->sa_handler == handler && ((a->sa_flags & SA_SIGINFO) != 0) == siginfo;
}

static void InstallWithSigaction(void) {
  struct sigaction first, second, old, now;
  memset(&first, 0, sizeof(first));
  first.sa_handler = FirstHandler;
  sigemptyset(&first.sa_mask);
  if (sigaction(SIGSEGV, &first, &old) != 0) Die("segv_chain: sigaction failed\n");
  if (!SameAction(&old, SIG_DFL, 0)) Die("segv_chain: sigaction's oldact is not SIG_DFL (tiermem's handler?)\n");
  memset(&second, 0, sizeof(second));
  second.sa_sigaction = OnSegvInfo;
  second.sa_flags = SA_SIGINFO;
  sigemptyset(&second.sa_mask);
  if (sigaction(SIGSEGV, &second, &old) != 0) Die("segv_chain: sigaction failed\n");
  if (!SameAction(&old, FirstHandler, 0)) Die("segv_chain: sigaction's oldact is not the program's first handler\n");
  if (sigaction(SIGSEGV, NULL, &now) != 0) Die("segv_chain: sigaction failed\n");
  if (!(now.sa_flags & SA_SIGINFO) || now.sa_sigaction != OnSegvInfo) Die("segv_chain: sigaction reads back another handler\n");
}

static void InstallWithSignal(void) {
  if (signal(SIGSEGV, FirstHandler) != SIG_DFL) Die("segv_chain: signal's old handler is not SIG_DFL (tiermem's?)\n");
  if (signal(SIGSEGV, OnSegvPlain) != FirstHandler) Die("segv_chain: signal's old handler is not the program's first\n");
}

int main(int argc, char** argv) {
  if (argc != 4 || (strcmp(argv[1], "sigaction") != 0 && strcmp(argv[1], "signal") != 0)) {
    fprintf(stderr, "usage: segv_chain sigaction|signal GO_FILE STOP_FILE\n");
    return 2;
  }
  const int info = strcmp(argv[1], "sigaction") == 0;
  for (int b = 0; b < kBlocks; ++b) {
    g_blocks[b] = malloc(kBlockBytes);
    if (g_blocks[b] == NULL) return 3;
    Fill(b, (uint64_t)b << 32);
  }
  uint64_t x = 88172645463325252ull;
  Churn(argv[2], &x);
  if (info) {
    InstallWithSigaction();
  } else {
    InstallWithSignal();
  }
  Sweep();
  Churn(argv[3], &x);
  /* A genuine fault of the program's own. */
  g_own_page = mmap(NULL, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (g_own_page == MAP_FAILED || mprotect(g_own_page, kPage, PROT_NONE) != 0) return 3;
  g_expect = 1;
  ((volatile char*)g_own_page)[10] = 5;
  g_expect = 0;
  if (g_caught != 1) Die("segv_chain: the program's own fault did not reach its handler once\n");
  if (info && g_addr != g_own_page + 10) Die("segv_chain: its handler saw another si_addr\n");
  if (g_own_page[10] != 5) Die("segv_chain: the faulting write was lost\n");
  for (int b = 0; b < kBlocks; ++b) {
    for (size_t i = 0; i < kBlockBytes / 8; ++i) {
      if (g_blocks[b][i] != g_seed[b] + i) Die("segv_chain: heap data lost\n");
    }
  }
  printf("ok\n");
  return 0;
}

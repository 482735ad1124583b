// A forked child that outlives its parent (fork_outlive.sh): the parent is SIGKILLed by its child
// right after fork(), and the child reads every block the parent had stored, most of it remote.
//
//   fork_outlive run LIB MIB LIMIT_MIB GO_FILE
//     The launcher (run without the preload library): a child subreaper, so that it reaps the
//     orphaned child too and reports both statuses. It runs itself as "parent" with
//     LD_PRELOAD=LIB and prints parent_signal (or parent_exit) and child_status.
//   fork_outlive parent MIB LIMIT_MIB GO_FILE
//     Stores MIB MiB in 4 KiB blocks (malloc'd one by one; the pointer table is on the heap
//     too), each filled with a pattern of its index; waits (bounded) until the DRAM limit has
//     pushed the data out (RSS at most LIMIT_MIB + 24 MiB); prints rss_before_kib; forks, and
//     waits to be killed. The child SIGKILLs it, waits (bounded) until it is reparented, reads
//     the first half of the blocks, prints child_half, waits (bounded) for GO_FILE to exist,
//     reads the rest, and prints child_blocks, child_bad and child_ms; then forks a grandchild
//     that checks every block again and prints grandchild_ok; exit 0 when all is well.
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rss_kib.h"

#define BLOCK 4096
#define WORDS (BLOCK / 8)

static uint64_t word(uint64_t block, size_t i) { return (block * 0x9E3779B97F4A7C15ull) ^ (i * 0x2545F4914F6CDD1Dull) ^ 1; }

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// Blocks [from, to) checked: the count that differ from their pattern.
static uint64_t check(uint64_t** blocks, size_t from, size_t to) {
  uint64_t bad = 0;
  for (size_t b = from; b < to; ++b) {
    const uint64_t* w = blocks[b];
    for (size_t i = 0; i < WORDS; ++i) {
      if (w[i] != word(b, i)) {
        ++bad;
        break;
      }
    }
  }
  return bad;
}

static int launcher(char** argv) {
  // argv: run LIB MIB LIMIT_MIB GO_FILE
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    perror("prctl(PR_SET_CHILD_SUBREAPER)");
    return 2;
  }
  fflush(stdout);
  const pid_t parent = fork();
  if (parent < 0) return 2;
  if (parent == 0) {
    setenv("LD_PRELOAD", argv[1], 1);
    char* args[] = {argv[-1], "parent", argv[2], argv[3], argv[4], NULL};
    execv("/proc/self/exe", args);
    perror("execv");
    _exit(127);
  }
  int reaped = 0, child_status = -1;
  for (;;) {
    int st = 0;
    const pid_t p = waitpid(-1, &st, 0);
    if (p < 0) break;  // ECHILD: both are gone
    ++reaped;
    if (p == parent) {
      if (WIFSIGNALED(st)) printf("parent_signal %d\n", WTERMSIG(st));
      else printf("parent_exit %d\n", WEXITSTATUS(st));
    } else {
      child_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
  }
  printf("child_status %d\nreaped %d\n", child_status, reaped);
  return 0;
}

static void child(uint64_t** blocks, size_t n, const char* go_file) {
  const pid_t parent = getppid();
  const double t0 = now_ms();
  if (kill(parent, SIGKILL) != 0) _exit(10);
  // The parent's end: this process is handed to the subreaper (bounded: 10 s).
  for (int i = 0; i < 10000 && getppid() == parent; ++i) usleep(1000);
  if (getppid() == parent) _exit(11);
  uint64_t bad = check(blocks, 0, n / 2);
  printf("child_half %llu\n", (unsigned long long)bad);
  fflush(stdout);
  for (int i = 0; i < 6000 && access(go_file, F_OK) != 0; ++i) usleep(10000);  // 60 s at most
  if (access(go_file, F_OK) != 0) _exit(12);
  bad += check(blocks, n / 2, n);
  printf("child_blocks %zu\nchild_bad %llu\nchild_ms %.0f\n", n, (unsigned long long)bad, now_ms() - t0);
  fflush(stdout);
  // A grandchild, forked while this child serves itself: it gets every block as plain memory.
  const pid_t g = fork();
  if (g < 0) _exit(13);
  if (g == 0) _exit(check(blocks, 0, n) == 0 ? 0 : 1);
  int gs = 0;
  const int g_ok = waitpid(g, &gs, 0) == g && WIFEXITED(gs) && WEXITSTATUS(gs) == 0;
  printf("grandchild_ok %d\n", g_ok);
  fflush(stdout);
  _exit(bad == 0 && g_ok ? 0 : 1);
}

static int parent(char** argv) {
  // argv: parent MIB LIMIT_MIB GO_FILE
  const size_t mib = (size_t)atol(argv[1]), limit = (size_t)atol(argv[2]);
  const size_t n = mib * ((1 << 20) / BLOCK);
  uint64_t** blocks = malloc(n * sizeof(*blocks));
  if (blocks == NULL) return 1;
  const double t0 = now_ms();
  for (size_t b = 0; b < n; ++b) {
    blocks[b] = malloc(BLOCK);
    if (blocks[b] == NULL) {
      printf("malloc failed at block %zu\n", b);
      return 1;
    }
    for (size_t i = 0; i < WORDS; ++i) blocks[b][i] = word(b, i);
  }
  // The policy evicts in the background: wait for it (at most 60 s).
  for (int i = 0; i < 1200 && rss_kib() > (long)(limit + 24) * 1024; ++i) usleep(50000);
  printf("blocks %zu\nfill_ms %.0f\nrss_before_kib %ld\n", n, now_ms() - t0, rss_kib());
  fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) child(blocks, n, argv[3]);
  sleep(120);  // the child kills this process long before
  printf("parent was not killed\n");
  return 3;
}

int main(int argc, char** argv) {
  if (argc == 6 && strcmp(argv[1], "run") == 0) return launcher(argv + 1);
  if (argc == 5 && strcmp(argv[1], "parent") == 0) return parent(argv + 1);
  fprintf(stderr, "usage: %s run LIB MIB LIMIT_MIB GO_FILE | parent MIB LIMIT_MIB GO_FILE\n", argv[0]);
  return 2;
}

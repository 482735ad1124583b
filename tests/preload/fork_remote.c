// fork() under the preload library with most of the data on the remote tier (fork_remote.sh).
// Stores MiB 1 MiB chunks of a per-page pattern, waits (bounded) until the DRAM limit has pushed
// the data out (RSS at most LIMIT_MIB + 24 MiB), then forks. The child checks every page against
// the fork-time pattern; meanwhile the parent writes one word into page after page and samples its
// RSS. Prints: rss_before_kib, rss_after_fork_kib, rss_max_kib, written_pages, child_rss_at_start_kib, child_bad (or
// "child failed"), parent_bad. Exit 0 when it ran (the script judges the numbers).
#define _GNU_SOURCE
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rss_kib.h"

#define PAGE 4096
#define CHUNK (1 << 20)
static const uint64_t kMark = 0xFEEDFACECAFEBEEFull;

static uint64_t word(uint64_t page, size_t i) { return (page * 0x9E3779B97F4A7C15ull) ^ i; }

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s MIB LIMIT_MIB\n", argv[0]);
    return 2;
  }
  const size_t mib = (size_t)atol(argv[1]), limit = (size_t)atol(argv[2]);
  const size_t per = CHUNK / PAGE, pages = mib * per;
  uint64_t** chunk = malloc(mib * sizeof(*chunk));
  for (size_t c = 0; c < mib; ++c) {
    chunk[c] = malloc(CHUNK);
    if (chunk[c] == NULL) {
      printf("malloc failed at chunk %zu\n", c);
      return 1;
    }
    for (size_t p = 0; p < per; ++p) {
      for (size_t i = 0; i < PAGE / 8; ++i) chunk[c][p * (PAGE / 8) + i] = word(c * per + p, i);
    }
  }
  // The policy evicts in the background: wait for it (at most 30 s).
  for (int i = 0; i < 600 && rss_kib() > (long)(limit + 24) * 1024; ++i) usleep(50000);
  const long before = rss_kib();
  int fds[2];
  if (pipe(fds) != 0) return 1;
  const pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    // The child's RSS first: what it was handed (fetch: every page, resident before the fork;
    // share: what was resident in the parent). The parent's own RSS after the fork can already
    // be down again in fetch mode (relief evicts what came back as soon as the fork is done).
    uint64_t msg[2] = {0, (uint64_t)rss_kib()};
    uint64_t bad = 0;
    for (size_t g = 0; g < pages; ++g) {
      const uint64_t* w = chunk[g / per] + (g % per) * (PAGE / 8);
      for (size_t i = 0; i < PAGE / 8; ++i) {
        if (w[i] != word(g, i)) {
          ++bad;
          break;
        }
      }
    }
    msg[0] = bad;
    _exit(write(fds[1], msg, sizeof(msg)) == sizeof(msg) ? 0 : 2);
  }
  const long after = rss_kib();
  long max = after;
  size_t written = 0;
  for (;;) {
    struct pollfd pf = {fds[0], POLLIN, 0};
    if (poll(&pf, 1, 0) > 0) break;
    for (int k = 0; k < 64 && written < pages; ++k, ++written) {
      chunk[written / per][(written % per) * (PAGE / 8)] = kMark;
    }
    const long r = rss_kib();
    if (r > max) max = r;
    if (written == pages) usleep(1000);
  }
  uint64_t msg[2] = {~0ull, 0};
  const int got = read(fds[0], msg, sizeof(msg)) == sizeof(msg);
  const uint64_t child_bad = msg[0];
  int status = 0;
  waitpid(pid, &status, 0);
  uint64_t parent_bad = 0;
  for (size_t g = 0; g < pages; ++g) {
    const uint64_t* w = chunk[g / per] + (g % per) * (PAGE / 8);
    int ok = w[0] == (g < written ? kMark : word(g, 0));
    for (size_t i = 1; i < PAGE / 8 && ok; ++i) ok = w[i] == word(g, i);
    parent_bad += ok ? 0 : 1;
  }
  printf("rss_before_kib %ld\nrss_after_fork_kib %ld\nrss_max_kib %ld\nwritten_pages %zu\nchild_rss_at_start_kib %llu\n",
         before, after, max, written, (unsigned long long)msg[1]);
  if (got && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    printf("child_bad %llu\n", (unsigned long long)child_bad);
  } else {
    printf("child failed (status %d)\n", status);
  }
  printf("parent_bad %llu\n", (unsigned long long)parent_bad);
  return 0;
}

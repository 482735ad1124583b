// swap_map PID [INTERVAL_MS]: where in a process's largest mapping the kernel's swap took pages
// from. Every interval, until the process ends, one line: the seconds since the start, the
// mapping's touched pages (present or swapped, from /proc/PID/pagemap) and how many of them are
// swapped out; the touched pages split at the widest gap between two of them (a program's buffer
// filled from both ends, as GNU sort's is: text from the bottom, line records from the top), and
// for each part its size and the share swapped out in each tenth of it, in percent (-1: none
// touched there). Reading another process's pagemap needs root (or the same user and
// CAP_SYS_ADMIN for the swap bits). Built and run by scripts/kernel-swap-map.sh.
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

enum { kBuckets = 10, kChunk = 1 << 16 };

static double Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

// The largest mapping of `pid`, in *lo and *hi; 0 when its maps cannot be read (it ended).
static int Largest(int pid, unsigned long* lo, unsigned long* hi) {
  char path[64], line[512];
  snprintf(path, sizeof path, "/proc/%d/maps", pid);
  FILE* f = fopen(path, "r");
  if (f == NULL) return 0;
  unsigned long a, b;
  *lo = *hi = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    if (sscanf(line, "%lx-%lx", &a, &b) == 2 && b - a > *hi - *lo) *lo = a, *hi = b;
  }
  fclose(f);
  return *hi > *lo;
}

// One part [from, to) of the page states: its touched pages, swapped ones, per tenth.
static void PrintPart(const char* name, const uint8_t* st, long from, long to) {
  long first = -1, last = -1, touched = 0, swapped = 0, cnt[kBuckets] = {0}, sw[kBuckets] = {0};
  for (long i = from; i < to; i++) {
    if (st[i] == 0) continue;
    if (first < 0) first = i;
    last = i + 1;
  }
  if (first < 0) return;
  for (long i = first; i < last; i++) {
    if (st[i] == 0) continue;
    const int k = (int)((i - first) * kBuckets / (last - first));
    cnt[k]++, sw[k] += st[i] == 2, touched++, swapped += st[i] == 2;
  }
  printf(" | %s %ld MiB, %ld swapped:", name, touched / 256, swapped / 256);
  for (int k = 0; k < kBuckets; k++) printf(" %ld", cnt[k] ? 100 * sw[k] / cnt[k] : -1);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: swap_map PID [INTERVAL_MS]\n");
    return 2;
  }
  const int pid = atoi(argv[1]);
  const int interval_ms = argc > 2 ? atoi(argv[2]) : 300;
  static uint64_t buf[kChunk];
  const double t0 = Now();
  unsigned long lo, hi;
  while (Largest(pid, &lo, &hi)) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/pagemap", pid);
    const int fd = open(path, O_RDONLY);
    if (fd < 0) break;
    const long n = (long)((hi - lo) / 4096);
    uint8_t* st = calloc((size_t)n, 1);  // 0 untouched, 1 present, 2 swapped
    if (st == NULL) return 1;
    long touched = 0, swapped = 0, first = -1, gap = 0, gap_at = 0, prev = -1;
    for (long off = 0; off < n; off += kChunk) {
      const long m = n - off < kChunk ? n - off : kChunk;
      if (pread(fd, buf, (size_t)m * 8, (off_t)((lo / 4096 + (unsigned long)off) * 8)) <= 0) break;
      for (long i = 0; i < m; i++) {
        const int present = (int)(buf[i] >> 63 & 1), swap = (int)(buf[i] >> 62 & 1);
        if (!present && !swap) continue;
        const long at = off + i;
        st[at] = (uint8_t)(1 + swap);
        touched++, swapped += swap;
        if (first < 0) first = at;
        if (prev >= 0 && at - prev > gap) gap = at - prev, gap_at = prev + 1;
        prev = at;
      }
    }
    close(fd);
    if (touched > 0) {
      printf("%.1fs touched %ld MiB, swapped %ld MiB", Now() - t0, touched / 256, swapped / 256);
      if (gap > 1) {
        PrintPart("low", st, first, gap_at);
        PrintPart("high", st, gap_at, prev + 1);
      } else {
        PrintPart("all", st, first, prev + 1);
      }
      printf("\n");
      fflush(stdout);
    }
    free(st);
    usleep((useconds_t)interval_ms * 1000);
  }
  return 0;
}

/* A program built against jemalloc (as Debian's redis is), run under libtiermem-preload.so: its
 * calls to jemalloc's own API (mallctl, nallocx, sallocx, malloc_stats_print, mallocx and friends)
 * must be answered by tiermem, about tiermem's heap. Before the preload library exported them they
 * reached libjemalloc, whose stats.allocated stayed near zero while tiermem's heap held the data.
 * Prints nothing on success; exits non-zero on a failure. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jemalloc/jemalloc.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "FAILED: %s (line %d)\n", #c, __LINE__); return 1; } } while (0)

/* malloc_stats_print's output, collected without allocating. */
static char report[8192];
static size_t report_len;
static void Collect(void* opaque, const char* s) {
  (void)opaque;
  size_t n = strlen(s);
  if (n > sizeof(report) - 1 - report_len) n = sizeof(report) - 1 - report_len;
  memcpy(report + report_len, s, n);
  report_len += n;
  report[report_len] = '\0';
}

static int Refresh(void) {
  uint64_t epoch = 1;
  size_t len = sizeof(epoch);
  return mallctl("epoch", &epoch, &len, &epoch, len);
}
static size_t Stat(const char* name) {
  size_t v = 0, len = sizeof(v);
  if (mallctl(name, &v, &len, NULL, 0) != 0) {
    fprintf(stderr, "FAILED: mallctl(\"%s\")\n", name);
    exit(1);
  }
  return v;
}

/* stats.allocated grows by what is kept live and falls back once it is freed. */
static int CheckAllocated(void) {
  enum { kSmall = 20000, kSmallSize = 100, kLarge = 32, kLargeSize = 1 << 20 };
  static void* small[kSmall];
  static void* large[kLarge];
  const size_t want = (size_t)kSmall * kSmallSize + (size_t)kLarge * kLargeSize;
  CHECK(Refresh() == 0);
  const size_t before = Stat("stats.allocated");
  for (int i = 0; i < kSmall; ++i) CHECK((small[i] = malloc(kSmallSize)) != NULL);
  for (int i = 0; i < kLarge; ++i) CHECK((large[i] = malloc(kLargeSize)) != NULL);
  CHECK(Stat("stats.allocated") == before);  /* the snapshot changes only with the epoch */
  CHECK(Refresh() == 0);
  const size_t live = Stat("stats.allocated");
  fprintf(stderr, "stats.allocated: %zu before, %zu with %zu bytes live\n", before, live, want);
  CHECK(live >= before + want);
  CHECK(Stat("stats.active") >= live);
  CHECK(Stat("stats.resident") >= Stat("stats.active"));
  CHECK(Stat("stats.mapped") >= Stat("stats.active"));
  for (int i = 0; i < kSmall; ++i) free(small[i]);
  for (int i = 0; i < kLarge; ++i) free(large[i]);
  CHECK(Refresh() == 0);
  const size_t after = Stat("stats.allocated");
  fprintf(stderr, "stats.allocated: %zu after free\n", after);
  CHECK(after <= before + (1 << 20));
  return 0;
}

/* jemalloc's error conventions. */
static int CheckErrors(void) {
  size_t v = 0, len = sizeof(v);
  CHECK(mallctl("stats.arenas.0.pactive", &v, &len, NULL, 0) == ENOENT);
  CHECK(mallctl("stats", &v, &len, NULL, 0) == ENOENT);
  CHECK(mallctl("no.such.name", NULL, NULL, NULL, 0) == ENOENT);
  len = 4;
  CHECK(mallctl("stats.allocated", &v, &len, NULL, 0) == EINVAL && len == 4);
  len = sizeof(v);
  CHECK(mallctl("stats.allocated", NULL, NULL, &v, sizeof(v)) == EPERM);
  uint64_t e = 0;
  CHECK(mallctl("epoch", NULL, NULL, &e, 4) == EINVAL);
  uint64_t e1 = 0, e2 = 0;
  size_t elen = sizeof(e1);
  CHECK(mallctl("epoch", &e1, &elen, NULL, 0) == 0);
  CHECK(mallctl("epoch", &e2, &elen, &e1, sizeof(e1)) == 0 && e2 == e1 + 1);
  _Bool stats = 0;
  size_t blen = sizeof(stats);
  CHECK(mallctl("config.stats", &stats, &blen, NULL, 0) == 0 && stats);
  CHECK(Stat("arenas.page") == (size_t)sysconf(_SC_PAGESIZE));
  size_t mib[4], miblen = 4;
  CHECK(mallctlnametomib("stats.allocated", mib, &miblen) == 0);
  CHECK(mallctlbymib(mib, miblen, &v, &len, NULL, 0) == 0 && v == Stat("stats.allocated"));
  return 0;
}

/* nallocx and sallocx agree with malloc_usable_size; the *allocx family honours its flags. */
static int CheckSizes(void) {
  for (size_t n = 0; n <= 140000; n += n < 2048 ? 1 : 997) {
    void* p = malloc(n);
    CHECK(p != NULL);
    CHECK(nallocx(n, 0) == malloc_usable_size(p));
    CHECK(sallocx(p, 0) == malloc_usable_size(p));
    free(p);
  }
  CHECK(nallocx(100, 0) == 112);
  CHECK(nallocx(SIZE_MAX / 2, 0) == 0);
  for (int lg = 5; lg <= 22; ++lg) {
    const size_t align = (size_t)1 << lg;
    unsigned char* p = mallocx(3000, MALLOCX_ALIGN(align) | MALLOCX_ZERO);
    CHECK(p != NULL && ((uintptr_t)p % align) == 0);
    for (int i = 0; i < 3000; ++i) CHECK(p[i] == 0);
    CHECK(sallocx(p, 0) >= 3000 && nallocx(3000, MALLOCX_LG_ALIGN(lg)) <= sallocx(p, 0));
    memset(p, 0xab, 3000);
    const size_t old = sallocx(p, 0);
    p = rallocx(p, old + 5000, MALLOCX_ALIGN(align) | MALLOCX_ZERO);
    CHECK(p != NULL && ((uintptr_t)p % align) == 0);
    CHECK(p[0] == 0xab && p[2999] == 0xab && p[old] == 0 && p[old + 4999] == 0);
    CHECK(xallocx(p, 10, 0, 0) == sallocx(p, 0));
    if (lg % 2) dallocx(p, 0); else sdallocx(p, old + 5000, 0);
  }
  return 0;
}

/* Refreshes and malloc_stats_print while other threads allocate and free, and in a child forked
 * meanwhile: the heap's locks and the snapshot never deadlock. */
static volatile int stop_churn;
static void* Churn(void* arg) {
  void* slot[256] = {0};
  unsigned x = (unsigned)(uintptr_t)arg * 2654435761u + 1;
  while (!stop_churn) {
    x = x * 1103515245u + 12345u;
    const unsigned i = (x >> 8) % 256;
    free(slot[i]);
    slot[i] = malloc((x >> 16) % 3000 + 1);
  }
  for (int i = 0; i < 256; ++i) free(slot[i]);
  return NULL;
}
static void Discard(void* opaque, const char* s) { (void)opaque; (void)s; }
static int CheckConcurrent(void) {
  pthread_t t[4];
  for (int i = 0; i < 4; ++i) CHECK(pthread_create(&t[i], NULL, Churn, (void*)(uintptr_t)i) == 0);
  for (int round = 0; round < 2000; ++round) {
    CHECK(Refresh() == 0);
    (void)Stat("stats.allocated");
    if (round % 100 == 0) malloc_stats_print(Discard, NULL, NULL);
    if (round == 1000) {
      const pid_t child = fork();
      CHECK(child >= 0);
      if (child == 0) {
        void* p = malloc(100);
        _exit(Refresh() == 0 && Stat("stats.allocated") >= 112 && p != NULL ? 0 : 1);
      }
      int status = 0;
      CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
  }
  stop_churn = 1;
  for (int i = 0; i < 4; ++i) CHECK(pthread_join(t[i], NULL) == 0);
  return 0;
}

int main(void) {
  malloc_stats_print(Collect, NULL, NULL);
  if (strstr(report, "tiermem statistics") == NULL) {
    fprintf(stderr, "FAILED: malloc_stats_print is not tiermem's (not under libtiermem-preload.so?):\n%.400s\n",
            report);
    return 1;
  }
  CHECK(strstr(report, "Allocated: ") != NULL && strstr(report, "Tier dram") != NULL);
  if (CheckErrors() != 0 || CheckSizes() != 0 || CheckAllocated() != 0) return 1;
  if (CheckConcurrent() != 0) return 1;
  return 0;
}

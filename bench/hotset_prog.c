/* tiermem-hotset-prog: the program `tiermem-bench preload-hotset` runs under each setup (plain,
 * the preload library, a memory cgroup with swap). Plain C on libc alone: it knows nothing of
 * tiermem (bench/splitmix.h is its only include of the project), so whatever places its memory
 * does so from outside.
 *
 *   tiermem-hotset-prog [--size BYTES] [--seconds S] [--updates N] [--reads PCT] [--seed N]
 *                       [--stop-at-phases]
 *
 * One array of --size bytes (malloc, 8-byte words) is filled once with a pattern, then updated:
 * each update adds a random number to one random word, 90% of them in a hot window of 10% of
 * the array, the other 10% anywhere in the cold rest (uniformly). The hot window sits at 30% of
 * the array in phase 1 and moves to 70% for phase 2 (neither in the first 20%, where a
 * placement that keeps the first pages it saw in DRAM would win by accident). Each phase runs
 * for half of --seconds or half of --updates, whichever ends first (--updates 0: no count bound).
 * --reads PCT (0-100, default 0): that share of the updates only read their word (summed into
 * "read_sum" of the output, so the reads are not optimized away) instead of adding to it: with
 * 100 the array is written once by the fill and only read after, a read-only hot set.
 *
 * Verification: two checksums of the whole array (the plain sum of the words, and the sum
 * weighted by 2i+1) are kept up to date with every update, and recomputed from the array at the
 * end. A page that came back as zeros, or as an older copy, changes both.
 *
 * --stop-at-phases: the process stops itself (SIGSTOP) after the fill, halfway through each
 * phase, at the phase boundary and after phase 2, before the verification (five stops), so that
 * a parent reads its fault counters at exactly those points (waitpid WUNTRACED, then SIGCONT);
 * the second half of a phase is its steady state, after the window's fetch. The time stopped
 * halfway does not count in the phase. Without a parent that continues it, it would wait
 * forever: only the bench passes it.
 *
 * Output: one JSON line on stdout, e.g.
 *   {"array_bytes":..,"start_rss_bytes":..,"peak_rss_bytes":..,"fill_s":..,"updates":[a,b],
 *    "seconds":[a,b],"half_updates":[a,b],"major_faults":[a,b],"verify_s":..,"verified":true}
 * (half_updates: the updates of each phase's first half.)
 * Exit status 0 when verified, 1 when the array does not match its checksums, 2 on bad usage
 * or when the array cannot be allocated. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "bench/splitmix.h"

static double Now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* "64M", "1G", "4096": bytes; 0 on junk. */
static uint64_t ParseSize(const char* s) {
  char* end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s) return 0;
  switch (*end) {
    case 'k': case 'K': v <<= 10; ++end; break;
    case 'm': case 'M': v <<= 20; ++end; break;
    case 'g': case 'G': v <<= 30; ++end; break;
    default: break;
  }
  return *end == 0 ? (uint64_t)v : 0;
}

/* A field "Name:   N kB" of /proc/self/status, in bytes; 0 when absent. */
static uint64_t StatusBytes(const char* name) {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  uint64_t v = 0;
  size_t n = strlen(name);
  if (f == NULL) return 0;
  while (fgets(line, sizeof(line), f) != NULL) {
    if (strncmp(line, name, n) == 0 && line[n] == ':') {
      v = (uint64_t)strtoull(line + n + 1, NULL, 10) * 1024;
      break;
    }
  }
  fclose(f);
  return v;
}

static long MajorFaults(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_majflt;
}

static void Usage(void) {
  fprintf(stderr, "usage: tiermem-hotset-prog [--size BYTES] [--seconds S] [--updates N] [--reads PCT] "
                  "[--seed N] [--stop-at-phases]\n");
}

int main(int argc, char** argv) {
  uint64_t bytes = 1ull << 30, max_updates = 0, seed = 1, reads = 0;
  double seconds = 20;
  int stop = 0;
  for (int i = 1; i < argc; ++i) {
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(argv[i], "--stop-at-phases") == 0) {
      stop = 1;
    } else if (v != NULL && strcmp(argv[i], "--size") == 0) {
      bytes = ParseSize(v), ++i;
    } else if (v != NULL && strcmp(argv[i], "--seconds") == 0) {
      seconds = strtod(v, NULL), ++i;
    } else if (v != NULL && strcmp(argv[i], "--updates") == 0) {
      max_updates = strtoull(v, NULL, 10), ++i;
    } else if (v != NULL && strcmp(argv[i], "--reads") == 0) {
      char* end = NULL;
      reads = strtoull(v, &end, 10), ++i;
      if (end == v || *end != 0 || reads > 100) {
        fprintf(stderr, "tiermem-hotset-prog: --reads takes a percentage 0-100, got '%s'\n", v);
        return 2;
      }
    } else if (v != NULL && strcmp(argv[i], "--seed") == 0) {
      seed = strtoull(v, NULL, 10), ++i;
    } else {
      Usage();
      return 2;
    }
  }
  /* At least 10 pages in each tenth of the array; the duration bounds every loop. */
  if (bytes < (1u << 20) || !(seconds > 0 && seconds <= 86400)) {
    Usage();
    return 2;
  }
  const uint64_t start_rss = StatusBytes("VmRSS");
  const uint64_t words = bytes / 8, tenth = words / 10;
  const uint64_t hot_words = tenth, cold_words = words - hot_words;
  uint64_t* a = malloc(words * 8);
  if (a == NULL) {
    fprintf(stderr, "tiermem-hotset-prog: cannot allocate %llu bytes\n", (unsigned long long)bytes);
    return 2;
  }
  uint64_t sum = 0, wsum = 0; /* sum of a[i], and of a[i] * (2i + 1), mod 2^64 */
  uint64_t read_sum = 0;      /* of the words the reads read */
  double t = Now();
  for (uint64_t i = 0; i < words; ++i) {
    a[i] = SplitMix64(i ^ seed);
    sum += a[i];
    wsum += a[i] * (2 * i + 1);
  }
  const double fill_s = Now() - t;

  uint64_t updates[2] = {0, 0}, half[2] = {0, 0};
  double secs[2] = {0, 0};
  long majflt[2] = {0, 0};
  const uint64_t hot_start[2] = {3 * tenth, 7 * tenth};
  uint64_t rng = seed * 0x2545f4914f6cdd1dull;
  for (int phase = 0; phase < 2; ++phase) {
    if (stop) raise(SIGSTOP);
    const long f0 = MajorFaults();
    double t0 = Now(), deadline = t0 + seconds / 2, stopped = 0;
    const uint64_t limit = max_updates > 0 ? (max_updates + 1 - (uint64_t)phase) / 2 : UINT64_MAX;
    const uint64_t h0 = hot_start[phase];
    uint64_t n = 0;
    int halfway = 0;
    while (n < limit) {
      if (!halfway && (Now() >= t0 + seconds / 4 + stopped || n >= limit / 2)) {
        /* Halfway (by time, or by count when the count bound comes first). */
        halfway = 1;
        half[phase] = n;
        if (stop) {
          const double s0 = Now();
          raise(SIGSTOP);
          stopped = Now() - s0;
          deadline += stopped;
        }
      }
      /* 1024 updates between looks at the clock (a few us when everything is in DRAM). */
      for (int k = 0; k < 1024 && n < limit; ++k, ++n) {
        const uint64_t r = SplitMix64Next(&rng);
        uint64_t i;
        if (r % 10 != 0) {
          i = h0 + (r >> 8) % hot_words;
        } else {
          i = (r >> 8) % cold_words; /* the cold words: all but the hot window */
          if (i >= h0) i += hot_words;
        }
        /* The high half of r picks a read; the index is r >> 8 modulo a window, nearly independent. */
        if ((r >> 32) % 100 < reads) {
          read_sum += a[i];
          continue;
        }
        const uint64_t d = r | 1;
        a[i] += d;
        sum += d;
        wsum += d * (2 * i + 1);
      }
      if (Now() >= deadline) break;
    }
    if (!halfway) {
      /* The phase ended before its middle was seen: one batch of updates outlasted the rest of
         the phase (a busy machine took the CPU). Its halfway stop still comes, so whoever waits
         for the stops sees them all. */
      half[phase] = n;
      if (stop) {
        const double s0 = Now();
        raise(SIGSTOP);
        stopped += Now() - s0;
      }
    }
    secs[phase] = Now() - t0 - stopped;
    updates[phase] = n;
    majflt[phase] = MajorFaults() - f0;
  }
  if (stop) raise(SIGSTOP);

  t = Now();
  uint64_t check = 0, wcheck = 0;
  for (uint64_t i = 0; i < words; ++i) {
    check += a[i];
    wcheck += a[i] * (2 * i + 1);
  }
  const double verify_s = Now() - t;
  const int verified = check == sum && wcheck == wsum;
  printf("{\"array_bytes\":%llu,\"start_rss_bytes\":%llu,\"peak_rss_bytes\":%llu,\"fill_s\":%.3f,"
         "\"updates\":[%llu,%llu],\"seconds\":[%.3f,%.3f],\"half_updates\":[%llu,%llu],\"major_faults\":[%ld,%ld],"
         "\"verify_s\":%.3f,\"read_sum\":%llu,\"verified\":%s}\n",
         (unsigned long long)(words * 8), (unsigned long long)start_rss,
         (unsigned long long)StatusBytes("VmHWM"), fill_s, (unsigned long long)updates[0],
         (unsigned long long)updates[1], secs[0], secs[1], (unsigned long long)half[0], (unsigned long long)half[1],
         majflt[0], majflt[1], verify_s, (unsigned long long)read_sum,
         verified ? "true" : "false");
  free(a);
  if (!verified) {
    fprintf(stderr, "tiermem-hotset-prog: the array does not match its checksums: data lost\n");
    return 1;
  }
  return 0;
}

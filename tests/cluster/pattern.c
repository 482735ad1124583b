// pattern MIB [READY GO [THREADS]]: stores MIB MiB of patterned words in 1 MiB chunks (malloc),
// then reads every word back and checks it. Under the preload library with a DRAM limit below MIB
// most of it lives on the memory servers. With READY and GO, it creates the file READY once
// everything is written and waits (at most 600 s, a bound on a test that died: the test's own
// timeout ends it first) for the file GO before reading back: the test
// inspects or breaks the servers in between. With THREADS (1-64), that many threads read back at
// once, each its share of the 4 KiB pages in one random order (a fault per page, at random), and
// the file GO.reading is created once a tenth of the pages are read: the read-back is under way.
// Prints "stored N MiB" and "verified N bytes, B bad words"; exits 0 when B is 0, 1 when not,
// 2 on bad arguments or a failed malloc, 3 when GO never appears.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

static uint64_t Word(uint64_t chunk, uint64_t i) {
  return ((chunk << 32) | i) * 0x9E3779B97F4A7C15ull ^ 0x5bd1e9955bd1e995ull;
}

enum { kPageWords = 4096 / sizeof(uint64_t), kChunkPages = 256 };

struct Reader {
  uint64_t** chunks;
  const uint32_t* order;  // page numbers (chunk * 256 + page in chunk), in the order read
  size_t pages, first, step;
  uint64_t bad;
};

static const char* g_reading_file;  // created once a tenth of the pages are read (NULL: none)
static size_t g_pages_read;

static void* ReadShare(void* arg) {
  struct Reader* r = arg;
  for (size_t k = r->first; k < r->pages; k += r->step) {
    const uint64_t c = r->order[k] / kChunkPages, p = r->order[k] % kChunkPages;
    const uint64_t* w = r->chunks[c] + p * kPageWords;
    for (size_t i = 0; i < kPageWords; ++i) r->bad += w[i] != Word(c, p * kPageWords + i);
    if (__atomic_add_fetch(&g_pages_read, 1, __ATOMIC_RELAXED) == r->pages / 10 && g_reading_file != NULL) {
      FILE* f = fopen(g_reading_file, "w");
      if (f != NULL) fclose(f);
    }
  }
  return NULL;
}

// The read-back by `threads` threads over the pages in a random order (fixed seed).
static uint64_t ReadBackAtRandom(uint64_t** chunks, long mib, int threads) {
  const size_t pages = (size_t)mib * kChunkPages;
  uint32_t* order = malloc(sizeof(uint32_t) * pages);
  struct Reader* readers = malloc(sizeof(struct Reader) * (size_t)threads);
  pthread_t* tids = malloc(sizeof(pthread_t) * (size_t)threads);
  if (order == NULL || readers == NULL || tids == NULL) exit(2);
  for (size_t k = 0; k < pages; ++k) order[k] = (uint32_t)k;
  uint64_t x = 42;
  for (size_t k = pages - 1; k > 0; --k) {  // Fisher-Yates with a 64-bit LCG
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const size_t j = (size_t)((x >> 33) % (k + 1));
    const uint32_t t = order[k];
    order[k] = order[j];
    order[j] = t;
  }
  for (int t = 0; t < threads; ++t) {
    readers[t] = (struct Reader){chunks, order, pages, (size_t)t, (size_t)threads, 0};
    if (pthread_create(&tids[t], NULL, ReadShare, &readers[t]) != 0) exit(2);
  }
  uint64_t bad = 0;
  for (int t = 0; t < threads; ++t) {
    pthread_join(tids[t], NULL);
    bad += readers[t].bad;
  }
  free(tids);
  free(readers);
  free(order);
  return bad;
}

int main(int argc, char** argv) {
  if (argc != 2 && argc != 4 && argc != 5) {
    fprintf(stderr, "usage: pattern MIB [READY GO [THREADS]]\n");
    return 2;
  }
  const long mib = atol(argv[1]);
  if (mib <= 0 || mib > 4096) return 2;
  const int threads = argc == 5 ? atoi(argv[4]) : 0;
  if (argc == 5 && (threads < 1 || threads > 64)) return 2;
  const size_t words = (1u << 20) / sizeof(uint64_t);
  uint64_t** chunks = malloc(sizeof(uint64_t*) * (size_t)mib);
  if (chunks == NULL) return 2;
  for (long c = 0; c < mib; ++c) {
    chunks[c] = malloc(1u << 20);
    if (chunks[c] == NULL) {
      fprintf(stderr, "malloc failed at chunk %ld\n", c);
      return 2;
    }
    for (size_t i = 0; i < words; ++i) chunks[c][i] = Word((uint64_t)c, i);
  }
  printf("stored %ld MiB\n", mib);
  fflush(stdout);
  if (argc >= 4) {
    FILE* f = fopen(argv[2], "w");
    if (f == NULL) return 2;
    fclose(f);
    struct stat st;
    int waited_ms = 0;
    while (stat(argv[3], &st) != 0) {
      if (waited_ms >= 600000) {
        fprintf(stderr, "pattern: %s did not appear within 600 s\n", argv[3]);
        return 3;
      }
      struct timespec ts = {0, 10 * 1000 * 1000};
      nanosleep(&ts, NULL);
      waited_ms += 10;
    }
  }
  uint64_t bad = 0;
  if (threads > 0) {
    char reading[4096];
    if (argc >= 4 && snprintf(reading, sizeof(reading), "%s.reading", argv[3]) < (int)sizeof(reading)) {
      g_reading_file = reading;
    }
    bad = ReadBackAtRandom(chunks, mib, threads);
  } else {
    for (long c = 0; c < mib; ++c) {
      for (size_t i = 0; i < words; ++i) bad += chunks[c][i] != Word((uint64_t)c, i);
    }
  }
  printf("verified %ld bytes, %llu bad words\n", mib << 20, (unsigned long long)bad);
  return bad == 0 ? 0 : 1;
}

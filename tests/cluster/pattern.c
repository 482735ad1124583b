// pattern MIB [READY GO]: stores MIB MiB of patterned words in 1 MiB chunks (malloc), then reads
// every word back and checks it. Under the preload library with a DRAM limit below MIB most of it
// lives on the memory servers. With READY and GO, it creates the file READY once everything is
// written and waits (at most 30 s) for the file GO before reading back: the test inspects or
// breaks the servers in between.
// Prints "stored N MiB" and "verified N bytes, B bad words"; exits 0 when B is 0, 1 when not,
// 2 on bad arguments or a failed malloc, 3 when GO never appears.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

static uint64_t Word(uint64_t chunk, uint64_t i) {
  return ((chunk << 32) | i) * 0x9E3779B97F4A7C15ull ^ 0x5bd1e9955bd1e995ull;
}

int main(int argc, char** argv) {
  if (argc != 2 && argc != 4) {
    fprintf(stderr, "usage: pattern MIB [READY GO]\n");
    return 2;
  }
  const long mib = atol(argv[1]);
  if (mib <= 0 || mib > 4096) return 2;
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
  if (argc == 4) {
    FILE* f = fopen(argv[2], "w");
    if (f == NULL) return 2;
    fclose(f);
    struct stat st;
    int waited_ms = 0;
    while (stat(argv[3], &st) != 0) {
      if (waited_ms >= 30000) {
        fprintf(stderr, "pattern: %s did not appear within 30 s\n", argv[3]);
        return 3;
      }
      struct timespec ts = {0, 10 * 1000 * 1000};
      nanosleep(&ts, NULL);
      waited_ms += 10;
    }
  }
  uint64_t bad = 0;
  for (long c = 0; c < mib; ++c) {
    for (size_t i = 0; i < words; ++i) bad += chunks[c][i] != Word((uint64_t)c, i);
  }
  printf("verified %ld bytes, %llu bad words\n", mib << 20, (unsigned long long)bad);
  return bad == 0 ? 0 : 1;
}

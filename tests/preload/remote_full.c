// remote_full MIB [CHUNK_KIB]: a preloaded program that stores MIB MiB in malloc'd chunks
// (CHUNK_KIB each, 1024 by default), each page with its own pattern, until malloc says no; then
// reads every stored chunk back. Prints "main" first (so a test sees whether main ran at all),
// then "stored N of M chunks" and, when malloc failed, "malloc: NULL errno=ENOMEM" (or the
// errno's number). Exit 0 when every stored byte reads back as written, 1 otherwise.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t Word(uint64_t chunk, uint64_t i) { return (chunk * 0x9E3779B97F4A7C15ull) ^ (i * 0x2545F4914F6CDD1Dull); }

int main(int argc, char** argv) {
  printf("main\n");
  fflush(stdout);
  if (argc < 2) return 2;
  const uint64_t mib = strtoull(argv[1], NULL, 10);
  const uint64_t chunk_bytes = (argc > 2 ? strtoull(argv[2], NULL, 10) : 1024) << 10;
  const uint64_t n = (mib << 20) / chunk_bytes;
  uint64_t** chunks = calloc(n, sizeof(*chunks));
  if (chunks == NULL) return 2;
  uint64_t stored = 0;
  int err = 0;
  for (; stored < n; ++stored) {
    errno = 0;
    uint64_t* p = malloc(chunk_bytes);
    if (p == NULL) {
      err = errno;
      break;
    }
    for (uint64_t i = 0; i < chunk_bytes / 8; ++i) p[i] = Word(stored, i);
    chunks[stored] = p;
  }
  printf("stored %llu of %llu chunks\n", (unsigned long long)stored, (unsigned long long)n);
  if (stored < n) printf("malloc: NULL errno=%s\n", err == ENOMEM ? "ENOMEM" : strerror(err));
  uint64_t bad = 0;
  for (uint64_t c = 0; c < stored; ++c) {
    for (uint64_t i = 0; i < chunk_bytes / 8; ++i) bad += chunks[c][i] != Word(c, i);
  }
  printf("%llu bad words\n", (unsigned long long)bad);
  return bad == 0 ? 0 : 1;
}

/* A program to watch: run under the preload library, it allocates and touches MiB megabytes in
 * blocks of 1 MiB, writes "ready BYTES" to READY_FILE (what it allocated), waits until DONE_FILE
 * exists (at most two minutes), then checks every block and exits 0 (1 on a bad byte).
 *   stats_target MiB READY_FILE DONE_FILE */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  size_t mib = (size_t)atol(argv[1]);
  char** blocks = malloc(mib * sizeof(char*));
  if (blocks == NULL) return 3;
  for (size_t i = 0; i < mib; ++i) {
    blocks[i] = malloc(1 << 20);
    if (blocks[i] == NULL) return 3;
    memset(blocks[i], (int)(i % 251) + 1, 1 << 20);
  }
  char tmp[4096];
  snprintf(tmp, sizeof(tmp), "%s.tmp", argv[2]);
  FILE* f = fopen(tmp, "w");
  if (f == NULL) return 4;
  fprintf(f, "ready %zu\n", mib << 20);
  fclose(f);
  rename(tmp, argv[2]);
  for (int i = 0; i < 12000 && access(argv[3], F_OK) != 0; ++i) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  for (size_t i = 0; i < mib; ++i) {
    for (size_t j = 0; j < (1 << 20); j += 4096) {
      if (blocks[i][j] != (char)((i % 251) + 1)) {
        fprintf(stderr, "stats_target: block %zu byte %zu is wrong\n", i, j);
        return 1;
      }
    }
    free(blocks[i]);
  }
  free(blocks);
  return 0;
}

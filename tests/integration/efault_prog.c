/* A program that passes heap buffers to the kernel, as a server does: MiB megabytes are allocated
 * and written once, then CALLS read(2)s of 8 bytes from /dev/zero land at random places in them.
 * A read(2) into a page the runtime's protection sampler has armed fails with EFAULT (a system
 * call does not fault): the program then says so on stderr and aborts (SIGABRT), as redis-server
 * does when epoll_wait(2) fails so. Exits 0 when every read(2) succeeded.
 * With MARKER, under protection sampling (TIERMEM_SAMPLE_MODE=protect, the record's) it forks a
 * child, writes the child's pid to MARKER and waits with it for a signal, before any heap use:
 * a record that never ends, as a script polling for a server that died.
 *   efault_prog MiB CALLS [MARKER] */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void WaitUnderProtect(const char* marker) {
  const char* mode = getenv("TIERMEM_SAMPLE_MODE");
  if (mode == NULL || strcmp(mode, "protect") != 0) return;
  const pid_t child = fork();
  if (child == 0) {
    for (;;) pause();
  }
  char line[32]; /* on the stack: nothing the sampler protects */
  const int n = snprintf(line, sizeof(line), "%d\n", (int)child);
  const int fd = open(marker, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (child < 0 || fd < 0 || write(fd, line, (size_t)n) != n) _exit(4);
  close(fd);
  for (;;) pause();
}

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    fprintf(stderr, "usage: efault_prog MiB CALLS [MARKER]\n");
    return 2;
  }
  if (argc == 4) WaitUnderProtect(argv[3]);
  const size_t pages = (size_t)atol(argv[1]) * 256, calls = (size_t)atol(argv[2]);
  char* mem = malloc(pages * 4096);
  const int fd = open("/dev/zero", O_RDONLY);
  if (mem == NULL || pages == 0 || fd < 0) return 3;
  for (size_t i = 0; i < pages * 4096; i += 64) mem[i] = (char)(i >> 6);
  uint64_t x = 88172645463325252ull, sum = 0;
  for (size_t c = 0; c < calls; ++c) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
    char* at = mem + ((x >> 8) % pages) * 4096 + (x >> 40) % 4088;
    if (read(fd, at, 8) != 8) {
      fprintf(stderr, "efault_prog: read(2) into the heap at %p: %s\n", (void*)at, strerror(errno));
      abort();
    }
    sum += (uint8_t)mem[((x >> 20) % pages) * 4096];
  }
  printf("%llu\n", (unsigned long long)sum);
  free(mem);
  close(fd);
  return 0;
}

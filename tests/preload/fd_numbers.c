// A program that closes its descriptors twice, as bash does after every pipeline, while the
// runtime's threads work (a heap three times the DRAM limit: evictions, faults, sampling rounds,
// the resident count) and children are forked and served. Asserts what the runtime owes such a
// program (base/os_fd.cc):
//   - no descriptor of the runtime's sits among the low numbers the program hands out and reuses
//     (below 64, with RLIMIT_NOFILE at least 256): checked at each round against /proc/self/fd;
//   - every byte a child writes into a pipe reaches the parent, and no read of the program's fails:
//     a runtime descriptor that took a number between the two closes would have been closed by
//     the second one, and the runtime's next read or close would have hit the program's next pipe.
// Prints deterministic totals; exits 1 at the first failure.
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

enum { kRounds = 300, kLow = 64, kHeapMiB = 48, kBlock = 64 << 10 };

static int own[kLow];  // the program's own descriptors below kLow right now

static int CheckLowNumbers(int round) {
  DIR* d = opendir("/proc/self/fd");
  if (d == NULL) {
    perror("opendir /proc/self/fd");
    return 1;
  }
  const int dirfd_low = dirfd(d);
  int bad = 0;
  for (struct dirent* e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    const int fd = atoi(e->d_name);
    if (fd < 3 || fd >= kLow || fd == dirfd_low || own[fd]) continue;
    char path[64], target[256];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    const ssize_t n = readlink(path, target, sizeof(target) - 1);
    target[n > 0 ? n : 0] = '\0';
    fprintf(stderr, "round %d: descriptor %d (%s) is not the program's\n", round, fd, target);
    bad = 1;
  }
  closedir(d);
  return bad;
}

// Descriptors inherited from whoever started the program (a test runner's log, a shell's saved
// ones) are closed, and the program runs again: after the exec, the numbers below kLow are the
// program's and the runtime's only.
static int CloseInheritedAndRerun(char* self) {
  int fds[kLow], n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (d == NULL) {
    perror("opendir /proc/self/fd");
    return 1;
  }
  for (struct dirent* e; (e = readdir(d)) != NULL;) {
    const int fd = atoi(e->d_name);
    if (e->d_name[0] != '.' && fd >= 3 && fd < kLow && fd != dirfd(d)) fds[n++] = fd;
  }
  closedir(d);
  for (int i = 0; i < n; ++i) close(fds[i]);
  char* args[] = {self, "--clean", NULL};
  execv("/proc/self/exe", args);
  perror("execv /proc/self/exe");
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 2 || strcmp(argv[1], "--clean") != 0) return CloseInheritedAndRerun(argv[0]);
  struct rlimit r;
  const int check_numbers = getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur >= 256;
  // The heap the runtime works on: touched, then read back round after round.
  const size_t blocks = ((size_t)kHeapMiB << 20) / kBlock;
  unsigned char** heap = malloc(blocks * sizeof(*heap));
  for (size_t b = 0; b < blocks; ++b) {
    heap[b] = malloc(kBlock);
    memset(heap[b], (int)(b & 0xff), kBlock);
  }
  unsigned long long bytes = 0;
  for (int round = 0; round < kRounds; ++round) {
    // Some of the heap read (faults, sampled pages put back), then a pipe to a forked child.
    for (size_t b = (size_t)round % 7; b < blocks; b += 7) {
      if (heap[b][kBlock / 2] != (unsigned char)(b & 0xff)) {
        fprintf(stderr, "round %d: block %zu changed\n", round, b);
        return 1;
      }
    }
    int p[2];
    if (pipe(p) != 0) {
      perror("pipe");
      return 1;
    }
    if (p[0] < kLow) own[p[0]] = 1;
    if (p[1] < kLow) own[p[1]] = 1;
    char msg[64];
    const int len = snprintf(msg, sizeof(msg), "round %d from the child\n", round);
    const pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      return 1;
    }
    if (pid == 0) {
      close(p[0]);
      _exit(write(p[1], msg, (size_t)len) == len && heap[round % blocks][0] == (unsigned char)((round % blocks) & 0xff) ? 0 : 3);
    }
    // Closed twice, as bash closes a pipeline's ends: the second close must find nothing.
    close(p[1]);
    close(p[1]);
    if (p[1] < kLow) own[p[1]] = 0;
    char got[64];
    size_t have = 0;
    for (;;) {
      const ssize_t n = read(p[0], got + have, sizeof(got) - 1 - have);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        fprintf(stderr, "round %d: read from the program's pipe failed: %s\n", round, strerror(errno));
        return 1;
      }
      if (n == 0) break;
      have += (size_t)n;
    }
    close(p[0]);
    close(p[0]);
    if (p[0] < kLow) own[p[0]] = 0;
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "round %d: the child failed (status %#x)\n", round, status);
      return 1;
    }
    if (have != (size_t)len || memcmp(got, msg, (size_t)len) != 0) {
      fprintf(stderr, "round %d: the pipe gave %zu bytes, not the child's %d\n", round, have, len);
      return 1;
    }
    bytes += have;
    if (check_numbers && CheckLowNumbers(round)) return 1;
  }
  printf("%d rounds, %llu bytes through pipes closed twice, every byte right\n", kRounds, bytes);
  return 0;
}

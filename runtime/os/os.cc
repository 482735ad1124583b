#include "runtime/os/os.h"

#include <fcntl.h>
#include <numaif.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace tiermem::os {

size_t PageSize() {
  static const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

void* Reserve(size_t bytes, int* err) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    *err = -errno;
    return nullptr;
  }
  *err = 0;
  return p;
}

int Unmap(void* addr, size_t bytes) { return munmap(addr, bytes) == 0 ? 0 : -errno; }

int Discard(void* addr, size_t bytes) {
  return madvise(addr, bytes, MADV_DONTNEED) == 0 ? 0 : -errno;
}

int Populate(void* addr, size_t bytes) {
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
  if (madvise(addr, bytes, MADV_POPULATE_WRITE) == 0) return 0;
  if (errno != EINVAL) return -errno;
  // Kernels before 5.14: touch one byte per page (reading then writing keeps the contents).
  volatile char* p = static_cast<volatile char*>(addr);
  for (size_t off = 0; off < bytes; off += PageSize()) p[off] = p[off];
  return 0;
}

int Mbind(void* addr, size_t bytes, int mode, const unsigned long* nodemask, unsigned long maxnode,
          unsigned flags) {
  long rc = syscall(SYS_mbind, addr, bytes, mode, nodemask, maxnode, flags);
  return rc == 0 ? 0 : -errno;
}

int MovePages(unsigned long count, void** pages, const int* nodes, int* status) {
  long rc = syscall(SYS_move_pages, 0, count, pages, nodes, status, MPOL_MF_MOVE);
  if (rc < 0) return -errno;
  return 0;  // rc > 0 is the number of pages not moved; callers read `status`
}

const char* GetEnv(const char* name) {
  if (environ == nullptr) return nullptr;
  size_t n = strlen(name);
  for (char** e = environ; *e != nullptr; ++e) {
    if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
  }
  return nullptr;
}

int WriteAll(int fd, const void* buf, size_t len) {
  const char* p = static_cast<const char*>(buf);
  while (len > 0) {
    ssize_t w = write(fd, p, len);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    p += w;
    len -= static_cast<size_t>(w);
  }
  return 0;
}

long ReadSmallFile(const char* path, char* buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  size_t total = 0;
  while (total + 1 < cap) {
    ssize_t r = read(fd, buf + total, cap - 1 - total);
    if (r < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      close(fd);
      return -e;
    }
    if (r == 0) break;
    total += static_cast<size_t>(r);
  }
  close(fd);
  buf[total] = '\0';
  return static_cast<long>(total);
}

uint64_t MonotonicNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace tiermem::os

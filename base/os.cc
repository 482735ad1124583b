#include "base/os.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <stdlib.h>
#include <numaif.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

extern char** environ;

extern "C" {
int __register_atfork(void (*prepare)(), void (*parent)(), void (*child)(), void* dso_handle);
extern void* __dso_handle __attribute__((weak, visibility("hidden")));
}

namespace tiermem::os {

int AtFork(void (*prepare)(), void (*parent)(), void (*child)()) {
  const int rc = __register_atfork(prepare, parent, child, __dso_handle);  // a positive errno
  return rc == 0 ? 0 : -rc;
}

size_t PageSize() {
  // Not a function-local static: its guard (__cxa_guard_acquire) would be the only reason for
  // every preloaded program to fault in another stretch of libstdc++ at start.
  static constinit std::atomic<size_t> size{0};
  size_t s = size.load(std::memory_order_relaxed);
  if (s == 0) {
    s = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    size.store(s, std::memory_order_relaxed);
  }
  return s;
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

void* ReserveAligned(size_t bytes, size_t align, int* err) {
  char* p = static_cast<char*>(Reserve(bytes + align, err));
  if (p == nullptr) return nullptr;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  const size_t head = ((addr + align - 1) & ~(uintptr_t{align} - 1)) - addr;
  char* a = p + head;
  if (head != 0) (void)munmap(p, head);
  if (align - head != 0) (void)munmap(a + bytes, align - head);
  return a;
}

int NoHugePages(void* addr, size_t bytes) {
  return madvise(addr, bytes, MADV_NOHUGEPAGE) == 0 ? 0 : -errno;
}

int Unmap(void* addr, size_t bytes) { return munmap(addr, bytes) == 0 ? 0 : -errno; }

void* CreateSharedFile(const char* path, size_t bytes, void* fixed, bool replace, int* err) {
  if (replace) unlink(path);
  const int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    *err = -errno;
    return nullptr;
  }
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    *err = -errno;
    close(fd);
    unlink(path);
    return nullptr;
  }
  void* p = mmap(fixed, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | (fixed ? MAP_FIXED : 0), fd, 0);
  const int e = errno;
  close(fd);
  if (p == MAP_FAILED) {
    *err = -e;
    unlink(path);
    return nullptr;
  }
  return p;
}

const void* MapFileReadOnly(const char* path, size_t max_bytes, size_t* bytes, int* err) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *err = -errno;
    return nullptr;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    *err = -errno;
    close(fd);
    return nullptr;
  }
  size_t n = static_cast<size_t>(st.st_size);
  if (n > max_bytes) n = max_bytes;
  *bytes = n;
  if (n == 0) {
    close(fd);
    *err = -EINVAL;
    return nullptr;
  }
  void* p = mmap(nullptr, n, PROT_READ, MAP_SHARED, fd, 0);
  const int e = errno;
  close(fd);
  if (p == MAP_FAILED) {
    *err = -e;
    return nullptr;
  }
  return p;
}

int Unlink(const char* path) { return unlink(path) == 0 ? 0 : -errno; }

int MapPrivateFixed(void* addr, size_t bytes) {
  void* p = mmap(addr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  return p == MAP_FAILED ? -errno : 0;
}
int ProcessId() { return static_cast<int>(getpid()); }

bool CanRead(const void* addr, size_t len) {
  char scratch[4096];
  const char* p = static_cast<const char*>(addr);
  while (len > 0) {
    const size_t n = len < sizeof(scratch) ? len : sizeof(scratch);
    iovec local{scratch, n};
    iovec remote{const_cast<char*>(p), n};
    const ssize_t r = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    if (r != static_cast<ssize_t>(n)) return false;
    p += n;
    len -= n;
  }
  return true;
}
uint32_t UserId() { return static_cast<uint32_t>(getuid()); }
int ProcessExists(int pid) { return kill(pid, 0) == 0 || errno == EPERM ? 0 : -ESRCH; }

uint64_t RealtimeNanos() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

int Discard(void* addr, size_t bytes) {
  return madvise(addr, bytes, MADV_DONTNEED) == 0 ? 0 : -errno;
}

namespace {
// Whether process_madvise(PIDFD_SELF, ..., MADV_DONTNEED) works here: 1 yes, -1 no, 0 not known.
std::atomic<int> batched_discard{0};
constexpr int kPidfdSelf = -10000;  // PIDFD_SELF (<linux/pidfd.h>, Linux 6.13)
constexpr size_t kMaxSpansPerCall = 256;  // a window's or a sample chunk's pages; 4 KiB of stack
}  // namespace

int DiscardRanges(const Span* spans, size_t n) {
  int first_error = 0;
  size_t done = 0;
  while (done < n && batched_discard.load(std::memory_order_relaxed) >= 0) {
    const size_t m = std::min(n - done, kMaxSpansPerCall);
    struct iovec iov[kMaxSpansPerCall];
    size_t total = 0;
    for (size_t i = 0; i < m; ++i) {
      iov[i].iov_base = spans[done + i].addr;
      iov[i].iov_len = spans[done + i].bytes;
      total += spans[done + i].bytes;
    }
    const long r = syscall(SYS_process_madvise, kPidfdSelf, iov, m, MADV_DONTNEED, 0);
    if (r < 0 && (errno == EINVAL || errno == EBADF || errno == ENOSYS || errno == EPERM)) {
      batched_discard.store(-1, std::memory_order_relaxed);  // not on this kernel: madvise each
      break;
    }
    batched_discard.store(1, std::memory_order_relaxed);
    if (r == static_cast<long>(total)) {
      done += m;
      continue;
    }
    // Stopped part way (or failed otherwise): the rest of this call's ranges one by one.
    size_t skip = r > 0 ? static_cast<size_t>(r) : 0;
    size_t i = 0;
    while (i < m && skip >= spans[done + i].bytes) skip -= spans[done + i++].bytes;
    for (; i < m; ++i) {
      const int rc = Discard(spans[done + i].addr, spans[done + i].bytes);
      if (rc != 0 && first_error == 0) first_error = rc;
    }
    done += m;
  }
  for (; done < n; ++done) {
    const int rc = Discard(spans[done].addr, spans[done].bytes);
    if (rc != 0 && first_error == 0) first_error = rc;
  }
  return first_error;
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

int ReadWholeFile(const char* path, std::string* out) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  out->clear();
  char buf[4096];
  for (;;) {
    const ssize_t r = read(fd, buf, sizeof(buf));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const int e = errno;
      close(fd);
      return -e;
    }
    if (r == 0) break;
    out->append(buf, static_cast<size_t>(r));
  }
  close(fd);
  while (!out->empty() && (out->back() == '\n' || out->back() == ' ')) out->pop_back();
  return 0;
}

int ListDir(const char* path, std::vector<std::string>* names) {
  DIR* dir = opendir(path);
  if (dir == nullptr) return -errno;
  while (dirent* e = readdir(dir)) {
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) names->emplace_back(e->d_name);
  }
  closedir(dir);
  return 0;
}

int RealPath(const char* path, std::string* out) {
  char buf[PATH_MAX];
  if (realpath(path, buf) == nullptr) return -errno;
  *out = buf;
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

int ThreadCpuNanos(uint64_t* ns) {
  clockid_t clock;
  if (int rc = pthread_getcpuclockid(pthread_self(), &clock); rc != 0) return -rc;
  timespec ts;
  if (clock_gettime(clock, &ts) != 0) return -errno;
  *ns = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  return 0;
}

uint64_t LibcHeapBytes() {
  // mallinfo2 (glibc 2.33+) walks every arena under its lock: a few microseconds.
  const struct mallinfo2 mi = mallinfo2();
  return static_cast<uint64_t>(mi.arena) + static_cast<uint64_t>(mi.hblkhd);
}

long ResidentBytes(const void* addr, size_t bytes) {
  constexpr size_t kPages = 512;  // per mincore call, so the vector stays on the stack
  const size_t page = PageSize();
  unsigned char vec[kPages];
  auto* p = static_cast<char*>(const_cast<void*>(addr));
  long resident = 0;
  for (size_t off = 0; off < bytes; off += kPages * page) {
    const size_t n = (bytes - off) < kPages * page ? (bytes - off + page - 1) / page : kPages;
    if (mincore(p + off, n * page, vec) != 0) return -errno;
    for (size_t i = 0; i < n; ++i) resident += vec[i] & 1;
  }
  return resident * static_cast<long>(page);
}

int ResidentMap(const void* addr, size_t pages, unsigned char* vec) {
  return mincore(const_cast<void*>(addr), pages * PageSize(), vec) == 0 ? 0 : -errno;
}

int ThreadStack(void** low, size_t* bytes) {
  pthread_attr_t attr;
  if (int rc = pthread_getattr_np(pthread_self(), &attr); rc != 0) return -rc;
  const int rc = pthread_attr_getstack(&attr, low, bytes);
  pthread_attr_destroy(&attr);
  return -rc;
}

// ---- eventfd, poll, pagemap ----

StatusOr<int> EventFd() {
  int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) return ErrnoToStatus(errno, "eventfd");
  return KeepHigh(fd);
}

void EventFdSignal(int fd) {
  uint64_t one = 1;
  (void)!write(fd, &one, sizeof(one));
}

void EventFdClear(int fd) {
  uint64_t count;
  (void)!read(fd, &count, sizeof(count));  // non-blocking: EAGAIN when it was not signalled
}

namespace {
// The wait WaitReadable and WaitAnyReady share, on the `n` descriptors of `p`: polls without
// sleeping until `spin_ns` has passed (and while timeout_ms, -1 for no limit, leaves time), then
// with the time left; EINTR is retried. Returns -1 on timeout, else `pick`'s answer for the first
// poll that reports an event it takes (pick returns -1 to go on waiting). *slept (when given)
// says whether it came to a poll that may sleep.
StatusOr<int> SpinThenPoll(pollfd* p, nfds_t n, int timeout_ms, uint64_t spin_ns, bool* slept,
                           int (*pick)(const pollfd* p, nfds_t n)) {
  if (slept != nullptr) *slept = false;
  const uint64_t start = timeout_ms >= 0 || spin_ns > 0 ? MonotonicNanos() : 0;
  const uint64_t end = timeout_ms < 0 ? 0 : start + static_cast<uint64_t>(timeout_ms) * 1'000'000;
  const uint64_t spin_end = spin_ns > 0 ? start + spin_ns : 0;
  for (;;) {
    int left = -1;
    const uint64_t now = start != 0 ? MonotonicNanos() : 0;
    if (timeout_ms >= 0) left = now >= end ? 0 : static_cast<int>((end - now + 999'999) / 1'000'000);
    const bool spinning = now < spin_end && left != 0;
    if (slept != nullptr && !spinning && left != 0) *slept = true;
    const int rc = poll(p, n, spinning ? 0 : left);
    if (rc == 0 && spinning) continue;
    if (rc < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, "poll");
    }
    if (rc == 0) return -1;
    if (const int picked = pick(p, n); picked >= 0) return picked;
  }
}
}  // namespace

StatusOr<int> WaitReadable(int fd, int stop_fd, uint64_t spin_ns, bool* slept) {
  pollfd fds[2] = {{fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
  return SpinThenPoll(fds, 2, -1, spin_ns, slept, [](const pollfd* p, nfds_t) {
    if (p[1].revents & POLLIN) return 1;
    if (p[0].revents & (POLLIN | POLLERR | POLLHUP)) return 0;
    return -1;
  });
}

StatusOr<int> WaitAnyReady(const int* fds, const uint8_t* writable, size_t n, int timeout_ms, uint64_t spin_ns,
                           bool* slept) {
  constexpr size_t kMax = 65;
  if (n == 0 || n > kMax) return InvalidArgument("WaitAnyReady: 1 to 65 descriptors");
  pollfd p[kMax];
  for (size_t i = 0; i < n; ++i) {
    p[i] = pollfd{fds[i], static_cast<short>(POLLIN | (writable != nullptr && writable[i] ? POLLOUT : 0)), 0};
  }
  return SpinThenPoll(p, static_cast<nfds_t>(n), timeout_ms, spin_ns, slept, [](const pollfd* q, nfds_t count) {
    for (nfds_t i = 0; i < count; ++i) {
      if (q[i].revents & (POLLIN | POLLOUT | POLLERR | POLLHUP)) return static_cast<int>(i);
    }
    return -1;
  });
}

int ReplaceAnonymous(void* addr, size_t bytes) {
  void* p = mmap(addr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  return p == MAP_FAILED ? -errno : 0;
}

int SocketPairCloexec(int fds[2]) {
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return -errno;
  fds[0] = KeepHigh(fds[0]);
  fds[1] = KeepHigh(fds[1]);
  return 0;
}

namespace {
// What SendFd and RecvFd exchange: one byte, and room for one descriptor.
struct FdMessage {
  char byte = 'f';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  FdMessage() {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
  }
  FdMessage(const FdMessage&) = delete;
  FdMessage& operator=(const FdMessage&) = delete;
};
}  // namespace

int SendFd(int sock, int fd) {
  FdMessage m;
  cmsghdr* c = CMSG_FIRSTHDR(&m.msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  for (;;) {
    if (sendmsg(sock, &m.msg, MSG_NOSIGNAL) == 1) return 0;
    if (errno != EINTR) return -errno;
  }
}

int RecvFd(int sock) {
  FdMessage m;
  ssize_t n;
  do {
    n = recvmsg(sock, &m.msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return errno == EWOULDBLOCK ? -EAGAIN : -errno;
  if (n == 0) return -ENOENT;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m.msg); c != nullptr; c = CMSG_NXTHDR(&m.msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
      return KeepHigh(fd);
    }
  }
  return -EBADMSG;
}

int WaitReadableFor(int fd, int stop_fd, int timeout_ms) {
  pollfd fds[2] = {{fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
  const int rc = poll(fds, 2, timeout_ms);
  if (rc < 0) return errno == EINTR ? 2 : -errno;
  if (rc == 0) return 2;
  if (fds[1].revents & POLLIN) return 1;
  return 0;
}

int WaitStop(int stop_fd, int timeout_ms) {
  const uint64_t end = MonotonicNanos() + static_cast<uint64_t>(timeout_ms) * 1'000'000;
  for (;;) {
    const uint64_t now = MonotonicNanos();
    const int left = now >= end ? 0 : static_cast<int>((end - now + 999'999) / 1'000'000);
    pollfd p = {stop_fd, POLLIN, 0};
    const int rc = poll(&p, 1, left);
    if (rc < 0 && errno == EINTR) continue;
    if (rc > 0 && (p.revents & POLLIN)) return 1;
    if (MonotonicNanos() >= end) return 0;
  }
}

int OpenForWrite(const char* path, bool append) {
  const int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
  return fd >= 0 ? KeepHigh(fd) : -errno;
}

int PagemapOpen() {
  int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  return fd >= 0 ? KeepHigh(fd) : -errno;
}

bool ReadPagemap(int pagemap_fd, const void* addr, size_t n, uint64_t* entries) {
  if (pagemap_fd < 0) return false;
  const off_t off = off_t(reinterpret_cast<uintptr_t>(addr) / PageSize() * 8);
  return pread(pagemap_fd, entries, n * 8, off) == ssize_t(n * 8);
}

int Close(int fd) { return close(fd) == 0 ? 0 : -errno; }

}  // namespace tiermem::os

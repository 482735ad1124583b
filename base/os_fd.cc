// Descriptors the runtime keeps, away from the program's (os.h: KeepHigh), and the /proc/self files
// the runtime's threads read or write round after round (ProcSelfFile).
//
// Why: the kernel gives every new descriptor the lowest free number, and a program may close a
// number it no longer owns. bash closes each pipe end twice after a pipeline (the second close
// normally fails with EBADF). When a runtime thread opened a descriptor between the two closes,
// it got that number, the program's second close closed it, the program's next pipe took the
// number again, and the runtime's read and close then went to the program's pipe: the output of
// a command substitution vanished (the runtime had read it), and a sed read its input from a
// descriptor that was no longer its pipe. Kept at the top of the table, the runtime's descriptors
// are out of the way of the numbers programs hand out and reuse; and a file read each round is
// opened once rather than at each read.
//
// What stays: a descriptor the kernel installs for us (a userfaultfd fork event's) is at the
// lowest free number from the read that installs it until KeepHigh moves it (two system calls
// later), or until the grandchild's is closed (pager_fork.cc). A program closing that number in
// that moment still closes ours.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <mutex>

#include "base/os.h"

namespace tiermem::os {

int KeepHighFloor() {
  static const int floor = [] {
    rlimit r{};
    if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur < 256) return 0;
    const rlim_t three_quarters = r.rlim_cur / 4 * 3;
    return static_cast<int>(three_quarters < 1024 ? three_quarters : 1024);
  }();
  return floor;
}

int KeepHigh(int fd) {
  const int floor = KeepHighFloor();
  if (fd < 0 || floor == 0 || fd >= floor) return fd;
  const int high = fcntl(fd, F_DUPFD_CLOEXEC, floor);
  if (high < 0) return fd;  // no free number up there: kept where it is
  close(fd);
  return high;
}

namespace {

// /proc/self files, each opened by its first user in each process: /proc/self is resolved at open,
// so a forked child's inherited copy would be its parent's (`pid` says whose it is).
struct KeptFile {
  const char* path;
  int flags;
  std::mutex mu;
  std::atomic<int> fd{-1};
  std::atomic<int> pid{0};  // the process that opened fd; 0: none yet
  constexpr KeptFile(const char* p, int f) : path(p), flags(f) {}
};
// Constant-initialized: the runtime may start (and count its resident memory) before this file's
// dynamic initializers would have run.
constinit KeptFile g_kept[] = {{"/proc/self/statm", O_RDONLY | O_CLOEXEC},
                               {"/proc/self/clear_refs", O_WRONLY | O_CLOEXEC}};

}  // namespace

int ProcSelfFile(ProcSelf which) {
  KeptFile& f = g_kept[static_cast<int>(which)];
  const int pid = ProcessId();
  int fd = f.fd.load(std::memory_order_acquire);
  if (fd >= 0 && f.pid.load(std::memory_order_acquire) == pid) return fd;
  std::lock_guard<std::mutex> lock(f.mu);
  fd = f.fd.load(std::memory_order_relaxed);
  if (fd >= 0 && f.pid.load(std::memory_order_relaxed) == pid) return fd;
  // In a forked child only this thread runs the runtime's code here: the parent's copy goes
  // (only a descriptor this runtime opened: pid says so).
  if (fd >= 0 && f.pid.load(std::memory_order_relaxed) != 0) close(fd);
  f.fd.store(-1, std::memory_order_relaxed);
  fd = open(f.path, f.flags);
  if (fd < 0) return -errno;
  fd = KeepHigh(fd);
  f.pid.store(pid, std::memory_order_release);
  f.fd.store(fd, std::memory_order_release);
  return fd;
}

uint64_t ProcessResidentBytes() {
  const int fd = ProcSelfFile(ProcSelf::kStatm);
  if (fd < 0) return 0;
  // A read from offset 0 makes the kernel write the line afresh (seq_file): one system call.
  char buf[128];
  ssize_t n;
  do {
    n = pread(fd, buf, sizeof(buf) - 1, 0);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return 0;
  buf[n] = '\0';
  unsigned long long size = 0, resident = 0;
  if (sscanf(buf, "%llu %llu", &size, &resident) != 2) return 0;
  return resident * PageSize();
}

}  // namespace tiermem::os

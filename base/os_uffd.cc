// The userfaultfd part of the OS surface (base/os.h, "userfaultfd"): opening and negotiating the
// descriptor, registration, the install and wake ioctls with their EAGAIN retry (and the
// thread's handler for it), and reading fault and fork events.
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "base/os.h"
#include "base/os_pagemap.h"

// UAPI newer than the build host's kernel headers (Linux 6.1): the values are the kernel's ABI.
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15)
#endif
#ifndef UFFD_FEATURE_MOVE
#define UFFD_FEATURE_MOVE (1 << 16)
namespace {
struct uffdio_move {
  __u64 dst, src, len, mode;
  __s64 move;
};
}  // namespace
#define UFFDIO_MOVE _IOWR(UFFDIO, 0x05, struct uffdio_move)
#define UFFDIO_MOVE_MODE_DONTWAKE ((__u64)1 << 0)
#endif

namespace tiermem::os {

// ---- userfaultfd ----

namespace {

// A userfaultfd from the system call, or from /dev/userfaultfd (Linux 6.1+), which gives the full
// mode to whoever may open the device even when vm.unprivileged_userfaultfd=0 refuses the call.
int UffdCreate(int flags) {
  int fd = int(syscall(SYS_userfaultfd, flags));
  if (fd >= 0 || errno != EPERM) return fd >= 0 ? KeepHigh(fd) : -errno;
#ifdef USERFAULTFD_IOC_NEW
  int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
  if (dev >= 0) {
    fd = ioctl(dev, USERFAULTFD_IOC_NEW, flags);
    int err = errno;
    close(dev);
    if (fd >= 0) return KeepHigh(fd);
    errno = err;
  }
#endif
  return -EPERM;
}

int UffdApi(int fd, uint64_t features) {
  uffdio_api api{};
  api.api = UFFD_API;
  api.features = features;
  return ioctl(fd, UFFDIO_API, &api) == 0 ? 0 : -errno;
}

}  // namespace

StatusOr<Uffd> UffdOpen(bool fork_events) {
  // Kernel-mode faults must reach the handler too: a write(2) or send(2) from a buffer whose
  // pages were evicted faults inside the kernel (copy_from_user). With UFFD_USER_MODE_ONLY such a
  // call would fail with EFAULT, so that mode is only the last resort for unprivileged processes.
  Uffd u;
  const int flags = O_CLOEXEC | O_NONBLOCK;
  int fd = UffdCreate(flags);
  if (fd == -EPERM) {
    fd = int(syscall(SYS_userfaultfd, flags | UFFD_USER_MODE_ONLY));
    fd = fd < 0 ? -errno : KeepHigh(fd);
    if (fd >= 0) u.user_mode_only = true;
  }
  if (fd < 0) return ErrnoToStatus(-fd, "userfaultfd");
  // The faulting thread's id (since 4.14) lets the pager's prefetcher follow each thread's stream.
  // Fork events need CAP_SYS_PTRACE (since 5.11): refused, a fresh descriptor goes without.
  if (fork_events && UffdApi(fd, UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_THREAD_ID | UFFD_FEATURE_EVENT_FORK) == 0) {
    u.fd = KeepHigh(fd);
    u.write_protect = true;
    u.fork_events = true;
    return u;
  }
  if (fork_events) {
    close(fd);
    fd = int(syscall(SYS_userfaultfd, flags | (u.user_mode_only ? UFFD_USER_MODE_ONLY : 0)));
    if (fd < 0) return ErrnoToStatus(errno, "userfaultfd");
  }
  if (UffdApi(fd, UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_THREAD_ID) == 0) {
    u.fd = KeepHigh(fd);
    u.write_protect = true;
    return u;
  }
  // Kernels without write-protect on anonymous memory: a fresh descriptor (the API handshake
  // is once per descriptor), missing faults only.
  close(fd);
  fd = int(syscall(SYS_userfaultfd, flags | (u.user_mode_only ? UFFD_USER_MODE_ONLY : 0)));
  if (fd < 0) return ErrnoToStatus(errno, "userfaultfd");
  int rc = UffdApi(fd, UFFD_FEATURE_THREAD_ID);
  if (rc != 0) {
    close(fd);
    fd = int(syscall(SYS_userfaultfd, flags | (u.user_mode_only ? UFFD_USER_MODE_ONLY : 0)));
    if (fd < 0) return ErrnoToStatus(errno, "userfaultfd");
    rc = UffdApi(fd, 0);
  }
  if (rc != 0) {
    close(fd);
    return ErrnoToStatus(-rc, "userfaultfd API handshake");
  }
  u.fd = KeepHigh(fd);
  return u;
}

StatusOr<Uffd> UffdOpenWpAsync() {
  // The supported set first (a handshake asking for nothing answers with every feature the kernel
  // has), then a fresh descriptor asking for exactly the wanted ones: the handshake is once per
  // descriptor, and a refused one may leave it unusable.
  int fd = UffdCreate(O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ErrnoToStatus(-fd, "userfaultfd (write tracking)");
  uffdio_api query{};
  query.api = UFFD_API;
  const int qrc = ioctl(fd, UFFDIO_API, &query) == 0 ? 0 : errno;
  close(fd);
  if (qrc != 0) return ErrnoToStatus(qrc, "userfaultfd API handshake (write tracking)");
  const uint64_t need = UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_WP_ASYNC;
  if ((query.features & need) != need) {
    return NotSupported("userfaultfd: the kernel offers no UFFD_FEATURE_WP_ASYNC (Linux 6.7+)");
  }
  const uint64_t want = need | (query.features & (UFFD_FEATURE_THREAD_ID | UFFD_FEATURE_MOVE));
  fd = UffdCreate(O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ErrnoToStatus(-fd, "userfaultfd (write tracking)");
  if (const int rc = UffdApi(fd, want); rc != 0) {
    close(fd);
    return ErrnoToStatus(-rc, "userfaultfd API handshake with UFFD_FEATURE_WP_ASYNC");
  }
  Uffd u;
  u.fd = fd;
  u.write_protect = true;
  u.wp_async = true;
  u.move = (want & UFFD_FEATURE_MOVE) != 0;
  return u;
}

Status UffdRegisterWpOnly(int uffd, void* addr, size_t bytes) {
  uffdio_register r{};
  r.range.start = reinterpret_cast<uintptr_t>(addr);
  r.range.len = bytes;
  r.mode = UFFDIO_REGISTER_MODE_WP;
  if (ioctl(uffd, UFFDIO_REGISTER, &r) != 0) return ErrnoToStatus(errno, "userfaultfd register (write-protect only)");
  return Status::Ok();
}

Status UffdRegister(int uffd, void* addr, size_t bytes, bool wp) {
  uffdio_register r{};
  r.range.start = reinterpret_cast<uintptr_t>(addr);
  r.range.len = bytes;
  r.mode = UFFDIO_REGISTER_MODE_MISSING | (wp ? UFFDIO_REGISTER_MODE_WP : 0);
  if (ioctl(uffd, UFFDIO_REGISTER, &r) != 0) return ErrnoToStatus(errno, "userfaultfd register");
  return Status::Ok();
}

Status UffdUnregister(int uffd, void* addr, size_t bytes) {
  uffdio_range r{reinterpret_cast<uintptr_t>(addr), bytes};
  if (ioctl(uffd, UFFDIO_UNREGISTER, &r) != 0 && errno != EINVAL) {
    return ErrnoToStatus(errno, "userfaultfd unregister");
  }
  return Status::Ok();
}

namespace {
thread_local UffdAgainFn t_again_fn = nullptr;
thread_local void* t_again_arg = nullptr;

// Before an EAGAIN is retried: the thread's handler (it reads the fork event), then a yield (the
// forking thread is still copying the address space).
void UffdAgain() {
  if (t_again_fn != nullptr) t_again_fn(t_again_arg);
  sched_yield();
}
}  // namespace

void SetUffdAgainHandler(UffdAgainFn fn, void* arg) {
  t_again_fn = fn;
  t_again_arg = arg;
}

Status UffdWriteProtect(int uffd, void* addr, size_t bytes, bool protect) {
  uffdio_writeprotect w{};
  w.range.start = reinterpret_cast<uintptr_t>(addr);
  w.range.len = bytes;
  w.mode = protect ? UFFDIO_WRITEPROTECT_MODE_WP : UFFDIO_WRITEPROTECT_MODE_DONTWAKE;
  while (ioctl(uffd, UFFDIO_WRITEPROTECT, &w) != 0) {
    if (errno != EAGAIN) return ErrnoToStatus(errno, "UFFDIO_WRITEPROTECT");
    UffdAgain();
  }
  return Status::Ok();
}

Status UffdCopy(int uffd, void* dst, const void* src, size_t bytes, bool wp) {
  const size_t page = PageSize();
  size_t done = 0;
  while (done < bytes) {
    uffdio_copy c{};
    c.dst = reinterpret_cast<uintptr_t>(dst) + done;
    c.src = reinterpret_cast<uintptr_t>(src) + done;
    c.len = bytes - done;
    c.mode = UFFDIO_COPY_MODE_DONTWAKE | (wp ? UFFDIO_COPY_MODE_WP : 0);
    if (ioctl(uffd, UFFDIO_COPY, &c) == 0) return Status::Ok();
    // A range stops at the first page it could not install: go on after what was copied.
    if (c.copy > 0) {
      done += static_cast<size_t>(c.copy);
      continue;
    }
    if (errno == EAGAIN) {  // the mm changes under it (a fork): retry once the change is over
      UffdAgain();
      continue;
    }
    if (errno == EEXIST) {          // this page is there already: installed
      done += page;
      continue;
    }
    return ErrnoToStatus(errno, "UFFDIO_COPY");
  }
  return Status::Ok();
}

Status UffdZeroPage(int uffd, void* dst, size_t bytes, size_t* present) {
  const size_t page = PageSize();
  size_t done = 0;
  if (present != nullptr) *present = 0;
  while (done < bytes) {
    uffdio_zeropage z{};
    z.range.start = reinterpret_cast<uintptr_t>(dst) + done;
    z.range.len = bytes - done;
    z.mode = UFFDIO_ZEROPAGE_MODE_DONTWAKE;
    if (ioctl(uffd, UFFDIO_ZEROPAGE, &z) == 0) return Status::Ok();
    if (z.zeropage > 0) {
      done += static_cast<size_t>(z.zeropage);
      continue;
    }
    if (errno == EAGAIN) {
      UffdAgain();
      continue;
    }
    if (errno == EEXIST) {
      done += page;
      if (present != nullptr) ++*present;
      continue;
    }
    return ErrnoToStatus(errno, "UFFDIO_ZEROPAGE");
  }
  return Status::Ok();
}

int UffdMove(int uffd, void* dst, void* src, size_t bytes, size_t* moved) {
  size_t done = 0;
  int rc = 0;
  while (done < bytes) {
    uffdio_move mv{};
    mv.dst = reinterpret_cast<uintptr_t>(dst) + done;
    mv.src = reinterpret_cast<uintptr_t>(src) + done;
    mv.len = bytes - done;
    mv.mode = UFFDIO_MOVE_MODE_DONTWAKE;
    if (ioctl(uffd, UFFDIO_MOVE, &mv) == 0) {
      done = bytes;
      break;
    }
    const int err = errno;
    if (mv.move > 0) done += size_t(mv.move);  // part moved: go on after it (or report it)
    if (err == EAGAIN) {
      UffdAgain();
      continue;
    }
    rc = -err;
    break;
  }
  if (moved != nullptr) *moved = done;
  return rc;
}

bool UffdMmGone(int uffd, void* addr, size_t bytes) {
  uffdio_writeprotect w{};
  w.range.start = reinterpret_cast<uintptr_t>(addr);
  w.range.len = bytes;
  w.mode = 0;  // clear: a page not present is left as it is, a present one loses its uffd-wp bit
  return ioctl(uffd, UFFDIO_WRITEPROTECT, &w) != 0 && errno == ESRCH;
}

void UffdWake(int uffd, void* addr, size_t bytes) {
  uffdio_range r{reinterpret_cast<uintptr_t>(addr), bytes};
  ioctl(uffd, UFFDIO_WAKE, &r);
}

StatusOr<size_t> UffdReadFaults(int uffd, UffdFault* out, size_t max) {
  uffd_msg msgs[64];
  size_t n = 0;
  while (n < max) {
    size_t want = max - n < 64 ? max - n : 64;
    ssize_t got = read(uffd, msgs, want * sizeof(uffd_msg));
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return ErrnoToStatus(errno, "userfaultfd read");
    }
    if (got == 0) break;
    const size_t msgs_read = size_t(got) / sizeof(uffd_msg);
    for (size_t k = 0; k < msgs_read; ++k) {
      if (msgs[k].event == UFFD_EVENT_FORK) {
        out[n++] = UffdFault{0, false, false, 0, int(msgs[k].arg.fork.ufd)};
        continue;
      }
      if (msgs[k].event != UFFD_EVENT_PAGEFAULT) continue;
      UffdFault& f = out[n++];
      f.fork_fd = -1;
      f.address = uintptr_t(msgs[k].arg.pagefault.address);
      f.write = (msgs[k].arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WRITE) != 0;
      f.wp = (msgs[k].arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP) != 0;
      f.tid = msgs[k].arg.pagefault.feat.ptid;
    }
    // One read takes every message queued, up to the buffer: a short one emptied the queue, and
    // another read would only answer EAGAIN (a system call on the fault's path for nothing).
    if (msgs_read < want) break;
  }
  return n;
}

namespace {

// The floor's handler: blocked in poll until a fault is reported, one read, one UFFDIO_COPY (no
// DONTWAKE: the copy wakes the toucher), for exactly `faults` faults. A copy that fails is
// answered with a zero page (which wakes too) and its errno kept: no toucher waits forever.
void FloorHandler(int fd, const char* src, size_t faults, int* err) {
  const size_t page = PageSize();
  for (size_t served = 0; served < faults;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, -1) <= 0) continue;  // EINTR
    uffd_msg m;
    if (read(fd, &m, sizeof m) != ssize_t(sizeof m) || m.event != UFFD_EVENT_PAGEFAULT) continue;
    const uintptr_t addr = uintptr_t(m.arg.pagefault.address) & ~uintptr_t(page - 1);
    uffdio_copy c{};
    c.dst = addr;
    c.src = reinterpret_cast<uintptr_t>(src);
    c.len = page;
    if (ioctl(fd, UFFDIO_COPY, &c) != 0 && errno != EEXIST) {
      if (*err == 0) *err = errno;
      uffdio_zeropage z{};
      z.range = {addr, page};
      (void)ioctl(fd, UFFDIO_ZEROPAGE, &z);
    }
    ++served;
  }
}

// A floor's range: a blocking userfaultfd with `features` (as a bare handler has it), `faults`
// fresh private pages registered for missing faults, then one page filled as the copies' source.
struct FloorRange {
  int fd = -1;
  char* base = nullptr;
  size_t page = 0, bytes = 0;
  const char* src() const { return base + bytes - page; }
  static StatusOr<FloorRange> Open(size_t faults, uint64_t features, const char* what) {
    FloorRange r;
    r.page = PageSize();
    r.bytes = (faults + 1) * r.page;
    r.fd = UffdCreate(O_CLOEXEC);
    if (r.fd < 0) return ErrnoToStatus(-r.fd, std::string("userfaultfd (") + what + ")");
    if (const int rc = UffdApi(r.fd, features); rc != 0) {
      close(r.fd);
      if (rc == -EINVAL && features != 0) return NotSupported(std::string("userfaultfd features missing (") + what + ")");
      return ErrnoToStatus(-rc, std::string("userfaultfd API handshake (") + what + ")");
    }
    void* mem = mmap(nullptr, r.bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
      const int e = errno;
      close(r.fd);
      return ErrnoToStatus(e, std::string("mmap (") + what + ")");
    }
    (void)madvise(mem, r.bytes, MADV_NOHUGEPAGE);  // one fault per page, as the pager's ranges
    r.base = static_cast<char*>(mem);
    for (size_t i = 0; i < r.page; ++i) r.base[faults * r.page + i] = char(i);
    uffdio_register reg{};
    reg.range = {reinterpret_cast<uintptr_t>(r.base), faults * r.page};
    reg.mode = UFFDIO_REGISTER_MODE_MISSING;
    if (faults > 0 && ioctl(r.fd, UFFDIO_REGISTER, &reg) != 0) {
      const int e = errno;
      r.Close();
      return ErrnoToStatus(e, std::string("userfaultfd register (") + what + ")");
    }
    return r;
  }
  void Close() {
    if (base != nullptr) munmap(base, bytes);
    if (fd >= 0) close(fd);
    base = nullptr;
    fd = -1;
  }
};

// Touches each of `faults` pages at `base` once, in order, timing each.
std::vector<uint64_t> TouchEach(char* base, size_t faults, size_t page) {
  std::vector<uint64_t> ns(faults);
  for (size_t i = 0; i < faults; ++i) {
    volatile const char* p = base + i * page;
    const uint64_t t0 = MonotonicNanos();
    (void)*p;
    ns[i] = MonotonicNanos() - t0;
  }
  return ns;
}

}  // namespace

StatusOr<std::vector<uint64_t>> UffdFaultFloor(size_t faults) {
  TIERMEM_ASSIGN_OR_RETURN(FloorRange range, FloorRange::Open(faults, 0, "fault floor"));
  int err = 0;
  std::thread handler(FloorHandler, range.fd, range.src(), faults, &err);
  std::vector<uint64_t> ns = TouchEach(range.base, faults, range.page);
  handler.join();
  range.Close();
  if (err != 0) return ErrnoToStatus(err, "UFFDIO_COPY (fault floor)");
  return ns;
}

namespace {

// The signal floor's state, read by its SIGBUS handler on the touching thread: set before the
// handler is installed, cleared after the action before it is put back. One measurement at a
// time (g_sig_busy).
std::atomic<bool> g_sig_busy{false};
std::atomic<int> g_sig_fd{-1};
std::atomic<uintptr_t> g_sig_lo{0}, g_sig_hi{0}, g_sig_src{0}, g_sig_page{0};
std::atomic<int> g_sig_err{0};
struct sigaction g_sig_old;

// On the touching thread, for a missing fault of the registered range (UFFD_FEATURE_SIGBUS): one
// UFFDIO_COPY, and the touch runs again on return. System calls and atomics only. A SIGBUS that
// is not ours goes to the action before ours: its handler, or (default or ignored) that action
// put back, so the bus error comes again on return and ends the process as it would have.
void SignalFloorHandler(int sig, siginfo_t* si, void* ctx) {
  const int saved = errno;
  const uintptr_t a = reinterpret_cast<uintptr_t>(si->si_addr);
  const int fd = g_sig_fd.load(std::memory_order_acquire);
  if (fd < 0 || a < g_sig_lo.load(std::memory_order_relaxed) || a >= g_sig_hi.load(std::memory_order_relaxed)) {
    if ((g_sig_old.sa_flags & SA_SIGINFO) != 0 && g_sig_old.sa_sigaction != nullptr) {
      g_sig_old.sa_sigaction(sig, si, ctx);
    } else if (g_sig_old.sa_handler != SIG_DFL && g_sig_old.sa_handler != SIG_IGN) {
      g_sig_old.sa_handler(sig);
    } else {
      (void)sigaction(SIGBUS, &g_sig_old, nullptr);
    }
    errno = saved;
    return;
  }
  const uintptr_t page = g_sig_page.load(std::memory_order_relaxed);
  uffdio_copy c{};
  c.dst = a & ~(page - 1);
  c.src = g_sig_src.load(std::memory_order_relaxed);
  c.len = page;
  if (ioctl(fd, UFFDIO_COPY, &c) != 0 && errno != EEXIST) {
    int none = 0;
    (void)g_sig_err.compare_exchange_strong(none, errno);
    uffdio_zeropage z{};
    z.range = {c.dst, page};
    (void)ioctl(fd, UFFDIO_ZEROPAGE, &z);
  }
  errno = saved;
}


}  // namespace

StatusOr<std::vector<uint64_t>> UffdSignalFloor(size_t faults) {
  if (g_sig_busy.exchange(true)) return Unavailable("a signal-floor measurement is already running");
  struct Done {
    ~Done() { g_sig_busy.store(false); }
  } done;
  TIERMEM_ASSIGN_OR_RETURN(FloorRange range, FloorRange::Open(faults, UFFD_FEATURE_SIGBUS, "signal floor"));
  g_sig_lo.store(reinterpret_cast<uintptr_t>(range.base), std::memory_order_relaxed);
  g_sig_hi.store(reinterpret_cast<uintptr_t>(range.base) + faults * range.page, std::memory_order_relaxed);
  g_sig_src.store(reinterpret_cast<uintptr_t>(range.src()), std::memory_order_relaxed);
  g_sig_page.store(range.page, std::memory_order_relaxed);
  g_sig_err.store(0, std::memory_order_relaxed);
  g_sig_fd.store(range.fd, std::memory_order_release);
  struct sigaction sa{};
  sa.sa_sigaction = SignalFloorHandler;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGBUS, &sa, &g_sig_old) != 0) {
    const int e = errno;
    g_sig_fd.store(-1, std::memory_order_release);
    range.Close();
    return ErrnoToStatus(e, "sigaction SIGBUS (signal floor)");
  }
  std::vector<uint64_t> ns = TouchEach(range.base, faults, range.page);
  (void)sigaction(SIGBUS, &g_sig_old, nullptr);
  g_sig_fd.store(-1, std::memory_order_release);
  range.Close();
  if (const int e = g_sig_err.load(); e != 0) return ErrnoToStatus(e, "UFFDIO_COPY (signal floor)");
  return ns;
}

}  // namespace tiermem::os

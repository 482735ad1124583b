#include "base/os_signal.h"

#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace tiermem::os {

int ProtectNone(void* addr, size_t bytes) {
  return mprotect(addr, bytes, PROT_NONE) == 0 ? 0 : -errno;
}

int ProtectReadWrite(void* addr, size_t bytes) {
  return mprotect(addr, bytes, PROT_READ | PROT_WRITE) == 0 ? 0 : -errno;
}

int InstallSegvHandler(SegvHandler handler, struct sigaction* old) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = handler;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  return sigaction(SIGSEGV, &sa, old) == 0 ? 0 : -errno;
}

SegvHandler CurrentSegvHandler() {
  struct sigaction cur;
  if (sigaction(SIGSEGV, nullptr, &cur) != 0) return nullptr;
  if (!(cur.sa_flags & SA_SIGINFO)) return nullptr;
  return cur.sa_sigaction;
}

void ChainSegv(const struct sigaction& old, int sig, siginfo_t* info, void* uctx) {
  if (old.sa_flags & SA_SIGINFO) {
    if (old.sa_sigaction != nullptr) {
      old.sa_sigaction(sig, info, uctx);
      return;
    }
  } else if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN) {
    old.sa_handler(sig);
    return;
  }
  // Default action: put it back; returning re-executes the access, which now ends the process
  // with SIGSEGV exactly as it would have without tiermem. One line first (write(2) only: this
  // runs in a signal handler), so a crash inside tiermem's memory can be told from others.
  {
    char msg[96] = "tiermem: SIGSEGV at 0x";
    size_t n = strlen(msg);
    uintptr_t a = info != nullptr ? reinterpret_cast<uintptr_t>(info->si_addr) : 0;
    char hex[17];
    int h = 0;
    do {
      hex[h++] = "0123456789abcdef"[a & 15];
      a >>= 4;
    } while (a != 0 && h < 16);
    while (h > 0) msg[n++] = hex[--h];
    const char* tail = info != nullptr && info->si_code == SEGV_ACCERR ? " (access error), not a sampled page\n"
                                                                       : " (not mapped)\n";
    for (const char* t = tail; *t && n < sizeof(msg) - 1; ++t) msg[n++] = *t;
    ssize_t w = write(2, msg, n);
    (void)w;
  }
  struct sigaction dfl;
  memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGSEGV, &dfl, nullptr);
}

bool FaultWasWrite(const void* uctx) {
#if defined(__x86_64__)
  const auto* uc = static_cast<const ucontext_t*>(uctx);
  return (uc->uc_mcontext.gregs[REG_ERR] & 0x2) != 0;
#else
  (void)uctx;
  return false;
#endif
}

int PerfPreciseAvailable() {
  struct perf_event_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_HARDWARE;
  attr.config = PERF_COUNT_HW_CPU_CYCLES;
  attr.sample_period = 100000;
  attr.sample_type = PERF_SAMPLE_ADDR;
  attr.precise_ip = 2;
  attr.disabled = 1;
  attr.exclude_kernel = 1;
  long fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
  if (fd < 0) return -errno;
  close(static_cast<int>(fd));
  return 0;
}

}  // namespace tiermem::os

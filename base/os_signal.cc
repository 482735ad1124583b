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

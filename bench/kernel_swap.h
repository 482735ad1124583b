// The `kernel_swap` setup of tiermem-bench's preload-hotset and memcached: the workload, without
// tiermem, in a memory cgroup whose limit is the DRAM budget, with a swap file of its own, so
// that the kernel's reclaim and swap-in are what tiermem is compared with.
//
// Open() makes the swap file (fallocate, mkswap, swapon(2)) and a cgroup below this process's own
// memory cgroup (cgroup v2: memory.max, memory.swap.max = max; v1: memory.limit_in_bytes, swap
// unlimited); the destructor undoes both (swapoff, unlink, rmdir). So does a SIGINT, SIGTERM or
// SIGHUP of this process (a handler that makes only those system calls, then dies of the signal),
// and the next Open() removes what a killed run (SIGKILL) left: swap files and cgroups named after
// a pid that no longer runs. Where the machine does not allow it (not root, no memory controller,
// swapon refused...) Open() fails with the reason, which the benchmarks report as "skipped".
//
// One KernelSwap at a time per process (the signal handler knows one); not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace tiermem::bench {

class KernelSwap {
 public:
  // limit_bytes: the cgroup's memory limit; swap_bytes: the swap file's size; swap_dir: where the
  // file goes (a filesystem that can hold swap files: ext4, xfs; not tmpfs or overlayfs).
  // nullptr with `reason` set when the setup cannot be made; nothing is left behind then.
  static std::unique_ptr<KernelSwap> Open(uint64_t limit_bytes, uint64_t swap_bytes, const std::string& swap_dir,
                                          std::string* reason);
  ~KernelSwap();  // swapoff, unlink the file, rmdir the cgroup (once it holds no process)
  KernelSwap(const KernelSwap&) = delete;
  KernelSwap& operator=(const KernelSwap&) = delete;

  const std::string& procs_file() const { return procs_; }  // ChildOptions::cgroup_procs
  const std::string& cgroup_dir() const { return dir_; }
  const std::string& swap_file() const { return swap_; }
  int cgroup_version() const { return version_; }
  // The cgroup's memory in use now (memory.current / memory.usage_in_bytes); 0 when unreadable.
  uint64_t UsageBytes() const;
  // Processes of the cgroup the OOM killer ended (v2 memory.events, v1 memory.oom_control
  // "oom_kill"); 0 when unreadable.
  uint64_t OomKills() const;
  // At least this much swap was in use at once by the cgroup (v1: the memory+swap high-water mark
  // less memory's, a lower bound; v2: memory.swap.peak where the kernel has it); 0 when unreadable.
  // Read after an OOM kill, it tells a full swap file from a reclaim that gave up.
  uint64_t SwapPeakBytes() const;

 private:
  KernelSwap() = default;
  std::string dir_, procs_, swap_;
  int version_ = 0;
};

}  // namespace tiermem::bench

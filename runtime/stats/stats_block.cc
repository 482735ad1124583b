// The live stats block's life: created at Runtime start, given its own file in a forked child,
// removed at a clean stop (and at exit, for runtimes that never stop: the preload library's).
#include "runtime/stats/stats_block.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/exit_files.h"
#include "base/log.h"
#include "base/os.h"

namespace tiermem {

std::string StatsBlockPath(uint32_t uid, int pid) {
  char buf[64];
  snprintf(buf, sizeof(buf), "/dev/shm/tiermem.%u.%d", uid, pid);
  return buf;
}

uint64_t ProcStartTicks(int pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  char buf[1024];
  if (os::ReadSmallFile(path, buf, sizeof(buf)) <= 0) return 0;
  // The command (field 2) is in parentheses and may hold spaces: count from the last ')'.
  const char* p = strrchr(buf, ')');
  if (p == nullptr) return 0;
  int field = 2;
  for (++p; *p != '\0'; ++p) {
    if (*p == ' ') {
      ++field;
      if (field == 22) return strtoull(p + 1, nullptr, 10);
    }
  }
  return 0;
}

void StatsPublisher::FillIdentity() {
  StatsBlock* b = block_;
  b->magic = kStatsMagic;
  b->layout_version = kStatsLayoutVersion;
  b->size = sizeof(StatsBlock);
  b->counter_list_hash = kCounterListHash;
  b->pid = os::ProcessId();
  b->uid = os::UserId();
  b->proc_start_ticks = ProcStartTicks(b->pid);
  b->started_unix_ns = os::RealtimeNanos();
  b->page_size = os::PageSize();
  char comm[sizeof(b->command)];  // the kernel's comm is at most 16 bytes
  if (os::ReadSmallFile("/proc/self/comm", comm, sizeof(comm)) > 0) {
    comm[strcspn(comm, "\n")] = '\0';
    memcpy(b->command, comm, sizeof(comm));
  }
}

void StatsPublisher::Create() {
  const std::string path = StatsBlockPath(os::UserId(), os::ProcessId());
  int err = 0;
  // A file of the same name is a dead process's (pids are reused): ours replaces it.
  void* p = os::CreateSharedFile(path.c_str(), sizeof(StatsBlock), nullptr, true, &err);
  if (p != nullptr) {
    shared_ = true;
    path_ = path;
    AddExitFile(path_.c_str());
  } else {
    TM_LOG_INFO("stats block: %s: %s; live stats are not published", path.c_str(), strerror(-err));
    p = os::Reserve(sizeof(StatsBlock), &err);
    if (p == nullptr) return;  // no counters at all: callers check block()
  }
  block_ = static_cast<StatsBlock*>(p);
  FillIdentity();
}

void StatsPublisher::Remove() {
  if (!path_.empty()) {
    os::Unlink(path_.c_str());
    ForgetExitFile(path_.c_str());
    path_.clear();
  }
}

void StatsPublisher::AfterForkInChild() {
  if (block_ == nullptr || !shared_) return;
  // The mapping is the parent's file. The child goes on counting in a private copy at the same
  // address (every pointer into the block stays valid) and publishes no block of its own: most
  // children exec at once (a preloaded shell forks for every command), and exec would leave
  // their file behind.
  static StatsBlock copy;  // the child runs one thread here (fork's child handler)
  memcpy(static_cast<void*>(&copy), block_, sizeof(StatsBlock));
  ForgetAllExitFiles();  // the parent's file is not ours to remove
  path_.clear();
  shared_ = false;
  const int rc = os::MapPrivateFixed(block_, sizeof(StatsBlock));
  if (rc != 0) {
    TM_LOG_WARN("stats block: a private copy for the forked child: %s; its counts go on into its "
                "parent's block", strerror(-rc));
    return;
  }
  memcpy(static_cast<void*>(block_), &copy, sizeof(StatsBlock));
  block_->pid = os::ProcessId();
}

StatsPublisher::~StatsPublisher() {
  Remove();
  if (block_ != nullptr) os::Unmap(block_, sizeof(StatsBlock));
}

}  // namespace tiermem

#include "bench/kernel_swap.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/swap.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "bench/child.h"
#include "bench/compare_util.h"

namespace tiermem::bench {
namespace {

constexpr const char* kCgroupPrefix = "tiermem-bench.";
constexpr const char* kSwapPrefix = "tiermem-bench-swap.";

// What the signal handler undoes: fixed buffers, so that it reads no std::string.
char g_swap[4096];
char g_cgroup[4096];
char g_procs[4096];
struct sigaction g_old[3];
constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};

// Async-signal-safe: kills and reaps the cgroup's processes (the benchmark's own children), then
// swapoff, unlink and rmdir, then dies of the signal with its previous action.
void OnSignal(int sig) {
  const int fd = g_procs[0] != 0 ? open(g_procs, O_RDONLY) : -1;
  if (fd >= 0) {
    char buf[4096];
    const ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    pid_t pid = 0;
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] >= '0' && buf[i] <= '9') {
        pid = pid * 10 + (buf[i] - '0');
      } else if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
        pid = 0;
      }
    }
  }
  if (g_swap[0] != 0) {
    swapoff(g_swap);
    unlink(g_swap);
  }
  if (g_cgroup[0] != 0) rmdir(g_cgroup);
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &g_old[i], nullptr);
  raise(sig);
}

void Remember(char* where, const std::string& what) { snprintf(where, sizeof(g_swap), "%s", what.c_str()); }

std::string Errno(const std::string& what) { return what + ": " + strerror(errno); }

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  f.flush();
  return static_cast<bool>(f);
}

bool HasWord(const std::string& list, const std::string& word) {
  std::istringstream is(list);
  for (std::string w; is >> w;) {
    if (w == word) return true;
  }
  return false;
}

// Entries of `dir` named PREFIX<pid> whose pid no longer runs: what a killed run left.
std::vector<std::string> Leftovers(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind(prefix, 0) != 0) continue;
    const long pid = strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) out.push_back(dir + "/" + name);
  }
  closedir(d);
  return out;
}

struct MemoryCgroup {
  int version = 0;   // 1 or 2
  std::string dir;   // this process's own cgroup in the memory hierarchy
  std::string root;  // the hierarchy's mount point
};

// This process's cgroup in the hierarchy that has the memory controller, from /proc/self/cgroup
// and /proc/self/mountinfo. v1 ("N:...memory...:/path") is taken first: where both exist, memory
// is bound to v1 and the v2 tree has no memory controller.
bool FindMemoryCgroup(MemoryCgroup* out, std::string* reason) {
  std::string v1_path, v2_path;
  bool v2_seen = false;
  std::ifstream cg("/proc/self/cgroup");
  for (std::string line; std::getline(cg, line);) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1);
    std::replace(controllers.begin(), controllers.end(), ',', ' ');
    if (HasWord(controllers, "memory")) v1_path = line.substr(b + 1);
    if (line.rfind("0::", 0) == 0) v2_path = line.substr(b + 1), v2_seen = true;
  }
  std::ifstream mi("/proc/self/mountinfo");
  std::string v1_mount, v2_mount, v1_root = "/", v2_root = "/";
  for (std::string line; std::getline(mi, line);) {
    // id parent major:minor root mount-point options ... - fstype source super-options
    std::istringstream is(line);
    std::string id, parent, dev, root, mount;
    is >> id >> parent >> dev >> root >> mount;
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream tail(line.substr(dash + 3));
    std::string fstype, source, super;
    tail >> fstype >> source >> super;
    std::replace(super.begin(), super.end(), ',', ' ');
    if (fstype == "cgroup" && HasWord(super, "memory")) v1_mount = mount, v1_root = root;
    if (fstype == "cgroup2") v2_mount = mount, v2_root = root;
  }
  auto join = [](const std::string& mount, const std::string& root, std::string path) {
    if (root != "/" && path.rfind(root, 0) == 0) path = path.substr(root.size());
    return mount + (path == "/" ? "" : path);
  };
  if (!v1_path.empty() && !v1_mount.empty()) {
    *out = {1, join(v1_mount, v1_root, v1_path), v1_mount};
    return true;
  }
  if (v2_seen && !v2_mount.empty() && HasWord(ReadAll(v2_mount + "/cgroup.controllers"), "memory")) {
    *out = {2, join(v2_mount, v2_root, v2_path), v2_mount};
    return true;
  }
  *reason = "no memory cgroup controller (" +
            std::string(v2_mount.empty() ? "no cgroup v2 mount" : "cgroup v2 without the memory controller") +
            (v1_mount.empty() ? ", no v1 memory hierarchy)" : ")");
  return false;
}

// mkdir a cgroup named after this process below `parent`; v2 first needs the memory controller
// in parent's subtree_control, which the kernel refuses where parent holds processes.
bool MakeCgroup(const MemoryCgroup& mc, const std::string& parent, std::string* dir, std::string* reason) {
  for (const std::string& old : Leftovers(parent, kCgroupPrefix)) rmdir(old.c_str());
  if (mc.version == 2 && !HasWord(ReadAll(parent + "/cgroup.subtree_control"), "memory") &&
      !WriteFile(parent + "/cgroup.subtree_control", "+memory")) {
    *reason = Errno("cannot enable the memory controller below " + parent);
    return false;
  }
  const std::string made = parent + "/" + kCgroupPrefix + std::to_string(getpid());
  if (mkdir(made.c_str(), 0755) != 0) {
    *reason = Errno("mkdir " + made);
    return false;
  }
  *dir = made;
  return true;
}

}  // namespace

std::unique_ptr<KernelSwap> KernelSwap::Open(uint64_t limit_bytes, uint64_t swap_bytes, const std::string& swap_dir,
                                             std::string* reason) {
  if (geteuid() != 0) {
    *reason = "needs root (swapon and a memory cgroup)";
    return nullptr;
  }
  MemoryCgroup mc;
  if (!FindMemoryCgroup(&mc, reason)) return nullptr;
  std::unique_ptr<KernelSwap> ks(new KernelSwap());
  ks->version_ = mc.version;
  // Below this process's own cgroup where the kernel lets us, else below the hierarchy's root.
  std::string why;
  if (!MakeCgroup(mc, mc.dir, &ks->dir_, &why) && (mc.dir == mc.root || !MakeCgroup(mc, mc.root, &ks->dir_, &why))) {
    *reason = "cgroup v" + std::to_string(mc.version) + ": " + why;
    return nullptr;
  }
  ks->procs_ = ks->dir_ + "/cgroup.procs";
  Remember(g_cgroup, ks->dir_);
  Remember(g_procs, ks->procs_);
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &sa, &g_old[i]);
  // From here on the destructor undoes whatever was made.
  const std::string limit = std::to_string(limit_bytes);
  const bool limited = mc.version == 2 ? WriteFile(ks->dir_ + "/memory.max", limit) &&
                                             WriteFile(ks->dir_ + "/memory.swap.max", "max")
                                       : WriteFile(ks->dir_ + "/memory.limit_in_bytes", limit);
  if (!limited) {
    *reason = Errno("cannot set the memory limit of " + ks->dir_);
    return nullptr;
  }
  for (const std::string& old : Leftovers(swap_dir, kSwapPrefix)) {
    swapoff(old.c_str());
    unlink(old.c_str());
  }
  const std::string swap = swap_dir + "/" + kSwapPrefix + std::to_string(getpid());
  const int fd = open(swap.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    *reason = Errno("cannot create the swap file " + swap);
    return nullptr;
  }
  ks->swap_ = swap;
  Remember(g_swap, swap);
  const int fa = posix_fallocate(fd, 0, static_cast<off_t>(swap_bytes));
  close(fd);
  if (fa != 0) {
    *reason = "fallocate " + swap + ": " + strerror(fa);
    return nullptr;
  }
  Child mkswap;
  ChildOptions mo;
  mo.argv = {FirstExisting({"/usr/sbin/mkswap", "/sbin/mkswap"}), swap};
  if (mo.argv[0].empty()) mo.argv[0] = "mkswap";
  mo.quiet_stderr = true;
  std::string err;
  if (!mkswap.Start(mo, &err) || mkswap.Wait(NowNs() + 60'000'000'000ull) != Child::Event::kExited ||
      mkswap.status() != 0) {
    *reason = "mkswap " + swap + " failed (" + (err.empty() ? mkswap.Describe() : err) + ")";
    return nullptr;
  }
  if (swapon(swap.c_str(), 0) != 0) {
    *reason = Errno("swapon " + swap + " refused");
    return nullptr;
  }
  return ks;
}

KernelSwap::~KernelSwap() {
  if (!swap_.empty()) {
    swapoff(swap_.c_str());  // fails harmlessly when it was never swapped on
    unlink(swap_.c_str());
  }
  if (!dir_.empty()) {
    // The benchmark has reaped its child; the kernel may take a moment to empty the cgroup.
    for (int i = 0; i < 100 && rmdir(dir_.c_str()) != 0 && errno == EBUSY; ++i) usleep(10'000);
  }
  g_swap[0] = g_cgroup[0] = g_procs[0] = 0;
  if (!dir_.empty()) {
    for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &g_old[i], nullptr);
  }
}

uint64_t KernelSwap::UsageBytes() const {
  const std::string v = ReadAll(dir_ + (version_ == 2 ? "/memory.current" : "/memory.usage_in_bytes"));
  return std::strtoull(v.c_str(), nullptr, 10);
}

namespace {

// The value of `key` in a file of "key value" lines; 0 when absent.
uint64_t KeyedValue(const std::string& path, const std::string& key) {
  std::istringstream is(ReadAll(path));
  std::string k;
  uint64_t v = 0;
  while (is >> k >> v) {
    if (k == key) return v;
  }
  return 0;
}

}  // namespace

uint64_t KernelSwap::SwapPeakBytes() const {
  auto read = [&](const char* name) { return std::strtoull(ReadAll(dir_ + name).c_str(), nullptr, 10); };
  if (version_ == 2) return read("/memory.swap.peak");
  const uint64_t both = read("/memory.memsw.max_usage_in_bytes"), memory = read("/memory.max_usage_in_bytes");
  return both > memory ? both - memory : 0;
}

uint64_t KernelSwap::OomKills() const {
  return KeyedValue(dir_ + (version_ == 2 ? "/memory.events" : "/memory.oom_control"), "oom_kill");
}

}  // namespace tiermem::bench

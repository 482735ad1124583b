// Programs that tiermem-bench runs as separate processes (a workload under LD_PRELOAD, a
// memcached, a program inside a memory cgroup): finding them next to the running binary, starting
// them with an environment of their own, following them through the stops they raise, and reading
// their counters from /proc.
//
// Not thread-safe: one thread owns a Child. Start() forks; the child only redirects, waits for its
// go-ahead and execs, so it is safe from a process that has threads.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tiermem::bench {

// The folder of the running binary ("." when /proc/self/exe cannot be read).
std::string SelfDir();
// The first of `paths` that exists and is readable, else "".
std::string FirstExisting(std::initializer_list<std::string> paths);
// `name`'s path in one of $PATH's folders (executable), else "".
std::string OnPath(const std::string& name);
// libtiermem-preload.so of this build tree or install, else "".
std::string PreloadLibrary();

struct ChildOptions {
  std::vector<std::string> argv;  // argv[0]: a path, or a name looked up on PATH
  // Set in the child's environment, over this process's (LD_PRELOAD is never inherited: only
  // an LD_PRELOAD named here reaches the child).
  std::map<std::string, std::string> env;
  // Non-empty: a cgroup's procs file (cgroup.procs); the child is written there before it execs,
  // so everything it maps is charged to that cgroup.
  std::string cgroup_procs;
  bool quiet_stderr = false;  // stderr to /dev/null (else this process's stderr)
  std::string stdin_path;     // non-empty: the child's stdin is this file (else this process's stdin)
};

// A started child. Its stdout goes to an unlinked temporary file (a pipe could fill and block
// it while nobody reads), read back by Stdout(). It gets SIGKILL if this process dies.
class Child {
 public:
  Child() = default;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child();  // a child still running is killed (SIGKILL) and reaped

  // False with `error` set when it could not be started (fork, the cgroup write, exec: an exec
  // failure shows as exit status 127 from Wait instead).
  bool Start(const ChildOptions& options, std::string* error);

  enum class Event { kStopped, kExited, kTimedOut };
  // Waits until the child stops (a SIGSTOP it raised), exits or is killed, or until
  // `deadline_ns` (NowNs() clock) passes, whichever comes first; kTimedOut leaves it running.
  Event Wait(uint64_t deadline_ns);
  void Continue();  // SIGCONT after a stop
  // Sends `sig` and waits for the exit (SIGKILL after 10 s); no-op once it exited.
  void Stop(int sig);

  pid_t pid() const { return pid_; }
  bool exited() const { return exited_; }
  int status() const { return status_; }        // waitpid's status, once exited
  const rusage& usage() const { return usage_; }  // the child's rusage, once exited
  std::string Stdout() const;                   // what it wrote to stdout so far
  std::string Describe() const;                 // "exit 1", "killed by signal 9", "running"

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  bool exited_ = false;
  int status_ = 0;
  rusage usage_{};
};

// From /proc/PID/status: a "Name: N kB" field (VmRSS, VmHWM) in bytes; nullopt when unreadable.
std::optional<uint64_t> ProcStatusBytes(pid_t pid, const char* field);
// From /proc/PID/stat: major page faults so far (majflt); nullopt when unreadable.
std::optional<uint64_t> ProcMajorFaults(pid_t pid);
// From /proc/PID/stat: CPU time used so far (utime + stime) in seconds; nullopt when unreadable.
std::optional<double> ProcCpuSeconds(pid_t pid);

}  // namespace tiermem::bench

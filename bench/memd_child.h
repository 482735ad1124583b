// A tiermem-memd child process for benchmarks and tests: started on an address with a port the
// kernel picks (--listen HOST:0 --port-file), waited for until it listens, stopped on request or
// on destruction. Used by tiermem-bench (compare, gups, kv, remote-fault) and by the remote and
// tiering integration tests (tests/integration/remote_memd_fixture.h).
//
// Not thread-safe: one thread owns a MemdChild, and memd lives no longer than that thread
// (PR_SET_PDEATHSIG): start it on a thread that outlives its use. Start() forks; call it before
// starting threads that hold locks the child might need (the child only execs).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tiermem::bench {

// tiermem-memd next to the running binary (build tree: ../tools/memd/, install: same folder),
// else "tiermem-memd" (found on PATH when started).
std::string MemdBinary();

struct MemdChildOptions {
  std::string binary;               // empty: MemdBinary()
  std::string host = "127.0.0.1";
  uint16_t port = 0;                // 0: the kernel picks one
  // Beyond 127.* and without a token, memd refuses to listen unless given --allow-no-token
  // (isolated test networks, e.g. the QEMU guests' 10.9.0.2): pass it there.
  bool allow_no_token = true;
  std::vector<std::string> args;    // more arguments, e.g. {"--capacity", "64M"}
  // TIERMEM_TOKEN for the child: nullopt keeps this process's, "" removes it, else sets it.
  std::optional<std::string> token;
  // true: memd's stderr goes to a file in the child's temporary folder (Log() reads it);
  // false: to /dev/null, or to this process's stderr when TIERMEM_BENCH_MEMD_LOG is set.
  bool log_to_file = false;
};

class MemdChild {
 public:
  MemdChild() = default;
  MemdChild(const MemdChild&) = delete;
  MemdChild& operator=(const MemdChild&) = delete;
  ~MemdChild();  // Stop(SIGTERM), then removes the temporary folder

  // Starts memd and waits up to 10 s for it to write its port. False when it could not start,
  // exited, or did not listen in time (a child still running is stopped by Stop or destruction).
  bool Start(const MemdChildOptions& options);
  // Benchmarks' short form: `--capacity` capacity_bytes (in MiB), on `host`.
  bool Start(uint64_t capacity_bytes, const std::string& host = "127.0.0.1");

  // Sends `sig` and waits; returns the exit status as from waitpid, -1 when nothing runs.
  int Stop(int sig = SIGTERM);
  bool Alive() const;
  pid_t pid() const { return pid_; }
  uint16_t port() const { return port_; }
  const std::string& host() const { return host_; }
  std::string Url(const std::string& scheme) const;
  // memd's log so far (log_to_file), else "".
  std::string Log() const;

 private:
  std::string dir_, log_file_;
  std::string host_ = "127.0.0.1";
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

}  // namespace tiermem::bench

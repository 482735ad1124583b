// `tiermem run`: an unmodified program under the preload library, configured from the command
// line (docs/run.md). The pieces: the command line and its checks (run_cmd.cc), a memory
// server of the run's own (local_memd.cc), the tier summary at exit (summary.cc).
#pragma once

#include <string>
#include <sys/types.h>
#include <vector>

namespace tiermem::tools {

struct RunArgs {
  std::string dram_limit;            // TIERMEM_DRAM_LIMIT
  std::string cxl_limit;             // TIERMEM_CXL_LIMIT
  std::vector<std::string> remote;   // TIERMEM_REMOTE, joined with commas
  std::string local_memd;            // capacity of a memd on loopback for this run ("" = none)
  std::string stats;                 // TIERMEM_STATS: a file or "stderr" ("" = a summary only)
  std::vector<std::string> set;      // "name=value", any TIERMEM_* option
  std::string preload_lib;           // the preload library ("" = found beside this program)
  std::string memd_binary;           // tiermem-memd ("" = found beside this program)
  bool quiet = false;                // no tier summary at exit
  // The program's stderr passed on through a pipe and its last lines kept (RunOutcome::
  // stderr_tail); 0: the program writes to tiermem's own stderr. A descendant that outlives the
  // program and still writes there meets a closed pipe once the tail is taken.
  size_t stderr_tail_lines = 0;
  // Seconds after which the program is stopped (SIGTERM, then SIGKILL), 0: never. With a bound
  // the program runs in a process group of its own, which the stop and every signal passed on
  // reach whole (a script's children too).
  double timeout_s = 0;
  std::vector<std::string> command;  // PROG ARGS
};

// What a run was, for a caller that runs the program more than once (`tiermem advise`).
struct RunOutcome {
  pid_t pid = -1;               // the program's process id (-1: not started)
  double seconds = 0;           // wall time from its start to its end
  uint64_t peak_rss_bytes = 0;  // its largest resident set (the process itself, not its children)
  int exit_code = -1;           // its exit status when it exited (-1: a signal ended it, or not started)
  int signal = 0;               // the signal that ended it (0: none)
  std::string stderr_tail;      // the last RunArgs::stderr_tail_lines lines of its stderr
  bool timed_out = false;       // stopped at RunArgs::timeout_s
  int passed_on = 0;            // the last SIGINT, SIGTERM, SIGHUP or SIGQUIT tiermem was sent and passed on (0: none)
};

// Runs the program; returns its exit status (128+N when signal N ended it), or 2 when the
// command line is refused before the program starts, or 1 when the run could not be set up.
// `out`, when given, is filled once the program has started.
int RunCommand(const RunArgs& args, RunOutcome* out = nullptr);

// The tiermem-memd serving this run (--local-memd): started on 127.0.0.1 with a port of its own,
// in a process group of its own (a terminal's ^C reaches the program, not the server its pages
// live on), ended when tiermem ends, however it ends (PR_SET_PDEATHSIG).
class LocalMemd {
 public:
  LocalMemd() = default;
  LocalMemd(const LocalMemd&) = delete;
  LocalMemd& operator=(const LocalMemd&) = delete;
  ~LocalMemd();
  // Starts `binary` serving `capacity` (a size as tiermem-memd takes it) with `token`; on
  // failure returns false with the reason (and memd's own words) in *error.
  bool Start(const std::string& binary, const std::string& capacity, const std::string& token,
             std::string* error);
  // Stops it (SIGTERM, then SIGKILL after a bound) and waits for it; idempotent.
  void Stop();
  std::string url() const { return "tcp://127.0.0.1:" + std::to_string(port_); }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  unsigned port_ = 0;
  std::string dir_;  // scratch: the port file and memd's log
};

// Where the run's processes write their exit reports (TIERMEM_STATS): the user's file (--stats
// FILE, where "%p" stands for a process id), or, for the summary alone, one file per process in
// a scratch folder removed afterwards.
class StatsFiles {
 public:
  explicit StatsFiles(const std::string& given);
  StatsFiles(const StatsFiles&) = delete;
  StatsFiles& operator=(const StatsFiles&) = delete;
  ~StatsFiles();
  // TIERMEM_STATS for the program; "" when no folder could be made (no summary then).
  const std::string& env_value() const { return value_; }
  // The reports written, the program's own (pid `program`) first.
  std::vector<std::string> Reports(pid_t program) const;

 private:
  std::string value_;
  std::string dir_;  // the scratch folder, when ours
};

// Prints the tier summary (one line per process that reported, the program first) to stderr.
void PrintSummary(const StatsFiles& files, pid_t program_pid, const std::string& program, int exit_status,
                  double seconds);

// A file `name` in one of `relative_dirs` (relative to this executable's folder; "" is that
// folder), the first that is there; "" if none.
std::string FindBeside(const std::string& name, const std::vector<std::string>& relative_dirs);
// The preload library and the memory server beside an installed or a built tiermem.
std::string FindPreloadLibrary();
std::string FindMemd();

}  // namespace tiermem::tools

// The programs of `tiermem-bench programs`: real programs from Debian's packages, unmodified, each
// with a job of its own and a check that its result is right, run under the setups of
// bench/preload_setup.h (plain, tiermem by LD_PRELOAD, the kernel's swap in a memory cgroup).
//
// A job prepares its inputs once (generated, deterministic: the same bytes on every run), then
// runs under one setup at a time. Its result is right when its own check passes (digests equal
// before and after, every value read back) and its `result` (a digest of its output) equals the
// plain run's. Its speed is ops / seconds over the part it measures; relative to plain's.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/preload_setup.h"

namespace tiermem::bench {

// One run of one program under one setup.
struct ProgramResult {
  std::string error;            // "" when the program ran to its end within the deadline
  double seconds = 0;           // the measured part (the whole run, or a server's load)
  double ops = 0;               // operations in it (the job's unit)
  uint64_t peak_rss_bytes = 0;  // the program's (its largest process's) peak RSS
  uint64_t faults = 0;          // over the measured part: tiermem's remote faults, else major faults
  uint64_t major_faults = 0;
  std::string result;           // a digest of the output, compared with plain's ("" for none)
  bool self_check_ok = false;   // the job's own check
  std::string check_failed;     // what the job's own check found wrong
  nlohmann::json tiermem;       // tiermem runs: fault_latency_mean_us, policy_cpu_s, budget_relief_pages
};

struct ProgramJob {
  std::string name;
  std::string unit;                // what one op is ("request", "row", ...)
  std::vector<std::string> tools;  // programs it needs on PATH
  std::string size;                // the job's size and load, in words (JSON `job`)
  // Writes the inputs into `dir`; "" or the error.
  std::function<std::string(const std::string& dir)> prepare;
  // One run under `setup`; gives up at `deadline_ns` (NowNs clock) with an error.
  std::function<ProgramResult(const PreloadSetup& setup, const std::string& dir, uint64_t deadline_ns)> run;
};

// Every program, in the suite's order; `quick`: the small sizes of the ctest label `programs`.
std::vector<ProgramJob> ProgramJobs(bool quick);
std::vector<std::string> ProgramNames();

// A program run to its end under `setup` (sqlite3, liblinear-train, sort, g++): its wall time,
// its peak RSS and major faults from wait4 (its descendants' included), and with tiermem the
// remote faults of each of its processes (their TIERMEM_STATS files in `dir`).
struct BatchCommand {
  std::vector<std::string> argv;
  std::string stdin_path;
  std::map<std::string, std::string> env;
  double ops = 0;
  std::string* stdout_text = nullptr;  // where its stdout goes (else dropped)
};
ProgramResult RunBatch(const PreloadSetup& setup, const std::string& dir, const BatchCommand& cmd,
                       uint64_t deadline_ns);
// Where RunBatch's tiermem processes write their statistics at exit: TIERMEM_STATS's value for
// the command; a process it starts may append ".<pid>" (g++'s subprocesses do).
std::string StatsPrefix(const std::string& dir);

// A helper command (redis-cli, redis-benchmark) run plainly to its end; false with `error` when it
// could not start, failed or passed the deadline. Its stdout into `out` when given.
bool RunTool(const std::vector<std::string>& argv, uint64_t deadline_ns, std::string* error,
             std::string* out = nullptr, const std::string& stdin_path = "");

// 64-bit FNV-1a of a file's bytes as 16 hex digits; "" when it cannot be read.
std::string FileDigest(const std::string& path);
// tiermem's figures of a process from its TIERMEM_STATS line (the keys of TiermemFigures, and
// pages_evicted).
nlohmann::json TiermemStatsFigures(const nlohmann::json& stats);

// The server programs (bench/programs_servers.cc) and the batch ones (bench/programs_batch.cc).
ProgramJob RedisJob(bool quick);
ProgramJob MemcachedJob(bool quick);
ProgramJob SqliteJob(bool quick);
ProgramJob LiblinearJob(bool quick);
ProgramJob SortJob(bool quick);
ProgramJob GxxJob(bool quick);

}  // namespace tiermem::bench

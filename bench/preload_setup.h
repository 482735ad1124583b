// The three ways tiermem-bench's preload-hotset and memcached run an unmodified program, side by
// side, with the same DRAM budget:
//   plain        no preload, no limit
//   tiermem      LD_PRELOAD=libtiermem-preload.so with default settings, TIERMEM_DRAM_LIMIT = the
//                budget, TIERMEM_REMOTE = a memd on loopback (the benchmark's MemdChild)
//   kernel_swap  no preload, in a memory cgroup limited to the budget with a swap file of its own
//                (bench/kernel_swap.h), where the machine allows it
// and what is read from such a process while it runs: its fault counter (remote faults from
// tiermem's stats block for `tiermem`, major faults from /proc otherwise), RSS, DRAM residency.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/child.h"
#include "bench/cli.h"
#include "bench/kernel_swap.h"
#include "bench/memd_child.h"

namespace tiermem::bench {

inline const std::vector<std::string> kPreloadSetups = {"plain", "tiermem", "kernel_swap"};

struct PreloadSetupConfig {
  uint64_t dram_limit_bytes = 0;
  uint64_t swap_bytes = 0;           // kernel_swap: the swap file's size
  std::string swap_dir = "/var/tmp";
  std::string preload;               // libtiermem-preload.so
  const MemdChild* memd = nullptr;   // tiermem: a memd that runs (else the setup is skipped)
};

// One setup, ready to start its child: `options` gets the environment (and cgroup) of the setup.
// `skipped` says why it cannot run here ("" when it can).
struct PreloadSetup {
  std::string name;
  std::string skipped;
  ChildOptions options;
  std::unique_ptr<KernelSwap> swap;  // kernel_swap: removed when this setup is destroyed
};
PreloadSetup PrepareSetup(const std::string& name, const PreloadSetupConfig& config);

// A reading of a running (or stopped) child of a setup.
struct SetupReading {
  bool ok = false;
  std::string error;
  uint64_t faults = 0;         // tiermem: remote faults; plain, kernel_swap: major faults
  uint64_t major_faults = 0;
  uint64_t rss_bytes = 0;      // VmRSS
  uint64_t hwm_bytes = 0;      // VmHWM
  uint64_t dram_resident_bytes = 0;  // tiermem: its managed memory on DRAM
  // tiermem: its remote faults' latency (count, sum), its policy thread's CPU, its budget relief
  uint64_t fault_latency_count = 0, fault_latency_sum_ns = 0, policy_cpu_ns = 0, budget_relief_pages = 0;
  // tiermem: its write-protect faults, sampling faults, and evictions (written, clean)
  uint64_t write_protect_faults = 0, sampling_faults = 0, pages_evicted = 0, pages_written = 0;
  uint64_t cgroup_bytes = 0;         // kernel_swap: the cgroup's memory in use
};
SetupReading ReadSetup(const PreloadSetup& setup, pid_t pid);
// tiermem's figures between two readings of one process: remote_faults, fault_latency_mean_us,
// policy_cpu_s, budget_relief_pages, write_protect_faults, sampling_faults, pages_evicted,
// pages_written.
nlohmann::json TiermemFigures(const SetupReading& from, const SetupReading& to);
// "remote_faults" for tiermem, "major_faults" for the others.
const char* FaultCounterName(const std::string& setup);

// What preload-hotset and memcached have in common around their runs of one program.
struct PreloadBench {
  std::string setup_list = "plain,tiermem,kernel_swap";  // --setups, run in this order
  PreloadSetupConfig config;  // preload, swap_dir: flags; memd: filled in by RunPreloadBench
  uint64_t memd_bytes = 0;    // the capacity of the memd started for `tiermem`
  // When not 0 and the memd runs: before the setups, this many pages are written to it on a
  // connection of its own (64 requests in flight), and the report gets raw_write_pages_per_s,
  // the bare transport's rate, measured on the same memd in the same run.
  uint64_t raw_write_pages = 0;
  bool json = false;
  // Runs the program under a setup that can run here and gives its entry: with "verified", or
  // made by SetupFailed.
  std::function<nlohmann::json(const PreloadSetup&)> run;
  // The human line of an entry that ran (without --json).
  std::function<std::string(const nlohmann::json&)> line;
  // Called with the whole report before it is printed (e.g. to add keys from the entries).
  std::function<void(nlohmann::json&)> finish;
};

// The flags both take: --json, --setups, --preload, --swap-dir, into `bench`.
void AddPreloadFlags(CLI::App& app, PreloadBench& bench);

// Starts a memd on loopback when `tiermem` is among the setups, then runs each setup in order,
// prepared just before its run and torn down right after (kernel_swap's cgroup and swap file
// exist only that long). A setup that cannot run here is {name, skipped: reason}; the others get
// name and setup (environment, cgroup, swap file) added to their entry, and oom_kills where the
// cgroup's OOM killer ended the program. `report` gets setups, `command` and
// data_ok (false when a setup that ran did not verify its data, or failed other than by the
// cgroup's OOM killer), and is printed as one JSON line with
// --json; without it, a line per setup, then `summary`. Returns the exit status: 1 unless data_ok.
int RunPreloadBench(PreloadBench& bench, nlohmann::json& report, const std::string& command,
                    const std::string& summary);
// `entry` with error = why and verified = false.
nlohmann::json SetupFailed(nlohmann::json entry, const std::string& why);

}  // namespace tiermem::bench

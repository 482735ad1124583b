// The subcommands of tiermem-bench (see tiermem_bench.cc). Each Add function adds its subcommand
// and the subcommand's options to tiermem-bench's CLI11 app, and returns what runs it.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>

#include "bench/cli.h"
#include "bench/gups_three_tier.h"

namespace tiermem::bench {

Subcommand AddRemoteFault(CLI::App& bench);   // bench/remote_fault.cc
Subcommand AddCompare(CLI::App& bench);       // bench/compare.cc
Subcommand AddGups(CLI::App& bench);          // bench/gups.cc (and gups_kernel.cc: gups --kernel)
Subcommand AddKv(CLI::App& bench);            // bench/kv.cc
Subcommand AddKvReplay(CLI::App& bench);      // bench/kv_replay.cc
Subcommand AddMalloc(CLI::App& bench);        // bench/malloc_bench.cc
Subcommand AddPreloadHotset(CLI::App& bench); // bench/preload_hotset.cc
Subcommand AddMemcached(CLI::App& bench);     // bench/memcached.cc
Subcommand AddSampleCost(CLI::App& bench);    // bench/sample_cost.cc
Subcommand AddForkRemote(CLI::App& bench);    // bench/fork_remote.cc
Subcommand AddPrograms(CLI::App& bench);      // bench/programs.cc
Subcommand AddTrack(CLI::App& bench);         // bench/track.cc

// `gups --kernel` (bench/gups_kernel.cc): the options of that mode alone, which gups's subcommand
// carries beside its own (each needs --kernel), and the run.
struct KernelGupsArgs {
  bool no_hog = false, no_lock = false;
  uint64_t warmup_s = 60, baseline_s = 10, progress_s = 10;
  uint64_t node0_free = 2 * three_tier::kHot * three_tier::kChunkBytes;  // tiermem's DRAM budget in the guest test
};
void AddKernelGupsOptions(CLI::App& gups, CLI::Option* kernel, KernelGupsArgs& args);
int KernelGups(const KernelGupsArgs& args, uint64_t seconds);

}  // namespace tiermem::bench

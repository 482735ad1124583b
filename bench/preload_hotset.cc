// tiermem-bench preload-hotset: an unmodified C program (bench/hotset_prog.c,
// tiermem-hotset-prog) with a hot set that moves, run as a separate process under each setup of
// bench/preload_setup.h (plain, tiermem by LD_PRELOAD, the kernel's swap in a memory cgroup), all
// with a DRAM budget of 20% of its array.
//
// The program stops itself after its fill, halfway through each phase, at the phase boundary and
// after phase 2; at each stop this process reads the child's fault counter, RSS and DRAM
// residency, then continues it. Faults per update are the counter's growth over a phase divided
// by the phase's updates; over its second half (after warm-up: the window's fetch is over, in a
// placement that keeps the window) they compare with the steady state's ideal itself.
//
// The ideal: the independent reference model's optimal placement (Aho, Denning and Ullman's A0:
// with independent draws, the best any placement can do is to keep the most likely pages in the
// budget) keeps the hot window (a share h = 0.1 of the array, p = 0.9 of the updates) in DRAM and
// fills the rest of the budget (b = 0.2 of the array) with cold pages, so a fault is paid only by
// the cold updates that land outside DRAM:
//   b >= h:  ideal = (1 - p) * (1 - (b - h) / (1 - h))        = 0.1 * (1 - 0.1 / 0.9) = 0.0889
//   b <  h:  ideal = p * (1 - b / h) + (1 - p)
// in steady state. A phase whose window is new to DRAM costs a perfect placement one more fault
// per page of the window (ideal_move_faults): phase 2 after the move, and phase 1 too, since the
// fill leaves the last-written fifth of the array in DRAM, not the window at 30%. Per setup,
// ideal_faults_per_update_with_window is ideal + ideal_move_faults / the phase's updates.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/child.h"
#include "bench/cli.h"
#include "bench/compare_util.h"
#include "bench/preload_setup.h"
#include "bench/subcommands.h"
#include "tiermem/options.hpp"

namespace tiermem::bench {
namespace {

constexpr double kHotShare = 0.1;      // of the array: the hot window
constexpr double kHotUpdates = 0.9;    // of the updates: on the hot window
constexpr double kBudgetShare = 0.2;   // of the array: the DRAM budget

double IdealFaultsPerUpdate(double hot, double p_hot, double budget) {
  if (budget >= hot) return (1 - p_hot) * std::max(0.0, 1 - (budget - hot) / (1 - hot));
  return p_hot * (1 - budget / hot) + (1 - p_hot);
}

// Pages of the hot window: what a placement fetches once when a phase's window is new to DRAM.
uint64_t WindowPages(uint64_t bytes) { return static_cast<uint64_t>(static_cast<double>(bytes) * kHotShare) / 4096; }

struct Config {
  uint64_t bytes = 0, seconds = 0, updates = 0, timeout_s = 0;
  std::string prog;
};

// Runs the program under `setup`; the setup's JSON entry.
nlohmann::json RunHotset(const PreloadSetup& setup, const Config& c) {
  nlohmann::json e = nlohmann::json::object();
  ChildOptions o = setup.options;
  o.argv = {c.prog, "--size", std::to_string(c.bytes), "--seconds", std::to_string(c.seconds), "--updates",
            std::to_string(c.updates), "--stop-at-phases"};
  Child child;
  std::string err;
  const uint64_t t0 = NowNs(), deadline = t0 + c.timeout_s * 1'000'000'000ull;
  auto fail = [&](const std::string& why) { return SetupFailed(e, why); };
  if (!child.Start(o, &err)) return fail(err);
  // Stops: after the fill, halfway through phase 1, at the phase boundary, halfway through phase
  // 2, after phase 2.
  std::vector<SetupReading> at;
  for (int stop = 0; stop < 5; ++stop) {
    const Child::Event ev = child.Wait(deadline);
    if (ev == Child::Event::kTimedOut) {
      child.Stop(SIGKILL);
      return fail("timed out after " + std::to_string(c.timeout_s) + " s (--setup-timeout)");
    }
    if (ev == Child::Event::kExited) return fail("the program ended early: " + child.Describe());
    at.push_back(ReadSetup(setup, child.pid()));
    child.Continue();
    if (!at.back().ok) {
      child.Stop(SIGKILL);
      return fail(at.back().error);
    }
  }
  if (child.Wait(deadline) != Child::Event::kExited) {
    child.Stop(SIGKILL);
    return fail("timed out in the verification after " + std::to_string(c.timeout_s) + " s (--setup-timeout)");
  }
  e["wall_s"] = static_cast<double>(NowNs() - t0) / 1e9;
  e["exit"] = child.Describe();
  nlohmann::json prog = nlohmann::json::parse(child.Stdout(), nullptr, false);
  if (prog.is_discarded() || !prog.contains("updates")) {
    return fail("the program printed no result (" + child.Describe() + ")");
  }
  const bool verified = prog.value("verified", false) && child.Describe() == "exit 0";
  const std::vector<uint64_t> updates = prog["updates"];
  const std::vector<uint64_t> half = prog.value("half_updates", std::vector<uint64_t>{0, 0});
  const std::vector<double> secs = prog["seconds"];
  const double total_s = secs[0] + secs[1];
  e["updates_per_s"] = total_s > 0 ? static_cast<double>(updates[0] + updates[1]) / total_s : 0.0;
  e["peak_rss_bytes"] = prog["peak_rss_bytes"];
  nlohmann::json fpu = nlohmann::json::array(), major = nlohmann::json::array(), ideal = nlohmann::json::array();
  nlohmann::json second = nlohmann::json::array();
  for (int ph = 0; ph < 2; ++ph) {
    const SetupReading &from = at[2 * ph], &mid = at[2 * ph + 1], &to = at[2 * ph + 2];
    const double n = std::max<double>(1, static_cast<double>(updates[ph]));
    fpu.push_back(static_cast<double>(to.faults - from.faults) / n);
    const double n2 = std::max<double>(1, static_cast<double>(updates[ph] - std::min(updates[ph], half[ph])));
    second.push_back(static_cast<double>(to.faults - mid.faults) / n2);
    major.push_back(static_cast<double>(to.major_faults - from.major_faults) / n);
    ideal.push_back(IdealFaultsPerUpdate(kHotShare, kHotUpdates, kBudgetShare) + static_cast<double>(WindowPages(c.bytes)) / n);
  }
  e["faults_per_update"] = fpu;
  e["faults_per_update_second_half"] = second;
  e["ideal_faults_per_update_with_window"] = ideal;
  e["fault_counter"] = FaultCounterName(setup.name);
  e["major_faults_per_update"] = major;
  e["updates"] = updates;
  e["half_updates"] = half;
  e["seconds"] = secs;
  e["verified"] = verified;
  for (const char* k : {"start_rss_bytes", "fill_s", "verify_s"}) e[k] = prog[k];
  for (size_t k = 0; k < at.size(); k += 2) {  // after the fill, at the move, after phase 2
    const SetupReading& r = at[k];
    e["rss_bytes"].push_back(r.rss_bytes);
    if (setup.name == "tiermem") e["dram_resident_bytes"].push_back(r.dram_resident_bytes);
    if (setup.swap) e["cgroup_bytes"].push_back(r.cgroup_bytes);
  }
  return e;
}

struct Args {
  Args() {
    c.bytes = 1ull << 30;
    c.seconds = 20;
    c.timeout_s = 600;
  }
  Config c;
  PreloadBench bench;
};

int RunPreloadHotset(Args args, const std::string& command) {
  auto& [c, bench] = args;
  const std::string dir = SelfDir();
  c.prog = FirstExisting({dir + "/tiermem-hotset-prog", dir + "/../bench/tiermem-hotset-prog"});
  if (c.prog.empty()) {
    fprintf(stderr, "tiermem-bench preload-hotset: tiermem-hotset-prog not found next to %s\n", dir.c_str());
    return 1;
  }
  bench.config.dram_limit_bytes = static_cast<uint64_t>(static_cast<double>(c.bytes) * kBudgetShare) / 4096 * 4096;
  bench.config.swap_bytes = c.bytes + (c.bytes >> 2) + (64ull << 20);
  bench.memd_bytes = c.bytes * 2;
  bench.raw_write_pages = std::min<uint64_t>(65536, std::max<uint64_t>(c.bytes / 4096, 1024));
  bench.run = [&](const PreloadSetup& setup) { return RunHotset(setup, c); };
  bench.line = [](const nlohmann::json& e) {
    char line[256];
    snprintf(line, sizeof(line), "%12.0f updates/s  peak RSS %6.1f MiB  %s per update %.4f, %.4f (second halves %.4f, %.4f)  %s",
             e["updates_per_s"].get<double>(), e["peak_rss_bytes"].get<double>() / 1048576.0,
             e["fault_counter"].get<std::string>().c_str(), e["faults_per_update"][0].get<double>(),
             e["faults_per_update"][1].get<double>(), e["faults_per_update_second_half"][0].get<double>(),
             e["faults_per_update_second_half"][1].get<double>(), e["verified"].get<bool>() ? "verified" : "DATA LOST");
    return std::string(line);
  };
  // The program's own RSS before its array: the plain run's, else the first that ran. The fill's
  // bound: 1.5 x (plain's fill + the array beyond the limit written at the raw write rate).
  bench.finish = [](nlohmann::json& j) {
    double plain_fill = 0, tiermem_fill = 0;
    for (const nlohmann::json& e : j["setups"]) {
      if (e.contains("start_rss_bytes") && (j["baseline_rss_bytes"].is_null() || e["name"] == "plain")) {
        j["baseline_rss_bytes"] = e["start_rss_bytes"];
      }
      if (e.contains("fill_s") && e["name"] == "plain") plain_fill = e["fill_s"].get<double>();
      if (e.contains("fill_s") && e["name"] == "tiermem") tiermem_fill = e["fill_s"].get<double>();
    }
    const double raw = j.contains("raw_write_pages_per_s") && j["raw_write_pages_per_s"].is_number()
                           ? j["raw_write_pages_per_s"].get<double>()
                           : 0.0;
    if (plain_fill > 0 && tiermem_fill > 0 && raw > 0) {
      const double excess = static_cast<double>(j["array_bytes"].get<uint64_t>() - j["dram_limit_bytes"].get<uint64_t>());
      j["fill_bound_s"] = 1.5 * (plain_fill + excess / 4096.0 / raw);
      j["tiermem_fill_vs_bound"] = tiermem_fill / j["fill_bound_s"].get<double>();
    }
  };
  const double ideal = IdealFaultsPerUpdate(kHotShare, kHotUpdates, kBudgetShare);
  nlohmann::json j = {{"dram_limit_bytes", bench.config.dram_limit_bytes},
                      {"baseline_rss_bytes", nullptr},
                      {"ideal_faults_per_update", ideal},
                      {"ideal_move_faults", WindowPages(c.bytes)},
                      {"array_bytes", c.bytes},
                      {"hot_share", kHotShare},
                      {"hot_update_share", kHotUpdates},
                      {"seconds", c.seconds},
                      {"updates", c.updates}};
  char summary[128];
  snprintf(summary, sizeof(summary), "DRAM budget %.1f MiB; ideal faults per update %.4f",
           static_cast<double>(bench.config.dram_limit_bytes) / 1048576.0, ideal);
  return RunPreloadBench(bench, j, command, summary);
}

}  // namespace

Subcommand AddPreloadHotset(CLI::App& bench) {
  auto a = std::make_shared<Args>();
  CLI::App& app = *AddSubcommand(
      bench, "preload-hotset",
      "an unmodified C program with a moving hot set: plain, tiermem (LD_PRELOAD) and kernel swap",
      "An unmodified C program (tiermem-hotset-prog) fills an array of --size bytes, then adds to random "
      "8-byte words, 90% of them on a hot 10% of the array that moves once halfway (phase 1, phase 2), "
      "and verifies the array against checksums kept along. It runs as a separate process under each "
      "setup, all with a DRAM budget of 20% of the array: plain (no preload, no limit), tiermem "
      "(LD_PRELOAD=libtiermem-preload.so with default settings, TIERMEM_DRAM_LIMIT = the budget, "
      "TIERMEM_REMOTE = a memd on loopback started here; other TIERMEM_* variables of this process "
      "pass through), kernel_swap (a memory cgroup limited to the budget below this process's own, "
      "with a swap file made, swapped on and removed here; needs root; skipped with its reason "
      "where the machine does not allow it). Faults per update: tiermem's remote faults (its stats "
      "block, read while the program is stopped at the phase boundaries), major faults for the "
      "others. ideal_faults_per_update: the optimal placement under independent draws keeps the hot "
      "10% and another 10% of the array in DRAM, so (1 - 0.9) * (1 - (0.2 - 0.1) / (1 - 0.1)) = "
      "0.0889 (docs/tiering.md). Exit status 1 when a program did not verify its data.");
  AddSize(app, "--size", a->c.bytes, ParseSize, "1G", "16M", "256G", "bytes of the array");
  AddCount(app, "--seconds", a->c.seconds, ParseUint, "1", "86400", "seconds of updates per setup (half per phase)");
  AddCount(app, "--updates", a->c.updates, ParseUint, "0", "", "at most this many updates per setup (0: no count bound)");
  AddCount(app, "--setup-timeout", a->c.timeout_s, ParseUint, "10", "", "seconds a setup may take, fill and check included");
  AddPreloadFlags(app, a->bench);
  app.footer(
      "JSON keys (--json): dram_limit_bytes, baseline_rss_bytes, ideal_faults_per_update,\n"
      "  ideal_move_faults, array_bytes, hot_share, hot_update_share, seconds, updates, command,\n"
      "  data_ok, setups; with tiermem: raw_write_pages_per_s (the bare write stream to the same\n"
      "  memd, 64 requests in flight, before the setups), and with plain too fill_bound_s\n"
      "  (1.5 x (plain's fill_s + the bytes beyond the DRAM limit at that raw rate)) and\n"
      "  tiermem_fill_vs_bound (tiermem's fill_s over it: at most 1 is the goal).\n"
      "  setups[]: name, updates_per_s, peak_rss_bytes, faults_per_update [phase1, phase2],\n"
      "    faults_per_update_second_half [p1, p2] (the second half of each phase: its steady\n"
      "    state, to compare with ideal_faults_per_update),\n"
      "    fault_counter (remote_faults | major_faults), major_faults_per_update [p1, p2],\n"
      "    ideal_faults_per_update_with_window [p1, p2] (ideal + ideal_move_faults / the phase's\n"
      "    updates), updates [p1, p2], half_updates [p1, p2] (those of each first half),\n"
      "    seconds [p1, p2], verified, start_rss_bytes, fill_s,\n"
      "    verify_s, wall_s,\n"
      "    exit, rss_bytes [after fill, at the move, after phase 2], setup {env, cgroup,\n"
      "    cgroup_version, swap_file}; tiermem: dram_resident_bytes [3 points]; kernel_swap:\n"
      "    cgroup_bytes [3 points], oom_kills (where the OOM killer ended the program); a setup\n"
      "    that cannot run here: name, skipped (the reason);\n"
      "    one that failed: name, error, verified false.\n"
      "  data_ok: false when a setup did not verify its data or failed, except by the cgroup's\n"
      "    OOM killer (kernel_swap's result then, in its error; the exit status is 1 unless data_ok).\n"
      "  baseline_rss_bytes: the program's RSS when main starts, before its array (plain setup,\n"
      "    else the first that ran).\n"
      "Environment: TIERMEM_BENCH_MEMD_LOG=1 shows memd's log on stderr.");
  return {&app, [a](const std::string& command) { return RunPreloadHotset(*a, command); }};
}

}  // namespace tiermem::bench

// tiermem-bench sample-cost: what one access sample costs under each sampling mechanism, measured
// side by side in one run. A runtime with a memd on loopback (the soft sampler lives in the
// remote tier's pager) holds --size of DRAM pages, filled; one thread sweeps them (a read, or
// with --write a write, of one word per page) for --seconds while the policy thread arms
// TIERMEM_SAMPLE_PAGES pages per round. Modes: off (no sampling: the sweep's own speed), protect
// (PROT_NONE pages, SIGSEGV) and uffd (soft eviction: copy, drop, userfaultfd). Each mode is a
// runtime of its own, the modes interleaved --rounds times; medians are reported.
//
// Per mode: program_ns_per_sample = the sweep's time lost against off (wall time minus the
// sweeps at off's speed) over the accesses sampled; policy_ns_per_armed_page = the policy
// thread's CPU time over the pages it armed (arming, collecting, putting back).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/cli.h"
#include "bench/compare_util.h"
#include "bench/memd_child.h"
#include "bench/subcommands.h"
#include "tiermem/options.hpp"
#include "tiermem/tiermem.hpp"

namespace tiermem::bench {
namespace {

struct Run {
  bool ok = false;
  std::string error;
  double wall_s = 0;
  uint64_t sweeps = 0;
  uint64_t samples = 0, armed = 0, rounds = 0;
  double policy_cpu_s = 0;
  std::string sampling;  // the mode in effect, as the runtime reports it
  double lost_ns = -1;   // the sweep's time lost per sample against the round's off run
};

Run RunMode(const std::string& mode, const std::string& remote, size_t bytes, double seconds, bool write,
            uint64_t sample_pages, uint64_t interval_ms) {
  Run run;
  Options o;
  o.Set("remote", remote);
  o.Set("sample_mode", mode);
  o.Set("sample_pages", sample_pages);
  o.Set("sample_interval_ms", interval_ms);
  o.Set("prefetch", "off");
  auto rt = Runtime::Start(o);
  if (!rt.ok()) {
    run.error = rt.status().ToString();
    return run;
  }
  auto mem = (*rt)->Allocate(bytes, Tier::kDram);
  if (!mem.ok()) {
    run.error = mem.status().ToString();
    return run;
  }
  auto* p = static_cast<volatile uint64_t*>(*mem);
  const size_t pages = bytes / 4096, stride = 4096 / sizeof(uint64_t);
  for (size_t i = 0; i < pages; ++i) p[i * stride] = i;
  const RuntimeCounters before = (*rt)->Counters();
  const uint64_t t0 = NowNs(), end = t0 + static_cast<uint64_t>(seconds * 1e9);
  uint64_t sum = 0;
  while (NowNs() < end) {
    for (size_t i = 0; i < pages; ++i) {
      if (write) {
        p[i * stride] = p[i * stride] + 1;
      } else {
        sum += p[i * stride];
      }
    }
    ++run.sweeps;
  }
  run.wall_s = static_cast<double>(NowNs() - t0) / 1e9;
  const RuntimeCounters after = (*rt)->Counters();
  if (sum == 42) fprintf(stderr, " ");  // keeps the reads
  run.samples = after.samples - before.samples;
  run.armed = after.pages_armed - before.pages_armed;
  run.rounds = after.policy_rounds - before.policy_rounds;
  run.policy_cpu_s = static_cast<double>(after.policy_cpu_ns - before.policy_cpu_ns) / 1e9;
  run.sampling = after.sampling_mode;
  (void)(*rt)->Free(*mem);
  run.ok = true;
  return run;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

struct Args {
  size_t bytes = 64u << 20;
  uint64_t seconds = 2, rounds = 3, sample_pages = 4096, interval_ms = 10;
  bool write = false, json = false;
  std::string server;
};

int RunSampleCost(Args args, const std::string&) {
  auto& [bytes, seconds, rounds, sample_pages, interval_ms, write, json, server] = args;
  MemdChild memd;
  if (server.empty()) {
    if (!memd.Start(64u << 20)) {
      fprintf(stderr, "sample-cost: could not start tiermem-memd (%s)\n", MemdBinary().c_str());
      return 1;
    }
    server = memd.Url("tcp");
  }
  const std::vector<std::string> modes = {"off", "protect", "uffd"};
  std::vector<std::vector<Run>> runs(modes.size());
  std::vector<double> ratio;
  for (uint64_t r = 0; r < rounds; ++r) {
    std::vector<Run> these;
    for (const std::string& m : modes) {
      these.push_back(RunMode(m, server, bytes, static_cast<double>(seconds), write, sample_pages, interval_ms));
      if (!json) {
        const Run& x = these.back();
        fprintf(stderr, "round %llu %-8s %s sweeps %llu samples %llu armed %llu\n",
                static_cast<unsigned long long>(r), m.c_str(), x.ok ? "ok" : x.error.c_str(),
                static_cast<unsigned long long>(x.sweeps), static_cast<unsigned long long>(x.samples),
                static_cast<unsigned long long>(x.armed));
      }
    }
    // Time lost per sample, against the off run of the same round.
    auto lost_ns = [&](const Run& x) {
      const Run& off = these[0];
      if (!x.ok || !off.ok || off.sweeps == 0 || x.samples == 0) return -1.0;
      const double sweep_s = off.wall_s / static_cast<double>(off.sweeps);
      return std::max(0.0, x.wall_s - static_cast<double>(x.sweeps) * sweep_s) * 1e9 / static_cast<double>(x.samples);
    };
    const double p = lost_ns(these[1]), u = lost_ns(these[2]);
    if (p > 0 && u >= 0) ratio.push_back(u / p);
    for (size_t k = 0; k < modes.size(); ++k) runs[k].push_back(these[k]);
    for (size_t k = 1; k < modes.size(); ++k) runs[k].back().lost_ns = lost_ns(these[k]);
  }
  nlohmann::json out;
  out["size_bytes"] = bytes;
  out["seconds"] = seconds;
  out["rounds"] = rounds;
  out["access"] = write ? "write" : "read";
  out["sample_pages"] = sample_pages;
  out["interval_ms"] = interval_ms;
  out["uffd_vs_protect_program_ns"] = ratio.empty() ? nlohmann::json(nullptr) : nlohmann::json(Median(ratio));
  for (size_t k = 0; k < modes.size(); ++k) {
    nlohmann::json m;
    std::vector<double> rate, samples, armed, nrounds, lost, per_armed, cpu;
    bool ok = true;
    std::string error, sampling;
    for (const Run& x : runs[k]) {
      if (!x.ok) {
        ok = false;
        error = x.error;
        continue;
      }
      sampling = x.sampling;
      rate.push_back(static_cast<double>(x.sweeps) / x.wall_s);
      samples.push_back(static_cast<double>(x.samples));
      armed.push_back(static_cast<double>(x.armed));
      nrounds.push_back(static_cast<double>(x.rounds));
      cpu.push_back(x.policy_cpu_s / x.wall_s);
      if (x.lost_ns >= 0) lost.push_back(x.lost_ns);
      if (x.armed > 0) per_armed.push_back(x.policy_cpu_s * 1e9 / static_cast<double>(x.armed));
    }
    m["ok"] = ok;
    if (!ok) m["error"] = error;
    m["sampling"] = sampling;
    m["sweeps_per_s"] = Median(rate);
    m["samples"] = Median(samples);
    m["pages_armed"] = Median(armed);
    m["rounds"] = Median(nrounds);
    m["program_ns_per_sample"] = lost.empty() ? nlohmann::json(nullptr) : nlohmann::json(Median(lost));
    m["policy_ns_per_armed_page"] = per_armed.empty() ? nlohmann::json(nullptr) : nlohmann::json(Median(per_armed));
    m["policy_cpu_fraction"] = Median(cpu);
    m["system_call_safe"] = modes[k] != "protect";
    out["modes"][modes[k]] = m;
  }
  printf("%s\n", out.dump(2).c_str());
  return 0;
}

}  // namespace

Subcommand AddSampleCost(CLI::App& bench) {
  auto a = std::make_shared<Args>();
  CLI::App& app = *AddSubcommand(
      bench, "sample-cost", "the cost of one access sample: protection faults vs soft eviction vs none, side by side",
      "Measures the cost of one access sample under protection sampling (protect) and soft "
      "eviction (uffd) against no sampling (off), side by side, and prints one JSON object.");
  AddSize(app, "--size", a->bytes, ParseSize, "64M", "1M", "8G", "DRAM pages swept");
  AddCount(app, "--seconds", a->seconds, ParseUint, "1", "600", "length of one mode's run");
  AddCount(app, "--rounds", a->rounds, ParseUint, "1", "20", "interleaved rounds of the three modes");
  AddCount(app, "--sample-pages", a->sample_pages, ParseUint, "1", "4096", "TIERMEM_SAMPLE_PAGES");
  AddCount(app, "--interval-ms", a->interval_ms, ParseUint, "1", "1000", "TIERMEM_SAMPLE_INTERVAL_MS");
  AddSwitch(app, "--write", a->write, "the sweep writes each page (default: reads)");
  AddSwitch(app, "--json", a->json, "no progress lines on stderr (the JSON object is always printed)");
  app.add_option("--server", a->server, "use this memd instead of starting one")->type_name("tcp://HOST:PORT");
  app.footer(
      "JSON keys: size_bytes, seconds, rounds, access (read|write), sample_pages, interval_ms,\n"
      "  uffd_vs_protect_program_ns (median of the per-round ratios), modes.MODE (off, protect,\n"
      "  uffd): ok, sampling (the mode in effect), sweeps_per_s, samples, pages_armed, rounds,\n"
      "  program_ns_per_sample, policy_ns_per_armed_page, policy_cpu_fraction, system_call_safe,\n"
      "  error (only when it failed). Medians over the rounds.");
  return {&app, [a](const std::string& command) { return RunSampleCost(*a, command); }};
}

}  // namespace tiermem::bench

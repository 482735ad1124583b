#include "bench/preload_setup.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/raw_stream.h"
#include "tiermem/options.hpp"
#include "tiermem/remote.hpp"
#include "tiermem/stats.hpp"

namespace tiermem::bench {

PreloadSetup PrepareSetup(const std::string& name, const PreloadSetupConfig& config) {
  PreloadSetup s;
  s.name = name;
  if (name == "tiermem") {
    if (config.preload.empty()) {
      s.skipped = "libtiermem-preload.so not found (build the tiermem-preload target, or pass --preload)";
    } else if (config.memd == nullptr || config.memd->port() == 0) {
      s.skipped = "tiermem-memd did not start on loopback";
    } else {
      s.options.env = {{"LD_PRELOAD", config.preload},
                       {"TIERMEM_DRAM_LIMIT", std::to_string(config.dram_limit_bytes)},
                       {"TIERMEM_REMOTE", config.memd->Url("tcp")}};
    }
  } else if (name == "kernel_swap") {
    s.swap = KernelSwap::Open(config.dram_limit_bytes, config.swap_bytes, config.swap_dir, &s.skipped);
    if (s.swap) s.options.cgroup_procs = s.swap->procs_file();
  }
  return s;
}

const char* FaultCounterName(const std::string& setup) {
  return setup == "tiermem" ? "remote_faults" : "major_faults";
}

SetupReading ReadSetup(const PreloadSetup& setup, pid_t pid) {
  SetupReading r;
  const auto rss = ProcStatusBytes(pid, "VmRSS");
  const auto hwm = ProcStatusBytes(pid, "VmHWM");
  const auto majflt = ProcMajorFaults(pid);
  if (!rss || !hwm || !majflt) {
    r.error = "cannot read /proc/" + std::to_string(pid);
    return r;
  }
  r.rss_bytes = *rss;
  r.hwm_bytes = *hwm;
  r.major_faults = r.faults = *majflt;
  if (setup.name == "tiermem") {
    auto st = ReadProcessStats(pid);
    if (!st.ok()) {
      r.error = "no tiermem stats block: " + st.status().ToString();
      return r;
    }
    r.faults = st->remote_faults;
    r.dram_resident_bytes = st->dram_resident_bytes;
    r.fault_latency_count = st->fault_latency.count;
    r.fault_latency_sum_ns = st->fault_latency.sum_ns;
    r.policy_cpu_ns = st->policy_cpu_ns;
    r.budget_relief_pages = st->budget_relief_pages;
    r.write_protect_faults = st->write_protect_faults;
    r.sampling_faults = st->sampling_faults;
    r.pages_evicted = st->pages_evicted;
    r.pages_written = st->pages_written;
  }
  if (setup.swap) r.cgroup_bytes = setup.swap->UsageBytes();
  r.ok = true;
  return r;
}

nlohmann::json TiermemFigures(const SetupReading& from, const SetupReading& to) {
  const uint64_t n = to.fault_latency_count - from.fault_latency_count;
  return {{"remote_faults", to.faults - from.faults},
          {"fault_latency_mean_us", n > 0 ? static_cast<double>(to.fault_latency_sum_ns - from.fault_latency_sum_ns) /
                                                static_cast<double>(n) / 1e3
                                          : 0.0},
          {"policy_cpu_s", static_cast<double>(to.policy_cpu_ns - from.policy_cpu_ns) / 1e9},
          {"budget_relief_pages", to.budget_relief_pages - from.budget_relief_pages},
          {"write_protect_faults", to.write_protect_faults - from.write_protect_faults},
          {"sampling_faults", to.sampling_faults - from.sampling_faults},
          {"pages_evicted", to.pages_evicted - from.pages_evicted},
          {"pages_written", to.pages_written - from.pages_written}};
}

namespace {

// The bare write stream to `memd`: `pages` pages (of bytes that are not zero), 64 in flight.
StatusOr<double> RawWritePagesPerSecond(const MemdChild& memd, uint64_t pages) {
  std::string token;
  TIERMEM_RETURN_IF_ERROR(OptionFromEnv("TIERMEM_TOKEN", &token));
  TIERMEM_ASSIGN_OR_RETURN(std::unique_ptr<RemoteClient> c, RemoteClient::Connect(memd.Url("tcp"), token, 5000));
  TIERMEM_ASSIGN_OR_RETURN(RemotePages r, c->Allocate(pages));
  std::vector<uint8_t> buf(pages * 4096);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(i * 131 + 7);
  StatusOr<double> rate = TimedWritePagesPerSecond(*c, r, buf.data(), pages);
  (void)c->Free(r);
  return rate;
}

nlohmann::json DescribeSetup(const PreloadSetup& setup) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : setup.options.env) j["env"][k] = v;
  if (setup.swap) {
    j["cgroup"] = setup.swap->cgroup_dir();
    j["cgroup_version"] = setup.swap->cgroup_version();
    j["swap_file"] = setup.swap->swap_file();
  }
  return j;
}

}  // namespace

nlohmann::json SetupFailed(nlohmann::json entry, const std::string& why) {
  entry["error"] = why;
  entry["verified"] = false;
  return entry;
}

void AddPreloadFlags(CLI::App& app, PreloadBench& bench) {
  AddSwitch(app, "--json", bench.json, "print one JSON object instead of a line per setup");
  app.add_option("--setups", bench.setup_list, "setups to run, in this order")
      ->check(ListOf(kPreloadSetups))
      ->capture_default_str();
  app.add_option("--preload", bench.config.preload,
                 "tiermem's preload library (default: libtiermem-preload.so of this build or install)")
      ->type_name("PATH");
  app.add_option("--swap-dir", bench.config.swap_dir, "kernel_swap: where the swap file goes (ext4 or xfs, not tmpfs)")
      ->capture_default_str();
}

int RunPreloadBench(PreloadBench& bench, nlohmann::json& report, const std::string& command,
                    const std::string& summary) {
  if (bench.config.preload.empty()) bench.config.preload = PreloadLibrary();
  MemdChild memd;
  const std::vector<std::string> names = SplitList(bench.setup_list);
  if (std::find(names.begin(), names.end(), "tiermem") != names.end() && memd.Start(bench.memd_bytes)) {
    bench.config.memd = &memd;
    if (bench.raw_write_pages != 0) {
      auto rate = RawWritePagesPerSecond(memd, bench.raw_write_pages);
      if (rate.ok()) {
        report["raw_write_pages_per_s"] = *rate;
      } else {
        report["raw_write_pages_per_s"] = nullptr;
        fprintf(stderr, "raw write stream to %s: %s\n", memd.Url("tcp").c_str(), rate.status().ToString().c_str());
      }
    }
  }
  bool data_ok = true;
  report["setups"] = nlohmann::json::array();
  for (const std::string& name : names) {
    nlohmann::json e;
    {
      const PreloadSetup setup = PrepareSetup(name, bench.config);
      if (!setup.skipped.empty()) {
        e["skipped"] = setup.skipped;
      } else {
        e = bench.run(setup);
        e["setup"] = DescribeSetup(setup);
        // The kernel may give up on a program it cannot keep within the cgroup's limit (memcg OOM:
        // reclaim that did not keep up, seen with budgets of a few MiB on a loaded machine). That
        // is the setup's result, reported as its error, not data lost: data_ok stays as it is.
        const uint64_t oom_kills = setup.swap ? setup.swap->OomKills() : 0;
        if (oom_kills > 0) e["oom_kills"] = oom_kills;
        if (oom_kills > 0 && e.contains("error")) {
          e["error"] = "the cgroup's OOM killer ended the program (limit " +
                       std::to_string(bench.config.dram_limit_bytes) + " bytes): " + e["error"].get<std::string>();
        } else if (!e.value("verified", false)) {
          data_ok = false;
        }
      }
    }
    e["name"] = name;
    if (!bench.json) {
      const std::string text = e.contains("skipped") ? "skipped: " + e["skipped"].get<std::string>()
                               : e.contains("error") ? "FAILED: " + e["error"].get<std::string>()
                                                     : bench.line(e);
      printf("%-12s %s\n", name.c_str(), text.c_str());
    }
    report["setups"].push_back(e);
  }
  bench.config.memd = nullptr;
  report["command"] = command;
  report["data_ok"] = data_ok;
  if (bench.finish) bench.finish(report);
  if (bench.json) {
    printf("%s\n", report.dump().c_str());
  } else {
    printf("%s\n", summary.c_str());
  }
  return data_ok ? 0 : 1;
}

}  // namespace tiermem::bench

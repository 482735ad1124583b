// tiermem-bench memcached: an unmodified memcached (Debian's package) under each setup of
// bench/preload_setup.h (plain, tiermem by LD_PRELOAD, the kernel's swap in a memory cgroup),
// with a DRAM budget of a sixth of the data, loaded by bench/memcached_client.h on loopback: every
// key stored once, then gets with a hot set of keys, every value checked. Per setup: gets/s, p50
// and p99 of a get, memcached's RSS (at the start, its peak, at the end) and its faults.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/child.h"
#include "bench/cli.h"
#include "bench/compare_util.h"
#include "bench/memcached.h"
#include "bench/preload_setup.h"
#include "bench/subcommands.h"
#include "tiermem/options.hpp"

namespace tiermem::bench {
namespace {

// memcached writes "TCP INET: <port>" to $MEMCACHED_PORT_FILENAME once it listens (-p -1: a port
// the kernel picks); 0 when it did not within 10 s or exited.
uint16_t WaitForPort(Child& child, const std::string& port_file) {
  for (int i = 0; i < 1000; ++i) {
    std::ifstream f(port_file);
    std::string line;
    while (std::getline(f, line)) {
      unsigned port = 0;
      if (sscanf(line.c_str(), "TCP INET: %u", &port) == 1 && port > 0) return static_cast<uint16_t>(port);
    }
    if (child.Wait(NowNs()) == Child::Event::kExited) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return 0;
}

}  // namespace

nlohmann::json RunMemcached(const PreloadSetup& setup, const McServerConfig& c) {
  nlohmann::json e = nlohmann::json::object();
  auto fail = [&](const std::string& why) { return SetupFailed(e, why); };
  char dir[] = "/tmp/tiermem-bench-mc-XXXXXX";
  if (mkdtemp(dir) == nullptr) return fail("mkdtemp failed");
  const std::string port_file = std::string(dir) + "/port";
  ChildOptions o = setup.options;
  o.argv = {c.memcached, "-l", "127.0.0.1", "-p", "-1", "-U", "0", "-m", std::to_string(c.item_mb), "-t",
            std::to_string(c.threads), "-c", "1024"};
  if (geteuid() == 0) o.argv.insert(o.argv.end(), {"-u", "root"});
  o.env["MEMCACHED_PORT_FILENAME"] = port_file;
  Child child;
  std::string err;
  const uint64_t t0 = NowNs();
  const bool started = child.Start(o, &err);
  McLoad load = c.load;
  load.port = started ? WaitForPort(child, port_file) : 0;
  unlink(port_file.c_str());
  rmdir(dir);
  if (!started) return fail(err);
  if (load.port == 0) {
    child.Stop(SIGKILL);
    return fail("memcached did not listen within 10 s (" + child.Describe() + ")");
  }
  const SetupReading start = ReadSetup(setup, child.pid());
  const uint64_t tf = NowNs();
  const McResult fill = FillKeys(load);
  const double fill_s = static_cast<double>(NowNs() - tf) / 1e9;
  const SetupReading filled = ReadSetup(setup, child.pid());
  McResult gets;
  if (fill.ok) gets = RunGets(load);
  const SetupReading end = ReadSetup(setup, child.pid());
  child.Stop(SIGTERM);
  e["wall_s"] = static_cast<double>(NowNs() - t0) / 1e9;
  if (!fill.ok) return fail("fill: " + fill.error);
  if (!gets.ok) return fail("gets: " + gets.error);
  if (!start.ok || !end.ok) return fail(!start.ok ? start.error : end.error);
  const bool verified = gets.wrong == 0 && gets.misses == 0 && fill.requests == load.keys;
  e["gets_per_s"] = gets.seconds > 0 ? static_cast<double>(gets.requests) / gets.seconds : 0.0;
  e["p50_us"] = gets.p50_ns / 1e3;
  e["p99_us"] = gets.p99_ns / 1e3;
  e["peak_rss_bytes"] = end.hwm_bytes;
  e["start_rss_bytes"] = start.rss_bytes;
  e["filled_rss_bytes"] = filled.rss_bytes;
  e["end_rss_bytes"] = end.rss_bytes;
  e["gets"] = gets.requests;
  e["values_checked"] = gets.requests - gets.misses;
  e["misses"] = gets.misses;
  e["wrong_values"] = gets.wrong;
  e["sets"] = fill.requests;
  e["fill_s"] = fill_s;
  e["gets_s"] = gets.seconds;
  e["fault_counter"] = FaultCounterName(setup.name);
  e["faults_per_get"] = gets.requests > 0 ? static_cast<double>(end.faults - filled.faults) /
                                                static_cast<double>(gets.requests)
                                          : 0.0;
  e["fill_faults"] = filled.faults - start.faults;
  e["verified"] = verified;
  if (setup.name == "tiermem") {
    e["dram_resident_bytes"] = {start.dram_resident_bytes, filled.dram_resident_bytes, end.dram_resident_bytes};
    e["tiermem_gets"] = TiermemFigures(filled, end);
  }
  if (setup.swap) e["cgroup_bytes"] = {start.cgroup_bytes, filled.cgroup_bytes, end.cgroup_bytes};
  return e;
}

namespace {

struct Args {
  Args() {
    c.load.keys = 200000;
    c.load.connections = 4;
  }
  McServerConfig c;
  uint64_t seconds = 20, conns = 4, threads = 4;
  PreloadBench bench;
};

int RunMemcachedBench(Args args, const std::string& command) {
  auto& [c, seconds, conns, threads, bench] = args;
  c.load.seconds = static_cast<double>(seconds);
  c.load.connections = static_cast<int>(conns);
  c.threads = static_cast<int>(threads);
  if (c.memcached.empty()) c.memcached = OnPath("memcached");
  if (c.memcached.empty() || access(c.memcached.c_str(), X_OK) != 0) {
    fprintf(stderr, "tiermem-bench memcached: no memcached (install Debian's memcached, or pass --memcached)\n");
    return 1;
  }
  uint64_t data = 0, hot = 0;
  for (uint64_t k = 0; k < c.load.keys; ++k) data += McValueSize(k), hot += McHotKey(k);
  c.item_mb = McItemMegabytes(data);
  bench.config.dram_limit_bytes = data / 6 / 4096 * 4096;
  bench.config.swap_bytes = data * 2 + (64ull << 20);
  bench.memd_bytes = data * 3;
  bench.run = [&](const PreloadSetup& setup) { return RunMemcached(setup, c); };
  bench.line = [](const nlohmann::json& e) {
    char line[256];
    snprintf(line, sizeof(line), "%10.0f gets/s  p99 %8.1f us  RSS start %6.1f peak %6.1f MiB  %s per get %.4f  %s",
             e["gets_per_s"].get<double>(), e["p99_us"].get<double>(), e["start_rss_bytes"].get<double>() / 1048576.0,
             e["peak_rss_bytes"].get<double>() / 1048576.0, e["fault_counter"].get<std::string>().c_str(),
             e["faults_per_get"].get<double>(), e["verified"].get<bool>() ? "every value checked" : "VALUES WRONG OR MISSING");
    return std::string(line);
  };
  nlohmann::json j = {{"dram_limit_bytes", bench.config.dram_limit_bytes}, {"data_bytes", data},
                      {"keys", c.load.keys}, {"hot_keys", hot}, {"connections", c.load.connections},
                      {"seconds", seconds}, {"memcached_item_mb", c.item_mb}};
  char summary[128];
  snprintf(summary, sizeof(summary), "data %.1f MiB, DRAM budget %.1f MiB", static_cast<double>(data) / 1048576.0,
           static_cast<double>(bench.config.dram_limit_bytes) / 1048576.0);
  return RunPreloadBench(bench, j, command, summary);
}

}  // namespace

Subcommand AddMemcached(CLI::App& bench) {
  auto a = std::make_shared<Args>();
  CLI::App& app = *AddSubcommand(
      bench, "memcached",
      "memcached with a hot set of keys: plain, tiermem (LD_PRELOAD) and kernel swap; gets/s, p99, RSS",
      "memcached (the system's, or --memcached) under each setup, loaded on loopback by tiermem's own "
      "client: --keys values of 256-4096 bytes whose bytes derive from the key are stored once, then "
      "gets on --connections connections, 90% of them for a hot 10% of the keys (spread over the key "
      "space), every value checked. DRAM budget: a sixth of the data (the values' bytes). Setups: "
      "plain (no preload, no limit), tiermem (LD_PRELOAD=libtiermem-preload.so with default settings, "
      "TIERMEM_DRAM_LIMIT = the budget, TIERMEM_REMOTE = a memd on loopback started here), kernel_swap "
      "(a memory cgroup limited to the budget with a swap file made and removed here; needs root; "
      "skipped with its reason where the machine does not allow it). RSS is memcached's own "
      "(/proc/PID/status). Exit status 1 when a value was wrong or missing.");
  AddCount(app, "--keys", a->c.load.keys, ParseUint, "100", "100000000", "keys stored (about 2.2 KB each on average)");
  AddCount(app, "--connections", a->conns, ParseUint, "1", "256", "client connections, one thread each");
  AddCount(app, "--seconds", a->seconds, ParseUint, "1", "86400", "seconds of gets per setup");
  AddCount(app, "--gets", a->c.load.max_gets, ParseUint, "0", "", "at most this many gets per setup (0: no count bound)");
  AddCount(app, "--threads", a->threads, ParseUint, "1", "64", "memcached's worker threads (-t)");
  AddPreloadFlags(app, a->bench);
  app.footer(
      "JSON keys (--json): dram_limit_bytes, data_bytes, keys, hot_keys, connections, seconds,\n"
      "  memcached_item_mb, command, data_ok, setups.\n"
      "  setups[]: name, gets_per_s, p50_us, p99_us, peak_rss_bytes, start_rss_bytes (memcached\n"
      "    listening, nothing stored), filled_rss_bytes, end_rss_bytes, gets, values_checked,\n"
      "    misses, wrong_values, sets, fill_s, gets_s, wall_s, fault_counter (remote_faults |\n"
      "    major_faults), faults_per_get, fill_faults, verified, setup {env, cgroup,\n"
      "    cgroup_version, swap_file}; tiermem: dram_resident_bytes [started, filled, end],\n"
      "    tiermem_gets {remote_faults, fault_latency_mean_us, policy_cpu_s, budget_relief_pages}\n"
      "    (over the gets);\n"
      "    kernel_swap: cgroup_bytes [started, filled, end], oom_kills (where the OOM killer ended\n"
      "    memcached); a setup that cannot run here: name,\n"
      "    skipped (the reason); one that failed: name, error, verified false.\n"
      "  data_ok: false when a setup did not verify its data or failed, except by the cgroup's\n"
      "    OOM killer (kernel_swap's result then, in its error; the exit status is 1 unless data_ok).\n"
      "Environment: TIERMEM_BENCH_MEMD_LOG=1 shows memd's log on stderr.");
  return {&app, [a](const std::string& command) { return RunMemcachedBench(*a, command); }};
}

}  // namespace tiermem::bench

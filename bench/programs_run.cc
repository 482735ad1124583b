// Running the programs of `tiermem-bench programs` (bench/programs.h): a batch program to its
// end under a setup, a helper command plainly, digests of outputs, tiermem's figures.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "bench/child.h"
#include "bench/compare_util.h"
#include "bench/programs.h"

namespace tiermem::bench {

std::string StatsPrefix(const std::string& dir) { return dir + "/tiermem-stats"; }

std::string FileDigest(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  uint64_t h = 0xcbf29ce484222325ull;
  static thread_local char buf[1 << 16];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) {
    for (ssize_t i = 0; i < n; ++i) h = (h ^ static_cast<uint8_t>(buf[i])) * 0x100000001b3ull;
  }
  close(fd);
  if (n < 0) return "";
  char hex[17];
  snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

// The counters of a stats line the figures carry as they are (summed over a batch's processes).
constexpr const char* kSummedCounters[] = {"remote_faults",        "write_protect_faults", "sampling_faults",
                                           "budget_relief_pages",  "pages_evicted",        "pages_written",
                                           "evictions_clean"};

nlohmann::json TiermemStatsFigures(const nlohmann::json& stats) {
  const nlohmann::json& lat = stats.value("fault_latency", nlohmann::json::object());
  const double count = lat.value("count", 0.0);
  nlohmann::json fig = {{"fault_latency_mean_us", count > 0 ? lat.value("sum_ns", 0.0) / count / 1e3 : 0.0},
                        {"policy_cpu_s", stats.value("policy_cpu_ns", 0.0) / 1e9}};
  for (const char* k : kSummedCounters) fig[k] = stats.value(k, 0ull);
  return fig;
}

namespace {

// The TIERMEM_STATS lines the processes of a batch run left under `prefix` (removed once read),
// added up: the counters of kSummedCounters, fault latency (count-weighted), policy CPU.
nlohmann::json CollectStats(const std::string& dir, const std::string& prefix) {
  nlohmann::json sum = TiermemStatsFigures(nlohmann::json::object());
  uint64_t processes = 0;
  double latency_sum_us = 0;
  DIR* d = opendir(dir.c_str());
  const std::string base = prefix.substr(prefix.rfind('/') + 1);
  while (d != nullptr) {
    dirent* e = readdir(d);
    if (e == nullptr) break;
    const std::string name = e->d_name;
    if (name.rfind(base, 0) != 0) continue;
    const std::string path = dir + "/" + name;
    std::ifstream f(path);
    std::string line, last;
    while (std::getline(f, line)) {
      if (!line.empty()) last = line;
    }
    unlink(path.c_str());
    const nlohmann::json j = nlohmann::json::parse(last, nullptr, false);
    if (j.is_discarded()) continue;
    const nlohmann::json fig = TiermemStatsFigures(j);
    for (const char* k : kSummedCounters) sum[k] = sum[k].get<uint64_t>() + fig[k].get<uint64_t>();
    latency_sum_us += fig["fault_latency_mean_us"].get<double>() * fig["remote_faults"].get<double>();
    sum["policy_cpu_s"] = sum["policy_cpu_s"].get<double>() + fig["policy_cpu_s"].get<double>();
    ++processes;
  }
  if (d != nullptr) closedir(d);
  const uint64_t faults = sum["remote_faults"];
  sum["fault_latency_mean_us"] = faults > 0 ? latency_sum_us / static_cast<double>(faults) : 0.0;
  sum["processes"] = processes;
  return sum;
}

}  // namespace

ProgramResult RunBatch(const PreloadSetup& setup, const std::string& dir, const BatchCommand& cmd,
                       uint64_t deadline_ns) {
  ProgramResult r;
  ChildOptions o = setup.options;
  o.argv = cmd.argv;
  o.stdin_path = cmd.stdin_path;
  for (const auto& [k, v] : cmd.env) o.env[k] = v;
  const bool tiermem = setup.name == "tiermem";
  if (tiermem) o.env["TIERMEM_STATS"] = StatsPrefix(dir);
  Child child;
  const uint64_t t0 = NowNs();
  if (!child.Start(o, &r.error)) return r;
  if (child.Wait(deadline_ns) != Child::Event::kExited) {
    child.Stop(SIGKILL);
    r.error = "timed out";
    return r;
  }
  r.seconds = static_cast<double>(NowNs() - t0) / 1e9;
  r.ops = cmd.ops;
  // wait4's rusage: the largest of the process and its waited-for descendants, their faults summed.
  r.peak_rss_bytes = static_cast<uint64_t>(child.usage().ru_maxrss) * 1024;
  r.major_faults = r.faults = static_cast<uint64_t>(child.usage().ru_majflt);
  if (tiermem) {
    r.tiermem = CollectStats(dir, StatsPrefix(dir));
    r.faults = r.tiermem["remote_faults"];
  }
  if (cmd.stdout_text != nullptr) *cmd.stdout_text = child.Stdout();
  if (child.Describe() != "exit 0") r.error = cmd.argv[0] + " ended with " + child.Describe();
  return r;
}

bool RunTool(const std::vector<std::string>& argv, uint64_t deadline_ns, std::string* error, std::string* out,
             const std::string& stdin_path) {
  Child child;
  ChildOptions o;
  o.argv = argv;
  o.stdin_path = stdin_path;
  o.quiet_stderr = true;
  std::string err;
  if (!child.Start(o, &err)) {
    *error = argv[0] + ": " + err;
    return false;
  }
  if (child.Wait(deadline_ns) != Child::Event::kExited) {
    child.Stop(SIGKILL);
    *error = argv[0] + ": timed out";
    return false;
  }
  if (out != nullptr) *out = child.Stdout();
  if (child.Describe() != "exit 0") {
    *error = argv[0] + " ended with " + child.Describe();
    return false;
  }
  return true;
}

}  // namespace tiermem::bench

// tiermem-bench programs: real programs from Debian's packages (bench/programs.h), each run plain
// (its peak RSS sets the scale), under tiermem (LD_PRELOAD, TIERMEM_DRAM_LIMIT a share of that
// peak, a memd on loopback) and under the kernel's swap (a memory cgroup limited to the same
// share, a swap file of its own), with the share of its peak that keeps 0.9x plain's speed found
// by bisection for each.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/child.h"
#include "bench/cli.h"
#include "bench/compare_util.h"
#include "bench/programs.h"
#include "bench/subcommands.h"
#include "tiermem/options.hpp"

namespace tiermem::bench {

std::vector<ProgramJob> ProgramJobs(bool quick) {
  return {RedisJob(quick), MemcachedJob(quick), SqliteJob(quick), LiblinearJob(quick), SortJob(quick), GxxJob(quick)};
}

std::vector<std::string> ProgramNames() {
  std::vector<std::string> names;
  for (const ProgramJob& j : ProgramJobs(true)) names.push_back(j.name);
  return names;
}

namespace {

constexpr double kKeepSpeed = 0.9;  // dram_share_at_0_9: the smallest share that keeps this
// How far above its DRAM limit a run's peak RSS may go, as a share of plain's peak, and still
// count as kept: what no limit covers (the program's text and stacks, the runtime's own memory,
// page tables). A program whose memory does not come from malloc (cc1plus's collector maps its
// own) keeps no limit under the preload library; its speed then says nothing of the share.
constexpr double kUncoveredShare = 0.25;

struct Config {
  std::string programs, setups = "tiermem,kernel_swap", shares = "0.5,0.25,0.125", work_dir = "/var/tmp";
  uint64_t bisect = 1, timeout_factor = 3, min_timeout_s = 20;
  bool quick = false, json = false;
  PreloadSetupConfig setup;  // preload, swap_dir; dram_limit_bytes and swap_bytes per run
};

// What every run of one program is compared with: its plain run.
struct Plain {
  double ops_per_s = 0, wall_s = 0;
  uint64_t peak_rss_bytes = 0;
  std::string result;
};

// One run of `job` under `setup_name` (plain: no limit) at `share` of plain's peak; its entry of runs[].
nlohmann::json RunOnce(const ProgramJob& job, const std::string& setup_name, double share, const Plain& plain,
                       const std::string& dir, Config& c) {
  nlohmann::json e = {{"setup", setup_name}, {"dram_share", share}, {"relative_speed", nullptr},
                      {"result_ok", false},  {"peak_rss_bytes", nullptr}, {"faults_per_op", nullptr},
                      {"error", nullptr}};
  c.setup.dram_limit_bytes = static_cast<uint64_t>(share * static_cast<double>(plain.peak_rss_bytes)) / 4096 * 4096;
  c.setup.swap_bytes = plain.peak_rss_bytes * 3 / 2 + (64ull << 20);
  if (setup_name != "plain") e["dram_limit_bytes"] = c.setup.dram_limit_bytes;
  const PreloadSetup setup = PrepareSetup(setup_name, c.setup);
  if (!setup.skipped.empty()) {
    e["error"] = "skipped: " + setup.skipped;
    return e;
  }
  // plain's own run: the longest a command of tiermem-bench may take (10 minutes).
  const double timeout_s = setup_name == "plain" ? 600.0
                           : std::max(static_cast<double>(c.min_timeout_s), static_cast<double>(c.timeout_factor) * plain.wall_s);
  const uint64_t t0 = NowNs();
  ProgramResult r = job.run(setup, dir, t0 + static_cast<uint64_t>(timeout_s * 1e9));
  e["wall_s"] = static_cast<double>(NowNs() - t0) / 1e9;
  if (r.error == "timed out" || r.error.find(": timed out") != std::string::npos) {
    char why[128];
    snprintf(why, sizeof(why), "timed out after %.0f s (%" PRIu64 "x plain's run, at least %" PRIu64 " s): ", timeout_s,
             c.timeout_factor, c.min_timeout_s);
    r.error = why + r.error;
  }
  const uint64_t oom = setup.swap ? setup.swap->OomKills() : 0;
  if (setup.swap) {  // an OOM kill with swap to spare is the kernel's reclaim giving up, not a full file
    e["swap_file_bytes"] = c.setup.swap_bytes;
    e["swap_peak_bytes"] = setup.swap->SwapPeakBytes();
  }
  if (oom > 0) {
    e["oom_kills"] = oom;
    r.error = "the cgroup's OOM killer ended the program (limit " + std::to_string(c.setup.dram_limit_bytes) +
              " bytes)" + (r.error.empty() ? "" : ": " + r.error);
  }
  if (!r.result.empty()) e["result_digest"] = r.result;
  const bool same = setup_name == "plain" || r.result == plain.result;
  e["result_ok"] = r.error.empty() && r.self_check_ok && same;
  if (!r.check_failed.empty()) e["check_failed"] = r.check_failed;
  if (r.error.empty() && r.self_check_ok && !same) e["check_failed"] = "output differs from plain's (" + r.result + ")";
  if (!r.error.empty()) {
    e["error"] = r.error;
    return e;
  }
  e["seconds"] = r.seconds;
  e["ops"] = r.ops;
  e["ops_per_s"] = r.seconds > 0 ? r.ops / r.seconds : 0.0;
  e["relative_speed"] = plain.ops_per_s > 0 && r.seconds > 0 ? r.ops / r.seconds / plain.ops_per_s : 1.0;
  e["peak_rss_bytes"] = r.peak_rss_bytes;
  if (setup_name != "plain" && plain.peak_rss_bytes > 0) {
    const double peak = static_cast<double>(r.peak_rss_bytes), base = static_cast<double>(plain.peak_rss_bytes);
    e["peak_share"] = peak / base;
    e["limit_kept"] = peak <= static_cast<double>(c.setup.dram_limit_bytes) + kUncoveredShare * base;
  }
  e["faults_per_op"] = r.ops > 0 ? static_cast<double>(r.faults) / r.ops : 0.0;
  e["fault_counter"] = FaultCounterName(setup_name);
  if (!r.tiermem.is_null()) e["tiermem"] = r.tiermem;
  return e;
}

bool KeepsSpeed(const nlohmann::json& e) {
  return e["result_ok"].get<bool>() && e["relative_speed"].is_number() && e["relative_speed"].get<double>() >= kKeepSpeed &&
         e.value("limit_kept", true);
}

// The smallest share of `setup`'s runs that kept 0.9x plain and their limit, after `steps` more runs: halving
// below the smallest that kept it while none below failed, else bisecting between the largest
// that failed and the smallest that kept it (1.0, unmeasured, when none did). null when none did.
nlohmann::json ShareAtSpeed(const ProgramJob& job, const std::string& setup, const Plain& plain, const std::string& dir,
                            Config& c, nlohmann::json& runs, const std::function<void(const nlohmann::json&)>& show) {
  auto bounds = [&](double* kept, double* failed) {
    *kept = 1.0, *failed = 0.0;
    bool any = false;
    for (const nlohmann::json& e : runs) {
      if (e["setup"] != setup) continue;
      const double s = e["dram_share"];
      if (KeepsSpeed(e) && s <= *kept) *kept = s, any = true;
    }
    for (const nlohmann::json& e : runs) {
      const double s = e["dram_share"];
      if (e["setup"] == setup && !KeepsSpeed(e) && s < *kept) *failed = std::max(*failed, s);
    }
    return any;
  };
  double kept = 1.0, failed = 0.0;
  for (const nlohmann::json& e : runs) {  // a setup that cannot run here: nothing to look for
    if (e["setup"] == setup && e["error"].is_string() && e["error"].get<std::string>().rfind("skipped: ", 0) == 0) {
      return nullptr;
    }
  }
  for (uint64_t step = 0; step < c.bisect; ++step) {
    bounds(&kept, &failed);
    const double mid = failed == 0.0 ? kept / 2 : (kept + failed) / 2;
    runs.push_back(RunOnce(job, setup, std::round(mid * 4096) / 4096, plain, dir, c));
    runs.back()["bisection"] = true;
    show(runs.back());
  }
  return bounds(&kept, &failed) ? nlohmann::json(kept) : nlohmann::json(nullptr);
}

// A line per run: on stdout, or on stderr with --json (its progress).
void ShowRun(const std::string& program, const nlohmann::json& e, bool json) {
  char speed[32] = "-", faults[32] = "-";
  if (e["relative_speed"].is_number()) snprintf(speed, sizeof(speed), "%.3fx", e["relative_speed"].get<double>());
  if (e["faults_per_op"].is_number()) snprintf(faults, sizeof(faults), "%.4f", e["faults_per_op"].get<double>());
  const double rss = e["peak_rss_bytes"].is_number() ? e["peak_rss_bytes"].get<double>() / 1048576.0 : 0.0;
  const char* over = e.value("limit_kept", true) ? "" : " (over its limit)";
  fprintf(json ? stderr : stdout, "%-10s %-12s share %6.4f  speed %-8s peak RSS %7.1f MiB%s  faults/op %-8s %s%s\n",
         program.c_str(), e["setup"].get<std::string>().c_str(), e["dram_share"].get<double>(), speed, rss, over, faults,
         e["result_ok"].get<bool>() ? "result ok" : "RESULT NOT OK",
         e["error"].is_string() ? (": " + e["error"].get<std::string>()).c_str()
         : e.contains("check_failed") ? (": " + e["check_failed"].get<std::string>()).c_str()
                                      : "");
  fflush(json ? stderr : stdout);
}

// Whether a run's outcome makes the suite fail: a plain or tiermem run whose result is not right,
// or a kernel_swap run that ran to its end with a wrong result (an OOM kill or a timeout is the
// kernel's result, not a failure).
bool Fails(const nlohmann::json& e) {
  if (e["result_ok"].get<bool>()) return false;
  if (e["setup"] != "kernel_swap") return !(e["error"].is_string() && e["error"].get<std::string>().rfind("skipped: ", 0) == 0);
  return e["error"].is_null();
}

// Every run of one program; its entry of programs[].
nlohmann::json RunProgram(const ProgramJob& job, Config& c, const std::string& root, bool* ok) {
  nlohmann::json p = {{"name", job.name}, {"unit", job.unit}, {"job", job.size}, {"peak_rss_bytes", nullptr},
                      {"runs", nlohmann::json::array()},
                      {"dram_share_at_0_9", {{"tiermem", nullptr}, {"kernel_swap", nullptr}}}};
  for (const std::string& tool : job.tools) {
    if (OnPath(tool).empty()) {
      p["skipped"] = tool + " is not installed (scripts/install-deps.sh installs it)";
      return p;
    }
  }
  const std::string dir = root + "/" + job.name;
  std::error_code made;
  std::filesystem::create_directory(dir, made);
  const uint64_t tp = NowNs();
  if (const std::string err = job.prepare(dir); !err.empty()) {
    p["error"] = "preparing the inputs: " + err;
    *ok = false;
    return p;
  }
  p["prepare_s"] = static_cast<double>(NowNs() - tp) / 1e9;
  Plain plain;
  nlohmann::json base = RunOnce(job, "plain", 1.0, plain, dir, c);
  ShowRun(job.name, base, c.json);
  const bool base_ok = base["result_ok"].get<bool>();
  if (!base_ok || !base["ops_per_s"].is_number()) {
    p["runs"].push_back(base);
    p["error"] = "the plain run failed: " + (base["error"].is_string() ? base["error"].get<std::string>()
                                                                        : base.value("check_failed", std::string("?")));
    *ok = false;
    return p;
  }
  plain.ops_per_s = base["ops_per_s"];
  plain.wall_s = base["wall_s"];
  plain.peak_rss_bytes = base["peak_rss_bytes"];
  p["peak_rss_bytes"] = plain.peak_rss_bytes;
  plain.result = base.value("result_digest", std::string());
  p["runs"].push_back(base);
  for (const std::string& share : SplitList(c.shares)) {
    for (const std::string& setup : SplitList(c.setups)) {
      p["runs"].push_back(RunOnce(job, setup, std::stod(share), plain, dir, c));
      ShowRun(job.name, p["runs"].back(), c.json);
    }
  }
  for (const std::string& setup : SplitList(c.setups)) {
    p["dram_share_at_0_9"][setup] =
        ShareAtSpeed(job, setup, plain, dir, c, p["runs"], [&](const nlohmann::json& e) { ShowRun(job.name, e, c.json); });
  }
  for (const nlohmann::json& e : p["runs"]) *ok = *ok && !Fails(e);
  return p;
}

// --shares: a list of shares in (0, 1].
CLI::Validator SharesList() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        const std::vector<std::string> items = SplitList(value);
        if (items.empty()) return "an empty list of shares";
        for (const std::string& item : items) {
          char* end = nullptr;
          const double v = strtod(item.c_str(), &end);
          if (end == item.c_str() || *end != 0 || !(v > 0 && v <= 1)) return "'" + item + "' is not a share in (0, 1]";
        }
        return "";
      },
      "", "");
}

// The flags of `programs`, into `c`.
void AddProgramsFlags(CLI::App& app, Config& c) {
  AddSwitch(app, "--json", c.json, "print one JSON object instead of a line per run");
  app.add_option("--programs", c.programs, "programs to run, in this order")->check(ListOf(ProgramNames()))->capture_default_str();
  app.add_option("--setups", c.setups, "setups beside plain (which always runs: it sets the scale)")
      ->check(ListOf({"tiermem", "kernel_swap"}))
      ->capture_default_str();
  app.add_option("--shares", c.shares, "DRAM limits, as shares of plain's peak RSS")->check(SharesList())->capture_default_str();
  AddCount(app, "--bisect", c.bisect, ParseUint, "0", "10", "runs per setup looking for the share at 0.9x plain");
  AddCount(app, "--timeout-factor", c.timeout_factor, ParseUint, "1", "1000",
           "a run gives up after this many times plain's wall time (at least --min-timeout)");
  AddCount(app, "--min-timeout", c.min_timeout_s, ParseUint, "1", "86400", "seconds a run may always take");
  AddSwitch(app, "--quick", c.quick, "small sizes (the ctest label programs)");
  app.add_option("--preload", c.setup.preload,
                 "tiermem's preload library (default: libtiermem-preload.so of this build or install)")
      ->type_name("PATH");
  app.add_option("--swap-dir", c.setup.swap_dir, "kernel_swap: where the swap file goes (ext4 or xfs, not tmpfs)")
      ->capture_default_str();
  app.add_option("--work-dir", c.work_dir, "where the inputs and outputs go (a disk, not tmpfs: kernel_swap charges "
                                           "tmpfs pages to the cgroup)")
      ->capture_default_str();
  app.footer(
      "JSON keys (--json): command, quick, shares, setups, bisect, wall_s, data_ok, programs[]:\n"
      "  name, unit (what one op is), job (size, load and check, in words), peak_rss_bytes (plain's),\n"
      "  prepare_s, dram_share_at_0_9 {tiermem, kernel_swap} (null: no share kept 0.9x and its\n"
      "  limit), skipped\n"
      "  (why the program did not run), error, runs[]:\n"
      "    setup (plain | tiermem | kernel_swap), dram_share (plain: 1), dram_limit_bytes,\n"
      "    relative_speed (ops/s against plain's; null when it did not finish), result_ok,\n"
      "    peak_rss_bytes, peak_share (against plain's), limit_kept (peak RSS at most the limit\n"
      "    plus a quarter of plain's peak), faults_per_op (fault_counter: remote_faults for tiermem, major_faults\n"
      "    otherwise), error (null, or why it did not finish: timed out, the OOM killer, ...),\n"
      "    check_failed, result_digest, seconds, ops, ops_per_s, wall_s, bisection, oom_kills,\n"
      "    swap_file_bytes and swap_peak_bytes (kernel_swap: the swap file's size, and at least this\n"
      "    much of it in use at once),\n"
      "    tiermem {remote_faults, fault_latency_mean_us, policy_cpu_s, budget_relief_pages, ...}.\n"
      "Exit status 77 when no program could run here (none installed).");
}

}  // namespace

int RunPrograms(Config c, const std::string& command) {
  if (c.setup.preload.empty()) c.setup.preload = PreloadLibrary();
  MemdChild memd;
  if (c.setups.find("tiermem") != std::string::npos && memd.Start(8ull << 30)) c.setup.memd = &memd;
  char root[4096];
  snprintf(root, sizeof(root), "%s/tiermem-programs-XXXXXX", c.work_dir.c_str());
  if (mkdtemp(root) == nullptr) {
    fprintf(stderr, "tiermem-bench programs: cannot make a folder in --work-dir %s\n", c.work_dir.c_str());
    return 1;
  }
  const uint64_t t0 = NowNs();
  bool ok = true, any = false;
  nlohmann::json j = {{"command", command}, {"quick", c.quick}, {"setups", c.setups},
                      {"shares", c.shares}, {"bisect", c.bisect}, {"programs", nlohmann::json::array()}};
  const std::vector<std::string> wanted = SplitList(c.programs);
  for (const std::string& name : wanted) {
    for (const ProgramJob& job : ProgramJobs(c.quick)) {
      if (job.name != name) continue;
      j["programs"].push_back(RunProgram(job, c, root, &ok));
      any = any || !j["programs"].back().contains("skipped");
      if (!c.json && j["programs"].back().contains("skipped")) {
        printf("%-10s skipped: %s\n", name.c_str(), j["programs"].back()["skipped"].get<std::string>().c_str());
      }
    }
  }
  std::error_code ignored;
  std::filesystem::remove_all(root, ignored);
  j["wall_s"] = static_cast<double>(NowNs() - t0) / 1e9;
  j["data_ok"] = ok;
  if (c.json) printf("%s\n", j.dump().c_str());
  for (const nlohmann::json& p : j["programs"]) {
    if (c.json || p.contains("skipped")) continue;
    auto share = [](const nlohmann::json& v) { return v.is_number() ? std::to_string(v.get<double>()) : std::string("none"); };
    printf("%-10s share of the peak at 0.9x plain: tiermem %s, kernel_swap %s\n", p["name"].get<std::string>().c_str(),
           share(p["dram_share_at_0_9"]["tiermem"]).c_str(), share(p["dram_share_at_0_9"]["kernel_swap"]).c_str());
  }
  if (!any) return 77;
  return ok ? 0 : 1;
}

Subcommand AddPrograms(CLI::App& bench) {
  auto c = std::make_shared<Config>();
  c->programs = "";
  for (const std::string& n : ProgramNames()) c->programs += (c->programs.empty() ? "" : ",") + n;
  CLI::App& app = *AddSubcommand(
      bench, "programs",
      "real programs (redis, memcached, sqlite3, liblinear, sort, g++): plain, tiermem and kernel swap\n"
      "at shares of their peak RSS; the share that keeps 0.9x plain's speed",
      "Real programs from Debian's packages, unmodified, each with a job of its own and a check that its "
      "result is right (docs/programs.md): redis-server loaded by redis-benchmark, memcached loaded by "
      "tiermem's client, sqlite3 on an in-memory database, liblinear-train, GNU sort, g++. Each runs "
      "plain with no limit (its peak RSS sets the scale), then at each --shares of that peak under "
      "tiermem (LD_PRELOAD=libtiermem-preload.so, TIERMEM_DRAM_LIMIT = the share, TIERMEM_REMOTE = a "
      "memd on loopback started here, defaults otherwise) and under kernel_swap (a memory cgroup "
      "limited to the share with a swap file made and removed here; needs root; an OOM kill is its "
      "result). Then, per setup, --bisect more runs look for the smallest share that keeps 0.9x "
      "plain's speed. Exit status 1 when a plain or tiermem run did not finish with its result right, "
      "or a kernel_swap run finished with a wrong one.");
  AddProgramsFlags(app, *c);
  return {&app, [c](const std::string& command) { return RunPrograms(*c, command); }};
}

}  // namespace tiermem::bench

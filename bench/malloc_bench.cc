// tiermem-bench malloc [--json] [--runs N] [--scale N] [--workloads a,b] [--preload PATH]
// Runs each allocator workload (bench/malloc_workload.cc) as a separate process under glibc,
// jemalloc (Debian's libjemalloc2), mimalloc (libmimalloc2.0) and tiermem
// (libtiermem-preload.so), N times each (default 5), and reports the median ops/s, the median
// ops per CPU second (the child's user + system time: on a shared machine wall time also counts
// the time the workload waited for a CPU, CPU time does not), the median peak RSS of the
// workload process (its VmHWM) and the median growth of its RSS from the start of main (what the
// workload's allocations cost, without the libraries every process of that allocator loads). Runs are interleaved (each round runs every allocator once) so that
// drift of the machine hits all allocators alike. An allocator whose library is missing is
// reported as null.
//
// --limits F,G,...: then, per workload, tiermem under TIERMEM_DRAM_LIMIT = F times its median
// unlimited peak RSS (of the runs above), with a tiermem-memd on loopback as the remote tier,
// beside tiermem unlimited in the same rounds: median wall time of the workload, and the remote
// faults and pages evicted of each limited run (its TIERMEM_STATS line at exit).
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "bench/child.h"
#include "bench/cli.h"
#include "bench/memd_child.h"
#include "bench/programs.h"
#include "bench/subcommands.h"

extern char** environ;

namespace tiermem::bench {
namespace {

struct Allocator {
  const char* name;
  std::string preload;  // empty: glibc
  bool present = true;
};

struct Sample {
  double seconds = 0;  // the workload's own time (from the start of its work to its end)
  double ops_s = 0;
  double cpu_ops_s = 0;
  long rss_bytes = 0;
  long rss_growth_bytes = 0;
};

// Runs the workload once; nullopt when it fails.
// `extra_env`: NAME=VALUE entries over this process's environment (a name set there is replaced).
std::optional<Sample> RunOnce(const std::string& exe, const std::string& workload,
                              const std::string& scale, const Allocator& a,
                              const std::vector<std::string>& extra_env = {}) {
  std::vector<std::string> env;
  auto overridden = [&](const char* e) {
    for (const std::string& x : extra_env) {
      const size_t eq = x.find('=');
      if (strncmp(e, x.c_str(), eq + 1) == 0) return true;
    }
    return false;
  };
  for (char** e = environ; *e != nullptr; ++e) {
    if (strncmp(*e, "LD_PRELOAD=", 11) != 0 && !overridden(*e)) env.emplace_back(*e);
  }
  if (!a.preload.empty()) env.push_back("LD_PRELOAD=" + a.preload);
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string w = workload, sc = scale, x = exe;
  char* argv[] = {x.data(), w.data(), sc.data(), nullptr};
  int fds[2];
  if (pipe(fds) != 0) return std::nullopt;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  pid_t pid;
  int rc = posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return std::nullopt;
  }
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  struct rusage ru {};
  if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "tiermem-bench malloc: %s under %s failed (status %d)\n", workload.c_str(),
            a.name, status);
    return std::nullopt;
  }
  unsigned long long ops = 0, hwm = 0, start_rss = 0;
  double secs = 0;
  if (sscanf(out.c_str(), "%llu %lf %llu %llu", &ops, &secs, &hwm, &start_rss) != 4 ||
      secs <= 0) {
    return std::nullopt;
  }
  const double cpu = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                     1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
  return Sample{secs, static_cast<double>(ops) / secs, cpu > 0 ? static_cast<double>(ops) / cpu : 0,
                static_cast<long>(hwm), static_cast<long>(hwm - std::min(hwm, start_rss))};
}

template <typename T>
T Median(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The remote faults and pages evicted of a tiermem run, from the last line of its TIERMEM_STATS
// file (removed once read); nullopt when there is no such line.
std::optional<std::pair<uint64_t, uint64_t>> ExitStats(const std::string& path) {
  FILE* f = fopen(path.c_str(), "r");
  if (f == nullptr) return std::nullopt;
  std::string last, line;
  char buf[4096];
  while (fgets(buf, sizeof(buf), f) != nullptr) {
    line += buf;
    if (line.back() != '\n') continue;
    if (line.size() > 1) last = line;
    line.clear();
  }
  fclose(f);
  unlink(path.c_str());
  const nlohmann::json j = nlohmann::json::parse(last, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  const nlohmann::json fig = TiermemStatsFigures(j);
  return std::make_pair(fig["remote_faults"].get<uint64_t>(), fig["pages_evicted"].get<uint64_t>());
}

// --limits for one workload: `runs` rounds of tiermem unlimited, then at each limit (a factor of
// `peak_rss`) with `memd` as the remote tier. Returns the workload's JSON member
// "tiermem_limits"; prints a line per limit unless `json`.
std::string LimitRuns(const std::string& exe, const std::string& workload, const std::string& scale,
                      const Allocator& tiermem, long peak_rss, const std::vector<double>& factors,
                      int runs, bool json, const MemdChild& memd) {
  std::vector<double> unlimited;
  std::vector<std::vector<double>> secs(factors.size());
  std::vector<std::vector<uint64_t>> faults(factors.size()), evicted(factors.size());
  std::vector<uint64_t> limits;
  for (double f : factors) limits.push_back(static_cast<uint64_t>(f * static_cast<double>(peak_rss)) / 4096 * 4096);
  const std::string stats = "/tmp/tiermem-bench-malloc-" + std::to_string(getpid()) + ".json";
  for (int r = 0; r < runs; ++r) {
    if (auto s = RunOnce(exe, workload, scale, tiermem)) unlimited.push_back(s->seconds);
    for (size_t i = 0; i < factors.size(); ++i) {
      unlink(stats.c_str());
      auto s = RunOnce(exe, workload, scale, tiermem,
                       {"TIERMEM_DRAM_LIMIT=" + std::to_string(limits[i]), "TIERMEM_REMOTE=" + memd.Url("tcp"),
                        "TIERMEM_STATS=" + stats});
      auto st = ExitStats(stats);
      if (!s || !st) continue;
      secs[i].push_back(s->seconds);
      faults[i].push_back(st->first);
      evicted[i].push_back(st->second);
    }
  }
  unlink(stats.c_str());  // the last run's statistics, read above
  char b[256];
  const double base = unlimited.empty() ? -1 : Median(unlimited);
  snprintf(b, sizeof(b), ",\"tiermem_limits\":{\"peak_rss_bytes\":%ld,\"unlimited_seconds\":%.4f,\"limits\":[",
           peak_rss, base);
  std::string out = b;
  for (size_t i = 0; i < factors.size(); ++i) {
    if (secs[i].empty() || base <= 0) {
      snprintf(b, sizeof(b), "%s{\"factor\":%g,\"dram_limit_bytes\":%llu,\"seconds\":null}", i ? "," : "",
               factors[i], static_cast<unsigned long long>(limits[i]));
      out += b;
      continue;
    }
    const double t = Median(secs[i]);
    const auto nf = static_cast<unsigned long long>(Median(faults[i]));
    const auto ne = static_cast<unsigned long long>(Median(evicted[i]));
    snprintf(b, sizeof(b),
             "%s{\"factor\":%g,\"dram_limit_bytes\":%llu,\"seconds\":%.4f,\"vs_unlimited\":%.3f,"
             "\"remote_faults\":%llu,\"pages_evicted\":%llu}",
             i ? "," : "", factors[i], static_cast<unsigned long long>(limits[i]), t, t / base, nf, ne);
    out += b;
    if (!json) {
      printf("%-12s tiermem at %gx its peak RSS (%llu MiB): %.3f s against %.3f s unlimited (%.2fx), "
             "%llu remote faults, %llu pages evicted\n",
             workload.c_str(), factors[i], static_cast<unsigned long long>(limits[i] >> 20), t, base, t / base, nf, ne);
    }
  }
  return out + "]}";
}

struct Args {
  bool json = false;
  int runs = 5;
  uint64_t scale_n = 1;
  std::string preload, limit_list;
  std::string workload_list =
      "small,prodcons,larson,realloc,mixed,fanin,large_touch,thread_churn,small_loop,factor,"
      "remote_free,false_share,small_churn,thread_loop";
};

int RunMalloc(Args args, const std::string&) {
  auto& [json, runs, scale_n, preload, limit_list, workload_list] = args;
  const std::vector<std::string> workloads = SplitList(workload_list);
  const std::string scale = std::to_string(scale_n);
  const std::string dir = SelfDir();
  const std::string exe = FirstExisting({dir + "/tiermem-malloc-workload",
                                         dir + "/../bench/tiermem-malloc-workload"});
  if (exe.empty()) {
    fprintf(stderr, "tiermem-bench malloc: tiermem-malloc-workload not found next to %s\n",
            dir.c_str());
    return 1;
  }
  if (preload.empty()) preload = PreloadLibrary();
  std::vector<Allocator> allocs = {
      {"glibc", ""},
      {"jemalloc", FirstExisting({"/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"})},
      {"mimalloc", FirstExisting({"/usr/lib/x86_64-linux-gnu/libmimalloc.so.2.0",
                                  "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2"})},
      {"tiermem", preload},
  };
  for (size_t i = 1; i < allocs.size(); ++i) {
    if (allocs[i].preload.empty()) {
      allocs[i].present = false;
      fprintf(stderr, "tiermem-bench malloc: %s not found; reported as null\n", allocs[i].name);
    }
  }

  std::vector<double> factors;
  for (const std::string& f : SplitList(limit_list)) factors.push_back(std::stod(f));
  MemdChild memd;
  if (!factors.empty() && (!allocs[3].present || !memd.Start(uint64_t{4} << 30))) {
    fprintf(stderr, "tiermem-bench malloc: --limits needs tiermem's preload library and a tiermem-memd (%s)\n",
            MemdBinary().c_str());
    return 1;
  }
  std::string out = "{\"workloads\":[";
  // The goals over wall-clock and CPU-time throughput (docs/allocator.md).
  struct Goals {
    double log_sum = 0, worst = 1e9, worst_vs_best = 1e9, log_sum_best = 0;
    int counted = 0, counted_best = 0;
    void Add(double glibc, double tiermem, double best) {
      if (glibc <= 0 || tiermem <= 0) return;
      log_sum += std::log(tiermem / glibc);
      worst = std::min(worst, tiermem / glibc);
      if (best > 0) {
        worst_vs_best = std::min(worst_vs_best, tiermem / best);
        log_sum_best += std::log(tiermem / best);
        ++counted_best;
      }
      ++counted;
    }
    double Geomean() const { return counted > 0 ? std::exp(log_sum / counted) : -1; }
    double GeomeanVsBest() const {
      return counted_best > 0 ? std::exp(log_sum_best / counted_best) : -1;
    }
  } wall, cpu;
  double worst_rss = 0, worst_growth = 0;
  // Peak RSS goals: against glibc where glibc's peak is above 8 MB; on the small programs (glibc
  // at most 8 MB, where a library's start-up footprint is most of the peak) against the smaller
  // of jemalloc's and mimalloc's, in bytes above it.
  constexpr long kSmallRss = 8000000;
  double worst_rss_large = 0;
  long worst_rss_small_above = LONG_MIN;
  for (size_t w = 0; w < workloads.size(); ++w) {
    std::vector<std::vector<double>> ops(allocs.size()), cpu_ops(allocs.size());
    std::vector<std::vector<long>> rss(allocs.size()), growth(allocs.size());
    for (int r = 0; r < runs; ++r) {
      for (size_t a = 0; a < allocs.size(); ++a) {
        if (!allocs[a].present) continue;
        auto s = RunOnce(exe, workloads[w], scale, allocs[a]);
        if (!s) continue;
        ops[a].push_back(s->ops_s);
        cpu_ops[a].push_back(s->cpu_ops_s);
        rss[a].push_back(s->rss_bytes);
        growth[a].push_back(s->rss_growth_bytes);
      }
    }
    auto med_ops = [&](size_t a) { return ops[a].empty() ? -1.0 : Median(ops[a]); };
    auto med_cpu_ops = [&](size_t a) { return cpu_ops[a].empty() ? -1.0 : Median(cpu_ops[a]); };
    auto med_rss = [&](size_t a) { return rss[a].empty() ? -1L : Median(rss[a]); };
    auto med_growth = [&](size_t a) { return growth[a].empty() ? -1L : Median(growth[a]); };
    auto num = [](double v) {
      char b[64];
      if (v < 0) return std::string("null");
      snprintf(b, sizeof(b), "%.0f", v);
      return std::string(b);
    };
    out += std::string(w ? "," : "") + "{\"name\":\"" + workloads[w] + "\"";
    for (size_t a = 0; a < allocs.size(); ++a) {
      out += ",\"" + std::string(allocs[a].name) + "_ops_s\":" + num(med_ops(a));
    }
    for (size_t a = 0; a < allocs.size(); ++a) {
      out += ",\"" + std::string(allocs[a].name) + "_cpu_ops_s\":" + num(med_cpu_ops(a));
    }
    for (size_t a = 0; a < allocs.size(); ++a) {
      out += ",\"" + std::string(allocs[a].name) + "_rss_bytes\":" +
             num(static_cast<double>(med_rss(a)));
    }
    for (size_t a = 0; a < allocs.size(); ++a) {
      out += ",\"" + std::string(allocs[a].name) + "_rss_growth_bytes\":" +
             num(static_cast<double>(med_growth(a)));
    }
    if (!factors.empty() && med_rss(3) > 0) {
      out += LimitRuns(exe, workloads[w], scale, allocs[3], med_rss(3), factors, runs, json, memd);
    }
    out += "}";
    if (!json) {
      printf("%-12s", workloads[w].c_str());
      for (size_t a = 0; a < allocs.size(); ++a) {
        printf("  %s %8.2f (cpu %8.2f) Mops/s", allocs[a].name, med_ops(a) / 1e6,
               med_cpu_ops(a) / 1e6);
      }
      printf("  rss tiermem %ld KiB glibc %ld KiB, growth tiermem %ld KiB glibc %ld KiB\n",
             med_rss(3) / 1024, med_rss(0) / 1024, med_growth(3) / 1024, med_growth(0) / 1024);
    }
    wall.Add(med_ops(0), med_ops(3), std::max(med_ops(1), med_ops(2)));
    cpu.Add(med_cpu_ops(0), med_cpu_ops(3), std::max(med_cpu_ops(1), med_cpu_ops(2)));
    if (med_rss(0) > 0 && med_rss(3) > 0) {
      worst_rss = std::max(worst_rss, static_cast<double>(med_rss(3)) / med_rss(0));
    }
    if (med_rss(0) > kSmallRss && med_rss(3) > 0) {
      worst_rss_large = std::max(worst_rss_large, static_cast<double>(med_rss(3)) / med_rss(0));
    }
    if (med_rss(0) > 0 && med_rss(0) <= kSmallRss && med_rss(3) > 0 && med_rss(1) > 0 &&
        med_rss(2) > 0) {
      worst_rss_small_above =
          std::max(worst_rss_small_above, med_rss(3) - std::min(med_rss(1), med_rss(2)));
    }
    if (med_growth(0) > 0 && med_growth(3) >= 0) {
      worst_growth = std::max(worst_growth, static_cast<double>(med_growth(3)) / med_growth(0));
    }
  }
  char summary[1024];
  const std::string small_above =
      worst_rss_small_above == LONG_MIN ? "null" : std::to_string(worst_rss_small_above);
  snprintf(summary, sizeof(summary),
           "],\"summary\":{\"geomean_vs_glibc\":%.3f,\"worst_vs_glibc\":%.3f,"
           "\"worst_vs_best_of_jemalloc_mimalloc\":%.3f,\"cpu_geomean_vs_glibc\":%.3f,"
           "\"cpu_worst_vs_glibc\":%.3f,\"cpu_worst_vs_best_of_jemalloc_mimalloc\":%.3f,"
           "\"cpu_geomean_vs_best_of_jemalloc_mimalloc\":%.3f,"
           "\"worst_rss_vs_glibc\":%.3f,\"worst_rss_growth_vs_glibc\":%.3f,"
           "\"worst_rss_vs_glibc_above_8mb\":%.3f,"
           "\"worst_rss_above_smaller_of_jemalloc_mimalloc_bytes\":%s}}",
           wall.Geomean(), wall.worst, wall.worst_vs_best, cpu.Geomean(), cpu.worst,
           cpu.worst_vs_best, cpu.GeomeanVsBest(), worst_rss, worst_growth, worst_rss_large,
           small_above.c_str());
  out += summary;
  if (json) {
    printf("%s\n", out.c_str());
  } else if (wall.counted > 0) {
    printf("tiermem vs glibc: geometric mean %.2fx, worst %.2fx; worst vs best of "
           "jemalloc/mimalloc %.2fx; by CPU time: %.2fx, %.2fx, %.2fx; worst RSS vs glibc "
           "%.2fx (growth from main %.2fx)\n",
           wall.Geomean(), wall.worst, wall.worst_vs_best, cpu.Geomean(), cpu.worst,
           cpu.worst_vs_best, worst_rss, worst_growth);
  }
  return 0;
}

}  // namespace

Subcommand AddMalloc(CLI::App& bench) {
  auto a = std::make_shared<Args>();
  CLI::App& app = *AddSubcommand(
      bench, "malloc",
      "allocator workloads under glibc, jemalloc, mimalloc and tiermem (LD_PRELOAD)",
      "Allocator workloads, each a separate process (tiermem-malloc-workload) under glibc, "
      "jemalloc, mimalloc and tiermem (LD_PRELOAD); median ops/s, ops per CPU second, peak RSS "
      "and RSS growth of N runs. An allocator whose library is missing is reported as null. "
      "Run by default, in this order: small, prodcons, larson, realloc, mixed, and (each "
      "checking every byte it wrote) fanin (4 threads each freeing the blocks the others allocated), "
      "large_touch (5-25 MiB blocks, every page written), thread_churn (short-lived threads "
      "making bursts of small blocks), small_loop (one thread, LIFO stacks of 8-128 byte "
      "blocks), factor (a small factoring program: vectors and strings), remote_free (64-byte "
      "blocks allocated by one thread, freed by another: one pair, then two pairs), "
      "false_share (per-thread small objects written over and over, one thread then two), "
      "small_churn (one thread: trees of small nodes and numbers of many sizes), "
      "thread_loop (2 threads replacing random blocks of 4 B-32 KiB, glibc's threaded "
      "benchmark in kind). Only by name: thread_loop_bare (thread_loop without touching the "
      "blocks: the allocator's own cost on that pattern).");
  AddSwitch(app, "--json", a->json, "print one JSON object instead of a line per workload");
  app.add_option("--runs", a->runs, "runs per workload and allocator (interleaved)")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()).description(""))
      ->type_name("N")
      ->capture_default_str();
  app.add_option("--scale", a->scale_n, "work per run, a multiple of the default amount")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32).description(""))
      ->type_name("N")
      ->capture_default_str();
  app.add_option("--workloads", a->workload_list, "workloads to run, in this order")
      ->check(ListOf({"small", "prodcons", "larson", "realloc", "mixed", "fanin", "large_touch",
                     "thread_churn", "small_loop", "factor", "remote_free", "false_share",
                     "small_churn", "thread_loop", "thread_loop_bare"},
                    true))
      ->capture_default_str();
  app.add_option("--limits", a->limit_list,
                 "also run tiermem under DRAM limits of these multiples of its unlimited peak RSS, with a "
                 "tiermem-memd on loopback, beside tiermem unlimited (e.g. 3,1.5)")
      ->check([](const std::string& v) -> std::string {
        for (const std::string& item : SplitList(v)) {
          char* end = nullptr;
          const double f = strtod(item.c_str(), &end);
          if (end == item.c_str() || *end != 0 || !(f > 0 && f < 1000)) {
            return "'" + item + "' is not a multiple in (0, 1000)";
          }
        }
        return "";
      })
      ->type_name("LIST");
  app.add_option("--preload", a->preload, "tiermem's preload library (default: libtiermem-preload.so of this build "
                                          "or install)")
      ->type_name("PATH");
  app.footer(
      "JSON keys (--json): workloads, summary.\n"
      "  workloads[]: name, then for each of glibc, jemalloc, mimalloc, tiermem: ALLOC_ops_s,\n"
      "    ALLOC_cpu_ops_s, ALLOC_rss_bytes, ALLOC_rss_growth_bytes (null when it did not run);\n"
      "    with --limits, tiermem_limits: peak_rss_bytes, unlimited_seconds, limits[]: factor,\n"
      "    dram_limit_bytes, seconds, vs_unlimited, remote_faults, pages_evicted (medians)\n"
      "  summary: geomean_vs_glibc, worst_vs_glibc, worst_vs_best_of_jemalloc_mimalloc,\n"
      "    cpu_geomean_vs_glibc, cpu_worst_vs_glibc, cpu_worst_vs_best_of_jemalloc_mimalloc,\n"
      "    cpu_geomean_vs_best_of_jemalloc_mimalloc, worst_rss_vs_glibc, worst_rss_growth_vs_glibc,\n"
      "    worst_rss_vs_glibc_above_8mb (workloads where glibc's peak is above 8 MB),\n"
      "    worst_rss_above_smaller_of_jemalloc_mimalloc_bytes (the others)");
  return {&app, [a](const std::string& command) { return RunMalloc(*a, command); }};
}

}  // namespace tiermem::bench

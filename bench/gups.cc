// tiermem-bench gups: GUPS with a hot set that moves once, under automatic tiering and its
// baselines, measured side by side in one run.
//
// Working set: `--size` bytes in 80 allocations ("chunks"); the hot set is 8 chunks (10% of the
// working set) and receives 90% of the updates (8-byte xor at a random word); the other 10% go
// anywhere. Halfway through, the hot set moves to 8 other chunks. DRAM budget = 2x the hot set;
// the rest lives on the next tiers (here: remote over TCP, memd on loopback, started here).
// Modes, each in a fresh runtime with the same seed:
//   all_dram          no budget, everything in DRAM, no policy thread
//   all_dram_tiermem  a DRAM budget (2x the working set) and the remote tier, default tiering
//                     (TIERMEM_SAMPLE_MODE=auto): everything fits, so sampling stays idle
//   all_dram_sampled  no budget, protection sampling forced on (protect): its worst-case cost
//   tiered            automatic tiering (TIERMEM_SAMPLE_MODE=auto): tracker + policy thread
//   oracle            the hot chunks pinned in DRAM by the API from the start and re-pinned when
//                     the hot set moves; other pages faulted in and evicted first-in first-out
//   no_tracking       no sampling: pages faulted in and evicted first-in first-out
// Recovery time: from the move until the first 100 ms window whose update rate reaches 90% of
// the median rate of the last quarter of the run.
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/cli.h"
#include "bench/compare_util.h"
#include "bench/policy_cost.h"
#include "bench/subcommands.h"
#include "bench/timeline.h"
#include "tiermem/options.hpp"
#include "tiermem/tiermem.hpp"

namespace tiermem::bench {
namespace {

constexpr size_t kPage = 4096;
constexpr int kChunks = 80;
constexpr int kHotChunks = 8;
constexpr int kHotFirst = 8;    // chunks [8, 16) before the move
constexpr int kHotSecond = 48;  // chunks [48, 56) after it
constexpr uint64_t kWindowNs = 100'000'000;

struct ModeResult {
  std::string name;
  bool ok = false;
  std::string error;
  double gups = 0;
  uint64_t updates = 0;
  double seconds = 0;
  uint64_t faults = 0;
  uint64_t migrations = 0;
  double recovery_ms = -1;
  double hot_in_dram_before = -1, hot_in_dram_after = -1;  // share of hot pages in DRAM
  std::string sampling;
  uint64_t failed_moves = 0;
  double migrate_us_per_call = 0, policy_thread_busy = 0;
  double resident_share_at_end = -1;  // share of the working set resident in DRAM at the end
  RuntimeCounters end;  // the runtime's counters at the end of the run (before the free)
  double end_s = 0;     // the mode's wall time (from its runtime's start) when they were read
  double faults_per_op() const { return updates ? static_cast<double>(faults) / static_cast<double>(updates) : 0.0; }
};

double HotInDram(Runtime& rt, const std::vector<char*>& chunks, int first, size_t chunk_bytes) {
  size_t in = 0, total = 0;
  for (int c = first; c < first + kHotChunks; ++c) {
    auto loc = rt.Locate(chunks[c], chunk_bytes);
    if (!loc.ok()) return -1;
    for (auto& l : *loc) {
      in += l.resident && l.tier == Tier::kDram;
      ++total;
    }
  }
  return total ? static_cast<double>(in) / static_cast<double>(total) : -1;
}

ModeResult RunMode(const std::string& mode, size_t ws_bytes, double half_s, const std::string& remote,
                   const std::string& timeline) {
  ModeResult res;
  res.name = mode;
  const uint64_t t_setup = NowNs();
  const size_t chunk_bytes = ws_bytes / kChunks / kPage * kPage;
  const size_t hot_bytes = chunk_bytes * kHotChunks;
  const bool limited = mode == "tiered" || mode == "oracle" || mode == "no_tracking";
  Options o;
  std::map<std::string, std::string> env = {{"TIERMEM_LOG", "error"}};
  if (limited) {
    o.Set("dram_limit", 2 * hot_bytes);
    o.Set("remote", remote);
  } else if (mode == "all_dram_tiermem") {
    o.Set("dram_limit", 2 * ws_bytes);  // a budget and a remote tier, but everything fits
    o.Set("remote", remote);
  }
  env["TIERMEM_SAMPLE_MODE"] = mode == "tiered" || mode == "all_dram_tiermem" ? "auto"
                               : mode == "all_dram_sampled" ? "protect"
                               : mode == "all_dram" ? "off" : "faults";
  AddTimeline(o, timeline, mode);
  auto rtor = StartWithEnv(o, env);
  if (!rtor.ok()) {
    res.error = rtor.status().ToString();
    return res;
  }
  Runtime& rt = **rtor;
  if ((limited || mode == "all_dram_tiermem") && !rt.HasTier(Tier::kRemote)) {
    for (auto& s : rt.Stats()) if (s.tier == Tier::kRemote) res.error = "remote tier: " + s.absent_reason;
    return res;
  }
  std::vector<char*> chunks(kChunks);
  for (int c = 0; c < kChunks; ++c) {
    const bool hot = c >= kHotFirst && c < kHotFirst + kHotChunks;
    Tier t = !limited ? Tier::kDram : (mode == "oracle" && hot ? Tier::kDram : Tier::kRemote);
    uint32_t flags = kAllocPopulate;
    if (mode == "oracle" && hot) flags |= kAllocPin;
    auto p = rt.Allocate(chunk_bytes, t, flags);
    if (!p.ok()) {
      res.error = p.status().ToString();
      return res;
    }
    chunks[c] = static_cast<char*>(*p);
  }
  // Initialise the table (every word written once, as GUPS does), then give the policy a moment
  // to bring DRAM within its budget; neither is measured.
  for (int c = 0; c < kChunks; ++c) {
    auto* w = reinterpret_cast<uint64_t*>(chunks[c]);
    for (size_t i = 0; i < chunk_bytes / 8; ++i) w[i] = i;
  }
  if (limited) std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  const RuntimeCounters before = rt.Counters();
  res.sampling = before.sampling_mode;
  const uint64_t words = chunk_bytes / 8;
  std::mt19937_64 rng(2024);
  uint64_t updates = 0;
  std::vector<std::pair<uint64_t, uint64_t>> windows;  // (end time, updates in window)
  const uint64_t t0 = NowNs();
  const uint64_t t_move = t0 + static_cast<uint64_t>(half_s * 1e9);
  const uint64_t t_end = t0 + static_cast<uint64_t>(2 * half_s * 1e9);
  uint64_t win_start = t0, win_updates = 0;
  int hot_first = kHotFirst;
  bool moved = false;
  for (;;) {
    for (int k = 0; k < 1024; ++k) {
      uint64_t r = rng();
      int c = (r % 10 < 9) ? hot_first + static_cast<int>((r >> 8) % kHotChunks)
                           : static_cast<int>((r >> 8) % kChunks);
      uint64_t w = (r >> 24) % words;
      reinterpret_cast<uint64_t*>(chunks[c])[w] ^= r;
    }
    updates += 1024;
    win_updates += 1024;
    uint64_t now = NowNs();
    if (now - win_start >= kWindowNs) {
      windows.push_back({now, win_updates});
      win_start = now;
      win_updates = 0;
    }
    if (!moved && now >= t_move) {
      res.hot_in_dram_before = HotInDram(rt, chunks, kHotFirst, chunk_bytes);
      moved = true;
      hot_first = kHotSecond;
      if (mode == "oracle") {  // re-pin: the old hot set goes out, the new one comes in
        for (int c = kHotFirst; c < kHotFirst + kHotChunks; ++c) {
          (void)rt.Unpin(chunks[c]);
          (void)rt.Migrate(chunks[c], chunk_bytes, Tier::kRemote);
        }
        for (int c = kHotSecond; c < kHotSecond + kHotChunks; ++c) {
          (void)rt.Migrate(chunks[c], chunk_bytes, Tier::kDram);
          (void)rt.Pin(chunks[c]);
        }
      }
      windows.push_back({now, win_updates});  // the window ends at the move
      win_start = now;
      win_updates = 0;
    }
    if (now >= t_end) break;
  }
  const uint64_t t_stop = NowNs();
  if (getenv("TIERMEM_BENCH_GUPS_TRACE") != nullptr) {
    std::string line = mode + ":";
    for (auto& [end, n] : windows) line += " " + std::to_string(n / 1000);
    fprintf(stderr, "%s (k updates per window)\n", line.c_str());
  }
  res.hot_in_dram_after = HotInDram(rt, chunks, kHotSecond, chunk_bytes);
  {
    size_t resident = 0, total = 0;
    for (char* p : chunks) {
      auto loc = rt.Locate(p, chunk_bytes);
      if (!loc.ok()) break;
      for (auto& l : *loc) resident += l.resident, ++total;
    }
    res.resident_share_at_end = total ? static_cast<double>(resident) / static_cast<double>(total) : -1;
  }
  res.updates = updates;
  res.seconds = static_cast<double>(t_stop - t0) / 1e9;
  res.gups = static_cast<double>(updates) / res.seconds / 1e9;
  // Recovery after the move.
  std::vector<double> tail;
  for (auto& [end, n] : windows) {
    if (end >= t_end - (t_end - t_move) / 4) tail.push_back(static_cast<double>(n));
  }
  const double steady = Percentile(tail, 0.5);
  for (auto& [end, n] : windows) {
    if (end > t_move && static_cast<double>(n) >= 0.9 * steady) {
      res.recovery_ms = static_cast<double>(end - t_move) / 1e6;
      break;
    }
  }
  // Counted over the measured run only.
  {
    const RuntimeCounters after = rt.Counters();
    res.faults = after.remote_faults - before.remote_faults;
    res.migrations = after.demotions + after.promotions - before.demotions - before.promotions;
    res.failed_moves = after.moves_failed - before.moves_failed;
    uint64_t calls = after.migrate_calls - before.migrate_calls;
    if (calls) res.migrate_us_per_call = static_cast<double>(after.migrate_ns - before.migrate_ns) / 1e3 / static_cast<double>(calls);
    res.policy_thread_busy = static_cast<double>(after.policy_round_ns - before.policy_round_ns) / 1e9 / res.seconds;
    res.end = after;
    res.end_s = static_cast<double>(NowNs() - t_setup) / 1e9;
  }
  for (char* p : chunks) (void)rt.Free(p);
  (void)rt.Stop();
  res.ok = true;
  return res;
}

struct Args {
  size_t ws = 256u << 20;
  uint64_t seconds = 20;
  int rounds = 3;
  bool json = false, quick = false, kernel = false;
  std::string server;
  std::string timeline;  // none unless asked: a benchmark writes files only where told
  CLI::Option *size = nullptr, *secs = nullptr, *rnds = nullptr;
  KernelGupsArgs k;
};

int RunGups(Args args, const std::string&) {
  auto& [ws, seconds, rounds, json, quick, kernel, server, timeline, size, secs, rnds, k] = args;
  if (kernel) return KernelGups(k, secs->count() > 0 ? seconds : 15);
  if (seconds < 2) {
    fprintf(stderr, "tiermem-bench gups: --seconds %llu: at least 2 (1 only with --kernel)\n",
            static_cast<unsigned long long>(seconds));
    return 2;
  }
  if (quick) {
    UnlessGiven(size, ws, 48u << 20);
    UnlessGiven(secs, seconds, 3);
    UnlessGiven(rnds, rounds, 2);
  }
  const double half_s = static_cast<double>(seconds) / 2;
  MemdChild memd;
  if (server.empty()) {
    if (!memd.Start(ws * 2)) {
      fprintf(stderr, "gups: could not start tiermem-memd (%s)\n", MemdBinary().c_str());
      return 1;
    }
    server = memd.Url("tcp");
  }
  std::vector<ModeResult> results;
  std::vector<std::string> modes = {"all_dram", "all_dram_tiermem", "all_dram_sampled", "tiered",
                                    "oracle", "no_tracking"};
  if (const char* only = getenv("TIERMEM_BENCH_GUPS_MODES")) {  // for investigation: "tiered,oracle"
    modes.clear();
    for (std::string s = only; !s.empty();) {
      size_t c = s.find(',');
      modes.push_back(s.substr(0, c));
      s = c == std::string::npos ? "" : s.substr(c + 1);
    }
  }
  // Modes run interleaved, `rounds` times; each mode reports its median run, and ratios are
  // medians of the per-round ratios (runs next to each other see the same machine load).
  std::map<std::string, std::vector<ModeResult>> runs;
  for (int round = 0; round < rounds; ++round) {
    for (const std::string& m : modes) {
      ModeResult r = RunMode(m, ws, half_s, server, timeline);  // the last round's timeline stays
      if (r.ok && round == rounds - 1) PlotTimeline(timeline, m);
      if (!json) {
        if (r.ok) {
          fprintf(stderr, "gups: round %d %-17s %.6f GUPS (%llu updates, %.1f s, faults %llu, migrations %llu)\n",
                  round, m.c_str(), r.gups, static_cast<unsigned long long>(r.updates), r.seconds,
                  static_cast<unsigned long long>(r.faults), static_cast<unsigned long long>(r.migrations));
        } else {
          fprintf(stderr, "gups: %-17s failed: %s\n", m.c_str(), r.error.c_str());
        }
      }
      runs[m].push_back(r);
    }
  }
  for (const std::string& m : modes) {
    std::vector<ModeResult> v = runs[m];
    std::sort(v.begin(), v.end(), [](const ModeResult& a, const ModeResult& b) { return a.gups < b.gups; });
    results.push_back(v[(v.size() - 1) / 2]);  // the lower median
  }
  auto get = [&](const char* n) -> const ModeResult& {
    for (auto& r : results) if (r.name == n) return r;
    return results[0];
  };
  // The median over rounds of a's figure over b's (GUPS unless `of` says otherwise).
  auto paired = [&](const char* a, const char* b, double (*of)(const ModeResult&) = nullptr) -> nlohmann::json {
    if (!runs.count(a) || !runs.count(b)) return nullptr;
    if (of == nullptr) of = [](const ModeResult& r) { return r.gups; };
    std::vector<double> ratios;
    for (size_t i = 0; i < runs[a].size() && i < runs[b].size(); ++i) {
      if (runs[a][i].ok && runs[b][i].ok && of(runs[b][i]) > 0) ratios.push_back(of(runs[a][i]) / of(runs[b][i]));
    }
    if (ratios.empty()) return nullptr;
    std::sort(ratios.begin(), ratios.end());
    const size_t n = ratios.size();
    return n % 2 ? ratios[n / 2] : (ratios[n / 2 - 1] + ratios[n / 2]) / 2;
  };
  nlohmann::json j;
  for (auto& r : results) {
    j[r.name + "_gups"] = r.ok ? nlohmann::json(r.gups) : nlohmann::json(nullptr);
  }
  const ModeResult& t = get("tiered");
  const ModeResult& o = get("oracle");
  const ModeResult& d = get("all_dram");
  const ModeResult& dt = get("all_dram_tiermem");
  const ModeResult& ds = get("all_dram_sampled");
  const ModeResult& nt = get("no_tracking");
  (void)o;
  (void)nt;
  j["tiered_vs_oracle"] = paired("tiered", "oracle");
  j["tiered_vs_no_tracking"] = paired("tiered", "no_tracking");
  j["tiered_vs_oracle_faults"] = paired("tiered", "oracle", [](const ModeResult& r) { return r.faults_per_op(); });
  // Everything fits in DRAM: tiermem with its default tiering (sampling engages only under
  // pressure) vs no tracking, and with sampling forced on at the default rate.
  (void)d;
  (void)dt;
  (void)ds;
  j["tracking_speed_ratio"] = paired("all_dram_tiermem", "all_dram");
  j["forced_sampling_speed_ratio"] = paired("all_dram_sampled", "all_dram");
  j["rounds"] = rounds;
  j["migrations"] = t.migrations;
  j["faults"] = t.faults;
  j["recovery_ms"] = t.recovery_ms;
  j["working_set_bytes"] = ws;
  j["dram_budget_bytes"] = 2 * (ws / kChunks / kPage * kPage) * kHotChunks;
  j["seconds_per_half"] = half_s;
  for (auto& r : results) {
    nlohmann::json m = {{"ok", r.ok}, {"gups", r.gups}, {"updates", r.updates}, {"seconds", r.seconds},
                        {"faults", r.faults}, {"migrations", r.migrations}, {"recovery_ms", r.recovery_ms},
                        {"hot_in_dram_before_move", r.hot_in_dram_before},
                        {"hot_in_dram_at_end", r.hot_in_dram_after}, {"sampling", r.sampling},
                        {"failed_moves", r.failed_moves},
                        {"migrate_us_per_call", r.migrate_us_per_call}, {"policy_thread_busy", r.policy_thread_busy}, {"resident_share_at_end", r.resident_share_at_end}};
    m["faults_per_op"] = r.faults_per_op();
    AddPolicyCost(m, r.end, r.end_s);
    if (!r.ok) m["error"] = r.error;
    m["gups_runs"] = nlohmann::json::array();
    for (auto& x : runs[r.name]) m["gups_runs"].push_back(x.gups);
    j["modes"][r.name] = m;
  }
  printf("%s\n", j.dump(json ? 1 : 1).c_str());
  for (auto& r : results) if (!r.ok) return 1;
  return 0;
}

}  // namespace

Subcommand AddGups(CLI::App& bench) {
  auto a = std::make_shared<Args>();
  CLI::App& app = *AddSubcommand(
      bench, "gups",
      "GUPS with a moving hot set: automatic tiering vs oracle, no tracking and all-DRAM;\n"
      "gups --kernel: the QEMU full guest's workload under the kernel's own tiering",
      "GUPS over --size bytes with a hot set of 10% (90% of the updates) that moves halfway; DRAM "
      "budget = 2x the hot set, the rest on the remote tier (a memd on loopback unless --server). "
      "Runs all_dram, all_dram_tiermem, all_dram_sampled, tiered, oracle and no_tracking in turn, "
      "--rounds times interleaved, and prints each mode's median run and the medians of the "
      "per-round ratios as one JSON object. With --kernel, another workload instead: see below.");
  auto* timeline = app.add_option("--timeline", a->timeline,
                                  "each mode's live stats (last round) to PREFIX-MODE.jsonl and a plot of them to "
                                  "PREFIX-MODE.png (tiermemctl plot), e.g. --timeline /tmp/gups-timeline (default: none)")
                       ->type_name("PREFIX");
  AddSwitch(app, "--json", a->json, "no per-round progress lines on stderr (the JSON object is always printed)");
  auto* quick = AddSwitch(app, "--quick", a->quick, "48M, 3 s, 2 rounds, where not given");
  a->size = AddSize(app, "--size", a->ws, ParseSize, "256M", "8M", "", "working set in bytes (80 chunks)");
  // One --seconds for both modes, checked once parsed: at least 2 without --kernel.
  a->secs = AddCount(app, "--seconds", a->seconds, ParseUint, "1", "",
                     "length of one mode's run, at least 2; the hot set moves halfway (with --kernel: seconds "
                     "measured after the warm-up)")
                ->default_str("20; 15 with --kernel");
  a->rnds = AddCount(app, "--rounds", a->rounds, ParseUint, "1", "20", "interleaved rounds of all modes");
  auto* server = app.add_option("--server", a->server, "use this memd instead of starting one (default: a memd on loopback)")
                     ->type_name("tcp://HOST:PORT");
  auto* kernel = AddSwitch(app, "--kernel", a->kernel, "the same workload under the kernel's own tiering (see below)");
  for (CLI::Option* o : {timeline, quick, a->size, a->rnds, server}) kernel->excludes(o);
  app.footer(
      "JSON keys: all_dram_gups, all_dram_tiermem_gups, all_dram_sampled_gups, tiered_gups, oracle_gups,\n"
      "  no_tracking_gups (one MODE_gups per mode run; null when it failed), tiered_vs_oracle,\n"
      "  tiered_vs_no_tracking, tiered_vs_oracle_faults (tiered's faults_per_op over the oracle's),\n"
      "  tracking_speed_ratio, forced_sampling_speed_ratio, rounds, migrations, faults, recovery_ms\n"
      "  (those three of tiered), working_set_bytes, dram_budget_bytes, seconds_per_half, modes.\n"
      "  Ratios are medians of the per-round ratios.\n"
      "  modes.MODE: ok, gups, updates, seconds, faults, faults_per_op (remote faults per update),\n"
      "    migrations, recovery_ms, hot_in_dram_before_move, hot_in_dram_at_end, sampling,\n"
      "    failed_moves, migrate_us_per_call, policy_thread_busy, resident_share_at_end,\n"
      "    policy_cpu_fraction (the policy thread's CPU time over the mode's wall time),\n"
      "    policy_round_p50_ms, policy_round_p99_ms, policy_interval_ms (null without a policy\n"
      "    thread), gups_runs, error (only when it failed)\n"
      "Environment: TIERMEM_BENCH_GUPS_MODES=tiered,oracle runs only those modes;\n"
      "  TIERMEM_BENCH_GUPS_TRACE=1 prints each run's updates per 100 ms window on stderr;\n"
      "  TIERMEM_BENCH_MEMD_LOG=1 shows memd's log on stderr.");
  AddKernelGupsOptions(app, kernel, a->k);
  return {&app, [a](const std::string& command) { return RunGups(*a, command); }};
}

}  // namespace tiermem::bench

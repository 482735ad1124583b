// tiermem-bench kv: a Zipfian get/put workload over an open-addressing hash table that lives in
// tiermem memory, under several tier setups, side by side in one run.
//
// Table: --size bytes of 64-byte slots (8-byte key, 56-byte value), filled to 50%, allocated in
// 64 chunks. Requests: 90% get, 10% put (the value is rewritten), keys drawn from a Zipfian
// distribution (theta 0.99, YCSB's generator) over the loaded keys, hashed to slots, so hot keys
// spread over the table's pages. Setups, each in a fresh runtime:
//   dram         everything in DRAM, no policy thread
//   cxl          the table on the CXL tier (only where the machine has one)
//   tiered       DRAM budget = 1/4 of the table, the rest on the next tiers, automatic tiering
//   oracle       the same budget holding the pages most likely to be read, computed from the
//                workload's distribution (bench/kv_oracle.h); no policy thread
//   no_tracking  the same budget, pages faulted in and evicted first-in first-out
// Per setup: throughput (ops/s over the measured phase, after a warm-up phase) and p50/p99 of
// the per-request latency (every request timed), remote faults per request, what the policy
// thread cost (bench/policy_cost.h); the wall time of the fill and of the setup.
// The fill inserts the keys in the order of their home slot (one sweep over the table); with a
// DRAM budget, the measurement starts once DRAM is back within it. Afterwards
// the keys homed in two of the chunks are looked up and checked (nothing lost).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "bench/cli.h"
#include "bench/compare_util.h"
#include "bench/kv_model.h"
#include "bench/kv_oracle.h"
#include "bench/policy_cost.h"
#include "bench/subcommands.h"
#include "bench/timeline.h"
#include "tiermem/options.hpp"
#include "tiermem/tiermem.hpp"

namespace tiermem::bench {
namespace {

using kv::kSlot;
using kv::Slot;
using kv::Zipf;

constexpr int kChunks = 64;

// Pages of the table resident in memory (mincore).
uint64_t ResidentPages(const std::vector<char*>& chunks, size_t chunk_bytes) {
  std::vector<unsigned char> vec(chunk_bytes / 4096);
  uint64_t n = 0;
  for (char* c : chunks) {
    if (mincore(c, chunk_bytes, vec.data()) != 0) return 0;
    for (unsigned char v : vec) n += v & 1;
  }
  return n;
}

// How long the settle (below) may wait for DRAM to come back within its budget.
constexpr uint64_t kSettleLimitNs = 120ull * 1000 * 1000 * 1000;

struct SetupResult {
  std::string setup;
  bool ok = false;
  std::string error;
  double ops_s = 0, p50_ns = 0, p99_ns = 0, measured_s = 0;
  uint64_t faults = 0, migrations = 0, misses = 0;
  double fill_s = 0, settle_s = 0, setup_s = 0;  // wall times: fill, settle, whole setup
  bool settled = true;          // DRAM back within its budget before the measurement
  uint64_t resident_pages = 0;  // of the table, when the measurement began
  uint64_t rounds = 0;          // policy thread rounds over the whole setup
  double round_ms = 0;          // their mean length (scan, plan, migrate, arm)
  uint64_t verified = 0, lost = 0;  // keys checked after the measurement, and those wrong
  uint64_t fill_faults = 0, fill_zero_fills = 0, fill_evicted = 0;  // pager, during the fill
  RuntimeCounters end;  // the runtime's counters at the end of the setup (before the free)
  double end_s = 0;     // the setup's wall time when they were read
  // The oracle: what placing its plan cost, the plan's own figure, and its evictor.
  double plan_s = 0, expected_faults_per_op = 0, evictor_cpu_s = 0;
  uint64_t dram_pages = 0, evictor_pages = 0;
  std::string evictor_error;
};

// The oracle's evictor returns faulted-in pages to the remote tier this often: the policy
// thread's default round interval (TIERMEM_SAMPLE_INTERVAL_MS).
constexpr uint64_t kOracleEvictMs = 20;

SetupResult RunSetup(const std::string& setup, size_t bytes, double seconds, const std::string& remote,
                     const Zipf& zipf_proto, const std::string& timeline) {
  SetupResult res;
  res.setup = setup;
  const uint64_t t_setup = NowNs();
  const size_t chunk_bytes = bytes / kChunks / 4096 * 4096;
  const size_t chunk_slots = chunk_bytes / kSlot;
  const uint64_t keys = chunk_slots * kChunks / 2;
  Options o;
  // Quiet unless asked: TIERMEM_LOG=debug prints a line per policy round (what it did, and where
  // its time went: scripts/round-breakdown.py sums them).
  const char* log = getenv("TIERMEM_LOG");
  std::map<std::string, std::string> env = {{"TIERMEM_LOG", log != nullptr && *log != '\0' ? log : "error"}};
  const bool limited = setup == "tiered" || setup == "oracle" || setup == "no_tracking";
  const uint64_t dram_limit = limited ? chunk_bytes * kChunks / 4 : 0;
  if (limited) {
    o.Set("dram_limit", dram_limit);
    o.Set("remote", remote);
  }
  env["TIERMEM_SAMPLE_MODE"] = setup == "tiered" ? "auto" : setup == "no_tracking" ? "faults" : "off";
  AddTimeline(o, timeline, setup);
  auto rtor = StartWithEnv(o, env);
  if (!rtor.ok()) {
    res.error = rtor.status().ToString();
    return res;
  }
  Runtime& rt = **rtor;
  if (setup == "cxl" && !rt.HasTier(Tier::kCxl)) {
    for (auto& s : rt.Stats()) if (s.tier == Tier::kCxl) res.error = "absent: " + s.absent_reason;
    return res;
  }
  if (limited && !rt.HasTier(Tier::kRemote)) {
    for (auto& s : rt.Stats()) if (s.tier == Tier::kRemote) res.error = "absent: " + s.absent_reason;
    return res;
  }
  std::vector<char*> chunks;
  for (int c = 0; c < kChunks; ++c) {
    Tier t = setup == "cxl" ? Tier::kCxl : limited ? Tier::kRemote : Tier::kDram;
    auto p = rt.Allocate(chunk_bytes, t);
    if (!p.ok()) {
      res.error = p.status().ToString();
      return res;
    }
    chunks.push_back(static_cast<char*>(*p));
  }
  kv::OraclePlan plan;
  std::optional<kv::OracleEvictor> evictor;
  if (setup == "oracle") {  // placed before the fill: the fill then writes each page where it stays
    const uint64_t t_plan = NowNs();
    plan = kv::PlanOracle(kv::PageTouchProbability(zipf_proto, keys, chunk_slots * kChunks), dram_limit / 4096);
    if (Status placed = kv::PlaceOracle(rt, chunks, chunk_bytes, plan); !placed.ok()) {
      res.error = "oracle placement: " + placed.ToString();
      return res;
    }
    res.plan_s = static_cast<double>(NowNs() - t_plan) / 1e9;
    res.expected_faults_per_op = plan.expected_faults_per_op;
    res.dram_pages = plan.dram_pages;
    evictor.emplace(rt, chunks, chunk_bytes, plan, kOracleEvictMs);
  }
  kv::Table table(chunks, chunk_slots);
  const uint64_t t_fill = NowNs();
  const RuntimeCounters ps0 = rt.Counters();
  for (uint64_t k : kv::FillOrder(keys, chunk_slots * kChunks)) {
    Slot* s = table.Find(k, true);
    memset(s->value, static_cast<int>(k & 0x7f), sizeof(s->value));
  }
  res.fill_s = static_cast<double>(NowNs() - t_fill) / 1e9;
  {
    const RuntimeCounters ps1 = rt.Counters();
    res.fill_faults = ps1.remote_faults - ps0.remote_faults;
    res.fill_zero_fills = ps1.zero_fills - ps0.zero_fills;
    res.fill_evicted = ps1.pages_evicted - ps0.pages_evicted;
  }
  // Settle: the fill outruns the evictions, so DRAM holds more than its budget when it ends;
  // measure from the point where the policy has brought it back within the budget (resident
  // pages by mincore), not while it is still evicting the fill's excess.
  if (limited) {
    const uint64_t t_settle = NowNs();
    const uint64_t budget_pages = dram_limit / 4096;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    while ((res.resident_pages = ResidentPages(chunks, chunk_bytes)) > budget_pages &&
           NowNs() - t_settle < kSettleLimitNs) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    res.settle_s = static_cast<double>(NowNs() - t_settle) / 1e9;
    res.settled = res.resident_pages <= budget_pages;
  }
  Zipf zipf = zipf_proto;
  std::mt19937_64 rng(99);
  std::vector<double> lat;
  lat.reserve(1 << 20);
  uint64_t ops = 0;
  uint64_t faults0 = 0, migr0 = 0, t_measure = 0;
  const uint64_t t0 = NowNs();
  const uint64_t t_warm = t0 + static_cast<uint64_t>(seconds * 0.3e9);
  const uint64_t t_end = t0 + static_cast<uint64_t>(seconds * 1e9);
  volatile uint64_t sink = 0;
  bool measuring = false;
  for (;;) {
    uint64_t key = kv::KeyOfItem(zipf.Next(rng), keys);  // popular keys scattered
    bool put = rng() % 10 == 0;
    uint64_t a = NowNs();
    Slot* s = table.Find(key, false);
    if (s == nullptr) {
      ++res.misses;
    } else if (put) {
      s->value[a % 56] = static_cast<char>(key & 0x7f);  // rewritten (same bytes: checkable)
    } else {
      sink = sink + static_cast<uint64_t>(s->value[0]);
    }
    uint64_t b = NowNs();
    if (measuring) {
      ++ops;
      if (lat.size() < lat.capacity()) lat.push_back(static_cast<double>(b - a));
    } else if (b >= t_warm) {
      measuring = true;
      t_measure = b;
      const RuntimeCounters c = rt.Counters();
      faults0 = c.remote_faults;
      migr0 = c.demotions + c.promotions;
    }
    if (b >= t_end) break;
  }
  const double secs = static_cast<double>(NowNs() - t_measure) / 1e9;
  const RuntimeCounters ms = rt.Counters();
  res.rounds = ms.policy_rounds;
  res.round_ms = ms.policy_rounds ? static_cast<double>(ms.policy_round_ns) / 1e6 / static_cast<double>(ms.policy_rounds) : 0;
  res.measured_s = secs;
  res.ops_s = static_cast<double>(ops) / secs;
  res.p50_ns = Percentile(lat, 0.5);
  res.p99_ns = Percentile(lat, 0.99);
  res.faults = ms.remote_faults - faults0;
  res.migrations = ms.demotions + ms.promotions - migr0;
  // Nothing lost: the keys whose home slot is in two of the chunks (1/32 of the table, so a
  // remote-backed table is not faulted in whole) are found with their value intact.
  for (uint64_t k = 1; k <= keys; ++k) {
    const uint64_t home_chunk = kv::HomeSlot(k, chunk_slots * kChunks) / chunk_slots;
    if (home_chunk != 0 && home_chunk != kChunks / 2) continue;
    ++res.verified;
    Slot* s = table.Find(k, false);
    bool good = s != nullptr;
    for (size_t b = 0; good && b < sizeof(s->value); ++b) good = s->value[b] == static_cast<char>(k & 0x7f);
    res.lost += !good;
  }
  res.end = rt.Counters();
  res.end_s = static_cast<double>(NowNs() - t_setup) / 1e9;
  if (evictor) {
    evictor->Stop();
    res.evictor_pages = evictor->pages_evicted();
    res.evictor_cpu_s = static_cast<double>(evictor->cpu_ns()) / 1e9;
    res.evictor_error = evictor->error();
  }
  for (char* p : chunks) (void)rt.Free(p);
  (void)rt.Stop();
  res.setup_s = static_cast<double>(NowNs() - t_setup) / 1e9;
  res.ok = true;
  return res;
}

struct Args {
  size_t bytes = 4ull << 30;
  uint64_t seconds_arg = 10;
  bool json = false, quick = false;
  std::string setup_list = "dram,cxl,tiered,oracle,no_tracking";
  std::string timeline;  // none unless asked: a benchmark writes files only where told
  CLI::Option *size = nullptr, *secs = nullptr;
};

int RunKv(Args args, const std::string& command) {
  auto& [bytes, seconds_arg, json, quick, setup_list, timeline, size, secs] = args;
  if (quick) {
    UnlessGiven(size, bytes, 32u << 20);
    UnlessGiven(secs, seconds_arg, 4);
  }
  const double seconds = static_cast<double>(seconds_arg);
  const std::vector<std::string> setups = SplitList(setup_list, true);
  MemdChild memd;
  std::string remote;
  if (memd.Start(bytes * 2)) remote = memd.Url("tcp");
  const uint64_t keys = (bytes / kChunks / 4096 * 4096) / kSlot * kChunks / 2;
  Zipf zipf(keys, 0.99);
  nlohmann::json j;
  j["results"] = nlohmann::json::array();
  j["absent"] = nlohmann::json::array();
  bool data_ok = true;
  std::map<std::string, double> faults_per_op;  // by setup
  const uint64_t t_run = NowNs();
  for (const std::string& name : setups) {
    const char* setup = name.c_str();
    SetupResult r = RunSetup(setup, bytes, seconds, remote, zipf, timeline);
    if (r.ok) PlotTimeline(timeline, setup);
    if (!r.ok && !timeline.empty()) unlink((timeline + "-" + name + ".jsonl").c_str());  // absent: no timeline
    if (!r.ok) {
      j["absent"].push_back({{"setup", setup}, {"reason", r.error}});
      if (!json) printf("%-12s %s\n", setup, r.error.c_str());
      continue;
    }
    nlohmann::json e = {{"setup", setup}, {"ops_s", r.ops_s}, {"p50_ns", r.p50_ns}, {"p99_ns", r.p99_ns},
                        {"faults", r.faults}, {"migrations", r.migrations}, {"misses", r.misses},
                        {"fill_s", r.fill_s}, {"setup_s", r.setup_s}, {"measured_s", r.measured_s}};
    e["verified_keys"] = r.verified;
    e["lost_keys"] = r.lost;
    if (r.lost > 0) {
      fprintf(stderr, "kv %s: %llu of %llu keys checked were lost or corrupt\n", setup,
              static_cast<unsigned long long>(r.lost), static_cast<unsigned long long>(r.verified));
      data_ok = false;
    }
    // Remote faults per request: the placement's quality, less dependent on this machine's load
    // than ops/s (which is the rate faults are served at).
    e["faults_per_op"] = r.ops_s > 0 ? static_cast<double>(r.faults) / (r.ops_s * r.measured_s) : 0.0;
    AddPolicyCost(e, r.end, r.end_s);
    if (name == "tiered" || name == "oracle" || name == "no_tracking") {
      e["policy_rounds"] = r.rounds;
      e["policy_round_ms"] = r.round_ms;
      e["fill_faults"] = r.fill_faults;
      e["fill_zero_fills"] = r.fill_zero_fills;
      e["fill_evicted"] = r.fill_evicted;
      e["settle_s"] = r.settle_s;
      e["settled"] = r.settled;
      e["resident_pages_at_start"] = r.resident_pages;
    }
    if (name == "oracle") {
      e["expected_faults_per_op"] = r.expected_faults_per_op;
      e["dram_pages"] = r.dram_pages;
      e["plan_s"] = r.plan_s;
      e["evictor_pages"] = r.evictor_pages;
      e["evictor_cpu_fraction"] = r.end_s > 0 ? r.evictor_cpu_s / r.end_s : 0.0;
      if (!r.evictor_error.empty()) e["evictor_error"] = r.evictor_error;
    }
    faults_per_op[name] = e["faults_per_op"].get<double>();
    j["results"].push_back(e);
    if (!json) {
      printf("%-12s %12.0f ops/s  p50 %9.0f ns  p99 %9.0f ns  faults %llu (%.3f/op)  migrations %llu  "
             "fill %.1f s  setup %.1f s%s\n",
             setup, r.ops_s, r.p50_ns, r.p99_ns, static_cast<unsigned long long>(r.faults), faults_per_op[name],
             static_cast<unsigned long long>(r.migrations), r.fill_s, r.setup_s,
             r.settled ? "" : "  (DRAM still over its budget when measured)");
    }
  }
  j["tiered_vs_oracle_faults"] = nullptr;
  if (faults_per_op.count("tiered") && faults_per_op.count("oracle") && faults_per_op["oracle"] > 0) {
    j["tiered_vs_oracle_faults"] = faults_per_op["tiered"] / faults_per_op["oracle"];
  }
  j["table_bytes"] = bytes;
  j["seconds"] = seconds;
  j["total_s"] = static_cast<double>(NowNs() - t_run) / 1e9;
  j["command"] = command;
  j["data_ok"] = data_ok;
  if (json) printf("%s\n", j.dump(1).c_str());
  if (!json) printf("total %.1f s%s\n", j["total_s"].get<double>(), data_ok ? "" : "; DATA LOST (see above)");
  return data_ok ? 0 : 1;
}

}  // namespace

Subcommand AddKv(CLI::App& bench) {
  auto a = std::make_shared<Args>();
  CLI::App& app = *AddSubcommand(
      bench, "kv",
      "Zipfian get/put over a hash table: throughput and p99 per tier setup",
      "Zipfian (theta 0.99) 90% get / 10% put over a hash table of --size bytes, under the setups "
      "dram, cxl (where present), tiered, oracle and no_tracking (DRAM budget 1/4 of the table, the "
      "rest remote over TCP to a memd on loopback started here; the oracle holds the pages most "
      "likely to be read in DRAM, computed from the distribution). Exit status 1 when a checked key "
      "was lost.");
  AddSwitch(app, "--json", a->json, "print one JSON object instead of a line per setup");
  AddSwitch(app, "--quick", a->quick, "32M, 4 s per setup, where not given");
  // At most 256G: the keys fit in 32 bits (FillOrder).
  a->size = AddSize(app, "--size", a->bytes, ParseSize, "4G", "16M", "256G", "bytes of the table");
  a->secs = AddCount(app, "--seconds", a->seconds_arg, ParseUint, "1", "", "seconds per setup (the first 30% are warm-up)");
  app.add_option("--timeline", a->timeline,
                 "each setup's live stats to PREFIX-SETUP.jsonl and a plot of them to PREFIX-SETUP.png "
                 "(tiermemctl plot), e.g. --timeline /tmp/kv-timeline (default: none)")
      ->type_name("PREFIX");
  app.add_option("--setups", a->setup_list, "setups to run, in this order")
      ->check(ListOf({"dram", "cxl", "tiered", "oracle", "no_tracking"}))
      ->capture_default_str();
  app.footer(
      "JSON keys (--json): results, absent, table_bytes, seconds, total_s, command, data_ok,\n"
      "  tiered_vs_oracle_faults (tiered's faults_per_op over the oracle's; null without both).\n"
      "  results[]: setup, ops_s, p50_ns, p99_ns, faults, faults_per_op (remote faults per request;\n"
      "    0 where nothing is remote), migrations, misses, fill_s, setup_s, measured_s,\n"
      "    verified_keys, lost_keys, policy_cpu_fraction (the policy thread's CPU time over the\n"
      "    setup's wall time), policy_round_p50_ms, policy_round_p99_ms, policy_interval_ms (null\n"
      "    without a policy thread); for tiered, oracle and no_tracking also policy_rounds,\n"
      "    policy_round_ms, fill_faults, fill_zero_fills, fill_evicted, settle_s, settled,\n"
      "    resident_pages_at_start; for oracle also expected_faults_per_op, dram_pages, plan_s,\n"
      "    evictor_pages, evictor_cpu_fraction, evictor_error (only when a move failed)\n"
      "  absent[]: setup, reason\n"
      "Environment: TIERMEM_BENCH_MEMD_LOG=1 shows memd's log on stderr.");
  return {&app, [a](const std::string& command) { return RunKv(*a, command); }};
}

}  // namespace tiermem::bench

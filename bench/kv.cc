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
//   no_tracking  the same budget, pages faulted in and evicted first-in first-out
// Per setup: throughput (ops/s over the measured phase, after a warm-up phase) and p50/p99 of
// the per-request latency (every request timed); the wall time of the fill and of the setup.
// The fill inserts the keys in the order of their home slot (one sweep over the table); with a
// DRAM budget, the measurement starts once the policy has brought DRAM back within it. Afterwards
// the keys homed in two of the chunks are looked up and checked (nothing lost).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sys/mman.h>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "bench/cli.h"
#include "bench/compare_util.h"
#include "bench/subcommands.h"
#include "bench/timeline.h"
#include "tiermem/options.hpp"
#include "tiermem/tiermem.hpp"

namespace tiermem::bench {
namespace {

constexpr size_t kSlot = 64;
constexpr int kChunks = 64;

struct Slot {
  uint64_t key;  // 0 = empty
  char value[56];
};
static_assert(sizeof(Slot) == kSlot);

// YCSB's Zipfian generator (Gray et al.), items 0..n-1, item 0 the most popular.
class Zipf {
 public:
  Zipf(uint64_t n, double theta) : n_(n), theta_(theta) {
    for (uint64_t i = 1; i <= n; ++i) zetan_ += 1.0 / std::pow(static_cast<double>(i), theta);
    double zeta2 = 1.0 + 1.0 / std::pow(2.0, theta);
    alpha_ = 1.0 / (1.0 - theta);
    eta_ = (1.0 - std::pow(2.0 / static_cast<double>(n), 1.0 - theta)) / (1.0 - zeta2 / zetan_);
  }
  uint64_t Next(std::mt19937_64& rng) {
    double u = std::uniform_real_distribution<double>(0, 1)(rng);
    double uz = u * zetan_;
    if (uz < 1.0) return 0;
    if (uz < 1.0 + std::pow(0.5, theta_)) return 1;
    return static_cast<uint64_t>(static_cast<double>(n_) * std::pow(eta_ * u - eta_ + 1.0, alpha_)) % n_;
  }

 private:
  uint64_t n_;
  double theta_, zetan_ = 0, alpha_ = 0, eta_ = 0;
};

uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

class Table {
 public:
  Table(std::vector<char*> chunks, size_t chunk_slots)
      : chunks_(std::move(chunks)), chunk_slots_(chunk_slots), slots_(chunk_slots * chunks_.size()) {}
  Slot& At(uint64_t i) { return reinterpret_cast<Slot*>(chunks_[i / chunk_slots_])[i % chunk_slots_]; }
  // Linear probing; key != 0.
  Slot* Find(uint64_t key, bool insert) {
    for (uint64_t i = Mix(key) % slots_, n = 0; n < slots_; ++n, i = (i + 1) % slots_) {
      Slot& s = At(i);
      if (s.key == key) return &s;
      if (s.key == 0) {
        if (!insert) return nullptr;
        s.key = key;
        return &s;
      }
    }
    return nullptr;
  }

 private:
  std::vector<char*> chunks_;
  size_t chunk_slots_;
  uint64_t slots_;
};

// The keys 1..keys in the order of their home slot (counting sort by the home slot's page), so
// the fill sweeps the table once from start to end. Inserted in key order, they land on pages at
// random: with 1/4 of the table in DRAM, 3 inserts in 4 faulted a page back from the remote tier
// (at 64 MiB, 350k faults for 16k pages), and the fill of a 1 GiB table took most of 10 minutes.
// Linear probing fills the same set of slots whatever the insertion order (only which key sits in
// which slot changes), so the table the workload runs on is equivalent.
std::vector<uint32_t> FillOrder(uint64_t keys, uint64_t slots) {
  constexpr uint64_t kSlotsPerPage = 4096 / kSlot;
  const uint64_t pages = (slots + kSlotsPerPage - 1) / kSlotsPerPage;
  std::vector<uint32_t> start(pages + 1, 0);
  for (uint64_t k = 1; k <= keys; ++k) ++start[Mix(k) % slots / kSlotsPerPage + 1];
  for (uint64_t p = 0; p < pages; ++p) start[p + 1] += start[p];
  std::vector<uint32_t> order(keys);
  for (uint64_t k = 1; k <= keys; ++k) order[start[Mix(k) % slots / kSlotsPerPage]++] = static_cast<uint32_t>(k);
  return order;
}

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
};

SetupResult RunSetup(const std::string& setup, size_t bytes, double seconds, const std::string& remote,
                     const Zipf& zipf_proto, const std::string& timeline) {
  SetupResult res;
  res.setup = setup;
  const uint64_t t_setup = NowNs();
  const size_t chunk_bytes = bytes / kChunks / 4096 * 4096;
  const size_t chunk_slots = chunk_bytes / kSlot;
  const uint64_t keys = chunk_slots * kChunks / 2;
  Options o;
  std::map<std::string, std::string> env = {{"TIERMEM_LOG", "error"}};
  const bool limited = setup == "tiered" || setup == "no_tracking";
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
  Table table(chunks, chunk_slots);
  const uint64_t t_fill = NowNs();
  const RuntimeCounters ps0 = rt.Counters();
  for (uint64_t k : FillOrder(keys, chunk_slots * kChunks)) {
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
    uint64_t key = Mix(zipf.Next(rng) + 0x1234) % keys + 1;  // scatter popular keys
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
    const uint64_t home_chunk = Mix(k) % (chunk_slots * kChunks) / chunk_slots;
    if (home_chunk != 0 && home_chunk != kChunks / 2) continue;
    ++res.verified;
    Slot* s = table.Find(k, false);
    bool good = s != nullptr;
    for (size_t b = 0; good && b < sizeof(s->value); ++b) good = s->value[b] == static_cast<char>(k & 0x7f);
    res.lost += !good;
  }
  for (char* p : chunks) (void)rt.Free(p);
  (void)rt.Stop();
  res.setup_s = static_cast<double>(NowNs() - t_setup) / 1e9;
  res.ok = true;
  return res;
}

}  // namespace

int Kv(int argc, char** argv) {
  size_t bytes = 4ull << 30;
  uint64_t seconds_arg = 10;
  bool json = false, quick = false;
  std::string setup_list = "dram,cxl,tiered,no_tracking";
  std::string timeline = "kv-timeline";
  CLI::App app{"Zipfian (theta 0.99) 90% get / 10% put over a hash table of --size bytes, under the setups "
               "dram, cxl (where present), tiered and no_tracking (DRAM budget 1/4 of the table, the rest "
               "remote over TCP to a memd on loopback started here). Exit status 1 when a checked key was "
               "lost.",
               "tiermem-bench kv"};
  AddSwitch(app, "--json", json, "print one JSON object instead of a line per setup");
  AddSwitch(app, "--quick", quick, "32M, 4 s per setup, where not given");
  // At most 256G: the keys fit in 32 bits (FillOrder).
  auto* size = AddSize(app, "--size", bytes, ParseSize, "4G", "16M", "256G", "bytes of the table");
  auto* secs = AddCount(app, "--seconds", seconds_arg, ParseUint, "1", "", "seconds per setup (the first 30% are warm-up)");
  app.add_option("--timeline", timeline,
                 "each setup's live stats to PREFIX-SETUP.jsonl and a plot of them to PREFIX-SETUP.png "
                 "(tiermemctl plot); empty: none")
      ->capture_default_str();
  app.add_option("--setups", setup_list, "setups to run, in this order")
      ->check(ListOf({"dram", "cxl", "tiered", "no_tracking"}))
      ->capture_default_str();
  app.footer(
      "JSON keys (--json): results, absent, table_bytes, seconds, total_s, command, data_ok.\n"
      "  results[]: setup, ops_s, p50_ns, p99_ns, faults, migrations, misses, fill_s, setup_s,\n"
      "    measured_s, verified_keys, lost_keys; for tiered and no_tracking also faults_per_op,\n"
      "    policy_rounds, policy_round_ms, fill_faults, fill_zero_fills, fill_evicted, settle_s,\n"
      "    settled, resident_pages_at_start\n"
      "  absent[]: setup, reason\n"
      "Environment: TIERMEM_BENCH_MEMD_LOG=1 shows memd's log on stderr.");
  if (int rc = ParseArgs(app, argc, argv); rc >= 0) return rc;
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
    if (std::string(setup) == "tiered" || std::string(setup) == "no_tracking") {
      // Remote faults per request: the policy's placement, less dependent on this machine's
      // load than ops/s (which is the rate faults are served at).
      e["faults_per_op"] = r.ops_s > 0 ? static_cast<double>(r.faults) / (r.ops_s * r.measured_s) : 0.0;
      e["policy_rounds"] = r.rounds;
      e["policy_round_ms"] = r.round_ms;
      e["fill_faults"] = r.fill_faults;
      e["fill_zero_fills"] = r.fill_zero_fills;
      e["fill_evicted"] = r.fill_evicted;
      e["settle_s"] = r.settle_s;
      e["settled"] = r.settled;
      e["resident_pages_at_start"] = r.resident_pages;
    }
    j["results"].push_back(e);
    if (!json) {
      printf("%-12s %12.0f ops/s  p50 %9.0f ns  p99 %9.0f ns  faults %llu  migrations %llu  fill %.1f s  "
             "setup %.1f s%s\n",
             setup, r.ops_s, r.p50_ns, r.p99_ns, static_cast<unsigned long long>(r.faults),
             static_cast<unsigned long long>(r.migrations), r.fill_s, r.setup_s,
             r.settled ? "" : "  (DRAM still over its budget when measured)");
    }
  }
  j["table_bytes"] = bytes;
  j["seconds"] = seconds;
  j["total_s"] = static_cast<double>(NowNs() - t_run) / 1e9;
  std::string command = "tiermem-bench kv";
  for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
  j["command"] = command;
  j["data_ok"] = data_ok;
  if (json) printf("%s\n", j.dump(1).c_str());
  if (!json) printf("total %.1f s%s\n", j["total_s"].get<double>(), data_ok ? "" : "; DATA LOST (see above)");
  return data_ok ? 0 : 1;
}

}  // namespace tiermem::bench

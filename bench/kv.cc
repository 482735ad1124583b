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
// the per-request latency (every request timed).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/compare_util.h"
#include "bench/subcommands.h"
#include "runtime/migrator.h"
#include "runtime/options.h"
#include "runtime/runtime_impl.h"

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

struct SetupResult {
  std::string setup;
  bool ok = false;
  std::string error;
  double ops_s = 0, p50_ns = 0, p99_ns = 0;
  uint64_t faults = 0, migrations = 0, misses = 0;
};

SetupResult RunSetup(const std::string& setup, size_t bytes, double seconds, const std::string& remote,
                     const Zipf& zipf_proto) {
  SetupResult res;
  res.setup = setup;
  const size_t chunk_bytes = bytes / kChunks / 4096 * 4096;
  const size_t chunk_slots = chunk_bytes / kSlot;
  const uint64_t keys = chunk_slots * kChunks / 2;
  Options o;
  std::map<std::string, std::string> env = {{"TIERMEM_LOG", "error"}};
  const bool limited = setup == "tiered" || setup == "no_tracking";
  if (limited) {
    o.dram_limit = chunk_bytes * kChunks / 4;
    o.remote = remote;
  }
  env["TIERMEM_SAMPLE_MODE"] = setup == "tiered" ? "auto" : setup == "no_tracking" ? "faults" : "off";
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
  for (uint64_t k = 1; k <= keys; ++k) {
    Slot* s = table.Find(k, true);
    memset(s->value, static_cast<int>(k & 0x7f), sizeof(s->value));
  }
  if (limited) std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  Zipf zipf = zipf_proto;
  std::mt19937_64 rng(99);
  std::vector<double> lat;
  lat.reserve(1 << 20);
  uint64_t ops = 0;
  Migrator* mig = rt.impl()->migrator();
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
      s->value[a % 56] = static_cast<char>(a);
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
      if (Pager* pg = rt.impl()->pager()) faults0 = pg->stats().faults;
      if (mig) migr0 = mig->stats().demotions + mig->stats().promotions;
    }
    if (b >= t_end) break;
  }
  const double secs = static_cast<double>(NowNs() - t_measure) / 1e9;
  res.ops_s = static_cast<double>(ops) / secs;
  res.p50_ns = Percentile(lat, 0.5);
  res.p99_ns = Percentile(lat, 0.99);
  if (Pager* pg = rt.impl()->pager()) res.faults = pg->stats().faults - faults0;
  if (mig) res.migrations = mig->stats().demotions + mig->stats().promotions - migr0;
  for (char* p : chunks) (void)rt.Free(p);
  (void)rt.Stop();
  res.ok = true;
  return res;
}

}  // namespace

int Kv(int argc, char** argv) {
  size_t bytes = 1ull << 30;
  double seconds = 10;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    uint64_t v = 0;
    if (a == "--json") {
      json = true;
    } else if (a == "--quick") {
      bytes = 32u << 20;
      seconds = 4;
    } else if (a == "--size" && i + 1 < argc && ParseSize(argv[i + 1], &v) && v >= (16u << 20)) {
      bytes = v;
      ++i;
    } else if (a == "--seconds" && i + 1 < argc && ParseUint(argv[i + 1], &v) && v >= 1) {
      seconds = static_cast<double>(v);
      ++i;
    } else if (a == "--help" || a == "-h") {
      printf("usage: tiermem-bench kv [--json] [--quick] [--size 1G] [--seconds 10]\n"
             "Zipfian (theta 0.99) 90%% get / 10%% put over a hash table of --size bytes, under\n"
             "the setups dram, cxl (where present), tiered and no_tracking (DRAM budget 1/4 of\n"
             "the table, the rest remote over TCP to a memd on loopback started here).\n");
      return 0;
    } else {
      fprintf(stderr, "kv: bad or unknown option '%s' (see --help)\n", a.c_str());
      return 2;
    }
  }
  MemdChild memd;
  std::string remote;
  if (memd.Start(bytes * 2)) remote = memd.Url("tcp");
  const uint64_t keys = (bytes / kChunks / 4096 * 4096) / kSlot * kChunks / 2;
  Zipf zipf(keys, 0.99);
  nlohmann::json j;
  j["results"] = nlohmann::json::array();
  j["absent"] = nlohmann::json::array();
  for (const char* setup : {"dram", "cxl", "tiered", "no_tracking"}) {
    SetupResult r = RunSetup(setup, bytes, seconds, remote, zipf);
    if (!r.ok) {
      j["absent"].push_back({{"setup", setup}, {"reason", r.error}});
      if (!json) printf("%-12s %s\n", setup, r.error.c_str());
      continue;
    }
    j["results"].push_back({{"setup", setup}, {"ops_s", r.ops_s}, {"p50_ns", r.p50_ns}, {"p99_ns", r.p99_ns},
                            {"faults", r.faults}, {"migrations", r.migrations}, {"misses", r.misses}});
    if (!json) {
      printf("%-12s %12.0f ops/s  p50 %9.0f ns  p99 %9.0f ns  faults %llu  migrations %llu\n", setup, r.ops_s,
             r.p50_ns, r.p99_ns, static_cast<unsigned long long>(r.faults),
             static_cast<unsigned long long>(r.migrations));
    }
  }
  j["table_bytes"] = bytes;
  j["seconds"] = seconds;
  if (json) printf("%s\n", j.dump(1).c_str());
  return 0;
}

}  // namespace tiermem::bench

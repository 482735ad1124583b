// tiermem-bench kv-replay: the page reads of `kv`'s exact request trace (the same Zipf generator,
// seed, key hash, table layout and fill), replayed against page-replacement policies with the same
// DRAM budget (a quarter of the table's pages), without a runtime or a memd. Faults per request
// are counted, as `kv` counts remote faults, over the requests after the first 30% (kv's
// warm-up). It shows how much of the gap between `kv`'s tiered setup and its oracle any online
// policy can close at the length of run `kv` makes:
//   oracle  the pages most likely to be read, fixed (kv's oracle setup; a read elsewhere faults)
//   fifo    first in, first out (kv's no_tracking setup)
//   lru     least recently used, every read seen (no sampling)
//   clock   one reference bit per page, every read seen
//   lfu     least frequently used with exact counts of every read since the trace began: the
//           best a frequency policy that learns from the trace can know
// The run starts where kv's measurement starts after its fill: the table's last budget pages
// resident, oldest first (the fill writes the table in order and relief evicts first in, first
// out); the oracle starts with its plan.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/cli.h"
#include "bench/kv_model.h"
#include "bench/kv_oracle.h"
#include "bench/subcommands.h"
#include "tiermem/options.hpp"

namespace tiermem::bench {
namespace {

using kv::kPageBytes;
using kv::kSlot;

// One replacement policy over `pages` pages with room for `budget`. Touch: true on a fault.
class Replacement {
 public:
  virtual ~Replacement() = default;
  virtual bool Touch(uint32_t page) = 0;
};

// The pages [pages - budget, pages) resident, oldest first: the state after kv's fill.
std::vector<uint32_t> AfterFill(uint32_t pages, uint32_t budget) {
  std::vector<uint32_t> v;
  for (uint32_t p = pages - budget; p < pages; ++p) v.push_back(p);
  return v;
}

class Oracle final : public Replacement {
 public:
  explicit Oracle(const kv::OraclePlan& plan) : plan_(plan) {}
  bool Touch(uint32_t page) override { return plan_.in_dram[page] == 0; }

 private:
  const kv::OraclePlan& plan_;
};

class Fifo final : public Replacement {
 public:
  Fifo(uint32_t pages, uint32_t budget) : resident_(pages, 0), ring_(AfterFill(pages, budget)) {
    for (uint32_t p : ring_) resident_[p] = 1;
  }
  bool Touch(uint32_t page) override {
    if (resident_[page]) return false;
    resident_[ring_[head_]] = 0;  // the oldest leaves; the new page takes its place in the ring
    ring_[head_] = page;
    resident_[page] = 1;
    head_ = (head_ + 1) % ring_.size();
    return true;
  }

 private:
  std::vector<uint8_t> resident_;
  std::vector<uint32_t> ring_;
  size_t head_ = 0;
};

class Lru final : public Replacement {
 public:
  Lru(uint32_t pages, uint32_t budget) : prev_(pages, kNone), next_(pages, kNone), in_(pages, 0) {
    for (uint32_t p : AfterFill(pages, budget)) PushNewest(p);
  }
  bool Touch(uint32_t page) override {
    const bool miss = !in_[page];
    if (miss) {
      const uint32_t old = oldest_;
      Unlink(old);
      in_[old] = 0;
    } else {
      Unlink(page);
    }
    PushNewest(page);
    return miss;
  }

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  void Unlink(uint32_t p) {
    if (prev_[p] != kNone) next_[prev_[p]] = next_[p];
    else oldest_ = next_[p];
    if (next_[p] != kNone) prev_[next_[p]] = prev_[p];
    else newest_ = prev_[p];
  }
  void PushNewest(uint32_t p) {
    in_[p] = 1;
    prev_[p] = newest_;
    next_[p] = kNone;
    if (newest_ != kNone) next_[newest_] = p;
    else oldest_ = p;
    newest_ = p;
  }
  std::vector<uint32_t> prev_, next_;
  std::vector<uint8_t> in_;
  uint32_t oldest_ = kNone, newest_ = kNone;
};

class Clock final : public Replacement {
 public:
  Clock(uint32_t pages, uint32_t budget) : state_(pages, 0), ring_(AfterFill(pages, budget)) {
    for (uint32_t p : ring_) state_[p] = kIn;
  }
  bool Touch(uint32_t page) override {
    if (state_[page] & kIn) {
      state_[page] |= kRef;
      return false;
    }
    for (;;) {  // the hand clears reference bits until it meets a page without one
      uint32_t& slot = ring_[hand_];
      hand_ = (hand_ + 1) % ring_.size();
      if (state_[slot] & kRef) {
        state_[slot] &= static_cast<uint8_t>(~kRef);
        continue;
      }
      state_[slot] = 0;
      slot = page;
      state_[page] = kIn;
      return true;
    }
  }

 private:
  static constexpr uint8_t kIn = 1, kRef = 2;
  std::vector<uint8_t> state_;
  std::vector<uint32_t> ring_;
  size_t hand_ = 0;
};

class Lfu final : public Replacement {
 public:
  Lfu(uint32_t pages, uint32_t budget) : count_(pages, 0), in_(pages, 0) {
    for (uint32_t p : AfterFill(pages, budget)) {
      in_[p] = 1;
      by_count_.insert({0, p});
    }
  }
  bool Touch(uint32_t page) override {
    const bool miss = !in_[page];
    if (miss) {
      auto victim = by_count_.begin();  // the fewest reads (ties: the lowest page)
      in_[victim->second] = 0;
      by_count_.erase(victim);
      in_[page] = 1;
    } else {
      by_count_.erase({count_[page], page});
    }
    by_count_.insert({++count_[page], page});
    return miss;
  }

 private:
  std::vector<uint64_t> count_;  // reads since the trace began, resident or not
  std::vector<uint8_t> in_;
  std::set<std::pair<uint64_t, uint32_t>> by_count_;  // the resident pages
};

struct Args {
  size_t bytes = 1ull << 30;
  std::string requests_arg = "300000,1000000";
  bool json = false;
};

int RunKvReplay(Args args, const std::string& command) {
  auto& [bytes, requests_arg, json] = args;
  std::vector<uint64_t> lengths;
  for (const std::string& s : SplitList(requests_arg, false)) {
    char* end = nullptr;
    const unsigned long long n = strtoull(s.c_str(), &end, 10);
    if (end == s.c_str() || *end != 0 || n < 10) {
      fprintf(stderr, "kv-replay: --requests: \"%s\" is not a count of at least 10\n", s.c_str());
      return 2;
    }
    lengths.push_back(n);
  }
  std::sort(lengths.begin(), lengths.end());
  // The table as kv lays it out: 64 chunks, half the slots filled, a quarter of the pages in DRAM.
  constexpr uint64_t kChunks = 64;
  const uint64_t chunk_slots = bytes / kChunks / kPageBytes * kPageBytes / kSlot;
  const uint64_t slots = chunk_slots * kChunks;
  const uint64_t keys = slots / 2;
  const auto pages = static_cast<uint32_t>(slots / kv::kSlotsPerPage);
  const uint32_t budget = pages / 4;
  const kv::Zipf zipf_proto(keys, 0.99);
  const kv::LookupPages lookups(keys, slots);
  const kv::OraclePlan plan = kv::PlanOracle(kv::PageTouchProbability(zipf_proto, keys, slots), budget);

  const char* names[] = {"oracle", "fifo", "lru", "clock", "lfu"};
  std::vector<std::unique_ptr<Replacement>> policies;
  policies.push_back(std::make_unique<Oracle>(plan));
  policies.push_back(std::make_unique<Fifo>(pages, budget));
  policies.push_back(std::make_unique<Lru>(pages, budget));
  policies.push_back(std::make_unique<Clock>(pages, budget));
  policies.push_back(std::make_unique<Lfu>(pages, budget));
  const size_t np = policies.size();
  // Faults of each policy counted up to each checkpoint (0.3 N and N of every length N).
  std::vector<uint64_t> marks;
  for (uint64_t n : lengths) {
    marks.push_back(n * 3 / 10);
    marks.push_back(n);
  }
  std::sort(marks.begin(), marks.end());
  std::vector<std::vector<uint64_t>> at_mark(marks.size(), std::vector<uint64_t>(np));
  std::vector<uint64_t> faults(np, 0);
  kv::Zipf zipf = zipf_proto;
  std::mt19937_64 rng(99);  // kv's seed, and kv's draws: the item, then the get/put choice
  size_t next_mark = 0;
  for (uint64_t r = 0; next_mark < marks.size(); ++r) {
    while (next_mark < marks.size() && marks[next_mark] == r) at_mark[next_mark++] = faults;
    if (next_mark == marks.size()) break;
    const uint64_t key = kv::KeyOfItem(zipf.Next(rng), keys);
    (void)rng();  // kv's get/put draw: a put reads the same pages
    const uint64_t home = kv::HomeSlot(key, slots) / kv::kSlotsPerPage;
    for (uint64_t e = 0, n = lookups.Extra(key); e <= n; ++e) {
      const auto page = static_cast<uint32_t>((home + e) % pages);
      for (size_t i = 0; i < np; ++i) faults[i] += policies[i]->Touch(page) ? 1 : 0;
    }
  }
  auto mark_of = [&](uint64_t r) { return static_cast<size_t>(std::lower_bound(marks.begin(), marks.end(), r) - marks.begin()); };
  nlohmann::json j;
  j["command"] = command;
  j["size_bytes"] = bytes;
  j["pages"] = pages;
  j["budget_pages"] = budget;
  j["keys"] = keys;
  j["expected_oracle_faults_per_op"] = plan.expected_faults_per_op;
  j["runs"] = nlohmann::json::array();
  for (uint64_t n : lengths) {
    const size_t a = mark_of(n * 3 / 10), b = mark_of(n);
    const uint64_t measured = n - n * 3 / 10;
    nlohmann::json run;
    run["requests"] = n;
    run["measured_requests"] = measured;
    std::vector<double> per(np);
    for (size_t i = 0; i < np; ++i) {
      per[i] = static_cast<double>(at_mark[b][i] - at_mark[a][i]) / static_cast<double>(measured);
      run["faults_per_op"][names[i]] = per[i];
    }
    run["lfu_vs_oracle"] = per[4] / per[0];
    run["lfu_vs_fifo"] = per[4] / per[1];
    run["lru_vs_fifo"] = per[2] / per[1];
    run["meeting_kv_goals"] = nlohmann::json::array();
    for (size_t i = 2; i < np; ++i) {
      if (per[i] <= 1.25 * per[0] && per[i] <= 0.75 * per[1]) run["meeting_kv_goals"].push_back(names[i]);
    }
    j["runs"].push_back(run);
    if (!json) {
      printf("%" PRIu64 " requests (faults per request over the last %" PRIu64 "):", n, measured);
      for (size_t i = 0; i < np; ++i) printf("  %s %.4f", names[i], per[i]);
      printf("\n");
    }
  }
  if (json) printf("%s\n", j.dump(2).c_str());
  return 0;
}

}  // namespace

Subcommand AddKvReplay(CLI::App& bench) {
  auto a = std::make_shared<Args>();
  CLI::App& app = *AddSubcommand(
      bench, "kv-replay",
      "kv's request trace against page-replacement policies (oracle, fifo, lru, clock, lfu), no runtime",
      "kv's request trace replayed against page-replacement policies (oracle, fifo, lru, clock, "
      "lfu) at kv's DRAM budget: faults per request, no runtime");
  AddSize(app, "--size", a->bytes, ParseSize, "1G", "64M", "256G", "bytes of the table, as kv --size");
  app.add_option("--requests", a->requests_arg, "trace lengths to report, comma separated (each from the start)")
      ->capture_default_str();
  app.add_flag("--json", a->json, "print JSON");
  app.footer(
      "JSON keys: command, size_bytes, pages, budget_pages, keys, expected_oracle_faults_per_op, runs[] with requests,\n"
      "  measured_requests, faults_per_op{oracle,fifo,lru,clock,lfu}, lfu_vs_oracle, lfu_vs_fifo,\n"
      "  lru_vs_fifo, meeting_kv_goals (the policies at most 1.25x the oracle and 0.75x fifo)");
  return {&app, [a](const std::string& command) { return RunKvReplay(*a, command); }};
}

}  // namespace tiermem::bench

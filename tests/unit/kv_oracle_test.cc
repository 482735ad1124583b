// tiermem-bench kv's oracle (bench/kv_oracle.h) against the workload it models: the Zipf
// generator's computed item masses against its draws, the simulated fill against a table filled
// the way the benchmark fills it, the pages' touch probabilities against sampled requests, and
// the plan's choice of pages. The sampling runs from fixed seeds, so every run draws the same.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench/kv_model.h"
#include "bench/kv_oracle.h"

namespace tiermem::bench::kv {
namespace {

// `count` draws out of `n` against probability p: within five standard deviations (and one draw).
void ExpectDrawn(uint64_t count, uint64_t n, double p, const std::string& what) {
  const double expected = p * static_cast<double>(n);
  const double sigma = std::sqrt(expected * (1 - p));
  EXPECT_NEAR(static_cast<double>(count), expected, 5 * sigma + 1) << what << ": p " << p;
}

TEST(KvOracle, ZipfMassesSumToOneAndMatchTheGenerator) {
  Zipf zipf(1000, 0.99);
  std::vector<double> mass;
  zipf.ForEachMass([&](uint64_t item, double p) {
    EXPECT_EQ(item, mass.size());
    EXPECT_GE(p, 0.0);
    mass.push_back(p);
  });
  ASSERT_EQ(mass.size(), 1000u);
  double sum = 0;
  for (double p : mass) sum += p;
  EXPECT_NEAR(sum, 1.0, 1e-9);
  EXPECT_GT(mass[0], mass[1]);
  EXPECT_GT(mass[1], mass[10]);
  EXPECT_GT(mass[10], mass[999]);
  constexpr uint64_t kDraws = 2'000'000;
  std::vector<uint64_t> drawn(1000, 0);
  std::mt19937_64 rng(5);
  for (uint64_t i = 0; i < kDraws; ++i) ++drawn[zipf.Next(rng)];
  for (int item = 0; item < 20; ++item) ExpectDrawn(drawn[item], kDraws, mass[item], "item " + std::to_string(item));
  // The tail in blocks of 100 items.
  for (int block = 1; block < 10; ++block) {
    uint64_t n = 0;
    double p = 0;
    for (int item = block * 100; item < block * 100 + 100; ++item) n += drawn[item], p += mass[item];
    ExpectDrawn(n, kDraws, p, "items from " + std::to_string(block * 100));
  }
}

// A table of `pages` pages in plain memory, filled as the benchmark fills it.
struct FilledTable {
  FilledTable(uint64_t pages, uint64_t keys) : memory(pages * kSlotsPerPage), slots(pages * kSlotsPerPage) {
    // Two chunks, as the benchmark's table is cut into chunks.
    char* base = reinterpret_cast<char*>(memory.data());
    table.emplace(std::vector<char*>{base, base + slots / 2 * kSlot}, slots / 2);
    for (uint32_t k : FillOrder(keys, slots)) table->Find(k, true);
  }
  // The pages a lookup of `key` reads, in order.
  std::vector<uint64_t> Probe(uint64_t key) {
    std::vector<uint64_t> pages;
    for (uint64_t i = HomeSlot(key, slots);; i = (i + 1) % slots) {
      if (pages.empty() || pages.back() != i / kSlotsPerPage) pages.push_back(i / kSlotsPerPage);
      if (table->At(i).key == key) return pages;
      EXPECT_NE(table->At(i).key, 0u) << "key " << key << " missing";
      if (table->At(i).key == 0) return pages;
    }
  }
  std::vector<Slot> memory;
  uint64_t slots;
  std::optional<Table> table;
};

TEST(KvOracle, SimulatedFillReadsThePagesOfTheFilledTable) {
  // Nearly full, so that many probes run past their home page (and past the table's end).
  for (uint64_t keys : {256u, 480u}) {
    FilledTable t(8, keys);
    LookupPages lookups(keys, t.slots);
    uint64_t crossing = 0;
    for (uint64_t k = 1; k <= keys; ++k) {
      const std::vector<uint64_t> pages = t.Probe(k);
      ASSERT_EQ(lookups.Extra(k), pages.size() - 1) << "key " << k << " of " << keys;
      crossing += pages.size() > 1;
    }
    EXPECT_GT(crossing, 0u) << keys << " keys: no probe crossed a page, so the test shows little";
  }
}

TEST(KvOracle, TouchProbabilityMatchesSampledRequests) {
  constexpr uint64_t kPages = 64, kKeys = kPages * kSlotsPerPage * 3 / 4;
  FilledTable t(kPages, kKeys);
  Zipf zipf(kKeys, 0.99);
  const std::vector<double> touch = PageTouchProbability(zipf, kKeys, t.slots);
  ASSERT_EQ(touch.size(), kPages);
  double sum = 0;
  for (double p : touch) sum += p;
  EXPECT_GT(sum, 1.0 - 1e-9);  // a request reads one page, or more when its probe crosses one
  constexpr uint64_t kRequests = 1'000'000;
  std::vector<uint64_t> read(kPages, 0);
  std::mt19937_64 rng(11);
  for (uint64_t i = 0; i < kRequests; ++i) {
    for (uint64_t p : t.Probe(KeyOfItem(zipf.Next(rng), kKeys))) ++read[p];
  }
  for (uint64_t p = 0; p < kPages; ++p) ExpectDrawn(read[p], kRequests, touch[p], "page " + std::to_string(p));
}

TEST(KvOracle, PlanKeepsTheMostProbablePagesAndCountsTheRest) {
  const std::vector<double> touch = {0.1, 0.4, 0.05, 0.2, 0.2, 0.05};
  OraclePlan plan = PlanOracle(touch, 3);
  EXPECT_EQ(plan.dram_pages, 3u);
  EXPECT_EQ(plan.in_dram, (std::vector<uint8_t>{0, 1, 0, 1, 1, 0}));
  EXPECT_NEAR(plan.expected_faults_per_op, 0.2, 1e-12);
  // A tie at the budget's edge goes to the lower page.
  plan = PlanOracle(touch, 2);
  EXPECT_EQ(plan.in_dram, (std::vector<uint8_t>{0, 1, 0, 1, 0, 0}));
  // A budget past the table holds it all.
  plan = PlanOracle(touch, 10);
  EXPECT_EQ(plan.dram_pages, touch.size());
  EXPECT_EQ(plan.expected_faults_per_op, 0.0);
}

}  // namespace
}  // namespace tiermem::bench::kv

// The heat log (runtime/tiering/heat_log.h) written and read back by `tiermem advise`'s reader
// (tools/tiermem/advise_model.cc), and the advisor's model on a record of known heat.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>

#include "base/options.h"
#include "base/os.h"
#include "runtime/tiering/heat_log.h"
#include "tools/tiermem/advise.h"

namespace tiermem {
namespace {

class HeatLogTest : public ::testing::Test {
 protected:
  void SetUp() override { path_ = "/tmp/heat_log_test." + std::to_string(getpid()) + ".heat"; }
  void TearDown() override { std::remove(path_.c_str()); }
  std::string path_;
};

TEST_F(HeatLogTest, PathTakesThePid) {
  EXPECT_EQ(PathForProcess("/x/%p.heat", 42), "/x/42.heat");
  EXPECT_EQ(PathForProcess("/x/a%", 42), "/x/a%");
}

TEST_F(HeatLogTest, MergesPagesAndReadsBack) {
  auto log = HeatLog::Open(path_, 4096, 20, 1000);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  const uint64_t t0 = os::MonotonicNanos();  // rounds are stamped from the log's opening
  // Round 1: page 7 twice (a write and a read), page 9 once with weight 4.
  (*log)->Round(t0 + 1'000'000, 100, {{7, true, 0, 1}, {9, false, 0, 4}, {7, false, 0, 2}});
  (*log)->Round(t0 + 21'000'000, 120, {{7, true, 0, 1}});
  (*log)->Round(t0 + 41'000'000, 110, {});
  log->reset();
  tools::HeatRecord rec;
  std::string error;
  ASSERT_TRUE(tools::ReadHeatRecord(path_, &rec, &error)) << error;
  EXPECT_EQ(rec.page_size, 4096u);
  EXPECT_EQ(rec.interval_ms, 20u);
  EXPECT_EQ(rec.rounds, 3u);
  EXPECT_EQ(rec.heap_peak_pages, 120u);
  EXPECT_NEAR(rec.seconds, 0.060, 1e-9);  // 40 ms between the first and last, three rounds
  ASSERT_EQ(rec.page_touches.size(), 2u);
  EXPECT_FLOAT_EQ(rec.page_touches[0], 4);  // page 7: 1 + 2 + 1; page 9: 4 (hottest first, ties either way)
  EXPECT_FLOAT_EQ(rec.page_touches[1], 4);
}

// The write scan's sample of a page replaces the access samples of it in the same round (in
// either order), so a page written and sampled counts its scan weight once; samples of pages
// the scan did not see keep their weights, and two access samples still add.
TEST_F(HeatLogTest, TheScanSampleReplacesAccessSamplesOfItsPage) {
  auto log = HeatLog::Open(path_, 4096, 20, 1000);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  // Samples 0-2 sampled (weight 8 each), 3-4 the scan's (weight 1): page 5 sampled and scanned,
  // page 6 sampled twice, page 11 scanned only.
  (*log)->Round(os::MonotonicNanos(), 10, {{5, false, 0, 8}, {6, false, 0, 8}, {6, true, 0, 8}, {11, true, 0, 1}, {5, true, 0, 1}}, 3);
  // Two access samples and the scan's of one page (whichever order the merge meets them in),
  // and no scan at all (the default).
  (*log)->Round(os::MonotonicNanos(), 10, {{5, false, 0, 8}, {5, false, 0, 4}, {5, true, 0, 1}}, 2);
  (*log)->Round(os::MonotonicNanos(), 10, {{5, true, 0, 1}, {5, false, 0, 8}});
  log->reset();
  std::ifstream f(path_, std::ios::binary);
  f.seekg(16);
  std::vector<std::vector<HeatLog::Entry>> rounds;
  HeatLog::RoundHeader h;
  while (f.read(reinterpret_cast<char*>(&h), sizeof(h))) {
    rounds.emplace_back(h.entries);
    f.read(reinterpret_cast<char*>(rounds.back().data()), static_cast<std::streamsize>(h.entries * sizeof(HeatLog::Entry)));
  }
  ASSERT_EQ(rounds.size(), 3u);
  ASSERT_EQ(rounds[0].size(), 3u);  // by page: 5, 6, 11
  EXPECT_FLOAT_EQ(rounds[0][0].weight, 1);
  EXPECT_EQ(rounds[0][0].flags, HeatLog::kWrite | HeatLog::kScan);
  EXPECT_FLOAT_EQ(rounds[0][1].weight, 16);
  EXPECT_EQ(rounds[0][1].flags, HeatLog::kWrite);
  EXPECT_FLOAT_EQ(rounds[0][2].weight, 1);
  ASSERT_EQ(rounds[1].size(), 1u);
  EXPECT_FLOAT_EQ(rounds[1][0].weight, 1);
  ASSERT_EQ(rounds[2].size(), 1u);
  EXPECT_FLOAT_EQ(rounds[2][0].weight, 9);  // no scan: summed
}

// The reader keeps apart, per page, the touches the access sampler found (entries the write scan
// did not see), which the model scales by the share of time the sampler was armed.
TEST_F(HeatLogTest, ReaderKeepsTheSampledTouchesApart) {
  auto log = HeatLog::Open(path_, 4096, 20, 1000);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  // Page 9 sampled (weight 4) in both rounds; page 7 the scan's (from index 1) in round 1 and
  // sampled (weight 2) in round 2.
  (*log)->Round(os::MonotonicNanos(), 10, {{9, false, 0, 4}, {7, true, 0, 1}}, 1);
  (*log)->Round(os::MonotonicNanos(), 10, {{9, false, 0, 4}, {7, false, 0, 2}});
  log->reset();
  tools::HeatRecord rec;
  std::string error;
  ASSERT_TRUE(tools::ReadHeatRecord(path_, &rec, &error)) << error;
  ASSERT_EQ(rec.page_touches.size(), 2u);
  ASSERT_EQ(rec.page_sampled.size(), 2u);
  EXPECT_FLOAT_EQ(rec.page_touches[0], 8);  // page 9, hottest first
  EXPECT_FLOAT_EQ(rec.page_sampled[0], 8);
  EXPECT_FLOAT_EQ(rec.page_touches[1], 3);  // page 7: 1 scanned + 2 sampled
  EXPECT_FLOAT_EQ(rec.page_sampled[1], 2);
}

TEST_F(HeatLogTest, CapKeepsTheSumUnbiased) {
  auto log = HeatLog::Open(path_, 4096, 20, 100);
  ASSERT_TRUE(log.ok());
  std::vector<AccessSample> s;
  for (uint64_t p = 0; p < 1000; ++p) s.push_back({p, true, 0, 1});
  for (int r = 0; r < 4; ++r) (*log)->Round(uint64_t(r) * 20'000'000, 1000, s);
  log->reset();
  std::ifstream f(path_, std::ios::binary | std::ios::ate);
  EXPECT_EQ(static_cast<size_t>(f.tellg()), 16u + 4 * (24u + 100 * 16u));  // the stated bound, exactly
  tools::HeatRecord rec;
  std::string error;
  ASSERT_TRUE(tools::ReadHeatRecord(path_, &rec, &error)) << error;
  const double total = std::accumulate(rec.page_touches.begin(), rec.page_touches.end(), 0.0);
  EXPECT_NEAR(total, 4000, 1);  // 4 rounds of 1000 pages, 100 kept each with weight 10
  EXPECT_LE(rec.page_touches.size(), 400u);
}

TEST_F(HeatLogTest, RefusesWhatIsNotAHeatLog) {
  tools::HeatRecord rec;
  std::string error;
  EXPECT_FALSE(tools::ReadHeatRecord(path_ + ".missing", &rec, &error));
  EXPECT_NE(error.find(".missing"), std::string::npos) << error;
  std::ofstream(path_) << "not a heat log at all";
  EXPECT_FALSE(tools::ReadHeatRecord(path_, &rec, &error));
  EXPECT_NE(error.find("TMHEAT01"), std::string::npos) << error;
}

TEST(AdviseModel, AccessesFromTouchedRounds) {
  EXPECT_DOUBLE_EQ(tools::EstimatedAccesses(0, 100), 0);
  EXPECT_NEAR(tools::EstimatedAccesses(1, 1000), 1.0005, 1e-3);  // rare: each touch one access
  EXPECT_NEAR(tools::EstimatedAccesses(50, 100), 100 * std::log(2.0), 1e-9);
  // Touched every round: held where one round in 2R would be untouched, not infinite.
  EXPECT_NEAR(tools::EstimatedAccesses(100, 100), 100 * std::log(200.0), 1e-9);
  EXPECT_DOUBLE_EQ(tools::EstimatedAccesses(100, 100), tools::EstimatedAccesses(150, 100));
}

// A sampler armed half of each round catches a page read at m a round in 1 - exp(-m/2) of its
// rounds: the sampled part's rate is its estimate doubled; the scan's part stands as it is.
TEST(AdviseModel, SampledTouchesAreScaledByTheArmedShare) {
  const double r = 100;
  EXPECT_NEAR(tools::PageAccesses(50, 0, 100, 0.5), r * std::log(2.0), 1e-9);      // scanned only
  EXPECT_NEAR(tools::PageAccesses(50, 50, 100, 0.5), 2 * r * std::log(2.0), 1e-9);  // sampled only
  EXPECT_NEAR(tools::PageAccesses(80, 30, 100, 0.5), -r * std::log1p(-0.5) - 2 * r * std::log1p(-0.3), 1e-9);
  EXPECT_NEAR(tools::PageAccesses(50, 50, 100, 1), r * std::log(2.0), 1e-9);  // armed all the time
  // A rarely read page: caught in m/2 of the rounds, m recovered.
  const double m = 0.02;
  EXPECT_NEAR(tools::PageAccesses(r * -std::expm1(-m * 0.4), r * -std::expm1(-m * 0.4), 100, 0.4), m * r, 1e-9);
}

TEST(AdviseModel, LruMissesOfUniformPagesAreTheShareThatDoesNotFit) {
  // N pages accessed alike: an LRU of C pages holds each with probability C/N.
  const std::vector<double> uniform(1000, 20.0);
  EXPECT_NEAR(tools::LruMisses(uniform, 750), 1000 * 20.0 * 0.25, 1e-6);
  EXPECT_NEAR(tools::LruMisses(uniform, 100), 1000 * 20.0 * 0.9, 1e-6);
  EXPECT_DOUBLE_EQ(tools::LruMisses(uniform, 1000), 0);  // all fit
  EXPECT_DOUBLE_EQ(tools::LruMisses(uniform, 0), 20000);  // none fit
  // Pages never accessed take no room.
  std::vector<double> with_idle = uniform;
  with_idle.resize(5000, 0.0);
  EXPECT_NEAR(tools::LruMisses(with_idle, 750), 5000.0, 1e-6);
  // A hot set that fits stays: its misses are few, the cold pages take nearly all.
  std::vector<double> hot_cold(100, 10000.0);
  hot_cold.resize(1100, 10.0);
  const double m = tools::LruMisses(hot_cold, 600);
  EXPECT_GT(m, 1000 * 10.0 * 0.5 * 0.99);
  EXPECT_LT(m, 1000 * 10.0 * 0.5 * 1.02);
}

// 100 heap pages, 500 rounds over 10 s: 10 hot ones touched in 50 rounds each, 40 warm in one
// round each, 50 never.
TEST(AdviseModel, PagesPastTheLimitTakeTheLruMisses) {
  tools::HeatRecord rec;
  rec.page_size = 4096;
  rec.seconds = 10;
  rec.rounds = 500;
  rec.heap_peak_pages = 100;
  rec.page_touches.assign(10, 50.0);
  rec.page_touches.resize(50, 1.0);
  tools::FarCosts costs;
  costs.cxl_extra_ns = 150;
  costs.cxl_lines = 2;
  costs.rdma_us = 4;
  costs.tcp_us = 100;
  std::vector<double> accesses;
  for (double t : rec.page_touches) accesses.push_back(tools::EstimatedAccesses(t, 500));
  // Peak RSS 100 pages: shares of 100, 50, 40 and 5 pages kept; the plain run took 5 s.
  auto p = tools::Predict(rec, 100 * 4096, {1.0, 0.5, 0.4, 0.05}, costs, 5);
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0].below_dram_bytes, 0u);
  EXPECT_DOUBLE_EQ(p[0].faults_per_s, 0);
  EXPECT_DOUBLE_EQ(p[0].tcp, 1);
  EXPECT_EQ(p[1].below_dram_bytes, 50u * 4096);  // the 50 never touched: every touched page fits
  EXPECT_DOUBLE_EQ(p[1].faults_per_s, 0);
  EXPECT_EQ(p[2].below_dram_bytes, 60u * 4096);
  EXPECT_DOUBLE_EQ(p[2].touches_per_s, 10 / 10.0);  // the 10 coldest touched pages' rounds
  EXPECT_NEAR(p[2].faults_per_s, tools::LruMisses(accesses, 40) / 5, 1e-9);
  EXPECT_GT(p[2].faults_per_s, 0);
  EXPECT_NEAR(p[2].tcp, 1 + p[2].faults_per_s * 100e-6, 1e-12);
  EXPECT_NEAR(p[2].rdma, 1 + p[2].faults_per_s * 4e-6, 1e-12);
  EXPECT_NEAR(p[2].cxl, 1 + p[2].faults_per_s * 2 * 150e-9, 1e-12);
  EXPECT_EQ(p[3].below_dram_bytes, 95u * 4096);
  EXPECT_NEAR(p[3].faults_per_s, tools::LruMisses(accesses, 5) / 5, 1e-9);
  EXPECT_GT(p[3].faults_per_s, p[2].faults_per_s);
  // The runtime's own DRAM comes out of the limit (at most half): less room, more faults.
  auto q = tools::Predict(rec, 100 * 4096, {0.4}, costs, 5, 10 * 4096);
  EXPECT_EQ(q[0].below_dram_bytes, 70u * 4096);
  EXPECT_GT(q[0].faults_per_s, p[2].faults_per_s);
}

}  // namespace
}  // namespace tiermem

// tiermemctl's formatting without a live process: the Prometheus exposition of made-up blocks
// (families once, HELP and TYPE, cumulative histograms, escaped labels) and the rates between
// two snapshots.
#include <gtest/gtest.h>

#include <string>

#include "tools/tiermemctl/prometheus.h"
#include "tools/tiermemctl/stats_view.h"

namespace tiermem::tools {
namespace {

ProcessStats Block(int pid, uint64_t faults) {
  ProcessStats s;
  s.pid = pid;
  s.command = "a \"quoted\"\nname\\";
  s.layout_version = kStatsLayoutVersion;
  s.started_unix_ns = 1'700'000'000'000'000'000ull;
  s.tiers = {{Tier::kDram, true, 1ull << 30, 16 << 20, 16 << 20, 4096},
             {Tier::kCxl, false, 0, 0, 0, 0},
             {Tier::kRemote, true, 1ull << 30, 0, 48 << 20, 12288}};
  s.moves[0][2] = 12288;
  s.remote_faults = faults;
  s.fault_latency.buckets[0] = 2;
  s.fault_latency.buckets[3] = 5;
  s.fault_latency.buckets[kHistogramBuckets - 1] = 1;
  s.fault_latency.count = 8;
  s.fault_latency.sum_ns = 1'500'000'000;
  s.servers = {{"tcp://127.0.0.1:7471", true, 48 << 20, 16384, 12288, faults, 0}};
  return s;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t i = text.find(what); i != std::string::npos; i = text.find(what, i + 1)) ++n;
  return n;
}

TEST(TiermemctlFormat, PrometheusFamiliesAppearOnceForAllProcesses) {
  Exposition e;
  e.Add(Block(11, 100));
  e.Add(Block(12, 200));
  std::string t = e.Text();
  EXPECT_EQ(Count(t, "# TYPE tiermem_remote_faults_total counter\n"), 1u) << t;
  EXPECT_EQ(Count(t, "# HELP tiermem_remote_faults_total "), 1u);
  EXPECT_NE(t.find("tiermem_remote_faults_total{pid=\"11\"} 100\n"), std::string::npos);
  EXPECT_NE(t.find("tiermem_remote_faults_total{pid=\"12\"} 200\n"), std::string::npos);
  EXPECT_NE(t.find("tiermem_tier_allocated_bytes{pid=\"11\",tier=\"remote\"} 50331648\n"), std::string::npos);
  EXPECT_NE(t.find("tiermem_pages_moved_total{pid=\"11\",from=\"dram\",to=\"remote\"} 12288\n"), std::string::npos);
  EXPECT_NE(t.find("tiermem_server_up{pid=\"12\",server=\"tcp://127.0.0.1:7471\"} 1\n"), std::string::npos);
  // Label values escape the quote, the newline and the backslash.
  EXPECT_NE(t.find("command=\"a \\\"quoted\\\"\\nname\\\\\""), std::string::npos) << t;
  // Every sample line's family has a TYPE line before it.
  size_t pos = 0;
  while (pos < t.size()) {
    size_t end = t.find('\n', pos);
    std::string line = t.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty() || line[0] == '#') continue;
    std::string name = line.substr(0, line.find_first_of("{ "));
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      std::string s = suffix;
      if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0 &&
          t.find("# TYPE " + name.substr(0, name.size() - s.size()) + " histogram") != std::string::npos) {
        name = name.substr(0, name.size() - s.size());
      }
    }
    EXPECT_NE(t.find("# TYPE " + name + " "), std::string::npos) << line;
  }
}

TEST(TiermemctlFormat, HistogramsAreCumulativeInSeconds) {
  Exposition e;
  e.Add(Block(11, 100));
  std::string t = e.Text();
  EXPECT_NE(t.find("# TYPE tiermem_remote_fault_duration_seconds histogram\n"), std::string::npos);
  EXPECT_NE(t.find("tiermem_remote_fault_duration_seconds_bucket{pid=\"11\",le=\"1e-06\"} 2\n"), std::string::npos) << t;
  EXPECT_NE(t.find("tiermem_remote_fault_duration_seconds_bucket{pid=\"11\",le=\"1e-05\"} 7\n"), std::string::npos);
  EXPECT_NE(t.find("tiermem_remote_fault_duration_seconds_bucket{pid=\"11\",le=\"0.1\"} 7\n"), std::string::npos);
  EXPECT_NE(t.find("tiermem_remote_fault_duration_seconds_bucket{pid=\"11\",le=\"+Inf\"} 8\n"), std::string::npos);
  EXPECT_NE(t.find("tiermem_remote_fault_duration_seconds_sum{pid=\"11\"} 1.5\n"), std::string::npos);
  EXPECT_NE(t.find("tiermem_remote_fault_duration_seconds_count{pid=\"11\"} 8\n"), std::string::npos);
}

TEST(TiermemctlFormat, PolicyRoundsAreAHistogramWithTheirOwnBounds) {
  ProcessStats s = Block(11, 100);
  s.policy_cpu_ns = 250'000'000;
  s.policy_round_time.le_ns = {1'000'000, 10'000'000, 100'000'000};
  s.policy_round_time.buckets = {1, 2, 0, 1};
  s.policy_round_time.count = 4;
  s.policy_round_time.sum_ns = 300'000'000;
  Exposition e;
  e.Add(s);
  e.Add(Block(12, 100));  // read from no block: no round samples
  std::string t = e.Text();
  EXPECT_NE(t.find("tiermem_policy_cpu_seconds_total{pid=\"11\"} 0.25\n"), std::string::npos) << t;
  EXPECT_NE(t.find("# TYPE tiermem_policy_round_duration_seconds histogram\n"), std::string::npos);
  EXPECT_NE(t.find("tiermem_policy_round_duration_seconds_bucket{pid=\"11\",le=\"0.001\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("tiermem_policy_round_duration_seconds_bucket{pid=\"11\",le=\"0.1\"} 3\n"), std::string::npos);
  EXPECT_NE(t.find("tiermem_policy_round_duration_seconds_bucket{pid=\"11\",le=\"+Inf\"} 4\n"), std::string::npos);
  EXPECT_NE(t.find("tiermem_policy_round_duration_seconds_sum{pid=\"11\"} 0.3\n"), std::string::npos);
  EXPECT_EQ(t.find("tiermem_policy_round_duration_seconds_count{pid=\"12\"}"), std::string::npos);
  auto j = ProcessStatsToJson(s);
  EXPECT_EQ(j["policy_cpu_ns"], 250'000'000u);
  EXPECT_EQ(j["policy_round_time"]["le_ns"].size(), 3u);
  EXPECT_EQ(j["policy_round_time"]["buckets"][3], 1u);
}

TEST(TiermemctlFormat, RatesPerSecondAndResets) {
  ProcessStats a = Block(11, 100), b = Block(11, 600);
  b.moves[0][2] += 1000;
  Rates r = ComputeRates(a, b, 0.5);
  EXPECT_DOUBLE_EQ(r.remote_faults, 1000);
  EXPECT_DOUBLE_EQ(r.moves[0][2], 2000);
  EXPECT_DOUBLE_EQ(r.moves_total(), 2000);
  // A counter that went backwards, or another runtime under the same pid, gives no rate.
  EXPECT_DOUBLE_EQ(ComputeRates(b, a, 0.5).remote_faults, 0);
  b.started_unix_ns += 1;
  EXPECT_DOUBLE_EQ(ComputeRates(a, b, 0.5).remote_faults, 0);
  auto j = ProcessStatsToJson(a);
  EXPECT_EQ(j["tiers"][2]["allocated_bytes"], 48u << 20);
  EXPECT_EQ(j["moves"][0][2], 12288u);
  EXPECT_EQ(j["fault_latency"]["buckets"].size(), size_t(kHistogramBuckets));
  EXPECT_EQ(j["fault_latency"]["le_ns"].size(), size_t(kHistogramBuckets - 1));
  EXPECT_EQ(j["fault_latency"]["buckets"][kHistogramBuckets - 1], 1u);
  EXPECT_GT(j["t_ns"].get<uint64_t>(), 0u);
}

}  // namespace
}  // namespace tiermem::tools

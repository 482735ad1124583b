// The live stats block (include/tiermem/stats.hpp), read back as another process would: each
// counter against what the test did, moves in and out that agree, a clean stop that removes the
// block, a killed process's block seen as stale, a block of another layout refused, and the
// TIERMEM_STATS file's JSON lines.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/integration/remote_memd_fixture.h"
#include "tests/integration/test_util.h"
#include "tiermem/stats.hpp"
#include "tiermem/tiermem.hpp"

namespace tiermem {
namespace {

using testing::FillPage;
using testing::MemdProcess;

constexpr size_t kPage = 4096;

std::string BlockPath(int pid) {
  return "/dev/shm/tiermem." + std::to_string(getuid()) + "." + std::to_string(pid);
}
bool Exists(const std::string& p) { return access(p.c_str(), F_OK) == 0; }

TEST(StatsBlock, PublishedWhileRunningAndRemovedAtStop) {
  auto rt = Runtime::Start();
  ASSERT_TRUE(rt.ok());
  EXPECT_TRUE(Exists(BlockPath(getpid())));
  auto p = (*rt)->Allocate(64 * kPage, Tier::kDram);
  ASSERT_TRUE(p.ok());
  memset(*p, 1, 64 * kPage);
  auto st = ReadProcessStats(getpid());
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_FALSE(st->stale);
  EXPECT_EQ(st->pid, getpid());
  EXPECT_EQ(st->layout_version, kStatsLayoutVersion);
  ASSERT_EQ(st->tiers.size(), 3u);
  EXPECT_TRUE(st->tiers[0].available);
  EXPECT_EQ(st->tiers[0].allocated_bytes, 64 * kPage);
  // All 64 pages were written, so all are resident, on the DRAM tier's nodes.
  EXPECT_GE(st->resident_bytes, 64 * kPage);
  EXPECT_GE(st->dram_resident_bytes, 64 * kPage);
  bool listed = false;
  for (const ProcessEntry& e : ListProcesses()) listed |= e.pid == getpid() && !e.stale;
  EXPECT_TRUE(listed);
  ASSERT_TRUE((*rt)->Free(*p).ok());
  EXPECT_EQ(ReadProcessStats(getpid())->tiers[0].allocated_bytes, 0u);
  ASSERT_TRUE((*rt)->Stop().ok());
  EXPECT_FALSE(Exists(BlockPath(getpid())));
  EXPECT_EQ(ReadProcessStats(getpid()).status().code(), StatusCode::kNotFound);
}

TEST(StatsBlock, RemoteCountersMovesAndCapacityAgree) {
  MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "64M", "--no-rdma"}, "tok"));
  auto rt = testing::StartRemoteRuntime(memd.url(), "tok", "off");  // one fault per page read
  ASSERT_NE(rt, nullptr);
  constexpr size_t kPages = 200;
  uint8_t* base = testing::AllocateFilledPages(*rt, kPages);
  ASSERT_NE(base, nullptr);
  ASSERT_TRUE(rt->Migrate(base, kPages * kPage, Tier::kRemote).ok());
  for (size_t i = 0; i < kPages / 4; ++i) ASSERT_NE(base[i * kPage + 8], 0xEE);  // fault a quarter back
  // The faulted pages are resident in DRAM again; evict all once more: only they move.
  ASSERT_TRUE(rt->Migrate(base, kPages * kPage, Tier::kRemote).ok());
  auto st = ReadProcessStats(getpid());
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->moves[0][2], kPages + kPages / 4);  // dram -> remote, counted once per move
  EXPECT_EQ(st->remote_faults, kPages / 4);
  EXPECT_EQ(st->pages_evicted, kPages + kPages / 4);
  EXPECT_EQ(st->fault_latency.count, kPages / 4);
  EXPECT_GE(st->evict_latency.count, 2u);
  ASSERT_EQ(st->servers.size(), 1u);
  EXPECT_TRUE(st->servers[0].up);
  EXPECT_EQ(st->servers[0].address, memd.url());
  EXPECT_EQ(st->servers[0].bytes_held, kPages * kPage);
  EXPECT_EQ(st->tiers[2].allocated_bytes, kPages * kPage);
  EXPECT_EQ(st->tiers[2].capacity_bytes, 64ull << 20);  // the block says what Stats() says
  // TierStats agrees with the block: what left DRAM is what reached the remote tier.
  for (const TierStats& t : rt->Stats()) {
    if (t.tier == Tier::kDram) {
      EXPECT_EQ(t.pages_migrated_out, kPages + kPages / 4);
    }
    if (t.tier == Tier::kRemote) {
      EXPECT_EQ(t.pages_migrated_in, kPages + kPages / 4);
      EXPECT_EQ(t.capacity_bytes, 64ull << 20);  // the server's capacity, no longer 0
    }
  }
}

TEST(StatsBlock, KilledProcessLeavesAStaleBlock) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto rt = Runtime::Start();
    if (!rt.ok()) _exit(2);
    raise(SIGKILL);
    _exit(3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  auto st = ReadProcessStats(child);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_TRUE(st->stale);
  bool listed_stale = false;
  for (const ProcessEntry& e : ListProcesses()) listed_stale |= e.pid == child && e.stale;
  EXPECT_TRUE(listed_stale);
  unlink(BlockPath(child).c_str());
}

TEST(StatsBlock, OtherLayoutAndNonTiermemProcessAreRefusedClearly) {
  const int fake = 4194000;  // above any pid this test machine hands out
  const std::string path = BlockPath(fake);
  {
    std::ofstream f(path, std::ios::binary);
    const uint64_t magic = 0x3153544154534d54ull;
    const uint32_t version = 999, size = 64;
    f.write(reinterpret_cast<const char*>(&magic), 8);
    f.write(reinterpret_cast<const char*>(&version), 4);
    f.write(reinterpret_cast<const char*>(&size), 4);
    f << std::string(64, '\0');
  }
  auto st = ReadProcessStats(fake);
  EXPECT_EQ(st.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(st.status().message().find("version 999"), std::string::npos) << st.status().ToString();
  unlink(path.c_str());
  auto init = ReadProcessStats(1);
  EXPECT_EQ(init.status().code(), StatusCode::kNotFound);
  EXPECT_NE(init.status().message().find("not a tiermem process"), std::string::npos) << init.status().ToString();
  EXPECT_EQ(ReadProcessStats(-4).status().code(), StatusCode::kInvalidArgument);
}

TEST(StatsBlock, StatsFileGetsJsonLinesAndATimeline) {
  const std::string file = ::testing::TempDir() + "tiermem-stats-" + std::to_string(getpid()) + ".jsonl";
  Options o;
  o.Set("stats", file).Set("stats_interval_ms", 20);
  auto rt = Runtime::Start(o);
  ASSERT_TRUE(rt.ok());
  auto p = (*rt)->Allocate(16 * kPage, Tier::kDram);
  ASSERT_TRUE(p.ok());
  memset(*p, 7, 16 * kPage);
  auto count_lines = [&] {
    std::ifstream in(file);
    std::string l;
    int n = 0;
    while (std::getline(in, l)) n += !l.empty() && l.back() == '}';  // whole lines only
    return n;
  };
  ASSERT_TRUE(testing::WaitFor([&] { return count_lines() >= 2; }, 60)) << "no timeline lines in 60 s";
  ASSERT_TRUE((*rt)->Stop().ok());
  std::ifstream f(file);
  std::string line;
  int lines = 0;
  std::string last;
  while (std::getline(f, line)) {
    ++lines;
    EXPECT_EQ(line.front(), '{');
    EXPECT_EQ(line.back(), '}');
    EXPECT_NE(line.find("\"t_ns\":"), std::string::npos);
    last = line;
  }
  EXPECT_GE(lines, 3);  // several timeline lines and the last one at Stop
  EXPECT_NE(last.find("\"allocated_bytes\":" + std::to_string(16 * kPage)), std::string::npos) << last;
  unlink(file.c_str());
}

}  // namespace
}  // namespace tiermem

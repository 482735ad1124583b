// The remote tier with several memory servers (TIERMEM_REMOTE=a,b): evicted runs are spread over
// both, a full server sends placement to the next one, everything reads back intact, a server
// that stops answering holds only its own pages, and a dead server ends the process with a line
// naming it.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/remote/transport.h"
#include "base/net.h"
#include "runtime/pages/page_table.h"
#include "runtime/pages/region.h"
#include "runtime/core/runtime_impl.h"
#include "runtime/paging/pager.h"
#include "tests/integration/remote_groups_util.h"
#include "tests/integration/remote_memd_fixture.h"
#include "tests/integration/test_util.h"
#include "tiermem/tiermem.hpp"

namespace tiermem {
namespace {

using testing::CheckPage;
using testing::FillPage;
using testing::MemdProcess;

constexpr size_t kPage = 4096;

// Prefetching off: the tests count one fault per page read back in order.
std::unique_ptr<Runtime> StartWith(const std::string& servers) {
  return testing::StartRemoteRuntime(servers, "", "off");
}

// memd's own count of the pages its sessions hold, asked on a connection of the test's own.
uint64_t MemdUsedPages(const MemdProcess& memd) { return testing::groups::MemdStatsOf(memd).used_pages; }

struct EvictedRun {
  uint8_t* base;
  size_t pages;
  uint64_t first_page;  // pattern index of its first page
};

TEST(RemoteMultiServer, EvictedRunsGoToBothServersAndReadBackIntact) {
  MemdProcess a, b;
  ASSERT_TRUE(a.Start({"--capacity", "64M", "--no-rdma"}));
  ASSERT_TRUE(b.Start({"--capacity", "64M", "--no-rdma"}));
  auto rt = StartWith(a.url() + "," + b.url());
  ASSERT_NE(rt, nullptr);
  Pager* pager = ImplOf(*rt)->pager();
  EXPECT_EQ(pager->server(), a.url() + "," + b.url());
  constexpr size_t kRuns = 6, kPagesPerRun = 512;
  std::vector<EvictedRun> runs;
  for (size_t r = 0; r < kRuns; ++r) {
    auto p = rt->Allocate(kPagesPerRun * kPage, Tier::kDram);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EvictedRun run{static_cast<uint8_t*>(*p), kPagesPerRun, r * kPagesPerRun};
    for (size_t i = 0; i < run.pages; ++i) FillPage(run.base + i * kPage, run.first_page + i);
    runs.push_back(run);
  }
  for (const EvictedRun& run : runs) {
    auto m = rt->Migrate(run.base, run.pages * kPage, Tier::kRemote);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(m->pages_moved, run.pages);
  }
  auto st = pager->server_stats();
  ASSERT_EQ(st.size(), 2u);
  EXPECT_TRUE(st[0].connected);
  EXPECT_TRUE(st[1].connected);
  EXPECT_GT(st[0].pages, 0u);
  EXPECT_GT(st[1].pages, 0u);
  EXPECT_EQ(st[0].pages + st[1].pages, kRuns * kPagesPerRun);
  EXPECT_EQ(st[0].written + st[1].written, kRuns * kPagesPerRun);
  // Each run on one server: the servers hold whole runs.
  EXPECT_EQ(st[0].pages % kPagesPerRun, 0u);
  // memd agrees: both hold slots of this session.
  EXPECT_GT(MemdUsedPages(a), 0u);
  EXPECT_GT(MemdUsedPages(b), 0u);
  size_t bad = 0;
  for (const EvictedRun& run : runs) {
    for (size_t i = 0; i < run.pages; ++i) bad += CheckPage(run.base + i * kPage, run.first_page + i) ? 0 : 1;
  }
  EXPECT_EQ(bad, 0u);
  st = pager->server_stats();
  EXPECT_GT(st[0].faults, 0u);
  EXPECT_GT(st[1].faults, 0u);
  EXPECT_EQ(st[0].faults + st[1].faults, kRuns * kPagesPerRun);
  // Written again (dirty) and evicted again: each page keeps its server, nothing is lost.
  for (const EvictedRun& run : runs) {
    for (size_t i = 0; i < run.pages; ++i) run.base[i * kPage + 8] ^= 0x5A;
    ASSERT_TRUE(rt->Migrate(run.base, run.pages * kPage, Tier::kRemote).ok());
  }
  auto st2 = pager->server_stats();
  EXPECT_EQ(st2[0].pages, st[0].pages);
  EXPECT_EQ(st2[1].pages, st[1].pages);
  for (const EvictedRun& run : runs) {
    for (size_t i = 0; i < run.pages; ++i) {
      run.base[i * kPage + 8] ^= 0x5A;
      bad += CheckPage(run.base + i * kPage, run.first_page + i) ? 0 : 1;
    }
  }
  EXPECT_EQ(bad, 0u);
  for (const EvictedRun& run : runs) EXPECT_TRUE(rt->Free(run.base).ok());
  st = pager->server_stats();
  EXPECT_EQ(st[0].pages + st[1].pages, 0u);  // slots back in the free lists
}

TEST(RemoteMultiServer, AFullServerSendsPlacementToTheNext) {
  MemdProcess a, b;
  ASSERT_TRUE(a.Start({"--capacity", "8M", "--no-rdma"}));  // 2048 pages: chosen first (more room)
  ASSERT_TRUE(b.Start({"--capacity", "4M", "--no-rdma"}));  // 1024 pages
  auto rt = StartWith(a.url() + "," + b.url());
  ASSERT_NE(rt, nullptr);
  Pager* pager = ImplOf(*rt)->pager();
  constexpr size_t kPages = 2800;
  auto p = rt->Allocate(kPages * kPage, Tier::kDram);
  ASSERT_TRUE(p.ok());
  auto* base = static_cast<uint8_t*>(*p);
  for (size_t i = 0; i < kPages; ++i) FillPage(base + i * kPage, i);
  auto m = rt->Migrate(base, kPages * kPage, Tier::kRemote);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->pages_moved, kPages);
  auto st = pager->server_stats();
  EXPECT_EQ(st[0].pages, 2048u);
  EXPECT_EQ(st[1].pages, kPages - 2048);
  EXPECT_TRUE(st[0].full);
  EXPECT_FALSE(st[1].full);
  for (size_t i = 0; i < kPages; ++i) ASSERT_TRUE(CheckPage(base + i * kPage, i)) << i;
  // Both full: an eviction beyond what they hold fails and leaves the pages intact.
  auto q = rt->Allocate(512 * kPage, Tier::kDram);
  ASSERT_TRUE(q.ok());
  auto* qb = static_cast<uint8_t*>(*q);
  for (size_t i = 0; i < 512; ++i) FillPage(qb + i * kPage, 100000 + i);
  ASSERT_TRUE(rt->Migrate(base, kPages * kPage, Tier::kRemote).ok());  // clean: rewrites nothing
  auto full = rt->Migrate(qb, 512 * kPage, Tier::kRemote);
  EXPECT_FALSE(full.ok());
  if (!full.ok()) {
    EXPECT_EQ(full.status().code(), StatusCode::kResourceExhausted) << full.status().ToString();
  }
  for (size_t i = 0; i < 512; ++i) ASSERT_TRUE(CheckPage(qb + i * kPage, 100000 + i)) << i;
}

TEST(RemoteMultiServer, AnUnreachableServerOfTheListIsSkipped) {
  MemdProcess a;
  ASSERT_TRUE(a.Start({"--capacity", "16M", "--no-rdma"}));
  auto rt = StartWith("tcp://127.0.0.1:1," + a.url());
  ASSERT_NE(rt, nullptr);
  Pager* pager = ImplOf(*rt)->pager();
  auto st = pager->server_stats();
  ASSERT_EQ(st.size(), 2u);
  EXPECT_FALSE(st[0].connected);
  EXPECT_NE(st[0].error.find("tcp://127.0.0.1:1"), std::string::npos) << st[0].error;
  EXPECT_TRUE(st[1].connected);
  auto p = rt->Allocate(64 * kPage, Tier::kDram);
  ASSERT_TRUE(p.ok());
  auto* base = static_cast<uint8_t*>(*p);
  for (size_t i = 0; i < 64; ++i) FillPage(base + i * kPage, i);
  ASSERT_TRUE(rt->Migrate(base, 64 * kPage, Tier::kRemote).ok());
  EXPECT_EQ(pager->server_stats()[1].pages, 64u);
  for (size_t i = 0; i < 64; ++i) ASSERT_TRUE(CheckPage(base + i * kPage, i)) << i;
}

// A loopback port nothing listens on (bound once by the kernel's choice, then closed).
uint16_t UnusedPort() {
  auto fd = net::ListenTcp("127.0.0.1", 0, 1);
  if (!fd.ok()) return 0;
  const uint16_t port = net::LocalPort(*fd);
  close(*fd);
  return port;
}

// A server missing at start is tried again with growing waits (1 s, 2 s, 4 s, ...:
// pager_internal::NextRejoinWaitMs), and taken once it answers. On a ManualClock, one second of
// it per step: the repair thread looks once a second, so each step is one look, and the tries
// fall at seconds 1, 2, 4, 8 and 16 exactly, with no real time spent waiting for them.
TEST(RemoteMultiServer, AMissingServerIsTriedLessAndLessOftenAndTakenWhenItAnswers) {
  MemdProcess a, late;
  ASSERT_TRUE(a.Start({"--capacity", "16M", "--no-rdma"}));
  const uint16_t port = UnusedPort();
  ASSERT_NE(port, 0);
  ManualClock clock;
  auto rt = testing::StartRemoteRuntime("tcp://127.0.0.1:" + std::to_string(port) + "," + a.url(), "", "off", 1,
                                        &clock);
  ASSERT_NE(rt, nullptr);
  Pager* pager = ImplOf(*rt)->pager();
  ASSERT_FALSE(pager->server_stats()[0].connected);
  auto tries = [&] { return pager->server_stats()[0].rejoin_tries; };
  ASSERT_TRUE(testing::WaitFor([&] { return clock.waits() >= 1; }, 60)) << "the repair thread never waits";
  // One second of the clock; returns once the repair thread has looked and waits again.
  auto second = [&] {
    const uint64_t waits = clock.waits();
    clock.Advance(1'000'000'000);
    return testing::WaitFor([&] { return clock.waits() > waits; }, 60);
  };
  std::vector<uint64_t> seen;
  for (int s = 1; s <= 8; ++s) {
    ASSERT_TRUE(second()) << "second " << s;
    seen.push_back(tries());
  }
  EXPECT_EQ(seen, (std::vector<uint64_t>{1, 2, 2, 3, 3, 3, 3, 4})) << "tries after each second";
  ASSERT_TRUE(late.Start({"--capacity", "16M", "--no-rdma"}, "", port));
  // The next try is 8 s after the fourth: not before, and then it connects.
  for (int s = 9; s < 16; ++s) ASSERT_TRUE(second()) << "second " << s;
  EXPECT_FALSE(pager->server_stats()[0].connected) << "tried before its wait was over";
  ASSERT_TRUE(second());
  EXPECT_EQ(tries(), 5u);
  ASSERT_TRUE(pager->server_stats()[0].connected) << "the server that answers now was not taken";
  auto p = rt->Allocate(256 * kPage, Tier::kDram);
  ASSERT_TRUE(p.ok());
  auto* base = static_cast<uint8_t*>(*p);
  for (size_t i = 0; i < 256; ++i) FillPage(base + i * kPage, i);
  ASSERT_TRUE(rt->Migrate(base, 256 * kPage, Tier::kRemote).ok());
  const auto st = pager->server_stats();
  EXPECT_EQ(st[0].pages + st[1].pages, 256u);
  EXPECT_GT(st[0].pages, 0u) << "it takes new placements";
  for (size_t i = 0; i < 256; ++i) ASSERT_TRUE(CheckPage(base + i * kPage, i)) << i;
}

// A server that stops answering (SIGSTOP: its connections stay open, its replies do not come)
// holds the faults on its own pages only. A thread faults on a page of the stopped server and
// waits; the faults on the other server's pages, which come after that read was posted, are all
// served while the first is still waiting. Counted, not timed: a releaser lets the stopped
// server go on after at most 30 s, so a fault handler that waits for the stopped server's reply
// before it serves the others fails the check (the others are served only after the release)
// instead of hanging.
TEST(RemoteMultiServer, AStoppedServerHoldsOnlyItsOwnPages) {
  if (MemdProcess::Scheme() != "tcp") GTEST_SKIP() << "RDMA completions are waited for one connection at a time";
  MemdProcess a, b;
  ASSERT_TRUE(a.Start({"--capacity", "64M", "--no-rdma"}));
  ASSERT_TRUE(b.Start({"--capacity", "64M", "--no-rdma"}));
  Options o;
  o.Set("remote", a.url() + "," + b.url());
  o.Set("remote_timeout_ms", 120000);  // the stopped server is not given up on during the test
  o.Set("prefetch", "off");
  auto started = Runtime::Start(o);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  std::unique_ptr<Runtime> rt = std::move(*started);
  Pager* pager = ImplOf(*rt)->pager();
  constexpr size_t kPages = 64;
  uint8_t* runs[2];
  size_t slow = 0;  // the server of the first run: the only one with pages after its eviction
  for (int r = 0; r < 2; ++r) {
    auto p = rt->Allocate(kPages * kPage, Tier::kDram);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    runs[r] = static_cast<uint8_t*>(*p);
    for (size_t i = 0; i < kPages; ++i) FillPage(runs[r] + i * kPage, r * kPages + i);
    ASSERT_TRUE(rt->Migrate(runs[r], kPages * kPage, Tier::kRemote).ok());
    if (r == 0) slow = pager->server_stats()[0].pages == kPages ? 0 : 1;
  }
  auto st = pager->server_stats();
  ASSERT_EQ(st[0].pages, kPages);  // one run on each server
  ASSERT_EQ(st[1].pages, kPages);
  MemdProcess& stopped = slow == 0 ? a : b;
  ASSERT_TRUE(testing::StopProcess(stopped.pid()));

  std::mutex mu;
  std::condition_variable cv;
  bool done_here = false;
  std::atomic<bool> released{false}, slow_read{false};
  std::thread releaser([&] {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(30), [&] { return done_here; });
    released.store(true);
    kill(stopped.pid(), SIGCONT);
  });
  std::thread waiter([&] {
    slow_read.store(CheckPage(runs[0], 0));  // a fault on the stopped server
  });
  // The waiter's fault is being served (its read posted) once its page is claimed in flight.
  Region* region = ImplOf(*rt)->RegionOf(runs[0]);
  ASSERT_NE(region, nullptr);
  const uint64_t index = region->PageIndex(runs[0]);
  bool in_flight = false;
  for (int i = 0; i < 10000 && !in_flight; ++i) {
    in_flight = region->record(index).state.load() == static_cast<uint8_t>(PageState::kInFlight);
    if (!in_flight) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(in_flight);
  size_t bad = 0;
  for (size_t i = 0; i < kPages; ++i) bad += CheckPage(runs[1] + i * kPage, kPages + i) ? 0 : 1;
  const bool served_while_stopped = !released.load();
  {
    std::lock_guard<std::mutex> lock(mu);
    done_here = true;
  }
  cv.notify_all();
  releaser.join();
  waiter.join();
  EXPECT_TRUE(served_while_stopped) << "the faults on the other server waited for the stopped server's reply";
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(pager->server_stats()[1 - slow].faults, kPages);
  EXPECT_TRUE(slow_read.load());  // the stopped server's page arrives once it goes on
  for (size_t i = 1; i < kPages - 1; ++i) EXPECT_TRUE(CheckPage(runs[0] + i * kPage, i)) << i;
}

TEST(RemoteMultiServerDeathTest, OneOfTwoServersKilledEndsTheProcessNamingIt) {
  // "fast" (fork without exec): the child kills the very memd whose address the expected line
  // names. This thread is the only one here until the body starts the runtime in the child.
  GTEST_FLAG_SET(death_test_style, "fast");
  if (MemdProcess::Scheme() != "tcp") GTEST_SKIP() << "a dead RDMA peer is detected after the NIC's retries; TCP covers it";
  MemdProcess a, b;
  ASSERT_TRUE(a.Start({"--capacity", "64M", "--no-rdma"}));
  ASSERT_TRUE(b.Start({"--capacity", "64M", "--no-rdma"}));
  auto body = [&] {
    auto rt = StartWith(a.url() + "," + b.url());
    ASSERT_NE(rt, nullptr);
    std::vector<uint8_t*> runs;
    for (int r = 0; r < 2; ++r) {
      auto p = rt->Allocate(64 * kPage, Tier::kDram);
      if (!p.ok()) _exit(3);
      auto* base = static_cast<uint8_t*>(*p);
      for (size_t i = 0; i < 64; ++i) FillPage(base + i * kPage, i);
      if (!rt->Migrate(base, 64 * kPage, Tier::kRemote).ok()) _exit(3);
      runs.push_back(base);
    }
    auto st = ImplOf(*rt)->pager()->server_stats();
    if (st[0].pages != 64 || st[1].pages != 64) _exit(4);  // one run on each
    b.Stop(SIGKILL);
    for (uint8_t* base : runs) {
      for (size_t i = 0; i < 64; ++i) {
        if (!CheckPage(base + i * kPage, i)) _exit(5);  // never a zero page
      }
    }
    _exit(0);
  };
  const std::string b_url = b.url();
  std::string re;
  for (char c : "could not be fetched from memory server " + b_url) {
    if (c == '.') re += '\\';
    re += c;
  }
  EXPECT_EXIT(body(), ::testing::ExitedWithCode(kRemoteLostExitCode), re);
}

}  // namespace
}  // namespace tiermem

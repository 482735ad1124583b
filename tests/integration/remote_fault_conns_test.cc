// Many threads faulting at once: a fault's read waits behind no other fault's read. Over a
// server's several fault connections (TIERMEM_FAULT_CONNECTIONS) eight threads' faults are all
// served, intact; with one of two servers stopped, eight threads faulting on the other's pages,
// and a thread touching fresh memory, are all served while a read from the stopped one is held.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runtime/core/runtime_impl.h"
#include "runtime/pages/region.h"
#include "runtime/paging/pager.h"
#include "tests/integration/remote_memd_fixture.h"
#include "tests/integration/test_util.h"
#include "tiermem/tiermem.hpp"

namespace tiermem {
namespace {

using testing::CheckPage;
using testing::FillPage;
using testing::MemdProcess;

constexpr size_t kPage = 4096;
constexpr size_t kThreads = 8;

std::unique_ptr<Runtime> Start(const std::string& servers, uint64_t connections) {
  Options o;
  o.Set("remote", servers);
  o.Set("remote_timeout_ms", 120000);  // a stopped server is not given up on during a test
  o.Set("prefetch", "off");            // one read per fault
  o.Set("fault_connections", connections);
  auto started = Runtime::Start(o);
  EXPECT_TRUE(started.ok()) << started.status().ToString();
  return started.ok() ? std::move(*started) : nullptr;
}

// `pages` pages filled with patterns from `first_pattern` on and evicted in one Migrate (one
// server's range).
uint8_t* EvictedRun(Runtime& rt, size_t pages, size_t first_pattern) {
  auto p = rt.Allocate(pages * kPage, Tier::kDram);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  if (!p.ok()) return nullptr;
  auto* base = static_cast<uint8_t*>(*p);
  for (size_t i = 0; i < pages; ++i) FillPage(base + i * kPage, first_pattern + i);
  auto m = rt.Migrate(base, pages * kPage, Tier::kRemote);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return base;
}

// kThreads threads read pages of `base` interleaved (thread t: pages t, t + kThreads, ...),
// each checking its pattern; `finished` counts the threads done, `bad` the pages wrong.
std::vector<std::thread> Readers(uint8_t* base, size_t pages, size_t first_pattern, std::atomic<size_t>* finished,
                                 std::atomic<size_t>* bad) {
  std::vector<std::thread> threads;
  for (size_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([=] {
      for (size_t i = t; i < pages; i += kThreads) {
        if (!CheckPage(base + i * kPage, first_pattern + i)) bad->fetch_add(1);
      }
      finished->fetch_add(1);
    });
  }
  return threads;
}

TEST(RemoteFaultConnections, EightThreadsFaultingOverFourConnectionsAreAllServedIntact) {
  MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "64M"}));
  std::unique_ptr<Runtime> rt = Start(memd.url(), 4);
  ASSERT_NE(rt, nullptr);
  Pager* pager = ImplOf(*rt)->pager();
  if (MemdProcess::Scheme() == "tcp") EXPECT_EQ(pager->fault_connections(0), 4u);
  else EXPECT_EQ(pager->fault_connections(0), 1u);  // RDMA: one-sided reads, one connection
  constexpr size_t kPages = 2048;
  uint8_t* base = EvictedRun(*rt, kPages, 0);
  ASSERT_NE(base, nullptr);
  const uint64_t faults0 = pager->server_stats()[0].faults;
  std::atomic<size_t> finished{0}, bad{0};
  std::vector<std::thread> threads = Readers(base, kPages, 0, &finished, &bad);
  EXPECT_TRUE(testing::WaitFor([&] { return finished.load() == kThreads; }, 60));
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(pager->server_stats()[0].faults - faults0, kPages);
}

// A thread of its own touches `pages` fresh pages of the remote tier (never written: each first
// touch a zero fill, no server involved); `done` is set when all of them read zero, `bad`
// counts those that did not.
std::thread ZeroReader(uint8_t* base, size_t pages, std::atomic<bool>* done, std::atomic<size_t>* bad) {
  return std::thread([=] {
    for (size_t i = 0; i < pages; ++i) {
      const uint8_t* p = base + i * kPage;
      if (p[0] != 0 || p[kPage / 2] != 0 || p[kPage - 1] != 0) bad->fetch_add(1);
    }
    done->store(true);
  });
}

TEST(RemoteFaultConnections, FaultsOnTheOtherServerAndZeroFillsAreServedWhileOneReadIsHeld) {
  if (MemdProcess::Scheme() != "tcp") GTEST_SKIP() << "RDMA completions are waited for one connection at a time";
  MemdProcess a, b;
  ASSERT_TRUE(a.Start({"--capacity", "64M", "--no-rdma"}));
  ASSERT_TRUE(b.Start({"--capacity", "64M", "--no-rdma"}));
  std::unique_ptr<Runtime> rt = Start(a.url() + "," + b.url(), 1);
  ASSERT_NE(rt, nullptr);
  Pager* pager = ImplOf(*rt)->pager();
  // 64 pages a thread: twice the handler's staging (kBatch slots) in all, so the faults behind
  // the held one are served only if slots are reused while it is out, and more than kBatch
  // faults are taken meanwhile (each kBatch of them meets DRAM's budget check).
  constexpr size_t kPages = 512;
  uint8_t* held_run = EvictedRun(*rt, kPages, 0);
  ASSERT_NE(held_run, nullptr);
  const size_t held = pager->server_stats()[0].pages == kPages ? 0 : 1;  // the first run's server
  uint8_t* served_run = EvictedRun(*rt, kPages, kPages);
  ASSERT_NE(served_run, nullptr);
  ASSERT_EQ(pager->server_stats()[1 - held].pages, kPages);  // the second run on the other server
  auto fresh = rt->Allocate(4 * kPages * kPage, Tier::kRemote);
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  MemdProcess& stopped = held == 0 ? a : b;
  ASSERT_TRUE(testing::StopProcess(stopped.pid()));

  // A read from the stopped server, held: its page stays in flight.
  std::atomic<bool> held_ok{false};
  std::thread waiter([&] { held_ok.store(CheckPage(held_run, 0)); });
  Region* region = ImplOf(*rt)->RegionOf(held_run);
  ASSERT_NE(region, nullptr);
  const uint64_t index = region->PageIndex(held_run);
  EXPECT_TRUE(testing::WaitFor(
      [&] { return region->record(index).state.load() == static_cast<uint8_t>(PageState::kInFlight); }, 60));

  const uint64_t faults0 = pager->server_stats()[1 - held].faults;
  const uint64_t zero0 = rt->Counters().zero_fills;
  std::atomic<size_t> finished{0}, bad{0}, bad_zero{0};
  std::atomic<bool> zeros_done{false};
  std::vector<std::thread> threads = Readers(served_run, kPages, kPages, &finished, &bad);
  threads.push_back(ZeroReader(static_cast<uint8_t*>(*fresh), 4 * kPages, &zeros_done, &bad_zero));
  const bool served_while_held =
      testing::WaitFor([&] { return finished.load() == kThreads && zeros_done.load(); }, 60);
  const bool still_held = !held_ok.load();
  const size_t finished_then = finished.load();
  const bool zeros_then = zeros_done.load();
  ASSERT_EQ(kill(stopped.pid(), SIGCONT), 0);  // before any join: nothing waits for it after
  for (auto& t : threads) t.join();
  waiter.join();
  EXPECT_TRUE(served_while_held) << finished_then << " of " << kThreads << " threads finished, zero fills "
                                 << (zeros_then ? "done" : "not done") << ", while the other server's read was held";
  EXPECT_TRUE(still_held);
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(bad_zero.load(), 0u);
  EXPECT_EQ(pager->server_stats()[1 - held].faults - faults0, kPages);
  EXPECT_GE(rt->Counters().zero_fills - zero0, 4 * kPages);
  EXPECT_TRUE(held_ok.load());  // the held page arrives once its server goes on
  for (size_t i = 1; i < kPages; ++i) EXPECT_TRUE(CheckPage(held_run + i * kPage, i)) << i;
}

}  // namespace
}  // namespace tiermem

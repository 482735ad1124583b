// Replicated remote memory (TIERMEM_REPLICAS=2 over three memds on loopback): each evicted page
// is on two servers; a server killed mid-run loses no page (faults turn to the other replica,
// threads faulting meanwhile included); the repair thread gives every page its second replica
// back, so a second server lost after the repair still loses nothing; bad counts are refused
// before anything connects.
//
// Server b is the roomiest in each test, so the first range of slots is led by b and holds all
// the data: its replica is on a. Reads start at b (the lead; later the faster of the two), so
// b's loss is met by reads, and by the next eviction that writes there.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backends/remote/transport.h"
#include "runtime/core/runtime_impl.h"
#include "runtime/paging/pager.h"
#include "tests/integration/remote_groups_util.h"
#include "tests/integration/remote_memd_fixture.h"
#include "tiermem/stats.hpp"
#include "tiermem/tiermem.hpp"

namespace tiermem {
namespace {

using testing::CheckPage;
using testing::FillPage;
using testing::MemdProcess;
using namespace testing::groups;  // NOLINT: the helpers of remote_groups_util.h

constexpr size_t kPage = 4096;

// Three memds on TCP (b twice the size of a and c, `small` MiB each) and a runtime over them
// with two replicas and prefetching off; its waits and back-offs go by `clock` when given.
struct Three {
  MemdProcess a, b, c;
  std::unique_ptr<Runtime> rt;
  bool Start(int small, Clock* clock = nullptr) {
    const std::string s = std::to_string(small) + "M", l = std::to_string(2 * small) + "M";
    if (!a.Start({"--capacity", s, "--no-rdma"}) || !b.Start({"--capacity", l, "--no-rdma"}) ||
        !c.Start({"--capacity", s, "--no-rdma"})) {
      return false;
    }
    rt = testing::StartRemoteRuntime(a.url() + "," + b.url() + "," + c.url(), "", "off", 2, clock);
    return rt != nullptr;
  }
};

// Moves `clock` on a second at a time until `done` (what the repair thread does once a second,
// a retry or a rejoin, comes round at each step), each step waited for (bounded, in real time)
// until the thread has looked and waits again. Returns the steps taken, or -1 when `done` is
// still false after two minutes of real time.
int StepUntil(ManualClock& clock, const std::function<bool()>& done) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  for (int steps = 0; std::chrono::steady_clock::now() < give_up; ++steps) {
    if (done()) return steps;
    const uint64_t waits = clock.waits();
    clock.Advance(1'000'000'000);
    testing::WaitFor([&] { return clock.waits() > waits || done(); }, 60);
  }
  return done() ? 0 : -1;
}

TEST(RemoteReplicas, EveryPageIsOnTwoServersAndOutlivesTwoLossesWithARepairBetween) {
  if (MemdProcess::Scheme() != "tcp") GTEST_SKIP() << "a dead RDMA peer is detected after the NIC's retries; TCP covers it";
  Three m;
  ASSERT_TRUE(m.Start(64));
  auto& rt = m.rt;
  MemdProcess &a = m.a, &b = m.b;
  Pager& pager = *ImplOf(*rt)->pager();
  constexpr size_t kRuns = 6, kPages = 512;
  std::vector<Data> data = FillAndEvict(*rt, kRuns, kPages);
  ASSERT_EQ(data.size(), kRuns);
  auto st = pager.server_stats();
  ASSERT_EQ(st.size(), 3u);
  uint64_t copies = 0, written = 0;
  for (const auto& s : st) {
    copies += s.pages;
    written += s.written;
    EXPECT_LE(s.pages, kRuns * kPages);  // never two copies of a page on one server
  }
  EXPECT_EQ(copies, 2 * kRuns * kPages);
  EXPECT_EQ(written, 2 * kRuns * kPages);
  EXPECT_EQ(pager.stats().pages_evicted, kRuns * kPages);

  EXPECT_EQ(st[1].pages, kRuns * kPages);
  EXPECT_EQ(st[0].pages, kRuns * kPages);

  // Server b is lost: every page reads back intact from its other replica.
  b.Stop(SIGKILL);
  EXPECT_EQ(BadPages(data), 0u);

  // Evicted again (dirty): b is down by now (a read or these writes met it), the pages go to
  // healthy groups, and the repair restores the rest: all pages on a and c, two copies each.
  for (Data& d : data) {
    for (size_t i = 0; i < d.pages; ++i) d.base[i * kPage + 8] ^= 0x5A;
    auto m = rt->Migrate(d.base, d.pages * kPage, Tier::kRemote);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(m->pages_moved, d.pages);
  }
  st = pager.server_stats();
  EXPECT_TRUE(st[1].down) << "b was not marked down";
  EXPECT_FALSE(st[0].down);
  EXPECT_FALSE(st[2].down);
  EXPECT_EQ(pager.stats().remote_servers_down, 1u);
  ASSERT_TRUE(WaitRepaired(pager)) << pager.DegradedPagesNow() << " pages still lack a replica";
  st = pager.server_stats();
  EXPECT_EQ(st[0].pages, kRuns * kPages);
  EXPECT_EQ(st[2].pages, kRuns * kPages);

  // Server a is lost too: c alone has every page.
  a.Stop(SIGKILL);
  for (Data& d : data) {
    for (size_t i = 0; i < d.pages; ++i) d.base[i * kPage + 8] ^= 0x5A;
  }
  EXPECT_EQ(BadPages(data), 0u);
  EXPECT_EQ(pager.stats().remote_servers_down, 2u);
  for (Data& d : data) EXPECT_TRUE(rt->Free(d.base).ok());
}

TEST(RemoteReplicas, PagesLeftWithOneCopyGetTheirSecondBack) {
  // Repair without new evictions: pages evicted once, one server lost, the repair copies each
  // page that had a replica there from the survivor to the third server; a second loss (of a
  // survivor) after that loses nothing.
  if (MemdProcess::Scheme() != "tcp") GTEST_SKIP() << "TCP covers it";
  Three m;
  ASSERT_TRUE(m.Start(64));
  auto& rt = m.rt;
  MemdProcess &a = m.a, &b = m.b;
  Pager& pager = *ImplOf(*rt)->pager();
  constexpr size_t kRuns = 4, kPages = 1024;
  std::vector<Data> data = FillAndEvict(*rt, kRuns, kPages);
  ASSERT_EQ(data.size(), kRuns);
  const auto before = pager.server_stats();
  ASSERT_GT(before[1].pages, 0u);
  b.Stop(SIGKILL);
  // Nothing touches the data: an eviction of a new page (its slot comes from the range b leads)
  // finds b gone.
  ASSERT_TRUE(EvictUntilDown(*rt, pager, 1));
  ASSERT_TRUE(WaitRepaired(pager)) << pager.DegradedPagesNow() << " pages still lack a replica";
  EXPECT_GE(pager.stats().remote_repaired_pages, before[1].pages - kRuns);
  // The stats block (what tiermemctl stat shows) says the same; its count of pages short of a
  // replica is published by the repair thread after each range it restores.
  StatusOr<ProcessStats> ps = ReadProcessStats(getpid());
  testing::WaitFor([&] {
    ps = ReadProcessStats(getpid());
    return !ps.ok() || ps->remote_degraded_pages == 0;
  }, 60);
  ASSERT_TRUE(ps.ok()) << ps.status().ToString();
  EXPECT_EQ(ps->remote_servers_down, 1u);
  EXPECT_EQ(ps->remote_degraded_pages, 0u);
  EXPECT_EQ(ps->remote_repaired_pages, pager.stats().remote_repaired_pages);
  ASSERT_EQ(ps->servers.size(), 3u);
  EXPECT_FALSE(ps->servers[1].up);
  EXPECT_TRUE(ps->servers[0].up);
  EXPECT_EQ(ps->servers[1].replication_debt_pages, 0u);
  // Which survivor to lose does not matter now; a goes.
  a.Stop(SIGKILL);
  EXPECT_EQ(BadPages(data), 0u);
}

TEST(RemoteReplicas, AServerThatComesBackTakesNewPagesOnceItsCopiesAreRestored) {
  if (MemdProcess::Scheme() != "tcp") GTEST_SKIP() << "TCP covers it";
  // On a ManualClock: the repair's pacing moves it, and the rejoin's back-off is stepped through
  // by the test, a second at a time, instead of waited for.
  ManualClock clock;
  Three m;
  ASSERT_TRUE(m.Start(64, &clock));
  Runtime& rt = *m.rt;
  Pager& pager = *ImplOf(rt)->pager();
  std::vector<Data> data = FillAndEvict(rt, 2, 512);
  ASSERT_EQ(data.size(), 2u);
  const uint16_t port = m.b.port();
  m.b.Stop(SIGKILL);
  ASSERT_TRUE(EvictUntilDown(rt, pager, 1));
  // The repair starts when b is marked down; a replacement that found no room is retried a
  // second later.
  ASSERT_GE(StepUntil(clock, [&] { return pager.DegradedPagesNow() == 0; }), 0)
      << pager.DegradedPagesNow() << " pages still lack a replica";
  // b again, on its old address: the repair thread connects at its first look after b's
  // back-off (at most 30 s of the clock) ends (a new session: nothing of the old one is read).
  ASSERT_TRUE(m.b.Start({"--capacity", "128M", "--no-rdma"}, "", port));
  const int steps = StepUntil(clock, [&] { return !pager.server_stats()[1].down; });
  ASSERT_GE(steps, 0) << "b did not come back";
  EXPECT_LE(steps, 31) << "b came back later than the longest back-off";
  EXPECT_EQ(pager.stats().remote_servers_down, 0u);
  EXPECT_EQ(pager.server_stats()[1].pages, 0u);
  // New pages go there too (b is the roomiest), and they are real copies: with a lost as well,
  // every page still reads back.
  std::vector<Data> more = FillAndEvict(rt, 4, 1024);
  ASSERT_EQ(more.size(), 4u);
  EXPECT_GT(pager.server_stats()[1].pages, 0u);
  m.a.Stop(SIGKILL);
  EXPECT_EQ(BadPages(more), 0u);
  EXPECT_EQ(BadPages(data), 0u);
}

TEST(RemoteReplicas, ThreadsFaultingWhileAServerDiesAllReadTheirData) {
  if (MemdProcess::Scheme() != "tcp") GTEST_SKIP() << "TCP covers it";
  Three m;
  ASSERT_TRUE(m.Start(128));
  auto& rt = m.rt;
  constexpr size_t kRuns = 8, kPages = 1024;  // 32 MiB
  std::vector<Data> data = FillAndEvict(*rt, kRuns, kPages);
  ASSERT_EQ(data.size(), kRuns);
  // Eight threads read pages at random (each a page at most once: a page read is local after);
  // b dies when about a third of the reads are done.
  EXPECT_EQ(ReadAtRandomWhile(data, [&] { m.b.Stop(SIGKILL); }), 0u);
  EXPECT_EQ(BadPages(data), 0u);
}

TEST(RemoteReplicas, WithNoRoomToRestoreALostServersCopiesEvictionsEndAndLoseNothing) {
  // b lost while a and c cannot take all of its copies: groups with a member on b stay short of
  // a replica. Pages of those groups read back and evicted again look for a healthy group; each
  // server is asked at most once per page, so the eviction ends (moved, or written to the
  // member that is up, or refused with the pages still local) rather than turning from one
  // full server to the other for good: a server that still led groups with free slots (free,
  // but grouped with b) while memd refused it more sent placement back to it without end.
  if (MemdProcess::Scheme() != "tcp") GTEST_SKIP() << "TCP covers it";
  // Three memds of one size, so groups are led by each in turn (the roomiest leads) and the
  // last group each survivor leads, partly used, has a member on b.
  MemdProcess a, b, c;
  for (MemdProcess* p : {&a, &b, &c}) ASSERT_TRUE(p->Start({"--capacity", "12M", "--no-rdma"}));  // 3072 slots
  std::unique_ptr<Runtime> owned = testing::StartRemoteRuntime(a.url() + "," + b.url() + "," + c.url(), "", "off", 2);
  ASSERT_NE(owned, nullptr);
  Runtime& rt = *owned;
  Pager& pager = *ImplOf(rt)->pager();
  std::vector<Data> data = FillAndEvict(rt, 4, 1024);  // 8192 copies of 9216 slots
  ASSERT_EQ(data.size(), 4u);
  b.Stop(SIGKILL);
  ASSERT_TRUE(EvictUntilDown(rt, pager, 1));
  // A hang is turned into a failure.
  std::atomic<bool> done{false};
  std::thread watchdog([&] {
    for (int i = 0; i < 1200 && !done.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!done.load()) {
      ADD_FAILURE() << "evictions after the loss did not end within 60 s";
      _exit(1);
    }
  });
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(BadPages(data), 0u) << "round " << round;  // every page faulted back, local now
    for (const Data& d : data) {
      auto moved = rt.Migrate(d.base, d.pages * kPage, Tier::kRemote);
      if (!moved.ok()) {
        EXPECT_EQ(moved.status().code(), StatusCode::kResourceExhausted) << moved.status().ToString();
      }
    }
  }
  done = true;
  watchdog.join();
  EXPECT_EQ(BadPages(data), 0u);
}

TEST(RemoteReplicas, AfterALossWithNoRoomAFullTierIsSeenWithoutAskingTheServersPerPage) {
  // a and b full at memd, c with room but no partner once b is lost: a new group needs two
  // servers and only c could join one. Placement must see that at once (Full(), the
  // remote-full path) instead of asking c for a group and a for its replica, halving down to
  // one slot, for every page it is given; and the slots freed in groups with a member on b
  // (free, but not for a new page) must not count as room.
  if (MemdProcess::Scheme() != "tcp") GTEST_SKIP() << "TCP covers it";
  MemdProcess a, b, c;
  ASSERT_TRUE(a.Start({"--capacity", "12M", "--no-rdma"}));  // 3072 slots
  ASSERT_TRUE(b.Start({"--capacity", "12M", "--no-rdma"}));
  ASSERT_TRUE(c.Start({"--capacity", "64M", "--no-rdma"}));  // every group has a member on c
  std::unique_ptr<Runtime> owned = testing::StartRemoteRuntime(a.url() + "," + b.url() + "," + c.url(), "", "off", 2);
  ASSERT_NE(owned, nullptr);
  Runtime& rt = *owned;
  Pager& pager = *ImplOf(rt)->pager();
  // Runs evicted until one is refused: a and b are full then (6144 slots, at most 6144 pages).
  constexpr size_t kRunPages = 512;
  std::vector<Data> data;
  for (size_t r = 0; r < 16; ++r) {
    auto p = rt.Allocate(kRunPages * kPage, Tier::kDram);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    data.push_back(Data{static_cast<uint8_t*>(*p), kRunPages});
    for (size_t i = 0; i < kRunPages; ++i) FillPage(data.back().base + i * kPage, r * kRunPages + i);
    if (!rt.Migrate(data.back().base, kRunPages * kPage, Tier::kRemote).ok()) break;
  }
  ASSERT_LT(data.size(), 16u) << "a and b never filled";
  b.Stop(SIGKILL);
  EXPECT_EQ(BadPages(data), 0u);  // every page read back, b's copies from the other replica
  // Found down by a read, or else by the repair thread's probe (once a second while idle).
  testing::WaitFor([&] { return pager.server_stats()[1].down; }, 60);
  ASSERT_TRUE(pager.server_stats()[1].down);
  EXPECT_GT(pager.DegradedPagesNow(), 0u);
  // Every other run freed: free slots again, in groups of c with a (room for new pages) and of
  // c with b (none).
  std::vector<Data> kept;
  for (size_t r = 0; r < data.size(); ++r) {
    if (r % 2 == 0) {
      ASSERT_TRUE(rt.Free(data[r].base).ok());
    } else {
      kept.push_back(data[r]);
    }
  }
  auto bad_kept = [&] {
    size_t bad = 0;
    for (size_t j = 0; j < kept.size(); ++j) {
      for (size_t i = 0; i < kRunPages; ++i) bad += CheckPage(kept[j].base + i * kPage, (2 * j + 1) * kRunPages + i) ? 0 : 1;
    }
    return bad;
  };
  // New pages, evicted one by one, take the free slots of healthy groups until none is left.
  constexpr size_t kFresh = 4096, kAfterFull = 256;
  constexpr uint64_t kFreshSalt = 100000;
  auto mem = rt.Allocate(kFresh * kPage, Tier::kDram);
  ASSERT_TRUE(mem.ok()) << mem.status().ToString();
  auto* fresh = static_cast<uint8_t*>(*mem);
  for (size_t i = 0; i < kFresh; ++i) FillPage(fresh + i * kPage, kFreshSalt + i);
  size_t placed = 0;
  for (; placed < kFresh - kAfterFull; ++placed) {
    if (!rt.Migrate(fresh + placed * kPage, kPage, Tier::kRemote).ok()) break;
  }
  ASSERT_LT(placed, kFresh - kAfterFull) << "the tier never filled";
  // Full now: each further page is refused without asking a and c for slots again and again
  // (they are asked again a second later, so a slow run may see a few rounds; before, every
  // page cost about 26 allocations: c asked for a group, a for its replica, down to one slot).
  const uint64_t asked_before = pager.stats().placement_allocs;
  size_t refused = 0;
  for (size_t i = placed; i < placed + kAfterFull; ++i) {
    auto moved = rt.Migrate(fresh + i * kPage, kPage, Tier::kRemote);
    if (!moved.ok()) {
      EXPECT_EQ(moved.status().code(), StatusCode::kResourceExhausted) << moved.status().ToString();
      ++refused;
    }
  }
  const uint64_t asked = pager.stats().placement_allocs - asked_before;
  EXPECT_EQ(refused, kAfterFull);
  EXPECT_LE(asked, kAfterFull / 4) << "slot allocations asked for " << kAfterFull << " refused pages";
  EXPECT_TRUE(pager.Full());
  // The kept pages (groups of c with a or b), read back and evicted again: moved or written to
  // the members that are up; all of them, and the new pages, read back intact.
  EXPECT_EQ(bad_kept(), 0u);
  for (const Data& d : kept) {
    auto moved = rt.Migrate(d.base, d.pages * kPage, Tier::kRemote);
    if (!moved.ok()) {
      EXPECT_EQ(moved.status().code(), StatusCode::kResourceExhausted) << moved.status().ToString();
    }
  }
  EXPECT_EQ(bad_kept(), 0u);
  size_t bad_fresh = 0;
  for (size_t i = 0; i < kFresh; ++i) bad_fresh += CheckPage(fresh + i * kPage, kFreshSalt + i) ? 0 : 1;
  EXPECT_EQ(bad_fresh, 0u);
}

TEST(RemoteReplicas, MoreReplicasThanServersIsRefusedBeforeAnythingConnects) {
  MemdProcess a, b;
  ASSERT_TRUE(a.Start({"--capacity", "16M", "--no-rdma"}));
  ASSERT_TRUE(b.Start({"--capacity", "16M", "--no-rdma"}));
  for (uint32_t replicas : {3u, 0u, kMaxReplicas + 1}) {
    PagerConfig pc;
    pc.servers = a.url() + "," + b.url();
    pc.replicas = replicas;
    pc.events = testing::NoRegionEvents();
    auto p = Pager::Start(std::move(pc));
    ASSERT_FALSE(p.ok()) << replicas;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find("TIERMEM_REPLICAS=" + std::to_string(replicas)), std::string::npos)
        << p.status().message();
    if (replicas == 3) {
      EXPECT_NE(p.status().message().find("lists 2"), std::string::npos) << p.status().message();
    }
  }
  EXPECT_EQ(MemdSessions(a), 1u);  // the test's own connection only
  EXPECT_EQ(MemdSessions(b), 1u);
}

}  // namespace
}  // namespace tiermem

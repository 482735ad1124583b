// The background eviction writer (runtime/paging/evict_writer.h): a page rewritten while its
// write is in flight stays local with its new bytes, and its writer does not wait; a full queue blocks the evicting thread and drops
// nothing; a server lost with writes in flight leaves the pages local and intact (one server),
// or their windows go to the survivors (replicas). A memd stopped with SIGSTOP holds the writes
// in flight for as long as the test needs, so none of this depends on timing.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "runtime/core/runtime_impl.h"
#include "runtime/paging/pager.h"
#include "runtime/tiering/tracker.h"
#include "tests/integration/remote_memd_fixture.h"
#include "tests/integration/test_util.h"
#include "tiermem/tiermem.hpp"

namespace tiermem {
namespace {

using testing::CheckPage;
using testing::FillPage;
using testing::MemdProcess;

constexpr size_t kPage = 4096;
constexpr size_t kWindow = 256;  // pages per queued job (pager_internal.h's kBatch)

std::unique_ptr<Runtime> StartOn(const std::string& servers, int replicas = 1) {
  Options o;
  o.Set("remote", servers);
  o.Set("token", "tok");
  // Long enough that a stopped memd is not timed out while the test looks at the queue.
  o.Set("remote_timeout_ms", 120000);
  o.Set("prefetch", "off");
  o.Set("replicas", replicas);
  auto rt = Runtime::Start(o);
  EXPECT_TRUE(rt.ok()) << rt.status().ToString();
  if (!rt.ok() || !(*rt)->HasTier(Tier::kRemote)) return nullptr;
  return std::move(*rt);
}

// `pages` pages filled with FillPage(i + tag), and their region and first index.
struct Data {
  uint8_t* base = nullptr;
  Region* region = nullptr;
  uint64_t first = 0;
  size_t pages = 0;
  std::vector<uint64_t> Indices(size_t from, size_t n) const {
    std::vector<uint64_t> idx(n);
    std::iota(idx.begin(), idx.end(), first + from);
    return idx;
  }
  PageState State(size_t i) const { return static_cast<PageState>(region->record(first + i).state.load()); }
  size_t Count(PageState s) const {
    size_t n = 0;
    for (size_t i = 0; i < pages; ++i) n += State(i) == s ? 1 : 0;
    return n;
  }
  // Pages whose bytes are not FillPage(i + tag)'s.
  size_t Wrong(size_t tag = 0) const {
    size_t n = 0;
    for (size_t i = 0; i < pages; ++i) n += CheckPage(base + i * kPage, i + tag) ? 0 : 1;
    return n;
  }
  std::vector<char*> Addresses() const {
    std::vector<char*> a;
    for (size_t i = 0; i < pages; ++i) a.push_back(reinterpret_cast<char*>(base + i * kPage));
    return a;
  }
};

// Slots come from memd in chunks, asked for (synchronously) by the first eviction: one page
// evicted first, so the evictions under test need nothing of a stopped memd but its acks.
void TakeSlotsFirst(Runtime& rt) {
  auto p = rt.Allocate(kPage, Tier::kDram);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  memset(*p, 1, kPage);
  auto m = rt.Migrate(*p, kPage, Tier::kRemote);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
}

Data Fill(Runtime& rt, size_t pages) {
  Data d;
  auto p = rt.Allocate(pages * kPage, Tier::kDram);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  if (!p.ok()) return d;
  d.base = static_cast<uint8_t*>(*p);
  d.pages = pages;
  for (size_t i = 0; i < pages; ++i) FillPage(d.base + i * kPage, i);
  d.region = ImplOf(rt)->RegionOf(d.base);
  d.first = d.region->PageIndex(d.base);
  return d;
}

// Waits (bounded: 60 s, so a broken writer fails instead of hanging) until cond() holds.
template <typename Cond>
bool Await(Cond&& cond) {
  for (int i = 0; i < 60000; ++i) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// One memd, a runtime on it with its slots taken, and `pages` pages filled.
class RemoteWriter : public ::testing::Test {
 protected:
  void StartOne(size_t pages) {
    ASSERT_TRUE(memd.Start({"--capacity", "64M", "--no-rdma"}, "tok"));
    rt = StartOn(memd.url());
    ASSERT_NE(rt, nullptr);
    pager = ImplOf(*rt)->pager();
    TakeSlotsFirst(*rt);
    d = Fill(*rt, pages);
    ASSERT_NE(d.base, nullptr);
  }
  MemdProcess memd;
  std::unique_ptr<Runtime> rt;
  Pager* pager = nullptr;
  Data d;
};

// A write to a page whose eviction is in flight calls the eviction off: the writing thread goes
// on at once (it does not wait for memd's acknowledgement and then fault the page back), the page
// stays local with its new bytes, and only the pages not written are dropped.
TEST_F(RemoteWriter, APageRewrittenWhileItsWriteIsInFlightStaysLocalAndIsNotWaitedFor) {
  constexpr size_t kPages = 2 * kWindow;
  ASSERT_NO_FATAL_FAILURE(StartOne(kPages));
  if (!pager->write_protect()) GTEST_SKIP() << "userfaultfd write-protect is not available here";
  const uint64_t called_off0 = pager->stats().evictions_called_off;

  ASSERT_TRUE(testing::StopProcess(memd.pid()));  // the writes stay in flight
  auto q = pager->EvictPagesQueued(*d.region, d.Indices(0, kPages));
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(*q, kPages);
  // Queued, not written: every page is claimed and still here.
  for (size_t i = 0; i < kPages; ++i) ASSERT_EQ(d.State(i), PageState::kInFlight) << i;

  // Every other page rewritten by a thread while memd cannot acknowledge anything.
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (size_t i = 0; i < kPages; i += 2) FillPage(d.base + i * kPage, i + 100000);
    done = true;
  });
  const bool finished_while_stopped = Await([&] { return done.load(); });
  EXPECT_TRUE(finished_while_stopped) << "the writes waited for memd";
  EXPECT_EQ(pager->stats().evictions_called_off - called_off0, kPages / 2);
  // Still claimed by the writer thread until their windows are acknowledged.
  EXPECT_EQ(d.State(0), PageState::kInFlight);
  ASSERT_EQ(kill(memd.pid(), SIGCONT), 0);
  writer.join();
  pager->DrainWrites();

  // Written pages stayed local, the others went remote.
  for (size_t i = 0; i < kPages; ++i) {
    ASSERT_EQ(d.State(i), i % 2 == 0 ? PageState::kLocal : PageState::kRemote) << i;
  }
  auto check = [&] {
    size_t bad = 0;
    for (size_t i = 0; i < kPages; ++i) bad += CheckPage(d.base + i * kPage, i % 2 == 0 ? i + 100000 : i) ? 0 : 1;
    return bad;
  };
  EXPECT_EQ(check(), 0u);
  // A page kept local is dirty: evicted again, its newest bytes are written and come back from
  // the server (not what the called-off eviction sent).
  FillPage(d.base, 7);
  auto m = rt->Migrate(d.base, kPages * kPage, Tier::kRemote);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  for (size_t i = 0; i < kPages; ++i) ASSERT_EQ(d.State(i), PageState::kRemote) << i;
  EXPECT_TRUE(CheckPage(d.base, 7));
  FillPage(d.base, 100000);
  EXPECT_EQ(check(), 0u);
  ASSERT_TRUE(rt->Free(d.base).ok());
}

// The race between eviction and sampling, forced: pages the protect tracker armed (PROT_NONE)
// before an eviction claimed them are lifted by the eviction once claimed (Pager::WatchClaims),
// before any of their bytes is sent. Without that the send met PROT_NONE pages (EFAULT), the
// connection was declared lost and the server marked down.
TEST_F(RemoteWriter, PagesArmedBeforeTheirEvictionClaimsThemAreLiftedBeforeTheyAreSent) {
  StartOne(kWindow);
  ProtectTracker& tracker = ProtectTracker::Get();
  ASSERT_TRUE(tracker.Install().ok());
  tracker.DisarmAll();
  pager->WatchClaims(&tracker);
  ASSERT_EQ(tracker.Arm(d.Addresses()), kWindow);
  auto r = pager->EvictPages(*d.region, d.Indices(0, kWindow));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, kWindow);
  EXPECT_EQ(d.Count(PageState::kRemote), kWindow);
  EXPECT_EQ(pager->stats().remote_servers_down, 0u);
  EXPECT_EQ(pager->stats().evictions_unreadable, 0u);
  EXPECT_EQ(d.Wrong(), 0u);  // faulted back with their bytes
  tracker.DisarmAll();
  pager->WatchClaims(nullptr);
  ASSERT_TRUE(rt->Free(d.base).ok());
}

// And the other order: a page claimed by an eviction is not armed by the tracker afterwards
// when its filter asks the page's state (what the policy thread does), so a page whose write
// is in flight (held here by a stopped memd) is never made inaccessible.
TEST_F(RemoteWriter, APageWhoseWriteIsInFlightIsNotArmed) {
  StartOne(kWindow);
  ProtectTracker& tracker = ProtectTracker::Get();
  ASSERT_TRUE(tracker.Install().ok());
  tracker.DisarmAll();
  ASSERT_TRUE(testing::StopProcess(memd.pid()));
  auto q = pager->EvictPagesQueued(*d.region, d.Indices(0, kWindow / 2));
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  ASSERT_EQ(*q, kWindow / 2);
  const Region* region = d.region;
  const size_t armed = tracker.Arm(d.Addresses(), [region](const char* p) {
    return region->record(region->PageIndex(p)).state.load() == uint8_t(PageState::kLocal);
  });
  EXPECT_EQ(armed, kWindow / 2);  // only the pages not being written
  ASSERT_EQ(kill(memd.pid(), SIGCONT), 0);
  EXPECT_TRUE(Await([&] { return d.Count(PageState::kRemote) == kWindow / 2; }));
  EXPECT_EQ(pager->stats().remote_servers_down, 0u);
  tracker.DisarmAll();
  EXPECT_EQ(d.Wrong(), 0u);
  ASSERT_TRUE(rt->Free(d.base).ok());
}

// A page the program itself made inaccessible while its eviction was queued: the send cannot
// read it, so that page alone stays local (counted in evict_unreadable) with its bytes, the
// window's other pages go remote, and the server stays up.
TEST_F(RemoteWriter, APageUnreadableWhenSentStaysLocalAndTheServerStaysUp) {
  StartOne(kWindow);
  uint8_t* bad = d.base + 7 * kPage;
  ASSERT_EQ(mprotect(bad, kPage, PROT_NONE), 0);
  auto r = pager->EvictPages(*d.region, d.Indices(0, kWindow));
  ASSERT_EQ(mprotect(bad, kPage, PROT_READ | PROT_WRITE), 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, kWindow - 1);
  EXPECT_EQ(pager->stats().evictions_unreadable, 1u);
  EXPECT_EQ(pager->stats().remote_servers_down, 0u);
  EXPECT_EQ(d.State(7), PageState::kLocal);
  EXPECT_EQ(d.Count(PageState::kRemote), kWindow - 1);
  EXPECT_EQ(d.Wrong(), 0u);
  // Its server copy is not current: the next eviction writes it again.
  auto again = pager->EvictPages(*d.region, d.Indices(7, 1));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(d.State(7), PageState::kRemote);
  EXPECT_EQ(d.Wrong(), 0u);
  ASSERT_TRUE(rt->Free(d.base).ok());
}

TEST_F(RemoteWriter, AFullQueueBlocksTheEvictingThreadAndDropsNothing) {
  constexpr size_t kPages = (EvictWriter::kMaxJobs + 2) * kWindow;
  ASSERT_NO_FATAL_FAILURE(StartOne(kPages));

  ASSERT_TRUE(testing::StopProcess(memd.pid()));
  std::atomic<bool> returned{false};
  StatusOr<uint64_t> queued = uint64_t{0};
  std::thread evictor([&] {
    queued = pager->EvictPagesQueued(*d.region, d.Indices(0, kPages));
    returned = true;
  });
  // kMaxJobs windows are queued or in flight and the evicting thread waits for room.
  const bool blocked = Await([&] { return pager->writer()->waiting() == 1; });
  EXPECT_TRUE(blocked);
  EXPECT_EQ(pager->writer()->depth(), EvictWriter::kMaxJobs);
  EXPECT_FALSE(returned.load());
  ASSERT_EQ(kill(memd.pid(), SIGCONT), 0);
  evictor.join();
  ASSERT_TRUE(queued.ok()) << queued.status().ToString();
  EXPECT_EQ(*queued, kPages);
  EXPECT_GE(pager->writer()->full_waits(), 1u);
  pager->DrainWrites();
  EXPECT_EQ(d.Count(PageState::kRemote), kPages);
  EXPECT_EQ(d.Wrong(), 0u);
  ASSERT_TRUE(rt->Free(d.base).ok());
}

TEST_F(RemoteWriter, AServerLostWithWritesInFlightLeavesThePagesLocalAndIntact) {
  constexpr size_t kPages = 3 * kWindow;
  ASSERT_NO_FATAL_FAILURE(StartOne(kPages));

  ASSERT_TRUE(testing::StopProcess(memd.pid()));
  auto q = pager->EvictPagesQueued(*d.region, d.Indices(0, kPages));
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(*q, kPages);
  memd.Stop(SIGKILL);  // the connection resets under the writes in flight
  pager->DrainWrites();
  EXPECT_EQ(d.Count(PageState::kLocal), kPages);
  EXPECT_EQ(pager->stats().pages_evicted, 1u);  // TakeSlotsFirst's page only
  EXPECT_EQ(pager->stats().remote_servers_down, 1u);
  EXPECT_EQ(d.Wrong(), 0u);
  // They are ordinary local pages again: written to, and the bytes stay.
  FillPage(d.base, 7);
  EXPECT_TRUE(CheckPage(d.base, 7));
  ASSERT_TRUE(rt->Free(d.base).ok());
}

// The policy thread's evictions (PageMover::EvictPagesBackground, WaitEvictions): the call
// returns with the writes in flight, and the wait settles them.
TEST_F(RemoteWriter, BackgroundEvictionsReturnAtOnceAndTheirWaitSettlesThem) {
  constexpr size_t kPages = 3 * kWindow;
  ASSERT_NO_FATAL_FAILURE(StartOne(kPages));
  Runtime::Impl* impl = ImplOf(*rt);

  ASSERT_TRUE(testing::StopProcess(memd.pid()));  // no write can be acknowledged
  auto q = impl->EvictPagesBackground(d.Addresses());
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->pages_moved, kPages);
  EXPECT_EQ(d.Count(PageState::kInFlight), kPages);
  EXPECT_EQ(impl->TierPages(Tier::kDram), kPages);  // still here until their writes are in

  std::atomic<bool> settled{false};
  std::atomic<pid_t> waiter_tid{0};
  uint64_t became = 0;
  Status st;
  std::thread waiter([&] {
    waiter_tid = gettid();
    st = impl->WaitEvictions(&became);
    settled = true;
  });
  // The waiter in the call and asleep there (however late a loaded machine runs it), not done:
  // it waits for memd's acknowledgements.
  EXPECT_TRUE(testing::WaitFor([&] { return waiter_tid.load() != 0; }, 60));
  const bool asleep = testing::WaitFor([&] { return settled.load() || testing::ThreadAsleep(waiter_tid.load()); }, 60);
  EXPECT_TRUE(asleep);
  EXPECT_FALSE(settled.load()) << "the wait returned while memd could acknowledge nothing";
  ASSERT_EQ(kill(memd.pid(), SIGCONT), 0);
  waiter.join();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(became, kPages);
  EXPECT_EQ(impl->TierPages(Tier::kDram), 0u);
  EXPECT_EQ(d.Count(PageState::kRemote), kPages);
  EXPECT_EQ(d.Wrong(), 0u);
  // Nothing queued since: the next wait returns at once with nothing.
  ASSERT_TRUE(impl->WaitEvictions(&became).ok());
  EXPECT_EQ(became, 0u);
  ASSERT_TRUE(rt->Free(d.base).ok());
}

TEST_F(RemoteWriter, BackgroundEvictionsToAServerLostAreReportedByTheWaitAndStayLocal) {
  constexpr size_t kPages = 2 * kWindow;
  ASSERT_NO_FATAL_FAILURE(StartOne(kPages));
  Runtime::Impl* impl = ImplOf(*rt);

  ASSERT_TRUE(testing::StopProcess(memd.pid()));
  auto q = impl->EvictPagesBackground(d.Addresses());
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->pages_moved, kPages);
  memd.Stop(SIGKILL);
  uint64_t became = 1;
  Status st = impl->WaitEvictions(&became);
  EXPECT_FALSE(st.ok());  // the only server is gone: nowhere to send the windows again
  EXPECT_EQ(became, 0u);
  EXPECT_EQ(d.Count(PageState::kLocal), kPages);
  EXPECT_EQ(d.Wrong(), 0u);
  ASSERT_TRUE(rt->Free(d.base).ok());
}

// Three memds, two replicas, and `kPages` pages evicted once and then rewritten with
// FillPage(i + kTag): the pages keep their slots, so their next windows go to the group that
// holds them, and one of its servers (`victim`) is stopped: their writes there stay in flight.
class RemoteWriterReplicas : public ::testing::Test {
 protected:
  static constexpr size_t kPages = 4 * kWindow;
  static constexpr size_t kTag = 5000;
  void SetUp() override {
    std::string servers;
    for (auto& m : memd) {
      ASSERT_TRUE(m.Start({"--capacity", "64M", "--no-rdma"}, "tok"));
      servers += (servers.empty() ? "" : ",") + m.url();
    }
    rt = StartOn(servers, 2);
    ASSERT_NE(rt, nullptr);
    pager = ImplOf(*rt)->pager();
    d = Fill(*rt, kPages);
    ASSERT_NE(d.base, nullptr);
    auto once = rt->Migrate(d.base, kPages * kPage, Tier::kRemote);
    ASSERT_TRUE(once.ok()) << once.status().ToString();
    auto st = pager->server_stats();
    for (size_t k = 0; k < st.size() && victim == 3; ++k) victim = st[k].pages > 0 ? k : 3;
    ASSERT_LT(victim, 3u);
    for (size_t i = 0; i < kPages; ++i) FillPage(d.base + i * kPage, i + kTag);
    ASSERT_TRUE(testing::StopProcess(memd[victim].pid()));
  }
  MemdProcess memd[3];
  std::unique_ptr<Runtime> rt;
  Pager* pager = nullptr;
  Data d;
  size_t victim = 3;
};

TEST_F(RemoteWriterReplicas, AReplicaLostWithWritesInFlightSendsTheWindowsToTheSurvivors) {
  StatusOr<MigrateResult> moved = MigrateResult{};
  std::atomic<bool> returned{false};
  std::thread evictor([&] {
    moved = rt->Migrate(d.base, kPages * kPage, Tier::kRemote);
    returned = true;
  });
  ASSERT_TRUE(Await([&] { return pager->writer()->depth() > 0; }));
  EXPECT_FALSE(returned.load());  // its writes to the stopped server are not acknowledged
  memd[victim].Stop(SIGKILL);
  evictor.join();
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(moved->pages_moved, kPages);
  EXPECT_EQ(pager->stats().remote_servers_down, 1u);
  EXPECT_EQ(d.Count(PageState::kRemote), kPages);
  EXPECT_EQ(d.Wrong(kTag), 0u);  // every page comes back from the survivors
  ASSERT_TRUE(rt->Free(d.base).ok());
}

// The same through the policy thread's background evictions: the windows lost with the replica
// are sent again by the wait, each to its own region's pages.
TEST_F(RemoteWriterReplicas, TheWaitForBackgroundEvictionsSendsWindowsLostWithAReplicaToTheSurvivors) {
  Runtime::Impl* impl = ImplOf(*rt);
  auto q = impl->EvictPagesBackground(d.Addresses());
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->pages_moved, kPages);
  memd[victim].Stop(SIGKILL);
  uint64_t became = 0;
  Status w = impl->WaitEvictions(&became);
  ASSERT_TRUE(w.ok()) << w.ToString();
  EXPECT_EQ(became, kPages);
  EXPECT_EQ(pager->stats().remote_servers_down, 1u);
  EXPECT_EQ(d.Count(PageState::kRemote), kPages);
  EXPECT_EQ(d.Wrong(kTag), 0u);
  ASSERT_TRUE(rt->Free(d.base).ok());
}

}  // namespace
}  // namespace tiermem

// Migrations that work from a stale view of memory, as the policy thread does: it snapshots the
// page records, plans, and calls Migrate on ranges whose runs may since have been freed and
// handed out again. Such a migration may move the next owner's pages (that is allowed: their
// contents go with them) but must never lose what the next owner wrote, and the per-tier byte
// counts must come back to zero when everything is freed. And threads that fault on the same
// remote pages at once: the pages stay clean (read only), so evicting them again writes nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "tests/integration/remote_memd_fixture.h"
#include "tiermem/tiermem.hpp"

namespace tiermem {
namespace {

using testing::CheckPage;
using testing::FillPage;
using testing::MemdProcess;

constexpr size_t kPage = 4096;

TEST(RemoteRace, StaleMigrationsNeverLoseTheNextOwnersData) {
  MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "256M", "--no-rdma"}, "tok"));
  Options o;
  o.Set("remote", memd.url());
  o.Set("token", "tok");
  o.Set("remote_timeout_ms", 5000);
  // No tier limits: no policy thread; this test is the only migrator.
  auto started = Runtime::Start(o);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  Runtime& rt = **started;
  ASSERT_TRUE(rt.HasTier(Tier::kRemote));

  // Recently allocated runs (address, pages), read by the migrating thread long after they may
  // have been freed.
  constexpr size_t kRing = 64;
  std::vector<std::atomic<uint64_t>> ring(kRing);
  std::atomic<size_t> ring_pos{0};
  std::atomic<bool> done{false};
  std::atomic<uint64_t> bad{0}, allocs{0}, migrations{0};

  constexpr int kWorkers = 4, kRounds = 1500;
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      std::mt19937_64 rng(uint64_t(w) * 7919 + 1);
      struct Live {
        uint8_t* p;
        size_t pages;
        uint64_t tag;
      };
      std::vector<Live> live;
      for (int i = 0; i < kRounds; ++i) {
        const size_t pages = 1 + rng() % 8;
        const Tier tier = rng() % 2 ? Tier::kRemote : Tier::kDram;
        auto a = rt.Allocate(pages * kPage, tier);
        if (!a.ok()) continue;  // a full tier is not what this test is about
        auto* p = static_cast<uint8_t*>(*a);
        const uint64_t tag = (uint64_t(w) << 40) | (uint64_t(i) << 8);
        for (size_t k = 0; k < pages; ++k) FillPage(p + k * kPage, tag + k, 7);
        ring[ring_pos.fetch_add(1) % kRing].store(reinterpret_cast<uint64_t>(p) | (pages - 1));
        ++allocs;
        live.push_back({p, pages, tag});
        if (live.size() > 6 || (i == kRounds - 1)) {
          while (!live.empty()) {
            const Live& l = live.back();
            for (size_t k = 0; k < l.pages; ++k) {
              if (!CheckPage(l.p + k * kPage, l.tag + k, 7)) ++bad;
            }
            EXPECT_TRUE(rt.Free(l.p).ok());
            live.pop_back();
          }
        }
      }
    });
  }
  std::thread migrator([&] {
    std::mt19937_64 rng(99);
    while (!done.load()) {
      const uint64_t e = ring[rng() % kRing].load();
      if (e == 0) continue;
      void* p = reinterpret_cast<void*>(e & ~uint64_t(kPage - 1));
      const size_t len = ((e & (kPage - 1)) + 1) * kPage;
      // Errors are expected (the run may be gone); only the data and the counts matter.
      if (rt.Migrate(p, len, rng() % 2 ? Tier::kRemote : Tier::kDram).ok()) ++migrations;
    }
  });
  for (auto& t : workers) t.join();
  done = true;
  migrator.join();

  EXPECT_EQ(bad.load(), 0u) << "pages whose contents changed under a stale migration";
  EXPECT_GT(migrations.load(), 0u) << "the migrating thread never moved anything";
  RecordProperty("allocations", std::to_string(allocs.load()));
  RecordProperty("migrations", std::to_string(migrations.load()));
  for (const TierStats& s : rt.Stats()) {
    EXPECT_EQ(s.allocated_bytes, 0u) << "tier " << TierName(s.tier)
                                     << " still counts bytes after every run was freed";
  }
}

TEST(RemoteRace, PagesManyThreadsFaultOnAtOnceStayCleanAndAreNotWrittenAgain) {
  // Eight threads read the same remote pages in the same order, so their faults on a page meet:
  // one thread's fault fetches it, and another's, taken by the handler once the page is in, finds
  // it there. That second fault must leave the page clean (its server copy current), so the next
  // eviction skips the write; before, it cleared the flag as for a fresh zero page.
  MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "64M", "--no-rdma"}, "tok"));
  std::unique_ptr<Runtime> started = testing::StartRemoteRuntime(memd.url(), "tok", "off");
  ASSERT_NE(started, nullptr);
  Runtime& rt = *started;
  constexpr size_t kPages = 2048;
  auto mem = rt.Allocate(kPages * kPage, Tier::kDram);
  ASSERT_TRUE(mem.ok()) << mem.status().ToString();
  auto* base = static_cast<uint8_t*>(*mem);
  for (size_t i = 0; i < kPages; ++i) FillPage(base + i * kPage, i);
  for (int round = 0; round < 8; ++round) {  // the meeting is a race: several rounds
    auto out = rt.Migrate(base, kPages * kPage, Tier::kRemote);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const RuntimeCounters before = rt.Counters();
    std::atomic<uint64_t> bad{0};
    std::vector<std::thread> readers;
    for (int t = 0; t < 8; ++t) {
      readers.emplace_back([&] {
        for (size_t i = 0; i < kPages; ++i) bad += CheckPage(base + i * kPage, i) ? 0 : 1;
      });
    }
    for (auto& th : readers) th.join();
    ASSERT_EQ(bad.load(), 0u);
    auto again = rt.Migrate(base, kPages * kPage, Tier::kRemote);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    const RuntimeCounters after = rt.Counters();
    if (round == 0 && after.evictions_clean == before.evictions_clean) {
      GTEST_SKIP() << "no clean evictions: this kernel gives the pager no write-protect";
    }
    EXPECT_EQ(after.pages_written, before.pages_written) << "round " << round << ": pages read only were written again";
    EXPECT_EQ(after.evictions_clean - before.evictions_clean, kPages) << "round " << round;
  }
  ASSERT_TRUE(rt.Free(base).ok());
}

}  // namespace
}  // namespace tiermem

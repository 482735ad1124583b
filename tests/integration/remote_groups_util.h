// Helpers of the tests of groups of servers (remote_replicas_test.cc, remote_code_test.cc):
// patterned runs evicted and checked, a server found down, a repair waited for.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <random>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "backends/remote/transport.h"
#include "runtime/paging/pager.h"
#include "tests/integration/remote_memd_fixture.h"
#include "tests/integration/test_util.h"
#include "tiermem/tiermem.hpp"

namespace tiermem::testing::groups {

inline constexpr size_t kGroupPage = 4096;

// memd's stats, asked on a connection of the test's own (which counts as a session).
inline remote::ServerStats MemdStatsOf(const MemdProcess& memd) {
  auto ep = remote::ParseEndpoint(memd.url());
  EXPECT_TRUE(ep.ok());
  auto t = remote::MakeTransport(*ep);
  EXPECT_TRUE(t.ok());
  Status s = (*t)->Connect("", 3000);
  EXPECT_TRUE(s.ok()) << s.ToString();
  auto st = (*t)->Stats();
  EXPECT_TRUE(st.ok()) << st.status().ToString();
  (*t)->Close();
  return st.ok() ? *st : remote::ServerStats{};
}

// Sessions memd has now (the test's own connection among them).
inline uint32_t MemdSessions(const MemdProcess& memd) { return MemdStatsOf(memd).sessions; }

// Waits (at most 60 s) until no page in use has fewer copies than asked.
inline bool WaitRepaired(Pager& pager) {
  return testing::WaitFor([&] { return pager.DegradedPagesNow() == 0; }, 60);
}

struct Data {
  uint8_t* base = nullptr;
  size_t pages = 0;
};

// `runs` runs of `pages` patterned pages each (pattern index: run * pages + i), evicted.
inline std::vector<Data> FillAndEvict(Runtime& rt, size_t runs, size_t pages, uint64_t salt = 0) {
  std::vector<Data> out;
  for (size_t r = 0; r < runs; ++r) {
    auto p = rt.Allocate(pages * kGroupPage, Tier::kDram);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (!p.ok()) return out;
    Data d{static_cast<uint8_t*>(*p), pages};
    for (size_t i = 0; i < pages; ++i) FillPage(d.base + i * kGroupPage, salt + r * pages + i);
    auto m = rt.Migrate(d.base, pages * kGroupPage, Tier::kRemote);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (m.ok()) {
      EXPECT_EQ(m->pages_moved, pages);
    }
    out.push_back(d);
  }
  return out;
}

inline size_t BadPages(const std::vector<Data>& data, uint64_t salt = 0) {
  size_t bad = 0;
  for (size_t r = 0; r < data.size(); ++r) {
    for (size_t i = 0; i < data[r].pages; ++i) bad += CheckPage(data[r].base + i * kGroupPage, salt + r * data[r].pages + i) ? 0 : 1;
  }
  return bad;
}

// Evicts single new pages until server `k` is found down (an eviction meets it), at most about
// 60 s (3000 pages).
inline bool EvictUntilDown(Runtime& rt, Pager& pager, size_t k) {
  for (int i = 0; i < 3000 && !pager.server_stats()[k].down; ++i) {
    auto p = rt.Allocate(kGroupPage, Tier::kRemote);
    if (!p.ok()) return false;
    memset(*p, 1, kGroupPage);
    (void)rt.Migrate(*p, kGroupPage, Tier::kRemote);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pager.server_stats()[k].down;
}

// Eight threads read pages of `data` at random, 1500 each (a page read is local after);
// `kill` runs once 4000 reads are done. Returns the reads that found wrong bytes.
inline size_t ReadAtRandomWhile(const std::vector<Data>& data, const std::function<void()>& kill) {
  std::atomic<size_t> reads{0}, bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<uint64_t>(t) * 7919 + 1);
      for (int k = 0; k < 1500; ++k) {
        const size_t r = rng() % data.size(), i = rng() % data[r].pages;
        if (!CheckPage(data[r].base + i * kGroupPage, r * data[r].pages + i)) bad.fetch_add(1);
        reads.fetch_add(1);
      }
    });
  }
  while (reads.load() < 4000) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  kill();
  for (auto& th : threads) th.join();
  return bad.load();
}

}  // namespace tiermem::testing::groups

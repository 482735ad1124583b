// Guest test for the `full` topology (DRAM node 0 + CXL node 1 + soft-RoCE): three-tier GUPS
// under automatic tiering. After warm-up, the hot set must be on node 0 (>= 90% of its pages, by
// Locate), the warm set mostly on the CXL node, the cold rest mostly remote (memd on 10.9.0.2,
// over rdma:// where librdmacm works in the guest, else tcp://). Timings under TCG are not
// hardware timings: only placements, counts and ratios are checked or printed.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "bench/compare_util.h"
#include "runtime/migrator.h"
#include "runtime/runtime_impl.h"
#include "tiermem/tiermem.hpp"

namespace tiermem {
namespace {

constexpr size_t kMiB = 1 << 20;
constexpr int kChunks = 48;        // 48 MiB working set, 1 MiB chunks
constexpr int kHot = 5;            // chunks [0, 5): ~10%, 90% of the updates
constexpr int kWarmEnd = 15;       // chunks [5, 15): ~20%, 9% of the updates
// The rest [15, 48): 1% of the updates.

std::string Env(const char* name, const char* def = "") {
  const char* v = getenv(name);
  return v ? v : def;
}

TEST(TieringFull, ThreeTierGupsPutsHotWarmColdOnTheirTiers) {
  if (Env("QEMU_TOPOLOGY") != "full") GTEST_SKIP() << "not in the QEMU full topology";
  const int cxl_node = atoi(Env("QEMU_CXL_NODE", "1").c_str());
  const std::string host = Env("QEMU_TIERING_MEMD_HOST", "10.9.0.2");
  bench::MemdChild memd;
  ASSERT_TRUE(memd.Start(256 * kMiB, host)) << "could not start tiermem-memd on " << host;

  // Under TCG a round takes hundreds of ms: sample more pages per round than the default.
  setenv("TIERMEM_SAMPLE_PAGES", Env("QEMU_TIERING_SAMPLE_PAGES", "512").c_str(), 1);
  std::unique_ptr<Runtime> rt;
  std::string used;
  for (const char* scheme : {"rdma", "tcp"}) {
    Options o;
    o.dram_limit = 2 * kHot * kMiB;  // DRAM = 2x the hot set
    o.cxl_limit = 12 * kMiB;
    o.remote = memd.Url(scheme);
    auto r = Runtime::Start(o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    if ((*r)->HasTier(Tier::kRemote)) {
      rt = std::move(*r);
      used = scheme;
      break;
    }
    for (auto& s : (*r)->Stats()) {
      if (s.tier == Tier::kRemote) printf("remote over %s unavailable: %s\n", scheme, s.absent_reason.c_str());
    }
  }
  ASSERT_NE(rt, nullptr) << "no remote tier over rdma or tcp";
  ASSERT_TRUE(rt->HasTier(Tier::kCxl)) << "no CXL tier in the full topology";
  printf("remote tier over %s (%s)\n", used.c_str(), memd.Url(used).c_str());

  std::vector<char*> chunks;
  for (int c = 0; c < kChunks; ++c) {
    auto p = rt->Allocate(kMiB, Tier::kRemote);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    chunks.push_back(static_cast<char*>(*p));
  }
  for (char* p : chunks) {
    for (size_t i = 0; i < kMiB; i += 8) *reinterpret_cast<uint64_t*>(p + i) = i;
  }
  const double seconds = atof(Env("QEMU_TIERING_SECONDS", "45").c_str());
  std::mt19937_64 rng(7);
  const uint64_t t0 = bench::NowNs();
  uint64_t updates = 0;
  while (bench::NowNs() - t0 < static_cast<uint64_t>(seconds * 1e9)) {
    for (int k = 0; k < 256; ++k) {
      uint64_t r = rng();
      int pick = static_cast<int>(r % 100);
      int c = pick < 90 ? static_cast<int>((r >> 8) % kHot)
            : pick < 99 ? kHot + static_cast<int>((r >> 8) % (kWarmEnd - kHot))
                        : kWarmEnd + static_cast<int>((r >> 8) % (kChunks - kWarmEnd));
      reinterpret_cast<uint64_t*>(chunks[c])[(r >> 24) % (kMiB / 8)] ^= r;
    }
    updates += 256;
  }
  // Placement, by Locate.
  auto share = [&](int from, int to, auto pred) {
    size_t n = 0, total = 0;
    for (int c = from; c < to; ++c) {
      auto loc = rt->Locate(chunks[c], kMiB);
      EXPECT_TRUE(loc.ok());
      if (!loc.ok()) return 0.0;
      for (auto& l : *loc) n += pred(l), ++total;
    }
    return static_cast<double>(n) / static_cast<double>(total);
  };
  auto on_node0 = [](const PageLocation& l) { return l.resident && l.node == 0; };
  auto on_cxl = [&](const PageLocation& l) { return l.resident && l.node == cxl_node; };
  auto remote = [](const PageLocation& l) { return l.tier == Tier::kRemote; };
  const double hot_dram = share(0, kHot, on_node0);
  const double warm_cxl = share(kHot, kWarmEnd, on_cxl), warm_dram = share(kHot, kWarmEnd, on_node0);
  const double cold_remote = share(kWarmEnd, kChunks, remote), cold_cxl = share(kWarmEnd, kChunks, on_cxl);
  // Where each set's pages are, in detail (for the log).
  for (auto [name, from, to] : {std::tuple{"hot", 0, kHot}, std::tuple{"warm", kHot, kWarmEnd},
                                std::tuple{"cold", kWarmEnd, kChunks}}) {
    size_t n0 = 0, ncxl = 0, nremote = 0, nonres = 0, other = 0, states[4] = {0, 0, 0, 0};
    for (int c = from; c < to; ++c) {
      auto loc = rt->Locate(chunks[c], kMiB);
      if (!loc.ok()) break;
      Region* region = rt->impl()->RegionOf(chunks[c]);
      for (size_t i = 0; i < loc->size(); ++i) {
        const PageLocation& l = (*loc)[i];
        uint8_t st = region->record(region->PageIndex(chunks[c]) + i).state.load();
        states[st & 3]++;
        if (l.tier == Tier::kRemote) ++nremote;
        else if (!l.resident) ++nonres;
        else if (l.node == 0) ++n0;
        else if (l.node == cxl_node) ++ncxl;
        else ++other;
      }
    }
    printf("TIERING_FULL_DETAIL %s: node0 %zu, cxl %zu, remote %zu, local-not-resident %zu, other %zu; "
           "states free/local/remote/inflight %zu/%zu/%zu/%zu\n",
           name, n0, ncxl, nremote, nonres, other, states[0], states[1], states[2], states[3]);
  }
  MigratorStats ms = rt->impl()->migrator()->stats();
  printf("TIERING_FULL_POLICY rounds=%llu migrate_calls=%llu migrate_ms=%.0f round_ms=%.0f failed=%llu deferred=%llu armed=%llu\n",
         static_cast<unsigned long long>(ms.rounds), static_cast<unsigned long long>(ms.migrate_calls),
         static_cast<double>(ms.migrate_ns) / 1e6, static_cast<double>(ms.round_ns) / 1e6,
         static_cast<unsigned long long>(ms.failed), static_cast<unsigned long long>(ms.deferred),
         static_cast<unsigned long long>(ms.pages_armed));
  printf("TIERING_FULL_LAST_ERROR %s\n", ms.last_error.c_str());
  printf("TIERING_FULL remote=%s seconds=%.0f updates=%llu hot_on_node0=%.3f warm_on_cxl=%.3f "
         "warm_on_node0=%.3f cold_remote=%.3f cold_on_cxl=%.3f demotions=%llu promotions=%llu "
         "samples=%llu fault_samples=%llu sampling=%s\n",
         used.c_str(), seconds, static_cast<unsigned long long>(updates), hot_dram, warm_cxl, warm_dram,
         cold_remote, cold_cxl, static_cast<unsigned long long>(ms.demotions),
         static_cast<unsigned long long>(ms.promotions), static_cast<unsigned long long>(ms.samples),
         static_cast<unsigned long long>(ms.fault_samples), ms.mode.c_str());
  EXPECT_GE(hot_dram, 0.90) << "hot-set pages on node 0";
  EXPECT_GE(warm_cxl, 0.50) << "warm pages on the CXL node";
  EXPECT_GE(cold_remote, 0.50) << "cold pages on the remote tier";
  for (char* p : chunks) EXPECT_TRUE(rt->Free(p).ok());
  EXPECT_TRUE(rt->Stop().ok());
}

}  // namespace
}  // namespace tiermem

// Guest test for the `full` topology (DRAM node 0 + CXL node 1 + soft-RoCE): GUPS under automatic
// tiering, on two setups.
// - Three tiers: after warm-up, the hot set must be on node 0 (>= 90% of its pages, by Locate),
//   the warm set on node 0 or the CXL node (below DRAM: CXL rather than remote), the cold rest
//   mostly remote (memd on 10.9.0.2, over rdma:// where librdmacm works in the guest, else tcp://).
// - Two tiers, the kernel's own setup (DRAM + CXL, no remote; `gups --kernel` is the kernel's run
//   of it): the same DRAM budget, the CXL node unbounded; the hot set on node 0 (>= 90%), the
//   cold set mostly on the CXL node.
// Timings under TCG are not hardware timings: only placements, counts and ratios are checked;
// GUPS are printed for the side by side in tiering_full.sh.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "bench/compare_util.h"
#include "bench/gups_three_tier.h"
#include "runtime/tiering/migrator.h"
#include "runtime/core/runtime_impl.h"
#include "tiermem/tiermem.hpp"

namespace tiermem {
namespace {

namespace tt = bench::three_tier;
constexpr size_t kMiB = tt::kChunkBytes;
constexpr int kChunks = tt::kChunks;    // 48 MiB working set, 1 MiB chunks
constexpr int kHot = tt::kHot;          // chunks [0, 5): ~10%, 90% of the updates
constexpr int kWarmEnd = tt::kWarmEnd;  // chunks [5, 15): ~20%, 9% of the updates
// The rest [15, 48): 1% of the updates. The same workload runs without tiermem, under the
// kernel's own tiering, as `tiermem-bench gups --kernel` (tiering_full.sh runs both).

std::string Env(const char* name, const char* def = "") {
  const char* v = getenv(name);
  return v ? v : def;
}

// with_remote: the three-tier setup (DRAM, CXL, remote); else DRAM + CXL only.
void RunGups(bool with_remote) {
  if (Env("QEMU_TOPOLOGY") != "full") GTEST_SKIP() << "not in the QEMU full topology";
  const int cxl_node = atoi(Env("QEMU_CXL_NODE", "1").c_str());
  const std::string host = Env("QEMU_TIERING_MEMD_HOST", "10.9.0.2");
  bench::MemdChild memd;
  if (with_remote) {
    ASSERT_TRUE(memd.Start(256 * kMiB, host)) << "could not start tiermem-memd on " << host;
  }

  // Sampling options for the guest's speed. The guest runs GUPS ~100x slower than the host
  // (tens of thousands of updates per second under TCG) and a migration call costs ~3 ms, so:
  // - the sampling window (the wait between rounds) is 200 ms, not 20: a hot page (~90% of the
  //   updates over 1280 pages) must be touched within one window, or the sampler confirms it
  //   cold and it becomes a demotion victim (with 20 ms, a third of the hot set looked cold);
  // - the heat half-life is 2 s, a few rounds (a round takes 1-3 s here), not 200 ms, so that
  //   heat survives from one round to the next;
  // - 4096 pages per round (the most), so the CXL tier (3072 pages) is swept in two rounds and
  //   DRAM's victims are checked fast enough to keep up with the pages faulted back from remote.
  setenv("TIERMEM_SAMPLE_PAGES", Env("QEMU_TIERING_SAMPLE_PAGES", "4096").c_str(), 1);
  // - on two tiers the workload runs ~10x faster (430k updates/s against 47k: no remote faults),
  //   so in a 200 ms window a warm page (9% of the updates over 2560 pages) is touched ~3 times
  //   and looks as hot as a hot one: the hot set stalled at 0.55 on node 0 behind a DRAM full of
  //   warm pages. A 20 ms window (the runtime's default) touches a warm page ~0.3 times.
  setenv("TIERMEM_SAMPLE_INTERVAL_MS", Env("QEMU_TIERING_INTERVAL_MS", with_remote ? "200" : "20").c_str(), 1);
  setenv("TIERMEM_SAMPLE_HALF_LIFE_MS", Env("QEMU_TIERING_HALF_LIFE_MS", "2000").c_str(), 1);
  std::unique_ptr<Runtime> rt;
  std::string used = "none";
  if (!with_remote) {
    // The kernel's setup: DRAM's budget as in the three-tier run (and as `gups --kernel` leaves
    // above node 0's watermarks), the CXL node with no limit of its own.
    Options o;
    o.Set("dram_limit", 2 * kHot * kMiB);
    auto r = Runtime::Start(o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    rt = std::move(*r);
  }
  for (const char* scheme : {"rdma", "tcp"}) {
    if (!with_remote) break;
    Options o;
    o.Set("dram_limit", 2 * kHot * kMiB);  // DRAM = 2x the hot set
    o.Set("cxl_limit", 12 * kMiB);
    o.Set("remote", memd.Url(scheme));
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
  if (with_remote) printf("remote tier over %s (%s)\n", used.c_str(), memd.Url(used).c_str());

  // The working set starts on the lowest tier; the policy promotes what is hot.
  std::vector<char*> chunks;
  for (int c = 0; c < kChunks; ++c) {
    auto p = rt->Allocate(kMiB, with_remote ? Tier::kRemote : Tier::kCxl);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    chunks.push_back(static_cast<char*>(*p));
  }
  tt::Fill(chunks.data());
  // QEMU_TIERING_TRACE=1: a thread prints the hot set's pages on the remote tier (page records)
  // whenever that count moves by 64 or more, with the policy's round count (diagnosis).
  std::atomic<bool> tracing{Env("QEMU_TIERING_TRACE") == "1"};
  std::thread tracer([&] {
    size_t last = 0;
    const uint64_t t_start = bench::NowNs();
    while (tracing.load()) {
      size_t remote_now = 0;
      for (int c = 0; c < kHot; ++c) {
        Region* region = ImplOf(*rt)->RegionOf(chunks[c]);
        const uint64_t first = region->PageIndex(chunks[c]);
        for (uint64_t i = 0; i < kMiB / 4096; ++i) {
          remote_now += region->record(first + i).state.load() == static_cast<uint8_t>(PageState::kRemote);
        }
      }
      if (remote_now + 64 <= last || remote_now >= last + 64) {
        printf("TIERING_FULL_TRACE t=%.2f hot_remote=%zu rounds=%llu demotions=%llu\n",
               static_cast<double>(bench::NowNs() - t_start) / 1e9, remote_now,
               static_cast<unsigned long long>(ImplOf(*rt)->migrator()->counters().policy_rounds),
               static_cast<unsigned long long>(ImplOf(*rt)->migrator()->counters().demotions));
        fflush(stdout);
        last = remote_now;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  const double seconds = atof(Env("QEMU_TIERING_SECONDS", "45").c_str());
  std::mt19937_64 rng(tt::kSeed);
  const uint64_t t0 = bench::NowNs();
  uint64_t updates = 0;
  const uint64_t progress_ns = static_cast<uint64_t>(atof(Env("QEMU_TIERING_PROGRESS_S", "5").c_str()) * 1e9);
  uint64_t next_progress = t0 + progress_ns;
  // The warm-up lasts `seconds` and at least `min_rounds` policy rounds (the policy converges in
  // rounds, and a round's length follows the host's load under TCG: 0.5-3 s here), at most
  // `max_seconds`. Three tiers: the hot set starts on CXL (relief's victims go there) and comes
  // up at about 36 pages a round, as fast as DRAM's pages are confirmed cold; 0.87 of it was on
  // node 0 after 46 rounds (60 s) in one run, and a CI run with the 30-round floor measured a
  // median of 0.65 (docs/results/NOTES.md, 2026-12-04). Hence 60 rounds.
  const uint64_t min_rounds = strtoull(Env("QEMU_TIERING_MIN_ROUNDS", "60").c_str(), nullptr, 10);
  const double max_seconds = std::max(seconds, atof(Env("QEMU_TIERING_MAX_SECONDS", "180").c_str()));
  const uint64_t rounds0 = ImplOf(*rt)->migrator()->counters().policy_rounds;
  auto warm = [&] {
    const uint64_t dt = bench::NowNs() - t0;
    if (dt >= static_cast<uint64_t>(max_seconds * 1e9)) return true;
    return dt >= static_cast<uint64_t>(seconds * 1e9) &&
           ImplOf(*rt)->migrator()->counters().policy_rounds - rounds0 >= min_rounds;
  };
  for (uint64_t k = 0; (++k & 15) != 0 || !warm();) {
    if (progress_ns > 0 && bench::NowNs() >= next_progress) {
      next_progress += progress_ns;
      size_t n[3] = {0, 0, 0}, tot[3] = {0, 0, 0}, hot_cxl = 0, hot_remote = 0;
      for (int c = 0; c < kChunks; ++c) {
        auto loc = rt->Locate(chunks[c], kMiB);
        if (!loc.ok()) continue;
        const int set = c < kHot ? 0 : c < kWarmEnd ? 1 : 2;
        for (auto& l : *loc) {
          if (set == 0) hot_cxl += l.resident && l.node == cxl_node, hot_remote += l.tier == Tier::kRemote;
          n[set] += set == 0 ? (l.resident && l.node == 0) : set == 1 ? (l.resident && l.node == cxl_node)
                                                                      : l.tier == Tier::kRemote;
          ++tot[set];
        }
      }
      const CounterValues ps = ImplOf(*rt)->migrator()->counters();
      printf("TIERING_FULL_PROGRESS t=%.0fs updates=%llu hot_on_node0=%.3f (cxl %zu, remote %zu) warm_on_cxl=%.3f cold_remote=%.3f "
             "rounds=%llu demotions=%llu promotions=%llu samples=%llu fault_samples=%llu calls=%llu migrate_ms=%.0f\n",
             static_cast<double>(bench::NowNs() - t0) / 1e9, static_cast<unsigned long long>(updates),
             static_cast<double>(n[0]) / static_cast<double>(tot[0]), hot_cxl, hot_remote, static_cast<double>(n[1]) / static_cast<double>(tot[1]),
             static_cast<double>(n[2]) / static_cast<double>(tot[2]), static_cast<unsigned long long>(ps.policy_rounds),
             static_cast<unsigned long long>(ps.demotions), static_cast<unsigned long long>(ps.promotions),
             static_cast<unsigned long long>(ps.samples), static_cast<unsigned long long>(ps.fault_samples),
             static_cast<unsigned long long>(ps.migrate_calls), static_cast<double>(ps.migrate_ns) / 1e6);
      fflush(stdout);
    }
    tt::Update(chunks.data(), rng, 256);
    updates += 256;
  }
  const double warmup_s = static_cast<double>(bench::NowNs() - t0) / 1e9;
  const uint64_t warmup_rounds = ImplOf(*rt)->migrator()->counters().policy_rounds - rounds0;
  // The measured window, after the warm-up: GUPS (a TCG guest's rate: report it as a ratio to
  // the all-DRAM run of the same guest, which tiering_full.sh takes from `gups --kernel`).
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
  const double measure_s = atof(Env("QEMU_TIERING_MEASURE_SECONDS", "15").c_str());
  const uint64_t t_measure = bench::NowNs();
  uint64_t measured = 0, locate_ns = 0;
  // The hot set's share on node 0, once a second through the measured window: the check is on
  // the median, so one round that briefly demoted hot pages (seen in the progress lines, e.g.
  // 0.47 for one 5 s step before 1.00 again) does not decide the test.
  std::vector<double> hot_samples;
  uint64_t next_sample = t_measure + 1000000000ull;
  while (bench::NowNs() - t_measure < static_cast<uint64_t>(measure_s * 1e9)) {
    tt::Update(chunks.data(), rng, 256);
    measured += 256;
    if (bench::NowNs() >= next_sample) {
      const uint64_t l0 = bench::NowNs();
      hot_samples.push_back(share(0, kHot, on_node0));
      locate_ns += bench::NowNs() - l0;
      next_sample += 1000000000ull;
    }
  }
  const double measured_s = static_cast<double>(bench::NowNs() - t_measure - locate_ns) / 1e9;
  const double gups = static_cast<double>(measured) / measured_s / 1e9;
  const double hot_dram = share(0, kHot, on_node0);
  hot_samples.push_back(hot_dram);
  std::vector<double> sorted = hot_samples;
  std::sort(sorted.begin(), sorted.end());
  const double hot_median = sorted[sorted.size() / 2];
  printf("TIERING_FULL_HOT samples=%zu min=%.3f median=%.3f max=%.3f at_end=%.3f\n", sorted.size(),
         sorted.front(), hot_median, sorted.back(), hot_dram);
  const double warm_cxl = share(kHot, kWarmEnd, on_cxl), warm_dram = share(kHot, kWarmEnd, on_node0);
  const double cold_remote = share(kWarmEnd, kChunks, remote), cold_cxl = share(kWarmEnd, kChunks, on_cxl);
  // Where each set's pages are, in detail (for the log).
  for (auto [name, from, to] : {std::tuple{"hot", 0, kHot}, std::tuple{"warm", kHot, kWarmEnd},
                                std::tuple{"cold", kWarmEnd, kChunks}}) {
    size_t n0 = 0, ncxl = 0, nremote = 0, nonres = 0, other = 0, states[4] = {0, 0, 0, 0};
    for (int c = from; c < to; ++c) {
      auto loc = rt->Locate(chunks[c], kMiB);
      if (!loc.ok()) break;
      Region* region = ImplOf(*rt)->RegionOf(chunks[c]);
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
  tracing.store(false);
  tracer.join();
  const CounterValues ms = ImplOf(*rt)->migrator()->counters();
  printf("TIERING_FULL_POLICY rounds=%llu migrate_calls=%llu migrate_ms=%.0f round_ms=%.0f failed=%llu deferred=%llu armed=%llu\n",
         static_cast<unsigned long long>(ms.policy_rounds), static_cast<unsigned long long>(ms.migrate_calls),
         static_cast<double>(ms.migrate_ns) / 1e6, static_cast<double>(ms.policy_round_ns) / 1e6,
         static_cast<unsigned long long>(ms.moves_failed), static_cast<unsigned long long>(ms.moves_deferred),
         static_cast<unsigned long long>(ms.pages_armed));
  printf("TIERING_FULL_LAST_ERROR %s\n", ImplOf(*rt)->migrator()->stats().last_error.c_str());
  printf("TIERING_FULL tiers=%d remote=%s warmup_seconds=%.0f warmup_rounds=%llu updates=%llu hot_on_node0=%.3f warm_on_cxl=%.3f "
         "warm_on_node0=%.3f cold_remote=%.3f cold_on_cxl=%.3f demotions=%llu promotions=%llu "
         "samples=%llu fault_samples=%llu sampling=%s\n",
         with_remote ? 3 : 2, used.c_str(), warmup_s, static_cast<unsigned long long>(warmup_rounds),
         static_cast<unsigned long long>(updates), hot_dram, warm_cxl, warm_dram,
         cold_remote, cold_cxl, static_cast<unsigned long long>(ms.demotions),
         static_cast<unsigned long long>(ms.promotions), static_cast<unsigned long long>(ms.samples),
         static_cast<unsigned long long>(ms.fault_samples), ImplOf(*rt)->migrator()->stats().mode.c_str());
  if (const char* path = getenv("QEMU_TIERING_JSON")) {
    if (FILE* f = fopen(path, "w")) {
      fprintf(f, "{\"mode\": \"tiermem\", \"tiers\": %d, \"remote\": \"%s\", \"warmup_seconds\": %.0f, \"warmup_rounds\": %llu, \"seconds\": %.1f, "
              "\"updates\": %llu, \"gups\": %.9f, \"hot_on_node0\": %.4f, \"hot_on_node0_median\": %.4f, "
              "\"hot_on_node0_min\": %.4f, \"warm_on_cxl\": %.4f, "
              "\"warm_on_node0\": %.4f, \"cold_remote\": %.4f, \"cold_on_cxl\": %.4f, \"demotions\": %llu, "
              "\"promotions\": %llu, \"rounds\": %llu, \"migrate_calls\": %llu, \"migrate_ms\": %.0f, \"round_ms\": %.0f, "
              "\"sample_pages\": %s, \"interval_ms\": %s, \"half_life_ms\": %s}\n",
              with_remote ? 3 : 2, used.c_str(), warmup_s, static_cast<unsigned long long>(warmup_rounds), measured_s,
              static_cast<unsigned long long>(measured), gups, hot_dram, hot_median, sorted.front(),
              warm_cxl, warm_dram, cold_remote, cold_cxl, static_cast<unsigned long long>(ms.demotions),
              static_cast<unsigned long long>(ms.promotions), static_cast<unsigned long long>(ms.policy_rounds),
              static_cast<unsigned long long>(ms.migrate_calls), static_cast<double>(ms.migrate_ns) / 1e6,
              static_cast<double>(ms.policy_round_ns) / 1e6, getenv("TIERMEM_SAMPLE_PAGES"),
              getenv("TIERMEM_SAMPLE_INTERVAL_MS"), getenv("TIERMEM_SAMPLE_HALF_LIFE_MS"));
      fclose(f);
    }
  }
  EXPECT_GE(hot_median, 0.90) << "hot-set pages on node 0 (median over the measured window)";
  const double warm_remote = share(kHot, kWarmEnd, remote);
  printf("TIERING_FULL_WARM on_node0=%.3f on_cxl=%.3f remote=%.3f (ideal about 0.5 / 0.5 / 0)\n",
         warm_dram, warm_cxl, warm_remote);
  if (!with_remote) {
    // Nothing can go remote; below DRAM is the CXL node.
    EXPECT_EQ(cold_remote + warm_remote, 0.0) << "pages on a remote tier that was not configured";
    EXPECT_GE(cold_cxl, 0.40) << "cold pages below DRAM (on the CXL node)";
    for (char* p : chunks) EXPECT_TRUE(rt->Free(p).ok());
    EXPECT_TRUE(rt->Stop().ok());
    return;
  }
  // Below DRAM: all three tiers are in use, the warm set below DRAM is mostly on the CXL node,
  // and most of the cold set is below DRAM (on the CXL node or remote). How much of the warm set
  // stays in DRAM is printed, not asserted: DRAM's budget (2x the hot set) leaves room for half
  // of it beside the hot set, but DRAM runs over its budget in the guest (the workload faults
  // cold pages back faster than the guest's migration calls take them out; docs/tiering.md).
  // Of the warm pages below DRAM, most are on the CXL node rather than remote: since a DRAM
  // victim may take the CXL place of a colder page (docs/tiering.md), 0.75 of the warm set was
  // on the CXL node and none remote (before, 0.26-0.53 and 0.08-0.31).
  // The split is asserted where at least a fifth of the warm set is below DRAM: on a less loaded
  // host the workload ran 6x faster, DRAM held 0.92 of the warm set (2.5x over its budget), and
  // the 0.08 below it split 0.040 CXL / 0.041 remote, a ratio of a few hundred pages that says
  // nothing about where the policy puts warm pages.
  if (warm_cxl + warm_remote >= 0.2) {
    EXPECT_GE(warm_cxl, 0.5 * (warm_cxl + warm_remote)) << "warm pages below DRAM went remote rather than to CXL";
  } else {
    printf("TIERING_FULL_WARM only %.3f of the warm set below DRAM: its CXL/remote split not checked\n",
           warm_cxl + warm_remote);
  }
  EXPECT_GT(warm_cxl + cold_cxl, 0.0) << "no page of the working set on the CXL node";
  EXPECT_GT(cold_remote + warm_remote, 0.0) << "no page of the working set on the remote tier";
  // DRAM itself ran up to 2.2x over its budget in such runs (cold pages faulted back in), so
  // this bound is loose: 0.57-0.91 of the cold set was below DRAM across runs.
  EXPECT_GE(cold_remote + cold_cxl, 0.40) << "cold pages below DRAM (CXL node or remote)";
  for (char* p : chunks) EXPECT_TRUE(rt->Free(p).ok());
  EXPECT_TRUE(rt->Stop().ok());
}

TEST(TieringFull, ThreeTierGupsPutsHotWarmColdOnTheirTiers) { RunGups(/*with_remote=*/true); }

// The kernel's own tiering has two tiers here (node 0 and the CXL node); tiermem on the same two,
// with the same DRAM budget, is the like-for-like comparison (tiering_full.sh prints both).
TEST(TieringFull, TwoTierGupsOnTheKernelsSetup) { RunGups(/*with_remote=*/false); }

}  // namespace
}  // namespace tiermem

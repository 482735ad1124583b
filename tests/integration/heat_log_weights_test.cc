// The weights the heat log records (runtime/tiering/heat_log.h, migrator.cc): with the write scan
// and protection sampling (what `tiermem advise` records with), a page read in every round must
// sum to about one page-round per round, however many other pages the scan finds written.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "base/os_pagemap.h"
#include "remote_memd_fixture.h"
#include "runtime/core/runtime_impl.h"
#include "runtime/tiering/heat_log.h"
#include "runtime/tiering/migrator.h"
#include "runtime/tiering/scan_tracker.h"
#include "test_util.h"
#include "tiermem/tiermem.hpp"

namespace tiermem {
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kPages = 1024;   // each test's pages
std::atomic<uint64_t> g_sink{0};  // the reads' sum, so that they are made

// The log's rounds: each round's entries (the layout of heat_log.h).
std::vector<std::vector<HeatLog::Entry>> ReadRounds(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  f.seekg(16);
  std::vector<std::vector<HeatLog::Entry>> rounds;
  HeatLog::RoundHeader h;
  while (f.read(reinterpret_cast<char*>(&h), sizeof(h))) {
    std::vector<HeatLog::Entry> e(h.entries);
    if (!f.read(reinterpret_cast<char*>(e.data()), static_cast<std::streamsize>(h.entries * sizeof(HeatLog::Entry)))) break;
    rounds.push_back(std::move(e));
  }
  return rounds;
}

// The read pages' sampled page-rounds per read page per round, over the rounds of the log that
// `counted` takes (by the pages the write scan saw in [first, first + pages), and the read pages' sampled
// weight in the round); the rounds in *n.
template <typename Counted>
double ReadPageRounds(const std::string& path, uint64_t first, uint64_t pages, bool (*is_read)(uint64_t), Counted counted,
                      size_t* n) {
  double read_weight = 0;
  uint64_t read_pages = 0;
  for (uint64_t i = 0; i < pages; ++i) read_pages += is_read(i);
  *n = 0;
  for (const std::vector<HeatLog::Entry>& round : ReadRounds(path)) {
    size_t scanned = 0;
    double reads = 0;
    for (const HeatLog::Entry& e : round) {
      if (e.page < first || e.page >= first + pages) continue;
      if ((e.flags & HeatLog::kScan) != 0) ++scanned;
      if (is_read(e.page - first) && (e.flags & HeatLog::kScan) == 0) reads += e.weight;
    }
    if (!counted(scanned, reads)) continue;
    read_weight += reads;
    ++*n;
  }
  return *n == 0 ? 0 : read_weight / static_cast<double>(read_pages * *n);
}

// Allocates `pages` pages, fills them, and runs `pass` over them on a thread of its own, again
// and again, until the sampler has caught `samples` accesses (at most two minutes); then checks
// the bytes and frees them. Returns the first page's key (address / page size), 0 on failure.
uint64_t DriveUntilSampled(Runtime& rt, Migrator* m, size_t pages, uint64_t samples, void (*pass)(volatile char*)) {
  auto p = rt.Allocate(pages * kPage, Tier::kDram);
  if (!p.ok()) {
    ADD_FAILURE() << p.status().ToString();
    return 0;
  }
  char* base = static_cast<char*>(*p);
  testing::FillPattern(base, pages * kPage, pages);
  std::atomic<bool> stop{false};
  std::thread worker([&] {
    while (!stop.load(std::memory_order_relaxed)) pass(base);
  });
  const bool enough = testing::WaitFor([&] { return m->counters().samples >= samples; }, 120);
  stop = true;
  worker.join();
  const CounterValues c = m->counters();
  EXPECT_EQ(testing::CheckPattern(base, pages * kPage, pages), SIZE_MAX);
  EXPECT_TRUE(rt.Free(base).ok());
  EXPECT_TRUE(enough) << "samples " << c.samples << " in " << c.policy_rounds << " rounds, sample skips "
                      << c.track_sample_skips;
  return enough ? reinterpret_cast<uintptr_t>(base) / kPage : 0;
}

// 1024 pages: pages 4k and 4k+1 written all the time, 4k+2 read all the time, 4k+3 left alone.
// The sample (64 pages a round) can arm only the 512 pages the scan finds unwritten, so each
// sampled read stands for 512 / 64 = 8 pages: the read pages' sampled weight, summed over a
// round, is their number (each is read every round). Weighing a sample by every candidate
// (1024 / 64 = 16) would count each read twice.
TEST(HeatLogWeights, AReadPageSumsToOnePageRoundPerRound) {
  StatusOr<ScanTracker::Mechanism> mech = ScanTracker::Choose(os::ProbeTracking());
  if (!mech.ok()) GTEST_SKIP() << mech.status().ToString();
  const std::string path = "/tmp/heat_log_weights_test." + std::to_string(getpid()) + ".heat";
  Options o;
  o.Set("track", "scan").Set("sample_mode", "protect").Set("sample_pages", 64);
  o.Set("sample_interval_ms", 25).Set("heat_log", path);
  auto rt = Runtime::Start(o);
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  Migrator* m = ImplOf(**rt)->migrator();
  // 256 read pages, about 32 of them sampled a round: some 60 sampled rounds.
  const uint64_t first = DriveUntilSampled(**rt, m, kPages, 2000, [](volatile char* v) {
    for (size_t i = 0; i < kPages; i += 4) {
      v[i * kPage] = v[i * kPage];  // the same byte again: written, the pattern kept
      v[(i + 1) * kPage] = v[(i + 1) * kPage];
      g_sink += static_cast<unsigned char>(v[(i + 2) * kPage]);
    }
  });
  ASSERT_TRUE((*rt)->Stop().ok());
  ASSERT_NE(first, 0u);
  size_t rounds = 0;
  // Rounds whose scan saw the written half (the first scan sees every page written once).
  const double per_page_round = ReadPageRounds(
      path, first, kPages, [](uint64_t i) { return i % 4 == 2; },
      [](size_t scanned, double) { return scanned > 0 && scanned <= kPages / 2; }, &rounds);
  std::remove(path.c_str());
  ASSERT_GE(rounds, 20u);
  // Page-rounds per read page per round: 1 when the weights stand for the pages they could
  // have been drawn from. A loaded machine can starve the worker in a round (fewer pages seen
  // written, fewer reads): rounds of 25 ms make that rarer, and the bounds allow it, not a
  // weight twice or half its due.
  std::printf("protect: %.3f sampled page-rounds a read page a round over %zu rounds\n", per_page_round, rounds);
  EXPECT_GT(per_page_round, 0.6) << rounds << " rounds";
  EXPECT_LT(per_page_round, 1.3) << rounds << " rounds";
}

// Soft-eviction sampling (uffd, what the record of a program with its own SIGSEGV handler uses):
// no write scan, a DRAM limit no program reaches (the soft sampler arms only pages the pager
// manages). 1024 pages, the even ones read all the time, the odd ones left alone: every read
// page sums to about one page-round a round. Under the carried watch a page caught in use
// stayed out of the sample for 25 confirmation times and untouched pages stayed armed, so the
// read pages were sampled rarely and each sample weighed live / (fresh + carried) pages.
// Prefetch off, as the advisor's record has it: a fault fetching ahead along the reader's stride
// brings armed pages back before their touch, which the sampler then never sees. Rounds of
// 25 ms: a reader starved for a scheduler's slice or two still reads every page in a round.
TEST(HeatLogWeights, SoftSamplingWithAHeatLogSamplesEveryPageAlike) {
  testing::MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "64M"})) << memd.Log();
  const std::string path = "/tmp/heat_log_weights_test.uffd." + std::to_string(getpid()) + ".heat";
  setenv("TIERMEM_SAMPLE_MODE", "uffd", 1);  // read at the start, as a program's would be
  Options o;
  o.Set("dram_limit", "1G").Set("remote", memd.url()).Set("sample_pages", 64).Set("prefetch", "off");
  o.Set("sample_interval_ms", 25).Set("heat_log", path);
  auto rt = Runtime::Start(o);
  unsetenv("TIERMEM_SAMPLE_MODE");
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  Migrator* m = ImplOf(**rt)->migrator();
  if (m->stats().mode != "uffd") GTEST_SKIP() << "soft eviction is not available here: " << m->stats().mode;
  const uint64_t first = DriveUntilSampled(**rt, m, kPages, 3000, [](volatile char* v) {
    for (size_t i = 0; i < kPages; i += 2) g_sink += static_cast<unsigned char>(v[i * kPage]);
  });
  ASSERT_TRUE((*rt)->Stop().ok());
  ASSERT_NE(first, 0u);
  size_t rounds = 0;
  // Every round after the first ten (the fill's, and the sampler's start) in which the reader
  // ran: a loaded machine can starve it for whole rounds (nothing touched, nothing to see), and
  // those say nothing of the weights. Where it ran, about half the 64 pages armed are read
  // ones, so a round with none sampled is a starved one.
  size_t seen = 0;
  const double per_page_round = ReadPageRounds(
      path, first, kPages, [](uint64_t i) { return i % 2 == 0; },
      [&seen](size_t, double reads) { return ++seen > 10 && reads > 0; }, &rounds);
  std::remove(path.c_str());
  ASSERT_GE(rounds, 20u);
  std::printf("uffd: %.3f sampled page-rounds a read page a round over %zu rounds\n", per_page_round, rounds);
  EXPECT_GT(per_page_round, 0.6) << rounds << " rounds";
  EXPECT_LT(per_page_round, 1.3) << rounds << " rounds";
}

}  // namespace
}  // namespace tiermem

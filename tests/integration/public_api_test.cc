// What bench/ and tools/ use instead of the runtime's internals: Options::Set (the option table's
// one route), Pin/Unpin, Counters, GetProperty, PageNodes and RemoteClient, each checked against
// what the test did.
#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <signal.h>

#include "tests/integration/remote_memd_fixture.h"
#include "tiermem/options.hpp"
#include "tiermem/remote.hpp"
#include "tiermem/tiermem.hpp"
#include "tiermem/topology.hpp"

namespace tiermem {
namespace {

using testing::CheckPage;
using testing::FillPage;
using testing::MemdProcess;

constexpr size_t kPage = 4096;

TEST(PublicOptions, SetTakesEitherNameAndAnyCase) {
  Options o;
  o.Set("dram_limit", "1M").Set("TIERMEM_REGION_SIZE", "128M").Set("Log", "error");
  ASSERT_TRUE(o.status().ok()) << o.status().ToString();
  ASSERT_EQ(o.values().size(), 3u);
  EXPECT_EQ(o.values()[0].first, "TIERMEM_DRAM_LIMIT");
  EXPECT_EQ(o.values()[1].first, "TIERMEM_REGION_SIZE");
  auto rt = Runtime::Start(o);
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  // The limit reached the same table the environment fills: 2 MiB does not fit in 1 MiB.
  EXPECT_EQ((*rt)->Allocate(2 << 20, Tier::kDram).status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE((*rt)->Allocate(512 << 10, Tier::kDram).ok());
}

TEST(PublicOptions, UnknownNameAndBadValueFailStartNamingThem) {
  Options unknown;
  unknown.Set("dram_limt", "1G");
  auto r1 = Runtime::Start(unknown);
  ASSERT_FALSE(r1.ok());
  EXPECT_EQ(r1.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r1.status().message().find("dram_limt"), std::string::npos) << r1.status().ToString();

  Options bad;
  bad.Set("dram_limit", "lots");
  auto r2 = Runtime::Start(bad);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("TIERMEM_DRAM_LIMIT"), std::string::npos) << r2.status().ToString();
  EXPECT_NE(r2.status().message().find("lots"), std::string::npos);
}

TEST(PublicOptions, NumbersAndBooleansAreWrittenAsTheEnvironmentWould) {
  Options o;
  o.Set("dram_limit", uint64_t{3} << 20).Set("allow_fallback", true).Set("sample_pages", 32);
  ASSERT_TRUE(o.status().ok());
  EXPECT_EQ(o.values()[0].second, std::to_string(3 << 20));
  EXPECT_EQ(o.values()[1].second, "1");
  EXPECT_EQ(o.values()[2].second, "32");
}

TEST(PublicOptions, TableListsEveryVariableWithItsDefault) {
  std::vector<OptionInfo> table = OptionTable();
  ASSERT_FALSE(table.empty());
  bool found = false;
  for (const OptionInfo& i : table) {
    EXPECT_EQ(i.name.rfind("TIERMEM_", 0), 0u) << i.name;
    EXPECT_FALSE(i.help.empty()) << i.name;
    if (i.name == "TIERMEM_REGION_SIZE") {
      found = true;
      EXPECT_EQ(i.kind, "size");
      EXPECT_EQ(i.default_value, "64G");
    }
  }
  EXPECT_TRUE(found);
  uint64_t v = 0;
  EXPECT_TRUE(ParseSize(std::string_view("1.5G"), &v));
  EXPECT_EQ(v, 3ull << 29);
  EXPECT_FALSE(ParseSize(std::string_view("12Q"), &v));
}

TEST(PublicRuntime, PinAcceptsOnlyTheStartOfALiveAllocation) {
  auto rt = Runtime::Start();
  ASSERT_TRUE(rt.ok());
  auto p = (*rt)->Allocate(4 * kPage, Tier::kDram);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE((*rt)->Pin(*p).ok());
  EXPECT_TRUE((*rt)->Unpin(*p).ok());
  EXPECT_EQ((*rt)->Pin(static_cast<char*>(*p) + kPage).code(), StatusCode::kInvalidArgument);
  int local = 0;
  EXPECT_EQ((*rt)->Pin(&local).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE((*rt)->Free(*p).ok());
  EXPECT_EQ((*rt)->Unpin(*p).code(), StatusCode::kInvalidArgument);
}

TEST(PublicRuntime, PropertiesAnswerKnownNamesOnly) {
  auto rt = Runtime::Start();
  ASSERT_TRUE(rt.ok());
  std::string v = "untouched";
  EXPECT_FALSE((*rt)->GetProperty("tiermem.no-such-thing", &v));
  EXPECT_EQ(v, "untouched");
  ASSERT_TRUE((*rt)->GetProperty("tiermem.stats", &v));
  EXPECT_NE(v.find("dram"), std::string::npos) << v;
  ASSERT_TRUE((*rt)->GetProperty("tiermem.counters.json", &v));
  EXPECT_EQ(v.front(), '{');
  EXPECT_EQ(v.back(), '}');
  EXPECT_NE(v.find("\"remote_faults\":0"), std::string::npos) << v;
  ASSERT_TRUE((*rt)->GetProperty("tiermem.sampling-mode", &v));
  EXPECT_EQ(v, "off");  // no budget: no policy thread
}

TEST(PublicRuntime, PageNodesFindsTouchedPagesAndNotUntouchedOnes) {
  std::vector<char> touched(16 * kPage, 1);
  std::vector<int> nodes = PageNodes(touched.data() + kPage - reinterpret_cast<uintptr_t>(touched.data()) % kPage, 8 * kPage);
  ASSERT_EQ(nodes.size(), 8u);
  for (int n : nodes) EXPECT_GE(n, 0);
  auto rt = Runtime::Start();
  ASSERT_TRUE(rt.ok());
  auto p = (*rt)->Allocate(8 * kPage, Tier::kDram);
  ASSERT_TRUE(p.ok());
  for (int n : PageNodes(*p, 8 * kPage)) EXPECT_LT(n, 0);  // never touched: not resident
}

TEST(PublicRemote, CountersFollowEvictionsAndFaults) {
  MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "64M", "--no-rdma"}, "tok"));
  auto rt = testing::StartRemoteRuntime(memd.url(), "tok", "off");  // one fault per page read
  ASSERT_NE(rt, nullptr);
  constexpr size_t kPages = 256;
  uint8_t* base = testing::AllocateFilledPages(*rt, kPages);
  ASSERT_NE(base, nullptr);
  const RuntimeCounters c0 = rt->Counters();
  ASSERT_TRUE(rt->Migrate(base, kPages * kPage, Tier::kRemote).ok());
  const RuntimeCounters c1 = rt->Counters();
  EXPECT_EQ(c1.pages_evicted - c0.pages_evicted, kPages);
  EXPECT_EQ(c1.pages_written - c0.pages_written, kPages);
  ASSERT_EQ(c1.servers.size(), 1u);
  EXPECT_TRUE(c1.servers[0].connected);
  EXPECT_EQ(c1.servers[0].pages, kPages);
  for (size_t i = 0; i < kPages / 2; ++i) ASSERT_TRUE(CheckPage(base + i * kPage, i));
  const RuntimeCounters c2 = rt->Counters();
  EXPECT_EQ(c2.remote_faults - c1.remote_faults, kPages / 2);
  EXPECT_EQ(c2.servers[0].remote_faults, kPages / 2);
}

// TIERMEM_PREFETCH=auto (the default): a thread reading evicted pages in order, forwards or
// backwards by a stride, takes a fault for a few pages in each window only; pages read at
// random fetch next to nothing ahead. Every page comes back intact either way.
TEST(PublicRemote, PrefetchingFollowsSequentialAndStridedReads) {
  MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "64M", "--no-rdma"}, "tok"));
  auto rt = testing::StartRemoteRuntime(memd.url(), "tok");
  ASSERT_NE(rt, nullptr);
  constexpr size_t kPages = 2048;
  uint8_t* base = testing::AllocateFilledPages(*rt, kPages);
  ASSERT_NE(base, nullptr);
  auto read_back = [&](const std::vector<size_t>& order, uint64_t* faults, uint64_t* ahead) {
    ASSERT_TRUE(rt->Migrate(base, kPages * kPage, Tier::kRemote).ok());
    const RuntimeCounters c0 = rt->Counters();
    size_t bad = 0;
    for (size_t i : order) bad += CheckPage(base + i * kPage, i) ? 0 : 1;
    EXPECT_EQ(bad, 0u);
    const RuntimeCounters c1 = rt->Counters();
    *faults = c1.remote_faults - c0.remote_faults;
    *ahead = c1.pages_prefetched - c0.pages_prefetched;
  };
  std::vector<size_t> seq, stride, random;
  for (size_t i = 0; i < kPages; ++i) seq.push_back(i);
  for (size_t i = kPages; i-- > 0;) {
    if (i % 3 == 0) stride.push_back(i);  // every third page, downwards
  }
  random = seq;
  std::shuffle(random.begin(), random.end(), std::mt19937_64(5));
  uint64_t faults = 0, ahead = 0;
  read_back(seq, &faults, &ahead);
  EXPECT_LT(faults, kPages / 16) << "prefetched " << ahead;
  EXPECT_GE(faults + ahead, kPages) << "every page read came back by a fault or ahead of one";
  read_back(stride, &faults, &ahead);
  EXPECT_LT(faults, stride.size() / 8) << "prefetched " << ahead;
  EXPECT_GE(faults + ahead, stride.size());
  read_back(random, &faults, &ahead);
  EXPECT_GE(faults + ahead, kPages);
  EXPECT_LT(ahead, kPages / 20) << "random reads have no trend";
  (void)rt->Free(base);
}

TEST(PublicRemote, ClientWritesAndReadsPagesAndReportsTheServer) {
  MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "16M", "--no-rdma"}, "tok"));
  auto denied = RemoteClient::Connect(memd.url(), "wrong", 2000);
  EXPECT_FALSE(denied.ok());
  auto c = RemoteClient::Connect(memd.url(), "tok", 2000);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  constexpr size_t kPages = 100;
  auto r = (*c)->Allocate(kPages);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<uint8_t> out(kPages * kPage), in(kPages * kPage);
  for (size_t i = 0; i < kPages; ++i) FillPage(&out[i * kPage], i);
  ASSERT_TRUE((*c)->Write(*r, r->first, out.data(), kPages, 16).ok());
  ASSERT_TRUE((*c)->Read(*r, r->first, in.data(), kPages, 16).ok());
  EXPECT_EQ(memcmp(in.data(), out.data(), in.size()), 0);
  std::vector<uint8_t> one(kPage);
  ASSERT_TRUE((*c)->Read(*r, r->first + 42, one.data(), 1, 1).ok());
  EXPECT_TRUE(CheckPage(one.data(), 42));
  // Outside the range: refused before anything is sent.
  EXPECT_EQ((*c)->Read(*r, r->first + kPages, one.data(), 1, 1).code(), StatusCode::kInvalidArgument);
  auto st = (*c)->ServerStats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->capacity_pages, (16u << 20) / kPage);
  EXPECT_GE(st->session_pages, kPages);
  EXPECT_TRUE((*c)->Free(*r).ok());
}

TEST(PublicRemote, FaultFloorTimesEveryTouch) {
  // The floor of remote-fault's report: one time per touch, every touch a fault that the bare
  // handler served (a touch it never served would hang here: ctest's timeout).
  auto none = MeasureFaultFloor(0);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->empty());
  constexpr size_t kFaults = 300;
  auto ns = MeasureFaultFloor(kFaults);
  if (!ns.ok() && (ns.status().code() == StatusCode::kPermissionDenied ||
                   ns.status().code() == StatusCode::kNotSupported)) {
    GTEST_SKIP() << "no userfaultfd here: " << ns.status().ToString();
  }
  ASSERT_TRUE(ns.ok()) << ns.status().ToString();
  ASSERT_EQ(ns->size(), kFaults);
  EXPECT_EQ(std::count(ns->begin(), ns->end(), uint64_t{0}), 0) << "a fault takes a system call's time at least";
}


TEST(PublicRemote, SignalFloorTimesEveryTouchAndGivesSigbusBack) {
  // The signal path's floor: every touch served on the touching thread (a touch it never served
  // would die of SIGBUS here), and SIGBUS's action the one before it afterwards.
  struct sigaction before{};
  ASSERT_EQ(sigaction(SIGBUS, nullptr, &before), 0);
  constexpr size_t kFaults = 300;
  auto ns = MeasureSignalFaultFloor(kFaults);
  if (!ns.ok() && (ns.status().code() == StatusCode::kPermissionDenied ||
                   ns.status().code() == StatusCode::kNotSupported)) {
    GTEST_SKIP() << "no userfaultfd with UFFD_FEATURE_SIGBUS here: " << ns.status().ToString();
  }
  ASSERT_TRUE(ns.ok()) << ns.status().ToString();
  ASSERT_EQ(ns->size(), kFaults);
  EXPECT_EQ(std::count(ns->begin(), ns->end(), uint64_t{0}), 0) << "a fault takes a system call's time at least";
  struct sigaction after{};
  ASSERT_EQ(sigaction(SIGBUS, nullptr, &after), 0);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
  EXPECT_EQ(after.sa_flags & SA_SIGINFO, before.sa_flags & SA_SIGINFO);
}

}  // namespace
}  // namespace tiermem

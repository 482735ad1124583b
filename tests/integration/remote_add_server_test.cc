// Memory servers that join the list while the process runs: through Runtime::AddRemoteServer
// and through the servers file (TIERMEM_REMOTE_FILE), which the repair thread reads again once
// a second. A server added takes new pages once it answers, including the copies that restore
// replicas lost with another server; one taken out of the file takes no new pages while its
// pages still read back. Bad input is refused with the reason and changes nothing.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/core/runtime_impl.h"
#include "runtime/paging/pager.h"
#include "runtime/paging/server_file.h"
#include "tests/integration/remote_groups_util.h"
#include "tests/integration/remote_memd_fixture.h"
#include "tests/integration/test_util.h"
#include "tiermem/stats.hpp"
#include "tiermem/tiermem.hpp"

namespace tiermem {
namespace {

using testing::MemdProcess;
using namespace testing::groups;  // NOLINT: the helpers of remote_groups_util.h

// Polls `done` for at most 10 s.
bool WaitFor(const std::function<bool()>& done) { return testing::WaitFor(done, 60); }

// Waits for two passes of the repair thread (a loaded machine makes them later), so what it
// could not do is seen not done, rather than not yet tried.
bool WaitRepairPasses(Pager& pager) {
  const uint64_t passes = pager.stats().repair_passes;
  return WaitFor([&] { return pager.stats().repair_passes >= passes + 2; });
}

bool Connected(Pager& pager, size_t k) {
  auto st = pager.server_stats();
  return k < st.size() && st[k].connected && !st[k].down;
}

// Writes `text` to `path` whole (a new file renamed over the old one, as the option's help says).
void WriteWhole(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".new";
  std::ofstream(tmp) << text;
  ASSERT_EQ(rename(tmp.c_str(), path.c_str()), 0);
}

TEST(RemoteServers, AServerAddedWhileRunningTakesTheNewPagesTheFirstHasNoRoomFor) {
  if (MemdProcess::Scheme() != "tcp") GTEST_SKIP() << "TCP covers it";
  MemdProcess a, b;
  ASSERT_TRUE(a.Start({"--capacity", "8M", "--no-rdma"}));
  ASSERT_TRUE(b.Start({"--capacity", "64M", "--no-rdma"}));
  auto rt = testing::StartRemoteRuntime(a.url(), "", "off");
  ASSERT_NE(rt, nullptr);
  Pager& pager = *ImplOf(*rt)->pager();
  std::vector<Data> data = FillAndEvict(*rt, 1, 1024);  // 4 MiB of a's 8
  ASSERT_EQ(data.size(), 1u);

  // Refused, changing nothing: a malformed address, and one listed already.
  Status bad = rt->AddRemoteServer("carrier-pigeon://a:1");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument) << bad.ToString();
  Status again = rt->AddRemoteServer(a.url());
  EXPECT_EQ(again.code(), StatusCode::kInvalidArgument) << again.ToString();
  EXPECT_NE(again.message().find("listed already"), std::string::npos) << again.ToString();
  ASSERT_EQ(pager.server_stats().size(), 1u);

  ASSERT_TRUE(rt->AddRemoteServer(b.url()).ok());
  ASSERT_EQ(pager.server_stats().size(), 2u);
  ASSERT_TRUE(WaitFor([&] { return Connected(pager, 1); })) << "b was not connected";
  // The stats block (tiermemctl stat) lists it too (up before it is usable).
  StatusOr<ProcessStats> ps = ReadProcessStats(getpid());
  ASSERT_TRUE(ps.ok()) << ps.status().ToString();
  ASSERT_EQ(ps->servers.size(), 2u);
  EXPECT_EQ(ps->servers[1].address, b.url());
  EXPECT_TRUE(ps->servers[1].up);

  // 16 MiB more: a has room for 4 of them; the rest can only go to b.
  std::vector<Data> more = FillAndEvict(*rt, 4, 1024, /*salt=*/1 << 20);
  ASSERT_EQ(more.size(), 4u);
  auto st = pager.server_stats();
  EXPECT_LE(st[0].pages, 2048u);
  EXPECT_GE(st[1].pages, 3u * 1024);
  EXPECT_EQ(st[0].pages + st[1].pages, 5u * 1024);
  EXPECT_EQ(BadPages(data), 0u);
  EXPECT_EQ(BadPages(more, 1 << 20), 0u);
  for (Data& d : data) EXPECT_TRUE(rt->Free(d.base).ok());
  for (Data& d : more) EXPECT_TRUE(rt->Free(d.base).ok());
}

TEST(RemoteServers, AServerAddedAfterALossRestoresTheCopiesThatHadNowhereToGo) {
  // Two servers, two replicas: once b is lost no page can have its second copy back (there is
  // no third server) until c is added; then the repair thread copies every page to c, and the
  // loss of a after that loses nothing.
  if (MemdProcess::Scheme() != "tcp") GTEST_SKIP() << "a dead RDMA peer is detected after the NIC's retries; TCP covers it";
  MemdProcess a, b, c;
  ASSERT_TRUE(a.Start({"--capacity", "64M", "--no-rdma"}));
  ASSERT_TRUE(b.Start({"--capacity", "64M", "--no-rdma"}));
  ASSERT_TRUE(c.Start({"--capacity", "64M", "--no-rdma"}));
  auto rt = testing::StartRemoteRuntime(a.url() + "," + b.url(), "", "off", 2);
  ASSERT_NE(rt, nullptr);
  Pager& pager = *ImplOf(*rt)->pager();
  std::vector<Data> data = FillAndEvict(*rt, 2, 512);
  ASSERT_EQ(data.size(), 2u);
  b.Stop(SIGKILL);
  ASSERT_TRUE(EvictUntilDown(*rt, pager, 1));
  const uint64_t repaired = pager.stats().remote_repaired_pages;
  ASSERT_TRUE(WaitRepairPasses(pager)) << "the repair thread made no pass in 60 s";
  EXPECT_GE(pager.DegradedPagesNow(), 1024u) << "repaired with nowhere to put the copies?";
  EXPECT_EQ(pager.stats().remote_repaired_pages, repaired) << "copies made with no third server";

  ASSERT_TRUE(rt->AddRemoteServer(c.url()).ok());
  ASSERT_TRUE(WaitRepaired(pager)) << pager.DegradedPagesNow() << " pages still lack a replica";
  auto st = pager.server_stats();
  ASSERT_EQ(st.size(), 3u);
  EXPECT_GE(st[2].pages, 1024u);
  a.Stop(SIGKILL);
  EXPECT_EQ(BadPages(data), 0u);
}

TEST(RemoteServers, TheServersFileIsReadAgainWhileTheProgramRuns) {
  if (MemdProcess::Scheme() != "tcp") GTEST_SKIP() << "TCP covers it";
  MemdProcess a, b;
  ASSERT_TRUE(a.Start({"--capacity", "64M", "--no-rdma"}));
  ASSERT_TRUE(b.Start({"--capacity", "64M", "--no-rdma"}));
  char dir[] = "/tmp/tiermem-servers-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/servers";
  WriteWhole(path, "# the memory servers\n" + a.url() + "\n");
  Options o;
  o.Set("remote_file", path);
  o.Set("remote_timeout_ms", 3000);
  o.Set("prefetch", "off");
  auto started = Runtime::Start(o);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  std::unique_ptr<Runtime> rt = std::move(*started);
  ASSERT_TRUE(rt->HasTier(Tier::kRemote));
  Pager& pager = *ImplOf(*rt)->pager();
  std::vector<Data> first = FillAndEvict(*rt, 1, 512);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(pager.server_stats()[0].pages, 512u);

  // b added (a line that is no address is left out, with a warning; the rest applies).
  WriteWhole(path, a.url() + ", no-such-scheme://x:1  # comment " + a.url() + "\n" + b.url() + "\n");
  ASSERT_TRUE(WaitFor([&] { return Connected(pager, 1); })) << "b from the file was not connected";
  ASSERT_EQ(pager.server_stats().size(), 2u);

  // a taken out: new pages go to b only, a's pages still read back from a.
  WriteWhole(path, b.url() + "\n");
  ASSERT_TRUE(WaitFor([&] { return pager.server_stats()[0].withdrawn; })) << "a was not taken out";
  const uint64_t on_a = pager.server_stats()[0].pages;
  std::vector<Data> second = FillAndEvict(*rt, 2, 512, /*salt=*/1 << 20);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(pager.server_stats()[0].pages, on_a);
  EXPECT_EQ(pager.server_stats()[1].pages, 1024u);
  EXPECT_EQ(BadPages(first), 0u);
  EXPECT_EQ(BadPages(second, 1 << 20), 0u);

  // A file that lists nobody (caught half-written) changes nothing; a back in takes pages again.
  const uint64_t changes = pager.stats().server_file_changes;
  WriteWhole(path, "# nothing yet\n");
  ASSERT_TRUE(WaitFor([&] { return pager.stats().server_file_changes > changes; })) << "the file was not read again";
  EXPECT_TRUE(pager.server_stats()[0].withdrawn);
  EXPECT_FALSE(pager.server_stats()[1].withdrawn);
  WriteWhole(path, a.url() + "\n" + b.url() + "\n");
  ASSERT_TRUE(WaitFor([&] { return !pager.server_stats()[0].withdrawn; })) << "a was not put back";
  // a (the roomier now) takes new pages again.
  std::vector<Data> third = FillAndEvict(*rt, 1, 512, /*salt=*/2 << 20);
  ASSERT_EQ(third.size(), 1u);
  EXPECT_GT(pager.server_stats()[0].pages, on_a);
  EXPECT_EQ(BadPages(third, 2 << 20), 0u);
  rt.reset();
  unlink(path.c_str());
  rmdir(dir);
}

TEST(RemoteServers, AServerTakenOutOfTheFileGetsNoReplacementCopiesUntilItIsPutBack) {
  // Two replicas over a, b and c of the file; c taken out, then b lost: c is the only server
  // that could take b's copies, and gets none until it is back in the file.
  if (MemdProcess::Scheme() != "tcp") GTEST_SKIP() << "TCP covers it";
  MemdProcess a, b, c;
  for (MemdProcess* m : {&a, &b, &c}) ASSERT_TRUE(m->Start({"--capacity", "64M", "--no-rdma"}));
  char dir[] = "/tmp/tiermem-servers-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/servers";
  WriteWhole(path, a.url() + "," + b.url() + "," + c.url() + "\n");
  Options o;
  o.Set("remote_file", path);
  o.Set("remote_timeout_ms", 3000);
  o.Set("prefetch", "off");
  o.Set("replicas", 2);
  auto started = Runtime::Start(o);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  std::unique_ptr<Runtime> rt = std::move(*started);
  Pager& pager = *ImplOf(*rt)->pager();
  WriteWhole(path, a.url() + "," + b.url() + "\n");
  ASSERT_TRUE(WaitFor([&] { return pager.server_stats()[2].withdrawn; })) << "c was not taken out";
  std::vector<Data> data = FillAndEvict(*rt, 2, 512);
  ASSERT_EQ(data.size(), 2u);
  EXPECT_EQ(pager.server_stats()[2].pages, 0u);
  b.Stop(SIGKILL);
  ASSERT_TRUE(EvictUntilDown(*rt, pager, 1));
  const uint64_t repaired = pager.stats().remote_repaired_pages;
  ASSERT_TRUE(WaitRepairPasses(pager)) << "the repair thread made no pass in 60 s";
  EXPECT_EQ(pager.server_stats()[2].pages, 0u) << "the repair copied to a server taken out";
  EXPECT_EQ(pager.stats().remote_repaired_pages, repaired) << "copies made with no server to take them";
  EXPECT_GE(pager.DegradedPagesNow(), 1024u);
  WriteWhole(path, a.url() + "," + c.url() + "\n");
  ASSERT_TRUE(WaitRepaired(pager)) << pager.DegradedPagesNow() << " pages still lack a replica";
  EXPECT_GE(pager.server_stats()[2].pages, 1024u);
  a.Stop(SIGKILL);
  EXPECT_EQ(BadPages(data), 0u);
  rt.reset();
  unlink(path.c_str());
  rmdir(dir);
}

TEST(RemoteServers, ABadServersFileAtStartIsRefusedWithItsReason) {
  char dir[] = "/tmp/tiermem-servers-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/servers";
  auto start = [&] {
    Options o;
    o.Set("remote_file", path);
    auto rt = Runtime::Start(o);
    EXPECT_TRUE(rt.ok()) << rt.status().ToString();  // the runtime runs on, without the tier
    if (!rt.ok()) return std::string();
    EXPECT_FALSE((*rt)->HasTier(Tier::kRemote));
    auto ts = (*rt)->Stats();
    return ts[static_cast<int>(Tier::kRemote)].absent_reason;
  };
  EXPECT_NE(start().find("cannot be read"), std::string::npos);  // no file
  WriteWhole(path, "tcp://127.0.0.1:1 udp://what\n");
  EXPECT_NE(start().find("udp://what"), std::string::npos);
  WriteWhole(path, "# nobody\n");
  EXPECT_NE(start().find("lists no memory server"), std::string::npos);
  unlink(path.c_str());
  rmdir(dir);
}

TEST(ServerFile, AddressesCommentsAndSeparators) {
  ServerFileEntries e = ParseServerFile(
      "# servers\ntcp://10.0.0.1:7471, 10.0.0.2:7000\trdma://10.0.0.3:7471 # the RDMA one\r\n"
      "tcp://10.0.0.1:7471\n\n  ftp://x  10.0.0.4\n");
  ASSERT_EQ(e.servers.size(), 4u);
  EXPECT_EQ(e.servers[0].ToString(), "tcp://10.0.0.1:7471");
  EXPECT_EQ(e.servers[1].ToString(), "tcp://10.0.0.2:7000");
  EXPECT_EQ(e.servers[2].ToString(), "rdma://10.0.0.3:7471");
  EXPECT_EQ(e.servers[3].ToString(), "tcp://10.0.0.4:7471");
  ASSERT_EQ(e.bad.size(), 1u);
  EXPECT_NE(e.bad[0].find("ftp://x"), std::string::npos);
  EXPECT_TRUE(ParseServerFile("").servers.empty());
  EXPECT_TRUE(ParseServerFile("# a,b\n").servers.empty());
}

}  // namespace
}  // namespace tiermem

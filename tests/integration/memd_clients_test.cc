// memd's client list: slots reserved against slots written per session, over RemoteClient and
// through `tiermemctl memd`, against a memd on loopback with two clients.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/integration/remote_memd_fixture.h"
#include "tiermem/remote.hpp"

#ifndef TIERMEM_CTL_PATH
#error "TIERMEM_CTL_PATH must name the tiermemctl binary"
#endif

namespace tiermem::testing {
namespace {

constexpr char kToken[] = "clients-test-token";

struct CtlRun {
  int exit_code = -1;
  std::string out;  // stdout and stderr
};

CtlRun Ctl(const std::string& args) {
  CtlRun r;
  std::string cmd = std::string(TIERMEM_CTL_PATH) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  int st = pclose(p);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::unique_ptr<RemoteClient> Client(const MemdProcess& memd) {
  auto c = RemoteClient::Connect("tcp://127.0.0.1:" + std::to_string(memd.port()), kToken);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(*c) : nullptr;
}

// Writes pages [0, n) of `pages` with a pattern.
void WritePages(RemoteClient& c, const RemotePages& pages, size_t n) {
  std::vector<uint8_t> buf(n * RemoteClient::kPageSize);
  for (size_t i = 0; i < n; ++i) FillPage(buf.data() + i * RemoteClient::kPageSize, i);
  ASSERT_TRUE(c.Write(pages, pages.first, buf.data(), n).ok());
}

const RemoteSessionInfo* Find(const RemoteServerClients& list, bool self) {
  for (const RemoteSessionInfo& s : list.sessions) {
    if (s.self == self) return &s;
  }
  return nullptr;
}

TEST(MemdClients, ReservedSlotsAreNotWrittenPages) {
  MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "64M", "--no-rdma"}, kToken));
  auto a = Client(memd);
  ASSERT_NE(a, nullptr);
  auto pages = a->Allocate(100);
  ASSERT_TRUE(pages.ok()) << pages.status().ToString();
  WritePages(*a, *pages, 10);
  WritePages(*a, *pages, 10);  // writing a page again holds no more data

  auto list = a->ListClients();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(list->capacity_pages, 64u * 256);
  EXPECT_EQ(list->reserved_pages, 100u);
  EXPECT_EQ(list->written_pages, 10u);
  ASSERT_EQ(list->sessions.size(), 1u);
  const RemoteSessionInfo& me = list->sessions[0];
  EXPECT_TRUE(me.self);
  EXPECT_EQ(me.slots, 100u);
  EXPECT_EQ(me.written_pages, 10u);
  EXPECT_TRUE(me.written_known);
  EXPECT_EQ(me.connections, 1u);
  EXPECT_EQ(me.peer.rfind("127.0.0.1:", 0), 0u) << me.peer;
  // STATS still counts reservations: that is what it always meant, now said so.
  auto st = a->ServerStats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->used_pages, 100u);

  ASSERT_TRUE(a->Free(*pages).ok());
  list = a->ListClients();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->reserved_pages, 0u);
  EXPECT_EQ(list->written_pages, 0u);
  EXPECT_EQ(list->sessions[0].written_pages, 0u);
}

TEST(MemdClients, TiermemctlMemdListsBothClients) {
  MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "64M", "--quota", "32M", "--no-rdma"}, kToken));
  auto a = Client(memd);
  auto b = Client(memd);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  auto pa = a->Allocate(64);
  auto pb = b->Allocate(256);
  ASSERT_TRUE(pa.ok() && pb.ok());
  WritePages(*a, *pa, 5);
  WritePages(*b, *pb, 200);

  const std::string server = "127.0.0.1:" + std::to_string(memd.port());
  CtlRun r = Ctl("memd " + server + " --json --token " + kToken);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["capacity_pages"], 64u * 256);
  EXPECT_EQ(j["reserved_pages"], 64u + 256);
  EXPECT_EQ(j["written_pages"], 205u);
  EXPECT_EQ(j["sessions"], 3u);  // a, b and tiermemctl's own
  ASSERT_EQ(j["clients"].size(), 3u);
  std::vector<std::pair<uint64_t, uint64_t>> others;  // (slots, written) of the sessions not its own
  int self = 0;
  for (const auto& c : j["clients"]) {
    EXPECT_EQ(c["quota_pages"], 32u * 256);
    EXPECT_EQ(c["data_path"], "tcp");
    if (c["self"].get<bool>()) {
      ++self;
      EXPECT_EQ(c["slots"], 0u);
      continue;
    }
    others.emplace_back(c["slots"].get<uint64_t>(), c["written_pages"].get<uint64_t>());
  }
  EXPECT_EQ(self, 1);
  std::sort(others.begin(), others.end());
  ASSERT_EQ(others.size(), 2u);
  EXPECT_EQ(others[0], std::make_pair(uint64_t(64), uint64_t(5)));
  EXPECT_EQ(others[1], std::make_pair(uint64_t(256), uint64_t(200)));

  // The text form names each client on its own line.
  r = Ctl("memd " + server + " --token " + kToken);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("clients    3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(this)"), std::string::npos) << r.out;

  // A session that goes away leaves the list and frees its slots, once memd has seen its
  // connection close (after the client's goodbye, on memd's side: ask again, within a bound).
  a.reset();
  StatusOr<RemoteServerClients> list = b->ListClients();
  for (int i = 0; i < 6000 && list.ok() && (list->sessions.size() != 1 || list->reserved_pages != 256); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    list = b->ListClients();
  }
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->sessions.size(), 1u);
  ASSERT_NE(Find(*list, true), nullptr);
  EXPECT_EQ(list->reserved_pages, 256u);
}

TEST(MemdClients, TiermemctlMemdRefusedTokenAndUnreachableServer) {
  MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "16M", "--no-rdma"}, kToken));
  const std::string server = "127.0.0.1:" + std::to_string(memd.port());
  CtlRun r = Ctl("memd " + server + " --token wrong");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.out, "tiermemctl: memory server " + server + " refused the token\n");
  memd.Stop();
  r = Ctl("memd " + server + " --token " + kToken + " --timeout-ms 2000");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.out.rfind("tiermemctl: cannot reach memory server tcp://" + server, 0), 0u) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
}

}  // namespace
}  // namespace tiermem::testing

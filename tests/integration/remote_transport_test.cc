// The TCP transport against a real tiermem-memd on loopback: data integrity at scale, the token,
// isolation between clients, bad input, and a server that dies mid-run.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "protocol/protocol.h"
#include "backends/remote/transport.h"
#ifdef TIERMEM_HAVE_RDMA
#include "backends/remote/rdma/rdma_transport.h"
#endif
#include "tests/integration/remote_memd_fixture.h"

namespace tiermem::remote {
namespace {

using testing::CheckPage;
using testing::Connected;
using testing::FillPage;
using testing::MemdProcess;

Status RdmaPresentForTests() {
#ifdef TIERMEM_HAVE_RDMA
  return RdmaDevicePresent();
#else
  return Unavailable("no RDMA support in this build");
#endif
}

int RawConnect(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Reads until EOF (or up to 64 KiB); returns what came.
std::vector<uint8_t> ReadToEof(int fd) {
  std::vector<uint8_t> got;
  uint8_t buf[4096];
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    got.insert(got.end(), buf, buf + n);
    if (got.size() > 65536) break;
  }
  return got;
}

TEST(RemoteTcp, OneGiBOfPatternedPagesRoundTrips) {
  MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "1280M", "--no-rdma"}));
  auto t = Connected(memd);
  const size_t kPages = MemdProcess::DataMiB() * 256;
  const size_t kChunk = std::min<size_t>(16384, kPages);  // 64 MiB of local buffer at a time
  auto range = t->AllocSlots(kPages);
  ASSERT_TRUE(range.ok()) << range.status().ToString();
  std::vector<uint8_t> buf(kChunk * kPage);
  for (size_t base = 0; base < kPages; base += kChunk) {
    for (size_t i = 0; i < kChunk; ++i) FillPage(&buf[i * kPage], base + i);
    Status s = WritePagesSync(*t, *range, range->first + base, buf.data(), kChunk, 128);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  size_t bad = 0;
  for (size_t base = 0; base < kPages; base += kChunk) {
    std::memset(buf.data(), 0, buf.size());
    Status s = ReadPagesSync(*t, *range, range->first + base, buf.data(), kChunk, 128);
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (size_t i = 0; i < kChunk; ++i) bad += CheckPage(&buf[i * kPage], base + i) ? 0 : 1;
  }
  EXPECT_EQ(bad, 0u);
  auto st = t->Stats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->session_pages, kPages);
  EXPECT_TRUE(t->FreeSlots(*range).ok());
  t->Close();
}

TEST(RemoteTcp, WrongTokenIsRefused) {
  MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "64M", "--no-rdma"}, "right-token"));
  Status s;
  auto t = Connected(memd, "wrong-token", &s);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
  EXPECT_NE(s.message().find("bad token"), std::string::npos) << s.message();
  auto none = Connected(memd, "", &s);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
  auto good = Connected(memd, "right-token");
  EXPECT_TRUE(good->AllocSlots(1).ok());
  EXPECT_NE(memd.Log().find("hello refused: bad token"), std::string::npos) << memd.Log();
}

TEST(RemoteTcp, AClientCannotReachAnotherClientsSlots) {
  if (MemdProcess::Scheme() != "tcp") GTEST_SKIP() << "TCP checks; RemoteData.RdmaKeysIsolateClients covers RDMA";
  MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "64M", "--no-rdma"}));
  auto two = testing::StartTwoSessions(memd, 4);
  ASSERT_TRUE(two.ok);
  auto& a = two.a;
  auto& b = two.b;
  const SlotRange* ra = &two.ra;
  const SlotRange* rb = &two.rb;

  // b reads and writes a's slot: refused, a's data unchanged.
  std::vector<uint8_t> got(kPage, 0x55);
  Status s = ReadPagesSync(*b, *ra, ra->first, got.data(), 1);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
  EXPECT_FALSE(CheckPage(got.data(), 0, 0xA));
  std::vector<uint8_t> junk(kPage, 0xEE);
  s = WritePagesSync(*b, *ra, ra->first, junk.data(), 1);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
  // b frees a's range: refused. Out-of-range slots: refused.
  EXPECT_FALSE(b->FreeSlots(*ra).ok());
  s = ReadPagesSync(*b, *rb, rb->first + 4, got.data(), 1);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  s = ReadPagesSync(*b, *rb, ~0ull - 1, got.data(), 1);
  EXPECT_FALSE(s.ok());

  ASSERT_TRUE(ReadPagesSync(*a, *ra, ra->first, got.data(), 1).ok());
  EXPECT_TRUE(CheckPage(got.data(), 0, 0xA));
  EXPECT_NE(memd.Log().find("not its own"), std::string::npos);

  // When a disconnects its slots are freed and the next owner reads zeros, not a's data.
  a->Close();
  a.reset();
  for (int i = 0; i < 6000; ++i) {  // at most 60 s
    auto st = b->Stats();
    ASSERT_TRUE(st.ok());
    if (st->sessions == 1) break;
    usleep(10000);
  }
  auto c = Connected(memd);
  auto rc = c->AllocSlots(8);
  ASSERT_TRUE(rc.ok());
  for (uint64_t i = 0; i < rc->count; ++i) {
    ASSERT_TRUE(ReadPagesSync(*c, *rc, rc->first + i, got.data(), 1).ok());
    for (auto byte : got) ASSERT_EQ(byte, 0);
  }
}

TEST(RemoteTcp, SecondConnectionJoinsTheSession) {
  MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "64M", "--no-rdma"}));
  auto a = Connected(memd);
  auto r = a->AllocSlots(2);
  ASSERT_TRUE(r.ok());
  std::vector<uint8_t> page(kPage);
  FillPage(page.data(), 1);
  ASSERT_TRUE(WritePagesSync(*a, *r, r->first, page.data(), 1).ok());
  auto t = MakeTransport(*ParseEndpoint(memd.url()));
  SessionTicket ticket = a->ticket();
  ASSERT_TRUE((*t)->Connect("", 5000, &ticket).ok());
  std::vector<uint8_t> got(kPage);
  ASSERT_TRUE(ReadPagesSync(**t, *r, r->first, got.data(), 1).ok());
  EXPECT_TRUE(CheckPage(got.data(), 1));
  ticket.secret[0] ^= 1;
  auto bad = MakeTransport(*ParseEndpoint(memd.url()));
  EXPECT_EQ((*bad)->Connect("", 5000, &ticket).code(), StatusCode::kPermissionDenied);
}

// A posted page made inaccessible before its bytes are sent (what a sampler's PROT_NONE did to
// an eviction in flight) fails alone: its completion names the page, the other pages of the
// same write message arrive intact, and the connection carries on.
TEST(RemoteTcp, APageMadeUnreadableBeforeItsSendFailsAloneAndTheConnectionGoesOn) {
  MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "64M", "--no-rdma"}));
  auto t = Connected(memd);
  constexpr size_t kPages = 8;
  auto r = t->AllocSlots(kPages);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  void* mem = mmap(nullptr, kPages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* pages = static_cast<uint8_t*>(mem);
  for (size_t i = 0; i < kPages; ++i) FillPage(pages + i * kPage, i);
  // Consecutive slots: one write message carries all eight pages (TcpTransport::ExtendWrite),
  // so the bad page sits in the middle of a message whose framing must survive it.
  for (size_t i = 0; i < kPages; ++i) ASSERT_TRUE(t->PostWrite(*r, r->first + i, pages + i * kPage, i).ok());
  uint8_t* bad = pages + 3 * kPage;
  ASSERT_EQ(mprotect(bad, kPage, PROT_NONE), 0);
  std::vector<Completion> done;
  for (int spins = 0; done.size() < kPages && spins < 1000; ++spins) {
    Completion c[kPages];
    auto n = t->Poll(c, kPages, 1000);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    done.insert(done.end(), c, c + *n);
  }
  ASSERT_EQ(done.size(), kPages);
  for (const Completion& c : done) {
    if (c.cookie == 3) {
      EXPECT_EQ(c.status.code(), StatusCode::kInvalidArgument) << c.status.ToString();
      EXPECT_EQ(c.page, bad);
    } else {
      EXPECT_TRUE(c.status.ok()) << "page " << c.cookie << ": " << c.status.ToString();
      EXPECT_EQ(c.page, nullptr);
    }
  }
  ASSERT_EQ(mprotect(bad, kPage, PROT_READ | PROT_WRITE), 0);
  // The connection is alive: the good pages read back, and new requests go through.
  std::vector<uint8_t> got(kPage);
  for (size_t i = 0; i < kPages; ++i) {
    if (i == 3) continue;
    ASSERT_TRUE(ReadPagesSync(*t, *r, r->first + i, got.data(), 1).ok());
    EXPECT_TRUE(CheckPage(got.data(), i)) << "page " << i;
  }
  ASSERT_TRUE(WritePagesSync(*t, *r, r->first + 3, bad, 1).ok());
  ASSERT_TRUE(ReadPagesSync(*t, *r, r->first + 3, got.data(), 1).ok());
  EXPECT_TRUE(CheckPage(got.data(), 3));
  munmap(mem, kPages * kPage);
}

TEST(RemoteTcp, QuotaIsEnforced) {
  MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "64M", "--quota", "1M", "--no-rdma"}));
  auto t = Connected(memd);
  EXPECT_TRUE(t->AllocSlots(200).ok());
  auto r = t->AllocSlots(100);
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted) << r.status().ToString();
  EXPECT_TRUE(t->AllocSlots(56).ok());
}

TEST(RemoteTcp, BadInputIsRefusedAndTheServerCarriesOn) {
  MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "64M", "--no-rdma", "--hello-timeout-ms", "500"}));
  auto send_and_close = [&](const std::vector<uint8_t>& bytes, bool shut) {
    int fd = RawConnect(memd.port());
    ASSERT_GE(fd, 0);
    ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), ssize_t(bytes.size()));
    if (shut) shutdown(fd, SHUT_WR);
    ReadToEof(fd);
    close(fd);
  };
  std::vector<uint8_t> msg;
  proto::Encode(1, proto::Hello{}, &msg);
  auto wrong_version = msg;
  wrong_version[4] = 9;
  send_and_close(wrong_version, false);
  send_and_close(std::vector<uint8_t>(100, 0xAB), false);  // garbage
  std::vector<uint8_t> truncated(msg.begin(), msg.begin() + 30);
  send_and_close(truncated, true);
  uint8_t h[proto::kHeaderSize];
  proto::EncodeHeader(proto::MsgType::kWrite, 1u << 30, 1, h);  // oversized
  send_and_close(std::vector<uint8_t>(h, h + sizeof(h)), false);
  std::vector<uint8_t> stats_first;
  proto::Encode(1, proto::Stats{}, &stats_first);  // no hello
  send_and_close(stats_first, false);
  send_and_close({}, false);  // silent client: hello timeout

  EXPECT_TRUE(memd.Alive());
  std::string log = memd.Log();
  EXPECT_NE(log.find("version 9 not supported"), std::string::npos) << log;
  EXPECT_NE(log.find("bad magic"), std::string::npos) << log;
  EXPECT_NE(log.find("in the middle of a message"), std::string::npos) << log;
  EXPECT_NE(log.find("exceeds the limit"), std::string::npos) << log;
  EXPECT_NE(log.find("not hello"), std::string::npos) << log;
  EXPECT_NE(log.find("no hello within"), std::string::npos) << log;
  auto t = Connected(memd);
  EXPECT_TRUE(t->AllocSlots(1).ok());
}

TEST(RemoteTcp, AConnectionFloodIsRefusedAndServiceResumes) {
  MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "64M", "--no-rdma", "--max-connections", "16"}));
  std::vector<int> fds;
  for (int i = 0; i < 64; ++i) {
    int fd = RawConnect(memd.port());
    if (fd >= 0) fds.push_back(fd);
  }
  // Wait until memd has seen them all (the refusals appear in its log).
  for (int i = 0; i < 6000 && memd.Log().find("too many connections") == std::string::npos; ++i) usleep(10000);
  EXPECT_NE(memd.Log().find("too many connections (limit 16"), std::string::npos) << memd.Log();
  for (int fd : fds) close(fd);
  EXPECT_TRUE(memd.Alive());
  // Once the flood is gone a real client is served again.
  Status s;
  std::unique_ptr<Transport> t;
  for (int i = 0; i < 6000; ++i) {  // at most 60 s
    t = Connected(memd, "", &s);
    if (s.ok()) break;
    usleep(10000);
  }
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(t->AllocSlots(1).ok());
}

TEST(RemoteTcp, ServerKilledMidRunGivesAClearErrorNotAHang) {
  MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "256M", "--no-rdma"}));
  auto t = Connected(memd);
  auto r = t->AllocSlots(4096);
  ASSERT_TRUE(r.ok());
  std::vector<uint8_t> buf(4096 * kPage, 1);
  ASSERT_TRUE(WritePagesSync(*t, *r, r->first, buf.data(), 4096).ok());
  memd.Stop(SIGKILL);
  Status s = ReadPagesSync(*t, *r, r->first, buf.data(), 4096);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find(memd.url()), std::string::npos) << s.message();
  // Later calls fail at once, the same way.
  EXPECT_FALSE(t->AllocSlots(1).ok());
  EXPECT_FALSE(t->PostRead(*r, r->first, buf.data(), 0).ok());
}

// Over RDMA a foreign rkey is refused by the NIC: the offending connection breaks, the victim's
// data stays intact. On a host without a verbs device, the transport says so clearly.
TEST(RemoteData, RdmaKeysIsolateClients) {
  Status present = RdmaPresentForTests();
  if (MemdProcess::Scheme() != "rdma") {
    auto t = MakeTransport(*ParseEndpoint("rdma://127.0.0.1:7471"));
    if (!t.ok()) GTEST_SKIP() << t.status().message();
    Status s = (*t)->Connect("", 1000);
    EXPECT_FALSE(s.ok());
    if (!present.ok()) {
      EXPECT_EQ(s.code(), StatusCode::kUnavailable);
      EXPECT_NE(s.message().find("no RDMA device"), std::string::npos) << s.message();
    }
    GTEST_SKIP() << "not an RDMA run (TIERMEM_TEST_REMOTE_SCHEME=rdma in the QEMU rdma topology)";
  }
  MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "64M"}));
  auto two = testing::StartTwoSessions(memd, 4);
  ASSERT_TRUE(two.ok);
  auto& a = two.a;
  auto& b = two.b;
  const SlotRange* ra = &two.ra;
  std::vector<uint8_t> junk(kPage, 0xEE);
  EXPECT_FALSE(WritePagesSync(*b, *ra, ra->first, junk.data(), 1).ok());
  std::vector<uint8_t> got(kPage);
  ASSERT_TRUE(ReadPagesSync(*a, *ra, ra->first, got.data(), 1).ok());
  EXPECT_TRUE(CheckPage(got.data(), 0, 0xA));
}

TEST(RemoteTcp, NoServerMeansAClearConnectError) {
  auto t = MakeTransport(*ParseEndpoint("tcp://127.0.0.1:1"));
  Status s = (*t)->Connect("", 2000);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("tcp://127.0.0.1:1"), std::string::npos) << s.message();
}

TEST(RemoteTcp, SigtermStopsTheServerCleanly) {
  MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "64M", "--no-rdma"}));
  auto t = Connected(memd);
  ASSERT_TRUE(t->AllocSlots(10).ok());
  int st = memd.Stop(SIGTERM);
  EXPECT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  std::string log = memd.Log();
  EXPECT_NE(log.find("SIGTERM received"), std::string::npos) << log;
  EXPECT_NE(log.find("stopped: 0 sessions left, 0 slots reserved"), std::string::npos) << log;
}

}  // namespace
}  // namespace tiermem::remote

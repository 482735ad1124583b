// Sub-page requests (read_part, write_part) through the transports against a real tiermem-memd,
// and against a fake memd that predates them.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "protocol/protocol.h"
#include "backends/remote/transport.h"
#include "tests/integration/remote_memd_fixture.h"

namespace tiermem::remote {
namespace {

using testing::CheckPage;
using testing::Connected;
using testing::FillPage;
using testing::MemdProcess;

// Polls until `n` completions came; statuses[cookie] is each one's (cookies are 0..n-1).
std::vector<Status> Collect(Transport& t, size_t n) {
  std::vector<Status> statuses(n, Internal("no completion"));
  Completion c[64];
  for (size_t got = 0; got < n;) {
    auto r = t.Poll(c, 64, -1);
    if (!r.ok() || *r == 0) {
      ADD_FAILURE() << "poll: " << (r.ok() ? "nothing within the timeout" : r.status().ToString());
      break;
    }
    for (size_t i = 0; i < *r; ++i) statuses.at(c[i].cookie) = c[i].status;
    got += *r;
  }
  return statuses;
}

// A piece of a page: `length` bytes at `offset`, patterned by `tag`.
struct Piece {
  uint32_t offset;
  uint32_t length;
  uint8_t tag;
};

// Pieces of pages (what erasure coding stores) overwrite exactly their bytes, and read back alone
// or as part of the whole page. Runs over RDMA too (the QEMU rdma topology runs RemoteData.*).
TEST(RemoteData, PartWritesAndReadsTouchOnlyTheirBytes) {
  MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "64M", "--no-rdma"}));
  auto t = Connected(memd);
  constexpr size_t kSlots = 6;
  auto r = t->AllocSlots(kSlots);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<uint8_t> want(kSlots * kPage);
  for (size_t i = 0; i < kSlots; ++i) FillPage(&want[i * kPage], i);
  ASSERT_TRUE(WritePagesSync(*t, *r, r->first, want.data(), kSlots).ok());
  // Quarter pages (k = 4), the first and last byte, an odd span, a whole page: one slot each.
  const std::vector<std::vector<Piece>> pieces = {
      {{0, 1024, 1}, {1024, 1024, 2}, {2048, 1024, 3}, {3072, 1024, 4}},
      {{3072, 1024, 5}}, {{0, 1, 6}, {4095, 1, 7}}, {{100, 3000, 8}}, {{0, 4096, 9}}, {}};
  std::vector<std::vector<uint8_t>> data;
  for (size_t slot = 0; slot < kSlots; ++slot) {
    for (const Piece& p : pieces[slot]) {
      data.emplace_back(p.length);
      for (uint32_t b = 0; b < p.length; ++b) data.back()[b] = uint8_t(p.tag * 31 + b * 7);
      std::memcpy(&want[slot * kPage + p.offset], data.back().data(), p.length);
      ASSERT_TRUE(t->PostWritePart(*r, r->first + slot, p.offset, p.length, data.back().data(), data.size() - 1).ok());
    }
  }
  for (const Status& s : Collect(*t, data.size())) EXPECT_TRUE(s.ok()) << s.ToString();
  // Whole pages: the pieces in place, every other byte as it was.
  std::vector<uint8_t> got(kSlots * kPage);
  ASSERT_TRUE(ReadPagesSync(*t, *r, r->first, got.data(), kSlots).ok());
  EXPECT_TRUE(got == want);
  EXPECT_FALSE(CheckPage(&got[0], 0));
  EXPECT_TRUE(CheckPage(&got[5 * kPage], 5));
  // Pieces read alone, at offsets that do not match how they were written; a guard byte after
  // each destination stays untouched.
  const std::vector<Piece> reads = {{0, 1024, 0}, {3072, 1024, 1}, {512, 1024, 1}, {4095, 1, 2}, {0, 4096, 3},
                                    {99, 3002, 3}, {2000, 96, 5}};
  std::vector<std::vector<uint8_t>> out;
  for (size_t i = 0; i < reads.size(); ++i) {
    out.emplace_back(reads[i].length + 1, 0xC3);
    ASSERT_TRUE(t->PostReadPart(*r, r->first + reads[i].tag, reads[i].offset, reads[i].length, out.back().data(), i).ok());
  }
  for (const Status& s : Collect(*t, reads.size())) EXPECT_TRUE(s.ok()) << s.ToString();
  for (size_t i = 0; i < reads.size(); ++i) {
    const uint8_t* expect = &want[reads[i].tag * kPage + reads[i].offset];
    EXPECT_EQ(std::memcmp(out[i].data(), expect, reads[i].length), 0) << "read " << i;
    EXPECT_EQ(out[i].back(), 0xC3) << "read " << i << " wrote past its length";
  }
  // Bad spans are refused before anything is posted.
  uint8_t buf[kPage];
  for (auto [offset, length] : {std::pair<uint32_t, uint32_t>{3073, 1024}, {0, 0}, {4096, 1}, {0, 4097}, {~0u, 2}}) {
    Status w = t->PostWritePart(*r, r->first, offset, length, buf, 0);
    Status rd = t->PostReadPart(*r, r->first, offset, length, buf, 0);
    EXPECT_EQ(w.code(), StatusCode::kInvalidArgument) << offset << "+" << length << ": " << w.ToString();
    EXPECT_EQ(rd.code(), StatusCode::kInvalidArgument) << offset << "+" << length << ": " << rd.ToString();
  }
  EXPECT_EQ(t->in_flight(), 0u);
  ASSERT_TRUE(ReadPagesSync(*t, *r, r->first, got.data(), kSlots).ok());  // still usable, unchanged
  EXPECT_TRUE(got == want);
}

TEST(RemoteTcp, PartRequestsOfAnotherClientsSlotsAreRefused) {
  if (MemdProcess::Scheme() != "tcp") GTEST_SKIP() << "TCP checks; RemoteData.RdmaKeysIsolateClients covers RDMA";
  MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "64M", "--no-rdma"}));
  testing::TwoSessions two = testing::StartTwoSessions(memd, 2);
  ASSERT_TRUE(two.ok);
  Transport& b = *two.b;
  const uint64_t theirs = two.ra.first, mine = two.rb.first;
  std::vector<uint8_t> junk(1024, 0xEE), got(1024, 0x55);
  ASSERT_TRUE(b.PostWritePart(two.ra, theirs, 1024, 1024, junk.data(), 0).ok());
  ASSERT_TRUE(b.PostReadPart(two.ra, theirs, 0, 1024, got.data(), 1).ok());
  ASSERT_TRUE(b.PostReadPart(two.rb, mine + 2, 0, 1024, got.data(), 2).ok());  // past b's own range
  for (const Status& s : Collect(b, 3)) EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
  EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](uint8_t v) { return v == 0x55; }));
  std::vector<uint8_t> back(kPage);
  ASSERT_TRUE(ReadPagesSync(*two.a, two.ra, theirs, back.data(), 1).ok());
  EXPECT_TRUE(CheckPage(back.data(), 0, 0xA));
  std::string log = memd.Log();
  EXPECT_NE(log.find("refused part write of slots"), std::string::npos) << log;
  EXPECT_NE(log.find("refused part read of slots"), std::string::npos) << log;
  // The session carries on (refusals do not close the connection). A part write marks its slot
  // written once; the refused one marked nothing of a's.
  ASSERT_TRUE(b.PostWritePart(two.rb, mine, 0, 8, junk.data(), 0).ok());
  ASSERT_TRUE(b.PostWritePart(two.rb, mine, 8, 8, junk.data(), 1).ok());
  for (const Status& s : Collect(b, 2)) EXPECT_TRUE(s.ok()) << s.ToString();
  auto list = b.Clients(0);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->entries.size(), 2u);
  for (const auto& e : list->entries) EXPECT_EQ(e.written_pages, 1u) << "session " << e.session;
  EXPECT_EQ(list->written_pages, 2u);
}

// A memd that predates read_part/write_part: it says hello, then refuses the next message as an
// unknown type (error with request id 0, as ParseHeader words it) and closes.
class OldMemd {
 public:
  OldMemd() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&a), len) == 0 && listen(fd_, 1) == 0 &&
        getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port_ = ntohs(a.sin_port);
    }
    thread_ = std::thread([this] { Serve(); });
  }
  ~OldMemd() {
    thread_.join();
    close(fd_);
  }
  std::string url() const { return "tcp://127.0.0.1:" + std::to_string(port_); }

 private:
  static bool ReadMessage(int fd, proto::Header* h) {
    uint8_t head[proto::kHeaderSize];
    if (recv(fd, head, sizeof(head), MSG_WAITALL) != ssize_t(sizeof(head))) return false;
    if (!proto::ParseHeader(head, sizeof(head), h).ok()) return false;
    std::vector<uint8_t> payload(h->length);
    return h->length == 0 || recv(fd, payload.data(), payload.size(), MSG_WAITALL) == ssize_t(payload.size());
  }
  void Serve() {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 10000) != 1) return;
    int c = accept(fd_, nullptr, nullptr);
    timeval tv{10, 0};
    setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    proto::Header h;
    std::vector<uint8_t> out;
    if (ReadMessage(c, &h)) proto::Encode(h.request_id, proto::HelloOk{1, {}, 16, 16, proto::kPageSize, 0}, &out);
    send(c, out.data(), out.size(), MSG_NOSIGNAL);
    out.clear();
    if (ReadMessage(c, &h)) {
      proto::Encode(0, proto::Error{uint16_t(StatusCode::kInvalidArgument),
                                    "protocol: unknown message type " + std::to_string(uint16_t(h.type))}, &out);
      send(c, out.data(), out.size(), MSG_NOSIGNAL);
    }
    close(c);
  }
  int fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
};

TEST(RemoteTcp, APartRequestToAnOlderMemdFailsAsNotSupported) {
  OldMemd old;
  auto t = MakeTransport(*ParseEndpoint(old.url()));
  ASSERT_TRUE(t.ok());
  Status connected = (*t)->Connect("", 5000);
  ASSERT_TRUE(connected.ok()) << connected.ToString();
  SlotRange r{0, 4, 0, 0};
  uint8_t piece[1024] = {};
  ASSERT_TRUE((*t)->PostWritePart(r, 0, 0, sizeof(piece), piece, 0).ok());
  ASSERT_TRUE((*t)->PostReadPart(r, 1, 1024, sizeof(piece), piece, 1).ok());
  for (const Status& s : Collect(**t, 2)) {
    EXPECT_EQ(s.code(), StatusCode::kNotSupported) << s.ToString();
    EXPECT_NE(s.message().find(old.url()), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("does not take part reads/writes"), std::string::npos) << s.message();
  }
  EXPECT_FALSE((*t)->PostReadPart(r, 1, 0, 8, piece, 2).ok());  // the connection is failed
}

}  // namespace
}  // namespace tiermem::remote

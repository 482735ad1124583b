// The memd wire protocol: every message round-trips, and malformed input is refused clearly.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "protocol/protocol.h"
#include "backends/remote/transport.h"

namespace tiermem::remote::proto {
namespace {

Message RoundTrip(const Body& body, uint64_t id = 42) {
  std::vector<uint8_t> buf;
  Encode(id, body, &buf);
  Message m;
  Status s = ParseMessage(buf.data(), buf.size(), &m);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(m.header.request_id, id);
  EXPECT_EQ(m.header.type, TypeOf(body));
  return m;
}

TEST(RemoteProtocol, HelloRoundTrips) {
  Hello h;
  h.token = "secret";
  h.data_path = DataPath::kRdma;
  h.join_session = 7;
  h.join_secret[3] = 9;
  auto m = RoundTrip(h);
  auto& g = std::get<Hello>(m.body);
  EXPECT_EQ(g.token, "secret");
  EXPECT_EQ(g.data_path, DataPath::kRdma);
  EXPECT_EQ(g.join_session, 7u);
  EXPECT_EQ(g.join_secret[3], 9);
  EXPECT_EQ(g.page_size, kPageSize);
}

TEST(RemoteProtocol, ControlMessagesRoundTrip) {
  auto a = std::get<AllocOk>(RoundTrip(AllocOk{5, 10, 0x1000, 77}).body);
  EXPECT_EQ(a.first_slot, 5u);
  EXPECT_EQ(a.count, 10u);
  EXPECT_EQ(a.remote_addr, 0x1000u);
  EXPECT_EQ(a.rkey, 77u);
  auto f = std::get<Free>(RoundTrip(Free{5, 10}).body);
  EXPECT_EQ(f.first_slot, 5u);
  auto st = std::get<StatsOk>(RoundTrip(StatsOk{1, 2, 3, 4, 5, 6}).body);
  EXPECT_EQ(st.connections, 6u);
  auto e = std::get<Error>(RoundTrip(Error{uint16_t(StatusCode::kPermissionDenied), "bad token"}).body);
  EXPECT_EQ(e.text, "bad token");
  RoundTrip(Goodbye{});
  RoundTrip(GoodbyeOk{});
  RoundTrip(Stats{});
  RoundTrip(FreeOk{});
  RoundTrip(WriteOk{});
  EXPECT_EQ(std::get<Alloc>(RoundTrip(Alloc{3}).body).count, 3u);
}

TEST(RemoteProtocol, ClientsRoundTrips) {
  EXPECT_EQ(std::get<Clients>(RoundTrip(Clients{9}).body).after_session, 9u);
  ClientsOk ok;
  ok.capacity_pages = 100;
  ok.reserved_pages = 40;
  ok.written_pages = 7;
  ok.total = 3;
  ClientEntry a;
  a.session = 4;
  a.slots = 32;
  a.written_pages = 7;
  a.quota_pages = 100;
  a.connections = 2;
  a.peer = "127.0.0.1:40312";
  ClientEntry b = a;
  b.session = 5;
  b.data_path = DataPath::kRdma;
  b.written_known = 0;
  b.peer = std::string(100, 'x');  // cut to kMaxPeerText
  ok.entries = {a, b};
  auto m = std::get<ClientsOk>(RoundTrip(ok).body);
  EXPECT_EQ(m.capacity_pages, 100u);
  EXPECT_EQ(m.reserved_pages, 40u);
  EXPECT_EQ(m.written_pages, 7u);
  EXPECT_EQ(m.total, 3u);
  ASSERT_EQ(m.entries.size(), 2u);
  EXPECT_EQ(m.entries[0].session, 4u);
  EXPECT_EQ(m.entries[0].slots, 32u);
  EXPECT_EQ(m.entries[0].written_pages, 7u);
  EXPECT_EQ(m.entries[0].connections, 2u);
  EXPECT_EQ(m.entries[0].peer, "127.0.0.1:40312");
  EXPECT_EQ(m.entries[1].data_path, DataPath::kRdma);
  EXPECT_EQ(m.entries[1].written_known, 0);
  EXPECT_EQ(m.entries[1].peer, std::string(kMaxPeerText, 'x'));
  // No entries at all is a valid answer (a server with no session after the one asked).
  EXPECT_TRUE(std::get<ClientsOk>(RoundTrip(ClientsOk{}).body).entries.empty());
}

TEST(RemoteProtocol, RejectsInconsistentClientLists) {
  ClientsOk ok;
  ok.total = 1;
  ok.entries.resize(1);
  std::vector<uint8_t> buf;
  Encode(1, ok, &buf);
  Message m;
  ASSERT_TRUE(ParseMessage(buf.data(), buf.size(), &m).ok());
  auto bad = buf;
  bad[kHeaderSize + 28] = 2;  // says two entries, carries one
  EXPECT_FALSE(ParseMessage(bad.data(), bad.size(), &m).ok());
  bad = buf;
  bad[kHeaderSize + 24] = 0;  // a total below the entries carried
  EXPECT_NE(ParseMessage(bad.data(), bad.size(), &m).message().find("more entries than the total"),
            std::string::npos);
  bad = buf;
  bad[kHeaderSize + 32 + 38] = kMaxPeerText + 1;  // peer length beyond its field
  EXPECT_FALSE(ParseMessage(bad.data(), bad.size(), &m).ok());
  bad = buf;
  bad[kHeaderSize + 32 + 36] = 7;  // unknown data path
  EXPECT_FALSE(ParseMessage(bad.data(), bad.size(), &m).ok());
  uint8_t h[kHeaderSize];
  EncodeHeader(MsgType::kClientsOk, MaxPayload(MsgType::kClientsOk) + 1, 1, h);
  Header hdr;
  EXPECT_FALSE(ParseHeader(h, sizeof(h), &hdr).ok());
  // A type beyond the last one is still unknown.
  EncodeHeader(MsgType(uint16_t(kLastMsgType) + 1), 0, 1, h);
  EXPECT_NE(ParseHeader(h, sizeof(h), &hdr).message().find("unknown message type"), std::string::npos);
}

TEST(RemoteProtocol, PageMessagesCarryData) {
  std::vector<uint8_t> page(kPageSize * 2);
  for (size_t i = 0; i < page.size(); ++i) page[i] = uint8_t(i * 7);
  std::vector<uint8_t> buf;
  Encode(1, Write{99, 2, page.data()}, &buf);
  Message m;
  ASSERT_TRUE(ParseMessage(buf.data(), buf.size(), &m).ok());
  auto& w = std::get<Write>(m.body);
  EXPECT_EQ(w.slot, 99u);
  EXPECT_EQ(w.count, 2u);
  EXPECT_EQ(std::memcmp(w.data, page.data(), page.size()), 0);
}

TEST(RemoteProtocol, PartMessagesRoundTrip) {
  std::vector<uint8_t> piece(1024);
  for (size_t i = 0; i < piece.size(); ++i) piece[i] = uint8_t(i * 13 + 1);
  auto r = std::get<ReadPart>(RoundTrip(ReadPart{77, 3072, 1024}).body);
  EXPECT_EQ(r.slot, 77u);
  EXPECT_EQ(r.offset, 3072u);
  EXPECT_EQ(r.length, 1024u);
  std::vector<uint8_t> buf;
  Encode(5, WritePart{78, 1024, 1024, piece.data()}, &buf);
  EXPECT_EQ(buf.size(), kHeaderSize + kWritePartFixed + 1024);
  Message m;
  ASSERT_TRUE(ParseMessage(buf.data(), buf.size(), &m).ok());
  EXPECT_EQ(m.header.type, MsgType::kWritePart);
  auto& w = std::get<WritePart>(m.body);
  EXPECT_EQ(w.slot, 78u);
  EXPECT_EQ(w.offset, 1024u);
  EXPECT_EQ(w.length, 1024u);
  EXPECT_EQ(std::memcmp(w.data, piece.data(), piece.size()), 0);
  buf.clear();
  Encode(6, ReadPartOk{piece.data(), 1000}, &buf);
  ASSERT_TRUE(ParseMessage(buf.data(), buf.size(), &m).ok());
  auto& ok = std::get<ReadPartOk>(m.body);
  EXPECT_EQ(ok.length, 1000u);
  EXPECT_EQ(std::memcmp(ok.data, piece.data(), 1000), 0);
  // The zero-copy helpers give the same bytes as Encode.
  std::vector<uint8_t> manual(kHeaderSize + kWritePartFixed + 1024);
  EncodeHeader(MsgType::kWritePart, kWritePartFixed + 1024, 5, manual.data());
  EncodeWritePartFixed(78, 1024, 1024, manual.data() + kHeaderSize);
  std::memcpy(manual.data() + kHeaderSize + kWritePartFixed, piece.data(), 1024);
  buf.clear();
  Encode(5, WritePart{78, 1024, 1024, piece.data()}, &buf);
  EXPECT_EQ(manual, buf);
  uint8_t fixed[kReadPartOkFixed];
  EncodeReadPartOkFixed(1000, fixed);
  buf.clear();
  Encode(6, ReadPartOk{piece.data(), 1000}, &buf);
  EXPECT_EQ(std::memcmp(fixed, buf.data() + kHeaderSize, kReadPartOkFixed), 0);
  // A whole page is a part too; one byte at the end of the page as well.
  std::vector<uint8_t> page(kPageSize, 9);
  EXPECT_EQ(std::get<WritePart>(RoundTrip(WritePart{1, 0, kPageSize, page.data()}).body).length, kPageSize);
  EXPECT_EQ(std::get<ReadPart>(RoundTrip(ReadPart{1, kPageSize - 1, 1}).body).offset, kPageSize - 1);
  EXPECT_STREQ(MsgTypeName(MsgType::kReadPart), "read_part");
  EXPECT_STREQ(MsgTypeName(MsgType::kReadPartOk), "read_part_ok");
  EXPECT_STREQ(MsgTypeName(MsgType::kWritePart), "write_part");
}

// Encodes `body`, lets `edit` change the bytes, and returns what the parser says.
template <typename Edit>
Status ParseEdited(const Body& body, Edit edit) {
  std::vector<uint8_t> buf;
  Encode(1, body, &buf);
  edit(&buf);
  Message m;
  return ParseMessage(buf.data(), buf.size(), &m);
}

void SetU32(std::vector<uint8_t>* buf, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*buf)[at + i] = uint8_t(v >> (8 * i));
}

TEST(RemoteProtocol, RejectsBadPartOffsetsLengthsAndSizes) {
  std::vector<uint8_t> page(kPageSize, 3);
  const size_t off = kHeaderSize + 8, len = kHeaderSize + 12;  // fields of read_part / write_part
  auto expect_refused = [](const Status& s, const char* what) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
  };
  // read_part: length 0, length past the page, offset + length past the page (also when the
  // sum wraps around 32 bits).
  expect_refused(ParseEdited(ReadPart{1, 0, 1}, [&](auto* b) { SetU32(b, len, 0); }), "length 0 outside 1..4096");
  expect_refused(ParseEdited(ReadPart{1, 0, 1}, [&](auto* b) { SetU32(b, len, kPageSize + 1); }), "outside 1..4096");
  expect_refused(ParseEdited(ReadPart{1, 0, 1}, [&](auto* b) { SetU32(b, off, 3073); SetU32(b, len, 1024); }),
                 "end past the page");
  expect_refused(ParseEdited(ReadPart{1, 0, 1}, [&](auto* b) { SetU32(b, off, ~0u); SetU32(b, len, 2); }),
                 "end past the page");
  expect_refused(ParseEdited(ReadPart{1, 0, 1}, [&](auto* b) { b->pop_back(); SetU32(b, 8, 15); }),
                 "payload is 15 bytes, expected 16");
  // write_part: the same bounds, and the data must be exactly `length` bytes.
  const WritePart piece{1, 1024, 1024, page.data()};
  expect_refused(ParseEdited(piece, [&](auto* b) { SetU32(b, off, 3584); }), "end past the page");
  expect_refused(ParseEdited(piece, [&](auto* b) { SetU32(b, len, 0); }), "length 0");
  expect_refused(ParseEdited(piece, [&](auto* b) { SetU32(b, len, 1023); }), "expected 1039");
  expect_refused(ParseEdited(piece, [&](auto* b) { SetU32(b, len, 1025); }), "expected 1041");
  expect_refused(ParseEdited(piece, [&](auto* b) { b->resize(kHeaderSize + 10); SetU32(b, 8, 10); }), "truncated");
  // read_part_ok: length in bounds and matching the data carried.
  const ReadPartOk reply{page.data(), 512};
  expect_refused(ParseEdited(reply, [&](auto* b) { SetU32(b, kHeaderSize, 511); }), "expected 515");
  expect_refused(ParseEdited(reply, [&](auto* b) { SetU32(b, kHeaderSize, 0); }), "length 0");
  expect_refused(ParseEdited(reply, [&](auto* b) { b->resize(kHeaderSize + 2); SetU32(b, 8, 2); }), "truncated");
  // A header announcing more than a page of part data is refused before the payload is read.
  uint8_t h[kHeaderSize];
  Header hdr;
  EncodeHeader(MsgType::kWritePart, kWritePartFixed + kPageSize + 1, 1, h);
  expect_refused(ParseHeader(h, sizeof(h), &hdr), "exceeds the limit");
  EncodeHeader(MsgType::kReadPartOk, kReadPartOkFixed + kPageSize + 1, 1, h);
  expect_refused(ParseHeader(h, sizeof(h), &hdr), "exceeds the limit");
  EncodeHeader(MsgType::kReadPart, 17, 1, h);
  expect_refused(ParseHeader(h, sizeof(h), &hdr), "exceeds the limit");
}

TEST(RemoteProtocol, RejectsTruncatedMessages) {
  std::vector<uint8_t> buf;
  Encode(1, Alloc{4}, &buf);
  for (size_t n = 0; n < buf.size(); ++n) {
    Message m;
    Status s = ParseMessage(buf.data(), n, &m);
    EXPECT_FALSE(s.ok()) << n;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  }
  Message m;
  Status s = ParseMessage(buf.data(), 10, &m);
  EXPECT_NE(s.message().find("truncated header"), std::string::npos) << s.message();
}

TEST(RemoteProtocol, RejectsWrongVersionMagicTypeAndFlags) {
  std::vector<uint8_t> buf;
  Encode(1, Stats{}, &buf);
  Message m;
  auto bad = buf;
  bad[4] = 2;  // version 2
  Status s = ParseMessage(bad.data(), bad.size(), &m);
  EXPECT_NE(s.message().find("version 2 not supported"), std::string::npos) << s.message();
  bad = buf;
  bad[0] = 'X';
  EXPECT_NE(ParseMessage(bad.data(), bad.size(), &m).message().find("bad magic"), std::string::npos);
  bad = buf;
  bad[6] = 200;
  EXPECT_NE(ParseMessage(bad.data(), bad.size(), &m).message().find("unknown message type 200"), std::string::npos);
  bad = buf;
  bad[12] = 1;
  EXPECT_NE(ParseMessage(bad.data(), bad.size(), &m).message().find("reserved flags"), std::string::npos);
}

TEST(RemoteProtocol, RejectsOversizedAndInconsistentPayloads) {
  uint8_t h[kHeaderSize];
  EncodeHeader(MsgType::kWrite, kMaxPayload + 1, 1, h);
  Header hdr;
  Status s = ParseHeader(h, sizeof(h), &hdr);
  EXPECT_NE(s.message().find("exceeds the limit"), std::string::npos) << s.message();
  EncodeHeader(MsgType::kStats, 4, 1, h);  // Stats has no payload
  EXPECT_FALSE(ParseHeader(h, sizeof(h), &hdr).ok());

  // A Write that claims 3 pages but carries 2.
  std::vector<uint8_t> page(kPageSize * 2);
  std::vector<uint8_t> buf;
  Encode(1, Write{0, 2, page.data()}, &buf);
  buf[kHeaderSize + 8] = 3;
  Message m;
  EXPECT_FALSE(ParseMessage(buf.data(), buf.size(), &m).ok());
  // Zero pages, too many pages.
  buf.clear();
  Encode(1, Read{0, 1}, &buf);
  buf[kHeaderSize + 8] = 0;
  EXPECT_FALSE(ParseMessage(buf.data(), buf.size(), &m).ok());
  buf[kHeaderSize + 8] = kMaxPagesPerMessage + 1;
  EXPECT_FALSE(ParseMessage(buf.data(), buf.size(), &m).ok());
  // Trailing bytes.
  buf.clear();
  Encode(1, Goodbye{}, &buf);
  buf.push_back(0);
  EXPECT_NE(ParseMessage(buf.data(), buf.size(), &m).message().find("trailing"), std::string::npos);
  // Token length beyond the payload.
  buf.clear();
  Hello hello;
  hello.token = "abc";
  Encode(1, hello, &buf);
  buf[kHeaderSize + 6] = 200;
  EXPECT_FALSE(ParseMessage(buf.data(), buf.size(), &m).ok());
  // Slot ranges that wrap around.
  buf.clear();
  Encode(1, Free{~0ull, 2}, &buf);
  EXPECT_NE(ParseMessage(buf.data(), buf.size(), &m).message().find("wraps"), std::string::npos);
}

TEST(RemoteProtocol, ConstantTimeEqual) {
  EXPECT_TRUE(ConstantTimeEqual("abc", 3, "abc", 3));
  EXPECT_FALSE(ConstantTimeEqual("abc", 3, "abd", 3));
  EXPECT_FALSE(ConstantTimeEqual("abc", 3, "abcd", 4));
  EXPECT_FALSE(ConstantTimeEqual("", 0, "a", 1));
  EXPECT_TRUE(ConstantTimeEqual("", 0, "", 0));
}

TEST(RemoteEndpoint, Parses) {
  auto e = ParseEndpoint("rdma://10.9.0.2:7000");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->kind, Endpoint::Kind::kRdma);
  EXPECT_EQ(e->host, "10.9.0.2");
  EXPECT_EQ(e->port, 7000);
  e = ParseEndpoint("127.0.0.1");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->kind, Endpoint::Kind::kTcp);
  EXPECT_EQ(e->port, 7471);
  EXPECT_FALSE(ParseEndpoint("udp://x:1").ok());
  EXPECT_FALSE(ParseEndpoint("tcp://x:99999").ok());
  EXPECT_FALSE(ParseEndpoint("tcp://:1").ok());
  auto l = ParseEndpointList("tcp://a:1,rdma://b:2");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->size(), 2u);
}

}  // namespace
}  // namespace tiermem::remote::proto

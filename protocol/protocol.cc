#include "protocol/protocol.h"

#include <cstring>
#include <string>

#include "protocol/wire.h"

namespace tiermem::remote::proto {
namespace {

using wire::Get16;
using wire::Get32;
using wire::Get64;

constexpr uint32_t kHelloFixed = 32;
constexpr uint32_t kHelloOkSize = 48;
constexpr uint32_t kErrorFixed = 4;
constexpr uint32_t kAllocSize = 8;
constexpr uint32_t kAllocOkSize = 32;
constexpr uint32_t kFreeSize = 16;
constexpr uint32_t kStatsOkSize = 40;
constexpr uint32_t kReadSize = 12;
constexpr uint32_t kClientsSize = 8;
constexpr uint32_t kReadPartSize = 16;
constexpr uint32_t kClientsOkFixed = 32;
constexpr uint32_t kClientEntrySize = 40 + 64;  // fixed fields, then the peer, zero-padded
static_assert(kClientsOkFixed + kMaxClientsPerMessage * kClientEntrySize <= kMaxPayload);

Status Bad(MsgType t, const std::string& what) {
  return InvalidArgument(std::string("protocol: ") + MsgTypeName(t) + ": " + what);
}

Status NeedExact(MsgType t, size_t n, size_t want) {
  if (n != want) {
    return Bad(t, "payload is " + std::to_string(n) + " bytes, expected " + std::to_string(want));
  }
  return Status::Ok();
}

Status CheckPages(MsgType t, uint32_t count, size_t have, size_t fixed) {
  if (count == 0 || count > kMaxPagesPerMessage) {
    return Bad(t, "page count " + std::to_string(count) + " outside 1.." +
                      std::to_string(kMaxPagesPerMessage));
  }
  return NeedExact(t, have, fixed + size_t(count) * kPageSize);
}

// clients_ok: a fixed head, then `count` entries of kClientEntrySize bytes.
Status ParseClientsOk(const uint8_t* p, size_t n, Body* out) {
  const MsgType t = MsgType::kClientsOk;
  if (n < kClientsOkFixed) return Bad(t, "truncated (" + std::to_string(n) + " bytes)");
  ClientsOk m;
  m.capacity_pages = Get64(p);
  m.reserved_pages = Get64(p + 8);
  m.written_pages = Get64(p + 16);
  m.total = Get32(p + 24);
  uint32_t count = Get32(p + 28);
  if (count > kMaxClientsPerMessage) {
    return Bad(t, "entry count " + std::to_string(count) + " above " + std::to_string(kMaxClientsPerMessage));
  }
  if (count > m.total) return Bad(t, "more entries than the total");
  TIERMEM_RETURN_IF_ERROR(NeedExact(t, n, kClientsOkFixed + size_t(count) * kClientEntrySize));
  m.entries.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t* e = p + kClientsOkFixed + size_t(i) * kClientEntrySize;
    ClientEntry c;
    c.session = Get64(e);
    c.slots = Get64(e + 8);
    c.written_pages = Get64(e + 16);
    c.quota_pages = Get64(e + 24);
    c.connections = Get32(e + 32);
    if (e[36] > uint8_t(DataPath::kRdma)) return Bad(t, "unknown data path " + std::to_string(e[36]));
    c.data_path = DataPath(e[36]);
    c.written_known = e[37];
    if (c.written_known > 1) return Bad(t, "written flag is not 0 or 1");
    uint8_t peer_len = e[38];
    if (peer_len > kMaxPeerText) return Bad(t, "peer longer than " + std::to_string(kMaxPeerText) + " bytes");
    if (e[39] != 0) return Bad(t, "reserved byte is not zero");
    c.peer.assign(reinterpret_cast<const char*>(e + 40), peer_len);
    m.entries.push_back(std::move(c));
  }
  *out = std::move(m);
  return Status::Ok();
}

// A part of one page: 1..kPageSize bytes that end inside the page.
Status CheckPart(MsgType t, uint32_t offset, uint32_t length) {
  if (length == 0 || length > kPageSize) {
    return Bad(t, "length " + std::to_string(length) + " outside 1.." + std::to_string(kPageSize));
  }
  if (uint64_t(offset) + length > kPageSize) {
    return Bad(t, "bytes [" + std::to_string(offset) + ", +" + std::to_string(length) + ") end past the page");
  }
  return Status::Ok();
}

// read_part: u64 slot, u32 offset, u32 length.
Status ParseReadPart(const uint8_t* p, size_t n, Body* out) {
  const MsgType t = MsgType::kReadPart;
  TIERMEM_RETURN_IF_ERROR(NeedExact(t, n, kReadPartSize));
  ReadPart m{Get64(p), Get32(p + 8), Get32(p + 12)};
  TIERMEM_RETURN_IF_ERROR(CheckPart(t, m.offset, m.length));
  *out = m;
  return Status::Ok();
}

// read_part_ok: u32 length, then exactly that many bytes.
Status ParseReadPartOk(const uint8_t* p, size_t n, Body* out) {
  const MsgType t = MsgType::kReadPartOk;
  if (n < kReadPartOkFixed) return Bad(t, "truncated (" + std::to_string(n) + " bytes)");
  ReadPartOk m{p + kReadPartOkFixed, Get32(p)};
  TIERMEM_RETURN_IF_ERROR(CheckPart(t, 0, m.length));
  TIERMEM_RETURN_IF_ERROR(NeedExact(t, n, kReadPartOkFixed + size_t(m.length)));
  *out = m;
  return Status::Ok();
}

// write_part: u64 slot, u32 offset, u32 length, then exactly that many bytes.
Status ParseWritePart(const uint8_t* p, size_t n, Body* out) {
  const MsgType t = MsgType::kWritePart;
  if (n < kWritePartFixed) return Bad(t, "truncated (" + std::to_string(n) + " bytes)");
  WritePart m{Get64(p), Get32(p + 8), Get32(p + 12), p + kWritePartFixed};
  TIERMEM_RETURN_IF_ERROR(CheckPart(t, m.offset, m.length));
  TIERMEM_RETURN_IF_ERROR(NeedExact(t, n, kWritePartFixed + size_t(m.length)));
  *out = m;
  return Status::Ok();
}

}  // namespace

const char* MsgTypeName(MsgType type) {
  switch (type) {
    case MsgType::kHello: return "hello";
    case MsgType::kHelloOk: return "hello_ok";
    case MsgType::kError: return "error";
    case MsgType::kAlloc: return "alloc";
    case MsgType::kAllocOk: return "alloc_ok";
    case MsgType::kFree: return "free";
    case MsgType::kFreeOk: return "free_ok";
    case MsgType::kStats: return "stats";
    case MsgType::kStatsOk: return "stats_ok";
    case MsgType::kGoodbye: return "goodbye";
    case MsgType::kGoodbyeOk: return "goodbye_ok";
    case MsgType::kRead: return "read";
    case MsgType::kReadOk: return "read_ok";
    case MsgType::kWrite: return "write";
    case MsgType::kWriteOk: return "write_ok";
    case MsgType::kClients: return "clients";
    case MsgType::kClientsOk: return "clients_ok";
    case MsgType::kReadPart: return "read_part";
    case MsgType::kReadPartOk: return "read_part_ok";
    case MsgType::kWritePart: return "write_part";
  }
  return "unknown";
}

uint32_t MaxPayload(MsgType type) {
  switch (type) {
    case MsgType::kHello: return kHelloFixed + kMaxTokenBytes;
    case MsgType::kHelloOk: return kHelloOkSize;
    case MsgType::kError: return kErrorFixed + kMaxErrorText;
    case MsgType::kAlloc: return kAllocSize;
    case MsgType::kAllocOk: return kAllocOkSize;
    case MsgType::kFree: return kFreeSize;
    case MsgType::kStatsOk: return kStatsOkSize;
    case MsgType::kRead: return kReadSize;
    case MsgType::kReadOk: return kReadOkFixed + kMaxPagesPerMessage * kPageSize;
    case MsgType::kWrite: return kWriteFixed + kMaxPagesPerMessage * kPageSize;
    case MsgType::kClients: return kClientsSize;
    case MsgType::kClientsOk: return kClientsOkFixed + kMaxClientsPerMessage * kClientEntrySize;
    case MsgType::kReadPart: return kReadPartSize;
    case MsgType::kReadPartOk: return kReadPartOkFixed + kPageSize;
    case MsgType::kWritePart: return kWritePartFixed + kPageSize;
    case MsgType::kFreeOk:
    case MsgType::kStats:
    case MsgType::kGoodbye:
    case MsgType::kGoodbyeOk:
    case MsgType::kWriteOk: return 0;
  }
  return 0;
}

Status ParseHeader(const uint8_t* p, size_t n, Header* out) {
  if (n < kHeaderSize) {
    return InvalidArgument("protocol: truncated header (" + std::to_string(n) + " of " +
                           std::to_string(kHeaderSize) + " bytes)");
  }
  uint32_t magic = Get32(p);
  if (magic != kMagic) return InvalidArgument("protocol: bad magic (not a tiermem-memd peer)");
  uint16_t version = Get16(p + 4);
  if (version != kVersion) {
    return InvalidArgument("protocol: version " + std::to_string(version) + " not supported (this side speaks " +
                           std::to_string(kVersion) + ")");
  }
  uint16_t type = Get16(p + 6);
  if (type < uint16_t(MsgType::kHello) || type > uint16_t(kLastMsgType)) {
    return InvalidArgument("protocol: unknown message type " + std::to_string(type));
  }
  Header h;
  h.version = version;
  h.type = MsgType(type);
  h.length = Get32(p + 8);
  h.flags = Get32(p + 12);
  h.request_id = Get64(p + 16);
  if (h.flags != 0) return Bad(h.type, "reserved flags are not zero");
  if (h.length > MaxPayload(h.type)) {
    return Bad(h.type, "payload of " + std::to_string(h.length) + " bytes exceeds the limit of " +
                           std::to_string(MaxPayload(h.type)));
  }
  *out = h;
  return Status::Ok();
}

Status ParseBody(const Header& h, const uint8_t* p, size_t n, Body* out) {
  const MsgType t = h.type;
  if (n != h.length) return Bad(t, "payload is " + std::to_string(n) + " bytes, header says " + std::to_string(h.length));
  switch (t) {
    case MsgType::kHello: {
      if (n < kHelloFixed) return Bad(t, "truncated (" + std::to_string(n) + " bytes)");
      Hello m;
      m.page_size = Get32(p);
      uint8_t path = p[4];
      if (path > uint8_t(DataPath::kRdma)) return Bad(t, "unknown data path " + std::to_string(path));
      m.data_path = DataPath(path);
      if (p[5] != 0) return Bad(t, "reserved byte is not zero");
      uint16_t token_len = Get16(p + 6);
      if (token_len > kMaxTokenBytes) return Bad(t, "token longer than " + std::to_string(kMaxTokenBytes) + " bytes");
      m.join_session = Get64(p + 8);
      std::memcpy(m.join_secret, p + 16, kSecretBytes);
      TIERMEM_RETURN_IF_ERROR(NeedExact(t, n, kHelloFixed + token_len));
      m.token.assign(reinterpret_cast<const char*>(p + kHelloFixed), token_len);
      *out = std::move(m);
      return Status::Ok();
    }
    case MsgType::kHelloOk: {
      TIERMEM_RETURN_IF_ERROR(NeedExact(t, n, kHelloOkSize));
      HelloOk m;
      m.session = Get64(p);
      std::memcpy(m.secret, p + 8, kSecretBytes);
      m.capacity_pages = Get64(p + 24);
      m.quota_pages = Get64(p + 32);
      m.page_size = Get32(p + 40);
      m.rdma_available = p[44];
      if (m.rdma_available > 1) return Bad(t, "rdma flag is not 0 or 1");
      *out = m;
      return Status::Ok();
    }
    case MsgType::kError: {
      if (n < kErrorFixed) return Bad(t, "truncated (" + std::to_string(n) + " bytes)");
      Error m;
      m.code = Get16(p);
      uint16_t len = Get16(p + 2);
      if (len > kMaxErrorText) return Bad(t, "text longer than " + std::to_string(kMaxErrorText));
      TIERMEM_RETURN_IF_ERROR(NeedExact(t, n, kErrorFixed + len));
      if (m.code == 0 || m.code > uint16_t(StatusCode::kInternal)) {
        return Bad(t, "unknown status code " + std::to_string(m.code));
      }
      m.text.assign(reinterpret_cast<const char*>(p + kErrorFixed), len);
      *out = std::move(m);
      return Status::Ok();
    }
    case MsgType::kAlloc: {
      TIERMEM_RETURN_IF_ERROR(NeedExact(t, n, kAllocSize));
      Alloc m;
      m.count = Get64(p);
      if (m.count == 0) return Bad(t, "count is zero");
      *out = m;
      return Status::Ok();
    }
    case MsgType::kAllocOk: {
      TIERMEM_RETURN_IF_ERROR(NeedExact(t, n, kAllocOkSize));
      AllocOk m;
      m.first_slot = Get64(p);
      m.count = Get64(p + 8);
      m.remote_addr = Get64(p + 16);
      m.rkey = Get32(p + 24);
      if (m.count == 0) return Bad(t, "count is zero");
      if (m.first_slot + m.count < m.first_slot) return Bad(t, "slot range wraps around");
      *out = m;
      return Status::Ok();
    }
    case MsgType::kFree: {
      TIERMEM_RETURN_IF_ERROR(NeedExact(t, n, kFreeSize));
      Free m;
      m.first_slot = Get64(p);
      m.count = Get64(p + 8);
      if (m.count == 0) return Bad(t, "count is zero");
      if (m.first_slot + m.count < m.first_slot) return Bad(t, "slot range wraps around");
      *out = m;
      return Status::Ok();
    }
    case MsgType::kStatsOk: {
      TIERMEM_RETURN_IF_ERROR(NeedExact(t, n, kStatsOkSize));
      StatsOk m;
      m.capacity_pages = Get64(p);
      m.used_pages = Get64(p + 8);
      m.session_pages = Get64(p + 16);
      m.quota_pages = Get64(p + 24);
      m.sessions = Get32(p + 32);
      m.connections = Get32(p + 36);
      *out = m;
      return Status::Ok();
    }
    case MsgType::kRead: {
      TIERMEM_RETURN_IF_ERROR(NeedExact(t, n, kReadSize));
      Read m;
      m.slot = Get64(p);
      m.count = Get32(p + 8);
      if (m.count == 0 || m.count > kMaxPagesPerMessage) {
        return Bad(t, "page count " + std::to_string(m.count) + " outside 1.." + std::to_string(kMaxPagesPerMessage));
      }
      if (m.slot + m.count < m.slot) return Bad(t, "slot range wraps around");
      *out = m;
      return Status::Ok();
    }
    case MsgType::kReadOk: {
      if (n < kReadOkFixed) return Bad(t, "truncated (" + std::to_string(n) + " bytes)");
      ReadOk m;
      m.count = Get32(p);
      TIERMEM_RETURN_IF_ERROR(CheckPages(t, m.count, n, kReadOkFixed));
      m.data = p + kReadOkFixed;
      *out = m;
      return Status::Ok();
    }
    case MsgType::kWrite: {
      if (n < kWriteFixed) return Bad(t, "truncated (" + std::to_string(n) + " bytes)");
      Write m;
      m.slot = Get64(p);
      m.count = Get32(p + 8);
      TIERMEM_RETURN_IF_ERROR(CheckPages(t, m.count, n, kWriteFixed));
      if (m.slot + m.count < m.slot) return Bad(t, "slot range wraps around");
      m.data = p + kWriteFixed;
      *out = m;
      return Status::Ok();
    }
    case MsgType::kClients: {
      TIERMEM_RETURN_IF_ERROR(NeedExact(t, n, kClientsSize));
      *out = Clients{Get64(p)};
      return Status::Ok();
    }
    case MsgType::kClientsOk: return ParseClientsOk(p, n, out);
    case MsgType::kReadPart: return ParseReadPart(p, n, out);
    case MsgType::kReadPartOk: return ParseReadPartOk(p, n, out);
    case MsgType::kWritePart: return ParseWritePart(p, n, out);
    case MsgType::kFreeOk: TIERMEM_RETURN_IF_ERROR(NeedExact(t, n, 0)); *out = FreeOk{}; return Status::Ok();
    case MsgType::kStats: TIERMEM_RETURN_IF_ERROR(NeedExact(t, n, 0)); *out = Stats{}; return Status::Ok();
    case MsgType::kGoodbye: TIERMEM_RETURN_IF_ERROR(NeedExact(t, n, 0)); *out = Goodbye{}; return Status::Ok();
    case MsgType::kGoodbyeOk: TIERMEM_RETURN_IF_ERROR(NeedExact(t, n, 0)); *out = GoodbyeOk{}; return Status::Ok();
    case MsgType::kWriteOk: TIERMEM_RETURN_IF_ERROR(NeedExact(t, n, 0)); *out = WriteOk{}; return Status::Ok();
  }
  return InvalidArgument("protocol: unknown message type");
}

Status ParseMessage(const uint8_t* p, size_t n, Message* out) {
  TIERMEM_RETURN_IF_ERROR(ParseHeader(p, n, &out->header));
  size_t have = n - kHeaderSize;
  if (have < out->header.length) {
    return Bad(out->header.type, "truncated payload (" + std::to_string(have) + " of " +
                                     std::to_string(out->header.length) + " bytes)");
  }
  if (have > out->header.length) return Bad(out->header.type, "trailing bytes after the payload");
  return ParseBody(out->header, p + kHeaderSize, have, &out->body);
}

MsgType TypeOf(const Body& body) {
  return MsgType(body.index() + 1);  // the variant's order is the type numbering
}

bool ConstantTimeEqual(const void* a, size_t na, const void* b, size_t nb) {
  // Compare over the longer length so that timing depends only on lengths, never on where the
  // first difference is.
  const auto* pa = static_cast<const volatile uint8_t*>(a);
  const auto* pb = static_cast<const volatile uint8_t*>(b);
  size_t n = na > nb ? na : nb;
  uint8_t diff = na == nb ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    uint8_t x = i < na ? pa[i] : 0;
    uint8_t y = i < nb ? pb[i] : 0;
    diff |= uint8_t(x ^ y);
  }
  return diff == 0;
}

}  // namespace tiermem::remote::proto

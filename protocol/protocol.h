// The tiermem-memd wire protocol: versioned, length-prefixed messages, little-endian, used by the
// control path of both transports and by the TCP data path. docs/protocol.md describes every
// byte; this header is the single source of the constants.
//
// Every message is a 24-byte header followed by `length` payload bytes:
//   u32 magic "TMEM" | u16 version | u16 type | u32 length | u32 flags | u64 request_id
// A reply carries the request's request_id, so requests can be pipelined. A request the server
// refuses is answered with kError (a StatusCode and a short text) instead of its reply type.
//
// Parsing is strict: a truncated buffer, a wrong magic or version, an unknown type, a payload
// longer than the type allows or shorter than its fields, trailing bytes, or an inconsistent
// count is rejected with InvalidArgument and a message saying which. The parser never reads
// outside the buffer it is given and never allocates more than the payload it was given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "tiermem/remote.hpp"
#include "tiermem/status.hpp"

namespace tiermem::remote::proto {

inline constexpr uint32_t kMagic = 0x4d454d54;  // bytes 'T' 'M' 'E' 'M' in little-endian order
inline constexpr uint16_t kVersion = 1;
inline constexpr size_t kHeaderSize = 24;
inline constexpr uint32_t kPageSize = 4096;
inline constexpr uint32_t kMaxPagesPerMessage = 16;  // one Read/Write message moves 1..16 pages
inline constexpr size_t kMaxTokenBytes = 256;
inline constexpr size_t kMaxErrorText = 512;
inline constexpr size_t kSecretBytes = 16;
// The largest payload of any message: a Write of kMaxPagesPerMessage pages.
inline constexpr uint32_t kMaxPayload = 12 + kMaxPagesPerMessage * kPageSize;

// The private data of an RDMA client's rdma_connect: which session (opened on the TCP control
// connection) the queue pair belongs to, and that session's secret. Host byte order: both ends
// of a queue pair run the same build.
struct RdmaConnectData {
  uint64_t session;
  uint8_t secret[kSecretBytes];
};

enum class MsgType : uint16_t {
  kHello = 1,
  kHelloOk = 2,
  kError = 3,
  kAlloc = 4,
  kAllocOk = 5,
  kFree = 6,
  kFreeOk = 7,
  kStats = 8,
  kStatsOk = 9,
  kGoodbye = 10,
  kGoodbyeOk = 11,
  kRead = 12,
  kReadOk = 13,
  kWrite = 14,
  kWriteOk = 15,
  // Added in memd's second release, still protocol version 1: a server that predates them
  // refuses them as an unknown type (error, then it closes the connection), which a client
  // reports as "this server does not list clients".
  kClients = 16,
  kClientsOk = 17,
  // Added in memd's third release, still protocol version 1: part of one page (a piece of an
  // erasure-coded page). A server that predates them refuses them as an unknown type (error,
  // then it closes the connection). write_part is answered with write_ok.
  kReadPart = 18,
  kReadPartOk = 19,
  kWritePart = 20,
};
inline constexpr MsgType kLastMsgType = MsgType::kWritePart;
const char* MsgTypeName(MsgType type);  // "hello", ... or "unknown"

// What kind of data path the client will use: the server registers memory for RDMA clients.
enum class DataPath : uint8_t { kTcp = 0, kRdma = 1 };

struct Header {
  uint16_t version = kVersion;
  MsgType type = MsgType::kHello;
  uint32_t length = 0;  // payload bytes after the header
  uint32_t flags = 0;   // reserved, must be 0
  uint64_t request_id = 0;
};

// Client -> server, first message on a connection. join_session != 0 attaches this connection
// to an existing session (same client, same slots), proven by join_secret.
struct Hello {
  uint32_t page_size = kPageSize;
  DataPath data_path = DataPath::kTcp;
  uint64_t join_session = 0;
  uint8_t join_secret[kSecretBytes] = {};
  std::string token;  // at most kMaxTokenBytes
};
struct HelloOk {
  uint64_t session = 0;
  uint8_t secret[kSecretBytes] = {};
  uint64_t capacity_pages = 0;  // the whole pool
  uint64_t quota_pages = 0;     // what this session may hold
  uint32_t page_size = kPageSize;
  uint8_t rdma_available = 0;   // the server listens with librdmacm
};
struct Error {
  uint16_t code = 0;  // tiermem::StatusCode
  std::string text;   // at most kMaxErrorText
};
struct Alloc {
  uint64_t count = 0;  // pages, >= 1
};
// A contiguous range of slots owned by the session. For RDMA sessions, remote_addr/rkey name
// the memory registration made for exactly this range (remote_addr is the first slot's address).
struct AllocOk {
  uint64_t first_slot = 0;
  uint64_t count = 0;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
};
struct Free {
  uint64_t first_slot = 0;  // must be exactly a range returned by AllocOk
  uint64_t count = 0;
};
struct FreeOk {};
struct Stats {};
// The reply's fields are the public figures of a server (include/tiermem/remote.hpp).
using StatsOk = ::tiermem::RemoteServerStats;
struct Goodbye {};
struct GoodbyeOk {};
struct Read {
  uint64_t slot = 0;
  uint32_t count = 0;  // 1..kMaxPagesPerMessage consecutive slots
};
struct ReadOk {
  const uint8_t* data = nullptr;  // count * kPageSize bytes, points into the parsed buffer
  uint32_t count = 0;
};
struct Write {
  uint64_t slot = 0;
  uint32_t count = 0;
  const uint8_t* data = nullptr;  // count * kPageSize bytes, points into the parsed buffer
};
struct WriteOk {};
// `length` bytes at byte `offset` of one slot: 1 <= length, offset + length <= kPageSize.
struct ReadPart {
  uint64_t slot = 0;
  uint32_t offset = 0;
  uint32_t length = 0;
};
struct ReadPartOk {
  const uint8_t* data = nullptr;  // length bytes, points into the parsed buffer
  uint32_t length = 0;
};
struct WritePart {
  uint64_t slot = 0;
  uint32_t offset = 0;
  uint32_t length = 0;
  const uint8_t* data = nullptr;  // length bytes, points into the parsed buffer
};
// Lists the server's sessions with id > after_session, in id order (0: from the first). A
// reply carries at most kMaxClientsPerMessage; the client asks again after the last id it got
// while `total` says more follow.
struct Clients {
  uint64_t after_session = 0;
};
inline constexpr uint32_t kMaxClientsPerMessage = 512;
inline constexpr size_t kMaxPeerText = 63;
struct ClientEntry {
  uint64_t session = 0;
  uint64_t slots = 0;          // slots the session holds (handed out in chunks), used or not
  uint64_t written_pages = 0;  // of those, slots written since they were handed out
  uint64_t quota_pages = 0;
  uint32_t connections = 0;
  DataPath data_path = DataPath::kTcp;
  uint8_t written_known = 1;   // 0: RDMA writes bypass memd, written_pages counts TCP writes only
  std::string peer;            // "127.0.0.1:40312", the connection that opened it; <= kMaxPeerText
};
struct ClientsOk {
  uint64_t capacity_pages = 0;
  uint64_t reserved_pages = 0;  // slots handed out to all sessions (StatsOk's used_pages)
  uint64_t written_pages = 0;   // slots written by all sessions (TCP writes)
  uint32_t total = 0;           // sessions with id > after_session; entries.size() <= total
  std::vector<ClientEntry> entries;
};

// In type order: TypeOf is the index + 1.
using Body = std::variant<Hello, HelloOk, Error, Alloc, AllocOk, Free, FreeOk, Stats, StatsOk,
                          Goodbye, GoodbyeOk, Read, ReadOk, Write, WriteOk, Clients, ClientsOk,
                          ReadPart, ReadPartOk, WritePart>;

struct Message {
  Header header;
  Body body;
};

// Parses and validates a header (exactly kHeaderSize bytes at p; n is what is available).
Status ParseHeader(const uint8_t* p, size_t n, Header* out);
// The largest payload a message of `type` may have (for a reader to refuse before buffering).
uint32_t MaxPayload(MsgType type);
// Parses the payload of a message whose header was already parsed. Pointers in the result point
// into `payload`.
Status ParseBody(const Header& h, const uint8_t* payload, size_t n, Body* out);
// Header + body in one buffer of exactly n bytes (what the fuzzer calls).
Status ParseMessage(const uint8_t* p, size_t n, Message* out);

// Appends one encoded message to `out`. Page data of ReadOk/Write/ReadPartOk/WritePart is copied
// in; use EncodeHeader + the fixed part + the raw bytes to avoid the copy (what the TCP paths do).
void Encode(uint64_t request_id, const Body& body, std::vector<uint8_t>* out);
void EncodeHeader(MsgType type, uint32_t length, uint64_t request_id, uint8_t out[kHeaderSize]);
// The payload bytes before the pages of a Write (slot, count) and a ReadOk (count).
inline constexpr uint32_t kWriteFixed = 12;
inline constexpr uint32_t kReadOkFixed = 4;
void EncodeWriteFixed(uint64_t slot, uint32_t count, uint8_t out[kWriteFixed]);
void EncodeReadOkFixed(uint32_t count, uint8_t out[kReadOkFixed]);
// The payload bytes before the data of a WritePart (slot, offset, length) and a ReadPartOk
// (length).
inline constexpr uint32_t kWritePartFixed = 16;
inline constexpr uint32_t kReadPartOkFixed = 4;
void EncodeWritePartFixed(uint64_t slot, uint32_t offset, uint32_t length, uint8_t out[kWritePartFixed]);
void EncodeReadPartOkFixed(uint32_t length, uint8_t out[kReadPartOkFixed]);

MsgType TypeOf(const Body& body);

// Compares two byte strings in time that depends only on their lengths (for the token).
bool ConstantTimeEqual(const void* a, size_t na, const void* b, size_t nb);

}  // namespace tiermem::remote::proto

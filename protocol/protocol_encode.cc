// The protocol's encoder: one message of any type into a byte vector (protocol.h).
#include <cstring>
#include <variant>
#include <vector>

#include "protocol/protocol.h"
#include "protocol/wire.h"

namespace tiermem::remote::proto {
namespace {

using wire::Put16;
using wire::Put32;
using wire::Put64;

// Appends to a vector with little-endian helpers.
class Writer {
 public:
  explicit Writer(std::vector<uint8_t>* out) : out_(out) {}
  void U8(uint8_t v) { out_->push_back(v); }
  void U16(uint16_t v) { size_t n = Grow(2); Put16(out_->data() + n, v); }
  void U32(uint32_t v) { size_t n = Grow(4); Put32(out_->data() + n, v); }
  void U64(uint64_t v) { size_t n = Grow(8); Put64(out_->data() + n, v); }
  void Bytes(const void* p, size_t len) {
    if (len == 0) return;
    size_t n = Grow(len);
    std::memcpy(out_->data() + n, p, len);
  }
  void Zeros(size_t len) { Grow(len); }

 private:
  size_t Grow(size_t by) {
    size_t n = out_->size();
    out_->resize(n + by, 0);
    return n;
  }
  std::vector<uint8_t>* out_;
};

// One payload writer per message type; the types without a payload write nothing.
void Put(Writer& w, const Hello& m) {
  size_t len = m.token.size() < kMaxTokenBytes ? m.token.size() : kMaxTokenBytes;
  w.U32(m.page_size);
  w.U8(uint8_t(m.data_path));
  w.U8(0);
  w.U16(uint16_t(len));
  w.U64(m.join_session);
  w.Bytes(m.join_secret, kSecretBytes);
  w.Bytes(m.token.data(), len);
}

void Put(Writer& w, const HelloOk& m) {
  w.U64(m.session);
  w.Bytes(m.secret, kSecretBytes);
  w.U64(m.capacity_pages);
  w.U64(m.quota_pages);
  w.U32(m.page_size);
  w.U8(m.rdma_available);
  w.Zeros(3);
}

void Put(Writer& w, const Error& m) {
  size_t len = m.text.size() < kMaxErrorText ? m.text.size() : kMaxErrorText;
  w.U16(m.code);
  w.U16(uint16_t(len));
  w.Bytes(m.text.data(), len);
}

void Put(Writer& w, const Alloc& m) { w.U64(m.count); }

void Put(Writer& w, const AllocOk& m) {
  w.U64(m.first_slot);
  w.U64(m.count);
  w.U64(m.remote_addr);
  w.U32(m.rkey);
  w.U32(0);
}

void Put(Writer& w, const Free& m) {
  w.U64(m.first_slot);
  w.U64(m.count);
}

void Put(Writer& w, const StatsOk& m) {
  w.U64(m.capacity_pages);
  w.U64(m.used_pages);
  w.U64(m.session_pages);
  w.U64(m.quota_pages);
  w.U32(m.sessions);
  w.U32(m.connections);
}

void Put(Writer& w, const Read& m) {
  w.U64(m.slot);
  w.U32(m.count);
}

void Put(Writer& w, const ReadOk& m) {
  w.U32(m.count);
  w.Bytes(m.data, size_t(m.count) * kPageSize);
}

void Put(Writer& w, const Write& m) {
  w.U64(m.slot);
  w.U32(m.count);
  w.Bytes(m.data, size_t(m.count) * kPageSize);
}

void Put(Writer& w, const Clients& m) { w.U64(m.after_session); }

void Put(Writer& w, const ClientsOk& m) {
  size_t count = m.entries.size() < kMaxClientsPerMessage ? m.entries.size() : kMaxClientsPerMessage;
  w.U64(m.capacity_pages);
  w.U64(m.reserved_pages);
  w.U64(m.written_pages);
  w.U32(m.total > count ? m.total : uint32_t(count));
  w.U32(uint32_t(count));
  for (size_t i = 0; i < count; ++i) {
    const ClientEntry& c = m.entries[i];
    size_t len = c.peer.size() < kMaxPeerText ? c.peer.size() : kMaxPeerText;
    w.U64(c.session);
    w.U64(c.slots);
    w.U64(c.written_pages);
    w.U64(c.quota_pages);
    w.U32(c.connections);
    w.U8(uint8_t(c.data_path));
    w.U8(c.written_known ? 1 : 0);
    w.U8(uint8_t(len));
    w.U8(0);
    w.Bytes(c.peer.data(), len);
    w.Zeros(64 - len);
  }
}

void Put(Writer& w, const ReadPart& m) {
  w.U64(m.slot);
  w.U32(m.offset);
  w.U32(m.length);
}

void Put(Writer& w, const ReadPartOk& m) {
  w.U32(m.length);
  w.Bytes(m.data, m.length);
}

void Put(Writer& w, const WritePart& m) {
  w.U64(m.slot);
  w.U32(m.offset);
  w.U32(m.length);
  w.Bytes(m.data, m.length);
}

void Put(Writer&, const FreeOk&) {}
void Put(Writer&, const Stats&) {}
void Put(Writer&, const Goodbye&) {}
void Put(Writer&, const GoodbyeOk&) {}
void Put(Writer&, const WriteOk&) {}

}  // namespace

void EncodeHeader(MsgType type, uint32_t length, uint64_t request_id, uint8_t out[kHeaderSize]) {
  Put32(out, kMagic);
  Put16(out + 4, kVersion);
  Put16(out + 6, uint16_t(type));
  Put32(out + 8, length);
  Put32(out + 12, 0);
  Put64(out + 16, request_id);
}

void EncodeWriteFixed(uint64_t slot, uint32_t count, uint8_t out[kWriteFixed]) {
  Put64(out, slot);
  Put32(out + 8, count);
}

void EncodeReadOkFixed(uint32_t count, uint8_t out[kReadOkFixed]) { Put32(out, count); }

void EncodeWritePartFixed(uint64_t slot, uint32_t offset, uint32_t length, uint8_t out[kWritePartFixed]) {
  Put64(out, slot);
  Put32(out + 8, offset);
  Put32(out + 12, length);
}

void EncodeReadPartOkFixed(uint32_t length, uint8_t out[kReadPartOkFixed]) { Put32(out, length); }

void Encode(uint64_t request_id, const Body& body, std::vector<uint8_t>* out) {
  size_t start = out->size();
  out->resize(start + kHeaderSize);
  Writer w(out);
  std::visit([&](const auto& m) { Put(w, m); }, body);
  EncodeHeader(TypeOf(body), uint32_t(out->size() - start - kHeaderSize), request_id, out->data() + start);
}

}  // namespace tiermem::remote::proto

// One TCP connection of memd: reads requests, answers them in order, batches replies.
#include <cerrno>
#include <cstring>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <vector>

#include "tools/memd/server.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older C library headers lack it
#endif

namespace tiermem::memd {
namespace {

class Out {
 public:
  explicit Out(int fd) : fd_(fd) {}
  std::vector<uint8_t> buf;
  bool Flush() {
    size_t off = 0;
    while (off < buf.size()) {
      ssize_t w = send(fd_, buf.data() + off, buf.size() - off, MSG_NOSIGNAL);
      if (w < 0) {
        if (errno == EINTR) continue;
        return false;
      }
      off += size_t(w);
    }
    buf.clear();
    return true;
  }

 private:
  int fd_;
};

void PutError(std::vector<uint8_t>* out, uint64_t id, const Status& s) {
  proto::Encode(id, proto::Error{uint16_t(s.code()), s.message()}, out);
}

// A read or write of slots the session does not hold: logged, answered with PermissionDenied,
// and nothing of the server's memory is touched.
void RefuseForeignSlots(std::vector<uint8_t>* out, uint64_t id, const std::string& peer, uint64_t session,
                        const char* op, uint64_t slot, uint32_t count) {
  MemdLog("warn", "%s: session %llu: refused %s of slots [%llu, +%u): not its own", peer.c_str(),
          (unsigned long long)session, op, (unsigned long long)slot, count);
  PutError(out, id, PermissionDenied("slots [" + std::to_string(slot) + ", +" + std::to_string(count) +
                                     ") are not this session's"));
}

// Appends a reply header for `payload` bytes; returns where the payload goes.
uint8_t* AppendReply(std::vector<uint8_t>* out, proto::MsgType type, size_t payload, uint64_t id) {
  size_t n = out->size();
  out->resize(n + proto::kHeaderSize + payload);
  proto::EncodeHeader(type, uint32_t(payload), id, out->data() + n);
  return out->data() + n + proto::kHeaderSize;
}

// Maps the slots of a write of several pages in one call before the copy into them. A slot not
// written since memd started or since it was freed (MADV_DONTNEED) is not mapped, and the copy
// would take a page fault for each of its pages: with the pool's faults about half of memd's CPU
// for a stream of new pages, one populate per message (up to 16 pages) costs less than 16 traps.
// Slots already mapped cost one page-table walk. A kernel before 5.14 refuses (EINVAL), and the
// copy faults them in as before.
void PopulateForWrite(uint8_t* slots, uint32_t count) {
  if (count > 1) (void)madvise(slots, size_t(count) * proto::kPageSize, MADV_POPULATE_WRITE);
}

// Answers a read, write, read_part or write_part of session `s` (which holds no lock). Each is
// checked against the session's own allocations under its shared lock.
void ServeData(Server& srv, Session& s, uint64_t id, const proto::Body& body, const std::string& peer,
               std::vector<uint8_t>* out) {
  std::shared_lock<std::shared_mutex> lock(s.mu);
  if (auto* m = std::get_if<proto::Read>(&body)) {
    if (!srv.Owns(s, m->slot, m->count)) return RefuseForeignSlots(out, id, peer, s.id, "read", m->slot, m->count);
    size_t bytes = size_t(m->count) * proto::kPageSize;
    uint8_t* p = AppendReply(out, proto::MsgType::kReadOk, proto::kReadOkFixed + bytes, id);
    proto::EncodeReadOkFixed(m->count, p);
    std::memcpy(p + proto::kReadOkFixed, srv.SlotAddress(m->slot), bytes);
  } else if (auto* m = std::get_if<proto::ReadPart>(&body)) {
    if (!srv.Owns(s, m->slot, 1)) return RefuseForeignSlots(out, id, peer, s.id, "part read", m->slot, 1);
    uint8_t* p = AppendReply(out, proto::MsgType::kReadPartOk, proto::kReadPartOkFixed + m->length, id);
    proto::EncodeReadPartOkFixed(m->length, p);
    std::memcpy(p + proto::kReadPartOkFixed, srv.SlotAddress(m->slot) + m->offset, m->length);
  } else if (auto* m = std::get_if<proto::Write>(&body)) {
    const Allocation* a = srv.OwnerOf(s, m->slot, m->count);
    if (a == nullptr) return RefuseForeignSlots(out, id, peer, s.id, "write", m->slot, m->count);
    PopulateForWrite(srv.SlotAddress(m->slot), m->count);
    std::memcpy(srv.SlotAddress(m->slot), m->data, size_t(m->count) * proto::kPageSize);
    Server::NoteWrite(s, *a, m->slot, m->count);
    proto::Encode(id, proto::WriteOk{}, out);
  } else if (auto* m = std::get_if<proto::WritePart>(&body)) {
    const Allocation* a = srv.OwnerOf(s, m->slot, 1);
    if (a == nullptr) return RefuseForeignSlots(out, id, peer, s.id, "part write", m->slot, 1);
    std::memcpy(srv.SlotAddress(m->slot) + m->offset, m->data, m->length);
    Server::NoteWrite(s, *a, m->slot, 1);  // the slot now holds data, however little of it
    proto::Encode(id, proto::WriteOk{}, out);
  }
}

}  // namespace

void Server::ServeConnection(Conn* c) {
  const int fd = c->fd;
  const std::string& peer = c->peer;
  std::shared_ptr<Session> session;
  Out out(fd);
  std::vector<uint8_t> in(4 * (proto::kHeaderSize + proto::kMaxPayload));
  size_t in_len = 0;
  bool close_conn = false;
  std::string why;  // why the connection ends, when it is the client's fault

  while (!close_conn && !stopping_) {
    // Answer everything complete in the buffer, then flush replies in one send.
    size_t off = 0;
    while (!close_conn) {
      size_t have = in_len - off;
      if (have < proto::kHeaderSize) break;
      proto::Header h;
      Status st = proto::ParseHeader(in.data() + off, have, &h);
      if (!st.ok()) {
        why = st.message();
        PutError(&out.buf, 0, st);
        close_conn = true;
        break;
      }
      if (have < proto::kHeaderSize + h.length) break;
      const uint8_t* payload = in.data() + off + proto::kHeaderSize;
      off += proto::kHeaderSize + h.length;
      proto::Body body;
      st = proto::ParseBody(h, payload, h.length, &body);
      if (!st.ok()) {
        why = st.message();
        PutError(&out.buf, h.request_id, st);
        close_conn = true;
        break;
      }
      const uint64_t id = h.request_id;
      if (!session) {
        auto* hello = std::get_if<proto::Hello>(&body);
        if (hello == nullptr) {
          why = std::string("first message is ") + proto::MsgTypeName(h.type) + ", not hello";
          PutError(&out.buf, id, InvalidArgument(why));
          close_conn = true;
          break;
        }
        bool created = false;
        auto s = Hello(*hello, peer, &created);
        if (!s.ok()) {
          why = "hello refused: " + s.status().message();
          PutError(&out.buf, id, s.status());
          close_conn = true;
          break;
        }
        session = *s;
        MemdLog("info", "%s: %s session %llu (%s)", peer.c_str(), created ? "opened" : "joined",
                (unsigned long long)session->id, session->rdma ? "rdma" : "tcp");
        timeval tv{0, 0};  // no idle limit once authenticated
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        proto::HelloOk ok;
        ok.session = session->id;
        std::memcpy(ok.secret, session->secret, sizeof(ok.secret));
        ok.capacity_pages = capacity_pages_;
        ok.quota_pages = quota_pages_;
        ok.rdma_available = rdma_ ? 1 : 0;
        proto::Encode(id, ok, &out.buf);
        continue;
      }
      Session& s = *session;
      switch (h.type) {
        case proto::MsgType::kRead:
        case proto::MsgType::kWrite:
        case proto::MsgType::kReadPart:
        case proto::MsgType::kWritePart:
          ServeData(*this, s, id, body, peer, &out.buf);
          break;
        case proto::MsgType::kAlloc: {
          auto r = AllocSlots(s, std::get<proto::Alloc>(body).count);
          if (!r.ok()) {
            MemdLog("warn", "%s: session %llu: alloc refused: %s", peer.c_str(), (unsigned long long)s.id,
                    r.status().message().c_str());
            PutError(&out.buf, id, r.status());
          } else {
            proto::Encode(id, *r, &out.buf);
          }
          break;
        }
        case proto::MsgType::kFree: {
          auto& m = std::get<proto::Free>(body);
          Status fs = FreeSlots(s, m.first_slot, m.count);
          if (!fs.ok()) {
            MemdLog("warn", "%s: session %llu: %s", peer.c_str(), (unsigned long long)s.id, fs.message().c_str());
            PutError(&out.buf, id, fs);
          } else {
            proto::Encode(id, proto::FreeOk{}, &out.buf);
          }
          break;
        }
        case proto::MsgType::kStats:
          proto::Encode(id, StatsFor(s), &out.buf);
          break;
        case proto::MsgType::kClients:
          proto::Encode(id, ClientsAfter(std::get<proto::Clients>(body).after_session), &out.buf);
          break;
        case proto::MsgType::kGoodbye:
          proto::Encode(id, proto::GoodbyeOk{}, &out.buf);
          close_conn = true;
          break;
        default:
          why = std::string("unexpected message ") + proto::MsgTypeName(h.type) + " from a client";
          PutError(&out.buf, id, InvalidArgument(why));
          close_conn = true;
          break;
      }
    }
    if (off > 0) {
      std::memmove(in.data(), in.data() + off, in_len - off);
      in_len -= off;
    }
    if (!out.buf.empty() && !out.Flush()) break;  // the client went away
    if (close_conn) break;
    ssize_t r = recv(fd, in.data() + in_len, in.size() - in_len, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      why = "no hello within " + std::to_string(options_.hello_timeout_ms) + " ms";
      break;
    }
    if (r <= 0) {
      if (in_len > 0) why = "connection closed in the middle of a message (" + std::to_string(in_len) + " bytes)";
      break;
    }
    in_len += size_t(r);
  }
  if (!why.empty()) MemdLog("warn", "%s: refused: %s; closing the connection", peer.c_str(), why.c_str());
  if (session) Release(session, peer);
  {
    std::lock_guard<std::mutex> lock(mu_);
    --live_conns_;
    close(c->fd);  // under mu_, so Reap never calls shutdown on a reused descriptor
    c->done = true;
  }
}

}  // namespace tiermem::memd

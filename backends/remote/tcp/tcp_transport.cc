#include "backends/remote/tcp/tcp_transport.h"

#include <cerrno>
#include <cstring>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/net.h"
#include "base/os.h"
#include "base/tsan.h"

namespace tiermem::remote {
namespace {

// Flush when this much is queued, so a long batch of posts does not buffer without bound.
constexpr size_t kFlushThreshold = 256 * 1024;
constexpr size_t kInBuffer = 2 * (proto::kHeaderSize + proto::kMaxPayload);
// Sent in place of a posted page that could not be read (SkipUnreadablePages).
alignas(4096) const uint8_t kZeroPageBytes[kPage] = {};
const void* const kZeroPage = kZeroPageBytes;
// EFAULTs in a row with every unsent page readable before the connection is given up.
constexpr int kMaxEfaultRetries = 3;

Status ErrorToStatus(const proto::Error& e, const std::string& server) {
  return Status(StatusCode(e.code), server + ": " + e.text);
}

}  // namespace

TcpTransport::TcpTransport(Endpoint endpoint, proto::DataPath path)
    : endpoint_(std::move(endpoint)), path_(path) {
  in_.resize(kInBuffer);
  out_.reserve(64 * 1024);  // headers, reads and control messages; pages are not copied in
  segs_.reserve(kFlushThreshold / kPage + 64);
}

TcpTransport::~TcpTransport() {
  if (fd_ >= 0) close(fd_);
}

Status TcpTransport::CheckUsable() const {
  if (!broken_.ok()) return broken_;
  if (fd_ < 0) return Unavailable(name() + ": not connected");
  return Status::Ok();
}

Status TcpTransport::Connect(const std::string& token, uint32_t timeout_ms, const SessionTicket* join) {
  if (fd_ >= 0) return InvalidArgument(name() + ": already connected");
  timeout_ms_ = timeout_ms == 0 ? 5000 : timeout_ms;
  auto fd = net::ConnectTcp(endpoint_.host, endpoint_.port, timeout_ms_);
  if (!fd.ok()) return Unavailable("memory server " + name() + ": " + fd.status().message());
  fd_ = *fd;
  broken_ = Status::Ok();
  proto::Hello hello;
  hello.data_path = path_;
  hello.token = token;
  if (join != nullptr) {
    hello.join_session = join->session;
    std::memcpy(hello.join_secret, join->secret, sizeof(hello.join_secret));
  }
  auto reply = Call(hello);
  if (!reply.ok()) {
    close(fd_);
    fd_ = -1;
    return reply.status();
  }
  auto& ok = std::get<proto::HelloOk>(*reply);
  ticket_.session = ok.session;
  std::memcpy(ticket_.secret, ok.secret, sizeof(ticket_.secret));
  quota_pages_ = ok.quota_pages;
  capacity_pages_ = ok.capacity_pages;
  return Status::Ok();
}

StatusOr<proto::Body> TcpTransport::Call(const proto::Body& req) {
  TIERMEM_RETURN_IF_ERROR(CheckUsable());
  uint64_t id = next_id_++;
  proto::Encode(id, req, &out_);
  proto::MsgType expect = proto::MsgType(uint16_t(proto::TypeOf(req)) + 1);
  pending_.push_back(Pending{id, expect, true, 0, nullptr, 0, false, 1});
  control_done_ = false;
  last_progress_ns_ = os::MonotonicNanos();
  in_call_ = true;
  while (!control_done_) {
    Status s = Pump(int(timeout_ms_));
    if (!s.ok() && !control_done_) {
      in_call_ = false;
      return s;
    }
  }
  in_call_ = false;
  control_done_ = false;
  if (auto* e = std::get_if<proto::Error>(&control_reply_)) return ErrorToStatus(*e, name());
  return std::move(control_reply_);
}

StatusOr<SlotRange> TcpTransport::AllocSlots(uint64_t count) {
  TIERMEM_ASSIGN_OR_RETURN(proto::Body b, Call(proto::Alloc{count}));
  auto& ok = std::get<proto::AllocOk>(b);
  if (ok.count != count) return Internal(name() + ": server returned " + std::to_string(ok.count) + " slots, asked " + std::to_string(count));
  return SlotRange{ok.first_slot, ok.count, ok.remote_addr, ok.rkey};
}

Status TcpTransport::FreeSlots(const SlotRange& range) {
  TIERMEM_ASSIGN_OR_RETURN(proto::Body b, Call(proto::Free{range.first, range.count}));
  (void)b;
  return Status::Ok();
}

StatusOr<ServerStats> TcpTransport::Stats() {
  TIERMEM_ASSIGN_OR_RETURN(proto::Body b, Call(proto::Stats{}));
  auto& s = std::get<proto::StatsOk>(b);
  return s;
}

StatusOr<proto::ClientsOk> TcpTransport::Clients(uint64_t after_session) {
  auto b = Call(proto::Clients{after_session});
  if (!b.ok()) {
    // A server older than the message refuses its type and closes the connection.
    if (b.status().message().find("unknown message type") != std::string::npos) {
      return NotSupported("memory server " + name() +
                          " does not list clients (a tiermem-memd older than the clients message)");
    }
    return b.status();
  }
  return std::move(std::get<proto::ClientsOk>(*b));
}

uint8_t* TcpTransport::AppendMessage(proto::MsgType type, uint32_t payload, uint64_t id) {
  size_t n = out_.size();
  out_.resize(n + proto::kHeaderSize + payload);
  proto::EncodeHeader(type, payload, id, out_.data() + n);
  return out_.data() + n + proto::kHeaderSize;
}

Status TcpTransport::Queue(const Pending& p) {
  if (pending_.empty()) last_progress_ns_ = os::MonotonicNanos();
  pending_.push_back(p);
  if (Unsent() - sent_ >= kFlushThreshold) return Pump(0);
  return Status::Ok();
}

bool TcpTransport::ExtendWrite(const SlotRange& range, uint64_t slot, const void* page, uint64_t cookie) {
  // memd accepts a write only within one of its allocations: consecutive slot numbers may be two.
  if (open_end_ == 0 || out_.size() != open_end_ || sent_ > open_pos_ || slot != open_next_slot_ ||
      open_count_ >= proto::kMaxPagesPerMessage || range.first != open_range_first_ ||
      slot - range.first >= range.count) {
    return false;
  }
  const Pending& head = pending_[pending_.size() - 1];  // the message's last page; its id is the message's
  segs_.push_back(Seg{open_end_, page});
  ++open_count_;
  ++open_next_slot_;
  proto::EncodeHeader(proto::MsgType::kWrite, uint32_t(proto::kWriteFixed + open_count_ * kPage), head.request_id,
                      out_.data() + open_at_);
  proto::EncodeWriteFixed(open_next_slot_ - open_count_, open_count_, out_.data() + open_at_ + proto::kHeaderSize);
  // The first entry of the message counts its pages; this page's entry follows the others.
  pending_[pending_.size() - open_count_ + 1].pages = open_count_;
  Pending entry{head.request_id, proto::MsgType::kWriteOk, false, cookie, nullptr, 0, false, 0};
  entry.src = page;
  pending_.push_back(entry);
  return true;
}

Status TcpTransport::PostWrite(const SlotRange& range, uint64_t slot, const void* page, uint64_t cookie) {
  TIERMEM_RETURN_IF_ERROR(CheckUsable());
  if (ExtendWrite(range, slot, page, cookie)) {
    if (Unsent() - sent_ >= kFlushThreshold) return Pump(0);
    return Status::Ok();
  }
  uint64_t id = next_id_++;
  open_at_ = out_.size();
  open_pos_ = Unsent();
  // The header and fixed part only: the page follows them from where it is.
  const size_t n = out_.size();
  out_.resize(n + proto::kHeaderSize + proto::kWriteFixed);
  proto::EncodeHeader(proto::MsgType::kWrite, uint32_t(proto::kWriteFixed + kPage), id, out_.data() + n);
  proto::EncodeWriteFixed(slot, 1, out_.data() + n + proto::kHeaderSize);
  open_end_ = out_.size();
  segs_.push_back(Seg{open_end_, page});
  open_next_slot_ = slot + 1;
  open_count_ = 1;
  open_range_first_ = range.first;
  Pending entry{id, proto::MsgType::kWriteOk, false, cookie, nullptr, 0, false, 1};
  entry.src = page;
  return Queue(entry);
}

Status TcpTransport::PostRead(const SlotRange& range, uint64_t slot, void* page, uint64_t cookie) {
  (void)range;
  TIERMEM_RETURN_IF_ERROR(CheckUsable());
  uint64_t id = next_id_++;
  proto::Encode(id, proto::Read{slot, 1}, &out_);
  return Queue(Pending{id, proto::MsgType::kReadOk, false, cookie, page, uint32_t(kPage), false, 1});
}

Status TcpTransport::PostWritePart(const SlotRange& range, uint64_t slot, uint32_t offset, uint32_t length,
                                   const void* data, uint64_t cookie) {
  (void)range;
  TIERMEM_RETURN_IF_ERROR(CheckPart(offset, length));
  TIERMEM_RETURN_IF_ERROR(CheckUsable());
  uint64_t id = next_id_++;
  uint8_t* p = AppendMessage(proto::MsgType::kWritePart, proto::kWritePartFixed + length, id);
  proto::EncodeWritePartFixed(slot, offset, length, p);
  std::memcpy(p + proto::kWritePartFixed, data, length);
  return Queue(Pending{id, proto::MsgType::kWriteOk, false, cookie, nullptr, 0, true, 1});
}

Status TcpTransport::PostReadPart(const SlotRange& range, uint64_t slot, uint32_t offset, uint32_t length,
                                  void* data, uint64_t cookie) {
  (void)range;
  TIERMEM_RETURN_IF_ERROR(CheckPart(offset, length));
  TIERMEM_RETURN_IF_ERROR(CheckUsable());
  uint64_t id = next_id_++;
  proto::Encode(id, proto::ReadPart{slot, offset, length}, &out_);
  return Queue(Pending{id, proto::MsgType::kReadPartOk, false, cookie, data, length, true, 1});
}

StatusOr<size_t> TcpTransport::Poll(Completion* out, size_t max, int timeout_ms) {
  if (timeout_ms < 0) timeout_ms = int(timeout_ms_);
  if (ready_.empty() && broken_.ok() && fd_ >= 0) {
    // Send everything queued and take what has arrived, then wait if nothing finished yet.
    Status s = Pump(0);
    uint64_t deadline = os::MonotonicNanos() + uint64_t(timeout_ms) * 1000000ull;
    while (s.ok() && ready_.empty() && !pending_.empty()) {
      uint64_t now = os::MonotonicNanos();
      if (now >= deadline) break;
      s = Pump(int((deadline - now + 999999) / 1000000));
    }
  }
  size_t n = 0;
  while (n < max && !ready_.empty()) {
    out[n++] = std::move(ready_.front());
    ready_.pop_front();
  }
  if (n == 0 && !broken_.ok() && pending_.empty()) return broken_;
  return n;
}

Status TcpTransport::Send() {
  TIERMEM_RETURN_IF_ERROR(CheckUsable());
  return Flush();
}

Status TcpTransport::Flush() {
  constexpr size_t kMaxIov = 256;  // well under IOV_MAX (1024)
  iovec iov[kMaxIov];
  const size_t total = Unsent();
  while (sent_ < total) {
    // The pieces from sent_ on, as many as fit: out_'s bytes between pages, and the pages.
    size_t n = 0, pos = 0, out_at = 0;
    auto add = [&](const void* base, size_t len) {
      if (len == 0 || n == kMaxIov) return;
      if (pos + len > sent_) {
        const size_t skip = sent_ > pos ? sent_ - pos : 0;
        iov[n++] = iovec{const_cast<uint8_t*>(static_cast<const uint8_t*>(base)) + skip, len - skip};
      }
      pos += len;
    };
    for (size_t i = 0; i < segs_.size() && n < kMaxIov; ++i) {
      add(out_.data() + out_at, segs_[i].out_end - out_at);
      add(segs_[i].page, kPage);
      out_at = segs_[i].out_end;
    }
    add(out_.data() + out_at, out_.size() - out_at);
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n;
    ssize_t w;
    {
      // The pages are the caller's, unchanged until their completion (transport.h): the pager
      // keeps them write-protected meanwhile, which ThreadSanitizer cannot see (base/tsan.h).
      TsanIgnoreAccesses pages_are_protected;
      w = sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::Ok();
      // A posted page made unreadable meanwhile: zeros in its place, and it fails alone. An
      // EFAULT with every page readable is retried a few times (a protection lifted between
      // the send and the check), then taken as the connection's own failure.
      if (errno == EFAULT && (SkipUnreadablePages() || ++efault_retries_ <= kMaxEfaultRetries)) continue;
      return Fail(Unavailable("memory server " + name() + ": connection lost (" + strerror(errno) + ")"));
    }
    efault_retries_ = 0;
    sent_ += size_t(w);
  }
  out_.clear();
  segs_.clear();
  sent_ = 0;
  open_end_ = 0;  // sent: no longer extended
  return Status::Ok();
}

bool TcpTransport::SkipUnreadablePages() {
  // Only pages not yet sent whole can have failed; out_ is ours and always readable. A
  // partly sent page keeps its sent bytes: the slot holds unspecified bytes either way.
  bool found = false;
  size_t pos = 0, out_at = 0;
  for (Seg& seg : segs_) {
    pos += seg.out_end - out_at;
    out_at = seg.out_end;
    const size_t page_end = pos + kPage;
    if (page_end > sent_ && seg.page != kZeroPage && !os::CanRead(seg.page, kPage)) {
      for (Pending& p : pending_) {
        if (p.src == seg.page && !p.unreadable) {
          p.unreadable = true;
          break;
        }
      }
      seg.page = kZeroPage;
      found = true;
    }
    pos = page_end;
  }
  if (found) efault_retries_ = 0;
  return found;
}

Status TcpTransport::ReadAvailable() {
  for (;;) {
    if (in_len_ == in_.size()) return Status::Ok();  // parse first
    const size_t room = in_.size() - in_len_;
    ssize_t r = recv(fd_, in_.data() + in_len_, room, MSG_DONTWAIT);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::Ok();
      return Fail(Unavailable("memory server " + name() + ": connection lost (" + strerror(errno) + ")"));
    }
    if (r == 0) return Fail(Unavailable("memory server " + name() + ": connection closed by the server"));
    in_len_ += size_t(r);
    last_progress_ns_ = os::MonotonicNanos();
    // Parse complete messages.
    size_t off = 0;
    while (in_len_ - off >= proto::kHeaderSize) {
      proto::Header h;
      Status s = proto::ParseHeader(in_.data() + off, in_len_ - off, &h);
      if (!s.ok()) return Fail(Aborted("memory server " + name() + ": " + s.message()));
      if (in_len_ - off < proto::kHeaderSize + h.length) break;
      TIERMEM_RETURN_IF_ERROR(HandleReply(h, in_.data() + off + proto::kHeaderSize));
      off += proto::kHeaderSize + h.length;
    }
    if (off > 0) {
      std::memmove(in_.data(), in_.data() + off, in_len_ - off);
      in_len_ -= off;
    }
    // Less than there was room for: the socket held no more. Another recv would answer EAGAIN,
    // a system call between a fault's reply and its page being installed; bytes that come later
    // make the socket readable for the caller's next wait.
    if (size_t(r) < room) return Status::Ok();
  }
}

Status TcpTransport::HandleReply(const proto::Header& h, const uint8_t* payload) {
  if (h.request_id == 0 && h.type == proto::MsgType::kError) {
    // The server refused a message it could not parse and closes the connection: say why.
    proto::Body body;
    if (proto::ParseBody(h, payload, h.length, &body).ok()) return FailRefused(std::get<proto::Error>(body));
  }
  if (pending_.empty() || pending_.front().request_id != h.request_id) {
    return Fail(Aborted("memory server " + name() + ": reply to request " + std::to_string(h.request_id) +
                        " that is not the oldest outstanding one"));
  }
  Pending p = pending_.front();
  pending_.pop_front();
  proto::Body body;
  Status s = proto::ParseBody(h, payload, h.length, &body);
  if (!s.ok()) return Fail(Aborted("memory server " + name() + ": " + s.message()));
  if (h.type != p.expect && h.type != proto::MsgType::kError) {
    return Fail(Aborted("memory server " + name() + ": unexpected " + proto::MsgTypeName(h.type)));
  }
  if (p.control) {
    control_reply_ = std::move(body);
    control_done_ = true;
    return Status::Ok();
  }
  Completion c;
  c.cookie = p.cookie;
  if (auto* e = std::get_if<proto::Error>(&body)) {
    c.status = ErrorToStatus(*e, name());
  } else if (auto* r = std::get_if<proto::ReadOk>(&body)) {
    if (r->count != 1) return Fail(Aborted("memory server " + name() + ": read returned " + std::to_string(r->count) + " pages"));
    std::memcpy(p.dst, r->data, kPage);
  } else if (auto* rp = std::get_if<proto::ReadPartOk>(&body)) {
    if (rp->length != p.length) {
      return Fail(Aborted("memory server " + name() + ": part read returned " + std::to_string(rp->length) +
                          " bytes, asked " + std::to_string(p.length)));
    }
    std::memcpy(p.dst, rp->data, rp->length);
  }
  const Status status = c.status;
  ready_.push_back(WriteCompletion(p, std::move(c)));
  // A write of several posted pages: each page's entry completes with the message's status.
  for (uint32_t i = 1; i < p.pages; ++i) {
    if (pending_.empty() || pending_.front().request_id != h.request_id || pending_.front().pages != 0) {
      return Fail(Aborted("memory server " + name() + ": lost track of the pages of request " +
                          std::to_string(h.request_id)));
    }
    ready_.push_back(WriteCompletion(pending_.front(), Completion{pending_.front().cookie, status}));
    pending_.pop_front();
  }
  return Status::Ok();
}

Completion TcpTransport::WriteCompletion(const Pending& p, Completion c) const {
  if (!p.unreadable) return c;
  char where[32];
  snprintf(where, sizeof(where), "%p", p.src);
  c.status = InvalidArgument("memory server " + name() + ": the page at " + where +
                                " could not be read when it was sent (zeros were written in its place)");
  c.page = p.src;
  return c;
}

Status TcpTransport::FailRefused(const proto::Error& e) {
  // A server older than read_part/write_part refuses their type: say so rather than "unknown
  // message type 18" (the text keeps those words, which Clients() looks for).
  bool part = false;
  for (const Pending& p : pending_) part = part || p.part;
  if (part && e.text.find("unknown message type") != std::string::npos) {
    return Fail(NotSupported("memory server " + name() + " does not take part reads/writes (" + e.text +
                             ": a tiermem-memd older than the read_part/write_part messages)"));
  }
  return Fail(ErrorToStatus(e, "memory server " + name()));
}

Status TcpTransport::Pump(int wait_ms) {
  TIERMEM_RETURN_IF_ERROR(CheckUsable());
  TIERMEM_RETURN_IF_ERROR(Flush());
  TIERMEM_RETURN_IF_ERROR(ReadAvailable());
  if (wait_ms <= 0 || control_done_ || (!in_call_ && !ready_.empty())) return CheckDeadline();
  if (busy_poll_ns_ > 0 && !in_call_) {
    const uint64_t until = os::MonotonicNanos() + busy_poll_ns_;
    while (ready_.empty() && os::MonotonicNanos() < until) {
      TIERMEM_RETURN_IF_ERROR(Flush());
      TIERMEM_RETURN_IF_ERROR(ReadAvailable());
    }
    if (!ready_.empty()) return Status::Ok();
  }
  pollfd p{fd_, short(POLLIN | (WantsWritable() ? POLLOUT : 0)), 0};
  int n = poll(&p, 1, wait_ms);
  if (n < 0 && errno != EINTR) return Fail(ErrnoToStatus(errno, "poll"));
  if (n > 0) {
    TIERMEM_RETURN_IF_ERROR(Flush());
    TIERMEM_RETURN_IF_ERROR(ReadAvailable());
  }
  return CheckDeadline();
}

Status TcpTransport::CheckDeadline() {
  if (!pending_.empty() && os::MonotonicNanos() - last_progress_ns_ > uint64_t(timeout_ms_) * 1000000ull) {
    return Fail(DeadlineExceeded("memory server " + name() + ": no reply within " +
                                 std::to_string(timeout_ms_) + " ms"));
  }
  return Status::Ok();
}

Status TcpTransport::Fail(Status why) {
  if (broken_.ok()) broken_ = why;
  // Nothing more is sent: the posted pages go back to their owners with the completions below.
  out_.clear();
  segs_.clear();
  sent_ = 0;
  open_end_ = 0;
  for (auto& p : pending_) {
    if (p.control) {
      control_reply_ = proto::Error{uint16_t(why.code()), why.message()};
      control_done_ = true;
    } else {
      ready_.push_back(Completion{p.cookie, why});
    }
  }
  pending_.clear();
  if (fd_ >= 0) {
    close(fd_);
    fd_ = -1;
  }
  return why;
}

void TcpTransport::Close() {
  if (fd_ >= 0 && broken_.ok()) {
    // Best effort goodbye with a short wait; the server frees the session either way.
    uint32_t saved = timeout_ms_;
    timeout_ms_ = saved < 1000 ? saved : 1000;
    auto r = Call(proto::Goodbye{});
    (void)r;
    timeout_ms_ = saved;
  }
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  if (broken_.ok()) broken_ = Unavailable("memory server " + name() + ": connection closed");
}

}  // namespace tiermem::remote

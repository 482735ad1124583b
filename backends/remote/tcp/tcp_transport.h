// The TCP transport: the whole protocol (control and page data) over one socket per connection,
// pipelined: posts are queued in an output buffer and sent when Poll runs (or when the buffer
// grows large), replies are matched to requests in order (memd answers a connection's requests
// in the order it received them). TCP_NODELAY; non-blocking socket driven by poll(2), so a full
// send buffer never deadlocks with a full receive buffer.
//
// Writes to consecutive slots posted one after another are sent as one write message of up to
// kMaxPagesPerMessage pages (while it is still unsent): memd then parses one header, copies
// once and answers once per 16 pages instead of per page, and on this loopback path each
// reply is a wake-up of the waiting thread. Each page still gets its own completion.
//
// A written page is not copied into the output buffer: the buffer holds the messages' headers
// (and every other message), and the pages are sent from where they are, with sendmsg(2) and a
// list of pieces (the transport owns a posted page until its completion, so it may). A page
// that cannot be read when it is sent (EFAULT) is replaced by zeros and fails alone
// (transport.h): one bad address never brings down a connection that carries other pages.
#pragma once

#include <string>
#include <vector>

#include "base/ring_queue.h"
#include "protocol/protocol.h"
#include "backends/remote/transport.h"

namespace tiermem::remote {

class TcpTransport final : public Transport {
 public:
  // `path` kRdma: this connection is the control connection of an RDMA transport.
  explicit TcpTransport(Endpoint endpoint, proto::DataPath path = proto::DataPath::kTcp);
  ~TcpTransport() override;

  Status Connect(const std::string& token, uint32_t timeout_ms, const SessionTicket* join) override;
  SessionTicket ticket() const override { return ticket_; }
  StatusOr<SlotRange> AllocSlots(uint64_t count) override;
  Status FreeSlots(const SlotRange& range) override;
  StatusOr<ServerStats> Stats() override;
  StatusOr<proto::ClientsOk> Clients(uint64_t after_session) override;
  Status PostWrite(const SlotRange& range, uint64_t slot, const void* page, uint64_t cookie) override;
  Status PostRead(const SlotRange& range, uint64_t slot, void* page, uint64_t cookie) override;
  Status PostWritePart(const SlotRange& range, uint64_t slot, uint32_t offset, uint32_t length,
                       const void* data, uint64_t cookie) override;
  Status PostReadPart(const SlotRange& range, uint64_t slot, uint32_t offset, uint32_t length, void* data,
                      uint64_t cookie) override;
  StatusOr<size_t> Poll(Completion* out, size_t max, int timeout_ms) override;
  size_t in_flight() const override { return pending_.size(); }
  // None while requests wait unsent (the socket was full): the caller then waits in Poll, which
  // also waits to send them; a wait for replies alone could outlast the server's last answer.
  int WaitFd() const override { return broken_.ok() ? fd_ : -1; }
  bool WantsWritable() const override { return sent_ < Unsent(); }
  void SetBusyPoll(uint32_t microseconds) override { busy_poll_ns_ = uint64_t(microseconds) * 1000; }
  Status Send() override;
  void Close() override;
  std::string name() const override { return endpoint_.ToString(); }

 private:
  struct Pending {
    uint64_t request_id;
    proto::MsgType expect;
    bool control;
    uint64_t cookie;
    void* dst;        // reads
    uint32_t length;  // reads: the bytes the reply carries for dst
    bool part;        // read_part / write_part
    // A write message carrying several posted pages has one entry per page, all with its
    // request id: the first says how many (`pages`), the others follow it (`pages` 0).
    uint32_t pages;
    const void* src = nullptr;  // a write's page
    bool unreadable = false;    // that page could not be read: zeros went in its place
  };
  // Appends a header for `payload` bytes to out_; returns where the payload goes.
  uint8_t* AppendMessage(proto::MsgType type, uint32_t payload, uint64_t id);
  // Adds `page` to the last queued message when that is an unsent write of `range` ending just
  // before `slot` with room for one more page; false when it is not.
  bool ExtendWrite(const SlotRange& range, uint64_t slot, const void* page, uint64_t cookie);
  // Records a posted data request; flushes when enough is queued.
  Status Queue(const Pending& p);
  // Fails the connection for an error the server sent with request id 0 (a message it refused).
  Status FailRefused(const proto::Error& e);
  // Sends what it can and reads what arrived, waiting up to wait_ms for progress.
  Status Pump(int wait_ms);
  // Fails the connection (DeadlineExceeded) when a request has waited past the timeout with no
  // reply arriving meanwhile.
  Status CheckDeadline();
  Status Flush();
  // After sendmsg failed with EFAULT: every unsent page that cannot be read is sent as zeros
  // and its request marked unreadable (transport.h). False when every page reads (the fault
  // was on a page whose protection was lifted since: sending again will tell).
  bool SkipUnreadablePages();
  // Bytes queued to send: out_ and the pages of segs_ (sent_ of them have gone).
  size_t Unsent() const { return out_.size() + segs_.size() * kPage; }
  Status ReadAvailable();
  Status HandleReply(const proto::Header& h, const uint8_t* payload);
  // A data request's completion `c`, failed with the page's address when it was unreadable.
  Completion WriteCompletion(const Pending& p, Completion c) const;
  // Fails the connection: every pending request completes with `why`.
  Status Fail(Status why);
  // Sends a control request and waits for its reply (data completions are kept).
  StatusOr<proto::Body> Call(const proto::Body& req);
  Status CheckUsable() const;

  Endpoint endpoint_;
  proto::DataPath path_;
  int fd_ = -1;
  uint32_t timeout_ms_ = 5000;
  Status broken_;
  SessionTicket ticket_;
  uint64_t next_id_ = 1;
  // What goes out, in order: out_'s bytes up to segs_[0].out_end, the page segs_[0].page, out_'s
  // bytes up to segs_[1].out_end, its page, ..., then the rest of out_. sent_: bytes of that
  // sequence already sent.
  struct Seg {
    size_t out_end;
    const void* page;
  };
  std::vector<uint8_t> out_;
  std::vector<Seg> segs_;
  size_t sent_ = 0;
  int efault_retries_ = 0;  // consecutive EFAULTs with no unreadable page found
  // The last queued message when it is a write that may take more pages: its header's offset in
  // out_ and its place in the sequence (unsent while sent_ <= open_pos_), out_'s size after its
  // fixed part (it is the last message while out_.size() == open_end_ and segs_ ends with its
  // pages), the slot after its last page, the first slot of the range it writes into, and its
  // page count.
  size_t open_at_ = 0, open_pos_ = 0, open_end_ = 0;
  uint64_t open_next_slot_ = 0, open_range_first_ = 0;
  uint32_t open_count_ = 0;
  std::vector<uint8_t> in_;
  size_t in_len_ = 0;
  // Sized for a full batch of reads and more: they grow past that, but never allocate while the
  // pager's fault thread uses the connection inside a fork() (base/ring_queue.h).
  RingQueue<Pending> pending_{1024};
  RingQueue<Completion> ready_{1024};
  bool control_done_ = false;
  bool in_call_ = false;
  proto::Body control_reply_;
  uint64_t last_progress_ns_ = 0;
  uint64_t busy_poll_ns_ = 0;
};

}  // namespace tiermem::remote

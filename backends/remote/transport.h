// The remote tier's transport: a connection to one tiermem-memd, batched and asynchronous.
//
//   auto t = MakeTransport(ParseEndpoint("tcp://127.0.0.1:7471"));
//   t->Connect(token, timeout_ms);
//   SlotRange r = *t->AllocSlots(1024);
//   t->PostWrite(r.first, page, cookie);      // many of these ...
//   t->Poll(completions, 64, timeout_ms);    // ... then collect what finished
//
// Contract:
// - One thread uses a Transport at a time (it is not internally locked). Connections are cheap;
//   a second connection joins the same session (same slots) with Join(), so e.g. a fault
//   handler and an evicting thread each get their own.
// - A posted buffer belongs to the transport until its completion is returned by Poll: the page
//   of a PostWrite must not change, the page of a PostRead is written at most until then. The
//   same holds for the bytes of PostWritePart / PostReadPart.
// - Part requests (PostWritePart, PostReadPart) move `length` bytes at a byte `offset` of one
//   slot (a piece of an erasure-coded page). A memd that predates them refuses the message as
//   an unknown type and closes the connection: the connection fails, and every in-flight
//   request completes with NotSupported naming the server (over RDMA the NIC moves the bytes
//   and any memd serves them).
// - Control calls (AllocSlots, FreeSlots, Stats, Clients) are synchronous; completions of data requests
//   that arrive meanwhile are kept for the next Poll.
// - Failure: a broken connection or a timeout fails every in-flight request (each gets a
//   completion with the error) and every later call with Unavailable naming the server.
//   Nothing throws.
// - A written page the transport cannot read when it sends it (made inaccessible meanwhile,
//   against the ownership rule above: protected by someone else, say) fails alone: its
//   completion is InvalidArgument with `page` set to its address, the server's slot holds
//   unspecified bytes, and the connection goes on carrying the other requests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "protocol/protocol.h"
#include "tiermem/status.hpp"

namespace tiermem::remote {

inline constexpr size_t kPage = 4096;

struct Endpoint {
  enum class Kind : uint8_t { kTcp, kRdma };
  Kind kind = Kind::kTcp;
  std::string host;   // numeric IPv4 address or a host name
  uint16_t port = 7471;
  std::string ToString() const;  // "tcp://127.0.0.1:7471"
};

// "tcp://host:port", "rdma://host:port", "host:port" (tcp), "host" (port 7471).
StatusOr<Endpoint> ParseEndpoint(const std::string& text);
// A comma-separated list of the above.
StatusOr<std::vector<Endpoint>> ParseEndpointList(const std::string& text);

struct SlotRange {
  uint64_t first = 0;
  uint64_t count = 0;
  uint64_t remote_addr = 0;  // RDMA: address of slot `first` in the server's memory
  uint32_t rkey = 0;         // RDMA: the registration covering exactly this range
};

// A server's figures as its StatsOk reply carries them (protocol/protocol.h).
using ServerStats = proto::StatsOk;

struct Completion {
  uint64_t cookie = 0;
  Status status;  // ok, or why this request failed
  // A PostWrite whose page could not be read (InvalidArgument): the page as posted.
  const void* page = nullptr;
};

// Lets a second connection join the session of a first one.
struct SessionTicket {
  uint64_t session = 0;
  uint8_t secret[16] = {};
};

class Transport {
 public:
  virtual ~Transport() = default;

  // Connects and says hello. PermissionDenied for a bad token, Unavailable when the server
  // cannot be reached within timeout_ms. `join` (optional) attaches to an existing session.
  virtual Status Connect(const std::string& token, uint32_t timeout_ms,
                         const SessionTicket* join = nullptr) = 0;
  virtual SessionTicket ticket() const = 0;
  uint64_t quota_pages() const { return quota_pages_; }
  uint64_t capacity_pages() const { return capacity_pages_; }  // the server's, from its hello

  // Allocates `count` contiguous slots owned by this session (ResourceExhausted over quota or
  // capacity), and frees a range returned by AllocSlots (exactly that range).
  virtual StatusOr<SlotRange> AllocSlots(uint64_t count) = 0;
  virtual Status FreeSlots(const SlotRange& range) = 0;
  virtual StatusOr<ServerStats> Stats() = 0;
  // One page of the server's session list (sessions with id > after_session). NotSupported
  // from a server that predates the clients message.
  virtual StatusOr<proto::ClientsOk> Clients(uint64_t after_session) = 0;

  // Posts the write of one page to `slot` of `range` / the read of one page from it. The range
  // must be one this connection's session allocated (RDMA needs its rkey). Returns an error only
  // when the request could not be posted at all (connection already failed).
  virtual Status PostWrite(const SlotRange& range, uint64_t slot, const void* page, uint64_t cookie) = 0;
  virtual Status PostRead(const SlotRange& range, uint64_t slot, void* page, uint64_t cookie) = 0;
  // Posts the write/read of `length` bytes at byte `offset` of `slot` of `range` (0 < length,
  // offset + length <= kPage). Same ownership rules as PostWrite/PostRead: `data` belongs to the
  // transport until the completion is returned by Poll. InvalidArgument for a bad offset/length
  // (nothing is posted then).
  virtual Status PostWritePart(const SlotRange& range, uint64_t slot, uint32_t offset, uint32_t length,
                               const void* data, uint64_t cookie) = 0;
  virtual Status PostReadPart(const SlotRange& range, uint64_t slot, uint32_t offset, uint32_t length,
                              void* data, uint64_t cookie) = 0;

  // Returns up to `max` completions; waits up to timeout_ms (0 = do not wait, -1 = the
  // connection's timeout) for at least one when any request is in flight. A request not
  // answered within the connection's timeout fails the connection (DeadlineExceeded).
  virtual StatusOr<size_t> Poll(Completion* out, size_t max, int timeout_ms) = 0;
  virtual size_t in_flight() const = 0;
  // A descriptor that poll(2) reports readable (POLLIN) when a reply may have arrived, so one
  // caller can wait on several connections (and descriptors of its own) at once and then take
  // what is ready with Poll(.., 0); -1 when the transport cannot offer one (RDMA): wait in Poll
  // then. When WantsWritable() is true, requests are queued that the connection could not send
  // yet: the caller also waits for POLLOUT on it, and Poll(.., 0) sends more.
  // Poll(.., 0) also fails a connection whose oldest request is past the timeout, as a waiting
  // Poll does.
  virtual int WaitFd() const { return -1; }
  virtual bool WantsWritable() const { return false; }
  // Before sleeping in Poll, spin this long checking for replies (0 = never spin). For a latency-
  // critical caller with a core to spare, like the fault handler. Transports may ignore it.
  virtual void SetBusyPoll(uint32_t microseconds) { (void)microseconds; }
  // Sends the requests posted so far without waiting for anything, where the transport would
  // otherwise send them at the next Poll: a caller that posts a read someone waits for, then has
  // other work before it waits, lets the server start at once. What cannot be sent without
  // blocking goes at the next Poll, as before. A failure fails the connection as Poll would (the
  // posted requests complete with it) and is returned. Transports that send as they post: no-op.
  virtual Status Send() { return Status::Ok(); }

  // Says goodbye and closes (best effort). Idempotent.
  virtual void Close() = 0;
  // The server, as the user named it ("tcp://127.0.0.1:7471").
  virtual std::string name() const = 0;

 protected:
  uint64_t quota_pages_ = 0;
  uint64_t capacity_pages_ = 0;
};

// InvalidArgument unless 0 < length and offset + length <= kPage (what PostWritePart and
// PostReadPart accept).
Status CheckPart(uint32_t offset, uint32_t length);

// A transport of the endpoint's kind. RDMA is NotSupported in builds without it.
StatusOr<std::unique_ptr<Transport>> MakeTransport(const Endpoint& endpoint);

// Posts the same request for many pages and waits for all: a helper for tests and tools.
// Returns the first failure.
Status WritePagesSync(Transport& t, const SlotRange& range, uint64_t first_slot, const void* pages,
                      size_t npages, size_t window = 64);
Status ReadPagesSync(Transport& t, const SlotRange& range, uint64_t first_slot, void* pages,
                     size_t npages, size_t window = 64);

}  // namespace tiermem::remote

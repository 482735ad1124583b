// tiermem::RemoteClient: a direct client of one memory server (tiermem-memd), for tools and
// benchmarks that measure or inspect the remote tier without a Runtime. The runtime's own pager
// uses the same transports (TCP, or RDMA one-sided READ/WRITE where a verbs device exists).
//
//   auto c = *tiermem::RemoteClient::Connect("tcp://127.0.0.1:7471", "token");
//   auto pages = *c->Allocate(1024);                 // 1024 slots of 4 KiB on the server
//   c->Write(pages, pages.first, buf, 1024);         // pipelined, 64 requests in flight
//   c->Read(pages, pages.first + 7, page, 1, 1);     // one round trip
//
// Thread safety: one thread at a time per client (open one client per thread). Buffers belong to
// the caller and need only stay valid during the call. Errors name the server.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tiermem/status.hpp"

namespace tiermem {

// Slots [first, first + count) on the server, as Allocate returned them.
struct RemotePages {
  uint64_t first = 0;
  uint64_t count = 0;
  uint64_t remote_addr = 0;  // RDMA: the server address of slot `first` (0 over TCP)
  uint32_t rkey = 0;         // RDMA: the key of the registration covering the range
};

// A server's figures (its STATS reply), in pages of RemoteClient::kPageSize.
struct RemoteServerStats {
  uint64_t capacity_pages = 0;
  uint64_t used_pages = 0;     // slots reserved by all clients (handed out in chunks)
  uint64_t session_pages = 0;  // held by this client's session
  uint64_t quota_pages = 0;    // this session's quota (0 = none)
  uint32_t sessions = 0;
  uint32_t connections = 0;
};

// One client of a server (a memd session: one process's connections to it), as ListClients
// returns it.
struct RemoteSessionInfo {
  uint64_t session = 0;
  std::string peer;            // "127.0.0.1:40312": the connection that opened the session
  bool rdma = false;           // page data moves by RDMA
  bool self = false;           // the session of the client that asked
  uint32_t connections = 0;
  uint64_t slots = 0;          // slots reserved (pages), written or not
  uint64_t written_pages = 0;  // of those, written since reserved: pages holding data
  bool written_known = true;   // false for RDMA sessions: their writes bypass the server's CPU
  uint64_t quota_pages = 0;
};

// A server's clients and its totals. reserved_pages is ServerStats' used_pages; written_pages
// sums the sessions whose writes the server sees (TCP).
struct RemoteServerClients {
  uint64_t capacity_pages = 0;
  uint64_t reserved_pages = 0;
  uint64_t written_pages = 0;
  std::vector<RemoteSessionInfo> sessions;  // by session id
};

class RemoteClient {
 public:
  static constexpr size_t kPageSize = 4096;

  // `url`: tcp://host:port or rdma://host:port. Unavailable when the server cannot be reached
  // within timeout_ms, PermissionDenied when it refuses the token.
  static StatusOr<std::unique_ptr<RemoteClient>> Connect(std::string_view url, std::string_view token,
                                                         uint32_t timeout_ms = 5000);
  ~RemoteClient();  // closes the connection; the server frees this session's slots
  RemoteClient(const RemoteClient&) = delete;
  RemoteClient& operator=(const RemoteClient&) = delete;

  // `count` contiguous slots (ResourceExhausted when the server or the quota is full).
  StatusOr<RemotePages> Allocate(uint64_t count);
  Status Free(const RemotePages& pages);
  // Writes (reads) `n` pages between `data` and slots [slot, slot + n) of `pages`, with up to
  // `window` requests in flight; returns when all have completed.
  Status Write(const RemotePages& pages, uint64_t slot, const void* data, size_t n, size_t window = 64);
  Status Read(const RemotePages& pages, uint64_t slot, void* data, size_t n, size_t window = 64);
  StatusOr<RemoteServerStats> ServerStats();
  // Every session of the server, this one included (self). NotSupported from a server that
  // predates the request (docs/protocol.md, "clients").
  StatusOr<RemoteServerClients> ListClients();
  std::string name() const;  // "tcp://127.0.0.1:7471"

  class Impl;

 private:
  explicit RemoteClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The floor under a remote fault, measured here and now: the kernel's userfaultfd primitives alone
// (no Runtime, no server). `faults` fresh pages are touched once each by the calling thread while
// a handler thread blocked in poll installs each with one UFFDIO_COPY, which wakes the toucher.
// Returns each touch's time in nanoseconds, in touch order. PermissionDenied or NotSupported
// where no userfaultfd can be opened. Starts and joins one thread; safe beside a Runtime.
StatusOr<std::vector<uint64_t>> MeasureFaultFloor(size_t faults);
// The floor of a fault path with no handler thread, measured the same way: each missing fault
// raises SIGBUS on the touching thread (UFFD_FEATURE_SIGBUS), whose handler installs the page
// with one UFFDIO_COPY. SIGBUS's action is borrowed while it runs and put back before it
// returns (a SIGBUS elsewhere goes to the action before). NotSupported where the kernel lacks
// the feature; Unavailable while another such measurement runs.
StatusOr<std::vector<uint64_t>> MeasureSignalFaultFloor(size_t faults);

}  // namespace tiermem

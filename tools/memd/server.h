// tiermem-memd's core: a pool of page slots served to authenticated sessions over TCP (control and
// data) and, where a verbs device exists, over RDMA (one-sided READ/WRITE into per-allocation
// memory registrations; see rdma_server.h).
//
// Threads: the main thread (Run) owns the listening sockets, the librdmacm event channel and a
// signalfd for SIGTERM/SIGINT; each TCP connection gets a thread that reads requests, answers
// them in order and batches replies. Shared state (sessions, free slot extents) is under mu_;
// a session's allocations are under its own shared_mutex (data copies take it shared, alloc and
// free exclusive), so a slot freed by one connection is never copied by another at the same time.
//
// Isolation: every Read/Write is checked against the session's own allocations; freed slots are
// dropped (MADV_DONTNEED) so the next owner reads zeros; RDMA allocations each get their own MR
// in the session's own protection domain, with only REMOTE_READ|REMOTE_WRITE.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "protocol/protocol.h"
#include "tiermem/status.hpp"

namespace tiermem::memd {
namespace proto = ::tiermem::remote::proto;

struct ServerOptions {
  uint64_t capacity_bytes = 1ull << 30;
  std::string listen_host = "127.0.0.1";
  uint16_t listen_port = 7471;
  std::string token;                // empty: no token (allowed on loopback only)
  uint64_t quota_bytes = 0;         // per session; 0 = the whole capacity
  uint32_t max_connections = 256;   // beyond this, new connections are refused
  uint32_t hello_timeout_ms = 5000; // a connection must say hello within this
  bool rdma = true;                 // listen with librdmacm when a verbs device exists
  std::string port_file;            // write the bound TCP port here (tests, --listen :0)
};

// Logs one line to stderr: "tiermem-memd: <level>: <text>". Thread-safe.
void MemdLog(const char* level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

class RdmaServer;

// Which slots of an allocation were written since it was handed out: memd reserves slots in
// chunks (a pager asks for 16384 at a time), so reserved slots say little about the data held.
// TCP writes set bits under the session's shared lock, hence atomics; RDMA writes bypass memd.
struct WrittenMap {
  explicit WrittenMap(uint64_t pages) : bits(new std::atomic<uint64_t>[(pages + 63) / 64]()) {}
  // Marks [slot, slot + n) relative to the allocation's first slot; returns the pages newly set.
  uint64_t Mark(uint64_t slot, uint64_t n);
  std::unique_ptr<std::atomic<uint64_t>[]> bits;
  std::atomic<uint64_t> count{0};
};

struct Allocation {
  uint64_t first = 0;
  uint64_t count = 0;
  void* mr = nullptr;  // struct ibv_mr* for RDMA sessions
  std::shared_ptr<WrittenMap> written;
};

struct Session {
  uint64_t id = 0;
  uint8_t secret[proto::kSecretBytes] = {};
  bool rdma = false;
  std::shared_mutex mu;                   // guards allocs and pages
  std::map<uint64_t, Allocation> allocs;  // by first slot
  uint64_t pages = 0;
  std::atomic<uint64_t> written_pages{0};  // slots of `allocs` written (TCP)
  std::string peer;          // the connection that opened the session
  uint32_t connections = 0;  // TCP connections (under Server::mu_)
  void* rdma_state = nullptr; // RdmaServer's per-session state (PD, QPs)
};

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();

  // Maps the pool, opens the listeners. Fails with a clear Status (port in use, no memory).
  Status Start();
  // Serves until SIGTERM/SIGINT (or Stop from another thread); then closes every connection,
  // frees every session and returns.
  Status Run();
  void Stop();
  uint16_t port() const { return port_; }

  // Used by connections and by the RDMA side.
  StatusOr<std::shared_ptr<Session>> Hello(const proto::Hello& hello, const std::string& peer, bool* created);
  void Release(const std::shared_ptr<Session>& s, const std::string& peer);
  StatusOr<proto::AllocOk> AllocSlots(Session& s, uint64_t count);
  Status FreeSlots(Session& s, uint64_t first, uint64_t count);
  proto::StatsOk StatsFor(Session& s);
  // The sessions with id > after_session, at most kMaxClientsPerMessage of them.
  proto::ClientsOk ClientsAfter(uint64_t after_session);
  // The allocation of `s` that holds [slot, slot+count), or null (caller holds s.mu shared).
  const Allocation* OwnerOf(const Session& s, uint64_t slot, uint64_t count) const;
  bool Owns(const Session& s, uint64_t slot, uint64_t count) const { return OwnerOf(s, slot, count) != nullptr; }
  // Records a TCP write of [slot, slot+count) into allocation `a` of `s` (s.mu held shared).
  static void NoteWrite(Session& s, const Allocation& a, uint64_t slot, uint64_t count);
  uint8_t* SlotAddress(uint64_t slot) const { return pool_ + slot * proto::kPageSize; }
  std::shared_ptr<Session> FindSession(uint64_t id, const uint8_t* secret);
  const ServerOptions& options() const { return options_; }

 private:
  struct Conn {
    int fd = -1;
    std::string peer;
    std::thread thread;
    std::atomic<bool> done{false};
  };
  void Accept();
  void Reap(bool all);
  void ServeConnection(Conn* c);
  void FreeAllocation(Session& s, const Allocation& a);

  ServerOptions options_;
  uint8_t* pool_ = nullptr;
  uint64_t capacity_pages_ = 0;
  uint64_t quota_pages_ = 0;
  int listen_fd_ = -1;
  int signal_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: Stop()
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};

  std::mutex mu_;  // sessions_, free_, used_pages_, conns_
  std::map<uint64_t, std::shared_ptr<Session>> sessions_;
  std::map<uint64_t, uint64_t> free_;  // free extents: first -> count
  uint64_t used_pages_ = 0;
  uint64_t next_session_ = 1;
  std::vector<std::unique_ptr<Conn>> conns_;
  uint32_t live_conns_ = 0;
  std::unique_ptr<RdmaServer> rdma_;
};

}  // namespace tiermem::memd

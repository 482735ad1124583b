// memd's RDMA side: a librdmacm listener on the same address and port number as TCP. A client
// first says hello over TCP (the control protocol), then opens an RC queue pair with
// rdma_connect, proving its session with {session id, secret} in the private data. The QP lives
// in the session's own protection domain, and each allocation of the session is registered there
// as its own MR (REMOTE_READ | REMOTE_WRITE | LOCAL_WRITE, nothing else), so an rkey of one
// session is useless on another session's QP. The server posts nothing on the data path: the
// client's one-sided READ/WRITE never involve the server's CPU.
//
// Threads: HandleEvents runs on memd's main thread; Register/Deregister/CloseSession are called
// by connection threads under the session's exclusive lock; an internal mutex guards the rest.
#pragma once

#include <memory>
#include <string>

#include "tools/memd/server.h"

namespace tiermem::memd {

class RdmaServer {
 public:
  // NotSupported without RDMA in the build, Unavailable when no verbs device exists or the
  // address has no RDMA device (the caller logs it and serves TCP only).
  static StatusOr<std::unique_ptr<RdmaServer>> Start(Server* server, const std::string& host, uint16_t port);
  virtual ~RdmaServer() = default;
  virtual int event_fd() const = 0;
  virtual void HandleEvents() = 0;
  // Registers [first, first+count) slots for the session; sets a.mr and fills remote addr/rkey.
  virtual Status Register(Session& s, Allocation& a, uint64_t* remote_addr, uint32_t* rkey) = 0;
  virtual void Deregister(Allocation& a) = 0;
  // Disconnects the session's QPs and frees its PD (after all its MRs are deregistered).
  virtual void CloseSession(Session& s) = 0;
  virtual std::string description() const = 0;
};

}  // namespace tiermem::memd

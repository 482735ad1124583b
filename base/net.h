// Socket helpers shared by the TCP transport, the RDMA transport's control connection and memd.
// Every function returns a Status naming the peer; none throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tiermem/status.hpp"

namespace tiermem::net {

// Connects to host:port within timeout_ms; the socket is returned non-blocking, with
// TCP_NODELAY, close-on-exec and large buffers.
StatusOr<int> ConnectTcp(const std::string& host, uint16_t port, uint32_t timeout_ms);
// A listening socket bound to host:port (SO_REUSEADDR, close-on-exec, non-blocking).
StatusOr<int> ListenTcp(const std::string& host, uint16_t port, int backlog);
// Tunes an accepted or connected socket: TCP_NODELAY, buffers.
void TuneSocket(int fd);
// The bound port of a listening socket (for --listen 127.0.0.1:0).
uint16_t LocalPort(int fd);
// "10.0.0.1:5000" of the peer of a connected socket.
std::string PeerName(int fd);

// "host:port" or "host" -> parts. Port 0 allowed only when allow_zero.
Status SplitHostPort(const std::string& text, uint16_t default_port, std::string* host,
                     uint16_t* port, bool allow_zero = false);

}  // namespace tiermem::net

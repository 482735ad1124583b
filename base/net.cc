#include "base/net.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "base/os.h"

namespace tiermem::net {

void TuneSocket(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  int buf = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
}

static StatusOr<addrinfo*> Resolve(const std::string& host, uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  std::string port_s = std::to_string(port);
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port_s.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    return Unavailable("cannot resolve '" + host + "': " + gai_strerror(rc));
  }
  return res;
}

StatusOr<int> ConnectTcp(const std::string& host, uint16_t port, uint32_t timeout_ms) {
  const std::string who = host + ":" + std::to_string(port);
  TIERMEM_ASSIGN_OR_RETURN(addrinfo * res, Resolve(host, port, false));
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    freeaddrinfo(res);
    return ErrnoToStatus(errno, "socket");
  }
  TuneSocket(fd);
  int rc = connect(fd, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  if (rc != 0 && errno != EINPROGRESS) {
    int err = errno;
    close(fd);
    return Unavailable("cannot connect to " + who + ": " + strerror(err));
  }
  if (rc != 0) {
    pollfd p{fd, POLLOUT, 0};
    int n;
    do {
      n = poll(&p, 1, int(timeout_ms));
    } while (n < 0 && errno == EINTR);
    if (n == 0) {
      close(fd);
      return Unavailable("cannot connect to " + who + ": timed out after " + std::to_string(timeout_ms) + " ms");
    }
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (n < 0 || err != 0) {
      close(fd);
      return Unavailable("cannot connect to " + who + ": " + strerror(n < 0 ? errno : err));
    }
  }
  return os::KeepHigh(fd);
}

StatusOr<int> ListenTcp(const std::string& host, uint16_t port, int backlog) {
  const std::string who = host + ":" + std::to_string(port);
  TIERMEM_ASSIGN_OR_RETURN(addrinfo * res, Resolve(host, port, true));
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    freeaddrinfo(res);
    return ErrnoToStatus(errno, "socket");
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, backlog) != 0) {
    int err = errno;
    freeaddrinfo(res);
    close(fd);
    return Unavailable("cannot listen on " + who + ": " + strerror(err));
  }
  freeaddrinfo(res);
  return fd;
}

uint16_t LocalPort(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return 0;
  return ntohs(a.sin_port);
}

std::string PeerName(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "?";
  char buf[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &a.sin_addr, buf, sizeof(buf));
  return std::string(buf) + ":" + std::to_string(ntohs(a.sin_port));
}

Status SplitHostPort(const std::string& text, uint16_t default_port, std::string* host,
                     uint16_t* port, bool allow_zero) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos) {
    *host = text;
    *port = default_port;
  } else {
    *host = text.substr(0, colon);
    std::string p = text.substr(colon + 1);
    if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos) {
      return InvalidArgument("bad port in '" + text + "'");
    }
    unsigned long v = std::stoul(p);
    if (v > 65535 || (v == 0 && !allow_zero)) return InvalidArgument("port out of range in '" + text + "'");
    *port = uint16_t(v);
  }
  if (host->empty()) return InvalidArgument("missing host in '" + text + "'");
  return Status::Ok();
}

}  // namespace tiermem::net

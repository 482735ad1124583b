// tiermemctl serve-metrics: a small HTTP/1.1 server whose /metrics is the Prometheus text of
// every live process running tiermem. It listens on loopback unless another address is named,
// serves one request at a time (a client gets --timeout-ms to send its request and to take the
// answer), answers 404 for other paths and 405 for methods other than GET and HEAD, and closes
// each connection after its answer. Requests are read up to 8 KiB; a longer head gets 431.
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>

#include "tools/tiermemctl/commands.h"
#include "tools/tiermemctl/prometheus.h"
#include "tools/tiermemctl/stats_view.h"

namespace tiermem::tools {
namespace {

constexpr size_t kMaxRequestHead = 8192;

bool SplitListen(const std::string& s, std::string* host, std::string* port) {
  size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon + 1 == s.size()) return false;
  *host = s.substr(0, colon);
  *port = s.substr(colon + 1);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  if (host->empty()) *host = "127.0.0.1";
  return port->find_first_not_of("0123456789") == std::string::npos;
}

int Listen(const std::string& host, const std::string& port, std::string* err) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) {
    *err = std::string("cannot resolve ") + host + ": " + gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 16) == 0) break;
    *err = std::string("cannot listen on ") + host + ":" + port + ": " + strerror(errno);
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage ss = {};
  socklen_t len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return -1;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
}

// After the answer: no more to send, and what the client still sends (the rest of a head too
// long to read) is read and dropped, up to 64 KiB or the timeout, so that closing with unread
// input does not reset the connection before the client has read the answer.
void LingeringClose(int fd) {
  shutdown(fd, SHUT_WR);
  char buf[4096];
  for (size_t drained = 0; drained < 64 * 1024;) {
    ssize_t r = recv(fd, buf, sizeof(buf), 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    drained += size_t(r);
  }
}

void SendAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t w = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // the client went away, or took longer than the send timeout
    off += size_t(w);
  }
}

std::string Response(int code, const char* reason, const char* type, const std::string& body, bool head) {
  std::string r = "HTTP/1.1 " + std::to_string(code) + " " + reason + "\r\n";
  r += std::string("Content-Type: ") + type + "\r\n";
  r += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  r += "Connection: close\r\n\r\n";
  if (!head) r += body;
  return r;
}

std::string MetricsText() {
  Exposition e;
  int live = 0;
  for (const ProcessEntry& p : ListProcesses()) {
    if (p.stale) continue;
    auto st = ReadProcessStats(p.pid);
    if (!st.ok() || st->stale) continue;  // gone meanwhile, or another user's
    e.Add(*st);
    ++live;
  }
  e.AddGauge("tiermem_exporter_processes", "Live processes running tiermem that this scrape read.", live);
  return e.Text();
}

// Reads one request head and answers it.
void Serve(int fd, uint32_t timeout_ms) {
  timeval tv{long(timeout_ms / 1000), long(timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  std::string in;
  char buf[2048];
  while (in.find("\r\n\r\n") == std::string::npos) {
    if (in.size() >= kMaxRequestHead) {
      SendAll(fd, Response(431, "Request Header Fields Too Large", "text/plain", "request head too large\n", false));
      return;
    }
    ssize_t r = recv(fd, buf, sizeof(buf), 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return;  // closed, or no request within the timeout
    in.append(buf, size_t(r));
  }
  std::string line = in.substr(0, in.find("\r\n"));
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string::npos || line.compare(sp2 + 1, 5, "HTTP/") != 0) {
    SendAll(fd, Response(400, "Bad Request", "text/plain", "not an HTTP request\n", false));
    return;
  }
  std::string method = line.substr(0, sp1);
  std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  target = target.substr(0, target.find('?'));
  const bool head = method == "HEAD";
  if (method != "GET" && !head) {
    SendAll(fd, Response(405, "Method Not Allowed", "text/plain", "only GET and HEAD\n", false));
    return;
  }
  if (target != "/metrics") {
    SendAll(fd, Response(404, "Not Found", "text/plain", "not found: the metrics are on /metrics\n", head));
    return;
  }
  SendAll(fd, Response(200, "OK", Exposition::kContentType, MetricsText(), head));
}

}  // namespace

int ServeMetricsCommand(const ServeArgs& a) {
  std::string host, port;
  if (!SplitListen(a.listen, &host, &port)) {
    std::fprintf(stderr, "tiermemctl: --listen %s: expected HOST:PORT (e.g. 127.0.0.1:9477)\n", a.listen.c_str());
    return 2;
  }
  std::string err;
  int lfd = Listen(host, port, &err);
  if (lfd < 0) {
    std::fprintf(stderr, "tiermemctl: %s\n", err.c_str());
    return 1;
  }
  int bound = BoundPort(lfd);
  if (!a.port_file.empty()) {
    std::string tmp = a.port_file + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "w");
    if (f == nullptr || std::fprintf(f, "%d\n", bound) < 0 || std::fclose(f) != 0 ||
        std::rename(tmp.c_str(), a.port_file.c_str()) != 0) {
      std::fprintf(stderr, "tiermemctl: --port-file %s: %s\n", a.port_file.c_str(), strerror(errno));
      return 1;
    }
  }
  std::printf("tiermemctl: serving /metrics on http://%s:%d/metrics\n",
              host.find(':') != std::string::npos ? ("[" + host + "]").c_str() : host.c_str(), bound);
  std::fflush(stdout);
  InstallStopHandler();
  for (uint32_t served = 0; a.count == 0 || served < a.count;) {
    pollfd p{lfd, POLLIN, 0};
    int n = poll(&p, 1, 500);
    if (n < 0 && errno != EINTR) break;
    if (StopRequested()) break;  // SIGINT/SIGTERM
    if (n <= 0) continue;
    int fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    Serve(fd, a.timeout_ms);
    LingeringClose(fd);
    close(fd);
    ++served;
  }
  close(lfd);
  return 0;
}

}  // namespace tiermem::tools

#include "bench/memcached_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#include "bench/compare_util.h"
#include "bench/splitmix.h"

namespace tiermem::bench {
namespace {

std::string KeyName(uint64_t key) { return "tm:" + std::to_string(key); }

// One connection: blocking socket, a read buffer, line and byte-count reads.
class Connection {
 public:
  ~Connection() {
    if (fd_ >= 0) close(fd_);
  }
  bool Connect(uint16_t port, std::string* error) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const int one = 1;
    if (fd_ < 0 || connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
      *error = "connect to 127.0.0.1:" + std::to_string(port) + ": " + strerror(errno);
      return false;
    }
    // A server that stops answering ends the run with an error instead of a hang.
    timeval tv{30, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    return true;
  }
  bool Send(const std::string& data, std::string* error) {
    for (size_t at = 0; at < data.size();) {
      const ssize_t n = send(fd_, data.data() + at, data.size() - at, MSG_NOSIGNAL);
      if (n <= 0) {
        *error = std::string("send: ") + (n == 0 ? "closed" : strerror(errno));
        return false;
      }
      at += static_cast<size_t>(n);
    }
    return true;
  }
  // A line without its "\r\n".
  bool Line(std::string* line, std::string* error) {
    for (;;) {
      const size_t eol = buf_.find("\r\n", at_);
      if (eol != std::string::npos) {
        line->assign(buf_, at_, eol - at_);
        at_ = eol + 2;
        return true;
      }
      if (!Fill(error)) return false;
    }
  }
  // `n` bytes followed by "\r\n".
  bool Bytes(size_t n, std::string* out, std::string* error) {
    while (buf_.size() - at_ < n + 2) {
      if (!Fill(error)) return false;
    }
    out->assign(buf_, at_, n);
    at_ += n + 2;
    return true;
  }

 private:
  bool Fill(std::string* error) {
    if (at_ > 0) {
      buf_.erase(0, at_);
      at_ = 0;
    }
    char tmp[65536];
    const ssize_t n = recv(fd_, tmp, sizeof(tmp), 0);
    if (n <= 0) {
      *error = std::string("recv: ") + (n == 0 ? "connection closed" : strerror(errno));
      return false;
    }
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }
  int fd_ = -1;
  std::string buf_;
  size_t at_ = 0;
};

// Runs `body(connection index, connection, result)` on load.connections threads and merges the
// results: counts added, the first error kept, latencies pooled for the percentiles.
template <class Body>
McResult OnConnections(const McLoad& load, Body body) {
  McResult total;
  std::mutex mu;
  std::vector<double> lat;
  std::vector<std::thread> threads;
  const uint64_t t0 = NowNs();
  for (int c = 0; c < load.connections; ++c) {
    threads.emplace_back([&, c] {
      McResult r;
      std::vector<double> mine;
      Connection conn;
      r.ok = conn.Connect(load.port, &r.error) && body(c, conn, &r, &mine);
      std::lock_guard<std::mutex> lock(mu);
      total.requests += r.requests;
      total.misses += r.misses;
      total.wrong += r.wrong;
      if (!r.ok && total.error.empty()) total.error = r.error;
      lat.insert(lat.end(), mine.begin(), mine.end());
    });
  }
  for (auto& t : threads) t.join();
  total.seconds = static_cast<double>(NowNs() - t0) / 1e9;
  total.ok = total.error.empty();
  total.p50_ns = Percentile(lat, 0.5);
  total.p99_ns = Percentile(lat, 0.99);
  return total;
}

}  // namespace

size_t McValueSize(uint64_t key) { return 256 + SplitMix64(key * 2 + 1) % (4096 - 256 + 1); }

void McValue(uint64_t key, std::string* out) {
  out->resize(McValueSize(key));
  for (size_t i = 0; i < out->size(); i += 8) {
    uint64_t r = SplitMix64(key * 0x9e3779b97f4a7c15ull + i);
    for (size_t b = i; b < i + 8 && b < out->size(); ++b, r >>= 8) (*out)[b] = static_cast<char>(33 + r % 94);
  }
}

bool McHotKey(uint64_t key) { return SplitMix64(key) % 10 == 0; }

McResult FillKeys(const McLoad& load) {
  constexpr int kDepth = 32;  // sets in flight per connection
  return OnConnections(load, [&](int c, Connection& conn, McResult* r, std::vector<double>*) {
    std::string batch, value, line;
    int pending = 0;
    auto drain = [&] {
      for (; pending > 0; --pending) {
        if (!conn.Line(&line, &r->error)) return false;
        if (line != "STORED") {
          r->error = "set answered '" + line + "'";
          return false;
        }
        ++r->requests;
      }
      return true;
    };
    for (uint64_t k = static_cast<uint64_t>(c); k < load.keys; k += static_cast<uint64_t>(load.connections)) {
      McValue(k, &value);
      batch += "set " + KeyName(k) + " 0 0 " + std::to_string(value.size()) + "\r\n" + value + "\r\n";
      if (++pending == kDepth) {
        if (!conn.Send(batch, &r->error) || !drain()) return false;
        batch.clear();
      }
    }
    return (batch.empty() || conn.Send(batch, &r->error)) && drain();
  });
}

McResult RunGets(const McLoad& load) {
  std::vector<uint64_t> hot, cold;
  for (uint64_t k = 0; k < load.keys; ++k) (McHotKey(k) ? hot : cold).push_back(k);
  if (hot.empty() || cold.empty()) {
    McResult r;
    r.error = "too few keys for a hot set";
    return r;
  }
  const uint64_t per_conn = load.max_gets > 0 ? (load.max_gets + static_cast<uint64_t>(load.connections) - 1) /
                                                    static_cast<uint64_t>(load.connections)
                                              : UINT64_MAX;
  const uint64_t deadline = NowNs() + static_cast<uint64_t>(load.seconds * 1e9);
  return OnConnections(load, [&](int c, Connection& conn, McResult* r, std::vector<double>* lat) {
    uint64_t rng = SplitMix64(load.seed * 1000003 + static_cast<uint64_t>(c));
    std::string line, got, want;
    lat->reserve(1 << 16);
    for (uint64_t n = 0; n < per_conn && NowNs() < deadline; ++n) {
      const uint64_t x = SplitMix64Next(&rng);
      const std::vector<uint64_t>& set = x % 10 != 0 ? hot : cold;
      const uint64_t key = set[(x >> 8) % set.size()];
      const std::string name = KeyName(key);
      const uint64_t t = NowNs();
      if (!conn.Send("get " + name + "\r\n", &r->error) || !conn.Line(&line, &r->error)) return false;
      if (line == "END") {
        ++r->misses;
      } else {
        // VALUE <key> <flags> <bytes>
        char k[256];
        unsigned flags = 0;
        size_t bytes = 0;
        if (sscanf(line.c_str(), "VALUE %255s %u %zu", k, &flags, &bytes) != 3 || name != k ||
            !conn.Bytes(bytes, &got, &r->error) || !conn.Line(&line, &r->error) || line != "END") {
          if (r->error.empty()) r->error = "get " + name + ": unexpected reply '" + line + "'";
          return false;
        }
        McValue(key, &want);
        r->wrong += got != want;
      }
      lat->push_back(static_cast<double>(NowNs() - t));
      ++r->requests;
    }
    return true;
  });
}

}  // namespace tiermem::bench

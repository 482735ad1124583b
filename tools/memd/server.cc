#include "tools/memd/server.h"

#include <cerrno>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/net.h"
#include "tools/memd/rdma_server.h"

namespace tiermem::memd {

namespace {
std::mutex g_log_mu;
}

void MemdLog(const char* level, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  localtime_r(&ts.tv_sec, &tm);
  std::lock_guard<std::mutex> lock(g_log_mu);
  fprintf(stderr, "%02d:%02d:%02d.%03ld tiermem-memd: %s: %s\n", tm.tm_hour, tm.tm_min, tm.tm_sec,
          ts.tv_nsec / 1000000, level, buf);
  fflush(stderr);
}

Server::Server(ServerOptions options) : options_(std::move(options)) {}

Server::~Server() {
  Reap(true);
  rdma_.reset();
  if (listen_fd_ >= 0) close(listen_fd_);
  if (signal_fd_ >= 0) close(signal_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
  if (pool_ != nullptr) munmap(pool_, capacity_pages_ * proto::kPageSize);
}

Status Server::Start() {
  capacity_pages_ = options_.capacity_bytes / proto::kPageSize;
  if (capacity_pages_ == 0) return InvalidArgument("--capacity must be at least one page (4K)");
  quota_pages_ = options_.quota_bytes == 0 ? capacity_pages_ : options_.quota_bytes / proto::kPageSize;
  if (quota_pages_ == 0) return InvalidArgument("--quota must be at least one page (4K)");
  void* p = mmap(nullptr, capacity_pages_ * proto::kPageSize, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return ErrnoToStatus(errno, "mmap of the pool (--capacity)");
  pool_ = static_cast<uint8_t*>(p);
  free_[0] = capacity_pages_;

  // SIGTERM/SIGINT are blocked in every thread (threads inherit the mask) and read from a
  // signalfd by the main loop: no async-signal-safety concerns, no lost signal.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal_fd_ = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd_ < 0) return ErrnoToStatus(errno, "signalfd");
  signal(SIGPIPE, SIG_IGN);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) return ErrnoToStatus(errno, "eventfd");

  TIERMEM_ASSIGN_OR_RETURN(listen_fd_, net::ListenTcp(options_.listen_host, options_.listen_port, 128));
  port_ = net::LocalPort(listen_fd_);
  MemdLog("info", "serving %llu MiB (%llu slots of 4 KiB), per-session quota %llu MiB, on tcp://%s:%u",
          (unsigned long long)(capacity_pages_ >> 8), (unsigned long long)capacity_pages_,
          (unsigned long long)(quota_pages_ >> 8), options_.listen_host.c_str(), port_);
  if (options_.token.empty()) {
    MemdLog("warn", "no token configured (--token-file or TIERMEM_TOKEN): any local client may connect");
  }
  if (options_.rdma) {
    auto r = RdmaServer::Start(this, options_.listen_host, port_);
    if (r.ok()) {
      rdma_ = std::move(*r);
      MemdLog("info", "RDMA: listening on rdma://%s:%u (%s)", options_.listen_host.c_str(), port_,
              rdma_->description().c_str());
    } else {
      MemdLog("info", "RDMA: not serving: %s; TCP only", r.status().message().c_str());
    }
  } else {
    MemdLog("info", "RDMA: disabled by --no-rdma; TCP only");
  }
  if (!options_.port_file.empty()) {
    std::string tmp = options_.port_file + ".tmp";
    FILE* f = fopen(tmp.c_str(), "w");
    if (f == nullptr) return ErrnoToStatus(errno, "open " + tmp);
    fprintf(f, "%u\n", port_);
    fclose(f);
    if (rename(tmp.c_str(), options_.port_file.c_str()) != 0) return ErrnoToStatus(errno, "rename " + tmp);
  }
  return Status::Ok();
}

void Server::Stop() {
  stopping_ = true;
  uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!write(wake_fd_, &one, sizeof(one));
}

Status Server::Run() {
  while (!stopping_) {
    pollfd fds[4] = {{listen_fd_, POLLIN, 0}, {signal_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}, {-1, POLLIN, 0}};
    nfds_t n = 3;
    if (rdma_) {
      fds[3].fd = rdma_->event_fd();
      n = 4;
    }
    int rc = poll(fds, n, 1000);
    if (rc < 0 && errno != EINTR) return ErrnoToStatus(errno, "poll");
    if (rc > 0 && (fds[1].revents & POLLIN)) {
      signalfd_siginfo si;
      if (read(signal_fd_, &si, sizeof(si)) == sizeof(si)) {
        MemdLog("info", "%s received: shutting down", si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
      }
      stopping_ = true;
      break;
    }
    if (rc > 0 && (fds[0].revents & POLLIN)) Accept();
    if (rc > 0 && n == 4 && (fds[3].revents & POLLIN)) rdma_->HandleEvents();
    Reap(false);
  }
  Reap(true);
  {
    std::lock_guard<std::mutex> lock(mu_);
    MemdLog("info", "stopped: %zu sessions left, %llu slots reserved", sessions_.size(),
            (unsigned long long)used_pages_);
  }
  return Status::Ok();
}

void Server::Accept() {
  for (;;) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) MemdLog("warn", "accept: %s", strerror(errno));
      return;
    }
    std::string peer = net::PeerName(fd);
    std::lock_guard<std::mutex> lock(mu_);
    if (live_conns_ >= options_.max_connections) {
      MemdLog("warn", "refused connection from %s: too many connections (limit %u, --max-connections)",
              peer.c_str(), options_.max_connections);
      close(fd);
      continue;
    }
    net::TuneSocket(fd);
    timeval tv{long(options_.hello_timeout_ms / 1000), long(options_.hello_timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->peer = peer;
    Conn* raw = c.get();
    ++live_conns_;
    c->thread = std::thread([this, raw] { ServeConnection(raw); });
    conns_.push_back(std::move(c));
  }
}

void Server::Reap(bool all) {
  std::vector<std::unique_ptr<Conn>> dead;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& c : conns_) {
      if (all && !c->done) shutdown(c->fd, SHUT_RDWR);  // unblocks its thread's recv
    }
    for (auto it = conns_.begin(); it != conns_.end();) {
      if (all || (*it)->done) {
        dead.push_back(std::move(*it));
        it = conns_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& c : dead) {
    if (c->thread.joinable()) c->thread.join();
  }
}

StatusOr<std::shared_ptr<Session>> Server::Hello(const proto::Hello& hello, const std::string& peer, bool* created) {
  *created = false;
  if (hello.page_size != proto::kPageSize) {
    return InvalidArgument("page size " + std::to_string(hello.page_size) + " not supported (only 4096)");
  }
  const std::string& want = options_.token;
  if (!proto::ConstantTimeEqual(hello.token.data(), hello.token.size(), want.data(), want.size())) {
    return PermissionDenied("bad token");
  }
  if (hello.data_path == proto::DataPath::kRdma && !rdma_) {
    return Unavailable("this server does not serve RDMA (its log says why: no verbs device, or no rdma_cm); use tcp://");
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (hello.join_session != 0) {
    auto it = sessions_.find(hello.join_session);
    if (it == sessions_.end() ||
        !proto::ConstantTimeEqual(it->second->secret, proto::kSecretBytes, hello.join_secret, proto::kSecretBytes)) {
      return PermissionDenied("no such session, or wrong session secret");
    }
    it->second->connections++;
    return it->second;
  }
  auto s = std::make_shared<Session>();
  s->id = next_session_++;
  s->rdma = hello.data_path == proto::DataPath::kRdma;
  if (getrandom(s->secret, sizeof(s->secret), 0) != sizeof(s->secret)) {
    return Internal("getrandom failed");
  }
  s->connections = 1;
  s->peer = peer;
  sessions_[s->id] = s;
  *created = true;
  return s;
}

std::shared_ptr<Session> Server::FindSession(uint64_t id, const uint8_t* secret) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return nullptr;
  if (!proto::ConstantTimeEqual(it->second->secret, proto::kSecretBytes, secret, proto::kSecretBytes)) return nullptr;
  return it->second;
}

void Server::Release(const std::shared_ptr<Session>& s, const std::string& peer) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (--s->connections > 0) return;
    sessions_.erase(s->id);
  }
  uint64_t pages;
  {
    std::unique_lock<std::shared_mutex> lock(s->mu);
    pages = s->pages;
    for (auto& [first, a] : s->allocs) FreeAllocation(*s, a);
    s->allocs.clear();
    s->pages = 0;
    s->written_pages = 0;
    if (rdma_) rdma_->CloseSession(*s);
  }
  MemdLog("info", "session %llu closed (last connection %s): freed %llu pages", (unsigned long long)s->id,
          peer.c_str(), (unsigned long long)pages);
}

void Server::FreeAllocation(Session& s, const Allocation& a) {
  (void)s;
  Allocation copy = a;
  if (copy.mr != nullptr && rdma_) rdma_->Deregister(copy);
  // Drop the contents so the next owner of these slots reads zeros, never this session's data.
  madvise(SlotAddress(a.first), a.count * proto::kPageSize, MADV_DONTNEED);
  std::lock_guard<std::mutex> lock(mu_);
  used_pages_ -= a.count;
  uint64_t first = a.first, count = a.count;
  auto next = free_.lower_bound(first);
  if (next != free_.end() && first + count == next->first) {
    count += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == first) {
      prev->second += count;
      return;
    }
  }
  free_[first] = count;
}

StatusOr<proto::AllocOk> Server::AllocSlots(Session& s, uint64_t count) {
  std::unique_lock<std::shared_mutex> slock(s.mu);
  if (s.pages + count > quota_pages_ || s.pages + count < s.pages) {
    return ResourceExhausted("quota exceeded: session holds " + std::to_string(s.pages) + " pages, asks " +
                             std::to_string(count) + ", quota " + std::to_string(quota_pages_));
  }
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.begin();
    while (it != free_.end() && it->second < count) ++it;
    if (it == free_.end()) {
      return ResourceExhausted("pool full: " + std::to_string(capacity_pages_ - used_pages_) +
                               " pages free, none in a run of " + std::to_string(count));
    }
    a.first = it->first;
    a.count = count;
    uint64_t rest = it->second - count;
    uint64_t rest_first = it->first + count;
    free_.erase(it);
    if (rest > 0) free_[rest_first] = rest;
    used_pages_ += count;
  }
  proto::AllocOk ok;
  ok.first_slot = a.first;
  ok.count = a.count;
  if (s.rdma && rdma_) {
    Status st = rdma_->Register(s, a, &ok.remote_addr, &ok.rkey);
    if (!st.ok()) {
      FreeAllocation(s, a);
      return st;
    }
  }
  if (!s.rdma) a.written = std::make_shared<WrittenMap>(count);
  s.allocs[a.first] = a;
  s.pages += count;
  return ok;
}

Status Server::FreeSlots(Session& s, uint64_t first, uint64_t count) {
  std::unique_lock<std::shared_mutex> slock(s.mu);
  auto it = s.allocs.find(first);
  if (it == s.allocs.end() || it->second.count != count) {
    return InvalidArgument("free of slots [" + std::to_string(first) + ", +" + std::to_string(count) +
                           ") that are not one of this session's allocations");
  }
  Allocation a = it->second;
  s.allocs.erase(it);
  s.pages -= count;
  if (a.written != nullptr) s.written_pages.fetch_sub(a.written->count.load(), std::memory_order_relaxed);
  FreeAllocation(s, a);
  return Status::Ok();
}

const Allocation* Server::OwnerOf(const Session& s, uint64_t slot, uint64_t count) const {
  auto it = s.allocs.upper_bound(slot);
  if (it == s.allocs.begin()) return nullptr;
  --it;
  const Allocation& a = it->second;
  bool inside = slot >= a.first && slot + count >= slot && slot + count <= a.first + a.count;
  return inside ? &a : nullptr;
}

uint64_t WrittenMap::Mark(uint64_t slot, uint64_t n) {
  uint64_t added = 0;
  for (uint64_t i = slot; i < slot + n; ++i) {
    uint64_t bit = uint64_t(1) << (i % 64);
    if ((bits[i / 64].fetch_or(bit, std::memory_order_relaxed) & bit) == 0) ++added;
  }
  if (added > 0) count.fetch_add(added, std::memory_order_relaxed);
  return added;
}

void Server::NoteWrite(Session& s, const Allocation& a, uint64_t slot, uint64_t count) {
  if (a.written == nullptr) return;
  uint64_t added = a.written->Mark(slot - a.first, count);
  if (added > 0) s.written_pages.fetch_add(added, std::memory_order_relaxed);
}

proto::ClientsOk Server::ClientsAfter(uint64_t after_session) {
  std::vector<std::shared_ptr<Session>> list;
  proto::ClientsOk ok;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ok.capacity_pages = capacity_pages_;
    ok.reserved_pages = used_pages_;
    for (auto it = sessions_.upper_bound(after_session); it != sessions_.end(); ++it) {
      list.push_back(it->second);
    }
    for (const auto& [id, s] : sessions_) ok.written_pages += s->written_pages.load(std::memory_order_relaxed);
    ok.total = uint32_t(list.size());
    if (list.size() > proto::kMaxClientsPerMessage) list.resize(proto::kMaxClientsPerMessage);
    for (const auto& s : list) {
      proto::ClientEntry e;
      e.session = s->id;
      e.connections = s->connections;
      e.peer = s->peer;
      e.data_path = s->rdma ? proto::DataPath::kRdma : proto::DataPath::kTcp;
      e.written_known = s->rdma ? 0 : 1;
      e.quota_pages = quota_pages_;
      ok.entries.push_back(std::move(e));
    }
  }
  for (size_t i = 0; i < list.size(); ++i) {  // session locks are never taken under mu_
    std::shared_lock<std::shared_mutex> slock(list[i]->mu);
    ok.entries[i].slots = list[i]->pages;
    ok.entries[i].written_pages = list[i]->written_pages.load(std::memory_order_relaxed);
  }
  return ok;
}

proto::StatsOk Server::StatsFor(Session& s) {
  proto::StatsOk st;
  {
    std::shared_lock<std::shared_mutex> slock(s.mu);
    st.session_pages = s.pages;
  }
  std::lock_guard<std::mutex> lock(mu_);
  st.capacity_pages = capacity_pages_;
  st.used_pages = used_pages_;
  st.quota_pages = quota_pages_;
  st.sessions = uint32_t(sessions_.size());
  st.connections = live_conns_;
  return st;
}

}  // namespace tiermem::memd

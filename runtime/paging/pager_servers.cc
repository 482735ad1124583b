// The server list while the process runs: servers added to it (Pager::AddServer, and the servers
// file of TIERMEM_REMOTE_FILE, which the repair thread reads again once a second) and servers
// taken out of that file. A server is listed unconnected; Rejoin, on the repair thread, connects
// it, with the backoff of a server that went away. A server taken out of the file leads and
// joins no new group; its copies stay where they are and are read from it as before.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/os.h"
#include "runtime/paging/pager.h"
#include "runtime/paging/server_file.h"

namespace tiermem {

Status Pager::AddServer(const std::string& address) {
  auto ep = remote::ParseEndpoint(address);
  if (!ep.ok()) return ep.status().WithContext("adding memory server \"" + address + "\"");
  {
    std::lock_guard<std::mutex> io(io_mu_);
    if (forked_child_) return Unavailable(kForkedMessage);
    TIERMEM_ASSIGN_OR_RETURN(bool appended, ListServer(*ep, /*from_file=*/false));
    if (!appended) return InvalidArgument("memory server " + ep->ToString() + " is listed already");
  }
  {
    std::lock_guard<std::mutex> lock(repair_mu_);
    rejoin_wanted_ = true;
  }
  repair_cv_.notify_one();
  return Status::Ok();
}

StatusOr<bool> Pager::ListServer(const remote::Endpoint& ep, bool from_file) {
  const std::string name = ep.ToString();
  const size_t n = servers_.size();
  for (size_t k = 0; k < n; ++k) {
    Server& s = *servers_[k];
    if (s.name != name) continue;
    // Back in the file after it was taken out: it takes new pages again.
    if (from_file && s.withdrawn.exchange(false, std::memory_order_relaxed)) {
      TM_LOG_WARN("remote tier: memory server %s is back in %s: it takes new pages again", name.c_str(),
                  config_.servers_file.c_str());
    }
    return false;
  }
  auto srv = std::make_unique<Server>();
  srv->name = name;
  srv->ep = ep;
  srv->error = "not connected yet";
  srv->from_file = from_file;
  if (config_.server_counters != nullptr && n < kMaxStatsServers) srv->c = &config_.server_counters[n];
  if (!servers_.push_back(std::move(srv))) {
    return ResourceExhausted("memory server " + name + " not listed: the list holds " + std::to_string(kMaxServers) +
                             " servers, the most it can");
  }
  config_.events->OnServerListed(n, name);
  TM_LOG_INFO("remote tier: memory server %s listed; it takes new pages once it answers", name.c_str());
  return true;
}

void Pager::WatchServerFile() {
  if (config_.servers_file.empty()) return;
  const char* path = config_.servers_file.c_str();
  std::string text;
  if (const int err = os::ReadWholeFile(path, &text); err != 0) {
    if (!server_file_unread_) {
      TM_LOG_WARN("TIERMEM_REMOTE_FILE=%s: cannot be read (%s); the servers stay as they are", path,
                  strerror(err < 0 ? -err : err));
    }
    server_file_unread_ = true;
    return;
  }
  server_file_unread_ = false;
  if (text == server_file_text_) return;
  server_file_text_ = text;
  c_->server_file_changes.fetch_add(1, std::memory_order_relaxed);
  ServerFileEntries file = ParseServerFile(text);
  for (const std::string& bad : file.bad) {
    TM_LOG_WARN("TIERMEM_REMOTE_FILE=%s: %s is not a memory server address; left out", path, bad.c_str());
  }
  // An empty list is more likely a file caught half-written than an operator taking every
  // server out at once (which would leave no room for new pages): it changes nothing.
  if (file.servers.empty()) {
    TM_LOG_WARN("TIERMEM_REMOTE_FILE=%s lists no memory server: the servers stay as they are", path);
    return;
  }
  // Servers listed here are connected by the Rejoin that follows on the repair thread.
  {
    std::lock_guard<std::mutex> io(io_mu_);
    if (forked_child_) return;
    for (const remote::Endpoint& ep : file.servers) {
      auto listed = ListServer(ep, /*from_file=*/true);
      if (!listed.ok()) TM_LOG_WARN("TIERMEM_REMOTE_FILE=%s: %s", path, listed.status().message().c_str());
    }
    // Servers the file listed and no longer does (those of TIERMEM_REMOTE and AddServer stay).
    for (size_t k = 0, n = servers_.size(); k < n; ++k) {
      Server& s = *servers_[k];
      if (!s.from_file) continue;
      const bool in_file = std::any_of(file.servers.begin(), file.servers.end(),
                                       [&](const remote::Endpoint& ep) { return ep.ToString() == s.name; });
      if (in_file || s.withdrawn.exchange(true, std::memory_order_relaxed)) continue;
      TM_LOG_WARN("remote tier: memory server %s was taken out of %s: it takes no new pages (the %llu "
                  "there stay, and are read from it)",
                  s.name.c_str(), path, static_cast<unsigned long long>(s.c->pages.load(std::memory_order_relaxed)));
    }
  }
}

std::string Pager::UsableNames() const {
  std::string out;
  for (size_t k = 0, n = servers_.size(); k < n; ++k) {
    if (Usable(k)) out += (out.empty() ? "" : ",") + servers_[k]->name;
  }
  return out;
}

}  // namespace tiermem

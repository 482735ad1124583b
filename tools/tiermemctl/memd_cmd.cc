// tiermemctl memd HOST:PORT: a memory server's capacity, slots reserved and written, and its
// clients (memd sessions) with their quotas, over the public RemoteClient.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tiermem/options.hpp"
#include "tiermem/remote.hpp"
#include "tools/tiermemctl/commands.h"

namespace tiermem::tools {
namespace {

constexpr uint64_t kPage = RemoteClient::kPageSize;

std::string Mib(uint64_t pages) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MiB", double(pages * kPage) / (1 << 20));
  return buf;
}

// The token: --token, else --token-file (trailing newline dropped, as memd reads it), else
// TIERMEM_TOKEN.
bool ResolveToken(const MemdArgs& a, std::string* token) {
  if (!a.token.empty()) {
    *token = a.token;
    return true;
  }
  if (!a.token_file.empty()) {
    std::ifstream f(a.token_file);
    if (!f) {
      std::fprintf(stderr, "tiermemctl: --token-file %s: cannot read it\n", a.token_file.c_str());
      return false;
    }
    std::stringstream ss;
    ss << f.rdbuf();
    *token = ss.str();
    while (!token->empty() && (token->back() == '\n' || token->back() == '\r' || token->back() == ' ')) {
      token->pop_back();
    }
    return true;
  }
  token->clear();
  if (Status s = OptionFromEnv("TIERMEM_TOKEN", token); !s.ok()) {
    std::fprintf(stderr, "tiermemctl: %s\n", s.message().c_str());
    return false;
  }
  return true;
}

}  // namespace

int MemdCommand(const MemdArgs& a) {
  std::string token;
  if (!ResolveToken(a, &token)) return 1;
  auto client = RemoteClient::Connect(a.server, token, a.timeout_ms);
  if (!client.ok()) {
    const Status& s = client.status();
    if (s.code() == StatusCode::kPermissionDenied) {
      std::fprintf(stderr, "tiermemctl: memory server %s refused the token\n", a.server.c_str());
    } else {
      std::fprintf(stderr, "tiermemctl: cannot reach %s\n", s.message().c_str());
    }
    return 1;
  }
  auto stats = (*client)->ServerStats();
  if (!stats.ok()) {
    std::fprintf(stderr, "tiermemctl: %s: stats: %s\n", a.server.c_str(), stats.status().message().c_str());
    return 1;
  }
  auto clients = (*client)->ListClients();
  if (!clients.ok() && clients.status().code() != StatusCode::kNotSupported) {
    std::fprintf(stderr, "tiermemctl: %s: clients: %s\n", a.server.c_str(), clients.status().message().c_str());
    return 1;
  }
  const std::string name = (*client)->name();
  if (a.json) {
    nlohmann::json j = {{"server", name},
                        {"page_size", kPage},
                        {"capacity_pages", stats->capacity_pages},
                        {"reserved_pages", stats->used_pages},
                        {"quota_pages", stats->quota_pages},
                        {"sessions", stats->sessions},
                        {"connections", stats->connections}};
    if (clients.ok()) {
      j["written_pages"] = clients->written_pages;
      nlohmann::json arr = nlohmann::json::array();
      for (const RemoteSessionInfo& s : clients->sessions) {
        arr.push_back({{"session", s.session},
                       {"peer", s.peer},
                       {"data_path", s.rdma ? "rdma" : "tcp"},
                       {"self", s.self},
                       {"connections", s.connections},
                       {"slots", s.slots},
                       {"written_pages", s.written_known ? nlohmann::json(s.written_pages) : nlohmann::json(nullptr)},
                       {"quota_pages", s.quota_pages}});
      }
      j["clients"] = arr;
    } else {
      j["written_pages"] = nullptr;
      j["clients"] = nullptr;
      j["clients_unsupported"] = clients.status().message();
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("%s\n", name.c_str());
  std::printf("  capacity   %s (%llu pages)\n", Mib(stats->capacity_pages).c_str(),
              (unsigned long long)stats->capacity_pages);
  std::printf("  reserved   %s (%llu slots handed out to clients)\n", Mib(stats->used_pages).c_str(),
              (unsigned long long)stats->used_pages);
  if (clients.ok()) {
    std::printf("  written    %s (%llu slots holding data, TCP clients)\n", Mib(clients->written_pages).c_str(),
                (unsigned long long)clients->written_pages);
  }
  std::printf("  quota      %s per client\n", Mib(stats->quota_pages).c_str());
  std::printf("  clients    %u (%u connections)\n", stats->sessions, stats->connections);
  if (!clients.ok()) {
    std::printf("  (%s)\n", clients.status().message().c_str());
    return 0;
  }
  std::printf("\n  %-8s %-22s %-5s %5s %14s %14s %12s\n", "session", "peer", "path", "conns", "reserved",
              "written", "quota");
  for (const RemoteSessionInfo& s : clients->sessions) {
    std::string peer = s.peer + (s.self ? " (this)" : "");
    std::printf("  %-8llu %-22s %-5s %5u %14s %14s %12s\n", (unsigned long long)s.session, peer.c_str(),
                s.rdma ? "rdma" : "tcp", s.connections, Mib(s.slots).c_str(),
                s.written_known ? Mib(s.written_pages).c_str() : "-", Mib(s.quota_pages).c_str());
  }
  return 0;
}

}  // namespace tiermem::tools

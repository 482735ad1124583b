// tiermem-memd: the memory server of tiermem's remote (cold) tier. See --help.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>

#include "base/net.h"
#include "base/options.h"
#include "tiermem/options.hpp"
#include "tools/memd/server.h"

using tiermem::memd::MemdLog;

namespace {

const char kDescription[] = R"(tiermem-memd: memory server for tiermem's remote tier.

It lends page-sized slots of its memory to tiermem processes on other hosts (or this one). A
process evicts cold pages into slots and reads them back when it touches them again. Clients speak
the protocol in docs/protocol.md over TCP, and use RDMA READ/WRITE for page data when this host
has a verbs device (an RDMA NIC, or soft-RoCE).

Quick start, everything on one host:
  echo my-secret > token && chmod 600 token
  tiermem-memd --capacity 8G --token-file token &
  TIERMEM_TOKEN=my-secret TIERMEM_REMOTE=tcp://127.0.0.1:7471 ./my-program

Serving other hosts (token required), with RDMA where available:
  tiermem-memd --capacity 64G --listen 10.0.0.2:7471 --token-file /etc/tiermem/token
  # clients: TIERMEM_REMOTE=rdma://10.0.0.2:7471 (or tcp://10.0.0.2:7471)

A client's slots are freed when its last connection closes. SIGTERM or SIGINT stops the server
cleanly (open connections are closed, all memory is freed).)";

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{kDescription, "tiermem-memd"};
  std::string capacity = "1G", quota = "0", listen = "127.0.0.1:7471", token_file, port_file;
  uint32_t max_conns = 256, hello_ms = 5000;
  bool no_rdma = false, allow_no_token = false;
  app.add_option("--capacity", capacity, "memory to serve, with K/M/G/T suffix (e.g. 8G); reserved lazily")
      ->capture_default_str();
  app.add_option("--listen", listen,
                 "address:port for TCP and RDMA; only loopback unless you name another address "
                 "(port 0 picks a free port)")
      ->capture_default_str();
  app.add_option("--token-file", token_file,
                 "file holding the shared secret clients must present (TIERMEM_TOKEN is used when "
                 "absent); required when listening beyond loopback");
  app.add_option("--quota", quota, "most memory one client session may hold (0 = --capacity)")
      ->capture_default_str();
  app.add_option("--max-connections", max_conns, "connections served at once; more are refused")
      ->capture_default_str();
  app.add_option("--hello-timeout-ms", hello_ms, "a new connection must authenticate within this")
      ->capture_default_str();
  app.add_flag("--no-rdma", no_rdma, "serve TCP only, even when a verbs device exists");
  app.add_flag("--allow-no-token", allow_no_token,
               "serve beyond loopback without a token (isolated test networks only)");
  app.add_option("--port-file", port_file, "write the TCP port bound to this file once listening");
  CLI11_PARSE(app, argc, argv);

  tiermem::memd::ServerOptions o;
  if (!tiermem::ParseSize(capacity.c_str(), &o.capacity_bytes) || o.capacity_bytes < 4096) {
    MemdLog("error", "--capacity '%s' is not a size like 512M or 8G", capacity.c_str());
    return 2;
  }
  if (!tiermem::ParseSize(quota.c_str(), &o.quota_bytes)) {
    MemdLog("error", "--quota '%s' is not a size like 512M or 8G", quota.c_str());
    return 2;
  }
  tiermem::Status s = tiermem::net::SplitHostPort(listen, 7471, &o.listen_host, &o.listen_port, true);
  if (!s.ok()) {
    MemdLog("error", "--listen: %s", s.message().c_str());
    return 2;
  }
  if (!token_file.empty()) {
    std::ifstream f(token_file);
    if (!f) {
      MemdLog("error", "--token-file %s: cannot read it", token_file.c_str());
      return 2;
    }
    std::stringstream ss;
    ss << f.rdbuf();
    o.token = ss.str();
    while (!o.token.empty() && (o.token.back() == '\n' || o.token.back() == '\r' || o.token.back() == ' ')) {
      o.token.pop_back();
    }
    if (o.token.empty()) {
      MemdLog("error", "--token-file %s is empty", token_file.c_str());
      return 2;
    }
  } else if (tiermem::Status s = tiermem::OptionFromEnv("TIERMEM_TOKEN", &o.token); !s.ok()) {
    MemdLog("error", "%s", s.message().c_str());  // a token clients would not present
    return 2;
  }
  if (o.token.size() > tiermem::remote::proto::kMaxTokenBytes) {
    MemdLog("error", "the token is longer than %zu bytes", tiermem::remote::proto::kMaxTokenBytes);
    return 2;
  }
  if (o.token.empty() && !IsLoopback(o.listen_host) && !allow_no_token) {
    MemdLog("error", "listening on %s (beyond loopback) needs a token: --token-file or TIERMEM_TOKEN",
            o.listen_host.c_str());
    return 2;
  }
  o.max_connections = max_conns;
  o.hello_timeout_ms = hello_ms;
  o.rdma = !no_rdma;
  o.port_file = port_file;

  tiermem::memd::Server server(o);
  s = server.Start();
  if (!s.ok()) {
    MemdLog("error", "cannot start: %s", s.message().c_str());
    return 1;
  }
  s = server.Run();
  if (!s.ok()) {
    MemdLog("error", "%s", s.message().c_str());
    return 1;
  }
  return 0;
}

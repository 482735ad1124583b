#pragma once

#include <cstdint>
#include <string>

namespace tiermem::tools {
// Each returns the process exit status.
int TopologyCommand(bool json);
int OptionsCommand(bool json, bool markdown);  // markdown: a Markdown table
int TiersCommand(bool json);

// Live statistics of running processes (docs/observability.md).
struct StatArgs {
  int pid = 0;
  bool json = false;
  bool prometheus = false;
  bool allow_stale = false;   // print a stale block (a killed process's last figures), exit 0
  uint32_t interval_ms = 0;   // 0: one snapshot; else rates over each interval
  uint32_t count = 0;         // intervals to print; 0 = until interrupted
};
int PsCommand(bool json);
int StatCommand(const StatArgs& args);
int TopCommand(uint32_t interval_ms, uint32_t count);

struct ServeArgs {
  std::string listen = "127.0.0.1:9477";
  std::string port_file;      // the bound port is written here (for --listen HOST:0)
  uint32_t count = 0;         // requests to serve before exiting; 0 = until interrupted
  uint32_t timeout_ms = 5000; // a client must send its request within this
};
int ServeMetricsCommand(const ServeArgs& args);

struct MemdArgs {
  std::string server;         // host:port, tcp://host:port or rdma://host:port
  bool json = false;
  std::string token;
  std::string token_file;
  uint32_t timeout_ms = 5000;
};
int MemdCommand(const MemdArgs& args);

struct PlotArgs {
  std::string file;           // a timeline: TIERMEM_STATS with TIERMEM_STATS_INTERVAL_MS
  std::string out;            // the PNG to write
  std::string gnuplot = "gnuplot";
};
int PlotCommand(const PlotArgs& args);
}  // namespace tiermem::tools

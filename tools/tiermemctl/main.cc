// tiermemctl: look at the machine's memory tiers, at tiermem's configuration, at the processes
// running tiermem and at memory servers.
#include <CLI/CLI.hpp>

#include "tools/tiermemctl/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"tiermemctl: inspect tiermem's memory tiers (DRAM, CXL, remote)"};
  app.require_subcommand(1);
  bool json = false;
  auto* topo = app.add_subcommand(
      "topology", "NUMA nodes classified as dram/cxl/far, CXL and dax devices, RDMA devices");
  topo->add_flag("--json", json, "print JSON");
  auto* opts = app.add_subcommand("options", "every TIERMEM_* variable with its default");
  opts->add_flag("--json", json, "print JSON");
  bool markdown = false;
  opts->add_flag("--markdown", markdown, "print a Markdown table (variable, default, meaning)");
  auto* tiers = app.add_subcommand("tiers", "the tiers a runtime started here would use");
  tiers->add_flag("--json", json, "print JSON");

  auto* ps = app.add_subcommand("ps", "the processes using tiermem: pid, command, live or stale, bytes per tier");
  ps->add_flag("--json", json, "print JSON");
  tiermem::tools::StatArgs stat;
  auto* st = app.add_subcommand("stat", "one process's live counters; with --interval, rates per second");
  st->add_option("pid", stat.pid, "the process")->required();
  st->add_flag("--json", stat.json, "print JSON (one object per line with --interval)");
  st->add_flag("--prometheus", stat.prometheus, "print Prometheus text exposition");
  st->add_flag("--allow-stale", stat.allow_stale, "print the last figures of a process that is gone");
  st->add_option("--interval", stat.interval_ms, "milliseconds between samples; prints rates over each");
  st->add_option("--count", stat.count, "samples to print with --interval (default: until interrupted)");
  uint32_t top_interval = 1000, top_count = 0;
  auto* top = app.add_subcommand("top", "a live view of every process using tiermem, refreshed");
  top->add_option("--interval", top_interval, "milliseconds between refreshes (default 1000)");
  top->add_option("--count", top_count, "refreshes before exiting (default: until interrupted)");
  tiermem::tools::ServeArgs serve;
  auto* sm = app.add_subcommand("serve-metrics", "serve the Prometheus text of every live process on /metrics");
  sm->add_option("--listen", serve.listen, "HOST:PORT to listen on (default 127.0.0.1:9477; PORT 0 picks one)");
  sm->add_option("--port-file", serve.port_file, "write the bound port to this file");
  sm->add_option("--count", serve.count, "requests to serve before exiting (default: until interrupted)");
  sm->add_option("--timeout-ms", serve.timeout_ms, "how long one client may take to send its request");
  tiermem::tools::MemdArgs memd;
  auto* md = app.add_subcommand("memd", "a memory server's capacity, slots reserved and written, its clients");
  md->add_option("server", memd.server, "HOST:PORT (or tcp://HOST:PORT)")->required();
  md->add_flag("--json", memd.json, "print JSON");
  md->add_option("--token", memd.token, "the server's token (default: TIERMEM_TOKEN)");
  md->add_option("--token-file", memd.token_file, "a file holding the server's token");
  md->add_option("--timeout-ms", memd.timeout_ms, "connect timeout (default 5000)");
  tiermem::tools::PlotArgs plot;
  auto* pl = app.add_subcommand("plot", "draw a timeline (TIERMEM_STATS_INTERVAL_MS) with gnuplot");
  pl->add_option("file", plot.file, "the timeline: one JSON line per interval")->required();
  pl->add_option("-o,--output", plot.out, "the PNG to write")->required();
  pl->add_option("--gnuplot", plot.gnuplot, "the gnuplot program (default: gnuplot on PATH)");
  CLI11_PARSE(app, argc, argv);
  if (topo->parsed()) return tiermem::tools::TopologyCommand(json);
  if (opts->parsed()) return tiermem::tools::OptionsCommand(json, markdown);
  if (tiers->parsed()) return tiermem::tools::TiersCommand(json);
  if (ps->parsed()) return tiermem::tools::PsCommand(json);
  if (st->parsed()) return tiermem::tools::StatCommand(stat);
  if (top->parsed()) return tiermem::tools::TopCommand(top_interval, top_count);
  if (sm->parsed()) return tiermem::tools::ServeMetricsCommand(serve);
  if (md->parsed()) return tiermem::tools::MemdCommand(memd);
  if (pl->parsed()) return tiermem::tools::PlotCommand(plot);
  return 2;
}

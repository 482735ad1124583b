// tiermemctl: look at the machine's memory tiers and at tiermem's configuration.
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
  CLI11_PARSE(app, argc, argv);
  if (topo->parsed()) return tiermem::tools::TopologyCommand(json);
  if (opts->parsed()) return tiermem::tools::OptionsCommand(json, markdown);
  if (tiers->parsed()) return tiermem::tools::TiersCommand(json);
  return 2;
}

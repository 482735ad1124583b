// tiermem: run an unmodified program with tiered memory (`tiermem run`). docs/run.md.
#include <CLI/CLI.hpp>

#include "tools/tiermem/run.h"

int main(int argc, char** argv) {
  CLI::App app{"tiermem: run unmodified programs with their memory tiered over DRAM, CXL and memory servers"};
  app.require_subcommand(1);
  tiermem::tools::RunArgs run;
  auto* r = app.add_subcommand(
      "run", "run PROG under the preload library: `tiermem run [options] -- PROG ARGS`; exits with its status");
  r->add_option("--dram-limit", run.dram_limit, "DRAM the program's heap may hold (TIERMEM_DRAM_LIMIT), e.g. 512M");
  r->add_option("--cxl-limit", run.cxl_limit, "CXL memory it may hold (TIERMEM_CXL_LIMIT)");
  r->add_option("--remote", run.remote, "a memory server, tcp://HOST:PORT or rdma://HOST:PORT (repeatable)")
      ->allow_extra_args(false);
  r->add_option("--local-memd", run.local_memd,
                "start a tiermem-memd of this capacity on loopback for this run (fresh token), stop it after");
  r->add_option("--stats", run.stats,
                "the exit report: stderr (text) or FILE (JSON; %p is the process id); default: a summary only");
  r->add_option("--set", run.set, "any option as NAME=VALUE (`tiermemctl options`), e.g. --set prefetch=off")
      ->allow_extra_args(false);
  r->add_flag("-q,--quiet", run.quiet, "no tier summary at exit");
  r->add_option("--preload-lib", run.preload_lib, "the preload library (default: the one installed beside tiermem)");
  r->add_option("--memd", run.memd_binary, "the tiermem-memd for --local-memd (default: beside tiermem)");
  r->add_option("command", run.command, "PROG ARGS (after --)")->required();
  r->positionals_at_end();
  CLI11_PARSE(app, argc, argv);
  if (r->parsed()) return tiermem::tools::RunCommand(run);
  return 2;
}

// tiermem: run an unmodified program with tiered memory (`tiermem run`, docs/run.md), or ask
// what CXL or remote memory would do to it (`tiermem advise`, docs/advise.md).
#include <CLI/CLI.hpp>

#include "tools/tiermem/advise.h"
#include "tools/tiermem/run.h"

namespace {

CLI::App* AddAdvise(CLI::App& app, tiermem::tools::AdviseArgs& a) {
  auto* c = app.add_subcommand(
      "advise",
      "run PROG once with its heat recorded, predict its slowdown at DRAM shares of its peak on CXL, RDMA and TCP, "
      "and check one share with a real run: `tiermem advise [options] -- PROG ARGS`");
  c->add_option("--shares", a.shares, "DRAM shares of the peak RSS, largest first (default 1,0.75,0.5,0.25,0.125)")
      ->delimiter(',');
  c->add_option("--cxl-ns", a.cxl_ns, "a CXL load's latency in ns where no CXL node's HMAT says (default 250)");
  c->add_option("--dram-ns", a.dram_ns, "a DRAM load's latency in ns where no HMAT says (default 100)");
  c->add_option("--cxl-lines", a.cxl_lines, "cache lines an access reads from CXL, 1-64 (default 1)");
  c->add_option("--rdma-us", a.rdma_us, "an RDMA fault's cost per 4 KiB page in us (default 4)");
  c->add_option("--tcp-us", a.tcp_us, "a TCP fault's cost in us (default 0: measured on this machine)");
  c->add_option("--check-share", a.check_share,
                "the DRAM share the check runs at (default 0: the one predicted nearest --check-target; -1: no check)");
  c->add_option("--check-target", a.check_target, "the slowdown the check's share is picked by (default 1.10)");
  c->add_option("--check-memd", a.memd_capacity, "the check run's local memd capacity (default twice the peak RSS)");
  c->add_option("--record-reads", a.record_reads,
                "the record run's read samples: protect (write scan and protection sampling; a system call given a "
                "sampled heap page fails with EFAULT), uffd (a local memd and soft eviction, transparent to system "
                "calls; no write scan), none (write scan only, reads unseen), auto (protect, recorded again with uffd "
                "where protect's record ends otherwise than the plain run) (default auto)");
  c->add_option("--sample-pages", a.sample_pages,
                "TIERMEM_SAMPLE_PAGES of the record run with --record-reads protect or uffd, 1-4096 (default 4096)");
  c->add_option("--track-pages", a.track_pages,
                "TIERMEM_TRACK_PAGES of the record run's write scan: pages it reads a round (default: the option's)");
  c->add_option("--record-timeout", a.record_timeout,
                "stop a record run after this many times the plain run's time, 30 s at least (default 20; 0: never)");
  c->add_option("--log-pages", a.log_pages, "TIERMEM_HEAT_LOG_PAGES of the record run (default 16384)");
  c->add_flag("--json", a.json, "one JSON object instead of the table");
  c->add_option("--plot", a.plot, "a PNG of predicted slowdown against DRAM share, a line per far tier (gnuplot)");
  c->add_option("--set", a.run.set, "any option for the program's runs as NAME=VALUE (`tiermemctl options`)")
      ->allow_extra_args(false);
  c->add_option("--preload-lib", a.run.preload_lib, "the preload library (default: the one beside tiermem)");
  c->add_option("--memd", a.run.memd_binary, "the tiermem-memd for the check and the TCP measurement");
  c->add_option("command", a.run.command, "PROG ARGS (after --)")->required();
  c->positionals_at_end();
  return c;
}

}  // namespace

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
  tiermem::tools::AdviseArgs advise;
  CLI::App* adv = AddAdvise(app, advise);
  CLI11_PARSE(app, argc, argv);
  if (r->parsed()) return tiermem::tools::RunCommand(run);
  if (adv->parsed()) return tiermem::tools::AdviseCommand(advise);
  return 2;
}

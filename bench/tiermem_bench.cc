// tiermem-bench: one program, one subcommand per benchmark. Each subcommand's Add function
// (bench/subcommands.h) puts it and its options on the CLI11 app below; each prints a human
// summary, or JSON with --json.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <vector>

#include "bench/cli.h"
#include "bench/subcommands.h"

int main(int argc, char** argv) {
  namespace tb = tiermem::bench;
  CLI::App app{"tiermem-bench: tiermem's benchmarks, one subcommand each; each prints a human summary, or "
               "JSON with --json",
               "tiermem-bench"};
  app.formatter(std::make_shared<tb::BenchFormatter>());
  app.require_subcommand(1);
  app.footer("tiermem-bench SUBCOMMAND --help: its options and its JSON keys.");
  // Other benchmarks add a line here (and their declaration in subcommands.h).
  const std::vector<tb::Subcommand> subcommands = {
      tb::AddRemoteFault(app), tb::AddCompare(app),       tb::AddGups(app),      tb::AddKv(app),
      tb::AddKvReplay(app),    tb::AddMalloc(app),        tb::AddPreloadHotset(app), tb::AddMemcached(app),
      tb::AddSampleCost(app),  tb::AddForkRemote(app),    tb::AddPrograms(app),  tb::AddTrack(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // 0 after --help; 2 after a bad subcommand, flag or value (CLI11 prints the error).
    if (argc > 1 && argv[1][0] != '-' && app.get_subcommands().empty()) {
      fprintf(stderr, "tiermem-bench: unknown subcommand '%s' (tiermem-bench --help lists them)\n", argv[1]);
      return 2;
    }
    return app.exit(e) == 0 ? 0 : 2;
  }
  for (const tb::Subcommand& s : subcommands) {
    if (s.app->parsed()) return s.run(tb::CommandLine(argc - 1, argv + 1));
  }
  return 2;  // not reached: require_subcommand(1)
}

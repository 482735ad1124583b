// tiermem-bench: one program, one subcommand per benchmark. Each subcommand is a function
// `int Name(int argc, char** argv)` (argv[0] is the subcommand) registered in the table below;
// each prints a human summary, or JSON with --json.
#include <cstdio>
#include <cstring>

#include "bench/subcommands.h"

namespace {

struct Subcommand {
  const char* name;
  int (*run)(int, char**);
  const char* help;
};

const Subcommand kSubcommands[] = {
    {"remote-fault", tiermem::bench::RemoteFault,
     "evict pages to a memd, fault them back in random order, compare with the bare transport"},
    {"compare", tiermem::bench::Compare,
     "the same access patterns on DRAM, each CXL node, remote over RDMA and over TCP"},
    {"gups", tiermem::bench::Gups,
     "GUPS with a moving hot set: automatic tiering vs oracle, no tracking and all-DRAM;\n"
     "                 gups --kernel: the QEMU full guest's workload under the kernel's own tiering"},
    {"kv", tiermem::bench::Kv, "Zipfian get/put over a hash table: throughput and p99 per tier setup"},
    {"kv-replay", tiermem::bench::KvReplay,
     "kv's request trace against page-replacement policies (oracle, fifo, lru, clock, lfu), no runtime"},
    {"malloc", tiermem::bench::Malloc,
     "allocator workloads under glibc, jemalloc, mimalloc and tiermem (LD_PRELOAD)"},
    {"preload-hotset", tiermem::bench::PreloadHotset,
     "an unmodified C program with a moving hot set: plain, tiermem (LD_PRELOAD) and kernel swap"},
    {"memcached", tiermem::bench::Memcached,
     "memcached with a hot set of keys: plain, tiermem (LD_PRELOAD) and kernel swap; gets/s, p99, RSS"},
    {"sample-cost", tiermem::bench::SampleCost,
     "the cost of one access sample: protection faults vs soft eviction vs none, side by side"},
    {"fork-remote", tiermem::bench::ForkRemote,
     "fork() with most data remote: the parent's RSS while the child reads it all, share vs fetch"},
    {"programs", tiermem::bench::Programs,
     "real programs (redis, memcached, sqlite3, liblinear, sort, g++): plain, tiermem and kernel swap\n"
     "                 at shares of their peak RSS; the share that keeps 0.9x plain's speed"},
    {"track", tiermem::bench::Track,
     "write tracking per mechanism (PAGEMAP_SCAN, soft-dirty, protection sampling): cost per page\n"
     "                 per round and the share of the written pages found, at 1 and 4 GiB"},
    // Other benchmarks add a line here (and their declaration in subcommands.h).
};

void Usage(FILE* out) {
  fprintf(out, "usage: tiermem-bench <subcommand> [options]   (tiermem-bench <subcommand> --help)\n\nsubcommands:\n");
  for (const auto& s : kSubcommands) fprintf(out, "  %-14s %s\n", s.name, s.help);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    Usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (const auto& s : kSubcommands) {
    if (strcmp(argv[1], s.name) == 0) return s.run(argc - 1, argv + 1);
  }
  fprintf(stderr, "tiermem-bench: unknown subcommand '%s'\n", argv[1]);
  Usage(stderr);
  return 2;
}

// The subcommands of tiermem-bench (see tiermem_bench.cc). Each returns the process exit status.
#pragma once

namespace tiermem::bench {

int RemoteFault(int argc, char** argv);  // bench/remote_fault.cc
int Compare(int argc, char** argv);      // bench/compare.cc
int Gups(int argc, char** argv);         // bench/gups.cc
int KernelGups(int argc, char** argv);   // bench/gups_kernel.cc: gups --kernel
int Kv(int argc, char** argv);           // bench/kv.cc
int KvReplay(int argc, char** argv);     // bench/kv_replay.cc
int Malloc(int argc, char** argv);       // bench/malloc_bench.cc
int PreloadHotset(int argc, char** argv);  // bench/preload_hotset.cc
int Memcached(int argc, char** argv);    // bench/memcached.cc
int SampleCost(int argc, char** argv);   // bench/sample_cost.cc
int ForkRemote(int argc, char** argv);   // bench/fork_remote.cc
int Programs(int argc, char** argv);     // bench/programs.cc
int Track(int argc, char** argv);        // bench/track.cc

}  // namespace tiermem::bench

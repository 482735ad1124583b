// What the allocator workloads of tiermem-malloc-workload share (bench/malloc_workload.cc,
// bench/malloc_workload_more.cc and bench/malloc_workload_patterns.cc). Each workload takes the --scale multiple, does a fixed amount of
// work and returns its operation count; one that reads back a byte it did not write calls
// DataError, which ends the process with status 3 (the parent then reports the run as failed).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tiermem::bench::workload {

// xorshift64: cheap and the same sequence under every allocator.
struct Rng {
  uint64_t s;
  uint64_t Next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
};

// Prints what was wrong and exits with status 3.
[[noreturn]] void DataError(const char* workload, const void* block, size_t offset);

// Fills n bytes with a pattern derived from tag, and checks it back (DataError on a mismatch).
void Fill(void* p, size_t n, uint64_t tag);
void Check(const char* workload, const void* p, size_t n, uint64_t tag);

uint64_t FanIn(uint64_t scale);
uint64_t LargeTouch(uint64_t scale);
uint64_t ThreadChurn(uint64_t scale);
uint64_t SmallLoop(uint64_t scale);
uint64_t Factor(uint64_t scale);
uint64_t RemoteFree(uint64_t scale);
uint64_t FalseShare(uint64_t scale);
uint64_t SmallChurn(uint64_t scale);
uint64_t ThreadLoop(uint64_t scale);
uint64_t ThreadLoopBare(uint64_t scale);  // not in tiermem-bench malloc's default set

}  // namespace tiermem::bench::workload

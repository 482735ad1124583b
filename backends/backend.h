// What a tier's backend can do with a page run. A backend owns no memory: the runtime's managed
// regions hold the pages; a backend places and moves them (NUMA) or stores copies (remote).
//
// Contract: every method may be called from any thread; a backend serialises internally where it
// must. Methods return Status and never throw. Operations a backend cannot do return
// NotSupported (like an rdma-core provider that leaves an op out).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tiermem/status.hpp"

namespace tiermem {

struct BackendInfo {
  std::string name;         // "numa(dram: 0)", "numa(cxl: 1)", "remote(tcp://...)"
  std::vector<int> nodes;   // NUMA nodes, empty for the remote tier
  uint64_t capacity_bytes = 0;
  uint32_t read_latency_ns = 0;  // reported by HMAT or measured; 0 when unknown
  uint32_t read_bandwidth_mib_s = 0;
};

// Result of moving pages: per-page outcome is in the caller's arrays; these are the totals.
struct MoveStats {
  uint64_t moved = 0;
  uint64_t already_there = 0;
  uint64_t not_resident = 0;
  uint64_t failed = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendInfo Info() const = 0;
  // Binds [addr, addr+bytes) so pages faulted in later land on this backend.
  virtual Status Place(void* addr, size_t bytes) = 0;
  // Moves the resident pages of [addr, addr+bytes) here and binds the range. Pages not resident
  // are only bound.
  virtual StatusOr<MoveStats> MoveTo(void* addr, size_t bytes) = 0;
};

}  // namespace tiermem

// The NUMA mechanism for the DRAM and CXL tiers: binds page runs to a set of NUMA nodes (mbind),
// moves them in batches (move_pages, reading the per-page status and retrying pages the kernel
// skipped) and reads back which node each page is on (move_pages with no target).
//
// These are functions, not an object per tier: the runtime's regions hold the pages, and a NUMA
// tier is only a node list that the caller passes in. The remote tier's mechanism is the pager
// (runtime/paging), whose pages leave the address space; docs/architecture.md says why the two
// do not share an interface.
//
// Contract: every function may be called from any thread; none allocates on the tiered heap; all
// return Status (errno converted by base/os.h) and never throw.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tiermem/status.hpp"

namespace tiermem {

// Result of moving pages: the totals of the per-page outcomes.
struct MoveStats {
  uint64_t moved = 0;
  uint64_t already_there = 0;
  uint64_t not_resident = 0;
  uint64_t failed = 0;
};

class NumaBackend {
 public:
  NumaBackend() = delete;

  // Pages per move_pages call, and how many times a page the kernel skipped is retried.
  static constexpr size_t kBatch = 1024;
  static constexpr int kRetries = 4;

  // Moves [addr, addr+bytes) to `nodes` (pages spread round-robin over them) and binds it there.
  static StatusOr<MoveStats> MoveRange(void* addr, size_t bytes, const std::vector<int>& nodes);
  // The same for scattered pages (page addresses, ascending, each page-aligned): each run of
  // adjacent pages is bound with one mbind, and the moves share move_pages calls.
  static StatusOr<MoveStats> MovePages(const std::vector<char*>& pages, const std::vector<int>& nodes);
  // Binds [addr, addr+bytes) to `nodes` (MPOL_BIND) for future faults; moves nothing.
  static Status BindRange(void* addr, size_t bytes, const std::vector<int>& nodes);
  // node_out[i] = node of page i of the range, or -1 when not resident. Allocation-free apart
  // from the caller's array.
  static Status QueryNodes(const void* addr, size_t npages, int* node_out);
};

// "0,2,3" ("none" when empty): a node list as messages and the option table write it.
std::string NodeListString(const std::vector<int>& nodes);

}  // namespace tiermem

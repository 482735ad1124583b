// The NUMA backend: places page runs on a set of NUMA nodes (mbind), moves them in batches
// (move_pages, reading the per-page status and retrying pages the kernel skipped) and reads back
// which node each page is on (move_pages with no target).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/backend.h"

namespace tiermem {

class NumaBackend final : public Backend {
 public:
  // `nodes` must be non-empty and exist; `name` is for messages ("dram", "cxl").
  NumaBackend(std::string name, std::vector<int> nodes, uint64_t capacity_bytes);

  BackendInfo Info() const override;
  Status Place(void* addr, size_t bytes) override;
  StatusOr<MoveStats> MoveTo(void* addr, size_t bytes) override;

  const std::vector<int>& nodes() const { return nodes_; }

  // Pages per move_pages call, and how many times a page the kernel skipped is retried.
  static constexpr size_t kBatch = 1024;
  static constexpr int kRetries = 4;

  // Moves [addr, addr+bytes) to `nodes` (pages spread round-robin over them) and binds it there.
  static StatusOr<MoveStats> MoveRange(void* addr, size_t bytes, const std::vector<int>& nodes);
  // Binds [addr, addr+bytes) to `nodes` (MPOL_BIND) for future faults; moves nothing.
  static Status BindRange(void* addr, size_t bytes, const std::vector<int>& nodes);
  // node_out[i] = node of page i of the range, or -1 when not resident. Allocation-free apart
  // from the caller's array.
  static Status QueryNodes(const void* addr, size_t npages, int* node_out);

 private:
  std::string name_;
  std::vector<int> nodes_;
  uint64_t capacity_bytes_;
};

}  // namespace tiermem

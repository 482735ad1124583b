// tiermem: the explicit C++ API.
//
//   auto rt = tiermem::Runtime::Start();            // reads TIERMEM_* unless Options say otherwise
//   void* p = *(*rt)->Allocate(1 << 20, tiermem::Tier::kCxl);
//   (*rt)->Migrate(p, 1 << 20, tiermem::Tier::kDram);
//   auto where = (*rt)->Locate(p, 1 << 20);        // tier and node of every page
//
// Thread safety: every Runtime method may be called from any thread at any time between Start
// and Stop. Pointers returned by Allocate stay valid until Free or Stop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tiermem/status.hpp"
#include "tiermem/topology.hpp"

namespace tiermem {

enum class Tier : uint8_t {
  kDram = 0,    // local DRAM: NUMA nodes with CPUs
  kCxl = 1,     // memory-only NUMA nodes: CXL nodes, or far nodes when the machine has no CXL
  kRemote = 2,  // pages on a memory server (tiermem-memd), fetched on fault
  kAuto = 3,    // let tiermem decide (starts in DRAM)
};
inline constexpr int kNumTiers = 3;  // kDram, kCxl, kRemote
std::string_view TierName(Tier tier);  // "dram", "cxl", "remote", "auto"
StatusOr<Tier> ParseTier(std::string_view name);

// Runtime configuration. A field left unset takes the value of its TIERMEM_* variable, and the
// built-in default when that is unset or invalid (see `tiermemctl options` for the table).
struct Options {
  std::optional<uint64_t> dram_limit;         // TIERMEM_DRAM_LIMIT, bytes, 0 = unlimited
  std::optional<uint64_t> cxl_limit;          // TIERMEM_CXL_LIMIT, bytes, 0 = unlimited
  std::optional<std::string> dram_nodes;      // TIERMEM_DRAM_NODES: "auto" or "0,2"
  std::optional<std::string> cxl_nodes;       // TIERMEM_CXL_NODES: "auto", "none" or "1,2"
  std::optional<std::string> remote;          // TIERMEM_REMOTE: "tcp://127.0.0.1:7471,rdma://..."
  std::optional<std::string> token;           // TIERMEM_TOKEN: shared secret for memd
  std::optional<uint32_t> remote_timeout_ms;  // TIERMEM_REMOTE_TIMEOUT_MS
  std::optional<uint64_t> region_size;        // TIERMEM_REGION_SIZE: address space per region
  std::optional<bool> allow_fallback;         // TIERMEM_ALLOW_FALLBACK: absent tier -> DRAM
  std::optional<std::string> stats;           // TIERMEM_STATS: "", "stderr" or a file path
  std::optional<std::string> log_level;       // TIERMEM_LOG: error|warn|info|debug
};

// Flags for Runtime::Allocate.
enum AllocFlags : uint32_t {
  kAllocDefault = 0,
  kAllocAllowFallback = 1u << 0,  // place in DRAM when the asked tier is absent
  kAllocPin = 1u << 1,            // the automatic policy never moves these pages
  kAllocPopulate = 1u << 2,       // fault every page in now rather than on first touch
};

struct PageLocation {
  Tier tier = Tier::kDram;  // the tier the page is on (or, when not resident, is bound to)
  int node = -1;            // NUMA node of a resident page; -1 when not resident or remote
  bool resident = false;    // mapped in this process now
};

struct MigrateResult {
  uint64_t pages_moved = 0;          // moved by this call
  uint64_t pages_already_there = 0;  // resident on a target node before the call
  uint64_t pages_not_resident = 0;   // never touched: the new policy applies at first touch
  uint64_t pages_failed = 0;         // the kernel refused to move them after retries
};

struct TierStats {
  Tier tier = Tier::kDram;
  bool available = false;
  std::string absent_reason;    // why not available
  std::vector<int> nodes;       // NUMA nodes of the tier (empty for kRemote)
  uint64_t capacity_bytes = 0;  // node memory, or the configured limit when smaller
  uint64_t allocated_bytes = 0; // bytes of live allocations bound to the tier
  uint64_t pages_migrated_in = 0;
  uint64_t pages_migrated_out = 0;
};

class Runtime {
 public:
  // Discovers the topology, reserves the managed address space and starts the runtime's threads.
  static StatusOr<std::unique_ptr<Runtime>> Start(const Options& options = {});
  ~Runtime();  // stops if still running; live allocations are unmapped
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Stops threads and releases the address space. Idempotent.
  Status Stop();

  // Allocates `bytes` (rounded up to whole pages) on `tier`. Fails with Unavailable when the tier
  // is absent (unless kAllocAllowFallback or TIERMEM_ALLOW_FALLBACK), ResourceExhausted when the
  // tier's limit or the address space is full, InvalidArgument for 0 bytes.
  StatusOr<void*> Allocate(size_t bytes, Tier tier, uint32_t flags = kAllocDefault);
  // Frees a pointer returned by Allocate. InvalidArgument for anything else (nothing is freed).
  Status Free(void* ptr);
  // Size of the allocation that starts at ptr (a whole number of pages).
  StatusOr<size_t> AllocationSize(const void* ptr) const;

  // Moves the pages of [ptr, ptr+len) to `tier` (the range may cover several allocations but
  // must lie inside tiermem's allocations). Pages not yet touched are bound to the tier.
  StatusOr<MigrateResult> Migrate(void* ptr, size_t len, Tier tier);
  // Same, to one NUMA node; NotFound when the node does not exist or has no memory.
  StatusOr<MigrateResult> MigrateToNode(void* ptr, size_t len, int node);
  // Tier and node of every page of [ptr, ptr+len).
  StatusOr<std::vector<PageLocation>> Locate(const void* ptr, size_t len) const;

  bool HasTier(Tier tier) const;
  std::vector<TierStats> Stats() const;
  const Topology& topology() const;

  // A memory resource that allocates on `tier` (with the fallback rule of Options). Owned by the
  // runtime; valid until Stop. Allocation failure throws std::bad_alloc, as pmr requires.
  std::pmr::memory_resource* Resource(Tier tier);

  class Impl;
  Impl* impl() { return impl_.get(); }  // for the project's own layers (allocator, tools)

 private:
  explicit Runtime(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tiermem

// Access sampling without hardware counters: a rotating sample of pages is protected with
// PROT_NONE; the first read or write of a sampled page raises SIGSEGV, whose handler records the
// access (write or read, from the x86 page-fault error code), restores the page's protection and
// lets the instruction run again. Pages on the remote tier need no sampling: their faults reach
// the pager and the policy thread sees them come back (runtime/tiering/migrator.h).
//
// Why protection faults: reads must be seen, not only writes (userfaultfd write-protect sees
// writes only; minor faults need shmem; PEBS is not offered by these VMs, and idle page tracking
// and DAMON are absent: see DetectPebs()). Each sampled page costs at most one fault per round,
// so the overhead is bounded by pages-per-round / round-interval (TIERMEM_SAMPLE_PAGES,
// TIERMEM_SAMPLE_INTERVAL_MS).
//
// Signal safety: the handler reads a fixed, statically allocated open-addressing table of
// sampled pages (atomics only), calls mprotect (a bare system call) and stores an atomic. It
// never allocates, locks or logs. A fault that is not on a sampled page goes to the program's
// handler (os::ChainSegv: the one installed before ours, or, under the preload library, the one
// the program set since; or the default action, which ends the process as it would have).
// A page leaves the table only one round after its protection was lifted, so a fault already on
// its way when the round ended still finds it; a fault on a page in neither table is retried once
// (its protection may have been lifted while the thread waited to run) and passed on only when it
// repeats.
//
// Limits (documented in docs/tiering.md): a system call given a pointer into a sampled page fails
// with EFAULT instead of faulting, so the tracker lifts the protection of pages handed to the
// pager or freed, and the runtime does not protect pages of a preloaded program (mode "auto").
//
// Thread safety: Arm/Collect/Release/DisarmAll may be called from any thread (one mutex); the
// tracker is a process-wide singleton because signal handlers are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/pages/sampler.h"
#include "runtime/tiering/policy.h"
#include "tiermem/status.hpp"

namespace tiermem {

class ProtectTracker final : public AccessSampler {
 public:
  static constexpr size_t kMaxArmed = 4096;  // pages per round at most

  // The process's tracker. Install() the handler once before the first Arm.
  static ProtectTracker& Get();
  Status Install();
  // True while our handler is still the SIGSEGV handler (a program may replace it: without the
  // preload library, or with the raw system call).
  bool HandlerInstalled() const;
  // True while sampling may go on: our handler installed, and the program has set no SIGSEGV
  // handler of its own. Under the preload library a program's handler does not replace ours
  // (os::ProgramSigaction records it and ours chains to it), but sampling still stops: a program
  // that handles its own faults is one whose system calls on heap buffers would meet sampled
  // pages and fail with EFAULT (redis-server's epoll_wait), so the migrator disarms every page
  // and the mode becomes "faults". Pages still armed until then are lifted by our handler.
  bool ProgramHandlerFree() const;

  // AccessSampler (runtime/pages/sampler.h). Collect lifts protection from every page still
  // armed (kept ones stay protected); Release lifts it before a page is evicted, freed or passed
  // to a system call.
  const char* name() const override { return "protect"; }
  size_t max_armed() const override { return kMaxArmed; }
  bool usable() const override { return ProgramHandlerFree(); }
  void Collect(uint64_t now_ns, std::vector<AccessSample>* out, std::vector<uint64_t>* untouched = nullptr,
               const std::function<bool(uint64_t)>& keep = {}) override;
  size_t Arm(const std::vector<char*>& pages, const ArmFilter& armable = {}) override;
  size_t carried() const override;
  void Release(const void* addr, size_t len) override;
  void DisarmAll() override;
  Counters counters() const override;

 private:
  ProtectTracker() = default;
  // Arm's steps, mu_ held. CarryOver: the pages still protected from the last round move from
  // table `old` to the current one (touched ones keep their kind, released ones are dropped).
  // FreshPages: the new pages to arm, ascending, as far as the table's share (kept: carried).
  void CarryOver(int old);
  std::vector<char*> FreshPages(const std::vector<char*>& pages, const ArmFilter& armable, size_t kept) const;
  mutable std::mutex mu_;
  bool installed_ = false;
  int cur_ = 0;  // table of the current round (0/1)
  std::vector<char*> armed_;  // pages of the current round, by address
  bool in_round_ = false;      // armed_ is a round in progress (else: pages carried over)
  Counters counters_;
};

// Whether precise memory sampling (PEBS / perf_event with precise_ip) is available here.
// Returns false with the reason (e.g. "perf_event_open(cycles, precise_ip=2): ENOENT").
bool DetectPebs(std::string* reason);

}  // namespace tiermem

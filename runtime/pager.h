// The pager: moves page runs of managed regions out to a memory server (tiermem-memd) and faults
// them back in with userfaultfd.
//
// Design (the why is in docs/protocol.md, "Paging"):
// - Only ranges that have been evicted (or allocated on kRemote) are registered with userfaultfd
//   (MISSING | WP). A first-touch fault costs ~10 us on these VMs; routing every fresh page of a
//   managed region through a handler thread would double that, so untouched memory never sees
//   userfaultfd. Freed runs are unregistered again.
// - Evict(run): pages go kLocal -> kInFlight (CAS), the range is write-protected (uffd-wp), the
//   resident pages that are dirty are written to memd (clean ones already are there), then the
//   run is dropped (MADV_DONTNEED) and marked kRemote, and any thread that faulted on it meanwhile
//   is woken to fault again. A write during eviction therefore waits and then reads the server's
//   copy: no page is lost between "written out" and "dropped". Untouched pages (no pte) are not
//   written at all; they come back as zero pages.
// - Fault: one handler thread reads userfaultfd events in batches, posts the reads of every
//   faulted remote page at once (pipelined on its own connection), and installs each page with
//   UFFDIO_COPY, which wakes every thread waiting on it: concurrent faults on a page are served
//   once. A page brought in by a read fault is installed write-protected and stays "clean"
//   (kPageRemoteClean): if it is evicted again before anyone writes it, it is not written again.
//   The first write to it costs one WP fault that marks it dirty.
// - A fault that cannot be served (server dead or silent beyond TIERMEM_REMOTE_TIMEOUT_MS) prints
//   one line naming the server and the address, and the process exits with status 75: the
//   program never reads a zero page in place of its data, and never hangs.
//
// Thread safety: every public method may be called from any thread. Evict and FetchBack are
// serialised on one connection; the handler thread has its own connection in the same session.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/remote/transport.h"
#include "runtime/region.h"
#include "tiermem/status.hpp"

namespace tiermem {

struct PagerConfig {
  std::string servers;  // TIERMEM_REMOTE: "tcp://127.0.0.1:7471" (the first reachable is used)
  std::string token;
  uint32_t timeout_ms = 5000;
  uint64_t slot_chunk = 16384;  // slots asked of memd at a time (64 MiB)
  // Maps a faulting address to its managed region (Runtime::Impl::RegionOf).
  std::function<Region*(const void*)> region_of;
};

struct PagerStats {
  uint64_t faults = 0;           // remote pages fetched by the fault handler
  uint64_t zero_fills = 0;       // faults served with a zero page (never-written remote pages)
  uint64_t wp_faults = 0;        // first writes to clean pages
  uint64_t evicted = 0;          // pages dropped to the remote tier
  uint64_t written = 0;          // pages written to memd
  uint64_t skipped_clean = 0;    // evictions with no write: the server copy was current
  uint64_t skipped_untouched = 0;// evictions of never-touched pages: nothing to write
  uint64_t fetched = 0;          // pages brought back by FetchBack
};

// The exit status of a process whose remote page could not be fetched.
inline constexpr int kRemoteLostExitCode = 75;

class Pager {
 public:
  // Connects to the first reachable server of config.servers and starts the fault thread.
  // Unavailable (naming each server tried) when none answers; NotSupported when userfaultfd is
  // not usable here (and says why: e.g. vm.unprivileged_userfaultfd=0).
  static StatusOr<std::unique_ptr<Pager>> Start(PagerConfig config);
  ~Pager();  // stops the fault thread; the session's slots are freed by memd on disconnect

  // Writes pages [first, first+n) of `region` to the server where needed and drops them.
  // Pages must be allocated; pages already remote are left as they are. Returns the number of
  // pages that became remote. On failure nothing is dropped (pages stay local and intact).
  StatusOr<uint64_t> Evict(Region& region, uint64_t first, uint64_t n);
  // Marks a fresh run as remote (contents zero, nothing on the server yet): its first touch
  // faults to the handler, which installs a zero page.
  Status AdoptRemote(Region& region, uint64_t first, uint64_t n);
  // Brings the remote pages of [first, first+n) back in (read and installed, clean). Returns the
  // number fetched.
  StatusOr<uint64_t> FetchBack(Region& region, uint64_t first, uint64_t n);
  // A run is being freed: its slots return to the pool, its pages are dropped, the range is no
  // longer registered. Call before Region::ReleaseRun.
  void OnFree(Region& region, uint64_t first, uint64_t n);
  // The pages of a live run are dropped (the heap recycles a span): like OnFree, but the range
  // stays registered and allocated. The next touch gives a zero page, never the server's copy.
  void OnDiscard(Region& region, uint64_t first, uint64_t n);

  // fork(): PrepareFork (from the runtime's atfork prepare handler) stops evictions and brings
  // every remote page back, because the child has no fault handler; AfterFork releases. In the
  // child the remote tier is then unavailable (Evict/AdoptRemote/FetchBack say so).
  void PrepareFork(Region* regions, int nregions);
  void AfterFork(bool child);
  bool forked_child() const { return forked_child_; }

  PagerStats stats() const;
  const std::string& server() const { return server_; }
  bool write_protect() const { return wp_; }
  // The raw transport connection used for evictions (benchmarks measure it); lock with
  // io_mutex() while using it.
  remote::Transport& io_transport() { return *io_; }
  std::mutex& io_mutex() { return io_mu_; }

 private:
  Pager() = default;
  Status Init(PagerConfig config);
  void FaultLoop();
  [[noreturn]] void Fatal(const void* addr, const Status& why);
  // Slot management (slot numbers are memd's; records store slot+1).
  StatusOr<uint64_t> TakeSlot();
  void GiveSlot(uint64_t slot);
  const remote::SlotRange* RangeOf(uint64_t slot) const;  // caller holds slots_mu_
  Status Register(void* addr, size_t bytes);
  void Wake(void* addr, size_t bytes);
  StatusOr<uint64_t> FetchBackLocked(Region& region, uint64_t first, uint64_t n);  // io_mu_ held
  static constexpr const char* kForkedMessage =
      "the remote tier is not available in a child process (fork): its fault handler and server "
      "connection belong to the parent";
  bool forked_child_ = false;

  PagerConfig config_;
  std::string server_;
  int uffd_ = -1;
  int stop_fd_ = -1;
  bool wp_ = false;
  std::unique_ptr<remote::Transport> io_;     // Evict / FetchBack / slot control, under io_mu_
  std::unique_ptr<remote::Transport> fault_;  // the handler thread's own
  std::mutex io_mu_;
  mutable std::mutex slots_mu_;
  std::vector<remote::SlotRange> ranges_;  // sorted by first
  std::vector<uint64_t> free_slots_;
  std::thread thread_;
  int pagemap_fd_ = -1;

  std::atomic<uint64_t> faults_{0}, zero_fills_{0}, wp_faults_{0}, evicted_{0}, written_{0},
      skipped_clean_{0}, skipped_untouched_{0}, fetched_{0};
};

}  // namespace tiermem

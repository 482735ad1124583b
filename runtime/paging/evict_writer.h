// The eviction writer's queue: windows of pages whose writes to the memory servers are posted
// and collected by the pager's writer thread (pager_writer.cc), so the evicting thread does not
// wait for memd's round trip window by window, and many windows' writes are in flight at once,
// to every server (and every replica) together.
//
// Ownership (docs/protocol.md, "Background eviction writes"):
// - An evicting thread (io lock held) claims a window's pages (kLocal -> kInFlight), protects
//   them, assigns their slots and fills an EvictJob, then Push()es it: from then on the job and
//   the pages' bytes belong to the writer thread. The pages stay claimed and write-protected
//   until the writer finishes the job: a write to one waits in the fault handler and is redone
//   after the drop (from the server's copy, which is the bytes that were protected), and a
//   fault never sees a half-dropped page.
// - The writer thread posts the job's writes on the servers' io connections and collects the
//   acknowledgements; when all of a job's writes are in, it drops the pages and marks them
//   remote, or (a write failed) gives them back local, dirty and unprotected; then Done().
// - The io connections belong to the writer thread while any job is queued or in flight; every
//   other user of them (slot allocation, FetchBack, repair, fork) takes the io lock and Drain()s
//   first. No job is queued without the io lock, so none starts meanwhile.
// - Bound: kMaxJobs windows of pages queued or in flight (Push blocks beyond it, it never drops).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/remote/transport.h"
#include "runtime/pages/region.h"
#include "tiermem/status.hpp"

namespace tiermem {

// What a caller of Evict waits for: the jobs it queued, and what became of them. Fields are
// written by the writer thread under EvictWriter's lock and read by the waiter after Wait().
struct EvictTicket {
  size_t pending = 0;          // jobs of this ticket not finished yet
  uint64_t pages_pending = 0;  // pages its unfinished jobs claimed (EvictWriter::PagesPending)
  uint64_t became_remote = 0;  // pages dropped to the remote tier
  Status failure;              // the first failure of one of its jobs
  std::string failure_server;  // the server named by it ("" when none)
  // Windows that failed because a server failed (marked down): their pages are local again,
  // and the caller may evict them again (they then go to servers that are up).
  struct LostWindow {
    Region* region = nullptr;
    std::vector<uint64_t> idx;
  };
  std::vector<LostWindow> lost_windows;
};

// One write of a job: a page (or, coded, a piece) to one member's memd slot.
struct EvictWrite {
  size_t server = 0;
  remote::SlotRange memd;
  uint64_t slot = 0;
  uint32_t offset = 0;   // coded: the piece's byte offset in the slot
  uint32_t length = 0;   // coded: the piece's bytes; 0: a whole page
  uint32_t page = 0;     // which page of the job
  const char* src = nullptr;
};

// One eviction window handed to the writer thread.
struct EvictJob {
  Region* region = nullptr;
  std::vector<uint64_t> idx;      // the window's pages, ascending
  std::vector<uint8_t> claimed;   // claimed by this eviction (the others are left alone)
  std::vector<uint8_t> planned;   // has writes (dirty and populated)
  std::vector<EvictWrite> writes;
  std::vector<char> parity;       // coded: the parity pieces the writes point into
  // Write-scan mode: page i's bytes as copied before the send, at i * page size: what the writes
  // point into and what the take-out compares with (pager_evict.cc). Empty otherwise.
  std::vector<char> copy;
  uint64_t t0_ns = 0;             // queued at (for the eviction latency)
  EvictTicket* ticket = nullptr;  // null: nobody waits (EvictPagesQueued)
  // The writer thread's:
  uint64_t seq = 0;
  std::vector<size_t> out;        // writes not acknowledged yet, per server
  std::vector<size_t> written;    // writes posted, per server (counted once all succeeded)
  size_t outstanding = 0;
  // Pages a transport could not read when it sent them (remote::Completion::page): their
  // eviction is called off, the connection and the window's other pages go on.
  std::vector<uint8_t> unreadable;
  Status failure;
  std::string failure_server;
  size_t failed_server = SIZE_MAX;
  bool finished = false;
};

class EvictWriter {
 public:
  // Windows queued or in flight at most: 8 x 256 pages = 8 MiB of pages whose local copy is
  // kept until acknowledged. Enough to keep every server's connection busy while the evicting
  // thread prepares the next windows (one window per replica and then some); small enough that
  // DRAM held past its limit by pages being written stays near the relief slack (4 MiB or
  // 1/32 of the limit) and a Drain() waits for at most 8 windows' round trips.
  static constexpr size_t kMaxJobs = 8;

  EvictWriter() = default;
  EvictWriter(const EvictWriter&) = delete;
  EvictWriter& operator=(const EvictWriter&) = delete;

  // Any thread: queues `job`, waiting while kMaxJobs jobs are queued or in flight. Counts the
  // job in its ticket. False (nothing queued) after Stop().
  bool Push(std::unique_ptr<EvictJob> job);
  // The writer thread: moves the queued jobs to `out`. With `wait`, blocks until there is one
  // (false: stopped and none left).
  bool Take(std::vector<std::unique_ptr<EvictJob>>* out, bool wait);
  // The writer thread: `job` is finished (its pages dropped or given back): its place in the
  // queue is free and its ticket is credited (`lost_window`: the job failed with its server,
  // which is down now; its waiter may queue the window again).
  void Done(const EvictJob& job, uint64_t became_remote, bool lost_window);
  // Waits until every job of `t` is finished.
  void Wait(EvictTicket* t);
  // Any thread: the pages claimed by jobs of `t` not finished yet (neither dropped nor given
  // back; they still count as resident where they are).
  uint64_t PagesPending(const EvictTicket* t) const;
  // Waits until no job is queued or in flight.
  void Drain();
  // The writer thread ends once every queued job is finished; Push refuses from then on.
  void Stop();
  // Readable while jobs are queued (the writer thread polls it with its connections).
  int event_fd() const { return event_fd_; }
  void set_event_fd(int fd) { event_fd_ = fd; }

  size_t depth() const;           // jobs queued or in flight now
  uint64_t full_waits() const;    // Push calls that waited for room
  uint64_t waiting() const;       // Push calls waiting for room now

 private:
  mutable std::mutex mu_;
  std::condition_variable room_cv_, work_cv_, done_cv_;
  std::deque<std::unique_ptr<EvictJob>> queue_;
  size_t depth_ = 0;
  uint64_t full_waits_ = 0, waiting_ = 0;
  bool stop_ = false;
  int event_fd_ = -1;
};

}  // namespace tiermem

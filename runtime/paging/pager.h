// Subsystem runtime/paging: owns the remote tier's paging (server connections, slot maps, the
// userfaultfd fault handler thread, eviction). It reads the core's page records (pages/region.h)
// and calls backends/remote's transports and base/; it never includes runtime_impl.h.
//
// The pager: moves page runs of managed regions out to a memory server (tiermem-memd) and faults
// them back in with userfaultfd.
//
// The design (states, eviction, faults, several servers, replicas, failures) is docs/protocol.md,
// "Paging": read it before changing this class.
//
// Thread safety: every public method may be called from any thread. Evict and FetchBack are
// serialised on the servers' io connections (io_mu_); the handler thread has its own connection
// to each server in the same session.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/remote/transport.h"
#include "base/append_only_list.h"
#include "base/counters.h"
#include "base/os.h"
#include "runtime/pages/region.h"
#include "runtime/paging/erasure.h"
#include "runtime/paging/evict_writer.h"
#include "runtime/paging/fault_conns.h"
#include "runtime/paging/fork_share.h"
#include "runtime/paging/pager_config.h"
#include "runtime/paging/pager_ranges.h"
#include "runtime/paging/pager_server.h"
#include "runtime/paging/prefetch.h"
#include "runtime/paging/soft_sampler.h"
#include "tiermem/status.hpp"

namespace tiermem {

class Pager {
 public:
  // Connects to every reachable server of config.servers (a warning names the others) and starts
  // the fault thread. Unavailable (naming each server tried) when none answers; NotSupported when
  // userfaultfd is not usable here (and says why: e.g. vm.unprivileged_userfaultfd=0).
  static StatusOr<std::unique_ptr<Pager>> Start(PagerConfig config);
  ~Pager();  // stops the fault thread; the session's slots are freed by memd on disconnect

  // Writes pages [first, first+n) of `region` to the server where needed and drops them.
  // Pages must be allocated; pages already remote are left as they are. Returns the number of
  // pages that became remote. On failure nothing is dropped (pages stay local and intact).
  StatusOr<uint64_t> Evict(Region& region, uint64_t first, uint64_t n);
  // The same for scattered pages (`pages`: ascending page indices of `region`): their writes
  // share the round trips (up to a window of pages at once) instead of one Evict call each. On
  // failure, the pages of the window that failed stay local and intact; earlier windows are done.
  StatusOr<uint64_t> EvictPages(Region& region, const std::vector<uint64_t>& pages);
  // Background eviction (evict_writer.h): like EvictPages, but returns once the pages are
  // claimed, write-protected and queued (the count), without waiting for memd. The writer
  // thread drops each page once every copy is acknowledged, or gives it back local (intact,
  // dirty) when a write fails. Blocks only while EvictWriter::kMaxJobs windows are queued or in
  // flight. A write to a queued page calls its eviction off (it stays local, pager_writer.cc).
  StatusOr<uint64_t> EvictPagesQueued(Region& region, const std::vector<uint64_t>& pages);
  // The same with a ticket, for a caller that does not wait now but later (the policy thread:
  // its round queues, the next round or relief waits): returns the pages claimed. The ticket
  // (the caller's; it must outlive its jobs) is credited as each window finishes; EvictWait
  // settles it. On a failure, the windows queued before it are credited all the same. A null
  // ticket: nobody waits (EvictPagesQueued).
  StatusOr<uint64_t> EvictPagesBegin(Region& region, const std::vector<uint64_t>& pages, EvictTicket* ticket);
  // Waits for every window of `ticket`, queues those lost with a server again for the others
  // (and waits for them); `became_remote`: the pages that became remote. Returns the first
  // failure (the pages of its window are local and intact). The ticket is empty again
  // afterwards. Not with io_mu_ held.
  Status EvictWait(EvictTicket* ticket, uint64_t* became_remote);
  // Any thread: the pages `ticket`'s unfinished windows claimed (still resident until their
  // writes are acknowledged).
  uint64_t EvictPending(const EvictTicket* ticket) const { return writer_ ? writer_->PagesPending(ticket) : 0; }
  // Waits until no eviction write is queued or in flight. Every user of the io connections
  // other than the writer thread calls it with io_mu_ held (io_mutex(), too).
  void DrainWrites() {
    if (writer_) writer_->Drain();
  }
  const EvictWriter* writer() const { return writer_.get(); }
  // Takes on a fresh run allocated as remote (Region::AllocRun with kInFlight: contents zero,
  // nothing on the server yet): registers it and marks it kRemote, so its first touch faults to
  // the handler, which installs a zero page.
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

  // fork() (pager_fork.cc, pager_fork_child.cc; the design in docs/design-notes.md).
  // PrepareFork (the runtime's atfork prepare handler) stops evictions. Shared
  // (fork_sharing()): the remote pages' slots are recorded and held for the child, whose missing
  // faults this pager serves from those slots through the child's userfaultfd (a thread per
  // child) until the child's address space is gone; then the slots the parent let go of
  // meanwhile are freed. The child gets a copy of its descriptor too, and a thread of its own
  // takes over the serving when this process is gone (killed, exec'd, or its runtime stopped).
  // Otherwise every remote page is brought back first. AfterFork releases. In the child the
  // remote tier takes no new pages (Evict/AdoptRemote/FetchBack say so) and new memory stays
  // local; a child that forks again brings its remote pages in first (no sharing there).
  void PrepareFork(Region* const* regions, int nregions);
  void AfterFork(bool child);
  bool forked_child() const { return forked_child_; }
  bool fork_sharing() const { return fork_share_; }
  struct ForkStats {
    uint64_t children = 0;       // parent: children served so far (each fork with pages remote)
    uint64_t live = 0;           // parent: children whose address space still exists
    uint64_t served = 0;         // pages read from a server and installed in a child (by this
                                 // process: the parent's threads, or the child's own)
    uint64_t zero_filled = 0;    // child faults on pages with no fork-time copy: zero pages
    uint64_t held_slots = 0;     // parent: slots a live child may still read (held from being freed)
    bool took_over = false;      // child: its own thread serves it (the parent is gone)
  };
  ForkStats fork_stats() const;
  // Parent: every child still served gets each page it may still read installed now, and its
  // thread ends (runtime stop, and an exit handler: a parent leaving before its child read its
  // pages). Child: its own serving thread ends.
  void StopChildren();

  // True while no connected server can take a new page: each refused its last slot allocation
  // (memd at its capacity, or at the quota it gives this process) and has no free slot of its
  // own. Lock-free and allocation-free (atomics only): any thread, the fault handler and
  // allocating threads included. A server is asked again after a second (placement) and is no
  // longer full once it grants slots or pages of it are freed here.
  bool Full() const;
  // "tcp://127.0.0.1:7471: 128 MiB, 32768 pages used" for each connected server ("MiB quota"
  // when the quota memd gives this process is below its capacity), ';'-separated, into buf
  // (always NUL-terminated, truncated to n). Lock-free and allocation-free, like Full().
  void DescribeServers(char* buf, size_t n) const;
  // Lists one more memory server ("tcp://host:port" or "rdma://host:port") while the process
  // runs: the repair thread connects to it within a second (and again, backing off, while it
  // does not answer), and from then on it takes new pages and replacement copies like any
  // server of the list. Ok once listed; InvalidArgument for a malformed address or one listed
  // already, ResourceExhausted past kMaxServers, Unavailable in a forked child. Any thread but the pager's own; takes io_mu_.
  Status AddServer(const std::string& address);
  // Pages the connected servers could hold for this process in all: the sum of each one's
  // quota (memd's capacity when the quota is larger). Lock-free.
  uint64_t CapacityPages() const;
  // Pages the servers hold for this process (all servers together, each copy or piece once per
  // server): zero while no page was ever written out, however many are allocated on the remote
  // tier. Lock-free.
  uint64_t PagesStored() const;

  // The counters (all servers together): the stats block's, or the pager's own copy.
  const ProcessCounters& counters() const { return *c_; }
  CounterValues stats() const { return LoadCounters(*c_); }
  // Pages in use with fewer copies than they should have now (counted under the slots lock; the
  // block's remote_degraded_pages is the repair thread's latest count).
  uint64_t DegradedPagesNow() const;
  std::vector<PagerServerStats> server_stats() const;  // one per listed server, in list order
  // The fault handler's connections to listed server k (TIERMEM_FAULT_CONNECTIONS; 0 while
  // it is not connected). Read while the server is up.
  uint32_t fault_connections(size_t k) const { return k < servers_.size() ? servers_[k]->fault.n : 0; }
  // The servers connected at start, comma-separated ("tcp://127.0.0.1:7471,tcp://127.0.0.1:7472").
  const std::string& server() const { return server_; }
  bool write_protect() const { return wp_; }
  bool write_scan() const { return wp_async_; }  // PagerConfig::wp_async granted
  // Write-scan mode: a whole managed region registered for the scan until the pager ends.
  Status RegisterForScan(void* addr, size_t bytes);
  // Write-scan mode: around each scan and its clearing of the clean marks of pages it found
  // written (CopyForSend reads its clean check again where one overlapped). One thread at a time.
  void ScanBegins() { scan_seq_.fetch_add(1, std::memory_order_seq_cst); }
  void ScanEnds() { scan_seq_.fetch_add(1, std::memory_order_seq_cst); }
  // The soft sampler on this pager's userfaultfd (soft_sampler.h), or null where it cannot work
  // here (no write-protect, user-mode-only faults, or its buffer could not be mapped).
  AccessSampler* sampler() { return sampler_.get(); }
  // The sampler that protects pages from outside the pager (the protect tracker), or null. Each
  // eviction, once it has claimed its pages (kInFlight), releases them from it before any is
  // sent: a page armed between the evictor's choice and its claim is lifted, never sent while
  // inaccessible (AccessSampler::Arm says why that closes the race). Any thread.
  void WatchClaims(AccessSampler* watch) { claim_watch_.store(watch, std::memory_order_release); }
  // The raw eviction connection of the first connected server (benchmarks measure it); lock
  // with io_mutex() and DrainWrites() while using it.
  remote::Transport& io_transport() { return *servers_[first_connected_]->io; }
  std::mutex& io_mutex() { return io_mu_; }

 private:
  using Server = PagerServer;  // one memory server as the pager holds it (pager_server.h)
  // Where a pager slot's copies live (pager_ranges.h).
  using Member = PagerMember;
  using SlotRef = PagerSlotRef;
  using Range = PagerRange;
  // A page read that turns to another replica (or piece) when its server fails. With replicas
  // one member is asked at a time; with a code, k + kLateReads pieces at once, and the page is
  // whole (decoded if a data piece is missing) once k have arrived. Completions carry the cookie
  // j * kCookieMembers + member.
  struct ReadReq {
    SlotRef ref;
    uint32_t tried = 0;        // bit i: member i was asked
    uint32_t out = 0;          // bit i: member i's read is in flight
    uint32_t got = 0;          // bit i: member i's piece arrived (code)
    bool done = false;         // the page is whole in buf (on_done was called)
    char* buf = nullptr;       // where the page goes (data pieces at their place in it)
    char* spare = nullptr;     // code: m pieces' room for the parity pieces read
    uint64_t posted_ns = 0;    // when it was posted (the servers' read latency)
    Status last;               // the latest failure
  };
  static constexpr uint64_t kCookieMembers = 16;
  // Where the completions of requests posted to several servers are collected.
  struct CollectError {
    size_t server = 0;
    uint32_t conn = 0;  // which of its fault connections failed (fault_conn)
    Status status;
  };

  friend class UffdSampler;  // arms under io_mu_, registers and installs through uffd_
  Pager() = default;
  Status Init(PagerConfig config);
  // Init's steps (pager.cc), in the order it calls them.
  Status ListServers(std::vector<remote::Endpoint>* eps, std::vector<bool>* from_file);
  Status SetRedundancy(size_t listed);
  StatusOr<os::Uffd> OpenUffd();
  Status ConnectServers(const std::vector<remote::Endpoint>& eps, const std::vector<bool>& from_file);
  void SetFaultSpin(const std::vector<remote::Endpoint>& eps);
  Status PrepareThreads(const os::Uffd& uffd);
  // ---- the fault handler thread (pager_fault.cc: the loop, installs and windows fetched ahead;
  // pager_fault_intake.cc: reading faults and posting their reads; pager_fault_batch.h) ----
  struct FaultBatch;
  void FaultLoop();
  void TakeFaults(FaultBatch& b);  // what the userfaultfd queued, while staging has room
  void OnFault(FaultBatch& b, const os::UffdFault& f, size_t left);  // left: of its read
  void OnWriteProtectFault(char* addr, PageRecord& rec);
  uint64_t ZeroFillRun(Region& region, uint64_t index, char* addr, const void* zeros);  // pages filled
  void PostFault(FaultBatch& b, Region& region, uint64_t index, uint32_t slot1, const os::UffdFault& f,
                 size_t left);
  void FetchAhead(FaultBatch& b, Region* region, uint32_t tid, const Prefetcher::Ahead& a, size_t reserve);
  void CollectFaults(FaultBatch& b);  // replies as they land, and more faults meanwhile
  void ThrottleFaults(FaultBatch& b);  // AfterFaults, and the counts since start again
  void InstallFault(FaultBatch& b, size_t j, size_t server);
  void AheadArrived(FaultBatch& b, size_t j);
  void FinishWindows(FaultBatch& b);  // installs the parts fetched ahead that are all in
  [[noreturn]] void Fatal(const void* addr, size_t server, const Status& why);
  // No replica of the page at `addr` could be read: names every server of it.
  [[noreturn]] void FatalAll(const void* addr, const SlotRef& ref, const Status& why);
  // Slot management (pager_slots.cc). TakeSlot/GiveSlot/PickServer/NewRange run with io_mu_
  // held.
  // Pages a server can still take, for placement (under slots_mu_ or io_mu_).
  uint64_t Room(size_t k) const;
  // The usable server with the most room, or kNoServer when none can take a page: each is
  // down, or leads no healthy group with free slots and cannot lead a new one (memd refused it
  // within the last second, or too few others could join it: CanLeadGroup). Servers marked in
  // `skip` are passed over; with `free_only`, so are those that lead no healthy group with free
  // slots. The counts are CountHealthyFree's (TakeSlot brings them up to date first).
  size_t PickServer(const std::vector<uint8_t>* skip = nullptr, bool free_only = false);
  // Enough other usable servers that memd has not refused within the last second (full_until_ns
  // before `now`) to form a new group led by `lead` (io_mu_).
  bool CanLeadGroup(size_t lead, uint64_t now) const;
  // Brings every server's healthy_free up to date when a server went down or a range got its
  // members back since the last count (health_gen_); io_mu_.
  void CountHealthyFree();
  // *lead_refused: `server` itself could not take the page (full or down), so placement may try
  // the next; otherwise the replicas could not be placed anywhere.
  StatusOr<uint64_t> TakeSlotOn(size_t server, bool* lead_refused);
  // Moves *placement on when a server is full; PagingEvents::OnFull is called when none can take the page
  // (unless !announce_full: the caller has a fallback).
  StatusOr<uint64_t> TakeSlot(size_t* placement, bool announce_full = true);
  void GiveSlot(uint64_t slot);
  // A new range led by `lead` and its replicas on the roomiest other servers; its index.
  // ResourceExhausted when `lead` refused (*lead_refused) or too few others could take it.
  StatusOr<size_t> NewRange(size_t lead, bool* lead_refused);
  uint64_t FirstAsk(size_t lead) const;  // NewRange's steps (pager_slots.cc), io_mu_ held
  void JoinReplicas(size_t lead, uint64_t count, uint64_t now, Range* range, Status* last);
  StatusOr<size_t> AddRange(std::unique_ptr<Range> range);
  bool Locate(uint64_t slot, SlotRef* out) const;  // takes slots_mu_
  bool Healthy(const Range& r) const;              // every member up
  bool Usable(size_t server) const {
    return servers_[server]->connected.load(std::memory_order_acquire) && !servers_[server]->down.load(std::memory_order_acquire);
  }
  // Usable and not withdrawn from the servers file: may lead or join a new group.
  bool Placeable(size_t server) const {
    return Usable(server) && !servers_[server]->withdrawn.load(std::memory_order_relaxed);
  }
  // A member whose copy may be read: its server is usable and still in the member's session.
  bool Readable(const Member& m) const {
    return Usable(m.server) && servers_[m.server]->gen.load(std::memory_order_acquire) == m.gen;
  }
  Member MemberOn(size_t server, const remote::SlotRange& r) const {
    return Member{server, r, servers_[server]->gen.load(std::memory_order_relaxed)};
  }
  std::string DownReason(size_t server) const;
  // The member of `ref` to read from: readable, not in `tried` (bit i: member i), among those
  // with about the lowest recent read latency in turn (now and then the slowest, to measure it
  // again). -1 when none is left.
  int PickReplica(const SlotRef& ref, uint32_t tried) const;
  // "tcp://a:7471, tcp://b:7471": the servers of a slot's members.
  std::string MemberNames(const SlotRef& ref) const;
  // Marks `server` down (first call only): one warning unless `quiet`, and the repair thread is
  // told. Any thread; lock-free apart from the log line and the repair thread's wake-up.
  void MarkDown(size_t server, const Status& why, bool quiet = false);
  // A read of a page from `server` took `ns` (fault thread): its latency estimate.
  void NoteReadLatency(size_t server, uint64_t ns);
  // The repair thread (pager_repair.cc): restores the replicas of ranges with a down member.
  void RepairLoop();
  bool RepairOne();  // one range; false when none needs it (or none can be done now)
  void ForgetDownServers();                                 // RepairOne's steps
  bool RangeToRepair(size_t* ri, uint32_t* bad) const;
  bool PickReplacement(const Range& r, Member* to);
  void Probe();
  // Connects again, once a second, to each server that is down (or was not reached at start)
  // and that no range lists any more (its copies are restored elsewhere): a new session, and it
  // takes new placements. Repair thread.
  void Rejoin();
  // Rejoin's steps: whether server `k` is to be tried now (down or never reached, listed by no
  // range, not withdrawn, its back-off over); ConnectAgain makes its connections (io, then
  // the fault connections on the same session), without the io lock; TakeBack installs them
  // and starts its state again under io_mu_ (false in a forked child: the connections are
  // closed).
  bool RejoinDue(size_t k) const;
  bool ConnectAgain(const Server& s, std::unique_ptr<remote::Transport>* io, FaultConns* fault) const;
  bool TakeBack(Server& s, std::unique_ptr<remote::Transport> io, FaultConns* fault, bool was_connected);
  bool Listed(size_t server) const;  // some range (or a join) has a member there
  // Appends a server (not connected: Rejoin connects it) and calls PagingEvents::OnServerListed, io_mu_
  // held: true. False when it is listed already (taken out of the servers file: now back in,
  // when `from_file`). ResourceExhausted past kMaxServers.
  StatusOr<bool> ListServer(const remote::Endpoint& ep, bool from_file);
  // The servers file (PagerConfig::servers_file), read again when it changed: new entries are
  // listed, entries taken out stop taking new pages, put back take them again (repair thread).
  void WatchServerFile();
  // "tcp://a:7471,tcp://b:7471": the usable servers, for messages (io_mu_).
  std::string UsableNames() const;
  // Publishes the pages short of a replica, per lost server and in all (remote_degraded_pages,
  // PagerServerCounters::debt); the repair thread calls it after each change it makes.
  void CountDebt();      // a stats request to each usable server: one that fails is marked down
  Status CopyRange(size_t range, const Member& to, const std::vector<uint8_t>& in_use);
  // Coded ranges: member `bad`'s pieces rebuilt from k others and written to `to`.
  Status RebuildRange(size_t range, uint32_t bad, const Member& to, const std::vector<uint8_t>& in_use);
  // RebuildRange's steps, io_mu_ held: PickSources, the first k readable members of `r` other
  // than `bad` into have[] (false: fewer left); RebuildRun, memd slots [a, b) read from them,
  // `bad`'s piece decoded and written to `to`: the pages restored, or the error that ends the
  // rebuild (*retry: a source failed and was marked down; the chunk starts again).
  bool PickSources(const Range& r, uint32_t bad, uint32_t* have) const;
  StatusOr<uint64_t> RebuildRun(const Range& r, uint32_t bad, const Member& to, const uint32_t* have, uint64_t a,
                                uint64_t b, const std::vector<uint8_t>& in_use, char* bufs, bool* retry);
  Status Register(void* addr, size_t bytes);
  void Wake(void* addr, size_t bytes);
  StatusOr<uint64_t> FetchBackLocked(Region& region, uint64_t first, uint64_t n);  // io_mu_ held
  // ---- eviction (pager_evict.cc) and its writer thread (pager_writer.cc, evict_writer.h) ----
  struct EvictScratch {
    EvictScratch();
    std::vector<uint64_t> pm;
    bool no_fresh = false;     // no healthy group could take a page of an unhealthy one
    size_t placement = kNoServer;  // chosen at the first page that needs a new slot
    uint64_t queued = 0;       // pages the last window claimed
    std::vector<uint64_t> pm2;       // write-scan mode: pagemap read after the copy
    std::vector<uint8_t> clean_ok;   // and whether each page's clean mark holds (CopyForSend)
  };
  Status RegisterRuns(Region& region, const std::vector<uint64_t>& pages);
  // Queues the windows of idx[0..n) and waits for them; windows lost with a server go again.
  StatusOr<uint64_t> EvictAndWait(Region& region, const uint64_t* idx, size_t n);
  // The ticket's windows lost with a server, queued again until none is lost (io_mu_ held).
  Status RequeueLost(EvictTicket* t);
  // What the ticket's jobs came to (or `failure`, when queueing failed); empties the ticket.
  static StatusOr<uint64_t> SettleTicket(EvictTicket* t, const Status& failure);
  // One window: pages idx[0..m) of `region` (ascending, m <= kBatch, registered), io_mu_ held.
  // Claim, write-protect, plan the writes, queue the job (t: who waits, or null). On a failure
  // before queueing, the pages are given back local and nothing is queued.
  Status QueueWindow(Region& region, const uint64_t* idx, size_t m, EvictScratch* w, EvictTicket* t);
  // Page i of the job (claimed, `pm` its pagemap entry or null): its slot, and its writes.
  Status PlanPage(Region& region, uint64_t index, const uint64_t* pm, size_t i, EvictScratch* w, EvictJob* job);
  Status PlanWrites(Region& region, uint64_t index, size_t i, const SlotRef& ref, EvictJob* job);
  // Write-scan mode: pages copied into job->copy (what is sent) and w->clean_ok set.
  void CopyForSend(Region& region, bool have_pm, EvictScratch* w, EvictJob* job);
  // Write-scan mode, writer thread: drop[]'s pages taken out, or put back and cleared from it.
  void TakeOutSent(EvictJob& job, std::vector<uint8_t>& drop);
  void GiveBack(EvictJob& job);  // a failed job's pages: local, dirty, unprotected, woken
  void WriterLoop();             // the writer thread
  void PostJob(EvictJob& job, std::vector<size_t>& outstanding);  // writer thread
  void FinishJob(EvictJob& job);  // writer thread: every write of the job came back
  // Writer thread: a transport could not read `page` (an address a write of `job` posted).
  void MarkUnreadable(EvictJob& job, const void* page);
  std::unique_ptr<EvictWriter> writer_;
  std::thread writer_thread_;
  // Polls the io (or fault) connections of the servers with outstanding[server] > 0 until every
  // request came back, calling on_done(server, completion) for each. With nothing ready it
  // waits on every busy connection at once (Transport::WaitFd), so a slow server does not hold
  // the replies of the others; a connection without a descriptor (RDMA) is waited on alone.
  // `intake` (not null): also returns, with *intake set and requests still out, after a round
  // that took replies (the caller installs what is complete, and its staging is free again),
  // and when `intake_fd` (>= 0) becomes readable (the fault handler's userfaultfd: new faults
  // to post meanwhile).
  // Fails on a poll error or a timeout. Defined in pager_collect.h, with CollectReads.
  template <typename OnDone>
  bool Collect(bool fault_conn, std::vector<size_t>& outstanding, CollectError* err, OnDone&& on_done,
               int intake_fd = -1, bool* intake = nullptr);
  // Collect's connections of server k: its io connection, or its fault connections (those with
  // no read in flight left alone where it has several). TakeReplies polls them (waiting only
  // where there is one); *failed: the connection that failed. BusyFds: intake_fd and every
  // busy connection, for one wait on all (pager_reads.cc).
  uint32_t ConnCount(bool fault_conn, size_t k) const { return fault_conn ? servers_[k]->fault.n : 1; }
  remote::Transport& Conn(bool fault_conn, size_t k, uint32_t c) const;
  bool ConnBusy(bool fault_conn, size_t k, uint32_t c) const;
  template <typename OnDone>
  StatusOr<size_t> TakeReplies(bool fault_conn, size_t k, int timeout_ms, std::vector<size_t>& outstanding,
                               OnDone& on_done, uint32_t* failed);
  static constexpr size_t kMaxWaitFds = 1 + kMaxServers * kMaxFaultConnections;
  size_t BusyFds(bool fault_conn, const std::vector<size_t>& outstanding, int intake_fd, int* fds,
                 uint8_t* want_out) const;
  // Posts the reads of `r` (request number j) that it still needs: its best replica not yet
  // tried, or (code) pieces up to k + kLateReads in flight or arrived, on the fault or io
  // connection; a server whose post fails is marked down and the next is tried. False when too
  // few members are left to give the page (pager_reads.cc).
  bool PostReplicaRead(bool fault_conn, ReadReq& r, uint64_t j, std::vector<size_t>& outstanding);
  // Sends what is posted on the fault connections of the servers with reads `outstanding` now,
  // rather than at the next wait (Transport::Send). Fault thread only. A connection that fails
  // here fails its requests' completions, which the next collection takes as any other failure.
  void SendQueued(const std::vector<size_t>& outstanding);
  // A completion of member i's read of `r` from `server`: true when the page is whole now (the
  // caller calls on_done), false otherwise (more pieces due, a stale completion, or a failure:
  // then *retry says whether the read must be posted again).
  bool OnReadCompletion(ReadReq& r, uint32_t i, size_t server, const Status& st, bool* retry);
  // Where member i of `ref` keeps its copy (replicas) or its piece (code) of the page: memd slot
  // and byte offset in it. Piece bytes: piece_.
  uint64_t MemberSlot(const SlotRef& ref, const Member& m) const {
    return m.memd.first + ref.offset / per_slot_;
  }
  uint32_t PieceOffset(const SlotRef& ref) const {
    return static_cast<uint32_t>((ref.offset % per_slot_) * piece_);
  }
  // Bytes of parity pieces one coded read may hold (0 with replicas).
  size_t SpareBytes() const { return code_ ? code_->shape().m * piece_ : 0; }
  // A member not in `tried` that is marked down but still connected in its slots' session
  // (the failure that marked it may have been its other connection's); -1 when none.
  int LastResort(const SlotRef& ref, uint32_t tried) const;
  // The member to ask next for a piece (code): data pieces first, then parity; -1 when none.
  int PickPiece(const SlotRef& ref, uint32_t tried) const;
  // "TIERMEM_REPLICAS=2" or "TIERMEM_REMOTE_CODE=4+2": for messages.
  std::string Redundancy() const;
  // Collect for reads with failover: a read whose server fails is posted to another replica.
  // req(j) is the request of cookie j (nullptr: none); on_done(j, server) for each page read;
  // on_lost(j) for a read no replica could serve (r.last says why).
  // Returns once no read is out (false), or with `yield` sooner, with true (reads still out):
  // after a round that took replies, or when `intake_fd` (>= 0) is readable (Collect's
  // `intake`).
  template <typename Req, typename OnDone, typename OnLost>
  bool CollectReads(bool fault_conn, std::vector<size_t>& outstanding, size_t n, Req&& req,
                    OnDone&& on_done, OnLost&& on_lost, bool yield = false, int intake_fd = -1);
  // ---- fork (pager_fork.cc, pager_fork_child.cc) ----
  // A child being served. In the parent: `fd` the child's userfaultfd (from the fork event),
  // `sock` this process's end of the pair whose other end the child holds (closed: the child
  // serves itself from then on), `thread` serves the child. In the child (self_): `fd` its copy of
  // the same descriptor, `sock` its end (end of file: the parent is gone), `thread` waits for that
  // and then serves. `done` is set by the thread as it ends.
  struct ForkChild {
    int fd = -1;
    int sock = -1;
    std::unique_ptr<ForkSnapshot> snap;
    std::thread thread;
    std::atomic<bool> done{false};
  };
  void SnapshotForFork(Region* const* regions, int nregions);  // io_mu_ held
  void FetchAllForFork(Region* const* regions, int nregions);  // io_mu_ held
  void ServeChild(ForkChild* c);  // the parent's thread for a child
  bool ServeChildFault(ForkChild* c, const os::UffdFault& f, std::vector<int64_t>* batch, char* staging);
  bool InstallAllInChild(ForkChild* c, std::vector<int64_t>* batch, char* staging, bool* gone);
  // AfterFork's steps (pager_fork.cc), with the locks PrepareFork took.
  void AfterForkUnshared(bool child);
  void ClaimForkEvent(ForkSnapshot* pending, int* fd, ForkSnapshot** snap);
  void StartServingChild(int fd, ForkSnapshot* snap);
  void HandOver(ForkChild* c);    // closes our socket end: the child serves itself from now on
  // The child's missing faults `e` (entries of its snapshot): read and installed. False when
  // the child is gone, or when a page could not be read (the child is handed the serving: its
  // own read fails the same way and it exits 75, naming the page's servers).
  bool InstallInChild(ForkChild* c, const std::vector<int64_t>& e, char* staging);
  void ReleaseSnapshot(ForkSnapshot& snap);  // io_mu_ held
  void ForgetAtExit();                       // the exit handler no longer knows this pager
  void OnForkEvent(int fd);                  // fault thread: a UFFD_EVENT_FORK was read
  // In a child: pages still remote (served by the parent, or by the child's own thread) are
  // touched, so the child's own fork gives them to the grandchild (which gets no server).
  void TouchRemoteInChild(Region* const* regions, int nregions);
  // In a child: OnFree/OnDiscard. Snapshot pages of the range are never installed after this:
  // such a range gets fresh memory (unregistered), the rest is dropped.
  void ChildDrop(Region& region, uint64_t first, uint64_t n, bool discard);
  // Reads pager slots [0, n) into staging (a page each) on the io connections (the parent's
  // with io_mu_ held, or the child's own), failing over between replicas. False when some page
  // could not be read: *lost is its j, *why the last failure.
  bool ReadSlots(const uint64_t* slots, size_t n, char* staging, size_t* lost, Status* why);
  void GiveSlotNow(uint64_t slot);  // GiveSlot without the fork holds
  // The child's side (pager_fork_child.cc).
  void AfterForkChild(ForkSnapshot* snap);
  void StandBy();     // the child's thread: waits for the parent's end, then serves
  void ConnectOwn();  // the child's thread: connections of its own, joining each session
  void ServeSelfFault(const os::UffdFault& f, char* staging, std::vector<int64_t>& batch);
  // Entries `e` of self_'s snapshot: read and installed, self_mu_ held. Exits (status 75, one
  // line naming the page's servers) where no copy of a page can be read.
  void InstallSnapshotPages(const std::vector<int64_t>& e, char* staging);
  void DestroyInChild();  // ~Pager in a forked child
  bool fork_share_ = false;         // fork events granted (and write-protect): share at fork
  bool parent_serves_ = false;      // in a child: its fork-time remote pages are served
  SlotHolds holds_;                 // io_mu_
  std::vector<Region*> fork_regions_;  // of the fork in progress (PrepareFork to AfterFork)
  ForkSnapshot* fork_pending_ = nullptr;  // made by PrepareFork, until AfterFork (forking thread)
  std::atomic<ForkSnapshot*> fork_snapshot_{nullptr};  // PrepareFork -> the fork event's reader
  std::atomic<ForkSnapshot*> fork_taken_{nullptr};     // taken by the reader, with fork_fd_
  std::atomic<int> fork_fd_{-1};
  int fork_sock_[2] = {-1, -1};     // the pair of the fork in progress: [0] ours, [1] the child's
  std::atomic<int> fork_send_{-1};  // fork_sock_[0] for the fork event's reader
  int fork_stop_fd_ = -1;           // children's threads: install what is left and end
  mutable std::mutex children_mu_;  // children_
  std::vector<std::unique_ptr<ForkChild>> children_;
  std::unique_ptr<ForkChild> self_;  // in a child served at its fork
  std::mutex self_mu_;               // child: self_->snap->served, and its installs and drops
  std::atomic<bool> took_over_{false};  // child: its own thread serves it
  std::atomic<uint64_t> fork_children_{0}, fork_served_{0}, fork_zero_{0};

  static constexpr const char* kForkedMessage =
      "the remote tier is not available in a child process (fork): its fault handler and server "
      "connection belong to the parent";
  bool forked_child_ = false;

  PagerConfig config_;
  // The time the pager's schedule goes by (PagerConfig::clock); latencies use os::MonotonicNanos.
  uint64_t Now() const { return config_.clock->NowNanos(); }
  std::string server_;
  int uffd_ = -1;
  int stop_fd_ = -1;
  bool wp_ = false;
  bool wp_async_ = false;  // write-scan mode (pager_evict.cc, "Two paths")
  char* scratch_ = nullptr;  // the writer thread's take-out page, registered with uffd_
  std::atomic<uint64_t> scan_seq_{0};  // odd while a scan runs (ScanBegins/ScanEnds)
  // List order; unreachable ones have no io. Appended with io_mu_ held (Init, ListServer);
  // read by any thread (size() once, then entries below it).
  AppendOnlyList<Server, kMaxServers> servers_;
  size_t first_connected_ = 0;
  size_t next_pick_ = 0;  // round-robin start among equals; io_mu_
  std::mutex io_mu_;
  std::atomic<bool> fault_ready_{false};  // the fault thread has made its buffers (Start waits)
  mutable std::mutex slots_mu_;  // ranges_ (read by the fault thread)
  std::vector<std::unique_ptr<Range>> ranges_;  // sorted by first (pager slots only grow)
  uint64_t next_slot_ = 0;       // io_mu_ and slots_mu_
  uint32_t members_ = 1;  // members of a group: replicas, or k+m pieces
  uint32_t need_ = 1;     // members whose copy or piece a read needs: 1, or k
  uint64_t per_slot_ = 1; // pager slots per memd slot: 1, or k (a piece each)
  size_t piece_ = 4096;   // bytes of a member's copy of a page: a page, or a piece
  std::unique_ptr<ErasureCode> code_;  // TIERMEM_REMOTE_CODE; null with replicas
  std::thread thread_;
  std::thread repair_thread_;
  mutable std::mutex repair_mu_;
  mutable std::atomic<uint32_t> pick_seq_{0};  // PickReplica's turn
  std::condition_variable repair_cv_;
  bool repair_wanted_ = false;             // repair_mu_
  bool rejoin_wanted_ = false;             // repair_mu_: a server was listed (AddServer)
  std::string server_file_text_;           // the servers file as last read (repair thread)
  bool server_file_unread_ = false;        // the last read failed: said once (repair thread)
  std::atomic<bool> repair_stop_{false};  // set with repair_mu_ held
  int pagemap_fd_ = -1;
  std::unique_ptr<UffdSampler> sampler_;  // made by Init where it can work
  std::atomic<AccessSampler*> claim_watch_{nullptr};  // WatchClaims

  // The fault handler's pages fetched ahead, installed once their part is in: `at(k)` is the
  // k-th page's destination (region null: not one to install) and `page` its copy in staging;
  // `installed`: already in place (InstallOneAhead on arrival), to be woken only.
  struct AheadPage {
    Region* region;
    uint64_t index;
    bool installed = false;
    const char* page = nullptr;
  };
  template <typename At>  // At: AheadPage(size_t); a template, so the fault path never allocates
  void InstallAhead(size_t n, const At& at);
  // Installs one page fetched ahead from `page` (`copied`: already placed by a larger copy) and
  // marks it local and kPageAhead, without waking anyone; false (the page left remote, its copy
  // on the server) when it cannot be placed.
  bool InstallOneAhead(Region& region, uint64_t index, const char* page, bool copied);
  // Moves each time a range may have changed from healthy to not or back: a server marked down
  // (MarkDown, any thread), a member restored (the repair thread, io_mu_ held).
  std::atomic<uint64_t> health_gen_{0};
  uint64_t health_counted_ = ~uint64_t{0};  // the health_gen_ of the last count; io_mu_
  ProcessCounters own_counters_{};
  ProcessCounters* c_ = &own_counters_;  // the stats block's, or own_counters_
  Prefetcher prefetcher_{0};  // the fault handler thread's (made by Init)
  uint64_t fault_spin_ns_ = 0;  // TIERMEM_FAULT_SPIN_US, resolved by Init
};

}  // namespace tiermem

// The pager's writer thread: it owns the eviction windows queued by QueueWindow (pager_evict.cc,
// evict_writer.h) from Push to Done. It posts their writes on the servers' io connections, many
// windows and every replica at once, collects the acknowledgements as they come (every busy
// connection and the queue's eventfd in one poll), and finishes each window once all its writes
// are in: its pages dropped and marked remote, or given back local when a write failed.
#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/os.h"
#include "runtime/paging/evict_check.h"
#include "runtime/paging/pager.h"
#include "runtime/paging/pager_collect.h"
#include "runtime/paging/pager_internal.h"

namespace tiermem {

using pager_internal::ForRuns;
using pager_internal::kPage;
using pager_internal::S;
using pager_internal::TakeEvictingFlag;

void Pager::WriterLoop() {
  std::vector<size_t> outstanding(kMaxServers, 0);
  std::deque<std::unique_ptr<EvictJob>> flight;  // in queue order; cookie = seq
  std::vector<std::unique_ptr<EvictJob>> fresh;
  uint64_t next_seq = 0;
  auto fail = [&](EvictJob& job, size_t server, const Status& why) {
    if (!job.failure.ok()) return;
    job.failure = why;
    job.failure_server = servers_[server]->name;
    job.failed_server = server;
  };
  for (;;) {
    fresh.clear();
    // Waits for work only with nothing in flight; stops once stopped and nothing is left.
    if (!writer_->Take(&fresh, flight.empty()) && flight.empty()) return;
    for (auto& job : fresh) {
      job->seq = next_seq++;
      PostJob(*job, outstanding);
      flight.push_back(std::move(job));
    }
    for (auto& job : flight) {
      if (job->finished || job->outstanding != 0) continue;
      FinishJob(*job);
      config_.events->OnWindowDone();
    }
    while (!flight.empty() && flight.front()->finished) flight.pop_front();
    if (flight.empty()) continue;
    CollectError err;
    bool intake = false;
    const bool ok = Collect(false, outstanding, &err, [&](size_t k, const remote::Completion& c) {
      const uint64_t first = flight.front()->seq;
      if (c.cookie < first || c.cookie - first >= flight.size()) return;
      EvictJob& job = *flight[c.cookie - first];
      if (job.out[k] == 0) return;
      --job.out[k];
      --job.outstanding;
      if (c.page != nullptr) {
        MarkUnreadable(job, c.page);  // that page alone: the server is fine
      } else if (!c.status.ok()) {
        fail(job, k, c.status);
      }
    }, writer_->event_fd(), &intake);
    if (!ok) {
      // The connection failed as a whole: every write still out on it failed.
      outstanding[err.server] = 0;
      for (auto& job : flight) {
        if (job->out[err.server] == 0) continue;
        job->outstanding -= job->out[err.server];
        job->out[err.server] = 0;
        fail(*job, err.server, err.status);
      }
    }
  }
}

void Pager::PostJob(EvictJob& job, std::vector<size_t>& outstanding) {
  job.out.assign(kMaxServers, 0);
  job.written.assign(kMaxServers, 0);
  std::vector<uint32_t> posted(job.idx.size(), 0);
  for (const EvictWrite& wr : job.writes) {
    if (!job.failure.ok()) break;
    if (!Usable(wr.server)) continue;  // marked down since it was planned: repaired later
    Server& srv = *servers_[wr.server];
    Status s = wr.length != 0 ? srv.io->PostWritePart(wr.memd, wr.slot, wr.offset, wr.length, wr.src, job.seq)
                              : srv.io->PostWrite(wr.memd, wr.slot, wr.src, job.seq);
    if (!s.ok()) {
      job.failure = s;
      job.failure_server = srv.name;
      job.failed_server = wr.server;
      break;
    }
    ++job.out[wr.server];
    ++job.written[wr.server];
    ++outstanding[wr.server];
    ++job.outstanding;
    ++posted[wr.page];
  }
  for (size_t i = 0; i < job.idx.size() && job.failure.ok(); ++i) {
    if (job.planned[i] && posted[i] < need_) {
      job.failure = Unavailable("too few memory servers of a page's group are up (" + Redundancy() + ")");
    }
  }
}

void Pager::MarkUnreadable(EvictJob& job, const void* page) {
  // The completion names the address posted: the page itself, or a piece of it (coded).
  Region& region = *job.region;
  const char* p = static_cast<const char*>(page);
  if (!region.Contains(p)) return;  // a parity piece: ours, always readable
  const uint64_t index = region.PageIndex(p);
  auto it = std::lower_bound(job.idx.begin(), job.idx.end(), index);
  if (it == job.idx.end() || *it != index) return;
  job.unreadable.resize(job.idx.size(), 0);
  job.unreadable[size_t(it - job.idx.begin())] = 1;
}

void Pager::FinishJob(EvictJob& job) {
  job.finished = true;
  Region& region = *job.region;
  const uint64_t* idx = job.idx.data();
  const size_t m = job.idx.size();
  if (!job.failure.ok()) {
    // A server that failed a write is down: the waiting caller queues the window again, and
    // its pages then go to healthy groups. Queued without a caller, the pages stay local.
    c_->eviction_windows_failed.fetch_add(1, std::memory_order_relaxed);
    const bool lost = job.failed_server < servers_.size();
    if (lost) MarkDown(job.failed_server, job.failure);
    GiveBack(job);
    writer_->Done(job, 0, lost);
    return;
  }
  for (size_t k = 0; k < servers_.size(); ++k) {
    servers_[k]->c->written.fetch_add(job.written[k], std::memory_order_relaxed);
    c_->pages_written.fetch_add(job.written[k], std::memory_order_relaxed);
  }
  // Commit each page, then drop, mark remote (the server copy is current: clean), and wake
  // waiters to fault again. A page the program wrote meanwhile had its eviction called off by
  // the fault handler (its write went on unprotected): it stays local and dirty, on the tier it
  // was on, and counts as touched (OnKept: the policy sees the access, relief may pick it again).
  // A page the transport could not read is kept the same way, its server copy no longer
  // current (zeros went there).
  std::vector<uint8_t> drop(m, 0);
  for (size_t i = 0; i < m; ++i) {
    if (!job.claimed[i]) continue;
    PageRecord& rec = region.record(idx[i]);
    if (!job.unreadable.empty() && job.unreadable[i]) {
      rec.flags.fetch_and(uint8_t(~kPageRemoteClean), std::memory_order_relaxed);
      if (TakeEvictingFlag(rec)) {  // (else a write called it off already, and lifted this)
        if (wp_ && !wp_async_) (void)os::UffdWriteProtect(uffd_, region.PageAddress(idx[i]), kPage, false);
        c_->evictions_unreadable.fetch_add(1, std::memory_order_relaxed);
      }
      continue;
    }
    drop[i] = TakeEvictingFlag(rec);
  }
  if (wp_async_) {
    TakeOutSent(job, drop);  // taken out already, or put back
  } else {
    // One call for the window's runs where the kernel can (one TLB flush: os::DiscardRanges).
    std::vector<os::Span> spans;
    ForRuns(idx, m, drop.data(), [&](size_t i, size_t j) { spans.push_back({region.PageAddress(idx[i]), (j - i) * kPage}); });
    const int rc = os::DiscardRanges(spans.data(), spans.size());
    if (rc != 0) TM_LOG_WARN("remote tier: madvise(DONTNEED) after eviction: %s", strerror(-rc));
  }
  uint64_t became_remote = 0;
  for (size_t i = 0; i < m; ++i) {
    if (!job.claimed[i]) continue;
    PageRecord& rec = region.record(idx[i]);
    if (!drop[i]) {
      config_.events->OnKept(region, idx[i]);
      rec.state.store(S(PageState::kLocal), std::memory_order_release);
      continue;
    }
    rec.flags.fetch_or(kPageRemoteClean, std::memory_order_relaxed);
    rec.flags.fetch_and(uint8_t(~kPageAhead), std::memory_order_relaxed);  // back only by a fault or a fetch
    config_.events->OnEvicted(region, idx[i]);
    rec.state.store(S(PageState::kRemote), std::memory_order_release);
    ++became_remote;
  }
  ForRuns(idx, m, nullptr, [&](size_t i, size_t j) { Wake(region.PageAddress(idx[i]), (j - i) * kPage); });
  c_->pages_evicted.fetch_add(became_remote, std::memory_order_relaxed);
  c_->evict_latency.Record(os::MonotonicNanos() - job.t0_ns);
  writer_->Done(job, became_remote, false);
}

void Pager::TakeOutSent(EvictJob& job, std::vector<uint8_t>& drop) {
  // Write-scan mode: nobody else acts on these pages (claimed, kPageEvicting taken by the writer
  // in FinishJob), and a touch of one while it is out waits in the fault handler (kInFlight)
  // until FinishJob publishes its state and wakes it. A page with no contents when the window
  // was planned cannot have any now (a touch would have waited): ENOENT, dropped as it is.
  Region& region = *job.region;
  for (size_t i = 0; i < job.idx.size(); ++i) {
    if (!drop[i]) continue;
    char* page = region.PageAddress(job.idx[i]);
    StatusOr<TakeOut> out = TakeOutIfSent(uffd_, pagemap_fd_, page, scratch_, job.copy.data() + i * kPage);
    if (out.ok() && (*out == TakeOut::kDropped || *out == TakeOut::kAbsent)) continue;
    if (!out.ok()) {
      // Left in place or put back, but where the move back failed its bytes are in the scratch
      // page: installed again from there (the hole's touches wait for this page's state).
      TM_LOG_WARN("remote tier: an eviction is called off: %s", out.status().message().c_str());
      if (out.status().code() == StatusCode::kInternal) {
        if (Status s = os::UffdCopy(uffd_, page, scratch_, kPage, false); !s.ok()) Fatal(page, first_connected_, s);
        (void)os::Discard(scratch_, kPage);
      }
    }
    // Written after the copy (or shared with a forked child: it cannot be moved until written
    // again): it stays local and dirty, its server copy no longer current.
    drop[i] = 0;
    region.record(job.idx[i]).flags.fetch_and(uint8_t(~kPageRemoteClean), std::memory_order_relaxed);
    c_->evictions_called_off.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace tiermem

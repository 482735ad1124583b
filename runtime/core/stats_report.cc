// TIERMEM_STATS: the report at exit (text on stderr, or one JSON line in a file) and, with
// TIERMEM_STATS_INTERVAL_MS, a timeline of JSON lines written by a thread of its own. Both read
// the process's own stats block with ReadProcessStats, so the file says what `tiermemctl stat`
// would have said at that moment.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>

#include "base/log.h"
#include "base/options.h"
#include "base/os.h"
#include "base/runtime_thread.h"
#include "runtime/core/runtime_impl.h"
#include "tiermem/stats.hpp"

namespace tiermem {
namespace {

bool StatsToFile(const char* where) { return where[0] != '\0' && strcmp(where, "stderr") != 0; }

// The file's path for this process (PathForProcess), read when the file is opened: a forked
// child, or each program of a script run with one TIERMEM_STATS, writes a file of its own
// (`tiermem run` relies on it).
std::string StatsPath(const char* where) { return PathForProcess(where, os::ProcessId()); }

}  // namespace

void Runtime::Impl::StartStatsTimeline() {
  if (!StatsToFile(opts_.stats) || opts_.stats_interval_ms == 0) return;
  const std::string path = StatsPath(opts_.stats);
  const int fd = os::OpenForWrite(path.c_str(), false);
  if (fd < 0) {
    TM_LOG_WARN("TIERMEM_STATS=%s: %s; no timeline", path.c_str(), strerror(-fd));
    return;
  }
  auto stop = os::EventFd();
  if (!stop.ok()) {
    os::Close(fd);
    TM_LOG_WARN("TIERMEM_STATS timeline: %s", stop.status().ToString().c_str());
    return;
  }
  stats_fd_ = fd;
  timeline_stop_fd_ = *stop;
  const int interval = static_cast<int>(std::min<uint64_t>(opts_.stats_interval_ms, 3'600'000));
  NewRuntimeThreadSignals quiet;  // the program's signal handlers never run there
  timeline_ = std::thread([this, interval] {
    OnRuntimeThreadStart();  // its allocations never come from evictable pages
    while (os::WaitStop(timeline_stop_fd_, interval) == 0) WriteStatsLine();
  });
}

void Runtime::Impl::WriteStatsLine() {
  auto st = ReadProcessStats(os::ProcessId());
  if (!st.ok()) return;
  std::string line = ProcessStatsJson(*st, os::RealtimeNanos());
  line += '\n';
  std::lock_guard<std::mutex> lock(stats_file_mu_);
  if (stats_fd_ >= 0) (void)os::WriteAll(stats_fd_, line.data(), line.size());
}

std::string Runtime::Impl::StatsReportText() const {
  // The text report: one line per tier, as scripts grep it ("tiermem stats: tier remote ...").
  const StatsBlock* b = sb_;
  std::string out;
  char line[320];
  snprintf(line, sizeof(line),
           "tiermem stats (pid %d): heap segments %" PRIu64 " bytes, spans %" PRIu64 " bytes, large %" PRIu64
           " bytes in %" PRIu64 " blocks\n",
           os::ProcessId(), b->counters.heap_segment_bytes.load(), b->counters.heap_span_bytes.load(),
           b->counters.heap_large_bytes.load(), b->counters.heap_large_count.load());
  out += line;
  for (const TierStats& t : Stats()) {
    snprintf(line, sizeof(line),
             "tiermem stats: tier %-6s %s allocated %" PRIu64 " bytes, capacity %" PRIu64
             " bytes, migrated in %" PRIu64 " pages, out %" PRIu64 " pages\n",
             std::string(TierName(t.tier)).c_str(), t.available ? "available" : "absent   ",
             t.allocated_bytes, t.capacity_bytes, t.pages_migrated_in, t.pages_migrated_out);
    out += line;
  }
  const RuntimeCounters c = Counters();
  snprintf(line, sizeof(line),
           "tiermem stats: remote faults %" PRIu64 " (zero fills %" PRIu64 "), evicted %" PRIu64
           " pages (written %" PRIu64 "); policy %s: %" PRIu64 " rounds, %" PRIu64 " pages armed, %" PRIu64
           " accesses sampled, %" PRIu64 " demotions, %" PRIu64 " promotions\n",
           c.remote_faults, c.zero_fills, c.pages_evicted, c.pages_written, c.sampling_mode.c_str(),
           c.policy_rounds, c.pages_armed, c.samples, c.demotions,
           c.promotions);
  out += line;
  if (c.remote_servers_down + c.remote_failovers + c.remote_repaired_pages > 0) {
    snprintf(line, sizeof(line),
             "tiermem stats: replicas: %" PRIu64 " servers down, %" PRIu64 " failovers, %" PRIu64
             " page copies restored, %" PRIu64 " pages short of a replica\n",
             c.remote_servers_down, c.remote_failovers, c.remote_repaired_pages, c.remote_degraded_pages);
    out += line;
  }
  // Every listed counter that is not zero, key=value (tiermem/counter_list.hpp).
  ProcessStats st;
  ReadBlockCounters(*b, &st);
  const auto values = ListedCounters(st);
  std::string counters;
  for (int i = 0; i < kNumCounters; ++i) {
    if (values[size_t(i)] == 0) continue;
    counters += ' ';
    counters += kCounterInfo[i].key;
    counters += '=' + std::to_string(values[size_t(i)]);
  }
  if (!counters.empty()) out += "tiermem stats: counters:" + counters + "\n";
  return out;
}

void Runtime::Impl::FinishStats() {
  if (timeline_.joinable()) {
    os::EventFdSignal(timeline_stop_fd_);
    timeline_.join();
    os::Close(timeline_stop_fd_);
    timeline_stop_fd_ = -1;
  }
  const char* where = opts_.stats;
  if (where[0] == '\0' || stats_reported_) return;
  stats_reported_ = true;
  if (!StatsToFile(where)) {
    const std::string out = StatsReportText();
    (void)os::WriteAll(2, out.data(), out.size());
    return;
  }
  if (stats_fd_ < 0) {
    const std::string path = StatsPath(where);
    stats_fd_ = os::OpenForWrite(path.c_str(), false);
    if (stats_fd_ < 0) {
      TM_LOG_WARN("TIERMEM_STATS=%s: %s", path.c_str(), strerror(-stats_fd_));
      return;
    }
  }
  WriteStatsLine();
  os::Close(stats_fd_);
  stats_fd_ = -1;
}

}  // namespace tiermem

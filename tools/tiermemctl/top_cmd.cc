// tiermemctl top: every process running tiermem, refreshed each interval with its rates. On a
// terminal the screen is redrawn; otherwise (a pipe, a test) each refresh is appended, headed by
// a line with the time, so `top --count N --interval MS` is a plain log.
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "tools/tiermemctl/commands.h"
#include "tools/tiermemctl/stats_view.h"

namespace tiermem::tools {
namespace {

struct Seen {
  ProcessStats stats;
  double at = 0;
};

// One row per process whose block could be read (one that exited meanwhile is left out).
std::vector<std::string> Rows(std::map<int, Seen>* previous) {
  const double now = NowSeconds();
  std::vector<std::string> rows;
  std::map<int, Seen> next;
  char line[512];
  for (const ProcessEntry& p : ListProcesses()) {
    auto st = ReadProcessStats(p.pid);
    if (!st.ok() && st.status().code() == StatusCode::kNotFound) continue;
    if (!st.ok()) {
      std::snprintf(line, sizeof(line), "%7d %-14.14s %-5s %s", p.pid, p.command.c_str(), p.stale ? "stale" : "?",
                    st.status().message().c_str());
      rows.emplace_back(line);
      continue;
    }
    std::string f = "-", e = "-", m = "-", s = "-";
    auto it = previous->find(p.pid);
    if (!st->stale && it != previous->end()) {
      Rates r = ComputeRates(it->second.stats, *st, now - it->second.at);
      auto per_s = [](double v) { return std::to_string(uint64_t(v + 0.5)); };
      f = per_s(r.remote_faults);
      e = per_s(r.pages_evicted);
      m = per_s(r.moves_total());
      s = per_s(r.sampling_faults);
    }
    std::snprintf(line, sizeof(line), "%7d %-14.14s %-5s %10s %10s %10s %10s %10s %9s %9s %9s %9s", p.pid,
                  st->command.c_str(), st->stale ? "stale" : "live", HumanBytes(TierBytes(*st, Tier::kDram)).c_str(),
                  HumanBytes(TierBytes(*st, Tier::kCxl)).c_str(), HumanBytes(TierBytes(*st, Tier::kRemote)).c_str(),
                  HumanBytes(st->dram_resident_bytes).c_str(),
                  st->dram_limit_bytes ? HumanBytes(st->dram_limit_bytes).c_str() : "-", f.c_str(), e.c_str(),
                  m.c_str(), s.c_str());
    rows.emplace_back(line);
    next[p.pid] = Seen{std::move(*st), now};
  }
  *previous = std::move(next);
  return rows;
}

void PrintFrame(std::map<int, Seen>* previous, bool tty, uint32_t frame) {
  std::vector<std::string> rows = Rows(previous);
  if (tty) std::printf("\033[H\033[2J");
  time_t wall = time(nullptr);
  struct tm tm;
  localtime_r(&wall, &tm);
  std::printf("tiermem top  %02d:%02d:%02d  refresh %u  %zu process%s\n", tm.tm_hour, tm.tm_min, tm.tm_sec, frame,
              rows.size(), rows.size() == 1 ? "" : "es");
  std::printf("%7s %-14s %-5s %10s %10s %10s %10s %10s %9s %9s %9s %9s\n", "pid", "command", "state", "dram", "cxl",
              "remote", "dram-res", "dram-lim", "faults/s", "evict/s", "moves/s", "sample/s");
  for (const std::string& row : rows) std::printf("%s\n", row.c_str());
  if (!tty) std::printf("\n");
  std::fflush(stdout);
}

}  // namespace

int TopCommand(uint32_t interval_ms, uint32_t count) {
  if (interval_ms == 0) {
    std::fprintf(stderr, "tiermemctl: top --interval must be at least 1 ms\n");
    return 2;
  }
  InstallStopHandler();
  const bool tty = isatty(STDOUT_FILENO) != 0;
  std::map<int, Seen> previous;
  for (uint32_t i = 1; count == 0 || i <= count; ++i) {
    PrintFrame(&previous, tty, i);
    if (count != 0 && i == count) break;
    if (!SleepMs(interval_ms)) break;
  }
  return 0;
}

}  // namespace tiermem::tools

// tiermemctl top: every process running tiermem, refreshed each interval with its rates. On a
// terminal the screen is redrawn; otherwise (a pipe, a test) each refresh is appended, headed by
// a line with the time, so `top --count N --interval MS` is a plain log.
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <map>

#include "tools/tiermemctl/commands.h"
#include "tools/tiermemctl/stats_view.h"

namespace tiermem::tools {
namespace {

struct Seen {
  ProcessStats stats;
  double at = 0;
};

void PrintFrame(std::map<int, Seen>* previous, bool tty, uint32_t frame) {
  double now = NowSeconds();
  std::vector<ProcessEntry> procs = ListProcesses();
  if (tty) std::printf("\033[H\033[2J");
  time_t wall = time(nullptr);
  struct tm tm;
  localtime_r(&wall, &tm);
  std::printf("tiermem top  %02d:%02d:%02d  refresh %u  %zu process%s\n", tm.tm_hour, tm.tm_min, tm.tm_sec, frame,
              procs.size(), procs.size() == 1 ? "" : "es");
  std::printf("%7s %-14s %-5s %10s %10s %10s %10s %10s %9s %9s %9s %9s\n", "pid", "command", "state", "dram", "cxl",
              "remote", "dram-res", "dram-lim", "faults/s", "evict/s", "moves/s", "sample/s");
  std::map<int, Seen> next;
  for (const ProcessEntry& p : procs) {
    auto st = ReadProcessStats(p.pid);
    if (!st.ok()) {
      std::printf("%7d %-14s %-5s %s\n", p.pid, p.command.c_str(), p.stale ? "stale" : "?",
                  st.status().message().c_str());
      continue;
    }
    std::string f = "-", e = "-", m = "-", s = "-";
    auto it = previous->find(p.pid);
    if (!st->stale && it != previous->end()) {
      Rates r = ComputeRates(it->second.stats, *st, now - it->second.at);
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.0f", r.remote_faults), f = buf;
      std::snprintf(buf, sizeof(buf), "%.0f", r.pages_evicted), e = buf;
      std::snprintf(buf, sizeof(buf), "%.0f", r.moves_total()), m = buf;
      std::snprintf(buf, sizeof(buf), "%.0f", r.sampling_faults), s = buf;
    }
    std::printf("%7d %-14.14s %-5s %10s %10s %10s %10s %10s %9s %9s %9s %9s\n", p.pid, st->command.c_str(),
                st->stale ? "stale" : "live", HumanBytes(TierBytes(*st, Tier::kDram)).c_str(),
                HumanBytes(TierBytes(*st, Tier::kCxl)).c_str(), HumanBytes(TierBytes(*st, Tier::kRemote)).c_str(),
                HumanBytes(st->dram_resident_bytes).c_str(),
                st->dram_limit_bytes ? HumanBytes(st->dram_limit_bytes).c_str() : "-", f.c_str(), e.c_str(),
                m.c_str(), s.c_str());
    next[p.pid] = Seen{std::move(*st), now};
  }
  if (!tty) std::printf("\n");
  std::fflush(stdout);
  *previous = std::move(next);
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

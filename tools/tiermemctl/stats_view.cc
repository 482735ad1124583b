#include "tools/tiermemctl/stats_view.h"

#include <csignal>
#include <cstdio>
#include <ctime>

namespace tiermem::tools {
namespace {

volatile std::sig_atomic_t g_stop = 0;
void OnStop(int) { g_stop = 1; }

double Per(uint64_t before, uint64_t after, double seconds) {
  if (seconds <= 0 || after < before) return 0;
  return double(after - before) / seconds;
}

}  // namespace

StatusOr<ProcessStats> ReadForDisplay(int pid, bool allow_stale) {
  if (pid <= 0) {
    std::fprintf(stderr, "tiermemctl: %d is not a process id\n", pid);
    return InvalidArgument("bad pid");
  }
  return ForDisplay(pid, ReadProcessStats(pid), allow_stale);
}

StatusOr<ProcessStats> ForDisplay(int pid, StatusOr<ProcessStats> st, bool allow_stale) {
  if (!st.ok()) {
    const Status& s = st.status();
    switch (s.code()) {
      case StatusCode::kNotFound:
        std::fprintf(stderr, "tiermemctl: pid %d is not a tiermem process (it publishes no stats block)\n", pid);
        break;
      case StatusCode::kPermissionDenied:
        std::fprintf(stderr, "tiermemctl: pid %d: its stats block belongs to another user (%s)\n", pid,
                     s.message().c_str());
        break;
      default:
        std::fprintf(stderr, "tiermemctl: pid %d: %s\n", pid, s.message().c_str());
        break;
    }
    return s;
  }
  if (st->pid_reused && !allow_stale) {
    std::fprintf(stderr,
                 "tiermemctl: pid %d is not a tiermem process (its stats block was left by an earlier process "
                 "of that pid, %s: --allow-stale prints its last figures)\n",
                 pid, st->command.c_str());
    return NotFound("stale block of an earlier process");
  }
  if (st->stale && !allow_stale) {
    std::fprintf(stderr,
                 "tiermemctl: pid %d (%s) is gone: its stats block is stale, the last figures it published "
                 "(--allow-stale prints them)\n",
                 pid, st->command.c_str());
    return Unavailable("stale block");
  }
  return st;
}

double Rates::moves_total() const {
  double t = 0;
  for (const auto& row : moves) {
    for (double v : row) t += v;
  }
  return t;
}

Rates ComputeRates(const ProcessStats& a, const ProcessStats& b, double seconds) {
  Rates r;
  r.seconds = seconds;
  if (a.started_unix_ns != b.started_unix_ns) return r;  // another runtime under the same pid
  r.remote_faults = Per(a.remote_faults, b.remote_faults, seconds);
  r.zero_fills = Per(a.zero_fills, b.zero_fills, seconds);
  r.sampling_faults = Per(a.sampling_faults, b.sampling_faults, seconds);
  r.pages_evicted = Per(a.pages_evicted, b.pages_evicted, seconds);
  r.pages_written = Per(a.pages_written, b.pages_written, seconds);
  r.policy_rounds = Per(a.policy_rounds, b.policy_rounds, seconds);
  for (int f = 0; f < kNumTiers; ++f) {
    for (int t = 0; t < kNumTiers; ++t) r.moves[f][t] = Per(a.moves[f][t], b.moves[f][t], seconds);
  }
  return r;
}

nlohmann::json RatesToJson(const Rates& r) {
  nlohmann::json moves = nlohmann::json::array();
  for (int f = 0; f < kNumTiers; ++f) {
    for (int t = 0; t < kNumTiers; ++t) {
      if (f == t) continue;
      moves.push_back({{"from", std::string(TierName(Tier(f)))},
                       {"to", std::string(TierName(Tier(t)))},
                       {"pages_per_s", r.moves[f][t]}});
    }
  }
  return {{"interval_s", r.seconds},
          {"remote_faults_per_s", r.remote_faults},
          {"zero_fills_per_s", r.zero_fills},
          {"sampling_faults_per_s", r.sampling_faults},
          {"pages_evicted_per_s", r.pages_evicted},
          {"pages_written_per_s", r.pages_written},
          {"policy_rounds_per_s", r.policy_rounds},
          {"moves", moves}};
}

nlohmann::json ProcessStatsToJson(const ProcessStats& s) {
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  return nlohmann::json::parse(ProcessStatsJson(s, uint64_t(now.tv_sec) * 1'000'000'000ull + uint64_t(now.tv_nsec)));
}

std::string HumanBytes(uint64_t bytes) {
  char buf[32];
  if (bytes < 1024) {
    std::snprintf(buf, sizeof(buf), "%llu B", (unsigned long long)bytes);
  } else if (bytes < (1ull << 30)) {
    std::snprintf(buf, sizeof(buf), "%.1f MiB", double(bytes) / (1 << 20));
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f GiB", double(bytes) / (1ull << 30));
  }
  return buf;
}

uint64_t TierBytes(const ProcessStats& s, Tier tier) {
  for (const TierSnapshot& t : s.tiers) {
    if (t.tier == tier) return t.allocated_bytes;
  }
  return 0;
}

double NowSeconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

void InstallStopHandler() {
  struct sigaction sa = {};
  sa.sa_handler = OnStop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool SleepMs(uint32_t ms) {
  timespec ts{time_t(ms / 1000), long(ms % 1000) * 1000000L};
  while (!g_stop && nanosleep(&ts, &ts) != 0) {
  }
  return !g_stop;
}

}  // namespace tiermem::tools

namespace tiermem::tools {
bool StopRequested() { return g_stop != 0; }
}  // namespace tiermem::tools

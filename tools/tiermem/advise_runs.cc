// `tiermem advise`: how each run of the program ended, set against the plain run (advise.h,
// docs/advise.md, "Runs that end differently"). A record whose sampler broke the program (a
// system call given a protected heap page fails with EFAULT) must not become advice.
#include <string.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "tools/tiermem/advise.h"

namespace tiermem::tools {
namespace {

// The commands of the exit reports (<pid>.json) in `dir`.
void Reports(const std::string& dir, std::set<std::string>* commands) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".json") continue;
    std::ifstream f(e.path());
    const nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
    if (!j.is_object()) continue;  // a report cut short is no report
    if (j.contains("command") && j["command"].is_string()) commands->insert(j["command"].get<std::string>());
  }
}

}  // namespace

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : std::to_string(sig);
}

bool Reported(const std::string& reports, int pid) {
  std::ifstream f(reports + "/" + std::to_string(pid) + ".json");
  return f && nlohmann::json::parse(f, nullptr, false).is_object();
}

RunEnd EndOf(const RunOutcome& run, const std::string& reports, const std::string& plain_reports) {
  RunEnd e;
  e.exit_code = run.exit_code;
  e.signal = run.signal;
  e.stderr_tail = run.stderr_tail;
  if (run.timed_out) e.stopped_after_s = run.seconds;
  std::set<std::string> here, plain;
  Reports(reports, &here);
  Reports(plain_reports, &plain);
  std::set_difference(plain.begin(), plain.end(), here.begin(), here.end(), std::back_inserter(e.unreported));
  return e;
}

std::string DescribeEnd(const RunEnd& e) {
  std::string s = e.signal != 0 ? "killed by " + SignalName(e.signal) : "status " + std::to_string(e.exit_code);
  if (e.stopped_after_s > 0) {
    char secs[32];
    std::snprintf(secs, sizeof(secs), "%.0f", e.stopped_after_s);
    s = "stopped after " + std::string(secs) + " s, still running (--record-timeout), then " + s;
  }
  if (!e.unreported.empty()) {
    s += "; no exit report from";
    for (const std::string& c : e.unreported) s += " " + c;
    s += " (the plain run's had one)";
    if (e.recorded_unreported != 0) {
      s += "; the process with the largest heap (" + std::to_string(e.recorded_unreported) +
           ") ended without one (a signal or _exit)";
    }
  }
  return s;
}

void SayEndedDifferently(const char* what, const RunEnd& e, const RunEnd& plain) {
  std::fprintf(stderr, "tiermem advise: the %s ended otherwise than the plain run: %s (the plain run: %s)\n", what,
               DescribeEnd(e).c_str(), DescribeEnd(plain).c_str());
  if (e.stderr_tail.empty()) return;
  std::fprintf(stderr, "tiermem advise: the %s's stderr ended with:\n", what);
  size_t at = 0;
  while (at < e.stderr_tail.size()) {
    size_t nl = e.stderr_tail.find('\n', at);
    if (nl == std::string::npos) nl = e.stderr_tail.size();
    std::fprintf(stderr, "  | %.*s\n", static_cast<int>(nl - at), e.stderr_tail.data() + at);
    at = nl + 1;
  }
}

}  // namespace tiermem::tools

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

// The process ids with an exit report (<pid>.json) in `dir`, and their commands.
void Reports(const std::string& dir, std::set<int>* pids, std::set<std::string>* commands) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".json") continue;
    std::ifstream f(e.path());
    const nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
    if (!j.is_object()) continue;  // a report cut short is no report
    if (pids != nullptr) pids->insert(std::atoi(e.path().stem().c_str()));
    if (commands != nullptr && j.contains("command") && j["command"].is_string()) commands->insert(j["command"].get<std::string>());
  }
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

}  // namespace

RunEnd EndOf(const RunOutcome& run, const std::string& reports, const std::string& plain_reports, bool heat_logs) {
  RunEnd e;
  e.exit_code = run.exit_code;
  e.signal = run.signal;
  e.stderr_tail = run.stderr_tail;
  std::set<int> pids;
  std::set<std::string> here, plain;
  Reports(reports, &pids, &here);
  Reports(plain_reports, nullptr, &plain);
  std::set_difference(plain.begin(), plain.end(), here.begin(), here.end(), std::back_inserter(e.unreported));
  if (!heat_logs) return e;
  std::error_code ec;
  for (const auto& f : std::filesystem::directory_iterator(reports, ec)) {
    if (f.path().extension() != ".heat") continue;
    const int pid = std::atoi(f.path().stem().c_str());
    if (pids.count(pid) == 0) e.unreported_pids.push_back(pid);
  }
  std::sort(e.unreported_pids.begin(), e.unreported_pids.end());
  return e;
}

std::string DescribeEnd(const RunEnd& e) {
  std::string s = e.signal != 0 ? "killed by " + SignalName(e.signal) : "status " + std::to_string(e.exit_code);
  if (!e.unreported.empty()) {
    s += "; no exit report from";
    for (const std::string& c : e.unreported) s += " " + c;
    s += " (the plain run's had one";
    if (!e.unreported_pids.empty()) {
      s += "; processes ended without one here:";
      for (int p : e.unreported_pids) s += " " + std::to_string(p);
    }
    s += ")";
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

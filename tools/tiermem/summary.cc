// The tier summary `tiermem run` prints at exit, from the processes' TIERMEM_STATS reports.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tools/tiermem/run.h"

namespace tiermem::tools {
namespace {

constexpr size_t kMaxLines = 8;  // processes shown; the rest are counted

std::string Bytes(uint64_t b) {
  char buf[32];
  if (b >= (uint64_t{1} << 30)) {
    std::snprintf(buf, sizeof(buf), "%.2f GiB", double(b) / (1 << 30));
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f MiB", double(b) / (1 << 20));
  }
  return buf;
}

std::string Replace(std::string s, const std::string& what, const std::string& with) {
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + with.size())) {
    s.replace(at, what.size(), with);
  }
  return s;
}

// One process's line, from its report (the last JSON line of the file).
bool Line(const std::string& path, std::string* out) {
  std::ifstream f(path);
  std::string text, last;
  while (std::getline(f, text)) {
    if (!text.empty()) last = text;
  }
  const auto j = nlohmann::json::parse(last, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return false;
  std::string tiers;
  for (const auto& t : j.value("tiers", nlohmann::json::array())) {
    if (!t.value("available", false)) continue;
    tiers += ", " + t.value("tier", std::string("?")) + " " + Bytes(t.value("allocated_bytes", uint64_t{0}));
    if (uint64_t limit = t.value("limit_bytes", uint64_t{0}); limit != 0) tiers += " (limit " + Bytes(limit) + ")";
  }
  char buf[512];
  std::snprintf(buf, sizeof(buf), "pid %lld (%s)%s; %llu remote faults, %llu pages evicted, sampling %s",
                static_cast<long long>(j.value("pid", 0LL)), j.value("command", std::string("?")).c_str(),
                tiers.c_str(), static_cast<unsigned long long>(j.value("remote_faults", uint64_t{0})),
                static_cast<unsigned long long>(j.value("pages_evicted", uint64_t{0})),
                j.value("sampling_mode", std::string("off")).c_str());
  *out = buf;
  return true;
}

}  // namespace

StatsFiles::StatsFiles(const std::string& given) {
  if (!given.empty()) {
    value_ = given;
    return;
  }
  char tmpl[] = "/tmp/tiermem-stats-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return;
  dir_ = tmpl;
  value_ = dir_ + "/%p.json";
}

StatsFiles::~StatsFiles() {
  if (dir_.empty()) return;
  if (DIR* d = opendir(dir_.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') unlink((dir_ + "/" + e->d_name).c_str());
    }
    closedir(d);
  }
  rmdir(dir_.c_str());
}

std::vector<std::string> StatsFiles::Reports(pid_t program) const {
  std::vector<std::string> out;
  if (value_.empty() || value_ == "stderr") return out;
  const std::string own = Replace(value_, "%p", std::to_string(program));
  if (access(own.c_str(), R_OK) == 0) out.push_back(own);
  if (dir_.empty()) return out;  // the user's file: the program's own report only
  std::vector<std::string> others;
  if (DIR* d = opendir(dir_.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string p = dir_ + "/" + e->d_name;
      if (e->d_name[0] != '.' && p != own) others.push_back(p);
    }
    closedir(d);
  }
  std::sort(others.begin(), others.end());
  out.insert(out.end(), others.begin(), others.end());
  return out;
}

void PrintSummary(const StatsFiles& files, pid_t program_pid, const std::string& program, int exit_status,
                  double seconds) {
  std::fprintf(stderr, "tiermem run: %s exited with status %d after %.2f s\n", program.c_str(), exit_status,
               seconds);
  const std::vector<std::string> reports = files.Reports(program_pid);
  size_t shown = 0, more = 0;
  for (const std::string& r : reports) {
    std::string line;
    if (!Line(r, &line)) continue;
    if (shown == kMaxLines) {
      ++more;
      continue;
    }
    std::fprintf(stderr, "tiermem run: %s\n", line.c_str());
    ++shown;
  }
  if (more > 0) std::fprintf(stderr, "tiermem run: %zu more processes reported\n", more);
  if (reports.empty()) {
    std::fprintf(stderr, "tiermem run: no process reported (the program did not load the preload library, "
                         "or it was killed)\n");
  }
}

}  // namespace tiermem::tools

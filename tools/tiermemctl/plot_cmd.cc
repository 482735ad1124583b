// tiermemctl plot FILE -o out.png: a timeline (one JSON line per interval, written by a process
// run with TIERMEM_STATS=FILE and TIERMEM_STATS_INTERVAL_MS) drawn with gnuplot: bytes per tier
// and resident DRAM above, faults, evictions and migrations per second below. The counters in
// the file are cumulative; rates are taken between consecutive lines.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tiermem/tiermem.hpp"
#include "tools/tiermemctl/commands.h"

namespace tiermem::tools {
namespace {

struct Point {
  double t = 0;  // seconds since the first line
  double tier_mib[kNumTiers] = {};
  double resident_mib = 0, dram_resident_mib = 0;
  double remote_faults = 0, sampling_faults = 0, pages_evicted = 0;
  double moves[kNumTiers][kNumTiers] = {};
};

uint64_t U64(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return 0;
  if (!it->is_number_unsigned() && !it->is_number_integer()) throw std::runtime_error(std::string(key) + " is not a count");
  return it->get<uint64_t>();
}

Point ParseLine(const nlohmann::json& j, uint64_t t0_ns) {
  if (!j.is_object()) throw std::runtime_error("not a JSON object");
  if (!j.contains("t_ns")) throw std::runtime_error("no t_ns");
  if (!j.contains("tiers") || !j["tiers"].is_array()) throw std::runtime_error("no tiers array");
  Point p;
  p.t = double(int64_t(U64(j, "t_ns") - t0_ns)) / 1e9;
  for (const auto& t : j["tiers"]) {
    std::string name = t.at("tier").get<std::string>();
    for (int i = 0; i < kNumTiers; ++i) {
      if (name == TierName(Tier(i))) p.tier_mib[i] = double(U64(t, "allocated_bytes")) / (1 << 20);
    }
  }
  p.resident_mib = double(U64(j, "resident_bytes")) / (1 << 20);
  p.dram_resident_mib = double(U64(j, "dram_resident_bytes")) / (1 << 20);
  p.remote_faults = double(U64(j, "remote_faults"));
  p.sampling_faults = double(U64(j, "sampling_faults"));
  p.pages_evicted = double(U64(j, "pages_evicted"));
  if (j.contains("moves")) {
    const auto& m = j["moves"];
    if (!m.is_array() || m.size() != size_t(kNumTiers)) throw std::runtime_error("moves is not a 3x3 array");
    for (int f = 0; f < kNumTiers; ++f) {
      if (!m[size_t(f)].is_array() || m[size_t(f)].size() != size_t(kNumTiers)) {
        throw std::runtime_error("moves is not a 3x3 array");
      }
      for (int t = 0; t < kNumTiers; ++t) p.moves[f][t] = m[size_t(f)][size_t(t)].get<double>();
    }
  }
  return p;
}

bool FindProgram(const std::string& name, std::string* path) {
  if (name.find('/') != std::string::npos) {
    *path = name;
    return access(name.c_str(), X_OK) == 0;
  }
  const char* env = std::getenv("PATH");
  std::string dirs = env != nullptr ? env : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t colon = dirs.find(':', start);
    std::string dir = dirs.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) {
      *path = candidate;
      return true;
    }
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return false;
}

double Rate(double before, double after, double dt) { return dt > 0 && after >= before ? (after - before) / dt : 0; }

}  // namespace

int PlotCommand(const PlotArgs& a) {
  std::string gnuplot;
  if (!FindProgram(a.gnuplot, &gnuplot)) {
    std::fprintf(stderr, "tiermemctl: plot needs gnuplot: '%s' not found (install gnuplot-nox)\n", a.gnuplot.c_str());
    return 1;
  }
  std::ifstream in(a.file);
  if (!in) {
    std::fprintf(stderr, "tiermemctl: %s: cannot read it\n", a.file.c_str());
    return 1;
  }
  std::vector<Point> points;
  uint64_t t0 = 0;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      nlohmann::json j = nlohmann::json::parse(line);
      if (points.empty() && j.is_object() && j.contains("t_ns")) t0 = U64(j, "t_ns");
      points.push_back(ParseLine(j, t0));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tiermemctl: %s:%d: not a timeline line (%s)\n", a.file.c_str(), n, e.what());
      return 1;
    }
  }
  if (points.empty()) {
    std::fprintf(stderr, "tiermemctl: %s: no timeline lines (is it the TIERMEM_STATS file of a run with "
                 "TIERMEM_STATS_INTERVAL_MS?)\n", a.file.c_str());
    return 1;
  }
  char dir_tmpl[] = "/tmp/tiermemctl-plot-XXXXXX";
  if (mkdtemp(dir_tmpl) == nullptr) {
    std::fprintf(stderr, "tiermemctl: cannot make a temporary directory: %s\n", strerror(errno));
    return 1;
  }
  const std::string dir = dir_tmpl, data = dir + "/data", script = dir + "/plot.gp";
  {
    std::ofstream d(data);
    // t dram cxl remote resident dram_res | faults/s sampling/s evict/s promote/s demote/s
    for (size_t i = 0; i < points.size(); ++i) {
      const Point& p = points[i];
      const Point& q = points[i == 0 ? 0 : i - 1];
      double dt = p.t - q.t;
      double promote = 0, demote = 0;  // towards DRAM (lower tier index), away from it
      for (int f = 0; f < kNumTiers; ++f) {
        for (int t = 0; t < kNumTiers; ++t) {
          double r = Rate(q.moves[f][t], p.moves[f][t], dt);
          if (t < f) promote += r;
          if (t > f) demote += r;
        }
      }
      char buf[512];
      std::snprintf(buf, sizeof(buf), "%.3f %.3f %.3f %.3f %.3f %.3f", p.t, p.tier_mib[0], p.tier_mib[1],
                    p.tier_mib[2], p.resident_mib, p.dram_resident_mib);
      d << buf;
      if (i == 0) {  // no interval before the first line: gnuplot leaves the rates out
        d << " NaN NaN NaN NaN NaN\n";
        continue;
      }
      std::snprintf(buf, sizeof(buf), " %.1f %.1f %.1f %.1f %.1f\n", Rate(q.remote_faults, p.remote_faults, dt),
                    Rate(q.sampling_faults, p.sampling_faults, dt), Rate(q.pages_evicted, p.pages_evicted, dt),
                    promote, demote);
      d << buf;
    }
  }
  {
    std::ofstream g(script);
    auto quoted = [](const std::string& s) {
      std::string q = "'";
      for (char c : s) q += c == '\'' ? std::string("''") : std::string(1, c);
      return q + "'";
    };
    g << "set terminal pngcairo size 1000,720 noenhanced\n"
      << "set output " << quoted(a.out) << "\n"
      << "set multiplot layout 2,1 title " << quoted(a.file) << "\n"
      << "set key outside right\nset grid\nset xlabel 'seconds'\n"
      << "set ylabel 'MiB'\nset title 'bytes per tier'\n"
      << "plot " << quoted(data) << " using 1:2 with lines title 'dram', '' using 1:3 with lines title 'cxl', "
      << "'' using 1:4 with lines title 'remote', '' using 1:6 with lines dt 2 title 'dram resident'\n"
      << "set ylabel 'per second'\nset title 'faults and migrations'\n"
      << "plot " << quoted(data) << " using 1:7 with lines title 'remote faults', '' using 1:8 with lines "
      << "title 'sampling faults', '' using 1:9 with lines title 'evictions', '' using 1:10 with lines "
      << "title 'promotions', '' using 1:11 with lines title 'demotions'\n"
      << "unset multiplot\n";
  }
  pid_t pid = fork();
  if (pid == 0) {
    execl(gnuplot.c_str(), gnuplot.c_str(), script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
  unlink(data.c_str());
  unlink(script.c_str());
  rmdir(dir.c_str());
  if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "tiermemctl: %s failed (exit %d) drawing %s\n", gnuplot.c_str(),
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1, a.out.c_str());
    return 1;
  }
  struct stat sb;
  if (stat(a.out.c_str(), &sb) != 0 || sb.st_size == 0) {
    std::fprintf(stderr, "tiermemctl: gnuplot wrote no %s\n", a.out.c_str());
    return 1;
  }
  std::printf("tiermemctl: %zu points over %.1f s drawn to %s\n", points.size(), points.back().t, a.out.c_str());
  return 0;
}

}  // namespace tiermem::tools

// `tiermem advise`: the report as a table (default), as JSON (--json) and as a PNG (--plot).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tools/tiermem/advise.h"

namespace tiermem::tools {
namespace {

double MiB(uint64_t b) { return static_cast<double>(b) / (1 << 20); }

// A run's end: `status` (null where a signal ended it), `signal` (its name, "" for none),
// `as_plain`, `no_exit_report` (commands reported in the plain run, none here), `stderr_tail`,
// `stopped_after_s`.
nlohmann::json EndJson(const RunEnd& e) {
  nlohmann::json j;
  j["status"] = e.signal != 0 ? nlohmann::json(nullptr) : nlohmann::json(e.exit_code);
  j["signal"] = e.signal == 0 ? "" : SignalName(e.signal);
  j["as_plain"] = e.as_plain;
  j["no_exit_report"] = e.unreported;
  j["stderr_tail"] = e.stderr_tail;
  j["stopped_after_s"] = e.stopped_after_s;
  return j;
}

// The record runs made: the mode of the one the advice is from, as asked, why, and each run's end.
nlohmann::json RecordJson(const AdviseReport& r) {
  nlohmann::json attempts = nlohmann::json::array();
  for (const RecordAttempt& t : r.record_attempts) {
    attempts.push_back({{"reads", t.reads}, {"seconds", t.seconds}, {"exit", EndJson(t.end)}, {"reads_lost", t.reads_lost}});
  }
  // Without advice (a record that ended otherwise), the mode of the last record made.
  const std::string reads = r.record_reads.empty() && !r.record_attempts.empty() ? r.record_attempts.back().reads : r.record_reads;
  nlohmann::json j = {{"reads", reads}, {"asked", r.record_reads_asked}, {"why", r.record_why}, {"attempts", attempts}};
  if (!r.record_attempts.empty()) j["exit"] = attempts.back()["exit"];
  return j;
}

}  // namespace

double UsPerFault(const AdviseReport& r) {
  return r.check_faults == 0 ? 0 : (r.check_seconds - r.plain_seconds) / static_cast<double>(r.check_faults) * 1e6;
}

void PrintTable(const AdviseReport& r) {
  std::printf("tiermem advise: %s: %.2f s plain (%.2f s recorded), peak RSS %.1f MiB, heap %.1f MiB, %llu rounds\n",
              r.program.c_str(), r.plain_seconds, r.record_seconds, MiB(r.peak_rss_bytes),
              MiB(r.record.heap_peak_pages * r.record.page_size), static_cast<unsigned long long>(r.record.rounds));
  std::printf("far tiers: CXL +%.0f ns a line, %.0f lines an access (%s); RDMA %.1f us a fault; "
              "TCP %.1f us a fault (%s)\n",
              r.costs.cxl_extra_ns, r.costs.cxl_lines, r.costs.cxl_source.c_str(), r.costs.rdma_us, r.costs.tcp_us,
              r.costs.tcp_source.c_str());
  if (r.record_attempts.size() > 1) std::printf("record: %s\n", r.record_why.c_str());
  if (r.record_reads_lost) {
    std::printf("record: the program installed a SIGSEGV handler of its own, which stopped %s sampling: %s\n",
                r.record_reads.c_str(), r.record_reads == "protect" ? "the write scan's record alone, reads unseen" : "reads unseen");
  }
  const bool cal = r.costs.tcp_us_check > 0;
  std::printf("%8s %12s %14s %12s   %8s %8s %8s%s\n", "DRAM", "DRAM limit", "below DRAM", "faults/s", "CXL", "RDMA",
              "TCP", cal ? "  TCP at the check's cost" : "");
  for (const SharePrediction& s : r.shares) {
    std::printf("%7.1f%% %8.1f MiB %10.1f MiB %12.0f   %7.3fx %7.3fx %7.3fx", 100 * s.share, MiB(s.dram_limit_bytes),
                MiB(s.below_dram_bytes), s.faults_per_s, s.cxl, s.rdma, s.tcp);
    if (cal) std::printf("  %7.3fx", s.tcp_calibrated);
    std::printf("\n");
  }
  if (cal) {
    std::printf("(the last column: TCP at %.1f us a fault, what a fault cost inside the check run, instead of the %.1f us "
                "measured before it)\n", r.costs.tcp_us_check, r.costs.tcp_us);
  }
  if (r.checked) {
    std::printf("check: DRAM %.1f%% on %s: predicted %.3fx, measured %.3fx (%.2f s); remote faults predicted %.0f, "
                "measured %llu (%.0f us each in the run); the runtime's own DRAM %.1f MiB (predicted %.3fx without it)\n",
                100 * r.check_share, r.check_tier.c_str(), r.check_predicted, r.check_measured, r.check_seconds,
                r.check_predicted_faults, static_cast<unsigned long long>(r.check_faults), UsPerFault(r), MiB(r.check_own_bytes),
                r.check_predicted_heap_only);
  }
}

std::string ReportJson(const AdviseReport& r) {
  nlohmann::json j;
  j["program"] = r.program;
  j["recorded_pid"] = r.recorded_pid;
  j["recorded_command"] = r.recorded_command;
  j["plain_seconds"] = r.plain_seconds;
  j["record_seconds"] = r.record_seconds;
  j["record_slowdown"] = r.plain_seconds > 0 ? r.record_seconds / r.plain_seconds : 0;
  j["record_reads"] = r.record_reads;
  j["record_reads_lost"] = r.record_reads_lost;
  j["record_armed_share"] = r.record.armed_share;
  j["record"] = RecordJson(r);
  j["plain_exit"] = EndJson(r.plain_end);
  j["peak_rss_bytes"] = r.peak_rss_bytes;
  j["heap_peak_bytes"] = r.record.heap_peak_pages * r.record.page_size;
  j["rounds"] = r.record.rounds;
  j["pages_seen"] = r.record.page_touches.size();
  double touches = 0;  // page-rounds: a page written only by the fill adds 1, a page read every round R
  for (double t : r.record.page_touches) touches += t;
  j["record_touches"] = touches;
  j["costs"] = {{"cxl_extra_ns", r.costs.cxl_extra_ns}, {"cxl_lines", r.costs.cxl_lines},
                {"cxl_source", r.costs.cxl_source}, {"rdma_us", r.costs.rdma_us}, {"tcp_us", r.costs.tcp_us},
                {"tcp_source", r.costs.tcp_source}, {"tcp_us_check", r.costs.tcp_us_check}};
  nlohmann::json shares = nlohmann::json::array();
  for (const SharePrediction& s : r.shares) {
    shares.push_back({{"share", s.share},
                      {"dram_limit_bytes", s.dram_limit_bytes},
                      {"below_dram_bytes", s.below_dram_bytes},
                      {"touches_per_s", s.touches_per_s},
                      {"faults_per_s", s.faults_per_s},
                      {"predicted_slowdown", {{"cxl", s.cxl}, {"rdma", s.rdma}, {"tcp", s.tcp}}},
                      {"predicted_slowdown_tcp_at_check_cost", s.tcp_calibrated}});
  }
  j["shares"] = shares;
  if (r.checked) {
    j["check"] = {{"share", r.check_share},         {"tier", r.check_tier},
                  {"predicted_slowdown", r.check_predicted}, {"measured_slowdown", r.check_measured},
                  {"seconds", r.check_seconds},     {"remote_faults", r.check_faults},
                  {"predicted_faults", r.check_predicted_faults}, {"runtime_own_bytes", r.check_own_bytes},
                  {"predicted_slowdown_heap_only", r.check_predicted_heap_only},
                  {"us_per_fault", UsPerFault(r)}, {"exit", EndJson(r.check_end)}};
  }
  return j.dump();
}

std::string FailureJson(const AdviseReport& r) {
  nlohmann::json j;
  j["program"] = r.program;
  j["error"] = r.error;
  j["plain_seconds"] = r.plain_seconds;
  j["plain_exit"] = EndJson(r.plain_end);
  j["record"] = RecordJson(r);
  j["record_reads"] = j["record"]["reads"];
  if (!r.check_end.as_plain) j["check"] = {{"share", r.check_share}, {"tier", r.check_tier}, {"exit", EndJson(r.check_end)}};
  return j.dump();
}

bool PlotPng(const AdviseReport& r, const std::string& path, std::string* error) {
  if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
    *error = "gnuplot is not installed (apt install gnuplot-nox); the table and --json have the same figures";
    return false;
  }
  char data[] = "/tmp/tiermem-advise-plot-XXXXXX";
  const int fd = mkstemp(data);
  if (fd < 0) {
    *error = "no scratch file for gnuplot's data";
    return false;
  }
  close(fd);
  {
    std::ofstream d(data);
    for (const SharePrediction& s : r.shares) d << 100 * s.share << ' ' << s.cxl << ' ' << s.rdma << ' ' << s.tcp << '\n';
  }
  const std::string script = std::string(data) + ".gp";
  std::string title = r.recorded_command.empty() ? r.program : r.recorded_command;
  for (char& c : title) c = c == '\'' || c == '\\' ? ' ' : c;  // inside gnuplot's quotes
  {
    std::ofstream g(script);
    g << "set terminal pngcairo size 800,500\nset output '" << path << "'\n"
      << "set title 'tiermem advise: " << title
      << "'\nset xlabel 'DRAM share of peak RSS (%)'\n"
      << "set ylabel 'predicted slowdown (x)'\nset key top right\nset grid\nset xrange [0:105]\n"
      << "plot '" << data << "' using 1:2 with linespoints title 'CXL', '' using 1:3 with linespoints title 'RDMA', "
      << "'' using 1:4 with linespoints title 'TCP'";
    if (r.checked) g << ", '-' using 1:2 with points pt 7 ps 2 title 'measured (TCP)'\n" << 100 * r.check_share << ' ' << r.check_measured << "\ne";
    g << '\n';
  }
  const int rc = system(("gnuplot '" + script + "' 2>&1").c_str());
  unlink(data);
  unlink(script.c_str());
  if (rc != 0) {
    *error = "gnuplot failed (status " + std::to_string(rc) + ") writing " + path;
    return false;
  }
  return true;
}

}  // namespace tiermem::tools

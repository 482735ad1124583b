// `tiermem advise` (advise.h, docs/advise.md): the command line's checks, the record run, the
// plain run, the model and the check run.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tiermem/options.hpp"
#include "tiermem/topology.hpp"
#include "tools/tiermem/advise.h"

namespace tiermem::tools {
namespace {

// A flag that becomes a runtime option of the record run, checked by the option table (its
// bounds, by the option's name) before any run; "" when the table takes it.
std::string OptionError(const char* flag, const char* name, uint64_t value) {
  Options o;
  o.Set(name, value);
  return o.status().ok() ? "" : std::string(flag) + ": " + std::string(o.status().message());
}

// Refuses what the model cannot use, naming the option; "" when all is well.
std::string CheckArgs(const AdviseArgs& a) {
  if (a.shares.empty()) return "--shares: at least one share";
  for (size_t i = 0; i < a.shares.size(); ++i) {
    if (!(a.shares[i] > 0 && a.shares[i] <= 1)) return "--shares: each share is in (0, 1], got " + std::to_string(a.shares[i]);
    if (i > 0 && a.shares[i] >= a.shares[i - 1]) return "--shares: from the largest to the smallest";
  }
  if (!(a.cxl_ns > 0 && a.dram_ns > 0 && a.cxl_ns >= a.dram_ns)) return "--cxl-ns: a latency in ns, at least --dram-ns";
  if (!(a.cxl_lines > 0 && a.cxl_lines <= 64)) return "--cxl-lines: 1 to 64 cache lines per access";
  if (!(a.rdma_us > 0 && std::isfinite(a.rdma_us))) return "--rdma-us: a fault's cost in microseconds, above 0";
  if (!(a.tcp_us >= 0 && std::isfinite(a.tcp_us))) return "--tcp-us: a fault's cost in microseconds (0: measured)";
  if (!(a.check_share <= 1)) return "--check-share: a share in (0, 1], 0 to let the advisor pick, or -1 for no check";
  if (!(a.check_target >= 1)) return "--check-target: a slowdown, at least 1";
  if (a.record_reads != "auto" && a.record_reads != "protect" && a.record_reads != "uffd" && a.record_reads != "none")
    return "--record-reads: auto, protect, uffd or none, got '" + a.record_reads + "'";
  if (std::string e = OptionError("--track-pages", "track_pages", a.track_pages); a.track_pages != 0 && !e.empty())
    return e + " (0: its default)";
  if (std::string e = OptionError("--sample-pages", "sample_pages", a.sample_pages); !e.empty()) return e;
  if (!(a.record_timeout >= 0 && std::isfinite(a.record_timeout))) return "--record-timeout: a factor of the plain run's time, 0 for none";
  if (a.log_pages == 0 || a.log_pages > (uint64_t{1} << 20)) return "--log-pages: 1 to 1048576";
  if (a.plot.find_first_of("'\\") != std::string::npos) return "--plot: a path without quotes or backslashes";
  if (a.run.command.empty()) return "no program given (tiermem advise [options] -- PROG ARGS)";
  return "";
}

// CXL's latency over DRAM's: from a CXL (or far) node's HMAT figures and a DRAM node's where
// the machine has them, else from the flags.
FarCosts CostsFor(const AdviseArgs& a) {
  FarCosts c;
  c.cxl_extra_ns = a.cxl_ns - a.dram_ns;
  c.cxl_lines = a.cxl_lines;
  c.rdma_us = a.rdma_us;
  c.cxl_source = "--cxl-ns " + std::to_string(static_cast<int>(a.cxl_ns)) + ", --dram-ns " +
                 std::to_string(static_cast<int>(a.dram_ns)) + " (no CXL node with HMAT latencies here)";
  StatusOr<Topology> t = DiscoverTopology();
  if (!t.ok()) return c;
  const NumaNode* dram = nullptr;
  const NumaNode* far = nullptr;
  for (const NumaNode& n : t->nodes) {
    if (!n.hmat.present || n.hmat.read_latency_ns == 0) continue;
    if (n.kind == NodeKind::kDram && dram == nullptr) dram = &n;
    if (n.kind != NodeKind::kDram && (far == nullptr || n.kind == NodeKind::kCxl)) far = &n;
  }
  if (far != nullptr) {
    const double dram_ns = dram != nullptr ? dram->hmat.read_latency_ns : a.dram_ns;
    c.cxl_extra_ns = std::max(0.0, far->hmat.read_latency_ns - dram_ns);
    c.cxl_source = "HMAT: node " + std::to_string(far->id) + " (" + std::string(NodeKindName(far->kind)) + ") " +
                   std::to_string(far->hmat.read_latency_ns) + " ns" +
                   (dram != nullptr ? ", node " + std::to_string(dram->id) + " " + std::to_string(dram->hmat.read_latency_ns) + " ns" : "");
  }
  return c;
}

// The share the check runs at: the one whose TCP prediction is nearest the target slowdown,
// among those that put some memory below DRAM.
size_t PickCheck(const std::vector<SharePrediction>& s, double target) {
  size_t best = s.size() - 1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i].below_dram_bytes == 0) continue;
    if (s[best].below_dram_bytes == 0 || std::fabs(s[i].tcp - target) < std::fabs(s[best].tcp - target)) best = i;
  }
  return best;
}

nlohmann::json ReadStats(const std::string& path) {
  std::ifstream f(path);
  nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
  return j.is_object() ? j : nlohmann::json::object();
}

// A counter of a run's exit report (the stats JSON), 0 when absent.
uint64_t StatsCounter(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<uint64_t>() : 0;
}

// The check run's exit report (in `dir`) of the process the advice is about: the one whose
// command is the recorded process's (the most remote faults among several), else PROG's own.
nlohmann::json CheckStats(const std::string& dir, pid_t program, const std::string& command) {
  nlohmann::json best = ReadStats(dir + "/" + std::to_string(program) + ".json");
  std::error_code ec;
  bool matched = false;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".json") continue;
    nlohmann::json j = ReadStats(e.path().string());
    if (command.empty() || j.value("command", "") != command) continue;
    if (!matched || StatsCounter(j, "remote_faults") > StatsCounter(best, "remote_faults")) best = j;
    matched = true;
  }
  return best;
}

// The last lines of a run's stderr kept, to say how a run that ended differently ended.
constexpr size_t kStderrTailLines = 6;

// `run` with its exit reports in the folder `reports` (made here) and its stderr's tail kept.
RunArgs Observed(RunArgs run, const std::string& reports) {
  std::error_code ec;
  std::filesystem::create_directories(reports, ec);
  run.quiet = true;
  run.stats = reports + "/%p.json";
  run.stderr_tail_lines = kStderrTailLines;
  return run;
}

// One run of the program; false (with its status in *status) when it did not exit with 0, said
// on stderr.
bool RunOnce(const RunArgs& run, const char* what, RunOutcome* out, int* status) {
  *status = RunCommand(run, out);
  if (*status == 0) return true;
  if (out->pid < 0) {
    std::fprintf(stderr, "tiermem advise: the %s run of %s could not start (status %d); no advice\n", what,
                 run.command[0].c_str(), *status);
  } else {
    std::fprintf(stderr, "tiermem advise: %s failed in the %s run with status %d; no advice\n", run.command[0].c_str(),
                 what, *status);
  }
  return false;
}

class ScratchDir {
 public:
  ScratchDir() {
    std::string t = (std::filesystem::temp_directory_path() / "tiermem-advise-XXXXXX").string();
    if (mkdtemp(t.data()) != nullptr) path_ = t;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The status a run that ended differently leaves `tiermem advise` with: the run's own where it
// failed, else 1 (the program exited as the plain run did, a process of it did not).
int FailedStatus(const RunEnd& e) {
  if (e.signal != 0) return 128 + e.signal;
  return e.exit_code != 0 ? e.exit_code : 1;
}

bool SameExit(const RunEnd& x, const RunEnd& y) { return x.exit_code == y.exit_code && x.signal == y.signal; }

int Check(const AdviseArgs& a, const ScratchDir& dir, AdviseReport* r) {
  const size_t at = a.check_share > 0 ? 0 : PickCheck(r->shares, a.check_target);
  std::vector<SharePrediction> one =
      a.check_share > 0 ? Predict(r->record, r->peak_rss_bytes, {a.check_share}, r->costs, r->plain_seconds) : std::vector{r->shares[at]};
  const SharePrediction& p = one[0];
  const std::string reports = dir.path() + "/check";
  RunArgs run = Observed(a.run, reports);
  run.dram_limit = std::to_string(std::max<uint64_t>(p.dram_limit_bytes, 1 << 20));
  run.local_memd = !a.memd_capacity.empty() ? a.memd_capacity
                                             : std::to_string(std::max<uint64_t>(2 * r->peak_rss_bytes, 64 << 20));
  RunOutcome o;
  RunCommand(run, &o);
  r->check_share = p.share;
  if (o.pid < 0) {
    std::fprintf(stderr, "tiermem advise: the check run of %s could not start; no advice\n", r->program.c_str());
    return 1;
  }
  // The check's processes leave no heat log; the one the advice is about is named by its command.
  r->check_end = EndOf(o, reports, dir.path() + "/plain");
  const std::vector<std::string>& gone = r->check_end.unreported;
  r->check_end.as_plain = SameExit(r->check_end, r->plain_end) &&
                          std::find(gone.begin(), gone.end(), r->recorded_command) == gone.end();
  if (!r->check_end.as_plain) {
    SayEndedDifferently("check run", r->check_end, r->plain_end);
    r->error = "the check run ended otherwise than the plain run: " + DescribeEnd(r->check_end);
    return FailedStatus(r->check_end);
  }
  const nlohmann::json stats = CheckStats(reports, o.pid, r->recorded_command);
  r->checked = true;
  r->check_predicted_heap_only = p.tcp;
  r->check_seconds = o.seconds;
  r->check_measured = o.seconds / r->plain_seconds;
  r->check_faults = StatsCounter(stats, "remote_faults");
  // The limit held the runtime's own DRAM too (its rings, the sampler's copies): the model at
  // the room the heap had, the one input the check gives it (no time, no fault count).
  r->check_own_bytes = StatsCounter(stats, "runtime_own_bytes");
  const SharePrediction q = Predict(r->record, r->peak_rss_bytes, {p.share}, r->costs, r->plain_seconds, r->check_own_bytes)[0];
  r->check_predicted = q.tcp;
  r->check_predicted_faults = q.faults_per_s * r->plain_seconds;
  // The shares at the check's own cost per fault: the quiet measurement misses what a fault
  // costs inside the program (sampling faults, the policy thread, the load of the moment).
  r->costs.tcp_us_check = std::max(0.0, UsPerFault(*r));
  if (r->costs.tcp_us_check > 0) {
    for (SharePrediction& s : r->shares) s.tcp_calibrated = 1 + s.faults_per_s * r->costs.tcp_us_check * 1e-6;
  }
  return 0;
}

// The heat log (in `dir`) of the run's process with the largest heap: PROG's own, or, where PROG
// starts others (a script that runs a server and its client), the one whose memory matters most.
bool LargestRecord(const std::string& dir, pid_t program, AdviseReport* r, std::string* error) {
  const std::string own = dir + "/" + std::to_string(program) + ".heat";
  bool found = ReadHeatRecord(own, &r->record, error);
  if (found) r->recorded_pid = program;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".heat" || e.path().string() == own) continue;
    HeatRecord other;
    std::string ignored;
    if (!ReadHeatRecord(e.path().string(), &other, &ignored)) continue;
    if (found && other.heap_peak_pages <= r->record.heap_peak_pages) continue;
    r->record = std::move(other);
    r->recorded_pid = std::stoi(e.path().stem().string());
    found = true;
  }
  return found;
}

// The record run in `reads` mode, its heat logs and exit reports in `dir`: no limit, reads
// sampled as the mode says. The write scan cannot share pages with the pager's userfaultfd
// (CheckTrackOptions), so "uffd" runs without it; protection sampling leaves out the pages the
// scan found written (reads remain).
RunArgs RecordRun(const AdviseArgs& a, const std::string& reads, const std::string& dir) {
  RunArgs rec = Observed(a.run, dir);  // the exit reports: the recorded process's command, for the check
  if (reads == "uffd") {
    // The soft sampler arms only pages the pager manages, which it does under a limit: one no
    // program reaches (1 TiB), so nothing is evicted and the memd stays empty.
    rec.local_memd = !a.memd_capacity.empty() ? a.memd_capacity : "64M";
    rec.dram_limit = "1T";
    rec.set.push_back("sample_mode=uffd");
    // A fault that fetches ahead brings sampled pages back before their touch, unseen (nothing
    // else is remote in this run: prefetch serves only the sampler's pages).
    rec.set.push_back("prefetch=off");
  } else {
    rec.set.push_back("track=scan");
    if (a.track_pages != 0) rec.set.push_back("track_pages=" + std::to_string(a.track_pages));
    if (reads == "protect") rec.set.push_back("sample_mode=protect");
  }
  if (reads != "none") rec.set.push_back("sample_pages=" + std::to_string(a.sample_pages));
  rec.set.push_back("heat_log=" + dir + "/%p.heat");
  rec.set.push_back("heat_log_pages=" + std::to_string(a.log_pages));
  return rec;
}

// A record run made, not yet judged against the plain run.
struct RecordTry {
  std::string reads, dir;
  RunOutcome run;
  int status = 0;
};

// Runs the record in `reads` mode into its own folder of `dir`, bounded by --record-timeout
// times the plain run's time; false (said) when it could not start.
bool RecordOnce(const AdviseArgs& a, const std::string& reads, const std::string& dir, double plain_seconds, RecordTry* t) {
  t->reads = reads;
  t->dir = dir + "/record-" + reads;
  RunArgs run = RecordRun(a, reads, t->dir);
  if (a.record_timeout > 0) run.timeout_s = std::max(30.0, a.record_timeout * plain_seconds);
  t->status = RunCommand(run, &t->run);
  if (t->run.pid >= 0) return true;
  std::fprintf(stderr, "tiermem advise: the record run (--record-reads %s) of %s could not start (status %d); no advice\n",
               reads.c_str(), a.run.command[0].c_str(), t->status);
  return false;
}

// Judges a record against the plain run (r->plain_end) and adds it to r->record_attempts: it
// ended as the plain run did, or it is said on stderr. The record's process with the largest
// heap (the one advised on) that left no exit report, where a command that reported in the
// plain run has none here, died in the record only. (Any process without a report would not do:
// a shell ends with _exit, and a command a loop runs may run in one run and not the other.)
bool JudgeRecord(const RecordTry& t, const std::string& dir, AdviseReport* r) {
  RunEnd e = EndOf(t.run, t.dir, dir + "/plain");
  AdviseReport largest;
  std::string ignored;
  if (!e.unreported.empty() && LargestRecord(t.dir, t.run.pid, &largest, &ignored) && !Reported(t.dir, largest.recorded_pid)) {
    e.recorded_unreported = largest.recorded_pid;
  }
  e.as_plain = SameExit(e, r->plain_end) && e.recorded_unreported == 0;
  r->record_attempts.push_back({t.reads, t.run.seconds, e});
  if (!e.as_plain) SayEndedDifferently(("record run (--record-reads " + t.reads + ")").c_str(), e, r->plain_end);
  return e.as_plain;
}

// The record the advice is from: the report's record, its time and peak, the recorded process
// and whether the program stopped the record's sampler; 0, or the status that ends the advice.
int LoadRecord(const RecordTry& t, AdviseReport* r) {
  r->record = HeatRecord{};
  r->recorded_pid = -1;
  r->record_reads = t.reads;
  r->record_seconds = t.run.seconds;
  r->peak_rss_bytes = t.run.peak_rss_bytes;
  std::string error;
  if (!LargestRecord(t.dir, t.run.pid, r, &error)) {
    std::fprintf(stderr, "tiermem advise: %s\n", error.c_str());
    return 1;
  }
  const nlohmann::json stats = ReadStats(t.dir + "/" + std::to_string(r->recorded_pid) + ".json");
  r->recorded_command = stats.value("command", "");
  // The sampler is armed from one round's end to the next one's start: the rest of the period
  // (the heat log's rounds) is the round's own work, its exit report's policy_round_ns.
  const uint64_t rounds = StatsCounter(stats, "policy_rounds");
  const double period = r->record.rounds > 0 ? r->record.seconds / static_cast<double>(r->record.rounds) : 0;
  if (rounds > 0 && period > 0) {
    const double work = static_cast<double>(StatsCounter(stats, "policy_round_ns")) * 1e-9 / static_cast<double>(rounds);
    r->record.armed_share = std::clamp(1 - work / period, 0.05, 1.0);
  }
  // The sampling mode in effect at exit: a sampler that stopped (the program installed a
  // SIGSEGV handler of its own) leaves "faults", and the record is the write scan's alone.
  const std::string mode = stats.value("sampling_mode", "");
  r->record_reads_lost = t.reads != "none" && !mode.empty() && mode != t.reads;
  r->record_attempts.back().reads_lost = r->record_reads_lost;
  return 0;
}

// "PROG stopped the record's MODE sampling (...)": a record whose program installed a
// SIGSEGV handler of its own.
std::string ReadsLost(const AdviseReport& r) {
  return (r.recorded_command.empty() ? r.program : r.recorded_command) + " stopped the record's " + r.record_reads +
         " sampling (it installed a SIGSEGV handler of its own)";
}

// The plain run: the same preload library, no tracking, no limit: the time the slowdowns are
// relative to, and the end every other run is judged by. 0, or the program's failing status.
int Plain(const AdviseArgs& a, const std::string& dir, AdviseReport* r) {
  RunOutcome o;
  int status = 0;
  if (!RunOnce(Observed(a.run, dir + "/plain"), "plain", &o, &status)) return status;
  r->plain_seconds = o.seconds;
  r->plain_end = EndOf(o, dir + "/plain", dir + "/plain");
  return 0;
}

// Ends the advice for a run that ended otherwise than the plain run (said on stderr already):
// with --json, the runs' ends without advice.
int NoAdvice(const AdviseArgs& a, AdviseReport* r, const std::string& error, const std::string& hint, int status) {
  r->error = error;
  std::fprintf(stderr, "tiermem advise: no advice%s\n", hint.c_str());
  if (a.json) std::printf("%s\n", FailureJson(*r).c_str());
  return status;
}

// The plain run, then the record runs, each judged by the plain run's end and bounded by its
// time; the record the advice is from is loaded. Under "auto" a protect record is made again
// with uffd where it ended otherwise than the plain run (a system call given a protected page
// failed) or where the program stopped its sampling: on redis-server uffd's record came far
// nearer the checked faults than the write scan's alone, what protect leaves then
// (docs/results/NOTES.md, 2026-12-07). Not where the user stopped it (a signal passed on).
// 0, or the status that ends the advice.
int RecordAndPlain(const AdviseArgs& a, const std::string& dir, AdviseReport* r) {
  const bool fall_back = a.record_reads == "auto";
  if (int s = Plain(a, dir, r); s != 0) return s;
  RecordTry t;
  if (!RecordOnce(a, fall_back ? "protect" : a.record_reads, dir, r->plain_seconds, &t)) return t.status;
  r->record_why = fall_back ? "auto: protect, which ended as the plain run did and kept its reads" : "--record-reads " + a.record_reads;
  std::string again;  // why the record is made again with uffd
  if (!JudgeRecord(t, dir, r)) {
    const RunEnd& failed = r->record_attempts.back().end;
    again = "the record run (--record-reads " + t.reads + ") ended otherwise than the plain run: " + DescribeEnd(failed);
    if (!fall_back || t.run.passed_on != 0) {
      const bool hint = !fall_back && t.reads == "protect" && t.run.passed_on == 0;
      return NoAdvice(a, r, again, hint ? " (--record-reads uffd or auto records without protected pages)" : "", FailedStatus(failed));
    }
  } else {
    if (int s = LoadRecord(t, r); s != 0) return s;
    if (!r->record_reads_lost) return 0;
    if (!fall_back || t.reads != "protect") {
      std::fprintf(stderr, "tiermem advise: %s: %s\n", ReadsLost(*r).c_str(),
                   t.reads == "protect" ? "its record is the write scan's alone, reads unseen (--record-reads uffd or auto "
                                          "samples them without the handler)"
                                        : "reads unseen");
      return 0;
    }
    again = ReadsLost(*r) + ": its record is the write scan's alone, reads unseen";
  }
  // The reason is on stderr already where the record ended otherwise (SayEndedDifferently).
  std::fprintf(stderr, "tiermem advise: %s%srecording again with --record-reads uffd (soft eviction: transparent to "
                       "system calls, no SIGSEGV handler)\n", r->record_reads_lost ? again.c_str() : "",
               r->record_reads_lost ? "; " : "");
  r->record_why = again + "; recorded again with uffd";
  if (!RecordOnce(a, "uffd", dir, r->plain_seconds, &t)) return t.status;
  if (!JudgeRecord(t, dir, r)) {
    return NoAdvice(a, r, "the record run (--record-reads uffd) ended otherwise than the plain run too: " +
                              DescribeEnd(r->record_attempts.back().end), "", FailedStatus(r->record_attempts.back().end));
  }
  if (int s = LoadRecord(t, r); s != 0) return s;
  if (r->record_reads_lost) std::fprintf(stderr, "tiermem advise: %s: reads unseen\n", ReadsLost(*r).c_str());
  return 0;
}

}  // namespace

int AdviseCommand(AdviseArgs a) {
  if (std::string e = CheckArgs(a); !e.empty()) {
    std::fprintf(stderr, "tiermem advise: %s\n", e.c_str());
    return 2;
  }
  ScratchDir dir;
  if (dir.path().empty()) {
    std::fprintf(stderr, "tiermem advise: no scratch folder could be made under %s\n",
                 std::filesystem::temp_directory_path().c_str());
    return 1;
  }
  AdviseReport r;
  r.program = a.run.command[0];
  r.record_reads_asked = a.record_reads;
  if (int s = RecordAndPlain(a, dir.path(), &r); s != 0) return s;
  std::string error;
  r.costs = CostsFor(a);
  r.costs.tcp_us = a.tcp_us;
  if (a.tcp_us > 0) r.costs.tcp_source = "--tcp-us";
  if (r.costs.tcp_us == 0) {
    const std::string memd = a.run.memd_binary.empty() ? FindMemd() : a.run.memd_binary;
    if (memd.empty() || !MeasureTcpFaultUs(memd, &r.costs.tcp_us, &error)) {
      std::fprintf(stderr, "tiermem advise: the TCP fault cost could not be measured: %s (--tcp-us gives it)\n",
                   memd.empty() ? "tiermem-memd is not beside tiermem (--memd names it)" : error.c_str());
      return 1;
    }
  }
  r.shares = Predict(r.record, r.peak_rss_bytes, a.shares, r.costs, r.plain_seconds);
  if (a.check_share >= 0) {
    if (int s = Check(a, dir, &r); s != 0) return r.error.empty() ? s : NoAdvice(a, &r, r.error, "", s);
  }
  if (a.json) {
    std::printf("%s\n", ReportJson(r).c_str());
  } else {
    PrintTable(r);
  }
  if (!a.plot.empty() && !PlotPng(r, a.plot, &error)) {
    std::fprintf(stderr, "tiermem advise: no plot: %s\n", error.c_str());
  }
  return 0;
}

}  // namespace tiermem::tools

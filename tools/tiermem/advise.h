// `tiermem advise`: what CXL or remote memory would do to a program, from its own heat
// (docs/advise.md). The pieces: the record's reader and the model (advise_model.cc), the fault
// cost of this machine's remote tier (advise_calibrate.cc), the runs and the check
// (advise_cmd.cc), the table, JSON and plot (advise_out.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/tiermem/run.h"

namespace tiermem::tools {

struct AdviseArgs {
  std::vector<double> shares = {1.0, 0.75, 0.5, 0.25, 0.125};  // of the peak RSS, in DRAM
  double cxl_ns = 250;       // a CXL load's latency (used when no CXL node or HMAT says it)
  double dram_ns = 100;      // a DRAM load's latency (likewise)
  double cxl_lines = 1;      // cache lines an access reads from CXL
  double rdma_us = 4;        // an RDMA fault of 4 KiB
  double tcp_us = 0;         // the TCP fault cost; 0: measured here
  double check_share = 0;    // the share the check runs at; 0: the advisor picks; <0: no check
  double check_target = 1.10;  // the check picks the share predicted nearest this slowdown (tcp)
  uint64_t log_pages = 16384;  // TIERMEM_HEAT_LOG_PAGES of the record run
  // Where the record run's read samples come from (docs/advise.md, "Reads in the record"):
  // "protect" (the write scan and protection sampling), "uffd" (a memd of its own and
  // soft-eviction sampling, no write scan), "none" (the write scan alone: reads unseen), "auto"
  // (protect, recorded again with uffd where protect's record ended otherwise than the plain
  // run or lost its reads to the program's own SIGSEGV handler).
  std::string record_reads = "auto";
  uint64_t track_pages = 0;      // TIERMEM_TRACK_PAGES of the record run's write scan (0: the option's default)
  uint64_t sample_pages = 4096;  // TIERMEM_SAMPLE_PAGES of the record run (protect, uffd)
  // A record run is stopped after this many times the plain run's time (30 s at least): a
  // program whose server died in the record may wait for it for ever. 0: never.
  double record_timeout = 20;
  bool json = false;
  std::string plot;          // PNG path ("" = none)
  std::string memd_capacity;  // --local-memd of the check run ("" = twice the peak)
  RunArgs run;               // the program and the run's own flags (preload library, memd, --set)
};

// What the record run learned (the program's heat log, heat_log.h, read back).
struct HeatRecord {
  uint32_t page_size = 4096;
  uint32_t interval_ms = 0;
  uint64_t rounds = 0;
  double seconds = 0;                // from the first round to the last
  uint64_t heap_peak_pages = 0;      // the most DRAM pages a round saw
  std::vector<double> page_touches;  // per page seen, its touches (page-rounds), hottest first
  // Of each page's touches (page_touches' order), those the access sampler found (entries the
  // write scan did not see): caught only while the sampler was armed.
  std::vector<double> page_sampled;
  // The share of the record's time the access sampler was armed (from one round's end to the
  // next one's start; the caller sets it from the run's exit report): 1 when unknown.
  double armed_share = 1;
};
// Reads a heat log; false with the reason in *error.
bool ReadHeatRecord(const std::string& path, HeatRecord* out, std::string* error);

struct SharePrediction {
  double share = 0;
  uint64_t dram_limit_bytes = 0;
  uint64_t below_dram_bytes = 0;
  double touches_per_s = 0;  // page-rounds below DRAM per second of the record run
  double faults_per_s = 0;   // estimated accesses below DRAM per second of the plain run
  double cxl = 1, rdma = 1, tcp = 1;  // predicted slowdowns (1 = none)
  double tcp_calibrated = 0;  // TCP at the check's own cost per fault (FarCosts::tcp_us_check); 0: none
};
struct FarCosts {
  double cxl_extra_ns = 150;  // per cache line, over DRAM
  double cxl_lines = 1;
  double rdma_us = 4, tcp_us = 0;
  // What a remote fault cost inside the check run: its time past the plain run's per remote
  // fault (sampling faults, the policy thread, the load of the moment included); 0 where the
  // check took no fault or was not slower.
  double tcp_us_check = 0;
  std::string cxl_source;     // "--cxl-ns", "HMAT node N", ...
  std::string tcp_source = "measured here";
};
// A page's accesses over the record, estimated from the rounds it was seen touched in
// (docs/advise.md, "The model").
double EstimatedAccesses(double touched_rounds, uint64_t rounds);
// A page's accesses from its touches, `sampled` of them found by the access sampler armed
// `armed_share` of the time (the write scan's are seen all the time): each part as above, the
// sampled part's rate over the armed share (docs/advise.md, "The model").
double PageAccesses(double touched_rounds, double sampled, uint64_t rounds, double armed_share);
// Accesses an LRU of `capacity_pages` pages misses, for pages accessed `accesses` times each
// (Che's approximation; docs/advise.md, "The model").
double LruMisses(const std::vector<double>& accesses, double capacity_pages);
// The model: for each share, the coldest heap pages past share * peak_rss_bytes live below DRAM;
// rates are per second of the plain run (`plain_seconds`). `own_bytes`: the DRAM the runtime
// holds for itself under a limit, which the limit counts (at most half of it).
std::vector<SharePrediction> Predict(const HeatRecord& rec, uint64_t peak_rss_bytes, const std::vector<double>& shares,
                                     const FarCosts& costs, double plain_seconds, uint64_t own_bytes = 0);

// The mean cost of one remote fault over TCP on this machine, in microseconds, measured with a
// memd of its own (`memd` as LocalMemd takes it); false with the reason.
bool MeasureTcpFaultUs(const std::string& memd_binary, double* us, std::string* error);

// How a run of the program ended, to set against the plain run's (docs/advise.md, "Runs that
// end differently").
struct RunEnd {
  int exit_code = 0;  // the program's exit status (-1: a signal ended it)
  int signal = 0;     // the signal that ended it (0: none)
  // Commands whose exit report the plain run has and this run has none of: a process of theirs
  // died, or ended without exit(3), here only (or, for a command a loop runs, was not run here).
  std::vector<std::string> unreported;
  int recorded_unreported = 0;  // the record's process with the largest heap, when it left no exit report
  std::string stderr_tail;      // the program's stderr's last lines
  double stopped_after_s = 0;   // the run was stopped at its time bound after this long (0: it ended)
  bool as_plain = true;         // ended as the plain run did
};
// `run`'s end: its exit, and the commands of the plain run's exit reports (in `plain_reports`)
// that have none in `reports` (folders of <pid>.json, the run's TIERMEM_STATS). as_plain is
// left true: the caller judges.
RunEnd EndOf(const RunOutcome& run, const std::string& reports, const std::string& plain_reports);
// Whether process `pid` wrote its exit report (<pid>.json) into `reports`.
bool Reported(const std::string& reports, int pid);
// "status N" or "killed by SIGNAME", and the unreported commands, for a line of stderr.
std::string DescribeEnd(const RunEnd& e);
// "SIGTERM" for SIGTERM; the number where the signal has no name.
std::string SignalName(int sig);
// Says on stderr that `what` ("check run", ...) ended otherwise than the plain run, with its
// stderr's tail.
void SayEndedDifferently(const char* what, const RunEnd& e, const RunEnd& plain);

// A record run made (the advice's is the last; docs/advise.md, "Runs that end differently").
struct RecordAttempt {
  std::string reads;  // its --record-reads mode
  double seconds = 0;
  RunEnd end;
  bool reads_lost = false;  // the program stopped its sampler (AdviseReport::record_reads_lost)
};

struct AdviseReport {
  std::string program;
  int recorded_pid = -1;  // the process whose heat log the advice is from
  std::string recorded_command;  // its command, as its exit report names it
  double plain_seconds = 0, record_seconds = 0;
  std::string record_reads;  // --record-reads of the record the advice is from
  std::string record_reads_asked;  // --record-reads as given ("auto" by default)
  std::string record_why;          // why the record is in that mode (a fall back's reason)
  std::vector<RecordAttempt> record_attempts;  // every record run, the advice's last
  RunEnd plain_end, check_end;
  std::string error;  // why there is no advice (a run that ended otherwise than the plain run)
  // The program stopped the record's sampler (it installed a SIGSEGV handler of its own): with
  // record_reads "protect" the record is the write scan's alone.
  bool record_reads_lost = false;
  uint64_t peak_rss_bytes = 0;
  HeatRecord record;
  FarCosts costs;
  std::vector<SharePrediction> shares;
  bool checked = false;
  std::string check_tier = "tcp";
  double check_share = 0, check_predicted = 0, check_measured = 0, check_seconds = 0;
  double check_predicted_heap_only = 0;  // before the run: the runtime's own DRAM taken as none
  double check_predicted_faults = 0;
  uint64_t check_faults = 0, check_own_bytes = 0;
};
// What a remote fault cost the checked run: its time past the plain run's per fault (0 with
// none), to set against the measured cost the prediction used.
double UsPerFault(const AdviseReport& r);
void PrintTable(const AdviseReport& r);
std::string ReportJson(const AdviseReport& r);
// The runs' ends and r.error, without advice: for a record or check that ended differently.
std::string FailureJson(const AdviseReport& r);
// Draws slowdown against DRAM share (a line per far tier) with gnuplot; false with the reason.
bool PlotPng(const AdviseReport& r, const std::string& path, std::string* error);

// The command: 0, the program's failing status, 2 on a refused command line, 1 when the runs
// could not be made.
int AdviseCommand(AdviseArgs args);

}  // namespace tiermem::tools

// tiermem-bench track: what each write-tracking mechanism costs per round and how much of the
// truly written set it finds (tiermem::WriteTracker, include/tiermem/track.hpp), side by side in
// one run. Per size, one mapping of that many bytes, populated, without huge pages (as the
// runtime's regions); each round one byte is written in each page of a fresh random set of
// --hot-percent of the pages (the truth of the round), then the tracker's round is timed and its
// report compared with the truth. "none" writes the same sets with no tracker: the price of the
// writes alone, against which each mechanism's extra cost per written page is given.
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/cli.h"
#include "bench/compare_util.h"
#include "bench/splitmix.h"
#include "bench/subcommands.h"
#include "tiermem/options.hpp"
#include "tiermem/track.hpp"

namespace tiermem::bench {
namespace {

constexpr size_t kPage = 4096;

struct Config {
  uint64_t rounds = 10, hot_percent = 10, sample_pages = 4096;
  bool quiet = false;
};

struct Rounds {  // one mechanism at one size, per round
  std::vector<double> round_ns, looked, found_share, write_ns;
  uint64_t written = 0, found = 0, false_reports = 0;
};

// Whether page i is written in round r: a fresh set of hot_percent of the pages each round.
bool Hot(size_t i, uint64_t r, uint64_t percent) { return SplitMix64(i * 0x9e3779b97f4a7c15ull ^ (r + 1)) % 100 < percent; }

// Writes round r's set; returns the pages written, *ns the time it took.
size_t WriteRound(char* base, size_t pages, uint64_t r, uint64_t percent, std::vector<uint8_t>* truth, double* ns) {
  size_t n = 0;
  const uint64_t t0 = NowNs();
  for (size_t i = 0; i < pages; ++i) {
    const bool hot = Hot(i, r, percent);
    (*truth)[i] = hot;
    if (hot) {
      base[i * kPage] = char(r + 1);
      ++n;
    }
  }
  *ns = double(NowNs() - t0);
  return n;
}

// The rounds of one mechanism ("none": no tracker); error text when it could not run.
std::string RunRounds(const std::string& mech, char* base, size_t pages, const Config& cfg, Rounds* out) {
  std::unique_ptr<WriteTracker> t;
  if (mech != "none") {
    auto s = WriteTracker::Start(mech, base, pages * kPage, cfg.sample_pages);
    if (!s.ok()) return s.status().ToString();
    t = std::move(*s);
  }
  std::vector<uint8_t> truth(pages);
  std::vector<size_t> written;
  for (uint64_t r = 0; r < cfg.rounds; ++r) {
    double wns = 0;
    const size_t n = WriteRound(base, pages, r, cfg.hot_percent, &truth, &wns);
    out->write_ns.push_back(wns / double(std::max<size_t>(n, 1)));
    out->written += n;
    if (!t) continue;
    written.clear();
    const uint64_t t0 = NowNs();
    auto looked = t->Round(&written);
    const double ns = double(NowNs() - t0);
    if (!looked.ok()) return looked.status().ToString();
    size_t found = 0;
    for (size_t p : written) (p < pages && truth[p]) ? ++found : ++out->false_reports;
    out->found += found;
    out->round_ns.push_back(ns);
    out->looked.push_back(double(*looked));
    out->found_share.push_back(n ? double(found) / double(n) : 1.0);
  }
  return "";
}

double Med(std::vector<double> v) { return v.empty() ? 0 : Percentile(std::move(v), 0.5); }

nlohmann::json Report(const Rounds& x, double none_write_ns) {
  nlohmann::json m;
  std::vector<double> per_page, rate;
  for (size_t i = 0; i < x.round_ns.size(); ++i) {
    if (x.looked[i] > 0) per_page.push_back(x.round_ns[i] / x.looked[i]);
    if (x.round_ns[i] > 0) rate.push_back(x.looked[i] * 1e9 / x.round_ns[i]);
  }
  m["round_ms"] = Med(x.round_ns) / 1e6;
  m["pages_per_round"] = Med(x.looked);
  m["ns_per_page"] = Med(per_page);
  m["pages_scanned_per_s"] = Med(rate);
  m["hot_found_share"] = Med(x.found_share);
  m["written_pages"] = x.written;
  m["found_pages"] = x.found;
  m["false_reports"] = x.false_reports;
  m["write_ns_per_written_page"] = Med(x.write_ns);
  m["extra_write_ns_per_written_page"] = std::max(0.0, Med(x.write_ns) - none_write_ns);
  return m;
}

}  // namespace

namespace {

// One size: a populated mapping, then each mechanism's rounds on it in turn.
nlohmann::json RunSize(size_t bytes, const std::vector<std::string>& mechs, const Config& cfg) {
  nlohmann::json out;
  out["size_bytes"] = bytes;
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) {
    out["error"] = "mmap of " + std::to_string(bytes) + " bytes failed";
    return out;
  }
  madvise(m, bytes, MADV_NOHUGEPAGE);
  char* base = static_cast<char*>(m);
  const size_t pages = bytes / kPage;
  for (size_t i = 0; i < pages; ++i) base[i * kPage] = 1;
  Rounds none;
  RunRounds("none", base, pages, cfg, &none);
  const double none_ns = Med(none.write_ns);
  out["none_write_ns_per_written_page"] = none_ns;
  for (const std::string& mech : mechs) {
    nlohmann::json j;
    std::string why;
    if (!WriteTracker::Available(mech, &why)) {
      j["ok"] = false;
      j["why"] = why;
    } else {
      Rounds x;
      const std::string err = RunRounds(mech, base, pages, cfg, &x);
      j = Report(x, none_ns);
      j["ok"] = err.empty();
      if (!err.empty()) j["why"] = err;
    }
    if (!cfg.quiet) fprintf(stderr, "track %zu MiB %-12s %s\n", bytes >> 20, mech.c_str(), j.dump().c_str());
    out["mechanisms"][mech] = j;
  }
  munmap(m, bytes);
  return out;
}

struct TrackArgs {
  Config cfg;
  std::string sizes = "1G,4G", mech_list = "pagemap_scan,soft_dirty,protect";
  bool big = false, json = false;
};

int RunTrack(const TrackArgs& a, const std::string& command) {
  Config cfg = a.cfg;
  cfg.quiet = a.json;
  std::vector<size_t> bytes;
  for (const std::string& s : SplitList(a.sizes + (a.big ? ",16G" : ""))) {
    uint64_t b = 0;
    if (!ParseSize(s, &b) || b < (1u << 20) || b % kPage != 0) {
      fprintf(stderr, "track: --sizes: '%s' is not a size of at least 1M in whole pages\n", s.c_str());
      return 2;
    }
    bytes.push_back(size_t(b));
  }
  nlohmann::json out;
  out["command"] = command;
  out["rounds"] = cfg.rounds;
  out["hot_percent"] = cfg.hot_percent;
  out["sample_pages"] = cfg.sample_pages;
  out["sizes"] = nlohmann::json::array();
  for (size_t b : bytes) out["sizes"].push_back(RunSize(b, SplitList(a.mech_list), cfg));
  printf("%s\n", out.dump(2).c_str());
  return 0;
}

}  // namespace

Subcommand AddTrack(CLI::App& bench) {
  auto a = std::make_shared<TrackArgs>();
  CLI::App& app = *AddSubcommand(
      bench, "track",
      "write tracking per mechanism (PAGEMAP_SCAN, soft-dirty, protection sampling): cost per page\n"
      "per round and the share of the written pages found, at 1 and 4 GiB",
      "Measures each write-tracking mechanism (PAGEMAP_SCAN with asynchronous write-protect, "
      "soft-dirty, protection sampling) side by side: the cost of a round per page and the share "
      "of the pages truly written that it finds. Prints one JSON object.");
  app.add_option("--sizes", a->sizes, "comma-separated sizes of the tracked mapping")->capture_default_str();
  AddSwitch(app, "--big", a->big, "add a 16G mapping (needs 16 GiB free)");
  app.add_option("--mechanisms", a->mech_list, "comma-separated, of: pagemap_scan, soft_dirty, protect")
      ->check(ListOf(WriteTracker::Mechanisms()))
      ->capture_default_str();
  AddCount(app, "--rounds", a->cfg.rounds, ParseUint, "1", "1000", "rounds per mechanism and size");
  AddCount(app, "--hot-percent", a->cfg.hot_percent, ParseUint, "1", "100", "pages written per round, percent");
  AddCount(app, "--sample-pages", a->cfg.sample_pages, ParseUint, "1", "4096", "pages protect arms per round");
  AddSwitch(app, "--json", a->json, "no progress lines on stderr (the JSON object is always printed)");
  app.footer(
      "JSON keys: command, rounds, hot_percent, sample_pages, sizes[]: size_bytes,\n"
      "  none_write_ns_per_written_page (the writes with no tracker), mechanisms.NAME (pagemap_scan,\n"
      "  soft_dirty, protect): ok, why (when not ok: the reason the kernel or process lacks it),\n"
      "  round_ms, pages_per_round (pages a round looks at), ns_per_page (a round's time per page it\n"
      "  looks at), pages_scanned_per_s, hot_found_share (of the pages written in a round, the share\n"
      "  it reports), written_pages, found_pages, false_reports (pages reported but not written),\n"
      "  write_ns_per_written_page, extra_write_ns_per_written_page (against none). Medians over\n"
      "  the rounds.");
  return {&app, [a](const std::string& command) { return RunTrack(*a, command); }};
}

}  // namespace tiermem::bench

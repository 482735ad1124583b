// tiermem-bench compare: the same access patterns on every tier this machine has, side by side.
//
// Patterns (each touches every page of the buffer once per repetition, in a random order unless
// sequential, so a remote page is a fault every time and local tiers see TLB and cache misses):
//   chase   dependent pointer chase, one node per page: latency of a dependent load
//   rand64  independent random 64 B reads, one per page: latency with memory-level parallelism
//   seq     sequential read of the whole buffer: bandwidth
//   page4k  random whole-page (4 KiB) reads: the cost of touching a page
// Method: one warm-up repetition, then --reps measured ones. Latency: ns per access over batches
// of 64 accesses, p50 and p99 over all batches of all repetitions. Bandwidth: bytes read / time,
// the median repetition. Remote buffers are evicted to memd before every repetition (the
// runtime's Migrate to kRemote), so each page access there is a userfaultfd fault served over
// the transport.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/cli.h"
#include "bench/compare_util.h"
#include "bench/subcommands.h"
#include "tiermem/options.hpp"
#include "tiermem/tiermem.hpp"

namespace tiermem::bench {
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kBatch = 64;

struct Row {
  std::string tier;  // dram | cxl | remote-rdma | remote-tcp
  int node = -1;
  std::string pattern;
  double p50_ns = 0, p99_ns = 0, gb_s = 0;
  std::string note;  // e.g. why a row's memory failed its data check (timings only)
};

struct Config {
  size_t local_bytes = 64u << 20;
  size_t remote_bytes = 8u << 20;
  int reps = 5;
  std::string memd_host = "127.0.0.1";
  bool json = false;
  std::string plot;
};

// Runs the four patterns on `buf`; `prepare` runs before every repetition (eviction for remote).
// `verify`: read the pointer cycle back before timing it (local tiers): memory that does not
// hold what was written is reported in *error and is not chased (the pointers are not there);
// the other patterns, whose addresses do not come from memory, are still timed and their rows
// carry the error as a note.
template <class Prepare>
std::vector<Row> RunPatterns(char* buf, size_t bytes, int reps, const std::string& tier, int node,
                             Prepare prepare, bool verify = false, std::string* error = nullptr) {
  const size_t pages = bytes / kPage;
  std::mt19937_64 rng(12345);
  std::vector<size_t> order(pages);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<size_t> line(pages);
  for (auto& l : line) l = (rng() % (kPage / 64)) * 64;
  std::vector<Row> rows;
  volatile uint64_t sink = 0;
  std::string bad_data;

  for (const char* pattern : {"chase", "rand64", "seq", "page4k"}) {
    if (!bad_data.empty() && strcmp(pattern, "chase") == 0) continue;
    std::vector<double> batch_ns, rep_gbs;
    for (int rep = -1; rep < reps; ++rep) {  // rep -1: warm-up
      if (strcmp(pattern, "chase") == 0) {
        // Build the cycle (writes) before prepare(), so remote pages are evicted with it.
        for (size_t i = 0; i < pages; ++i) {
          size_t from = order[i], to = order[(i + 1) % pages];
          *reinterpret_cast<char**>(buf + from * kPage + line[from]) = buf + to * kPage + line[to];
        }
        if (verify) {
          for (size_t i = 0; i < pages; ++i) {
            size_t from = order[i], to = order[(i + 1) % pages];
            char* got = *reinterpret_cast<char* volatile*>(buf + from * kPage + line[from]);
            if (got != buf + to * kPage + line[to]) {
              char msg[160];
              snprintf(msg, sizeof(msg), "data check failed: page %zu of the buffer read back %p, %p was written",
                       from, static_cast<void*>(got), static_cast<void*>(buf + to * kPage + line[to]));
              bad_data = msg;
              if (error != nullptr) *error = msg;
              break;
            }
          }
          if (!bad_data.empty()) break;  // not chased: the pointers are not there
        }
      }
      prepare();
      uint64_t t_start = NowNs(), t = t_start;
      size_t bytes_read = 0;
      if (strcmp(pattern, "chase") == 0) {
        char* p = buf + order[0] * kPage + line[order[0]];
        for (size_t i = 0; i < pages; ++i) {
          p = *reinterpret_cast<char**>(p);
          if ((i + 1) % kBatch == 0) {
            uint64_t n = NowNs();
            if (rep >= 0) batch_ns.push_back(static_cast<double>(n - t) / kBatch);
            t = n;
          }
        }
        sink = sink + reinterpret_cast<uintptr_t>(p);
        bytes_read = pages * 64;
      } else if (strcmp(pattern, "rand64") == 0) {
        for (size_t i = 0; i < pages; ++i) {
          const uint64_t* l = reinterpret_cast<const uint64_t*>(buf + order[i] * kPage + line[order[i]]);
          sink = sink + (l[0] ^ l[7]);
          if ((i + 1) % kBatch == 0) {
            uint64_t n = NowNs();
            if (rep >= 0) batch_ns.push_back(static_cast<double>(n - t) / kBatch);
            t = n;
          }
        }
        bytes_read = pages * 64;
      } else {
        const bool seq = strcmp(pattern, "seq") == 0;
        for (size_t i = 0; i < pages; ++i) {
          const uint64_t* w = reinterpret_cast<const uint64_t*>(buf + (seq ? i : order[i]) * kPage);
          uint64_t s = 0;
          for (size_t k = 0; k < kPage / 8; k += 4) s += w[k] + w[k + 1] + w[k + 2] + w[k + 3];
          sink = sink + s;
          if ((i + 1) % kBatch == 0) {
            uint64_t n = NowNs();
            if (rep >= 0) batch_ns.push_back(static_cast<double>(n - t) / kBatch);
            t = n;
          }
        }
        bytes_read = pages * kPage;
      }
      uint64_t elapsed = NowNs() - t_start;
      if (rep >= 0 && elapsed > 0) rep_gbs.push_back(static_cast<double>(bytes_read) / static_cast<double>(elapsed));
    }
    if (!bad_data.empty() && strcmp(pattern, "chase") == 0) continue;
    Row r;
    r.tier = tier;
    r.node = node;
    r.pattern = pattern;
    if (!bad_data.empty()) r.note = "timings only, " + bad_data;
    r.p50_ns = Percentile(batch_ns, 0.5);
    r.p99_ns = Percentile(batch_ns, 0.99);
    r.gb_s = Percentile(rep_gbs, 0.5);
    rows.push_back(r);
  }
  return rows;
}

void Touch(char* buf, size_t bytes) {
  for (size_t i = 0; i < bytes; i += kPage) buf[i] = 1;
}

bool Plot(const std::vector<Row>& rows, const std::string& out, std::string* err) {
  std::string ext = out.substr(out.rfind('.') + 1);
  std::string term = ext == "svg" ? "svg size 1000,520 dynamic" : "pngcairo size 1000,520";
  char dat[] = "/tmp/tiermem-compare-XXXXXX";
  int fd = mkstemp(dat);
  if (fd < 0) {
    *err = "cannot create a temporary file";
    return false;
  }
  // One row per pattern, one column per tier/node.
  std::vector<std::string> cols;
  for (auto& r : rows) {
    std::string c = r.tier + (r.node >= 0 ? "/node" + std::to_string(r.node) : "");
    if (std::find(cols.begin(), cols.end(), c) == cols.end()) cols.push_back(c);
  }
  std::string text = "pattern";
  for (auto& c : cols) text += " \"" + c + "\"";
  text += "\n";
  for (const char* pattern : {"chase", "rand64", "seq", "page4k"}) {
    text += pattern;
    for (auto& c : cols) {
      double v = NAN;
      for (auto& r : rows) {
        std::string rc = r.tier + (r.node >= 0 ? "/node" + std::to_string(r.node) : "");
        if (rc == c && r.pattern == pattern) v = r.p50_ns;
      }
      text += " " + (std::isnan(v) ? std::string("?") : std::to_string(v));
    }
    text += "\n";
  }
  if (write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    close(fd);
    unlink(dat);
    *err = "cannot write the plot data";
    return false;
  }
  close(fd);
  std::string script = "set terminal " + term + "; set output '" + out +
                       "'; set title 'tiermem compare: p50 ns per access (log scale)'; "
                       "set style data histograms; set style histogram clustered gap 1; "
                       "set style fill solid 0.8 border -1; set logscale y; set ylabel 'ns'; "
                       "set key top left; set datafile missing '?'; set grid ytics; plot ";
  for (size_t i = 0; i < cols.size(); ++i) {
    script += std::string(i ? ", " : "") + "'" + dat + "' using " + std::to_string(i + 2) +
              (i == 0 ? ":xtic(1)" : "") + " title columnheader";
  }
  std::string cmd = "gnuplot -e \"" + script + "\" 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string output;
  char buf[256];
  while (p && fgets(buf, sizeof(buf), p)) output += buf;
  int rc = p ? pclose(p) : -1;
  unlink(dat);
  if (rc != 0) {
    *err = "gnuplot failed (is gnuplot installed?): " + output;
    return false;
  }
  return true;
}

struct Args {
  Config cfg;
  bool quick = false;
  CLI::Option *size = nullptr, *remote_size = nullptr, *reps = nullptr;
};

int RunCompare(Args args, const std::string&) {
  auto& [cfg, quick, size, remote_size, reps] = args;
  if (quick) {
    UnlessGiven(size, cfg.local_bytes, 32u << 20);
    UnlessGiven(remote_size, cfg.remote_bytes, 4u << 20);
    UnlessGiven(reps, cfg.reps, 3);
  }
  cfg.local_bytes = cfg.local_bytes / kPage * kPage;
  cfg.remote_bytes = cfg.remote_bytes / kPage * kPage;

  std::vector<Row> rows;
  std::vector<std::pair<std::string, std::string>> absent;  // tier, reason
  std::vector<std::pair<std::string, std::string>> notes;   // tier, what limits its rows
  const std::map<std::string, std::string> quiet = {{"TIERMEM_SAMPLE_MODE", "off"}};

  // Local tiers: DRAM (its first node) and every CXL node.
  {
    Options o;
    o.Set("cxl_nodes", "auto");
    auto rt = StartWithEnv(o, quiet);
    if (!rt.ok()) {
      fprintf(stderr, "compare: cannot start tiermem: %s\n", rt.status().ToString().c_str());
      return 1;
    }
    Runtime& r = **rt;
    auto p = r.Allocate(cfg.local_bytes, Tier::kDram);
    if (!p.ok()) {
      fprintf(stderr, "compare: %s\n", p.status().ToString().c_str());
      return 1;
    }
    char* buf = static_cast<char*>(*p);
    Touch(buf, cfg.local_bytes);
    std::vector<int> dram_nodes = TierNodes(r, Tier::kDram);
    int node0 = dram_nodes.empty() ? 0 : dram_nodes[0];
    auto m = r.MigrateToNode(buf, cfg.local_bytes, node0);
    if (!m.ok()) fprintf(stderr, "compare: placing on node %d: %s\n", node0, m.status().ToString().c_str());
    std::string err;
    auto dram_rows = RunPatterns(buf, cfg.local_bytes, cfg.reps, "dram", node0, [] {}, true, &err);
    if (dram_rows.empty()) absent.push_back({"dram", err});
    if (!err.empty()) notes.push_back({"dram", err});
    for (auto& row : dram_rows) rows.push_back(row);
    std::vector<int> cxl = TierNodes(r, Tier::kCxl);
    if (cxl.empty()) {
      std::string why;
      for (auto& s : r.Stats()) if (s.tier == Tier::kCxl) why = s.absent_reason;
      absent.push_back({"cxl", why});
    }
    for (int n : cxl) {
      auto mm = r.MigrateToNode(buf, cfg.local_bytes, n);
      if (!mm.ok()) {
        absent.push_back({"cxl", "node " + std::to_string(n) + ": " + mm.status().ToString()});
        continue;
      }
      std::string cerr;
      auto cxl_rows = RunPatterns(buf, cfg.local_bytes, cfg.reps, "cxl", n, [] {}, true, &cerr);
      if (cxl_rows.empty()) absent.push_back({"cxl", "node " + std::to_string(n) + ": " + cerr});
      if (!cerr.empty()) notes.push_back({"cxl", "node " + std::to_string(n) + ": " + cerr + " (chase not run)"});
      for (auto& row : cxl_rows) rows.push_back(row);
    }
    (void)r.Free(buf);
    (void)r.Stop();
  }

  // Remote tiers: a memd on loopback, reached over RDMA (when a verbs device exists) and TCP.
  // Without a verbs device the RDMA row is absent for that reason, found before a runtime is
  // started on it: the runtime would say so too, as an error line, where the table is the place.
  auto topo = DiscoverTopology();
  const std::string no_rdma = !topo.ok()                   ? topo.status().ToString()
                              : topo->rdma_devices.empty() ? topo->rdma_absent_reason
                                                           : "";
  MemdChild memd;
  bool memd_ok = memd.Start(std::max<uint64_t>(cfg.remote_bytes * 4, 64u << 20), cfg.memd_host);
  for (const char* scheme : {"rdma", "tcp"}) {
    std::string tier = std::string("remote-") + scheme;
    if (tier == "remote-rdma" && !no_rdma.empty()) {
      absent.push_back({tier, "no RDMA device: " + no_rdma});
      continue;
    }
    if (!memd_ok) {
      absent.push_back({tier, "could not start tiermem-memd (" + MemdBinary() + ")"});
      continue;
    }
    Options o;
    o.Set("remote", memd.Url(scheme));
    o.Set("remote_timeout_ms", 10000);
    auto rt = StartWithEnv(o, {{"TIERMEM_SAMPLE_MODE", "off"}, {"TIERMEM_LOG", "error"}});
    if (!rt.ok() || !(*rt)->HasTier(Tier::kRemote)) {
      std::string why = !rt.ok() ? rt.status().ToString() : "";
      if (rt.ok()) {
        for (auto& s : (*rt)->Stats()) if (s.tier == Tier::kRemote) why = s.absent_reason;
      }
      absent.push_back({tier, why});
      continue;
    }
    Runtime& r = **rt;
    auto p = r.Allocate(cfg.remote_bytes, Tier::kDram);
    if (!p.ok()) {
      absent.push_back({tier, p.status().ToString()});
      continue;
    }
    char* buf = static_cast<char*>(*p);
    Touch(buf, cfg.remote_bytes);
    bool evict_failed = false;
    auto evict = [&] {
      auto e = r.Migrate(buf, cfg.remote_bytes, Tier::kRemote);
      if (!e.ok()) evict_failed = true;
    };
    auto got = RunPatterns(buf, cfg.remote_bytes, cfg.reps, tier, -1, evict);
    if (evict_failed) {
      absent.push_back({tier, "evicting the buffer failed"});
    } else {
      for (auto& row : got) rows.push_back(row);
    }
    (void)r.Free(buf);
    (void)r.Stop();
  }

  if (cfg.json) {
    nlohmann::json j;
    j["results"] = nlohmann::json::array();
    for (auto& r : rows) {
      j["results"].push_back({{"tier", r.tier}, {"node", r.node < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.node)},
                              {"pattern", r.pattern}, {"p50_ns", std::round(r.p50_ns * 10) / 10},
                              {"p99_ns", std::round(r.p99_ns * 10) / 10}, {"gb_s", std::round(r.gb_s * 1000) / 1000}});
      if (!r.note.empty()) j["results"].back()["note"] = r.note;
    }
    j["absent"] = nlohmann::json::array();
    for (auto& [t, why] : absent) j["absent"].push_back({{"tier", t}, {"reason", why}});
    j["notes"] = nlohmann::json::array();
    for (auto& [t, what] : notes) j["notes"].push_back({{"tier", t}, {"note", what}});
    j["method"] = {{"reps", cfg.reps}, {"warmup_reps", 1}, {"local_bytes", cfg.local_bytes},
                   {"remote_bytes", cfg.remote_bytes}, {"batch", kBatch}};
    printf("%s\n", j.dump(1).c_str());
  } else {
    printf("%-12s %5s %-8s %12s %12s %10s\n", "tier", "node", "pattern", "p50_ns", "p99_ns", "GB/s");
    for (auto& r : rows) {
      printf("%-12s %5s %-8s %12.1f %12.1f %10.3f\n", r.tier.c_str(),
             r.node < 0 ? "-" : std::to_string(r.node).c_str(), r.pattern.c_str(), r.p50_ns,
             r.p99_ns, r.gb_s);
    }
    for (auto& [t, why] : absent) printf("%s: absent: %s\n", t.c_str(), why.c_str());
    for (auto& [t, what] : notes) printf("%s: note: %s\n", t.c_str(), what.c_str());
    // Ratios to DRAM, measured in this run.
    for (auto& r : rows) {
      if (r.tier == "dram") continue;
      for (auto& d : rows) {
        if (d.tier == "dram" && d.pattern == r.pattern && d.p50_ns > 0) {
          printf("ratio %s/dram %-8s p50 x%.1f\n", r.tier.c_str(), r.pattern.c_str(), r.p50_ns / d.p50_ns);
        }
      }
    }
  }
  if (!cfg.plot.empty()) {
    std::string err;
    if (!Plot(rows, cfg.plot, &err)) {
      fprintf(stderr, "compare: --plot %s: %s\n", cfg.plot.c_str(), err.c_str());
      return 1;
    }
    fprintf(stderr, "compare: plot written to %s\n", cfg.plot.c_str());
  }
  return 0;
}

}  // namespace

Subcommand AddCompare(CLI::App& bench) {
  auto a = std::make_shared<Args>();
  CLI::App& app = *AddSubcommand(
      bench, "compare",
      "the same access patterns on DRAM, each CXL node, remote over RDMA and over TCP",
      "Runs pointer-chase, random 64 B, sequential and random 4 KiB reads on DRAM, each CXL node, "
      "and the remote tier over RDMA and TCP (a tiermem-memd started here, on loopback unless "
      "--memd-host names an address with a verbs device). Tiers this machine lacks are listed as "
      "absent, with the reason.");
  AddSwitch(app, "--json", a->cfg.json, "print one JSON object instead of the table");
  AddSwitch(app, "--quick", a->quick, "32M local, 4M remote, 3 reps, where not given");
  app.add_option("--plot", a->cfg.plot, "also write a bar chart (gnuplot) of p50 ns to this file (default: none)")
      ->type_name("out.svg|out.png");
  a->size = AddSize(app, "--size", a->cfg.local_bytes, ParseSize, "64M", "256K", "",
                    "bytes per local tier (rounded down to 4 KiB)");
  a->remote_size = AddSize(app, "--remote-size", a->cfg.remote_bytes, ParseSize, "8M", "256K", "",
                           "bytes on the remote tier (rounded down to 4 KiB)");
  a->reps = AddCount(app, "--reps", a->cfg.reps, ParseUint, "1", "1000", "measured repetitions (after one warm-up)");
  app.add_option("--memd-host", a->cfg.memd_host, "address the started memd listens on (RDMA needs a verbs device)")
      ->capture_default_str();
  app.footer(
      "JSON keys (--json): results, absent, notes, method.\n"
      "  results[]: tier (dram|cxl|remote-rdma|remote-tcp), node (null for remote), pattern\n"
      "             (chase|rand64|seq|page4k), p50_ns, p99_ns, gb_s, note (only when the data check failed)\n"
      "  absent[]:  tier, reason\n"
      "  notes[]:   tier, note\n"
      "  method:    reps, warmup_reps, local_bytes, remote_bytes, batch\n"
      "Environment: TIERMEM_BENCH_MEMD_LOG=1 shows memd's log on stderr.");
  return {&app, [a](const std::string& command) { return RunCompare(*a, command); }};
}

}  // namespace tiermem::bench

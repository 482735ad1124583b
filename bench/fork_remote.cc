// tiermem-bench fork-remote: fork() of a process whose data is mostly remote, with
// TIERMEM_FORK=share and =fetch side by side in one run. Per mode: a runtime with a memd on
// loopback; --size of data filled with a per-page pattern, of which all but --dram is moved to the
// remote tier; then fork(). The child reads every page and checks it against the fork-time
// pattern; meanwhile the parent writes one word into page after page (its own bytes) and samples
// its RSS every 5 ms until the child has reported. The parent then checks its pages (its word
// where it wrote, the pattern elsewhere). Printed as one JSON object: RSS before the fork, its
// maximum during the child's life, the bound "before + pages written since the fork", and the
// child's read time and mismatches.
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench/cli.h"
#include "bench/compare_util.h"
#include "bench/memd_child.h"
#include "bench/subcommands.h"
#include "tiermem/options.hpp"
#include "tiermem/tiermem.hpp"

namespace tiermem::bench {
namespace {

constexpr size_t kPage = 4096;

uint64_t Word(uint64_t page, size_t i) { return (page * 0x9E3779B97F4A7C15ull) ^ i; }
constexpr uint64_t kParentMark = 0xFEEDFACECAFEBEEFull;

uint64_t RssBytes() {
  FILE* f = fopen("/proc/self/statm", "r");
  unsigned long size = 0, rss = 0;
  if (f != nullptr) {
    if (fscanf(f, "%lu %lu", &size, &rss) != 2) rss = 0;
    fclose(f);
  }
  return static_cast<uint64_t>(rss) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

// The child: every page checked against the fork-time pattern; writes {mismatches, ns} to `out`.
[[noreturn]] void ChildCheck(const uint64_t* base, size_t pages, int out) {
  const uint64_t t0 = NowNs();
  uint64_t bad = 0;
  for (size_t p = 0; p < pages; ++p) {
    const uint64_t* w = base + p * (kPage / 8);
    for (size_t i = 0; i < kPage / 8; ++i) {
      if (w[i] != Word(p, i)) {
        ++bad;
        break;
      }
    }
  }
  const uint64_t msg[2] = {bad, NowNs() - t0};
  _exit(write(out, msg, sizeof(msg)) == sizeof(msg) ? 0 : 2);
}

nlohmann::json RunMode(const std::string& mode, const std::string& server, size_t bytes, size_t dram) {
  nlohmann::json r;
  r["mode"] = mode;
  Options o;
  o.Set("remote", server);
  o.Set("fork", mode);
  o.Set("sample_mode", "off");  // no policy moves: the placement below is the whole story
  auto rt = Runtime::Start(o);
  if (!rt.ok()) {
    r["error"] = rt.status().ToString();
    return r;
  }
  auto mem = (*rt)->Allocate(bytes, Tier::kDram);
  if (!mem.ok()) {
    r["error"] = mem.status().ToString();
    return r;
  }
  auto* base = static_cast<uint64_t*>(*mem);
  const size_t pages = bytes / kPage;
  for (size_t p = 0; p < pages; ++p) {
    for (size_t i = 0; i < kPage / 8; ++i) base[p * (kPage / 8) + i] = Word(p, i);
  }
  auto moved = (*rt)->Migrate(reinterpret_cast<char*>(base) + dram, bytes - dram, Tier::kRemote);
  if (!moved.ok()) {
    r["error"] = moved.status().ToString();
    return r;
  }
  r["remote_bytes"] = moved->pages_moved * kPage;
  int fds[2];
  if (pipe(fds) != 0) {
    r["error"] = "pipe failed";
    return r;
  }
  const uint64_t rss_before = RssBytes();
  const uint64_t f0 = NowNs();
  const pid_t pid = fork();
  if (pid < 0) {
    r["error"] = "fork failed";
    return r;
  }
  if (pid == 0) ChildCheck(base, pages, fds[1]);
  const uint64_t fork_ns = NowNs() - f0;
  const uint64_t rss_after_fork = RssBytes();
  // The parent writes while the child reads, sampling its RSS; bounded by the page count.
  uint64_t written = 0, rss_max = rss_after_fork, rss_max_bound_excess = 0;
  for (bool child_done = false; !child_done;) {
    const uint64_t until = NowNs() + 5'000'000;
    while (NowNs() < until && written < pages) base[(written++) * (kPage / 8)] = kParentMark;
    const uint64_t rss = RssBytes();
    rss_max = std::max(rss_max, rss);
    const uint64_t bound = rss_before + written * kPage;
    rss_max_bound_excess = std::max(rss_max_bound_excess, rss > bound ? rss - bound : 0);
    pollfd pf = {fds[0], POLLIN, 0};
    child_done = poll(&pf, 1, 0) > 0;
  }
  uint64_t msg[2] = {~0ull, 0};
  const bool got = read(fds[0], msg, sizeof(msg)) == sizeof(msg);
  int status = 0;
  waitpid(pid, &status, 0);
  close(fds[0]);
  close(fds[1]);
  uint64_t parent_bad = 0;
  for (size_t p = 0; p < pages; ++p) {
    const uint64_t* w = base + p * (kPage / 8);
    bool ok = w[0] == (p < written ? kParentMark : Word(p, 0));
    for (size_t i = 1; i < kPage / 8 && ok; ++i) ok = w[i] == Word(p, i);
    parent_bad += ok ? 0 : 1;
  }
  const RuntimeCounters c = (*rt)->Counters();
  r["fork_ms"] = static_cast<double>(fork_ns) / 1e6;
  r["rss_before_fork_mib"] = static_cast<double>(rss_before) / (1 << 20);
  r["rss_after_fork_mib"] = static_cast<double>(rss_after_fork) / (1 << 20);
  r["rss_max_during_child_mib"] = static_cast<double>(rss_max) / (1 << 20);
  r["pages_written_during_child"] = written;
  r["rss_bound_mib"] = static_cast<double>(rss_before + written * kPage) / (1 << 20);
  r["rss_max_over_bound_mib"] = static_cast<double>(rss_max_bound_excess) / (1 << 20);
  r["child_ok"] = got && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  r["child_mismatched_pages"] = msg[0];
  r["child_read_s"] = static_cast<double>(msg[1]) / 1e9;
  r["child_read_mib_per_s"] = msg[1] > 0 ? static_cast<double>(bytes) / (1 << 20) / (static_cast<double>(msg[1]) / 1e9) : 0.0;
  r["parent_mismatched_pages"] = parent_bad;
  r["remote_faults"] = c.remote_faults;
  (void)(*rt)->Free(*mem);
  return r;
}

struct Args {
  size_t bytes = 512u << 20, dram = 64u << 20;
  std::string modes = "share,fetch", server;
  bool json = false;
};

int RunForkRemote(Args args, const std::string&) {
  auto& [bytes, dram, modes, server, json] = args;
  bytes -= bytes % kPage;
  dram = std::min(dram - dram % kPage, bytes);
  MemdChild memd;
  if (server.empty()) {
    if (!memd.Start(bytes + (64u << 20))) {
      fprintf(stderr, "fork-remote: could not start tiermem-memd (%s)\n", MemdBinary().c_str());
      return 1;
    }
    server = memd.Url("tcp");
  }
  nlohmann::json out;
  out["size_bytes"] = bytes;
  out["dram_bytes"] = dram;
  bool all_ok = true;
  for (size_t at = 0; at <= modes.size();) {
    size_t comma = modes.find(',', at);
    if (comma == std::string::npos) comma = modes.size();
    const std::string m = modes.substr(at, comma - at);
    at = comma + 1;
    if (m != "share" && m != "fetch") {
      fprintf(stderr, "fork-remote: --modes: '%s' is not share or fetch\n", m.c_str());
      return 2;
    }
    nlohmann::json r = RunMode(m, server, bytes, dram);
    if (!json) fprintf(stderr, "%s\n", r.dump().c_str());
    all_ok = all_ok && !r.contains("error") && r["child_ok"].get<bool>() &&
             r["child_mismatched_pages"].get<uint64_t>() == 0 && r["parent_mismatched_pages"].get<uint64_t>() == 0;
    out["modes"][m] = r;
  }
  printf("%s\n", out.dump(2).c_str());
  return all_ok ? 0 : 1;
}

}  // namespace

Subcommand AddForkRemote(CLI::App& bench) {
  auto a = std::make_shared<Args>();
  CLI::App& app = *AddSubcommand(bench, "fork-remote", "fork() with most data remote: the parent's RSS while the child reads it all, share vs fetch",
      "fork() of a process with most of its data remote: the child checks every page while the "
      "parent writes; the parent's RSS during the child's life, TIERMEM_FORK=share and =fetch "
      "side by side. Prints one JSON object.");
  AddSize(app, "--size", a->bytes, ParseSize, "512M", "4M", "64G", "data in all");
  AddSize(app, "--dram", a->dram, ParseSize, "64M", "0", "64G", "data left in DRAM (the rest goes remote)");
  app.add_option("--modes", a->modes, "TIERMEM_FORK values to run, in order")->capture_default_str();
  AddSwitch(app, "--json", a->json, "no progress lines on stderr (the JSON object is always printed)");
  app.add_option("--server", a->server, "use this memd instead of starting one")->type_name("tcp://HOST:PORT");
  app.footer(
      "JSON keys: size_bytes, dram_bytes, modes.MODE: remote_bytes, fork_ms, rss_before_fork_mib,\n"
      "  rss_after_fork_mib, rss_max_during_child_mib, pages_written_during_child, rss_bound_mib\n"
      "  (RSS before the fork + the pages the parent wrote since), rss_max_over_bound_mib,\n"
      "  child_ok, child_mismatched_pages, child_read_s, child_read_mib_per_s,\n"
      "  parent_mismatched_pages, remote_faults; error (only when it failed).");
  return {&app, [a](const std::string& command) { return RunForkRemote(*a, command); }};
}

}  // namespace tiermem::bench

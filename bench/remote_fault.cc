// tiermem-bench remote-fault: the cost of the remote tier's page faults against the bare transport
// it runs on, in one run.
//
// Method: start a memd on loopback (or use --server), then
//   raw:   on a transport connection of its own, a 4 KiB read round trip (one request in flight,
//          after a warm-up) and a stream of 4 KiB writes (a window of requests in flight);
//          and a stream of 4 KiB reads with the prefetcher's window of requests in flight
//          (raw_stream_gbps: what fetching ahead could reach at best);
//   tiered: through the API, N pages with known contents are evicted (Migrate to kRemote; the
//          eviction rate is pages / time of that call), then touched once each in the order of
//          --pattern (random: one fault each; seq: ascending; stride: every 4th page, 4 passes),
//          with TIERMEM_PREFETCH from --prefetch; each touch is timed around the touching load,
//          and the loop's bytes over its time is access_gbps. Every page is then checked.
// Prints medians/p99 in microseconds and rates in pages per second.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include "bench/child.h"
#include "bench/cli.h"
#include "bench/compare_util.h"
#include "bench/fault_floors.h"
#include "bench/memd_child.h"
#include "bench/raw_stream.h"
#include "bench/remote_fault_pass.h"
#include "bench/subcommands.h"
#include "tiermem/remote.hpp"
#include "tiermem/tiermem.hpp"

namespace tiermem::bench {
namespace {

constexpr size_t kPage = 4096;

struct Args {
  std::string transport = "tcp", server, token, memd_path, host = "127.0.0.1", pattern = "random";
  std::string prefetch = "auto";
  size_t pages = 65536;
  bool json = false;
  size_t nservers = 1, replicas = 1, threads = 1;
  bool kill_one = false;
  std::string code;
  CLI::Option* servers_opt = nullptr;
};

// --server's list: the servers of every pass (the first one's transport is measured bare), each
// with the transport's scheme unless it names one; --servers becomes their number. 0, or 2 on a
// usage error.
int ParseServerList(Args& a, std::vector<std::string>* listed) {
  const std::string& server = a.server;
  if (server.empty()) return 0;
  if (a.servers_opt->count() > 0) {
    fprintf(stderr, "tiermem-bench remote-fault: --servers starts memds; --server names running ones (not both)\n");
    return 2;
  }
  for (size_t at = 0; at <= server.size();) {
    const size_t comma = std::min(server.find(',', at), server.size());
    std::string one = server.substr(at, comma - at);
    if (one.empty()) {
      fprintf(stderr, "tiermem-bench remote-fault: --server %s: an empty entry\n", server.c_str());
      return 2;
    }
    listed->push_back((one.find("://") == std::string::npos ? a.transport + "://" : "") + one);
    at = comma + 1;
  }
  a.nservers = listed->size();
  return 0;
}

// --code's k+m, the form only (the runtime refuses unsupported numbers, naming them), and the
// counts --replicas and --kill-one need. 0, or 2 on a usage error.
int CheckCounts(const Args& a, size_t* code_k, size_t* code_m) {
  const std::string& code = a.code;
  if (!code.empty()) {
    const size_t plus = code.find('+');
    const bool form = plus != std::string::npos && plus > 0 && plus + 1 < code.size() && plus <= 2 &&
                      code.size() - plus - 1 <= 2 && code.find_first_not_of("0123456789+") == std::string::npos &&
                      code.find('+', plus + 1) == std::string::npos;
    if (form) {
      *code_k = std::stoul(code.substr(0, plus));
      *code_m = std::stoul(code.substr(plus + 1));
    }
    const char* why = !form ? "expected k+m such as 4+2"
                      : a.replicas != 1 ? "--code and --replicas exclude each other"
                      : *code_k + *code_m > a.nservers ? "needs --servers of at least k+m"
                                                       : nullptr;
    if (why != nullptr) {
      fprintf(stderr, "tiermem-bench remote-fault: --code %s: %s\n", code.c_str(), why);
      return 2;
    }
  }
  if (a.replicas < 1 || a.replicas > a.nservers || (a.kill_one && a.replicas < 2 && code.empty()) ||
      (!a.server.empty() && a.kill_one)) {
    fprintf(stderr, "tiermem-bench remote-fault: --replicas must be 1 to --servers (%zu)%s%s\n", a.nservers,
            a.kill_one ? "; --kill-one needs --replicas 2 or more" : "",
            a.server.empty() ? "" : "; --kill-one starts its own memds (no --server)");
    return 2;
  }
  return 0;
}

// The servers of the run: `listed`, or --servers memds started here (into `memds`). `url` names
// them all, `first_url` the one whose bare transport is measured. 0, or 1 when a memd did not start.
int Servers(Args& a, const std::vector<std::string>& listed, std::vector<std::unique_ptr<MemdChild>>* memds,
            std::string* url, std::string* first_url) {
  if (!a.server.empty()) {
    for (size_t k = 0; k < listed.size(); ++k) *url += (k == 0 ? "" : ",") + listed[k];
    *first_url = listed[0];
    return 0;
  }
  if (a.memd_path.empty()) a.memd_path = MemdBinary();
  // Room for the raw pass, the one-replica pass and the pass itself on each server.
  uint64_t capacity = (uint64_t(a.pages) * 2 + 65536 + 16384 * 2) * kPage * 2;
  for (size_t k = 0; k < a.nservers; ++k) {
    MemdChildOptions mo;
    mo.binary = a.memd_path;
    mo.host = a.host;
    mo.args = {"--capacity", std::to_string(capacity >> 20) + "M"};
    if (!a.token.empty()) mo.token = a.token;
    mo.allow_no_token = false;  // beyond loopback, a memd started here needs a token
    auto& m = memds->emplace_back(std::make_unique<MemdChild>());
    if (!m->Start(mo)) {
      fprintf(stderr, "tiermem-bench remote-fault: could not start %s on %s\n", a.memd_path.c_str(), a.host.c_str());
      return 1;
    }
    *url += (k == 0 ? "" : ",") + m->Url(a.transport);
  }
  *first_url = (*memds)[0]->Url(a.transport);
  return 0;
}

// What one run measured: the bare transport, and the tiered passes.
struct Results {
  RawTransport raw;
  std::vector<double> raw_threads;  // with --threads > 1: the bare round trips from as many threads
  Tiered t, one, two;               // the run; one replica (--replicas > 1); two replicas (--code)
};

// The bare transport on `first_url`, with its read stream's window as the prefetcher's. 0, or 1
// when it failed.
int MeasureBare(const Args& a, const std::string& first_url, Results* r) {
  const size_t window = RawStreamWindow(a.prefetch, a.pattern);
  Status s = MeasureRawTransport(first_url, a.token, a.pages, window, &r->raw);
  if (!s.ok()) {
    fprintf(stderr, "tiermem-bench remote-fault: raw transport on %s: %s\n", first_url.c_str(), s.ToString().c_str());
    return 1;
  }
  // With several faulting threads, the bare round trip from as many threads at once beside it.
  if (a.threads > 1) {
    auto rt = ConcurrentRoundTripsUs(first_url, a.token, a.threads, std::max<size_t>(200, 6000 / a.threads));
    if (!rt.ok()) {
      fprintf(stderr, "tiermem-bench remote-fault: %zu threads' round trips: %s\n", a.threads,
              rt.status().ToString().c_str());
      return 1;
    }
    r->raw_threads = std::move(*rt);
  }
  return 0;
}

// The tiered passes on the same servers: with --code, two replicas first, and with replicas, one
// replica first (the side-by-side figures of their cost: fault p50 and eviction rate); then the
// run itself. 0, or 1 when a pass failed.
int RunPasses(const Args& a, const PassArgs& pass, std::vector<std::unique_ptr<MemdChild>>& memds, Results* r) {
  Status s;
  if (!a.code.empty()) {
    PassArgs copies = pass;
    copies.code.clear();
    copies.replicas = 2;
    s = RunTiered(copies, nullptr, &r->two);
    if (!s.ok()) {
      fprintf(stderr, "tiermem-bench remote-fault: two replicas: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  if (a.replicas > 1) {
    PassArgs one_copy = pass;
    one_copy.replicas = 1;
    s = RunTiered(one_copy, nullptr, &r->one);
    if (!s.ok()) {
      fprintf(stderr, "tiermem-bench remote-fault: one replica: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  s = RunTiered(pass, a.kill_one ? &memds : nullptr, &r->t);
  if (!s.ok()) {
    fprintf(stderr, "tiermem-bench remote-fault: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

// --json's keys with --kill-one, --code and --replicas > 1: the run beside the other passes.
void PrintJsonPasses(const Args& a, bool spare, const Results& r) {
  const Tiered &t = r.t, &one = r.one, &two = r.two;
  const double p50 = t.p50, evict_rate = t.evict_rate;
  if (a.kill_one) {
    if (spare) printf(",\"rereplication_s\":%.3f", t.rereplication_s);
    else printf(",\"rereplication_s\":null");
    printf(",\"failovers\":%llu", static_cast<unsigned long long>(t.failovers));
  }
  if (!a.code.empty()) {
    printf(",\"code\":\"%s\",\"two_replicas_fault_p50_us\":%.2f,\"two_replicas_evict_pages_per_s\":%.0f,"
           "\"two_replicas_server_pages_per_page\":%.3f,\"fault_p50_vs_two_replicas\":%.3f,"
           "\"evict_rate_vs_two_replicas\":%.3f",
           a.code.c_str(), two.p50, two.evict_rate, two.server_pages_per_page,
           two.p50 > 0 ? p50 / two.p50 : 0.0, two.evict_rate > 0 ? evict_rate / two.evict_rate : 0.0);
    if (a.kill_one) printf(",\"rebuilt\":%s", t.rebuilt ? "true" : "false");
  }
  if (a.replicas > 1) {
    printf(",\"one_replica_fault_p50_us\":%.2f,\"one_replica_evict_pages_per_s\":%.0f,"
           "\"fault_p50_vs_one_replica\":%.3f,\"evict_rate_vs_one_replica\":%.3f",
           one.p50, one.evict_rate, one.p50 > 0 ? p50 / one.p50 : 0.0,
           one.evict_rate > 0 ? evict_rate / one.evict_rate : 0.0);
    const double one_cpu = one.evict_client_cpu_us + one.evict_memd_cpu_us;
    printf(",\"one_replica_evict_client_cpu_us_per_page\":%.2f,\"one_replica_evict_memd_cpu_us_per_page\":%.2f,"
           "\"evict_cpu_vs_one_replica\":%.3f",
           one.evict_client_cpu_us, one.evict_memd_cpu_us,
           one_cpu > 0 ? (t.evict_client_cpu_us + t.evict_memd_cpu_us) / one_cpu : 0.0);
  }
}

// --json: one object on one line (the help's footer says what each key means).
void PrintJson(const Args& a, bool spare, const Results& r) {
  const Tiered& t = r.t;
  const RawTransport& raw = r.raw;
  const double p50 = t.p50, p99 = t.p99;
  printf("{\"pages\":%zu,\"pattern\":\"%s\",\"prefetch\":\"%s\",\"verified_pages\":%zu,\"fault_p50_us\":%.2f,"
         "\"fault_p99_us\":%.2f,\"raw_roundtrip_p50_us\":%.2f,\"evict_pages_per_s\":%.0f,"
         "\"raw_write_pages_per_s\":%.0f,\"access_gbps\":%.4f,\"raw_stream_gbps\":%.4f,\"faults\":%llu,"
         "\"prefetched\":%llu,\"faults_per_page\":%.4f,\"servers\":%zu,\"replicas\":%zu,\"threads\":%zu,\"servers_lost\":%llu",
         a.pages, a.pattern.c_str(), a.prefetch.c_str(), t.verified, p50, p99, raw.roundtrip_p50_us, t.evict_rate,
         raw.write_pages_per_s, t.access_gbps, raw.stream_gbps, static_cast<unsigned long long>(t.faults),
         static_cast<unsigned long long>(t.prefetched), double(t.faults) / double(a.pages), a.nservers, a.replicas,
         a.threads, static_cast<unsigned long long>(t.servers_lost));
  printf(",\"fault_mean_us\":%.2f,\"handler_fault_mean_us\":%.2f,\"handler_read_mean_us\":%.2f,"
         "\"raw_roundtrip_mean_us\":%.2f,\"zero_fault_p50_us\":%.2f",
         t.touch_mean_us, t.handler_mean_us, t.read_mean_us, raw.roundtrip_mean_us, t.zero_fault_p50_us);
  auto ratio = [](double x, double y) { return y > 0 ? x / y : 0.0; };
  printf(",\"raw_roundtrip_p99_us\":%.2f,\"floor_fault_p50_us\":%.2f,\"floor_fault_p99_us\":%.2f,"
         "\"zero_fault_vs_floor\":%.3f,\"fault_p50_vs_raw_roundtrip\":%.3f,\"fault_p99_vs_raw_roundtrip\":%.3f",
         raw.roundtrip_p99_us, t.floor.p50_us, t.floor.p99_us, ratio(t.zero_fault_p50_us, t.floor.p50_us),
         ratio(p50, raw.roundtrip_p50_us), ratio(p99, raw.roundtrip_p99_us));
  // What each fault path would cost at its floor: the round trip plus the floor's hand-offs.
  const double rt50 = raw.roundtrip_p50_us;
  printf(",\"projected_handler_path_vs_raw_roundtrip\":%.3f,\"handler_waits_per_fault\":%.3f",
         ratio(rt50 + t.floor.p50_us, rt50), t.handler_waits_per_fault);
  if (t.floor.signal_p50_us < 0) {
    printf(",\"signal_floor_fault_p50_us\":null,\"projected_signal_path_vs_raw_roundtrip\":null");
  } else {
    printf(",\"signal_floor_fault_p50_us\":%.2f,\"projected_signal_path_vs_raw_roundtrip\":%.3f",
           t.floor.signal_p50_us, ratio(rt50 + t.floor.signal_p50_us, rt50));
  }
  if (r.raw_threads.empty()) {
    printf(",\"raw_roundtrip_threads_p50_us\":null,\"fault_p50_vs_raw_roundtrip_threads\":null");
  } else {
    const double rp50 = Percentile(r.raw_threads, 0.5);
    printf(",\"raw_roundtrip_threads_p50_us\":%.2f,\"raw_roundtrip_threads_p99_us\":%.2f,"
           "\"fault_p50_vs_raw_roundtrip_threads\":%.3f", rp50, Percentile(r.raw_threads, 0.99), ratio(p50, rp50));
  }
  printf(",\"server_pages_per_page\":%.3f,\"evict_client_cpu_us_per_page\":%.2f,\"evict_memd_cpu_us_per_page\":%.2f",
         t.server_pages_per_page, t.evict_client_cpu_us, t.evict_memd_cpu_us);
  PrintJsonPasses(a, spare, r);
  printf("}\n");
}

// Without --json: the figures as lines of text, each beside what it compares with.
void PrintText(const Args& a, const std::string& url, bool spare, const Results& r) {
  const Tiered &t = r.t, &one = r.one, &two = r.two;
  const RawTransport& raw = r.raw;
  const double p50 = t.p50, p99 = t.p99, evict_rate = t.evict_rate;
  printf("remote-fault over %s (%zu pages, %zu replica%s)\n", url.c_str(), a.pages, a.replicas,
         a.replicas == 1 ? "" : "s");
  printf("  fault           p50 %8.2f us   p99 %8.2f us   (%.2fx the raw round trip)\n", p50, p99,
         raw.roundtrip_p50_us > 0 ? p50 / raw.roundtrip_p50_us : 0.0);
  printf("  raw round trip  p50 %8.2f us, mean %.2f us\n", raw.roundtrip_p50_us, raw.roundtrip_mean_us);
  printf("  fault, mean     %8.2f us: handler %.2f us (of which the read %.2f us), the rest outside it;"
         " a zero-page fault p50 %.2f us\n",
         t.touch_mean_us, t.handler_mean_us, t.read_mean_us, t.zero_fault_p50_us);
  printf("  fault floor     p50 %8.2f us   p99 %8.2f us   (bare handler + UFFDIO_COPY; zero fault %.2fx it)\n",
         t.floor.p50_us, t.floor.p99_us, t.floor.p50_us > 0 ? t.zero_fault_p50_us / t.floor.p50_us : 0.0);
  if (t.floor.signal_p50_us >= 0) {
    printf("  signal floor    p50 %8.2f us   (the faulting thread installs its own page on SIGBUS)\n",
           t.floor.signal_p50_us);
  }
  printf("  eviction        %10.0f pages/s   (%.0f%% of the raw write stream, %.0f pages/s)\n", evict_rate,
         100.0 * evict_rate / raw.write_pages_per_s, raw.write_pages_per_s);
  printf("  eviction CPU    %.2f us per page here, %.2f us in the memds started here\n", t.evict_client_cpu_us,
         t.evict_memd_cpu_us);
  printf("  touches (%s)    %.3f GB/s, %llu faults, %llu pages prefetched (raw read stream %.3f GB/s)\n",
         a.pattern.c_str(), t.access_gbps, static_cast<unsigned long long>(t.faults),
         static_cast<unsigned long long>(t.prefetched), raw.stream_gbps);
  if (!a.code.empty()) {
    printf("  coded %s        %.2f pages of server memory per page; 2 replicas: fault p50 %8.2f us, eviction %10.0f "
           "pages/s, %.2f pages per page (same servers, same run)\n",
           a.code.c_str(), t.server_pages_per_page, two.p50, two.evict_rate, two.server_pages_per_page);
  }
  if (a.replicas > 1) {
    printf("  one replica     fault p50 %8.2f us, eviction %10.0f pages/s, eviction CPU %.2f + %.2f us per page "
           "(same servers, same run)\n", one.p50, one.evict_rate, one.evict_client_cpu_us, one.evict_memd_cpu_us);
  }
  if (a.kill_one) {
    if (spare) {
      printf("  server killed   after the eviction: %llu failovers, copies restored in %.3f s\n",
             static_cast<unsigned long long>(t.failovers), t.rereplication_s);
    } else {
      printf("  server killed   after the eviction: %llu failovers, no spare server to rebuild on\n",
             static_cast<unsigned long long>(t.failovers));
    }
  }
  printf("  verified        %zu of %zu pages\n", t.verified, a.pages);
}

int RunRemoteFault(Args args, const std::string&) {
  if (args.pages == 0) args.pages = 1;
  if (args.token.empty()) {
    if (Status s = OptionFromEnv("TIERMEM_TOKEN", &args.token); !s.ok()) {
      fprintf(stderr, "tiermem-bench remote-fault: %s\n", s.message().c_str());
      return 2;
    }
  }
  std::vector<std::string> listed;
  if (int rc = ParseServerList(args, &listed); rc != 0) return rc;
  size_t code_k = 0, code_m = 0;
  if (int rc = CheckCounts(args, &code_k, &code_m); rc != 0) return rc;
  std::vector<std::unique_ptr<MemdChild>> memds;
  std::string url, first_url;
  if (int rc = Servers(args, listed, &memds, &url, &first_url); rc != 0) return rc;
  Results r;
  if (int rc = MeasureBare(args, first_url, &r); rc != 0) return rc;
  PassArgs pass{url, args.token, args.prefetch, args.pattern, args.pages, args.replicas, args.threads, args.code,
                args.code.empty() || args.nservers > code_k + code_m, {}};
  for (const auto& m : memds) pass.memd_pids.push_back(m->pid());
  if (int rc = RunPasses(args, pass, memds, &r); rc != 0) return rc;
  if (args.json) {
    PrintJson(args, pass.spare, r);
  } else {
    PrintText(args, url, pass.spare, r);
  }
  return r.t.verified == args.pages ? 0 : 1;
}

}  // namespace

Subcommand AddRemoteFault(CLI::App& bench) {
  auto a = std::make_shared<Args>();
  CLI::App& app = *AddSubcommand(
      bench, "remote-fault",
      "evict pages to a memd, fault them back in random order, compare with the bare transport",
      "Evicts N pages with known contents to a memory server, touches them in random order "
      "(one fault each), checks every page, and compares with the bare transport.");
  app.add_option("--transport", a->transport, "tcp or rdma")->check(CLI::IsMember({"tcp", "rdma"}))->capture_default_str();
  AddCount(app, "--pages", a->pages, ParseUint, "0", "", "pages to evict and fault back (0 counts as 1)");
  app.add_option("--server", a->server,
                 "use these memds (host:port, comma-separated; with --replicas up to their number) instead of "
                 "starting any (default: start --servers)");
  app.add_option("--host", a->host, "address the started memd listens on (rdma needs one with a verbs device)")
      ->capture_default_str();
  app.add_option("--token", a->token, "token for the memd (default: TIERMEM_TOKEN)");
  app.add_option("--memd", a->memd_path, "tiermem-memd binary (default: the one built next to this program)");
  app.add_option("--pattern", a->pattern, "order of the touches: random, seq or stride (every 4th page)")
      ->check(CLI::IsMember({"random", "seq", "stride"}))->capture_default_str();
  app.add_option("--prefetch", a->prefetch, "TIERMEM_PREFETCH for the tiered run: auto, off or N (1-128)")
      ->check([](const std::string& v) -> std::string {
        if (v == "auto" || v == "off") return "";
        if (v.empty() || v.size() > 3 || v.find_first_not_of("0123456789") != std::string::npos ||
            std::stoul(v) == 0 || std::stoul(v) > 128) {
          return "auto, off or a number of pages from 1 to 128";
        }
        return "";
      })
      ->capture_default_str();
  AddCount(app, "--threads", a->threads, ParseUint, "1", "64", "threads touching the pages (each a share of the order)");
  a->servers_opt = AddCount(app, "--servers", a->nservers, ParseUint, "1", "16", "memds to start (on --host, ports chosen by the kernel)");
  AddCount(app, "--replicas", a->replicas, ParseUint, "1", "4",
           "TIERMEM_REPLICAS for the tiered run (with more than 1, a pass with one replica runs first on the same servers)");
  app.add_option("--code", a->code,
                 "TIERMEM_REMOTE_CODE (k+m, e.g. 4+2) for the tiered run instead of replicas; a pass with 2 replicas "
                 "runs first on the same servers");
  AddSwitch(app, "--kill-one", a->kill_one,
            "kill (SIGKILL) the memd with the most copies right after the eviction, and time the repair (with "
            "--code, only when --servers exceeds k+m: otherwise no server is left to rebuild on)");
  AddSwitch(app, "--json", a->json, "print one JSON object");
  app.footer(
      "JSON keys (--json): pages, pattern, prefetch, verified_pages, fault_p50_us, fault_p99_us (per\n"
      "  touch, faulting or not), raw_roundtrip_p50_us, evict_pages_per_s, raw_write_pages_per_s,\n"
      "  access_gbps (the touch loop's bytes over its time), raw_stream_gbps (the bare transport's\n"
      "  read stream with the prefetch window in flight), faults, prefetched, faults_per_page, servers,\n"
      "  replicas, threads, servers_lost; fault_mean_us (the touches' mean), handler_fault_mean_us (the\n"
      "  fault handler's mean, userfaultfd report to page installed), handler_read_mean_us (of that, the\n"
      "  read: posted to its reply in; raw_roundtrip_mean_us is the bare read's mean beside it),\n"
      "  zero_fault_p50_us (a first touch of fresh remote-tier memory:\n"
      "  the userfaultfd round trip with no server); raw_roundtrip_p99_us; floor_fault_p50_us and\n"
      "  floor_fault_p99_us (the kernel's floor in the same run: a bare handler thread blocked in poll,\n"
      "  UFFDIO_COPY); zero_fault_vs_floor, fault_p50_vs_raw_roundtrip, fault_p99_vs_raw_roundtrip;\n"
      "  signal_floor_fault_p50_us (no handler thread: the faulting thread installs its page on\n"
      "  SIGBUS, UFFD_FEATURE_SIGBUS; null where the kernel lacks it); projected_handler_path_vs_raw_roundtrip\n"
      "  and projected_signal_path_vs_raw_roundtrip ((raw p50 + that floor's p50) / raw p50: each\n"
      "  design's fault at its floor); handler_waits_per_fault (the fault handler's sleeps in poll,\n"
      "  for a fault or a reply, per remote fault: each a wake-up; TIERMEM_FAULT_SPIN_US takes them away);\n"
      "  with --threads > 1 raw_roundtrip_threads_p50_us and _p99_us (the bare round trip from as many\n"
      "  threads, each its own connection, at once) and fault_p50_vs_raw_roundtrip_threads (null with\n"
      "  one thread); with --kill-one rereplication_s (kill to every page with its replicas\n"
      "  again) and failovers; with --replicas > 1 one_replica_fault_p50_us,\n"
      "  one_replica_evict_pages_per_s, fault_p50_vs_one_replica, evict_rate_vs_one_replica,\n"
      "  one_replica_evict_client_cpu_us_per_page, one_replica_evict_memd_cpu_us_per_page,\n"
      "  evict_cpu_vs_one_replica (CPU per page evicted, this process and its memds, 2 vs 1);\n"
      "  server_pages_per_page (server memory held per page); evict_client_cpu_us_per_page and\n"
      "  evict_memd_cpu_us_per_page (CPU time per page during the eviction: this process, and the\n"
      "  memds it started; 0 with --server); with --code code, rebuilt (false: no\n"
      "  spare server), two_replicas_fault_p50_us, two_replicas_evict_pages_per_s,\n"
      "  two_replicas_server_pages_per_page, fault_p50_vs_two_replicas, evict_rate_vs_two_replicas\n"
      "Environment: TIERMEM_TOKEN (the token when --token is not given); TIERMEM_BENCH_MEMD_LOG=1\n"
      "  shows the started memd's log on stderr.");
  return {&app, [a](const std::string& command) { return RunRemoteFault(*a, command); }};
}

}  // namespace tiermem::bench

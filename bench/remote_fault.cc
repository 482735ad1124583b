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
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <csignal>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/child.h"
#include "bench/cli.h"
#include "bench/compare_util.h"
#include "bench/memd_child.h"
#include "bench/raw_stream.h"
#include "bench/subcommands.h"
#include "tiermem/remote.hpp"
#include "tiermem/tiermem.hpp"

namespace tiermem::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kPage = 4096;

double Us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// The page's words, written and read with memcpy: the buffers are bytes, and storing through a
// uint64_t* into them broke GCC 12's -O2 code for the fill loop (it dropped the loop's exit).
void Fill(uint8_t* p, uint64_t page) {
  for (size_t i = 0; i < kPage / 8; ++i) {
    const uint64_t w = page * 0x9E3779B97F4A7C15ull + i;
    memcpy(p + i * 8, &w, 8);
  }
}
bool Check(const uint8_t* p, uint64_t page) {
  for (size_t i = 0; i < kPage / 8; ++i) {
    uint64_t w;
    memcpy(&w, p + i * 8, 8);
    if (w != page * 0x9E3779B97F4A7C15ull + i) return false;
  }
  return true;
}


struct Raw {
  double roundtrip_p50_us = 0, roundtrip_p99_us = 0;
  double roundtrip_mean_us = 0;  // to set beside the fault handler's mean read
  double write_pages_per_s = 0;
  double stream_gbps = 0;  // reads, `window` in flight
};
constexpr size_t kStride = 4;  // --pattern stride: pages between touches

// Kept out of RemoteFault: inlined there, GCC 12 -O2 compiled the fill loop below without its exit
// test (the fill ran past the buffer; seen with objdump; -O1 or -fno-aggressive-loop-optimizations
// also avoid it). The cause is not understood yet.
[[gnu::noinline]] Status MeasureRaw(const std::string& url, const std::string& token, size_t pages,
                                    size_t window, Raw* out) {
  TIERMEM_ASSIGN_OR_RETURN(std::unique_ptr<RemoteClient> c, RemoteClient::Connect(url, token, 5000));
  const size_t n = std::max<size_t>(1024, std::min<size_t>(pages, 65536));
  TIERMEM_ASSIGN_OR_RETURN(RemotePages r, c->Allocate(n));
  std::vector<uint8_t> buf(n * kPage);
  for (size_t i = 0; i < n; ++i) Fill(&buf[i * kPage], i);
  // Write stream.
  TIERMEM_ASSIGN_OR_RETURN(out->write_pages_per_s, TimedWritePagesPerSecond(*c, r, buf.data(), n));
  // Read round trips, one at a time.
  std::vector<double> lat;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 3000; ++i) {
    uint64_t slot = r.first + rng() % n;
    auto s = Clock::now();
    TIERMEM_RETURN_IF_ERROR(c->Read(r, slot, buf.data(), 1, 1));
    if (i >= 200) lat.push_back(Us(Clock::now() - s));
  }
  out->roundtrip_p50_us = Percentile(lat, 0.5);
  out->roundtrip_p99_us = Percentile(lat, 0.99);
  out->roundtrip_mean_us = std::accumulate(lat.begin(), lat.end(), 0.0) / double(lat.size());
  // Read stream.
  const auto t0 = Clock::now();
  TIERMEM_RETURN_IF_ERROR(c->Read(r, r.first, buf.data(), n, std::max<size_t>(1, window)));
  out->stream_gbps = double(n * kPage) / std::chrono::duration<double>(Clock::now() - t0).count() / 1e9;
  return Status::Ok();
}

struct Tiered {
  double p50 = 0, p99 = 0, evict_rate = 0, access_gbps = 0;
  uint64_t faults = 0, prefetched = 0, servers_lost = 0, failovers = 0;
  size_t verified = 0;
  double rereplication_s = 0;  // kill to no page short of a replica (with `kill`)
  bool rebuilt = false;        // with `kill`: every page had its copies (pieces) back
  double server_pages_per_page = 0;  // server memory held per page evicted (slots / pages)
  // CPU time per page evicted, during the eviction: this process (every thread) and the
  // memds this bench started (0 with --server). On a machine where client and memds share
  // the cores, the eviction rate follows their sum.
  double evict_client_cpu_us = 0, evict_memd_cpu_us = 0;
  // Where a fault's time goes (docs/protocol.md): the touches' mean as the program sees it, the
  // handler's mean from the userfaultfd report to the page installed, and of that the read
  // (posted to its reply in); and a zero-page fault's p50 (the userfaultfd round trip with no
  // server: a first touch of memory placed on the remote tier).
  double touch_mean_us = 0, handler_mean_us = 0, read_mean_us = 0, zero_fault_p50_us = 0;
  // The floor beside it (MeasureFaultFloor: a bare handler thread and UFFDIO_COPY), measured
  // right after the zero faults, with this pass's runtime still up.
  double floor_p50_us = 0, floor_p99_us = 0;
  double signal_floor_p50_us = -1;     // MeasureSignalFaultFloor's p50; -1: the kernel lacks it
  double handler_waits_per_fault = 0;  // the handler's sleeps in poll per remote fault
};

// Times first touches of fresh remote-tier pages: each a zero-page fault served by the handler
// alone (top page first, so that no touch finds its page zero-filled with a neighbour's).
StatusOr<double> ZeroFaultP50(Runtime& rt, size_t pages) {
  TIERMEM_ASSIGN_OR_RETURN(void* mem, rt.Allocate(pages * kPage, Tier::kRemote));
  auto* base = static_cast<uint8_t*>(mem);
  std::vector<double> lat;
  lat.reserve(pages);
  for (size_t i = pages; i-- > 0;) {
    volatile uint8_t* p = base + i * kPage;
    auto f0 = Clock::now();
    (void)*p;
    lat.push_back(Us(Clock::now() - f0));
  }
  (void)rt.Free(base);
  return Percentile(lat, 0.5);
}

// One tiered pass: a runtime on `url` with `replicas`, pages evicted, touched in `pattern`'s
// order, checked. With `kill`, the memd holding the most of this run's copies is killed (SIGKILL)
// right after the eviction, and a watcher thread times the repair (at most 60 s) while the touches
// fault from the survivors.
struct PassArgs {
  std::string url, token, prefetch, pattern;
  size_t pages = 0, replicas = 1, threads = 1;
  std::string code;   // TIERMEM_REMOTE_CODE ("4+2"), or "" for replicas
  bool spare = true;  // with `kill`: a server is left to restore the copies on (else no wait)
  std::vector<pid_t> memd_pids;  // the memds started here (their CPU time is counted)
};

double CpuSeconds(const std::vector<pid_t>& pids) {
  double sum = 0;
  for (pid_t p : pids) sum += ProcCpuSeconds(p).value_or(0);
  return sum;
}

Status RunTiered(const PassArgs& a, std::vector<std::unique_ptr<MemdChild>>* kill, Tiered* out) {
  const std::string &url = a.url, &token = a.token, &prefetch = a.prefetch, &pattern = a.pattern;
  const size_t pages = a.pages, replicas = a.replicas;
  Options o;
  o.Set("remote", url);
  o.Set("token", token);
  o.Set("prefetch", prefetch);
  o.Set("replicas", static_cast<uint64_t>(replicas));
  o.Set("remote_code", a.code);
  TIERMEM_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt, Runtime::Start(o));
  if (!rt->HasTier(Tier::kRemote)) return Unavailable(rt->Stats()[2].absent_reason);
  TIERMEM_ASSIGN_OR_RETURN(void* mem, rt->Allocate(pages * kPage, Tier::kDram));
  auto* base = static_cast<uint8_t*>(mem);
  for (size_t i = 0; i < pages; ++i) Fill(base + i * kPage, i);
  const double client_cpu0 = ProcCpuSeconds(getpid()).value_or(0), memd_cpu0 = CpuSeconds(a.memd_pids);
  auto t0 = Clock::now();
  TIERMEM_ASSIGN_OR_RETURN(MigrateResult m, rt->Migrate(base, pages * kPage, Tier::kRemote));
  const double evict_s = std::chrono::duration<double>(Clock::now() - t0).count();
  out->evict_client_cpu_us = (ProcCpuSeconds(getpid()).value_or(0) - client_cpu0) * 1e6 / double(pages);
  out->evict_memd_cpu_us = (CpuSeconds(a.memd_pids) - memd_cpu0) * 1e6 / double(pages);
  if (m.pages_moved != pages) return Internal("eviction: not every page moved");
  {
    const RuntimeCounters c = rt->Counters();
    uint64_t slots = 0;
    for (const auto& srv : c.servers) slots += srv.slots;
    out->server_pages_per_page = double(slots) / double(pages);
  }
  Clock::time_point killed;
  std::thread watcher;
  double repaired_at = 0;
  bool restored = false;
  if (kill != nullptr) {
    const RuntimeCounters c = rt->Counters();
    size_t victim = 0;
    for (size_t k = 1; k < c.servers.size() && k < kill->size(); ++k) {
      if (c.servers[k].pages > c.servers[victim].pages) victim = k;
    }
    (*kill)[victim]->Stop(SIGKILL);
    killed = Clock::now();
  }
  if (kill != nullptr && a.spare) {
    // The repair runs while the touches below fault: a watcher times it on its own, from the
    // kill until no page is short of a replica (at most 60 s).
    watcher = std::thread([&rt, killed, &repaired_at, &restored] {
      for (int i = 0; i < 6000; ++i) {
        const RuntimeCounters now = rt->Counters();
        if (now.remote_servers_down > 0 && now.remote_degraded_pages == 0) {
          repaired_at = std::chrono::duration<double>(Clock::now() - killed).count();
          restored = true;
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    });
  }
  std::vector<size_t> order;
  order.reserve(pages);
  if (pattern == "stride") {
    for (size_t pass = 0; pass < kStride; ++pass) {
      for (size_t i = pass; i < pages; i += kStride) order.push_back(i);
    }
  } else {
    for (size_t i = 0; i < pages; ++i) order.push_back(i);
    if (pattern == "random") std::shuffle(order.begin(), order.end(), std::mt19937_64(42));
  }
  // The touches, split in `threads` interleaved shares of the order (thread t takes every
  // threads-th touch from t), each thread timing its own.
  std::vector<std::vector<double>> lats(a.threads);
  auto touch = [&](size_t t) {
    lats[t].reserve(pages / a.threads + 1);
    for (size_t k = t; k < order.size(); k += a.threads) {
      const size_t i = order[k];
      volatile uint8_t* p = base + i * kPage + (i % 64) * 8;
      auto f0 = Clock::now();
      (void)*p;  // the fault, unless the page was fetched ahead
      lats[t].push_back(Us(Clock::now() - f0));
    }
  };
  const RuntimeCounters before = rt->Counters();
  const auto loop0 = Clock::now();
  if (a.threads == 1) {
    touch(0);
  } else {
    std::vector<std::thread> th;
    for (size_t t = 0; t < a.threads; ++t) th.emplace_back(touch, t);
    for (auto& x : th) x.join();
  }
  std::vector<double> lat;
  lat.reserve(pages);
  for (const auto& l : lats) lat.insert(lat.end(), l.begin(), l.end());
  const double loop_s = std::chrono::duration<double>(Clock::now() - loop0).count();
  RuntimeCounters after = rt->Counters();
  out->faults = after.remote_faults - before.remote_faults;
  out->prefetched = after.pages_prefetched - before.pages_prefetched;
  out->access_gbps = double(pages * kPage) / loop_s / 1e9;
  out->verified = 0;
  for (size_t i = 0; i < pages; ++i) out->verified += Check(base + i * kPage, i) ? 1 : 0;
  out->p50 = Percentile(lat, 0.5);
  out->p99 = Percentile(lat, 0.99);
  out->touch_mean_us = lat.empty() ? 0.0 : std::accumulate(lat.begin(), lat.end(), 0.0) / double(lat.size());
  if (out->faults > 0) {
    out->handler_mean_us = double(after.remote_fault_ns - before.remote_fault_ns) / 1e3 / double(out->faults);
    out->read_mean_us = double(after.remote_fault_read_ns - before.remote_fault_read_ns) / 1e3 / double(out->faults);
    out->handler_waits_per_fault = double(after.fault_handler_waits - before.fault_handler_waits) / double(out->faults);
  }
  TIERMEM_ASSIGN_OR_RETURN(out->zero_fault_p50_us, ZeroFaultP50(*rt, std::min<size_t>(pages, 1000)));
  {
    TIERMEM_ASSIGN_OR_RETURN(std::vector<uint64_t> floor_ns, MeasureFaultFloor(std::clamp<size_t>(pages, 1000, 20000)));
    std::vector<double> floor_us(floor_ns.begin(), floor_ns.end());
    for (double& v : floor_us) v /= 1e3;
    out->floor_p50_us = Percentile(floor_us, 0.5);
    out->floor_p99_us = Percentile(floor_us, 0.99);
    auto signal_ns = MeasureSignalFaultFloor(std::clamp<size_t>(pages, 1000, 20000));
    if (signal_ns.ok()) {
      std::vector<double> signal_us(signal_ns->begin(), signal_ns->end());
      for (double& v : signal_us) v /= 1e3;
      out->signal_floor_p50_us = Percentile(signal_us, 0.5);
    } else if (signal_ns.status().code() != StatusCode::kNotSupported) {
      return signal_ns.status();
    }
  }
  out->evict_rate = double(pages) / evict_s;
  if (watcher.joinable()) {
    // The pages are local now, but their slots (and copies) stay until freed: the repair
    // restores them all the same.
    watcher.join();
    out->rereplication_s = repaired_at;
    out->rebuilt = restored;
    if (!restored) return DeadlineExceeded("replicas not restored within 60 s");
    after = rt->Counters();
  }
  out->servers_lost = after.remote_servers_down;
  out->failovers = after.remote_failovers;
  (void)rt->Free(base);
  return Status::Ok();
}

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

int RunRemoteFault(Args args, const std::string&) {
  auto& [transport, server, token, memd_path, host, pattern, prefetch, pages, json, nservers, replicas, threads,
         kill_one, code, servers_opt] = args;
  if (pages == 0) pages = 1;
  if (token.empty()) {
    if (Status s = OptionFromEnv("TIERMEM_TOKEN", &token); !s.ok()) {
      fprintf(stderr, "tiermem-bench remote-fault: %s\n", s.message().c_str());
      return 2;
    }
  }
  // --server's list: the servers of every pass (the first one's transport is measured bare).
  std::vector<std::string> listed;
  if (!server.empty()) {
    if (servers_opt->count() > 0) {
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
      listed.push_back((one.find("://") == std::string::npos ? transport + "://" : "") + one);
      at = comma + 1;
    }
    nservers = listed.size();
  }

  // k+m: the form only (the runtime refuses unsupported numbers, naming them).
  size_t code_k = 0, code_m = 0;
  if (!code.empty()) {
    const size_t plus = code.find('+');
    const bool form = plus != std::string::npos && plus > 0 && plus + 1 < code.size() && plus <= 2 &&
                      code.size() - plus - 1 <= 2 && code.find_first_not_of("0123456789+") == std::string::npos &&
                      code.find('+', plus + 1) == std::string::npos;
    if (form) {
      code_k = std::stoul(code.substr(0, plus));
      code_m = std::stoul(code.substr(plus + 1));
    }
    const char* why = !form ? "expected k+m such as 4+2"
                      : replicas != 1 ? "--code and --replicas exclude each other"
                      : code_k + code_m > nservers ? "needs --servers of at least k+m"
                                                   : nullptr;
    if (why != nullptr) {
      fprintf(stderr, "tiermem-bench remote-fault: --code %s: %s\n", code.c_str(), why);
      return 2;
    }
  }
  if (replicas < 1 || replicas > nservers || (kill_one && replicas < 2 && code.empty()) ||
      (!server.empty() && kill_one)) {
    fprintf(stderr, "tiermem-bench remote-fault: --replicas must be 1 to --servers (%zu)%s%s\n", nservers,
            kill_one ? "; --kill-one needs --replicas 2 or more" : "",
            server.empty() ? "" : "; --kill-one starts its own memds (no --server)");
    return 2;
  }
  std::vector<std::unique_ptr<MemdChild>> memds;
  std::string url, first_url;
  if (!server.empty()) {
    for (size_t k = 0; k < listed.size(); ++k) url += (k == 0 ? "" : ",") + listed[k];
    first_url = listed[0];
  } else {
    if (memd_path.empty()) memd_path = MemdBinary();
    // Room for the raw pass, the one-replica pass and the pass itself on each server.
    uint64_t capacity = (uint64_t(pages) * 2 + 65536 + 16384 * 2) * kPage * 2;
    for (size_t k = 0; k < nservers; ++k) {
      MemdChildOptions mo;
      mo.binary = memd_path;
      mo.host = host;
      mo.args = {"--capacity", std::to_string(capacity >> 20) + "M"};
      if (!token.empty()) mo.token = token;
      mo.allow_no_token = false;  // beyond loopback, a memd started here needs a token
      auto& m = memds.emplace_back(std::make_unique<MemdChild>());
      if (!m->Start(mo)) {
        fprintf(stderr, "tiermem-bench remote-fault: could not start %s on %s\n", memd_path.c_str(), host.c_str());
        return 1;
      }
      url += (k == 0 ? "" : ",") + m->Url(transport);
    }
    first_url = memds[0]->Url(transport);
  }

  // The raw stream keeps as many reads in flight as the prefetcher's window for the pattern
  // (auto: 32 pages; a strided stream's is twice the window, at most 128: Prefetcher::WindowFor,
  // runtime/paging/prefetch.h); with --prefetch off, auto's, so that runs with and without
  // compare against the same stream.
  const size_t option = prefetch == "auto" || prefetch == "off" ? 32 : std::min<size_t>(std::stoul(prefetch), 128);
  const size_t window = pattern == "stride" ? std::max<size_t>(option, std::min<size_t>(2 * option, 128)) : option;
  Raw raw;
  Status s = MeasureRaw(first_url, token, pages, window, &raw);
  if (!s.ok()) {
    fprintf(stderr, "tiermem-bench remote-fault: raw transport on %s: %s\n", first_url.c_str(), s.ToString().c_str());
    return 1;
  }

  // With several faulting threads, the bare round trip from as many threads at once beside it.
  std::vector<double> raw_threads;
  if (threads > 1) {
    auto rt = ConcurrentRoundTripsUs(first_url, token, threads, std::max<size_t>(200, 6000 / threads));
    if (!rt.ok()) {
      fprintf(stderr, "tiermem-bench remote-fault: %zu threads' round trips: %s\n", threads, rt.status().ToString().c_str());
      return 1;
    }
    raw_threads = std::move(*rt);
  }
  // With replicas, the same run on the same servers with one replica first: the side-by-side
  // figures (fault p50 and eviction rate) of replication's cost.
  PassArgs pass{url, token, prefetch, pattern, pages, replicas, threads, code,
                code.empty() || nservers > code_k + code_m, {}};
  for (const auto& m : memds) pass.memd_pids.push_back(m->pid());
  Tiered one, two;
  if (!code.empty()) {
    PassArgs copies = pass;
    copies.code.clear();
    copies.replicas = 2;
    s = RunTiered(copies, nullptr, &two);
    if (!s.ok()) {
      fprintf(stderr, "tiermem-bench remote-fault: two replicas: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  if (replicas > 1) {
    PassArgs one_copy = pass;
    one_copy.replicas = 1;
    s = RunTiered(one_copy, nullptr, &one);
    if (!s.ok()) {
      fprintf(stderr, "tiermem-bench remote-fault: one replica: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  Tiered t;
  s = RunTiered(pass, kill_one ? &memds : nullptr, &t);
  if (!s.ok()) {
    fprintf(stderr, "tiermem-bench remote-fault: %s\n", s.ToString().c_str());
    return 1;
  }
  const double p50 = t.p50, p99 = t.p99;
  const double evict_rate = t.evict_rate;
  const double access_gbps = t.access_gbps;
  const uint64_t faults = t.faults, prefetched = t.prefetched;
  const size_t verified = t.verified;
  if (json) {
    printf("{\"pages\":%zu,\"pattern\":\"%s\",\"prefetch\":\"%s\",\"verified_pages\":%zu,\"fault_p50_us\":%.2f,"
           "\"fault_p99_us\":%.2f,\"raw_roundtrip_p50_us\":%.2f,\"evict_pages_per_s\":%.0f,"
           "\"raw_write_pages_per_s\":%.0f,\"access_gbps\":%.4f,\"raw_stream_gbps\":%.4f,\"faults\":%llu,"
           "\"prefetched\":%llu,\"faults_per_page\":%.4f,\"servers\":%zu,\"replicas\":%zu,\"threads\":%zu,\"servers_lost\":%llu",
           pages, pattern.c_str(), prefetch.c_str(), verified, p50, p99, raw.roundtrip_p50_us, evict_rate,
           raw.write_pages_per_s, access_gbps, raw.stream_gbps, static_cast<unsigned long long>(faults),
           static_cast<unsigned long long>(prefetched), double(faults) / double(pages), nservers, replicas, threads,
           static_cast<unsigned long long>(t.servers_lost));
    printf(",\"fault_mean_us\":%.2f,\"handler_fault_mean_us\":%.2f,\"handler_read_mean_us\":%.2f,"
           "\"raw_roundtrip_mean_us\":%.2f,\"zero_fault_p50_us\":%.2f",
           t.touch_mean_us, t.handler_mean_us, t.read_mean_us, raw.roundtrip_mean_us, t.zero_fault_p50_us);
    auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
    printf(",\"raw_roundtrip_p99_us\":%.2f,\"floor_fault_p50_us\":%.2f,\"floor_fault_p99_us\":%.2f,"
           "\"zero_fault_vs_floor\":%.3f,\"fault_p50_vs_raw_roundtrip\":%.3f,\"fault_p99_vs_raw_roundtrip\":%.3f",
           raw.roundtrip_p99_us, t.floor_p50_us, t.floor_p99_us, ratio(t.zero_fault_p50_us, t.floor_p50_us),
           ratio(p50, raw.roundtrip_p50_us), ratio(p99, raw.roundtrip_p99_us));
    // What each fault path would cost at its floor: the round trip plus the floor's hand-offs.
    const double rt50 = raw.roundtrip_p50_us;
    printf(",\"projected_handler_path_vs_raw_roundtrip\":%.3f,\"handler_waits_per_fault\":%.3f",
           ratio(rt50 + t.floor_p50_us, rt50), t.handler_waits_per_fault);
    if (t.signal_floor_p50_us < 0) {
      printf(",\"signal_floor_fault_p50_us\":null,\"projected_signal_path_vs_raw_roundtrip\":null");
    } else {
      printf(",\"signal_floor_fault_p50_us\":%.2f,\"projected_signal_path_vs_raw_roundtrip\":%.3f",
             t.signal_floor_p50_us, ratio(rt50 + t.signal_floor_p50_us, rt50));
    }
    if (raw_threads.empty()) {
      printf(",\"raw_roundtrip_threads_p50_us\":null,\"fault_p50_vs_raw_roundtrip_threads\":null");
    } else {
      const double rp50 = Percentile(raw_threads, 0.5);
      printf(",\"raw_roundtrip_threads_p50_us\":%.2f,\"raw_roundtrip_threads_p99_us\":%.2f,"
             "\"fault_p50_vs_raw_roundtrip_threads\":%.3f", rp50, Percentile(raw_threads, 0.99), ratio(p50, rp50));
    }
    printf(",\"server_pages_per_page\":%.3f,\"evict_client_cpu_us_per_page\":%.2f,\"evict_memd_cpu_us_per_page\":%.2f",
           t.server_pages_per_page, t.evict_client_cpu_us, t.evict_memd_cpu_us);
    if (kill_one) {
      if (pass.spare) printf(",\"rereplication_s\":%.3f", t.rereplication_s);
      else printf(",\"rereplication_s\":null");
      printf(",\"failovers\":%llu", static_cast<unsigned long long>(t.failovers));
    }
    if (!code.empty()) {
      printf(",\"code\":\"%s\",\"two_replicas_fault_p50_us\":%.2f,\"two_replicas_evict_pages_per_s\":%.0f,"
             "\"two_replicas_server_pages_per_page\":%.3f,\"fault_p50_vs_two_replicas\":%.3f,"
             "\"evict_rate_vs_two_replicas\":%.3f",
             code.c_str(), two.p50, two.evict_rate, two.server_pages_per_page,
             two.p50 > 0 ? p50 / two.p50 : 0.0, two.evict_rate > 0 ? evict_rate / two.evict_rate : 0.0);
      if (kill_one) printf(",\"rebuilt\":%s", t.rebuilt ? "true" : "false");
    }
    if (replicas > 1) {
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
    printf("}\n");
  } else {
    printf("remote-fault over %s (%zu pages, %zu replica%s)\n", url.c_str(), pages, replicas, replicas == 1 ? "" : "s");
    printf("  fault           p50 %8.2f us   p99 %8.2f us   (%.2fx the raw round trip)\n", p50, p99,
           raw.roundtrip_p50_us > 0 ? p50 / raw.roundtrip_p50_us : 0.0);
    printf("  raw round trip  p50 %8.2f us, mean %.2f us\n", raw.roundtrip_p50_us, raw.roundtrip_mean_us);
    printf("  fault, mean     %8.2f us: handler %.2f us (of which the read %.2f us), the rest outside it;"
           " a zero-page fault p50 %.2f us\n",
           t.touch_mean_us, t.handler_mean_us, t.read_mean_us, t.zero_fault_p50_us);
    printf("  fault floor     p50 %8.2f us   p99 %8.2f us   (bare handler + UFFDIO_COPY; zero fault %.2fx it)\n",
           t.floor_p50_us, t.floor_p99_us, t.floor_p50_us > 0 ? t.zero_fault_p50_us / t.floor_p50_us : 0.0);
    if (t.signal_floor_p50_us >= 0) {
      printf("  signal floor    p50 %8.2f us   (the faulting thread installs its own page on SIGBUS)\n",
             t.signal_floor_p50_us);
    }
    printf("  eviction        %10.0f pages/s   (%.0f%% of the raw write stream, %.0f pages/s)\n", evict_rate,
           100.0 * evict_rate / raw.write_pages_per_s, raw.write_pages_per_s);
    printf("  eviction CPU    %.2f us per page here, %.2f us in the memds started here\n", t.evict_client_cpu_us,
           t.evict_memd_cpu_us);
    printf("  touches (%s)    %.3f GB/s, %llu faults, %llu pages prefetched (raw read stream %.3f GB/s)\n",
           pattern.c_str(), access_gbps, static_cast<unsigned long long>(faults),
           static_cast<unsigned long long>(prefetched), raw.stream_gbps);
    if (!code.empty()) {
      printf("  coded %s        %.2f pages of server memory per page; 2 replicas: fault p50 %8.2f us, eviction %10.0f "
             "pages/s, %.2f pages per page (same servers, same run)\n",
             code.c_str(), t.server_pages_per_page, two.p50, two.evict_rate, two.server_pages_per_page);
    }
    if (replicas > 1) {
      printf("  one replica     fault p50 %8.2f us, eviction %10.0f pages/s, eviction CPU %.2f + %.2f us per page "
             "(same servers, same run)\n", one.p50, one.evict_rate, one.evict_client_cpu_us, one.evict_memd_cpu_us);
    }
    if (kill_one) {
      if (pass.spare) {
        printf("  server killed   after the eviction: %llu failovers, copies restored in %.3f s\n",
               static_cast<unsigned long long>(t.failovers), t.rereplication_s);
      } else {
        printf("  server killed   after the eviction: %llu failovers, no spare server to rebuild on\n",
               static_cast<unsigned long long>(t.failovers));
      }
    }
    printf("  verified        %zu of %zu pages\n", verified, pages);
  }
  return verified == pages ? 0 : 1;
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

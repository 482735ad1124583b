// tiermem-bench remote-fault: the cost of the remote tier's page faults against the bare transport
// it runs on, in one run.
//
// Method: start a memd on loopback (or use --server), then
//   raw:   on a transport connection of its own, a 4 KiB read round trip (one request in flight,
//          after a warm-up) and a stream of 4 KiB writes (a window of requests in flight);
//   tiered: through the API, N pages with known contents are evicted (Migrate to kRemote; the
//          eviction rate is pages / time of that call), then touched once each in random order:
//          each first touch is one fault served by the pager; its time is measured around the
//          touching load. Every page is then checked.
// Prints medians/p99 in microseconds and rates in pages per second.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/cli.h"
#include "bench/compare_util.h"
#include "bench/subcommands.h"
#include "tiermem/remote.hpp"
#include "tiermem/tiermem.hpp"

namespace tiermem::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kPage = 4096;

double Us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

void Fill(uint8_t* p, uint64_t page) {
  auto* w = reinterpret_cast<uint64_t*>(p);
  for (size_t i = 0; i < kPage / 8; ++i) w[i] = page * 0x9E3779B97F4A7C15ull + i;
}
bool Check(const uint8_t* p, uint64_t page) {
  auto* w = reinterpret_cast<const uint64_t*>(p);
  for (size_t i = 0; i < kPage / 8; ++i) {
    if (w[i] != page * 0x9E3779B97F4A7C15ull + i) return false;
  }
  return true;
}


struct Raw {
  double roundtrip_p50_us = 0;
  double write_pages_per_s = 0;
};

Status MeasureRaw(const std::string& url, const std::string& token, size_t pages, Raw* out) {
  TIERMEM_ASSIGN_OR_RETURN(std::unique_ptr<RemoteClient> c, RemoteClient::Connect(url, token, 5000));
  const size_t n = std::max<size_t>(1024, std::min<size_t>(pages, 65536));
  TIERMEM_ASSIGN_OR_RETURN(RemotePages r, c->Allocate(n));
  std::vector<uint8_t> buf(n * kPage);
  for (size_t i = 0; i < n; ++i) Fill(&buf[i * kPage], i);
  // Write stream.
  auto t0 = Clock::now();
  TIERMEM_RETURN_IF_ERROR(c->Write(r, r.first, buf.data(), n, 64));
  out->write_pages_per_s = double(n) / std::chrono::duration<double>(Clock::now() - t0).count();
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
  return Status::Ok();
}

}  // namespace

int RemoteFault(int argc, char** argv) {
  CLI::App app{"Evicts N pages with known contents to a memory server, touches them in random order "
               "(one fault each), checks every page, and compares with the bare transport.",
               "tiermem-bench remote-fault"};
  std::string transport = "tcp", server, token, memd_path, host = "127.0.0.1";
  size_t pages = 65536;
  bool json = false;
  app.add_option("--transport", transport, "tcp or rdma")->check(CLI::IsMember({"tcp", "rdma"}))->capture_default_str();
  AddCount(app, "--pages", pages, ParseUint, "0", "", "pages to evict and fault back (0 counts as 1)");
  app.add_option("--server", server, "use this memd (host:port) instead of starting one (default: start one)");
  app.add_option("--host", host, "address the started memd listens on (rdma needs one with a verbs device)")
      ->capture_default_str();
  app.add_option("--token", token, "token for the memd (default: TIERMEM_TOKEN)");
  app.add_option("--memd", memd_path, "tiermem-memd binary (default: the one built next to this program)");
  AddSwitch(app, "--json", json, "print one JSON object");
  app.footer(
      "JSON keys (--json): pages, verified_pages, fault_p50_us, fault_p99_us, raw_roundtrip_p50_us,\n"
      "  evict_pages_per_s, raw_write_pages_per_s\n"
      "Environment: TIERMEM_TOKEN (the token when --token is not given); TIERMEM_BENCH_MEMD_LOG=1\n"
      "  shows the started memd's log on stderr.");
  if (int rc = ParseArgs(app, argc, argv); rc >= 0) return rc;
  if (pages == 0) pages = 1;
  if (token.empty() && getenv("TIERMEM_TOKEN") != nullptr) token = getenv("TIERMEM_TOKEN");

  MemdChild memd;
  std::string url;
  if (!server.empty()) {
    url = (server.find("://") == std::string::npos ? transport + "://" : "") + server;
  } else {
    if (memd_path.empty()) memd_path = MemdBinary();
    uint64_t capacity = (uint64_t(pages) + 65536 + 16384 * 2) * kPage * 2;
    MemdChildOptions mo;
    mo.binary = memd_path;
    mo.host = host;
    mo.args = {"--capacity", std::to_string(capacity >> 20) + "M"};
    if (!token.empty()) mo.token = token;
    mo.allow_no_token = false;  // beyond loopback, a memd started here needs a token
    if (!memd.Start(mo)) {
      fprintf(stderr, "tiermem-bench remote-fault: could not start %s on %s\n", memd_path.c_str(), host.c_str());
      return 1;
    }
    url = memd.Url(transport);
  }

  Raw raw;
  Status s = MeasureRaw(url, token, pages, &raw);
  if (!s.ok()) {
    fprintf(stderr, "tiermem-bench remote-fault: raw transport on %s: %s\n", url.c_str(), s.ToString().c_str());
    return 1;
  }

  Options o;
  o.Set("remote", url);
  o.Set("token", token);
  auto rt = Runtime::Start(o);
  if (!rt.ok() || !(*rt)->HasTier(Tier::kRemote)) {
    fprintf(stderr, "tiermem-bench remote-fault: %s\n",
            rt.ok() ? (*rt)->Stats()[2].absent_reason.c_str() : rt.status().ToString().c_str());
    return 1;
  }
  auto mem = (*rt)->Allocate(pages * kPage, Tier::kDram);
  if (!mem.ok()) {
    fprintf(stderr, "tiermem-bench remote-fault: %s\n", mem.status().ToString().c_str());
    return 1;
  }
  auto* base = static_cast<uint8_t*>(*mem);
  for (size_t i = 0; i < pages; ++i) Fill(base + i * kPage, i);
  auto t0 = Clock::now();
  auto m = (*rt)->Migrate(base, pages * kPage, Tier::kRemote);
  double evict_s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!m.ok() || m->pages_moved != pages) {
    fprintf(stderr, "tiermem-bench remote-fault: eviction: %s\n", m.ok() ? "not every page moved" : m.status().ToString().c_str());
    return 1;
  }
  std::vector<size_t> order(pages);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(42));
  std::vector<double> lat;
  lat.reserve(pages);
  for (size_t i : order) {
    volatile uint8_t* p = base + i * kPage + (i % 64) * 8;
    auto f0 = Clock::now();
    (void)*p;  // the fault
    lat.push_back(Us(Clock::now() - f0));
  }
  size_t verified = 0;
  for (size_t i = 0; i < pages; ++i) verified += Check(base + i * kPage, i) ? 1 : 0;
  const double p50 = Percentile(lat, 0.5), p99 = Percentile(lat, 0.99);
  const double evict_rate = double(pages) / evict_s;
  if (json) {
    printf("{\"pages\":%zu,\"verified_pages\":%zu,\"fault_p50_us\":%.2f,\"fault_p99_us\":%.2f,"
           "\"raw_roundtrip_p50_us\":%.2f,\"evict_pages_per_s\":%.0f,\"raw_write_pages_per_s\":%.0f}\n",
           pages, verified, p50, p99, raw.roundtrip_p50_us, evict_rate, raw.write_pages_per_s);
  } else {
    printf("remote-fault over %s (%zu pages)\n", url.c_str(), pages);
    printf("  fault           p50 %8.2f us   p99 %8.2f us   (%.2fx the raw round trip)\n", p50, p99,
           raw.roundtrip_p50_us > 0 ? p50 / raw.roundtrip_p50_us : 0.0);
    printf("  raw round trip  p50 %8.2f us\n", raw.roundtrip_p50_us);
    printf("  eviction        %10.0f pages/s   (%.0f%% of the raw write stream, %.0f pages/s)\n", evict_rate,
           100.0 * evict_rate / raw.write_pages_per_s, raw.write_pages_per_s);
    printf("  verified        %zu of %zu pages\n", verified, pages);
  }
  (void)(*rt)->Free(base);
  return verified == pages ? 0 : 1;
}

}  // namespace tiermem::bench

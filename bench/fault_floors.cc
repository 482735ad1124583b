#include "bench/fault_floors.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "bench/compare_util.h"
#include "bench/raw_stream.h"

namespace tiermem::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kPage = 4096;

double Us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// Nanoseconds to microseconds, for Percentile.
std::vector<double> ToUs(const std::vector<uint64_t>& ns) {
  std::vector<double> us(ns.begin(), ns.end());
  for (double& v : us) v /= 1e3;
  return us;
}

}  // namespace

// The page's words, written and read with memcpy: the buffers are bytes, and storing through a
// uint64_t* into them broke GCC 12's -O2 code for the fill loop (it dropped the loop's exit).
void FillPage(uint8_t* p, uint64_t page) {
  for (size_t i = 0; i < kPage / 8; ++i) {
    const uint64_t w = page * 0x9E3779B97F4A7C15ull + i;
    memcpy(p + i * 8, &w, 8);
  }
}
bool CheckPage(const uint8_t* p, uint64_t page) {
  for (size_t i = 0; i < kPage / 8; ++i) {
    uint64_t w;
    memcpy(&w, p + i * 8, 8);
    if (w != page * 0x9E3779B97F4A7C15ull + i) return false;
  }
  return true;
}

// Auto: 32 pages; a strided stream's is twice the window, at most 128 (Prefetcher::WindowFor,
// runtime/paging/prefetch.h); with --prefetch off, auto's, so that runs with and without compare
// against the same stream.
size_t RawStreamWindow(const std::string& prefetch, const std::string& pattern) {
  const size_t option = prefetch == "auto" || prefetch == "off" ? 32 : std::min<size_t>(std::stoul(prefetch), 128);
  return pattern == "stride" ? std::max<size_t>(option, std::min<size_t>(2 * option, 128)) : option;
}

// Kept out of line: inlined into the remote-fault run, GCC 12 -O2 compiled the fill loop below
// without its exit test (the fill ran past the buffer; seen with objdump; -O1 or
// -fno-aggressive-loop-optimizations also avoid it). The cause is not understood yet.
[[gnu::noinline]] Status MeasureRawTransport(const std::string& url, const std::string& token, size_t pages,
                                             size_t window, RawTransport* out) {
  TIERMEM_ASSIGN_OR_RETURN(std::unique_ptr<RemoteClient> c, RemoteClient::Connect(url, token, 5000));
  const size_t n = std::max<size_t>(1024, std::min<size_t>(pages, 65536));
  TIERMEM_ASSIGN_OR_RETURN(RemotePages r, c->Allocate(n));
  std::vector<uint8_t> buf(n * kPage);
  for (size_t i = 0; i < n; ++i) FillPage(&buf[i * kPage], i);
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

Status MeasureFaultFloors(size_t pages, FaultFloors* out) {
  TIERMEM_ASSIGN_OR_RETURN(std::vector<uint64_t> floor_ns, MeasureFaultFloor(std::clamp<size_t>(pages, 1000, 20000)));
  const std::vector<double> floor_us = ToUs(floor_ns);
  out->p50_us = Percentile(floor_us, 0.5);
  out->p99_us = Percentile(floor_us, 0.99);
  auto signal_ns = MeasureSignalFaultFloor(std::clamp<size_t>(pages, 1000, 20000));
  if (signal_ns.ok()) {
    out->signal_p50_us = Percentile(ToUs(*signal_ns), 0.5);
  } else if (signal_ns.status().code() != StatusCode::kNotSupported) {
    return signal_ns.status();
  }
  return Status::Ok();
}

// Top page first, so that no touch finds its page zero-filled with a neighbour's.
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

}  // namespace tiermem::bench

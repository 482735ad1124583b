#include "bench/raw_stream.h"

#include <chrono>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

namespace tiermem::bench {

StatusOr<double> TimedWritePagesPerSecond(RemoteClient& c, const RemotePages& pages, const uint8_t* data, size_t n,
                                          size_t window) {
  const auto t0 = std::chrono::steady_clock::now();
  TIERMEM_RETURN_IF_ERROR(c.Write(pages, pages.first, data, n, window));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(n) / secs;
}

StatusOr<std::vector<double>> ConcurrentRoundTripsUs(const std::string& url, const std::string& token, size_t threads,
                                                     size_t reads) {
  constexpr size_t kPages = 256, kPage = 4096;
  std::vector<double> all;
  std::mutex mu;
  Status first_error = Status::Ok();
  auto one = [&](size_t t) -> Status {
    TIERMEM_ASSIGN_OR_RETURN(std::unique_ptr<RemoteClient> c, RemoteClient::Connect(url, token, 5000));
    TIERMEM_ASSIGN_OR_RETURN(RemotePages r, c->Allocate(kPages));
    std::vector<uint8_t> buf(kPages * kPage, static_cast<uint8_t>(t + 1));
    TIERMEM_RETURN_IF_ERROR(c->Write(r, r.first, buf.data(), kPages, 64));
    std::mt19937_64 rng(t + 1);
    std::vector<double> lat;
    lat.reserve(reads);
    for (size_t i = 0; i < reads; ++i) {
      const auto s = std::chrono::steady_clock::now();
      TIERMEM_RETURN_IF_ERROR(c->Read(r, r.first + rng() % kPages, buf.data(), 1, 1));
      if (i >= reads / 10) lat.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - s).count());
    }
    std::lock_guard<std::mutex> lock(mu);
    all.insert(all.end(), lat.begin(), lat.end());
    return Status::Ok();
  };
  std::vector<std::thread> th;
  for (size_t t = 0; t < threads; ++t) {
    th.emplace_back([&, t] {
      Status s = one(t);
      std::lock_guard<std::mutex> lock(mu);
      if (!s.ok() && first_error.ok()) first_error = s;
    });
  }
  for (std::thread& x : th) x.join();
  if (!first_error.ok()) return first_error;
  return all;
}

}  // namespace tiermem::bench

#include "bench/raw_stream.h"

#include <chrono>

namespace tiermem::bench {

StatusOr<double> TimedWritePagesPerSecond(RemoteClient& c, const RemotePages& pages, const uint8_t* data, size_t n,
                                          size_t window) {
  const auto t0 = std::chrono::steady_clock::now();
  TIERMEM_RETURN_IF_ERROR(c.Write(pages, pages.first, data, n, window));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(n) / secs;
}

}  // namespace tiermem::bench

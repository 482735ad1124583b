// The bare transport's write stream to a memd (RemoteClient, no runtime): what remote-fault and
// the preload benchmarks compare the runtime's evictions against.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tiermem/remote.hpp"

namespace tiermem::bench {

// Writes `n` pages from `data` to slots [pages.first, pages.first + n) of `pages` (allocated on
// `c`), `window` requests in flight, and returns the rate in pages per second. The clock runs
// around the write only: connecting, allocating and filling `data` are the caller's, before.
StatusOr<double> TimedWritePagesPerSecond(RemoteClient& c, const RemotePages& pages, const uint8_t* data, size_t n,
                                          size_t window = 64);

}  // namespace tiermem::bench

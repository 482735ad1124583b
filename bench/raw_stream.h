// The bare transport to a memd (RemoteClient, no runtime): the write stream remote-fault and the
// preload benchmarks compare the runtime's evictions against, and round trips from several
// threads at once, which remote-fault's faults from as many threads are compared against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tiermem/remote.hpp"

namespace tiermem::bench {

// Writes `n` pages from `data` to slots [pages.first, pages.first + n) of `pages` (allocated on
// `c`), `window` requests in flight, and returns the rate in pages per second. The clock runs
// around the write only: connecting, allocating and filling `data` are the caller's, before.
StatusOr<double> TimedWritePagesPerSecond(RemoteClient& c, const RemotePages& pages, const uint8_t* data, size_t n,
                                          size_t window = 64);

// `threads` threads, each with a connection of its own and 256 pages written on it, each reading
// one page at a time `reads` times (the first tenth not timed): every timed round trip's
// microseconds, all threads together. On a machine with fewer cores than threads, what a round
// trip costs when that many wait at once (the floor for faults from as many threads).
StatusOr<std::vector<double>> ConcurrentRoundTripsUs(const std::string& url, const std::string& token, size_t threads,
                                                     size_t reads);

}  // namespace tiermem::bench

// The floors tiermem-bench remote-fault sets the remote tier's faults beside: the bare transport
// to a memd (RemoteClient, no runtime), the kernel's userfaultfd fault floors, and the runtime's
// fault path with no server (a zero-page fault).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tiermem/remote.hpp"
#include "tiermem/tiermem.hpp"

namespace tiermem::bench {

// A page's known contents, from its number: the raw pass writes them to the memd, and the tiered
// passes evict them and check every page back.
void FillPage(uint8_t* p, uint64_t page);
bool CheckPage(const uint8_t* p, uint64_t page);

// The bare transport: what the remote tier's faults and evictions are compared against.
struct RawTransport {
  double roundtrip_p50_us = 0, roundtrip_p99_us = 0;
  double roundtrip_mean_us = 0;  // to set beside the fault handler's mean read
  double write_pages_per_s = 0;
  double stream_gbps = 0;  // reads, `window` in flight
};

// How many reads the raw read stream keeps in flight: the prefetcher's window for --prefetch
// and --pattern (raw_stream_gbps: what fetching ahead could reach at best).
size_t RawStreamWindow(const std::string& prefetch, const std::string& pattern);

// On a connection of its own to `url`, over max(1024, min(pages, 65536)) pages with known
// contents: their write stream, then 4 KiB read round trips one at a time (after a warm-up), then
// a stream of reads with `window` requests in flight.
Status MeasureRawTransport(const std::string& url, const std::string& token, size_t pages, size_t window,
                           RawTransport* out);

// The kernel's floors for a fault, over clamp(pages, 1000, 20000) faults each.
struct FaultFloors {
  double p50_us = 0, p99_us = 0;  // MeasureFaultFloor: a bare handler thread and UFFDIO_COPY
  double signal_p50_us = -1;      // MeasureSignalFaultFloor's p50; -1: the kernel lacks it
};
Status MeasureFaultFloors(size_t pages, FaultFloors* out);

// Times first touches of `pages` fresh remote-tier pages of `rt`: each a zero-page fault served by
// the handler alone (the userfaultfd round trip with no server). Returns their p50 in microseconds.
StatusOr<double> ZeroFaultP50(Runtime& rt, size_t pages);

}  // namespace tiermem::bench

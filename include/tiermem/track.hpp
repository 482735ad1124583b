// tiermem::WriteTracker: the runtime's write tracking alone, over one range of the caller's, to
// measure what each mechanism costs and what it finds (tiermem-bench track). No Runtime needed.
//
// Mechanisms (names as the stats and TIERMEM_* options spell them):
//   pagemap_scan  every page each round: PAGEMAP_SCAN over userfaultfd's asynchronous write-protect
//                 (Linux 6.7+); a write after a round costs one fault resolved in the kernel.
//   soft_dirty    every page each round: pagemap's soft-dirty bit, cleared for the whole process
//                 each round (kernels built with CONFIG_MEM_SOFT_DIRTY).
//   protect       a sample of pages each round: PROT_NONE and SIGSEGV (the runtime's sampler); it
//                 sees reads too, one fault per sampled page touched.
//
//   std::string why;
//   if (tiermem::WriteTracker::Available("pagemap_scan", &why)) {
//     auto t = *tiermem::WriteTracker::Start("pagemap_scan", buf, bytes, 0);
//     ...writes...
//     std::vector<size_t> written;
//     t->Round(&written);   // indices of the pages written since Start
//   }
//
// Thread safety: one thread calls Round; any thread may write the range. A protect tracker uses
// the process's one SIGSEGV sampler: one at a time, and not beside a Runtime that samples.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "tiermem/status.hpp"

namespace tiermem {

class WriteTracker {
 public:
  // Every mechanism's name, in the order above.
  static std::vector<std::string> Mechanisms();
  // Whether `mechanism` works in this process on this kernel; false with the reason in *why
  // (an unknown name says which names exist).
  static bool Available(const std::string& mechanism, std::string* why);
  // Starts tracking [addr, addr+bytes): page aligned, private anonymous memory the caller owns,
  // populated, and left mapped until the tracker is gone. Every page counts as unwritten from
  // here. protect arms `sample_pages` pages per round (1 to 4096), moving through the range;
  // the other mechanisms ignore it. InvalidArgument for a bad name, range or sample size;
  // NotSupported (with the reason) where the mechanism is absent.
  static StatusOr<std::unique_ptr<WriteTracker>> Start(const std::string& mechanism, void* addr, size_t bytes,
                                                       size_t sample_pages);
  virtual ~WriteTracker() = default;

  virtual const char* mechanism() const = 0;
  // Ends a round and starts the next: appends to *written the index (from addr, in pages) of
  // each page seen written during the round, in no order. Returns the number of pages the round
  // looked at (all of them for a scan, the sample for protect).
  virtual StatusOr<size_t> Round(std::vector<size_t>* written) = 0;
};

}  // namespace tiermem

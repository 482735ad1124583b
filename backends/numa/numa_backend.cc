#include "backends/numa/numa_backend.h"

#include <numaif.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "base/os.h"

namespace tiermem {
namespace {

constexpr unsigned long kMaxNodes = 1024;
constexpr size_t kMaskWords = kMaxNodes / (8 * sizeof(unsigned long));

Status MakeMask(const std::vector<int>& nodes, unsigned long* mask) {
  memset(mask, 0, kMaskWords * sizeof(unsigned long));
  for (int n : nodes) {
    if (n < 0 || static_cast<unsigned long>(n) >= kMaxNodes) {
      return InvalidArgument("NUMA node " + std::to_string(n) + " is out of range");
    }
    mask[n / (8 * sizeof(unsigned long))] |= 1ul << (n % (8 * sizeof(unsigned long)));
  }
  return Status::Ok();
}

bool InSet(const std::vector<int>& nodes, int n) {
  for (int x : nodes) {
    if (x == n) return true;
  }
  return false;
}

}  // namespace

std::string NodeListString(const std::vector<int>& nodes) {
  std::string s;
  for (int n : nodes) s += (s.empty() ? "" : ",") + std::to_string(n);
  return s.empty() ? "none" : s;
}

Status NumaBackend::BindRange(void* addr, size_t bytes, const std::vector<int>& nodes) {
  if (nodes.empty()) return InvalidArgument("no NUMA node to bind to");
  unsigned long mask[kMaskWords];
  TIERMEM_RETURN_IF_ERROR(MakeMask(nodes, mask));
  int rc = os::Mbind(addr, bytes, MPOL_BIND, mask, kMaxNodes + 1, 0);
  if (rc != 0) return ErrnoToStatus(-rc, "mbind(nodes " + NodeListString(nodes) + ")");
  return Status::Ok();
}

Status NumaBackend::QueryNodes(const void* addr, size_t npages, int* node_out) {
  const size_t ps = os::PageSize();
  void* pages[kBatch];
  for (size_t done = 0; done < npages; done += kBatch) {
    size_t n = npages - done < kBatch ? npages - done : kBatch;
    for (size_t i = 0; i < n; ++i) {
      pages[i] = const_cast<char*>(static_cast<const char*>(addr)) + (done + i) * ps;
    }
    int rc = os::MovePages(n, pages, nullptr, node_out + done);
    if (rc != 0) return ErrnoToStatus(-rc, "move_pages(query)");
    for (size_t i = 0; i < n; ++i) {
      if (node_out[done + i] < 0) node_out[done + i] = -1;  // -ENOENT: not resident
    }
  }
  return Status::Ok();
}

// Moves pages[0, n) (n <= kBatch) to `nodes`, round-robin from *rr: queries where they are,
// keeps those resident and off the nodes, and retries what the kernel skipped. `pages` is
// reused as scratch.
static Status MoveBatch(void** pages, size_t n, const std::vector<int>& nodes, size_t* rr, MoveStats* stats) {
  int target[NumaBackend::kBatch];
  int status[NumaBackend::kBatch];
  int rc = os::MovePages(n, pages, nullptr, status);
  if (rc != 0) return ErrnoToStatus(-rc, "move_pages(query)");
  // Keep only the resident pages that are not already on a target node.
  size_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    if (status[i] < 0) {
      ++stats->not_resident;
    } else if (InSet(nodes, status[i])) {
      ++stats->already_there;
    } else {
      pages[m] = pages[i];
      target[m] = nodes[(*rr)++ % nodes.size()];
      ++m;
    }
  }
  for (int attempt = 0; m > 0 && attempt <= NumaBackend::kRetries; ++attempt) {
    rc = os::MovePages(m, pages, target, status);
    if (rc != 0 && rc != -ENOENT) {
      return ErrnoToStatus(-rc, "move_pages(to nodes " + NodeListString(nodes) + ")");
    }
    size_t left = 0;
    for (size_t i = 0; i < m; ++i) {
      if (status[i] >= 0 && InSet(nodes, status[i])) {
        ++stats->moved;
      } else if (status[i] == -ENOENT) {
        ++stats->not_resident;  // unmapped while we worked (freed or evicted)
      } else {
        pages[left] = pages[i];  // -EBUSY, -EAGAIN, -ENOMEM...: try again
        target[left] = target[i];
        ++left;
      }
    }
    m = left;
  }
  stats->failed += m;
  return Status::Ok();
}

StatusOr<MoveStats> NumaBackend::MoveRange(void* addr, size_t bytes,
                                            const std::vector<int>& nodes) {
  // Bind first, so pages touched while we move (or never touched yet) land on the target.
  TIERMEM_RETURN_IF_ERROR(BindRange(addr, bytes, nodes));
  const size_t ps = os::PageSize();
  const size_t npages = bytes / ps;
  MoveStats stats;
  void* pages[kBatch];
  size_t rr = 0;  // round-robin over the tier's nodes
  // Batches end on kBatch-page-aligned addresses (4 MiB), so a transparent huge page (2 MiB)
  // never straddles two batches: moving the part of a THP in one batch moves all of it, and the
  // next batch's query would otherwise count its other pages as "already there".
  const size_t batch_bytes = kBatch * ps;
  const uintptr_t base = reinterpret_cast<uintptr_t>(addr);
  for (size_t done = 0; done < npages;) {
    const uintptr_t at = base + done * ps;
    const size_t to_boundary = (batch_bytes - at % batch_bytes) / ps;
    size_t n = npages - done < to_boundary ? npages - done : to_boundary;
    for (size_t i = 0; i < n; ++i) pages[i] = static_cast<char*>(addr) + (done + i) * ps;
    done += n;
    TIERMEM_RETURN_IF_ERROR(MoveBatch(pages, n, nodes, &rr, &stats));
  }
  return stats;
}

StatusOr<MoveStats> NumaBackend::MovePages(const std::vector<char*>& pages, const std::vector<int>& nodes) {
  const size_t ps = os::PageSize();
  // Each run of adjacent pages is bound with one mbind; the moves share move_pages calls.
  for (size_t i = 0; i < pages.size();) {
    size_t j = i + 1;
    while (j < pages.size() && pages[j] == pages[j - 1] + ps) ++j;
    TIERMEM_RETURN_IF_ERROR(BindRange(pages[i], (j - i) * ps, nodes));
    i = j;
  }
  MoveStats stats;
  void* batch[kBatch];
  size_t rr = 0;
  for (size_t done = 0; done < pages.size();) {
    const size_t n = std::min(kBatch, pages.size() - done);
    for (size_t i = 0; i < n; ++i) batch[i] = pages[done + i];
    done += n;
    TIERMEM_RETURN_IF_ERROR(MoveBatch(batch, n, nodes, &rr, &stats));
  }
  return stats;
}

}  // namespace tiermem

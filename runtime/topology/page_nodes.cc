// tiermem::PageNodes (include/tiermem/topology.hpp): where the kernel put any page of this
// process, by frame number, else by move_pages' query.
#include <cctype>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "base/os.h"
#include "tiermem/topology.hpp"

namespace tiermem {
namespace {

constexpr size_t kPage = 4096;

// Frame number -> node, from the memory blocks each node lists in sysfs.
class FrameNodes {
 public:
  FrameNodes() {
    uint64_t block = 0;
    char bs[64];
    if (os::ReadSmallFile("/sys/devices/system/memory/block_size_bytes", bs, sizeof(bs)) <= 0 ||
        (block = std::strtoull(bs, nullptr, 16)) == 0) {
      return;
    }
    std::vector<std::string> nodes;
    if (os::ListDir("/sys/devices/system/node", &nodes) != 0) return;
    for (const std::string& name : nodes) {
      if (name.rfind("node", 0) != 0 || name.size() == 4) continue;
      const int node = std::atoi(name.c_str() + 4);
      std::vector<std::string> entries;
      if (os::ListDir(("/sys/devices/system/node/" + name).c_str(), &entries) != 0) continue;
      for (const std::string& mb : entries) {
        if (mb.rfind("memory", 0) != 0 || mb.size() == 6 || !isdigit(static_cast<unsigned char>(mb[6]))) continue;
        const uint64_t index = std::strtoull(mb.c_str() + 6, nullptr, 10);
        blocks_[index * block / kPage] = {(index + 1) * block / kPage, node};
      }
    }
    fd_ = os::PagemapOpen();
  }
  ~FrameNodes() {
    if (fd_ >= 0) os::Close(fd_);
  }
  // The node of each page of [p, p + n pages) found by its frame, else -1.
  std::vector<int> Nodes(char* p, size_t n) const {
    std::vector<int> out(n, -1);
    if (fd_ < 0 || blocks_.empty()) return out;
    std::vector<uint64_t> pm(n);
    if (!os::ReadPagemap(fd_, p, n, pm.data())) return out;
    for (size_t i = 0; i < n; ++i) {
      const uint64_t pfn = pm[i] & ((1ull << 55) - 1);
      if (!(pm[i] >> 63) || pfn == 0) continue;  // not present, or frame numbers hidden
      auto it = blocks_.upper_bound(pfn);
      if (it == blocks_.begin()) continue;
      --it;
      if (pfn < it->second.first) out[i] = it->second.second;
    }
    return out;
  }

 private:
  std::map<uint64_t, std::pair<uint64_t, int>> blocks_;  // first frame -> (end frame, node)
  int fd_ = -1;
};

}  // namespace

std::vector<int> PageNodes(const void* start, size_t len) {
  char* p = static_cast<char*>(const_cast<void*>(start));
  static const FrameNodes frames;
  const size_t n = len / kPage;
  std::vector<int> status = frames.Nodes(p, n);
  std::vector<void*> pages;
  std::vector<size_t> at;
  for (size_t i = 0; i < n; ++i) {
    if (status[i] < 0) pages.push_back(p + i * kPage), at.push_back(i);
  }
  if (pages.empty()) return status;
  std::vector<int> st(pages.size(), -1);
  if (os::MovePages(pages.size(), pages.data(), nullptr, st.data()) != 0) {
    std::fill(st.begin(), st.end(), -1);
  }
  for (size_t k = 0; k < at.size(); ++k) status[at[k]] = st[k];
  return status;
}

}  // namespace tiermem

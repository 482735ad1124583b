// The heat log (heat_log.h): one write per round of what the policy thread learned.
#include "runtime/tiering/heat_log.h"

#include <algorithm>
#include <cstring>

#include "base/log.h"
#include "base/options.h"
#include "base/os.h"

namespace tiermem {

StatusOr<std::unique_ptr<HeatLog>> HeatLog::Open(const std::string& path_template, uint32_t page_size,
                                                 uint32_t interval_ms, uint64_t max_pages) {
  std::string path = PathForProcess(path_template, os::ProcessId());
  const int fd = os::OpenForWrite(path.c_str(), false);
  if (fd < 0) return Unavailable("TIERMEM_HEAT_LOG=" + path + ": " + strerror(-fd));
  char header[16];
  memcpy(header, kMagic, 8);
  memcpy(header + 8, &page_size, 4);
  memcpy(header + 12, &interval_ms, 4);
  if (const int rc = os::WriteAll(fd, header, sizeof(header)); rc != 0) {
    os::Close(fd);
    return Unavailable("TIERMEM_HEAT_LOG=" + path + ": " + strerror(-rc));
  }
  return std::unique_ptr<HeatLog>(new HeatLog(fd, std::move(path), os::MonotonicNanos(), std::max<uint64_t>(1, max_pages)));
}

HeatLog::~HeatLog() {
  if (fd_ >= 0) os::Close(fd_);
}

void HeatLog::Cap() {
  // A partial Fisher-Yates shuffle: the first max_pages_ entries become a uniform sample.
  const size_t n = entries_.size();
  for (size_t i = 0; i < max_pages_; ++i) {
    uint64_t z = (rng_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    std::swap(entries_[i], entries_[i + z % (n - i)]);
  }
  entries_.resize(max_pages_);
  const float scale = static_cast<float>(n) / static_cast<float>(max_pages_);
  for (Entry& e : entries_) e.weight *= scale;
}

void HeatLog::Round(uint64_t now_ns, uint64_t dram_pages, const std::vector<AccessSample>& samples,
                    size_t scan_from) {
  if (fd_ < 0) return;
  entries_.clear();
  for (size_t i = 0; i < samples.size(); ++i) {
    const AccessSample& s = samples[i];
    entries_.push_back({s.page, s.weight, (s.write ? kWrite : 0u) | (i >= scan_from ? kScan : 0u)});
  }
  std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) { return a.page < b.page; });
  size_t out = 0;  // merged in place: one entry per page
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (out > 0 && entries_[out - 1].page == entries_[i].page) {
      Entry& m = entries_[out - 1];
      const Entry& e = entries_[i];
      // Both the scan's or both sampled: summed; else the scan's weight alone (heat_log.h).
      if ((m.flags & kScan) == (e.flags & kScan)) {
        m.weight += e.weight;
      } else if ((e.flags & kScan) != 0) {
        m.weight = e.weight;
      }
      m.flags |= e.flags;
    } else {
      entries_[out++] = entries_[i];
    }
  }
  entries_.resize(out);
  const uint64_t touched = entries_.size();
  if (touched > max_pages_) Cap();
  RoundHeader h{now_ns > start_ns_ ? now_ns - start_ns_ : 0, dram_pages, static_cast<uint32_t>(entries_.size()),
                static_cast<uint32_t>(std::min<uint64_t>(touched, UINT32_MAX))};
  out_.resize(sizeof(h) + entries_.size() * sizeof(Entry));
  memcpy(out_.data(), &h, sizeof(h));
  if (!entries_.empty()) memcpy(out_.data() + sizeof(h), entries_.data(), entries_.size() * sizeof(Entry));
  if (const int rc = os::WriteAll(fd_, out_.data(), out_.size()); rc != 0) {
    TM_LOG_WARN("TIERMEM_HEAT_LOG=%s: %s; the heat log stops", path_.c_str(), strerror(-rc));
    os::Close(fd_);
    fd_ = -1;
  }
}

}  // namespace tiermem

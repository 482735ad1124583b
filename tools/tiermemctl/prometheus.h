// Prometheus text exposition (format 0.0.4) of processes' stats blocks. Every family is written
// once with its # HELP and # TYPE, then the samples of every process added (label pid); byte
// figures are *_bytes, counters *_total, latency histograms *_seconds with cumulative
// _bucket{le=...}, _sum and _count (bounds from kHistogramBoundsNs, or the histogram's own).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tiermem/stats.hpp"

namespace tiermem::tools {

class Exposition {
 public:
  void Add(const ProcessStats& s);
  // A gauge with no process label (e.g. how many processes a scrape found).
  void AddGauge(const std::string& name, const std::string& help, double value);
  std::string Text() const;

  // The Content-Type of Text().
  static constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

 private:
  using Labels = std::vector<std::pair<std::string, std::string>>;
  struct Family {
    std::string help;
    std::string type;  // gauge, counter, histogram
    std::vector<std::string> lines;
  };
  Family& Get(const std::string& name, const std::string& help, const std::string& type);
  void Sample(const std::string& name, const std::string& help, const std::string& type, const Labels& labels,
              double value);
  // A histogram over kHistogramBoundsNs, and one that carries its own bounds.
  void Histogram(const std::string& name, const std::string& help, const Labels& labels,
                 const LatencyHistogram& h);
  void Histogram(const std::string& name, const std::string& help, const Labels& labels,
                 const DurationHistogram& h);
  void Histogram(const std::string& name, const std::string& help, const Labels& labels, const uint64_t* le_ns,
                 size_t bounds, const uint64_t* buckets, uint64_t sum_ns);

  std::vector<std::string> order_;
  std::map<std::string, Family> families_;
};

}  // namespace tiermem::tools

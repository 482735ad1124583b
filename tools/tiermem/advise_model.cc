// `tiermem advise`: the heat log read back, and the model (docs/advise.md, "The model").
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <numeric>
#include <unordered_map>

#include "tools/tiermem/advise.h"

namespace tiermem::tools {
namespace {

// The heat log's layout (runtime/tiering/heat_log.h; tools see no runtime header, so it is
// restated here, and docs/advise.md states it for any reader).
constexpr char kMagic[8] = {'T', 'M', 'H', 'E', 'A', 'T', '0', '1'};
constexpr size_t kFileHeader = 16, kRoundHeader = 24, kEntry = 16;
constexpr uint32_t kScanFlag = 2;  // an entry's flags: the write scan saw the page written

template <typename T>
T At(const char* p) {
  T v;
  memcpy(&v, p, sizeof(v));
  return v;
}

}  // namespace

bool ReadHeatRecord(const std::string& path, HeatRecord* out, std::string* error) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    *error = path + ": cannot be opened (did the program start the tiermem runtime?)";
    return false;
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.size() < kFileHeader || memcmp(bytes.data(), kMagic, 8) != 0) {
    *error = path + ": not a heat log (no TMHEAT01 header)";
    return false;
  }
  out->page_size = At<uint32_t>(bytes.data() + 8);
  out->interval_ms = At<uint32_t>(bytes.data() + 12);
  std::unordered_map<uint64_t, std::pair<double, double>> touches;  // all, and the sampled ones
  uint64_t first_ns = 0, last_ns = 0;
  size_t at = kFileHeader;
  // A round cut short (the program ended mid-write) is left out.
  while (at + kRoundHeader <= bytes.size()) {
    const uint64_t t = At<uint64_t>(bytes.data() + at);
    const uint64_t dram = At<uint64_t>(bytes.data() + at + 8);
    const uint32_t n = At<uint32_t>(bytes.data() + at + 16);
    if (at + kRoundHeader + size_t{n} * kEntry > bytes.size()) break;
    const char* e = bytes.data() + at + kRoundHeader;
    for (uint32_t i = 0; i < n; ++i, e += kEntry) {
      std::pair<double, double>& t = touches[At<uint64_t>(e)];
      t.first += At<float>(e + 8);
      if ((At<uint32_t>(e + 12) & kScanFlag) == 0) t.second += At<float>(e + 8);
    }
    if (out->rounds++ == 0) first_ns = t;
    last_ns = t;
    out->heap_peak_pages = std::max(out->heap_peak_pages, dram);
    at += kRoundHeader + size_t{n} * kEntry;
  }
  if (out->rounds < 2) {
    *error = path + ": fewer than two rounds recorded (the program ended before the policy thread's second round: give it more work)";
    return false;
  }
  // Each round's touches are those since the one before: the rounds after the first span it.
  out->seconds = static_cast<double>(last_ns - first_ns) * 1e-9 * static_cast<double>(out->rounds) /
                 static_cast<double>(out->rounds - 1);
  std::vector<std::pair<double, double>> pages;
  pages.reserve(touches.size());
  for (const auto& [page, t] : touches) pages.push_back(t);
  std::sort(pages.begin(), pages.end(), std::greater<>());
  out->page_touches.clear();
  out->page_sampled.clear();
  for (const auto& [all, sampled] : pages) {
    out->page_touches.push_back(all);
    out->page_sampled.push_back(sampled);
  }
  return true;
}

double EstimatedAccesses(double touched_rounds, uint64_t rounds) {
  if (rounds == 0 || touched_rounds <= 0) return 0;
  const double r = static_cast<double>(rounds);
  // Accesses as a Poisson stream of rate m per round: a round sees the page touched with
  // probability 1 - exp(-m), so m = -ln(1 - touched/rounds). A page touched every round says
  // only that m is large: it is held at the value for one untouched round in 2R.
  const double p = std::min(touched_rounds / r, 1 - 0.5 / r);
  return -r * std::log1p(-p);
}

double PageAccesses(double touched_rounds, double sampled, uint64_t rounds, double armed_share) {
  const double scanned = std::max(0.0, touched_rounds - sampled);
  // A page read m times a round is caught with probability 1 - exp(-m f) in a round whose
  // sampler is armed a share f of it: the sampled part's rate is its estimate over f.
  const double f = armed_share > 0 && armed_share < 1 ? armed_share : 1;
  return EstimatedAccesses(scanned, rounds) + EstimatedAccesses(sampled, rounds) / f;
}

double LruMisses(const std::vector<double>& accesses, double capacity_pages) {
  // Che's approximation: under independent references a page stays in an LRU of C pages for a
  // characteristic time t with sum_p (1 - exp(-a_p t)) = C, and an access to page p misses
  // with probability exp(-a_p t). Pages never accessed take no room.
  size_t touched = 0;
  for (double a : accesses) touched += a > 0;
  if (static_cast<double>(touched) <= capacity_pages) return 0;
  if (capacity_pages < 1) return std::accumulate(accesses.begin(), accesses.end(), 0.0);
  auto held = [&](double t) {
    double sum = 0;
    for (double a : accesses) sum += -std::expm1(-a * t);
    return sum;
  };
  double lo = 0, hi = 1;
  while (held(hi) < capacity_pages && hi < 1e30) hi *= 2;
  for (int i = 0; i < 100 && hi - lo > 1e-12 * hi; ++i) {
    const double mid = (lo + hi) / 2;
    (held(mid) < capacity_pages ? lo : hi) = mid;
  }
  double misses = 0;
  for (double a : accesses) misses += a * std::exp(-a * lo);
  return misses;
}

std::vector<SharePrediction> Predict(const HeatRecord& rec, uint64_t peak_rss_bytes, const std::vector<double>& shares,
                                     const FarCosts& costs, double plain_seconds, uint64_t own_bytes) {
  const uint64_t page = rec.page_size;
  const uint64_t heap = std::max<uint64_t>(rec.heap_peak_pages, rec.page_touches.size());
  // Suffix sums over the pages ranked hottest first; pages of the heap never seen touched are
  // the coldest, with none.
  const size_t n = rec.page_touches.size();
  std::vector<double> touches_colder(n + 1, 0.0), accesses(n);
  for (size_t i = n; i-- > 0;) {
    touches_colder[i] = touches_colder[i + 1] + rec.page_touches[i];
    accesses[i] = PageAccesses(rec.page_touches[i], i < rec.page_sampled.size() ? rec.page_sampled[i] : 0, rec.rounds,
                               rec.armed_share);
  }
  std::vector<SharePrediction> out;
  for (double s : shares) {
    SharePrediction p;
    p.share = s;
    p.dram_limit_bytes = static_cast<uint64_t>(s * static_cast<double>(peak_rss_bytes)) / page * page;
    // The runtime counts its own DRAM in the limit (at most half of it), as Migrator does.
    const uint64_t own = std::min(own_bytes, p.dram_limit_bytes / 2);
    const uint64_t kept = std::min<uint64_t>(heap, (p.dram_limit_bytes - own) / page);
    p.below_dram_bytes = (heap - kept) * page;
    p.touches_per_s = rec.seconds > 0 && kept < n ? touches_colder[kept] / rec.seconds : 0;
    // Remote: the accesses an LRU of the pages DRAM keeps would miss, each a fault; the record
    // run did the plain run's work, so its accesses are the plain run's.
    const double faults = kept < heap ? LruMisses(accesses, static_cast<double>(kept)) : 0.0;
    p.faults_per_s = plain_seconds > 0 ? faults / plain_seconds : 0;
    p.rdma = 1 + p.faults_per_s * costs.rdma_us * 1e-6;
    p.tcp = 1 + p.faults_per_s * costs.tcp_us * 1e-6;
    // CXL: the same accesses as loads of the far node, `cxl_lines` lines each.
    p.cxl = 1 + p.faults_per_s * costs.cxl_lines * costs.cxl_extra_ns * 1e-9;
    out.push_back(p);
  }
  return out;
}

}  // namespace tiermem::tools

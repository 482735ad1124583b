// The policy thread's scan (see migrator.h): which page records a round reads, and what it lists.
//
// Reading every live page's record each round made a round's cost grow with memory: at 4 GiB
// (a million records, a quarter of them resident) the reads alone were most of a 30 ms round,
// more than its 20 ms interval at 16 GiB. So when the resident pages are more than
// TIERMEM_SCAN_PAGES (or the records more than kReadFactor times that), a round reads a window:
// it goes on from where the last round stopped, through the regions in turn and round again,
// until it has listed TIERMEM_SCAN_PAGES resident pages or read kReadFactor times as many
// records. What the round needs of the rest comes from elsewhere:
// - how many pages each tier holds: from the core's per-tier counts (PageMover::TierPages), not
//   from the records; the pages not read are `unlisted` (Policy::Plan counts them against their
//   tier's budget and never moves them);
// - heat: the Policy keeps the heat of pages it does not list while it is warm (Plan's
//   `unlisted`), so a sampled page keeps its heat until the window comes back to it;
// - the pages the sampler named this round (caught in use, or watched untouched) are listed
//   wherever they are, so a hot page on CXL is promoted, and a confirmed-cold one is a victim,
//   in the round that learned it;
// - the next sample is drawn from the window (the candidates), each armed page standing for
//   every resident page (the sample's weight), since over rounds the window covers them all.
// Victims a plan takes from a tier it lists only in part are the coldest quarter of what it
// lists (Policy::Plan), like the victim window of the sample.
#include <algorithm>

#include "runtime/tiering/migrator.h"

namespace tiermem {
namespace {

constexpr uint8_t kStateLocal = static_cast<uint8_t>(PageState::kLocal);
constexpr uint8_t kStateRemote = static_cast<uint8_t>(PageState::kRemote);
constexpr uint8_t kStateFree = static_cast<uint8_t>(PageState::kFree);
constexpr uint8_t kStateInFlight = static_cast<uint8_t>(PageState::kInFlight);
constexpr uint64_t kReadFactor = 4;  // records read per page listed, at most

// The tier a record's page is resident on and counts against, or false when it is not resident
// (remote, in flight, being freed). A page Region::PageQuiet calls quiet (free, or untouched:
// no tier) must stay one this passes over, or the quiet chunks ScanWindow skips would hide it. A page the soft sampler holds is resident on its tier (its
// bytes wait in a copy); a remote page faulted back in is in DRAM.
bool ResidentTier(const PageRecord& rec, uint8_t st, uint8_t flags, Tier* tier) {
  if (st != kStateLocal && !(st == kStateInFlight && (flags & kPageSampled))) return false;
  const uint8_t tv = rec.tier.load(std::memory_order_relaxed);
  if (tv >= kNumTiers) return false;  // kNoTier: its run is being freed
  *tier = static_cast<Tier>(tv) == Tier::kRemote ? Tier::kDram : static_cast<Tier>(tv);
  return true;
}

}  // namespace

uint64_t Migrator::ScanWindow(Region* r, uint64_t from, uint64_t end, uint64_t* list_left, uint64_t* read_left,
                              RoundScan* out) {
  const size_t page = config_.page_size;
  const uint64_t region_key = reinterpret_cast<uintptr_t>(r->PageAddress(0)) / page;
  // A quiet chunk (Region::Quiet: every page free or untouched) is passed over whole and costs
  // the read budget one record.
  const uint64_t budget = read_left != nullptr ? *read_left : UINT64_MAX;
  uint64_t read = 0;
  const size_t span = index_.AddSpan(r, region_key, region_key + from, end - from);
  std::vector<PageView>& views = out->views;
  const size_t begin = views.size();
  uint64_t i = from;
  for (; i < end && read < budget; ++i, ++read) {
    if (list_left != nullptr && *list_left == 0) break;
    if (i % Region::kChunkPages == 0 && end - i >= Region::kChunkPages && r->Quiet(i / Region::kChunkPages)) {
      i += Region::kChunkPages - 1;
      continue;
    }
    if ((i & 0xffff) == 0xffff) MaybeRelieve();  // a long scan does not hold relief back
    const PageRecord& rec = r->record(i);
    const uint8_t st = rec.state.load(std::memory_order_acquire);
    if (st == kStateFree) continue;
    if (st == kStateRemote) {
      ++out->lower_pages;  // counted, not listed (Policy::Plan's `unlisted`)
      ++out->unlisted[static_cast<int>(Tier::kRemote)];
      continue;
    }
    const uint8_t flags = rec.flags.load(std::memory_order_relaxed);
    Tier tier;
    if (!ResidentTier(rec, st, flags, &tier)) continue;  // in flight: the pager owns it this round
    if (flags & kPageHeapFree) {  // the heap's free page: counted on its tier, never moved
      ++(tier == Tier::kDram ? out->dram_pages : out->lower_pages);
      out->cxl_pages += tier == Tier::kCxl;
      ++out->unlisted[static_cast<int>(tier)];
      continue;
    }
    const bool pinned = (flags & kPagePinned) != 0;     // every page of a pinned run carries it
    const uint64_t key = region_key + i;
    if (!pinned) out->candidates.push_back(r->PageAddress(i));
    if (tier == Tier::kDram) {
      ++out->dram_pages;
    } else {
      ++out->lower_pages;
      out->cxl_pages += tier == Tier::kCxl;
    }
    index_.Set(span, key, static_cast<uint32_t>(views.size()));
    views.push_back({key, tier, pinned});
    if (list_left != nullptr) --*list_left;
  }
  if (read_left != nullptr) *read_left -= read;
  out->records_read += read;
  index_.Trim(span, i - from);
  scan_windows_.push_back({span, begin, views.size()});
  return i;
}

void Migrator::Scan(std::span<const uint64_t> named, RoundScan* out) {
  relieved_since_scan_ = 0;
  index_.Clear();
  scan_windows_.clear();
  out->views.clear();  // (cleared, not replaced: the vectors keep their capacity)
  out->candidates.clear();
  out->dram_pages = out->lower_pages = out->cxl_pages = 0;
  out->records_read = 0;
  out->unlisted = {};
  named_scratch_.clear();
  size_t nregions = 0;
  uint64_t records = 0;
  for (; nregions < known_.size(); ++nregions) {
    Region* r = known_[nregions].region.load(std::memory_order_acquire);
    if (r == nullptr) break;
    records += std::min(known_[nregions].end.load(std::memory_order_acquire), r->pages());
  }
  auto end_of = [&](size_t ki, Region* r) {
    return std::min(known_[ki].end.load(std::memory_order_acquire), r->pages());
  };
  // Each tier's pages by the core's counts: what a window's round goes by (read once, before the
  // window, so that what it lists is at most what these count).
  const uint64_t dram = mover_->TierPages(Tier::kDram), cxl = mover_->TierPages(Tier::kCxl);
  out->whole = scan_pages_ == 0 || nregions == 0 ||
               (dram + cxl <= scan_pages_ && records <= kReadFactor * scan_pages_);
  if (out->whole) {
    for (size_t ki = 0; ki < nregions; ++ki) {
      Region* r = known_[ki].region.load(std::memory_order_acquire);
      ScanWindow(r, 0, end_of(ki, r), nullptr, nullptr, out);
    }
  } else {
    ScanFromCursor(nregions, out);
  }
  out->window_listed = 0;
  for (const ScanWindowViews& w : scan_windows_) out->window_listed += w.end - w.begin;
  ListNamed(named, out);
  OrderViews(out);
  out->population = out->candidates.size();
  if (out->whole) {
    // The remote tier by the core's count, as a window's round goes by: a quiet chunk
    // (Region::Quiet) may hold remote pages never written anywhere, passed over unread.
    const uint64_t remote = mover_->TierPages(Tier::kRemote);
    out->lower_pages = out->lower_pages - out->unlisted[static_cast<int>(Tier::kRemote)] + remote;
    out->unlisted[static_cast<int>(Tier::kRemote)] = remote;
    return;
  }
  // A window: the counts are the tiers', the pages not listed the difference.
  std::array<uint64_t, kNumTiers> listed{};
  for (const PageView& v : out->views) ++listed[static_cast<int>(v.tier)];
  const uint64_t remote = mover_->TierPages(Tier::kRemote);
  out->dram_pages = dram;
  out->cxl_pages = cxl;
  out->lower_pages = cxl + remote;
  out->unlisted[static_cast<int>(Tier::kDram)] = dram - std::min(dram, listed[static_cast<int>(Tier::kDram)]);
  out->unlisted[static_cast<int>(Tier::kCxl)] = cxl - std::min(cxl, listed[static_cast<int>(Tier::kCxl)]);
  out->unlisted[static_cast<int>(Tier::kRemote)] = remote;
  out->population = std::max<uint64_t>(dram + cxl, out->candidates.size());
  // The sample's rotating cursors count positions in the candidates, which are another run of
  // pages each round here: advancing by the same steps while the window moves by a fixed number
  // of pages, they would meet each window at the same few offsets, and most of memory would
  // never be a victim candidate. Each window starts them somewhere new.
  ++window_rounds_;
  cursor_ = Policy::Ranked::Scatter(window_rounds_);
  victim_cursor_ = Policy::Ranked::Scatter(~window_rounds_);
}

void Migrator::ScanFromCursor(size_t nregions, RoundScan* out) {
  uint64_t list_left = scan_pages_, read_left = kReadFactor * scan_pages_;
  const size_t start_ki = scan_region_ < nregions ? scan_region_ : 0;
  const uint64_t start_i = scan_region_ < nregions ? scan_page_ : 0;
  size_t ki = start_ki;
  uint64_t i = start_i;
  bool wrapped = false;
  for (;;) {
    Region* r = known_[ki].region.load(std::memory_order_acquire);
    const uint64_t end = std::min(known_[ki].end.load(std::memory_order_acquire), r->pages());
    const bool last = wrapped && ki == start_ki;  // back where this round began
    const uint64_t stop = last ? std::min(start_i, end) : end;
    const uint64_t at = i < stop ? ScanWindow(r, i, stop, &list_left, &read_left, out) : i;
    if (at < stop || last) {
      scan_region_ = ki;
      scan_page_ = at;
      return;
    }
    i = 0;
    if (++ki == nregions) {
      ki = 0;
      wrapped = true;
    }
  }
}

void Migrator::ListNamed(std::span<const uint64_t> named, RoundScan* out) {
  if (out->whole || named.empty()) return;  // a whole scan listed every resident page
  const size_t page = config_.page_size;
  for (uint64_t key : named) {
    if (index_.InWindow(key)) continue;  // read this round: listed if resident
    char* addr = reinterpret_cast<char*>(key * page);
    Region* r = RegionOf(addr);
    if (r == nullptr) continue;
    const PageRecord& rec = r->record(r->PageIndex(addr));
    const uint8_t st = rec.state.load(std::memory_order_acquire);
    Tier tier;
    if (!ResidentTier(rec, st, rec.flags.load(std::memory_order_relaxed), &tier) ||
        (rec.flags.load(std::memory_order_relaxed) & kPageHeapFree)) {
      continue;
    }
    named_scratch_.push_back({key, tier, (rec.flags.load(std::memory_order_relaxed) & kPagePinned) != 0});
  }
  std::sort(named_scratch_.begin(), named_scratch_.end(),
            [](const PageView& a, const PageView& b) { return a.page < b.page; });
  named_scratch_.erase(std::unique(named_scratch_.begin(), named_scratch_.end(),
                                   [](const PageView& a, const PageView& b) { return a.page == b.page; }),
                       named_scratch_.end());
}

void Migrator::OrderViews(RoundScan* out) {
  // The windows in address order, each ascending already, merged with the named pages (sorted,
  // none inside a window): the Policy merges the views with its own sorted tables in one pass.
  std::vector<ScanWindowViews>& w = scan_windows_;
  std::sort(w.begin(), w.end(), [&](const ScanWindowViews& a, const ScanWindowViews& b) {
    return index_.SpanFirst(a.span) < index_.SpanFirst(b.span);
  });
  bool ordered = named_scratch_.empty();
  for (size_t k = 0; ordered && k < w.size(); ++k) ordered = k == 0 || w[k - 1].end <= w[k].begin;
  if (ordered) return;  // read in address order, nothing named outside: as they are
  std::vector<PageView>& sorted = sorted_scratch_;
  sorted.clear();
  sorted.reserve(out->views.size() + named_scratch_.size());
  size_t n = 0;
  auto take_named_below = [&](uint64_t key) {
    for (; n < named_scratch_.size() && named_scratch_[n].page < key; ++n) {
      index_.SetExtra(named_scratch_[n].page, static_cast<uint32_t>(sorted.size()));
      sorted.push_back(named_scratch_[n]);
    }
  };
  for (const ScanWindowViews& s : w) {
    take_named_below(index_.SpanFirst(s.span));
    for (size_t v = s.begin; v < s.end; ++v) {
      index_.Set(s.span, out->views[v].page, static_cast<uint32_t>(sorted.size()));
      sorted.push_back(out->views[v]);
    }
  }
  take_named_below(~uint64_t{0});
  out->views.swap(sorted);
}

}  // namespace tiermem

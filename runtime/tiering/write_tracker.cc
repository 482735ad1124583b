// tiermem::WriteTracker (include/tiermem/track.hpp): the scan tracker (runtime/tiering/
// scan_tracker.h) and the protection sampler (runtime/tiering/tracker.h) behind one interface,
// over one range of the caller's.
#include "tiermem/track.hpp"

#include "base/os.h"
#include "base/os_pagemap.h"
#include "runtime/tiering/scan_tracker.h"
#include "runtime/tiering/tracker.h"

namespace tiermem {

namespace {

class ScanWriteTracker final : public WriteTracker {
 public:
  ScanWriteTracker(std::unique_ptr<ScanTracker> t, void* addr, size_t bytes)
      : t_(std::move(t)), span_{addr, bytes} {}
  ~ScanWriteTracker() override { (void)t_->Untrack(span_.addr, span_.bytes); }
  const char* mechanism() const override { return ScanTracker::Name(t_->mechanism()); }
  StatusOr<size_t> Round(std::vector<size_t>* written) override {
    const uintptr_t base = reinterpret_cast<uintptr_t>(span_.addr);
    const size_t page = os::PageSize();
    return t_->Scan(&span_, 1, [&](uintptr_t start, uintptr_t end) {
      for (uintptr_t a = start; a < end; a += page) written->push_back((a - base) / page);
    });
  }

 private:
  std::unique_ptr<ScanTracker> t_;
  os::Span span_;
};

// A sample of `sample_` pages per round, its start moving on by a sample each round.
class ProtectWriteTracker final : public WriteTracker {
 public:
  ProtectWriteTracker(char* addr, size_t pages, size_t sample) : base_(addr), pages_(pages), sample_(sample) {
    Arm();
  }
  ~ProtectWriteTracker() override { ProtectTracker::Get().DisarmAll(); }
  const char* mechanism() const override { return "protect"; }
  StatusOr<size_t> Round(std::vector<size_t>* written) override {
    samples_.clear();
    ProtectTracker::Get().Collect(os::MonotonicNanos(), &samples_);
    const uintptr_t first = reinterpret_cast<uintptr_t>(base_) / os::PageSize();
    for (const AccessSample& s : samples_) {
      if (s.write) written->push_back(size_t(s.page - first));
    }
    const size_t looked = armed_;
    Arm();
    return looked;
  }

 private:
  void Arm() {
    batch_.clear();
    for (size_t i = 0; i < sample_ && i < pages_; ++i) batch_.push_back(base_ + ((next_ + i) % pages_) * os::PageSize());
    next_ = (next_ + batch_.size()) % pages_;
    armed_ = ProtectTracker::Get().Arm(batch_);
  }

  char* base_;
  size_t pages_, sample_, next_ = 0, armed_ = 0;
  std::vector<char*> batch_;
  std::vector<AccessSample> samples_;
};

// Whether `name` is a scan mechanism; *m gets it.
bool ScanMechanism(const std::string& name, ScanTracker::Mechanism* m) {
  if (name != "pagemap_scan" && name != "soft_dirty") return false;
  *m = name == "pagemap_scan" ? ScanTracker::Mechanism::kPagemapScan : ScanTracker::Mechanism::kSoftDirty;
  return true;
}

}  // namespace

std::vector<std::string> WriteTracker::Mechanisms() { return {"pagemap_scan", "soft_dirty", "protect"}; }

bool WriteTracker::Available(const std::string& mechanism, std::string* why) {
  ScanTracker::Mechanism m;
  if (ScanMechanism(mechanism, &m)) return ScanTracker::Usable(m, os::ProbeTracking(), why);
  if (mechanism == "protect") {
    const Status s = ProtectTracker::Get().Install();
    if (!s.ok()) *why = s.message();
    return s.ok();
  }
  *why = "unknown write tracking mechanism '" + mechanism + "' (pagemap_scan, soft_dirty, protect)";
  return false;
}

StatusOr<std::unique_ptr<WriteTracker>> WriteTracker::Start(const std::string& mechanism, void* addr, size_t bytes,
                                                            size_t sample_pages) {
  const size_t page = os::PageSize();
  if (addr == nullptr || bytes == 0 || reinterpret_cast<uintptr_t>(addr) % page != 0 || bytes % page != 0) {
    return InvalidArgument("WriteTracker: the range must be page aligned and not empty");
  }
  std::string why;
  if (!Available(mechanism, &why)) {
    ScanTracker::Mechanism known;
    return mechanism == "protect" || ScanMechanism(mechanism, &known) ? NotSupported(why) : InvalidArgument(why);
  }
  if (mechanism == "protect") {
    if (sample_pages == 0 || sample_pages > ProtectTracker::kMaxArmed) {
      return InvalidArgument("WriteTracker protect: sample_pages must be 1 to " + std::to_string(ProtectTracker::kMaxArmed));
    }
    return std::unique_ptr<WriteTracker>(new ProtectWriteTracker(static_cast<char*>(addr), bytes / page, sample_pages));
  }
  ScanTracker::Mechanism m = ScanTracker::Mechanism::kPagemapScan;
  ScanMechanism(mechanism, &m);
  TIERMEM_ASSIGN_OR_RETURN(std::unique_ptr<ScanTracker> t, ScanTracker::Open(m));
  TIERMEM_RETURN_IF_ERROR(t->Track(addr, bytes));
  return std::unique_ptr<WriteTracker>(new ScanWriteTracker(std::move(t), addr, bytes));
}

}  // namespace tiermem

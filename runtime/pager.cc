#include "runtime/pager.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sched.h>

#include <new>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

#include "runtime/log.h"
#include "runtime/runtime_thread.h"
#include "runtime/page_table.h"

namespace tiermem {
namespace {

constexpr size_t kPage = remote::kPage;
constexpr size_t kBatch = 256;  // faults served per round, and pages per eviction window

uint8_t S(PageState s) { return static_cast<uint8_t>(s); }

bool Cas(PageRecord& r, PageState from, PageState to) {
  uint8_t f = S(from);
  return r.state.compare_exchange_strong(f, S(to), std::memory_order_acq_rel);
}

// ---- userfaultfd: the only place the pager talks to it ----
int UffdOpen(bool* wp) {
  // Kernel-mode faults must reach the handler too: a write(2) or send(2) from a buffer whose
  // pages were evicted faults inside the kernel (copy_from_user). With UFFD_USER_MODE_ONLY such a
  // call would fail with EFAULT, so that mode is only the fallback for unprivileged processes
  // (vm.unprivileged_userfaultfd=0 refuses the full mode with EPERM).
  int fd = int(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
  if (fd < 0 && errno == EPERM) {
    fd = int(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY));
    if (fd >= 0) {
      TM_LOG_WARN("remote tier: userfaultfd in user-mode-only (not root, and "
                  "vm.unprivileged_userfaultfd=0): system calls that read an evicted buffer "
                  "fail with EFAULT; run as root or set the sysctl to 1");
    }
  }
  if (fd < 0) return -errno;
  uffdio_api api{};
  api.api = UFFD_API;
  api.features = UFFD_FEATURE_PAGEFAULT_FLAG_WP;
  if (ioctl(fd, UFFDIO_API, &api) == 0) {
    *wp = true;
    return fd;
  }
  // Kernels without write-protect on anonymous memory: a fresh descriptor, missing faults only.
  close(fd);
  fd = int(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
  if (fd < 0) return -errno;
  api = {};
  api.api = UFFD_API;
  if (ioctl(fd, UFFDIO_API, &api) != 0) {
    int err = errno;
    close(fd);
    return -err;
  }
  *wp = false;
  return fd;
}

int UffdWriteProtect(int uffd, void* addr, size_t len, bool protect) {
  uffdio_writeprotect w{};
  w.range.start = reinterpret_cast<uintptr_t>(addr);
  w.range.len = len;
  w.mode = protect ? UFFDIO_WRITEPROTECT_MODE_WP : UFFDIO_WRITEPROTECT_MODE_DONTWAKE;
  return ioctl(uffd, UFFDIO_WRITEPROTECT, &w) == 0 ? 0 : -errno;
}

// Installs `src` at `dst`; returns 0, -EEXIST when a page is already there, or another -errno.
// Nobody is woken: the caller publishes the page's new state first, then wakes (Pager::Wake), so
// a woken thread never sees the page still "in flight".
int UffdCopy(int uffd, void* dst, const void* src, bool wp) {
  uffdio_copy c{};
  c.dst = reinterpret_cast<uintptr_t>(dst);
  c.src = reinterpret_cast<uintptr_t>(src);
  c.len = kPage;
  c.mode = UFFDIO_COPY_MODE_DONTWAKE | (wp ? UFFDIO_COPY_MODE_WP : 0);
  for (;;) {
    if (ioctl(uffd, UFFDIO_COPY, &c) == 0) return 0;
    if (errno == EAGAIN) continue;  // the mm changed under it (e.g. fork): retry
    return -errno;
  }
}

int UffdZero(int uffd, void* dst) {
  uffdio_zeropage z{};
  z.range.start = reinterpret_cast<uintptr_t>(dst);
  z.range.len = kPage;
  z.mode = UFFDIO_ZEROPAGE_MODE_DONTWAKE;
  for (;;) {
    if (ioctl(uffd, UFFDIO_ZEROPAGE, &z) == 0) return 0;
    if (errno == EAGAIN) continue;
    return -errno;
  }
}

}  // namespace

StatusOr<std::unique_ptr<Pager>> Pager::Start(PagerConfig config) {
  std::unique_ptr<Pager> p(new Pager());
  TIERMEM_RETURN_IF_ERROR(p->Init(std::move(config)));
  return p;
}

Status Pager::Init(PagerConfig config) {
  config_ = std::move(config);
  if (!config_.region_of) return InvalidArgument("pager: no region lookup");
  TIERMEM_ASSIGN_OR_RETURN(std::vector<remote::Endpoint> eps, remote::ParseEndpointList(config_.servers));
  int fd = UffdOpen(&wp_);
  if (fd < 0) {
    return NotSupported(std::string("userfaultfd is not usable here (") + strerror(-fd) +
                        "); as non-root, set sysctl vm.unprivileged_userfaultfd=1");
  }
  uffd_ = fd;
  if (!wp_) {
    TM_LOG_WARN("remote tier: this kernel has no userfaultfd write-protect for anonymous memory: "
                "every eviction writes every touched page, and a page written while it is being "
                "evicted may lose that write");
  }
  pagemap_fd_ = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  std::string tried;
  for (const auto& ep : eps) {
    auto io = remote::MakeTransport(ep);
    Status s = io.ok() ? (*io)->Connect(config_.token, config_.timeout_ms) : io.status();
    if (s.ok()) {
      remote::SessionTicket ticket = (*io)->ticket();
      auto fault = remote::MakeTransport(ep);
      s = (*fault)->Connect(config_.token, config_.timeout_ms, &ticket);
      if (s.ok()) {
        io_ = std::move(*io);
        fault_ = std::move(*fault);
        // Busy-polling the fault connection (SetBusyPoll) saves a sleep and a wake-up per fault
        // on an idle machine but starves memd on a loaded 2-core one (p99 in milliseconds seen
        // here), so it is off.
        server_ = ep.ToString();
        break;
      }
    }
    tried += (tried.empty() ? "" : "; ") + s.message();
  }
  if (!io_) return Unavailable("no memory server reachable: " + tried);
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0) return ErrnoToStatus(errno, "eventfd");
  thread_ = std::thread([this] {
    OnRuntimeThreadStart();  // its own allocations never come from evictable pages
    FaultLoop();
  });
  TM_LOG_INFO("remote tier: memory server %s (write-protect tracking %s)", server_.c_str(), wp_ ? "on" : "off");
  return Status::Ok();
}

void Pager::PrepareFork(Region* regions, int nregions) {
  io_mu_.lock();  // no eviction runs across the fork
  if (forked_child_) {
    slots_mu_.lock();
    return;
  }
  // The child gets no fault handler and no userfaultfd registration (its evicted pages would
  // read as zeros), so every remote page comes back before the fork. Cheap when nothing is
  // remote: the scan stops at each region's high-water mark.
  for (int r = 0; r < nregions; ++r) {
    Region& region = regions[r];
    const uint64_t hw = region.high_water();
    for (uint64_t i = 0; i < hw; ++i) {
      uint8_t st = region.record(i).state.load(std::memory_order_acquire);
      if (st != S(PageState::kRemote) && st != S(PageState::kInFlight)) continue;
      uint64_t j = i;
      while (j < hw && region.record(j).state.load(std::memory_order_acquire) !=
                           S(PageState::kLocal) &&
             region.record(j).state.load(std::memory_order_acquire) != S(PageState::kFree)) {
        ++j;
      }
      auto got = FetchBackLocked(region, i, j - i);
      if (!got.ok()) Fatal(region.PageAddress(i), got.status());
      // Pages the fault handler is installing right now (kInFlight) finish on their own.
      for (uint64_t k = i; k < j; ++k) {
        while (region.record(k).state.load(std::memory_order_acquire) == S(PageState::kInFlight)) {
          sched_yield();
        }
      }
      i = j;
    }
  }
  slots_mu_.lock();
}

void Pager::AfterFork(bool child) {
  if (child) forked_child_ = true;
  slots_mu_.unlock();
  io_mu_.unlock();
}

Pager::~Pager() {
  if (forked_child_) {
    // The fault thread and the server connections belong to the parent: the thread does not
    // exist here, and a goodbye on the shared sockets would end the parent's session.
    new (&thread_) std::thread();
    (void)io_.release();
    (void)fault_.release();
    return;
  }
  if (thread_.joinable()) {
    uint64_t one = 1;
    (void)!write(stop_fd_, &one, sizeof(one));
    thread_.join();
  }
  if (io_) io_->Close();
  if (fault_) fault_->Close();
  if (uffd_ >= 0) close(uffd_);
  if (stop_fd_ >= 0) close(stop_fd_);
  if (pagemap_fd_ >= 0) close(pagemap_fd_);
}

PagerStats Pager::stats() const {
  PagerStats s;
  s.faults = faults_.load();
  s.zero_fills = zero_fills_.load();
  s.wp_faults = wp_faults_.load();
  s.evicted = evicted_.load();
  s.written = written_.load();
  s.skipped_clean = skipped_clean_.load();
  s.skipped_untouched = skipped_untouched_.load();
  s.fetched = fetched_.load();
  return s;
}

void Pager::Fatal(const void* addr, const Status& why) {
  TM_LOG_ERROR("remote tier: the page at %p could not be fetched from memory server %s: %s; "
               "exiting (status %d) rather than hand the program a zero page",
               addr, server_.c_str(), why.message().c_str(), kRemoteLostExitCode);
  _exit(kRemoteLostExitCode);
}

Status Pager::Register(void* addr, size_t bytes) {
  uffdio_register r{};
  r.range.start = reinterpret_cast<uintptr_t>(addr);
  r.range.len = bytes;
  r.mode = UFFDIO_REGISTER_MODE_MISSING | (wp_ ? UFFDIO_REGISTER_MODE_WP : 0);
  if (ioctl(uffd_, UFFDIO_REGISTER, &r) != 0) return ErrnoToStatus(errno, "userfaultfd register");
  return Status::Ok();
}

void Pager::Wake(void* addr, size_t bytes) {
  uffdio_range r{reinterpret_cast<uintptr_t>(addr), bytes};
  ioctl(uffd_, UFFDIO_WAKE, &r);
}

const remote::SlotRange* Pager::RangeOf(uint64_t slot) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), slot,
                             [](uint64_t s, const remote::SlotRange& r) { return s < r.first; });
  if (it == ranges_.begin()) return nullptr;
  --it;
  return slot < it->first + it->count ? &*it : nullptr;
}

StatusOr<uint64_t> Pager::TakeSlot() {
  std::lock_guard<std::mutex> lock(slots_mu_);
  if (free_slots_.empty()) {
    // Called with io_mu_ held (Evict): the io connection is ours.
    TIERMEM_ASSIGN_OR_RETURN(remote::SlotRange r, io_->AllocSlots(config_.slot_chunk));
    if (r.first + r.count >= (1ull << 32)) return ResourceExhausted("memory server slot numbers beyond 2^32");
    ranges_.insert(std::upper_bound(ranges_.begin(), ranges_.end(), r,
                                    [](const remote::SlotRange& a, const remote::SlotRange& b) { return a.first < b.first; }),
                   r);
    for (uint64_t s = r.first + r.count; s > r.first; --s) free_slots_.push_back(s - 1);
  }
  uint64_t s = free_slots_.back();
  free_slots_.pop_back();
  return s;
}

void Pager::GiveSlot(uint64_t slot) {
  std::lock_guard<std::mutex> lock(slots_mu_);
  free_slots_.push_back(slot);
}

Status Pager::AdoptRemote(Region& region, uint64_t first, uint64_t n) {
  if (forked_child_) return Unavailable(kForkedMessage);
  TIERMEM_RETURN_IF_ERROR(Register(region.PageAddress(first), n * kPage));
  for (uint64_t i = first; i < first + n; ++i) {
    PageRecord& r = region.record(i);
    r.remote_slot.store(0, std::memory_order_relaxed);
    r.flags.fetch_and(uint8_t(~kPageRemoteClean), std::memory_order_relaxed);
    r.state.store(S(PageState::kRemote), std::memory_order_release);
  }
  return Status::Ok();
}

StatusOr<uint64_t> Pager::Evict(Region& region, uint64_t first, uint64_t n) {
  std::lock_guard<std::mutex> io_lock(io_mu_);
  if (forked_child_) return Unavailable(kForkedMessage);
  char* base = region.PageAddress(first);
  TIERMEM_RETURN_IF_ERROR(Register(base, n * kPage));
  uint64_t became_remote = 0;
  std::vector<uint64_t> pm(kBatch);
  std::vector<uint8_t> claimed(kBatch);
  std::vector<remote::Completion> done(kBatch);
  for (uint64_t b = first; b < first + n; b += kBatch) {
    const uint64_t m = std::min<uint64_t>(kBatch, first + n - b);
    char* addr = region.PageAddress(b);
    // 1. Claim: kLocal -> kInFlight. Faults on claimed pages now wait for us.
    for (uint64_t i = 0; i < m; ++i) claimed[i] = Cas(region.record(b + i), PageState::kLocal, PageState::kInFlight);
    // Applies fn to each maximal run of claimed pages: pages we did not claim (being fetched by
    // the fault handler right now, say) must not be protected or dropped by us.
    auto for_claimed_runs = [&](auto&& fn) {
      for (uint64_t i = 0; i < m;) {
        if (!claimed[i]) {
          ++i;
          continue;
        }
        uint64_t j = i;
        while (j < m && claimed[j]) ++j;
        fn(region.PageAddress(b + i), (j - i) * kPage);
        i = j;
      }
    };
    // 2. Write-protect, so the contents we send are the contents we drop.
    if (wp_) {
      for_claimed_runs([&](char* a, size_t len) {
        int rc = UffdWriteProtect(uffd_, a, len, true);
        if (rc != 0) TM_LOG_WARN("remote tier: write-protect before eviction failed: %s", strerror(-rc));
      });
    }
    // 3. Which pages have contents (present or swapped)? Untouched ones need no write.
    bool have_pm = pagemap_fd_ >= 0 &&
                   pread(pagemap_fd_, pm.data(), m * 8, off_t(reinterpret_cast<uintptr_t>(addr) / kPage * 8)) == ssize_t(m * 8);
    // 4. Write the dirty pages.
    size_t posted = 0, completed = 0;
    Status failure;
    for (uint64_t i = 0; i < m; ++i) {
      if (!claimed[i]) continue;
      PageRecord& rec = region.record(b + i);
      bool populated = !have_pm || (pm[i] & (3ull << 62)) != 0;
      uint32_t slot1 = rec.remote_slot.load(std::memory_order_relaxed);
      if (!populated) {
        if (slot1 != 0) GiveSlot(slot1 - 1);
        rec.remote_slot.store(0, std::memory_order_relaxed);
        skipped_untouched_.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      if (wp_ && slot1 != 0 && (rec.flags.load(std::memory_order_relaxed) & kPageRemoteClean)) {
        skipped_clean_.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      if (slot1 == 0) {
        auto s = TakeSlot();
        if (!s.ok()) {
          failure = s.status();
          break;
        }
        slot1 = uint32_t(*s + 1);
        rec.remote_slot.store(slot1, std::memory_order_relaxed);
      }
      const remote::SlotRange* range;
      {
        std::lock_guard<std::mutex> lock(slots_mu_);
        range = RangeOf(slot1 - 1);
      }
      Status s = io_->PostWrite(*range, slot1 - 1, region.PageAddress(b + i), i);
      if (!s.ok()) {
        failure = s;
        break;
      }
      ++posted;
    }
    while (completed < posted) {
      auto got = io_->Poll(done.data(), done.size(), -1);
      if (!got.ok()) {
        if (failure.ok()) failure = got.status();
        break;
      }
      for (size_t k = 0; k < *got; ++k) {
        if (!done[k].status.ok() && failure.ok()) failure = done[k].status;
      }
      completed += *got;
    }
    if (!failure.ok()) {
      // Nothing is dropped: pages go back to local, unprotected, and any waiter retries.
      for (uint64_t i = 0; i < m; ++i) {
        if (claimed[i]) region.record(b + i).state.store(S(PageState::kLocal), std::memory_order_release);
      }
      if (wp_) for_claimed_runs([&](char* a, size_t len) { UffdWriteProtect(uffd_, a, len, false); });
      Wake(addr, m * kPage);
      return failure.WithContext("evicting to memory server " + server_);
    }
    written_.fetch_add(posted, std::memory_order_relaxed);
    // 5. Drop, mark remote (the server copy is current: clean), and wake waiters to fault again.
    for_claimed_runs([&](char* a, size_t len) {
      if (madvise(a, len, MADV_DONTNEED) != 0) {
        TM_LOG_WARN("remote tier: madvise(DONTNEED) after eviction: %s", strerror(errno));
      }
    });
    for (uint64_t i = 0; i < m; ++i) {
      if (!claimed[i]) continue;
      PageRecord& rec = region.record(b + i);
      rec.flags.fetch_or(kPageRemoteClean, std::memory_order_relaxed);
      rec.state.store(S(PageState::kRemote), std::memory_order_release);
      ++became_remote;
    }
    Wake(addr, m * kPage);
  }
  evicted_.fetch_add(became_remote, std::memory_order_relaxed);
  return became_remote;
}

StatusOr<uint64_t> Pager::FetchBack(Region& region, uint64_t first, uint64_t n) {
  std::lock_guard<std::mutex> io_lock(io_mu_);
  if (forked_child_) return Unavailable(kForkedMessage);
  return FetchBackLocked(region, first, n);
}

StatusOr<uint64_t> Pager::FetchBackLocked(Region& region, uint64_t first, uint64_t n) {
  void* mem = mmap(nullptr, kBatch * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return ErrnoToStatus(errno, "mmap staging buffer");
  auto* staging = static_cast<char*>(mem);
  std::vector<remote::Completion> done(kBatch);
  std::vector<uint64_t> idx(kBatch);
  uint64_t fetched = 0;
  Status failure;
  for (uint64_t b = first; b < first + n && failure.ok(); b += kBatch) {
    const uint64_t m = std::min<uint64_t>(kBatch, first + n - b);
    size_t posted = 0;
    for (uint64_t i = 0; i < m; ++i) {
      PageRecord& rec = region.record(b + i);
      if (!Cas(rec, PageState::kRemote, PageState::kInFlight)) continue;
      uint32_t slot1 = rec.remote_slot.load(std::memory_order_relaxed);
      if (slot1 == 0) {  // nothing on the server: a zero page
        int rc = UffdZero(uffd_, region.PageAddress(b + i));
        if (rc != 0 && rc != -EEXIST) failure = Internal(std::string("UFFDIO_ZEROPAGE: ") + strerror(-rc));
        rec.flags.fetch_and(uint8_t(~kPageRemoteClean), std::memory_order_relaxed);
        rec.state.store(S(PageState::kLocal), std::memory_order_release);
        continue;
      }
      const remote::SlotRange* range;
      {
        std::lock_guard<std::mutex> lock(slots_mu_);
        range = RangeOf(slot1 - 1);
      }
      idx[posted] = b + i;
      Status s = io_->PostRead(*range, slot1 - 1, staging + posted * kPage, posted);
      if (!s.ok()) Fatal(region.PageAddress(b + i), s);
      ++posted;
    }
    size_t completed = 0;
    while (completed < posted) {
      auto got = io_->Poll(done.data(), done.size(), -1);
      if (!got.ok()) Fatal(region.PageAddress(idx[completed]), got.status());
      for (size_t k = 0; k < *got; ++k) {
        uint64_t j = done[k].cookie;
        void* dst = region.PageAddress(idx[j]);
        if (!done[k].status.ok()) Fatal(dst, done[k].status);
        int rc = UffdCopy(uffd_, dst, staging + j * kPage, wp_);
        if (rc != 0 && rc != -EEXIST) Fatal(dst, Internal(std::string("UFFDIO_COPY: ") + strerror(-rc)));
        PageRecord& rec = region.record(idx[j]);
        if (wp_) rec.flags.fetch_or(kPageRemoteClean, std::memory_order_relaxed);
        else rec.flags.fetch_and(uint8_t(~kPageRemoteClean), std::memory_order_relaxed);
        rec.state.store(S(PageState::kLocal), std::memory_order_release);
        ++fetched;
      }
      completed += *got;
    }
    Wake(region.PageAddress(b), m * kPage);
  }
  munmap(mem, kBatch * kPage);
  fetched_.fetch_add(fetched, std::memory_order_relaxed);
  if (!failure.ok()) return failure;
  return fetched;
}

void Pager::OnDiscard(Region& region, uint64_t first, uint64_t n) {
  std::lock_guard<std::mutex> io_lock(io_mu_);  // no eviction of these pages meanwhile
  for (uint64_t i = first; i < first + n; ++i) {
    while (region.record(i).state.load(std::memory_order_acquire) == S(PageState::kInFlight)) {
      sched_yield();  // a fault being served by the handler thread
    }
  }
  // Drop first, then forget the server copies: a touch in between faults (missing) on a page
  // that is still kRemote and would read the old copy; the caller owns these pages and does not
  // touch them while discarding.
  madvise(region.PageAddress(first), n * kPage, MADV_DONTNEED);
  for (uint64_t i = first; i < first + n; ++i) {
    PageRecord& rec = region.record(i);
    uint32_t slot1 = rec.remote_slot.exchange(0, std::memory_order_relaxed);
    if (slot1 != 0) GiveSlot(slot1 - 1);
    rec.flags.fetch_and(uint8_t(~kPageRemoteClean), std::memory_order_relaxed);
    if (rec.state.load(std::memory_order_relaxed) == S(PageState::kRemote)) {
      rec.state.store(S(PageState::kLocal), std::memory_order_release);
    }
  }
}

void Pager::OnFree(Region& region, uint64_t first, uint64_t n) {
  // Wait for an eviction in progress (it holds io_mu_ from claim to drop): otherwise it could
  // drop pages after this run was freed and handed out again, losing the new owner's data.
  std::lock_guard<std::mutex> io_lock(io_mu_);
  if (forked_child_) {  // nothing of this process is on the server; the range is not registered
    madvise(region.PageAddress(first), n * kPage, MADV_DONTNEED);
    for (uint64_t i = first; i < first + n; ++i) region.record(i).remote_slot.store(0);
    return;
  }
  // A fault on this run may still be in flight in the handler thread (which never takes io_mu_):
  // let it install and mark the page before the run changes hands, or its late "local" mark and
  // write-protect would land on the next owner's page.
  for (uint64_t i = first; i < first + n; ++i) {
    while (region.record(i).state.load(std::memory_order_acquire) == S(PageState::kInFlight)) {
      sched_yield();
    }
  }
  bool any = false;
  for (uint64_t i = first; i < first + n; ++i) {
    PageRecord& rec = region.record(i);
    uint32_t slot1 = rec.remote_slot.exchange(0, std::memory_order_relaxed);
    if (slot1 != 0) GiveSlot(slot1 - 1);
    rec.flags.fetch_and(uint8_t(~kPageRemoteClean), std::memory_order_relaxed);
    uint8_t st = rec.state.load(std::memory_order_relaxed);
    if (st == S(PageState::kRemote) || st == S(PageState::kInFlight)) any = true;
    if (st == S(PageState::kRemote)) rec.state.store(S(PageState::kLocal), std::memory_order_release);
  }
  (void)any;
  char* addr = region.PageAddress(first);
  madvise(addr, n * kPage, MADV_DONTNEED);
  uffdio_range r{reinterpret_cast<uintptr_t>(addr), n * kPage};
  ioctl(uffd_, UFFDIO_UNREGISTER, &r);  // EINVAL when it never was registered: fine
}

void Pager::FaultLoop() {
  void* mem = mmap(nullptr, (kBatch + 1) * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    TM_LOG_ERROR("remote tier: fault handler cannot map its buffers: %s", strerror(errno));
    _exit(kRemoteLostExitCode);
  }
  auto* staging = static_cast<char*>(mem);
  struct Pending {
    Region* region;
    uint64_t index;
    bool write;
  };
  std::vector<Pending> pending;
  pending.reserve(kBatch);
  std::vector<remote::Completion> done(kBatch);
  uffd_msg msgs[64];
  for (;;) {
    pollfd fds[2] = {{uffd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    int rc = poll(fds, 2, -1);
    if (rc < 0) {
      if (errno == EINTR) continue;
      TM_LOG_ERROR("remote tier: fault handler poll: %s", strerror(errno));
      _exit(kRemoteLostExitCode);
    }
    if (fds[1].revents & POLLIN) break;
    pending.clear();
    // Take every fault queued now (up to kBatch), post the reads, then install as they arrive.
    while (pending.size() + 64 <= kBatch) {
      ssize_t got = read(uffd_, msgs, sizeof(msgs));
      if (got <= 0) break;
      for (size_t k = 0; k < size_t(got) / sizeof(uffd_msg); ++k) {
        const uffd_msg& msg = msgs[k];
        if (msg.event != UFFD_EVENT_PAGEFAULT) continue;
        char* addr = reinterpret_cast<char*>(msg.arg.pagefault.address & ~uint64_t(kPage - 1));
        Region* region = config_.region_of(addr);
        if (region == nullptr) {  // not ours: cannot happen; never leave a thread hanging
          UffdZero(uffd_, addr);
          Wake(addr, kPage);
          continue;
        }
        uint64_t index = region->PageIndex(addr);
        PageRecord& rec = region->record(index);
        const bool write = (msg.arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WRITE) != 0;
        if (msg.arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP) {
          // A write to a write-protected page. Clean local page: it becomes dirty. Page being
          // evicted: wait for the eviction to finish (it wakes us; we fault again).
          // Claim it first, so an evictor cannot take it between our check and the unprotect.
          if (Cas(rec, PageState::kLocal, PageState::kInFlight)) {
            rec.flags.fetch_and(uint8_t(~kPageRemoteClean), std::memory_order_relaxed);
            wp_faults_.fetch_add(1, std::memory_order_relaxed);
            UffdWriteProtect(uffd_, addr, kPage, false);
            rec.state.store(S(PageState::kLocal), std::memory_order_release);
            Wake(addr, kPage);
          } else if (rec.state.load(std::memory_order_acquire) != S(PageState::kInFlight)) {
            Wake(addr, kPage);
          }
          continue;
        }
        if (Cas(rec, PageState::kRemote, PageState::kInFlight)) {
          uint32_t slot1 = rec.remote_slot.load(std::memory_order_relaxed);
          if (slot1 == 0) {  // allocated on kRemote, never written: zero
            int zr = UffdZero(uffd_, addr);
            if (zr != 0 && zr != -EEXIST) Fatal(addr, Internal(std::string("UFFDIO_ZEROPAGE: ") + strerror(-zr)));
            rec.flags.fetch_and(uint8_t(~kPageRemoteClean), std::memory_order_relaxed);
            zero_fills_.fetch_add(1, std::memory_order_relaxed);
            rec.state.store(S(PageState::kLocal), std::memory_order_release);
            Wake(addr, kPage);
            continue;
          }
          const remote::SlotRange* range;
          {
            std::lock_guard<std::mutex> lock(slots_mu_);
            range = RangeOf(slot1 - 1);
          }
          size_t j = pending.size();
          pending.push_back(Pending{region, index, write});
          Status s = fault_->PostRead(*range, slot1 - 1, staging + j * kPage, j);
          if (!s.ok()) Fatal(addr, s);
          continue;
        }
        // Local (or free) and missing: a fresh page of a registered range, or one another thread
        // has just installed. Claimed like any other, then a zero page, or a wake if it is there.
        bool mine = Cas(rec, PageState::kLocal, PageState::kInFlight);
        if (!mine && rec.state.load(std::memory_order_acquire) == S(PageState::kInFlight)) {
          continue;  // ours in this batch, or an evictor's or fetcher's: they wake it
        }
        // The page was dropped here (the heap returns empty spans with MADV_DONTNEED) or never
        // touched: it becomes a zero page that is not write-protected, so whatever copy the
        // server holds is no longer current. Without clearing the flag, the next eviction
        // would skip the write and a later fault would bring back stale data.
        if (mine) rec.flags.fetch_and(uint8_t(~kPageRemoteClean), std::memory_order_relaxed);
        UffdZero(uffd_, addr);
        if (mine) rec.state.store(S(PageState::kLocal), std::memory_order_release);
        Wake(addr, kPage);
      }
    }
    size_t completed = 0;
    while (completed < pending.size()) {
      auto got = fault_->Poll(done.data(), done.size(), -1);
      if (!got.ok()) {
        const Pending& p = pending[completed];
        Fatal(p.region->PageAddress(p.index), got.status());
      }
      if (*got == 0) {
        const Pending& p = pending[completed];
        Fatal(p.region->PageAddress(p.index),
              DeadlineExceeded("no reply within " + std::to_string(config_.timeout_ms) + " ms"));
      }
      for (size_t k = 0; k < *got; ++k) {
        const Pending& p = pending[done[k].cookie];
        char* dst = p.region->PageAddress(p.index);
        if (!done[k].status.ok()) Fatal(dst, done[k].status);
        // Installed write-protected after a read fault: it stays clean until written.
        const bool protect = wp_ && !p.write;
        int cr = UffdCopy(uffd_, dst, staging + done[k].cookie * kPage, protect);
        if (cr != 0 && cr != -EEXIST) Fatal(dst, Internal(std::string("UFFDIO_COPY: ") + strerror(-cr)));
        PageRecord& rec = p.region->record(p.index);
        if (protect) rec.flags.fetch_or(kPageRemoteClean, std::memory_order_relaxed);
        else rec.flags.fetch_and(uint8_t(~kPageRemoteClean), std::memory_order_relaxed);
        faults_.fetch_add(1, std::memory_order_relaxed);  // before the wake: counted when seen
        rec.state.store(S(PageState::kLocal), std::memory_order_release);
        Wake(dst, kPage);
      }
      completed += *got;
    }
  }
  munmap(mem, (kBatch + 1) * kPage);
}

}  // namespace tiermem

// The messages a userfaultfd's reader takes while one of its own UFFDIO calls waits out a fork.
//
// A fork() of a process whose userfaultfd asked for fork events blocks until the descriptor's
// reader has read the fork event, and from the copy of the registered ranges until that read the
// kernel answers UFFDIO_COPY, _ZEROPAGE and _WRITEPROTECT on the descriptor with EAGAIN. The
// reader is also the thread that installs pages: retrying its ioctl without reading, it waits for
// the fork, and the fork for it (the hang that kept TIERMEM_FORK=share off by default). So the
// reader installs this as its thread's UffdAgainHandler: on each EAGAIN it reads what is queued,
// hands a fork event on at once (its callback takes no lock and allocates nothing) and keeps the
// page faults, in order, for the reader's next Read. Nothing is dropped: a fault that finds the
// backlog full is woken instead (its thread retries the access and faults again, by then read).
// The reader reads through Read, which hands fork events to the same callback: they are handled
// in this one place, whenever they are read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/os.h"

namespace tiermem {

class UffdBacklog {
 public:
  using ForkFn = void (*)(void* arg, int child_fd);
  // `on_fork` receives each fork event's new descriptor (it then owns it). Allocates here only.
  UffdBacklog(int uffd, ForkFn on_fork, void* arg, size_t capacity = 4096)
      : uffd_(uffd), on_fork_(on_fork), arg_(arg), cap_(capacity), buf_(new os::UffdFault[capacity]) {}
  UffdBacklog(const UffdBacklog&) = delete;
  UffdBacklog& operator=(const UffdBacklog&) = delete;

  // Installs / removes this as the calling thread's UffdAgainHandler (the reader's thread).
  void Install() { os::SetUffdAgainHandler(&UffdBacklog::OnAgain, this); }
  static void Uninstall() { os::SetUffdAgainHandler(nullptr, nullptr); }

  bool empty() const { return n_ == 0; }
  size_t size() const { return n_; }

  // Up to `max` page faults: the kept ones first, oldest first, then what the descriptor has
  // queued. A fork event read on the way goes to `on_fork`, as in OnAgain: the caller sees page
  // faults only (0 when the descriptor held nothing else).
  StatusOr<size_t> Read(os::UffdFault* out, size_t max) {
    size_t got = 0;
    while (got < max && n_ > 0) {
      out[got++] = buf_[head_];
      head_ = (head_ + 1) % cap_;
      --n_;
    }
    if (got == max) return got;
    auto more = os::UffdReadFaults(uffd_, out + got, max - got);
    if (!more.ok()) return more;
    const size_t end = got + *more;
    for (size_t k = got; k < end; ++k) {
      if (out[k].fork_fd >= 0) {
        on_fork_(arg_, out[k].fork_fd);
      } else {
        out[got++] = out[k];
      }
    }
    return got;
  }

  // The UffdAgainHandler: reads everything queued now. Errors are left for the next Read.
  static void OnAgain(void* self) { static_cast<UffdBacklog*>(self)->Drain(); }

  uint64_t kept_total() const { return kept_total_; }  // faults kept so far (for tests)

 private:
  void Drain() {
    os::UffdFault msgs[64];
    for (;;) {
      auto got = os::UffdReadFaults(uffd_, msgs, 64);
      if (!got.ok() || *got == 0) return;
      for (size_t k = 0; k < *got; ++k) {
        const os::UffdFault& f = msgs[k];
        if (f.fork_fd >= 0) {
          on_fork_(arg_, f.fork_fd);
        } else if (n_ < cap_) {
          buf_[(head_ + n_) % cap_] = f;
          ++n_;
          ++kept_total_;
        } else {
          const uintptr_t page = f.address & ~uintptr_t(os::PageSize() - 1);
          os::UffdWake(uffd_, reinterpret_cast<void*>(page), os::PageSize());
        }
      }
    }
  }

  const int uffd_;
  const ForkFn on_fork_;
  void* const arg_;
  const size_t cap_;
  std::unique_ptr<os::UffdFault[]> buf_;
  size_t head_ = 0;
  size_t n_ = 0;
  uint64_t kept_total_ = 0;
};

}  // namespace tiermem

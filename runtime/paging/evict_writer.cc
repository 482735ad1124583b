// The eviction writer's bounded queue (evict_writer.h); the writer thread's loop is the pager's
// (pager_writer.cc).
#include "runtime/paging/evict_writer.h"

#include "base/os.h"

namespace tiermem {
namespace {

uint64_t ClaimedPages(const EvictJob& job) {
  uint64_t n = 0;
  for (uint8_t c : job.claimed) n += c;
  return n;
}

}  // namespace

bool EvictWriter::Push(std::unique_ptr<EvictJob> job) {
  std::unique_lock<std::mutex> lock(mu_);
  if (depth_ >= kMaxJobs && !stop_) {
    ++full_waits_;
    ++waiting_;
    room_cv_.wait(lock, [&] { return depth_ < kMaxJobs || stop_; });
    --waiting_;
  }
  if (stop_) return false;
  if (job->ticket != nullptr) {
    ++job->ticket->pending;
    job->ticket->pages_pending += ClaimedPages(*job);
  }
  ++depth_;
  queue_.push_back(std::move(job));
  if (event_fd_ >= 0) os::EventFdSignal(event_fd_);
  work_cv_.notify_one();
  return true;
}

bool EvictWriter::Take(std::vector<std::unique_ptr<EvictJob>>* out, bool wait) {
  std::unique_lock<std::mutex> lock(mu_);
  if (wait) work_cv_.wait(lock, [&] { return !queue_.empty() || stop_; });
  if (event_fd_ >= 0) os::EventFdClear(event_fd_);  // signalled again by the next Push
  if (queue_.empty()) return !stop_;
  while (!queue_.empty()) {
    out->push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  return true;
}

void EvictWriter::Done(const EvictJob& job, uint64_t became_remote, bool lost_window) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (EvictTicket* t = job.ticket) {
      t->became_remote += became_remote;
      if (!job.failure.ok() && !lost_window && t->failure.ok()) {
        t->failure = job.failure;
        t->failure_server = job.failure_server;
      }
      if (lost_window) t->lost_windows.push_back({job.region, job.idx});
      --t->pending;
      t->pages_pending -= ClaimedPages(job);
    }
    --depth_;
  }
  room_cv_.notify_one();
  done_cv_.notify_all();
}

uint64_t EvictWriter::PagesPending(const EvictTicket* t) const {
  std::lock_guard<std::mutex> lock(mu_);
  return t->pages_pending;
}

void EvictWriter::Wait(EvictTicket* t) {
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return t->pending == 0; });
}

void EvictWriter::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return depth_ == 0; });
}

void EvictWriter::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  room_cv_.notify_all();
  work_cv_.notify_all();
  if (event_fd_ >= 0) os::EventFdSignal(event_fd_);
}

size_t EvictWriter::depth() const {
  std::lock_guard<std::mutex> lock(mu_);
  return depth_;
}

uint64_t EvictWriter::full_waits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return full_waits_;
}

uint64_t EvictWriter::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_;
}

}  // namespace tiermem

#include "backends/remote/rdma/rdma_transport.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/mman.h>

#include "backends/remote/rdma/rdma_api.h"
#include "base/os.h"
#include "base/own_memory.h"

namespace tiermem::remote {
namespace {

using ConnectData = proto::RdmaConnectData;

}  // namespace

Status RdmaDevicePresent() {
  // No entry in sysfs: no device, and no reason to load libibverbs at all.
  if (!VerbsDeviceInSysfs()) {
    return Unavailable("no RDMA device: /sys/class/infiniband lists no verbs device on this host (no RDMA NIC, no rxe/siw)");
  }
  Status why;
  const VerbsApi* v = Verbs(&why);
  if (v == nullptr) return Unavailable("no RDMA: " + why.message());
  int n = 0;
  ibv_device** list = v->get_device_list(&n);
  if (list == nullptr) {
    return Unavailable(std::string("no RDMA device: libibverbs found no verbs device on this host (ibv_get_device_list: ") +
                       strerror(errno) + ")");
  }
  v->free_device_list(list);
  if (n == 0) return Unavailable("no RDMA device: libibverbs found no verbs device on this host (no RDMA NIC, no rxe/siw)");
  return Status::Ok();
}

struct RdmaTransport::WorkRequests {
  std::vector<ibv_sge> sges = std::vector<ibv_sge>(1024);
  std::vector<ibv_send_wr> wrs = std::vector<ibv_send_wr>(1024);
};

RdmaTransport::RdmaTransport(Endpoint endpoint)
    : endpoint_(endpoint), control_(endpoint, proto::DataPath::kRdma), wrs_(std::make_unique<WorkRequests>()) {}

RdmaTransport::~RdmaTransport() { Teardown(); }

Status RdmaTransport::WaitEvent(int expected, uint32_t timeout_ms) {
  pollfd p{channel_->fd, POLLIN, 0};
  int n;
  do {
    n = poll(&p, 1, int(timeout_ms));
  } while (n < 0 && errno == EINTR);
  if (n == 0) return Unavailable("memory server " + name() + ": RDMA connection setup timed out");
  rdma_cm_event* ev = nullptr;
  if (cm_->get_cm_event(channel_, &ev) != 0) return ErrnoToStatus(errno, "rdma_get_cm_event");
  int type = ev->event;
  int status = ev->status;
  cm_->ack_cm_event(ev);
  if (type != expected) {
    if (type == RDMA_CM_EVENT_REJECTED) {
      return PermissionDenied("memory server " + name() + ": RDMA connection rejected (session not accepted)");
    }
    return Unavailable("memory server " + name() + ": RDMA connection setup: " + cm_->event_str(rdma_cm_event_type(type)) +
                       " (status " + std::to_string(status) + ")");
  }
  return Status::Ok();
}

Status RdmaTransport::Connect(const std::string& token, uint32_t timeout_ms, const SessionTicket* join) {
  timeout_ms_ = timeout_ms == 0 ? 5000 : timeout_ms;
  TIERMEM_RETURN_IF_ERROR(RdmaDevicePresent());
  Status why;
  v_ = Verbs(&why);
  cm_ = v_ != nullptr ? RdmaCm(&why) : nullptr;
  if (v_ == nullptr || cm_ == nullptr) return Unavailable("memory server " + name() + ": no RDMA: " + why.message());
  TIERMEM_RETURN_IF_ERROR(control_.Connect(token, timeout_ms_, join));
  Status s = ResolveRoute();
  if (s.ok()) s = CreateQueues();
  if (s.ok()) s = Establish();
  if (!s.ok()) {
    Teardown();
    control_.Close();
    return s;
  }
  quota_pages_ = control_.quota_pages();
  capacity_pages_ = control_.capacity_pages();
  broken_ = Status::Ok();
  return Status::Ok();
}

// Connect's steps; on a failure Connect tears down whatever was made.
// The CM id, its address and its route to the server.
Status RdmaTransport::ResolveRoute() {
  channel_ = cm_->create_event_channel();
  if (channel_ == nullptr) return ErrnoToStatus(errno, "rdma_create_event_channel");
  if (cm_->create_id(channel_, &id_, nullptr, RDMA_PS_TCP) != 0) return ErrnoToStatus(errno, "rdma_create_id");
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* res = nullptr;
  if (getaddrinfo(endpoint_.host.c_str(), std::to_string(endpoint_.port).c_str(), &hints, &res) != 0 || res == nullptr) {
    return Unavailable("cannot resolve " + endpoint_.host);
  }
  int rc = cm_->resolve_addr(id_, nullptr, res->ai_addr, int(timeout_ms_));
  freeaddrinfo(res);
  if (rc != 0) return Unavailable("memory server " + name() + ": rdma_resolve_addr: " + strerror(errno));
  TIERMEM_RETURN_IF_ERROR(WaitEvent(RDMA_CM_EVENT_ADDR_RESOLVED, timeout_ms_));
  if (cm_->resolve_route(id_, int(timeout_ms_)) != 0) return ErrnoToStatus(errno, "rdma_resolve_route");
  return WaitEvent(RDMA_CM_EVENT_ROUTE_RESOLVED, timeout_ms_);
}

// The protection domain, the completion queue and its channel, the queue pair, and the
// registered staging pages.
Status RdmaTransport::CreateQueues() {
  pd_ = v_->alloc_pd(id_->verbs);
  if (pd_ == nullptr) return ErrnoToStatus(errno, "ibv_alloc_pd");
  comp_channel_ = v_->create_comp_channel(id_->verbs);
  if (comp_channel_ == nullptr) return ErrnoToStatus(errno, "ibv_create_comp_channel");
  int fl = fcntl(comp_channel_->fd, F_GETFL);
  if (fl < 0 || fcntl(comp_channel_->fd, F_SETFL, fl | O_NONBLOCK) != 0) {
    return ErrnoToStatus(errno, "fcntl(completion channel, O_NONBLOCK)");
  }
  cq_ = v_->create_cq(id_->verbs, int(kStagingPages * 2), nullptr, comp_channel_, 0);
  if (cq_ == nullptr) return ErrnoToStatus(errno, "ibv_create_cq");
  cq_armed_ = false;
  ibv_qp_init_attr qa{};
  qa.send_cq = cq_;
  qa.recv_cq = cq_;
  qa.qp_type = IBV_QPT_RC;
  qa.sq_sig_all = 0;  // selective signalling
  qa.cap.max_send_wr = uint32_t(kStagingPages + 8);
  qa.cap.max_recv_wr = 1;
  qa.cap.max_send_sge = 1;
  qa.cap.max_recv_sge = 1;
  if (cm_->create_qp(id_, pd_, &qa) != 0) return ErrnoToStatus(errno, "rdma_create_qp");
  qp_ = true;
  // Staging pages in ordinary DRAM (never a movable CXL node: long-term pinning is refused there).
  void* mem = mmap(nullptr, kStagingPages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (mem == MAP_FAILED) return ErrnoToStatus(errno, "mmap staging");
  staging_ = static_cast<char*>(mem);
  CountOwnMapped(static_cast<int64_t>(kStagingPages * kPage));  // populated: resident whole
  staging_mr_ = v_->reg_mr(pd_, staging_, kStagingPages * kPage, IBV_ACCESS_LOCAL_WRITE);
  if (staging_mr_ == nullptr) return ErrnoToStatus(errno, "ibv_reg_mr(staging)");
  free_staging_.clear();
  for (size_t i = kStagingPages; i > 0; --i) free_staging_.push_back(i - 1);
  return Status::Ok();
}

// The connection itself, carrying the control session's ticket so memd joins the two.
Status RdmaTransport::Establish() {
  ConnectData cd{};
  SessionTicket t = control_.ticket();
  cd.session = t.session;
  std::memcpy(cd.secret, t.secret, sizeof(cd.secret));
  rdma_conn_param cp{};
  cp.private_data = &cd;
  cp.private_data_len = sizeof(cd);
  cp.initiator_depth = 16;
  cp.responder_resources = 16;
  cp.retry_count = 7;
  cp.rnr_retry_count = 7;
  if (cm_->connect(id_, &cp) != 0) return ErrnoToStatus(errno, "rdma_connect");
  return WaitEvent(RDMA_CM_EVENT_ESTABLISHED, timeout_ms_);
}

StatusOr<SlotRange> RdmaTransport::AllocSlots(uint64_t count) {
  TIERMEM_ASSIGN_OR_RETURN(SlotRange r, control_.AllocSlots(count));
  if (r.rkey == 0 && r.remote_addr == 0) {
    return Internal("memory server " + name() + ": allocation came without a memory registration");
  }
  return r;
}

Status RdmaTransport::Post(const SlotRange& range, uint64_t slot, uint32_t offset, uint32_t length, bool write,
                           const void* src, void* dst, uint64_t cookie) {
  TIERMEM_RETURN_IF_ERROR(CheckPart(offset, length));
  if (!broken_.ok()) return broken_;
  if (id_ == nullptr) return Unavailable(name() + ": not connected");
  if (slot < range.first || slot >= range.first + range.count) {
    return InvalidArgument("slot " + std::to_string(slot) + " outside its range");
  }
  while (free_staging_.empty()) {
    TIERMEM_RETURN_IF_ERROR(Doorbell());
    TIERMEM_RETURN_IF_ERROR(Reap(int(timeout_ms_)));
  }
  Request r;
  r.seq = next_seq_++;
  r.cookie = cookie;
  r.write = write;
  r.remote_addr = range.remote_addr + (slot - range.first) * kPage + offset;
  r.rkey = range.rkey;
  r.length = length;
  r.staging = free_staging_.back();
  free_staging_.pop_back();
  r.dst = dst;
  if (write) std::memcpy(staging_ + r.staging * kPage, src, length);
  queued_.push_back(r);
  return Status::Ok();
}

Status RdmaTransport::PostWrite(const SlotRange& range, uint64_t slot, const void* page, uint64_t cookie) {
  return Post(range, slot, 0, uint32_t(kPage), true, page, nullptr, cookie);
}

Status RdmaTransport::PostRead(const SlotRange& range, uint64_t slot, void* page, uint64_t cookie) {
  return Post(range, slot, 0, uint32_t(kPage), false, nullptr, page, cookie);
}

Status RdmaTransport::PostWritePart(const SlotRange& range, uint64_t slot, uint32_t offset, uint32_t length,
                                    const void* data, uint64_t cookie) {
  return Post(range, slot, offset, length, true, data, nullptr, cookie);
}

Status RdmaTransport::PostReadPart(const SlotRange& range, uint64_t slot, uint32_t offset, uint32_t length,
                                   void* data, uint64_t cookie) {
  return Post(range, slot, offset, length, false, nullptr, data, cookie);
}

Status RdmaTransport::Doorbell() {
  if (queued_.empty()) return Status::Ok();
  if (wrs_->sges.size() < queued_.size()) {
    wrs_->sges.resize(queued_.size());
    wrs_->wrs.resize(queued_.size());
  }
  ibv_sge* sges = wrs_->sges.data();
  ibv_send_wr* wrs = wrs_->wrs.data();
  for (size_t i = 0; i < queued_.size(); ++i) {
    const Request& r = queued_[i];
    sges[i].addr = reinterpret_cast<uintptr_t>(staging_ + r.staging * kPage);
    sges[i].length = r.length;
    sges[i].lkey = staging_mr_->lkey;
    ibv_send_wr& w = wrs[i];
    w = {};
    w.wr_id = r.seq;
    w.sg_list = &sges[i];
    w.num_sge = 1;
    w.opcode = r.write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
    bool last = i + 1 == queued_.size();
    if (last || ++since_signal_ >= kSignalEvery) {
      w.send_flags = IBV_SEND_SIGNALED;
      since_signal_ = 0;
    }
    w.wr.rdma.remote_addr = r.remote_addr;
    w.wr.rdma.rkey = r.rkey;
    w.next = last ? nullptr : &wrs[i + 1];
  }
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(id_->qp, wrs, &bad);
  if (rc != 0) return Fail(Unavailable("memory server " + name() + ": ibv_post_send: " + strerror(rc)));
  for (auto& r : queued_) posted_.push_back(r);
  queued_.clear();
  return Status::Ok();
}

Status RdmaTransport::Drain() {
  ibv_wc wc[32];
  for (;;) {
    int n = ibv_poll_cq(cq_, 32, wc);
    if (n < 0) return Fail(Unavailable("memory server " + name() + ": ibv_poll_cq failed"));
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        return Fail(Unavailable("memory server " + name() + ": RDMA " +
                                std::string(v_->wc_status_str(wc[i].status)) + " (server gone or access refused)"));
      }
      // In-order completion: this signalled request retires every earlier one.
      while (!posted_.empty() && posted_.front().seq <= wc[i].wr_id) {
        Request r = posted_.front();
        posted_.pop_front();
        if (!r.write) std::memcpy(r.dst, staging_ + r.staging * kPage, r.length);
        free_staging_.push_back(r.staging);
        ready_.push_back(Completion{r.cookie, Status::Ok()});
      }
    }
    if (n < 32) return Status::Ok();
  }
}

StatusOr<bool> RdmaTransport::WaitCompletionEvent(uint64_t deadline_ns) {
  for (;;) {
    // Take a pending event first (the descriptor is non-blocking).
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    if (v_->get_cq_event(comp_channel_, &ev_cq, &ev_ctx) == 0) {
      v_->ack_cq_events(ev_cq, 1);
      cq_armed_ = false;
      return true;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return Fail(ErrnoToStatus(errno, "memory server " + name() + ": ibv_get_cq_event"));
    }
    const uint64_t now = os::MonotonicNanos();
    if (now >= deadline_ns) return false;
    pollfd p{comp_channel_->fd, POLLIN, 0};
    int ms = int((deadline_ns - now + 999999) / 1000000);
    int n = poll(&p, 1, ms);
    if (n < 0 && errno != EINTR) return Fail(ErrnoToStatus(errno, "memory server " + name() + ": poll(completion channel)"));
  }
}

Status RdmaTransport::Reap(int wait_ms) {
  if (wait_ms <= 0) return Drain();  // no wait: never arm the CQ (a system call under rxe)
  const uint64_t start = os::MonotonicNanos();
  const uint64_t deadline = start + uint64_t(wait_ms) * 1000000ull;
  // 1. A short busy poll: the completion is often just about to arrive. It ends after spin_ns_
  // and at least kMinSpinPolls polls: a clock bound alone expires while the thread is not
  // running (a preempted vCPU in a loaded VM), and then every wait pays a wake-up.
  const uint64_t spin_until = std::min(deadline, start + spin_ns_);
  const size_t min_polls = spin_ns_ == 0 ? 0 : kMinSpinPolls;
  for (size_t polls = 1;; ++polls) {
    TIERMEM_RETURN_IF_ERROR(Drain());
    if (!ready_.empty() || posted_.empty()) return Status::Ok();
    if (polls >= min_polls && os::MonotonicNanos() >= spin_until) break;
  }
  // 2. Block on the completion channel: arm, check again (a completion that came before the
  // arm raises no event), then sleep until the event or the deadline.
  while (!posted_.empty()) {
    if (!cq_armed_) {
      int rc = ibv_req_notify_cq(cq_, 0);
      if (rc != 0) return Fail(Unavailable("memory server " + name() + ": ibv_req_notify_cq: " + strerror(rc)));
      cq_armed_ = true;
    }
    TIERMEM_RETURN_IF_ERROR(Drain());
    if (!ready_.empty()) return Status::Ok();
    TIERMEM_ASSIGN_OR_RETURN(bool signalled, WaitCompletionEvent(deadline));
    if (!signalled) {
      TIERMEM_RETURN_IF_ERROR(Drain());
      if (!ready_.empty()) return Status::Ok();
      return Fail(DeadlineExceeded("memory server " + name() + ": no RDMA completion within " +
                                   std::to_string(wait_ms) + " ms"));
    }
  }
  return Status::Ok();
}

StatusOr<size_t> RdmaTransport::Poll(Completion* out, size_t max, int timeout_ms) {
  if (timeout_ms < 0) timeout_ms = int(timeout_ms_);
  if (ready_.empty() && broken_.ok()) {
    Status s = Doorbell();
    if (s.ok()) s = Reap(0);
    if (s.ok() && ready_.empty() && !posted_.empty()) s = Reap(timeout_ms);
  }
  size_t n = 0;
  while (n < max && !ready_.empty()) {
    out[n++] = std::move(ready_.front());
    ready_.pop_front();
  }
  if (n == 0 && !broken_.ok()) return broken_;
  return n;
}

Status RdmaTransport::Fail(Status why) {
  if (broken_.ok()) broken_ = why;
  for (auto* q : {&queued_, &posted_}) {
    for (auto& r : *q) ready_.push_back(Completion{r.cookie, why});
    q->clear();
  }
  return why;
}

void RdmaTransport::Teardown() {
  if (id_ != nullptr && qp_) {
    cm_->disconnect(id_);
    cm_->destroy_qp(id_);
    qp_ = false;
  }
  if (staging_mr_ != nullptr) v_->dereg_mr(staging_mr_);
  staging_mr_ = nullptr;
  if (staging_ != nullptr) {
    munmap(staging_, kStagingPages * kPage);
    CountOwnMapped(-static_cast<int64_t>(kStagingPages * kPage));
  }
  staging_ = nullptr;
  if (cq_ != nullptr) v_->destroy_cq(cq_);  // every event taken was acknowledged at once
  cq_ = nullptr;
  cq_armed_ = false;
  if (comp_channel_ != nullptr) v_->destroy_comp_channel(comp_channel_);
  comp_channel_ = nullptr;
  if (pd_ != nullptr) v_->dealloc_pd(pd_);
  pd_ = nullptr;
  if (id_ != nullptr) cm_->destroy_id(id_);
  id_ = nullptr;
  if (channel_ != nullptr) cm_->destroy_event_channel(channel_);
  channel_ = nullptr;
}

void RdmaTransport::Close() {
  Teardown();
  control_.Close();
  if (broken_.ok()) broken_ = Unavailable("memory server " + name() + ": connection closed");
}

}  // namespace tiermem::remote

// The RDMA transport (built only with TIERMEM_HAVE_RDMA): the control protocol over a TCP
// connection to memd (hello with data_path = rdma, alloc/free/stats), and page data by one-sided
// RDMA READ/WRITE on an RC queue pair (librdmacm) into the per-allocation memory registrations
// memd returns (remote_addr, rkey).
//
// Data path: posts are queued and handed to the NIC in one chain per Poll (one doorbell); only
// every kSignalEvery-th request and the last of each chain is signalled (RC completes in order,
// so a signalled completion retires every earlier request). Pages go through a registered staging
// area (kStagingPages pages): a write copies the page in before posting, a read copies it out at
// completion. A part request moves its bytes through the start of a staging page the same way. At most kStagingPages requests are in flight; a post beyond that first waits for
// completions.
//
// Waiting for a completion: the CQ is polled busily for a short bounded time (SetBusyPoll,
// kDefaultSpinUs by default, and at least kMinSpinPolls polls), then the thread blocks on the
// CQ's completion channel (ibv_req_notify_cq, poll(2) on the channel's descriptor with the
// remaining timeout, ibv_get_cq_event, ibv_ack_cq_events), so a completion wakes it at once:
// there is no fixed sleep quantum between checks.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/remote/tcp/tcp_transport.h"
#include "base/ring_queue.h"
#include "backends/remote/transport.h"

struct rdma_cm_id;
struct rdma_event_channel;
struct ibv_pd;
struct ibv_cq;
struct ibv_mr;
struct ibv_comp_channel;

namespace tiermem::remote {
struct VerbsApi;
struct RdmaCmApi;
}  // namespace tiermem::remote

namespace tiermem::remote {

// Whether this host has any verbs device, and if not, why ("no RDMA device: ...").
Status RdmaDevicePresent();

class RdmaTransport final : public Transport {
 public:
  static constexpr size_t kStagingPages = 256;
  static constexpr size_t kSignalEvery = 16;
  static constexpr uint32_t kDefaultSpinUs = 200;
  static constexpr size_t kMinSpinPolls = 2000;  // a spin is never shorter than this many polls

  explicit RdmaTransport(Endpoint endpoint);
  ~RdmaTransport() override;

  Status Connect(const std::string& token, uint32_t timeout_ms, const SessionTicket* join) override;
  SessionTicket ticket() const override { return control_.ticket(); }
  StatusOr<SlotRange> AllocSlots(uint64_t count) override;
  Status FreeSlots(const SlotRange& range) override { return control_.FreeSlots(range); }
  StatusOr<ServerStats> Stats() override { return control_.Stats(); }
  StatusOr<proto::ClientsOk> Clients(uint64_t after_session) override { return control_.Clients(after_session); }
  Status PostWrite(const SlotRange& range, uint64_t slot, const void* page, uint64_t cookie) override;
  Status PostRead(const SlotRange& range, uint64_t slot, void* page, uint64_t cookie) override;
  Status PostWritePart(const SlotRange& range, uint64_t slot, uint32_t offset, uint32_t length,
                       const void* data, uint64_t cookie) override;
  Status PostReadPart(const SlotRange& range, uint64_t slot, uint32_t offset, uint32_t length, void* data,
                      uint64_t cookie) override;
  StatusOr<size_t> Poll(Completion* out, size_t max, int timeout_ms) override;
  size_t in_flight() const override { return queued_.size() + posted_.size(); }
  void SetBusyPoll(uint32_t microseconds) override { spin_ns_ = uint64_t(microseconds) * 1000; }
  void Close() override;
  std::string name() const override { return endpoint_.ToString(); }

 private:
  struct Request {
    uint64_t seq;
    uint64_t cookie;
    bool write;
    uint64_t remote_addr;  // the slot's address plus the offset of a part request
    uint32_t rkey;
    uint32_t length;  // bytes moved: kPage, or a part's length
    size_t staging;   // index of the staging page (a part uses its first `length` bytes)
    void* dst;        // reads
  };
  // Queues the RDMA READ/WRITE of `length` bytes at byte `offset` of `slot`.
  Status Post(const SlotRange& range, uint64_t slot, uint32_t offset, uint32_t length, bool write,
              const void* src, void* dst, uint64_t cookie);
  Status WaitEvent(int expected, uint32_t timeout_ms);
  // Connect's steps (see rdma_transport.cc).
  Status ResolveRoute();
  Status CreateQueues();
  Status Establish();
  Status Doorbell();
  // Retires completions into ready_; waits up to wait_ms for at least one.
  Status Reap(int wait_ms);
  // Takes what the CQ holds into ready_ (no wait).
  Status Drain();
  // Blocks until the completion channel signals or `deadline_ns` passes (false then).
  StatusOr<bool> WaitCompletionEvent(uint64_t deadline_ns);
  Status Fail(Status why);
  void Teardown();

  Endpoint endpoint_;
  TcpTransport control_;
  uint32_t timeout_ms_ = 5000;
  Status broken_;
  const VerbsApi* v_ = nullptr;    // libibverbs, loaded by Connect
  const RdmaCmApi* cm_ = nullptr;  // librdmacm, loaded by Connect
  rdma_event_channel* channel_ = nullptr;
  rdma_cm_id* id_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_comp_channel* comp_channel_ = nullptr;
  bool cq_armed_ = false;  // ibv_req_notify_cq called, its event not yet taken
  uint64_t spin_ns_ = uint64_t(kDefaultSpinUs) * 1000;
  ibv_mr* staging_mr_ = nullptr;
  char* staging_ = nullptr;
  bool qp_ = false;
  std::vector<size_t> free_staging_;
  // Sized so that nothing allocates on the fault path (base/ring_queue.h says why).
  RingQueue<Request> queued_{1024};  // not yet handed to the NIC
  RingQueue<Request> posted_{1024};  // handed to the NIC, in order
  RingQueue<Completion> ready_{1024};
  struct WorkRequests;  // Doorbell's work requests, kept (rdma_transport.cc)
  std::unique_ptr<WorkRequests> wrs_;
  uint64_t next_seq_ = 1;
  size_t since_signal_ = 0;
};

}  // namespace tiermem::remote

#include "tools/memd/rdma_server.h"

#ifndef TIERMEM_HAVE_RDMA

namespace tiermem::memd {
StatusOr<std::unique_ptr<RdmaServer>> RdmaServer::Start(Server*, const std::string&, uint16_t) {
  return NotSupported("this build of tiermem-memd has no RDMA support (libibverbs/librdmacm not found at build time)");
}
}  // namespace tiermem::memd

#else

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>

#include <map>
#include <mutex>
#include <vector>

#include "base/dynlib.h"
#include "protocol/protocol.h"

namespace tiermem::memd {
namespace {

// The server links libibverbs, so it asks it directly (the client's transport loads it lazily).
Status RdmaDevicePresent() {
  if (!os::DirHasEntries("/sys/class/infiniband")) {
    return Unavailable("no RDMA device: /sys/class/infiniband lists no verbs device on this host (no RDMA NIC, no rxe/siw)");
  }
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) return ErrnoToStatus(errno, "no RDMA device: ibv_get_device_list");
  ibv_free_device_list(list);
  if (n == 0) return Unavailable("no RDMA device: libibverbs found no verbs device on this host (no RDMA NIC, no rxe/siw)");
  return Status::Ok();
}

using ConnectData = remote::proto::RdmaConnectData;

class RdmaServerImpl final : public RdmaServer {
 public:
  explicit RdmaServerImpl(Server* server) : server_(server) {}
  ~RdmaServerImpl() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, st] : sessions_) {
      for (auto& c : st.conns) DestroyConn(c);
      if (st.pd != nullptr) ibv_dealloc_pd(st.pd);
    }
    for (rdma_cm_id* id : dead_ids_) rdma_destroy_id(id);
    if (listen_id_ != nullptr) rdma_destroy_id(listen_id_);
    if (channel_ != nullptr) rdma_destroy_event_channel(channel_);
  }

  Status Init(const std::string& host, uint16_t port) {
    TIERMEM_RETURN_IF_ERROR(RdmaDevicePresent());
    channel_ = rdma_create_event_channel();
    if (channel_ == nullptr) return ErrnoToStatus(errno, "rdma_create_event_channel");
    fcntl(channel_->fd, F_SETFL, fcntl(channel_->fd, F_GETFL) | O_NONBLOCK);
    if (rdma_create_id(channel_, &listen_id_, nullptr, RDMA_PS_TCP) != 0) return ErrnoToStatus(errno, "rdma_create_id");
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* res = nullptr;
    if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || res == nullptr) {
      return Unavailable("cannot resolve " + host);
    }
    int rc = rdma_bind_addr(listen_id_, res->ai_addr);
    freeaddrinfo(res);
    if (rc != 0) {
      return Unavailable("no RDMA device serves " + host + " (rdma_bind_addr: " + strerror(errno) + ")");
    }
    if (listen_id_->verbs == nullptr && host != "0.0.0.0") {
      return Unavailable("no RDMA device serves " + host);
    }
    if (rdma_listen(listen_id_, 64) != 0) return ErrnoToStatus(errno, "rdma_listen");
    desc_ = listen_id_->verbs != nullptr ? std::string("device ") + ibv_get_device_name(listen_id_->verbs->device)
                                         : std::string("all devices");
    return Status::Ok();
  }

  int event_fd() const override { return channel_->fd; }
  std::string description() const override { return desc_; }

  void HandleEvents() override {
    rdma_cm_event* ev = nullptr;
    while (rdma_get_cm_event(channel_, &ev) == 0) {
      rdma_cm_id* id = ev->id;
      int type = ev->event;
      ConnectData cd{};
      bool have_cd = false;
      if (type == RDMA_CM_EVENT_CONNECT_REQUEST && ev->param.conn.private_data_len >= sizeof(cd)) {
        std::memcpy(&cd, ev->param.conn.private_data, sizeof(cd));
        have_cd = true;
      }
      rdma_ack_cm_event(ev);
      if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
        Accept(id, have_cd ? &cd : nullptr);
      } else if (type == RDMA_CM_EVENT_DISCONNECTED) {
        Disconnected(id);
      }
    }
  }

  Status Register(Session& s, Allocation& a, uint64_t* remote_addr, uint32_t* rkey) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sessions_.find(s.id);
    if (it == sessions_.end() || it->second.pd == nullptr) {
      return Unavailable("session has no RDMA queue pair yet: connect with rdma_connect before allocating");
    }
    void* addr = server_->SlotAddress(a.first);
    // Only what the client needs: it reads and writes remotely; LOCAL_WRITE is required by verbs
    // alongside REMOTE_WRITE. No atomics, no memory windows.
    ibv_mr* mr = ibv_reg_mr(it->second.pd, addr, a.count * proto::kPageSize,
                            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
    if (mr == nullptr) return ErrnoToStatus(errno, "ibv_reg_mr");
    a.mr = mr;
    *remote_addr = reinterpret_cast<uintptr_t>(addr);
    *rkey = mr->rkey;
    return Status::Ok();
  }

  void Deregister(Allocation& a) override {
    if (a.mr != nullptr) ibv_dereg_mr(static_cast<ibv_mr*>(a.mr));
    a.mr = nullptr;
  }

  void CloseSession(Session& s) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sessions_.find(s.id);
    if (it == sessions_.end()) return;
    for (auto& c : it->second.conns) DestroyConn(c);
    if (it->second.pd != nullptr) ibv_dealloc_pd(it->second.pd);
    sessions_.erase(it);
  }

 private:
  struct Conn {
    rdma_cm_id* id = nullptr;
    ibv_cq* cq = nullptr;
  };
  struct SessionState {
    ibv_pd* pd = nullptr;
    std::vector<Conn> conns;
  };

  void DestroyConn(Conn& c) {
    if (c.id != nullptr) {
      rdma_disconnect(c.id);
      if (c.id->qp != nullptr) rdma_destroy_qp(c.id);
      dead_ids_.push_back(c.id);  // destroyed when its DISCONNECTED event is handled
    }
    if (c.cq != nullptr) ibv_destroy_cq(c.cq);
    c = Conn{};
  }

  void Accept(rdma_cm_id* id, const ConnectData* cd) {
    std::shared_ptr<Session> s = cd ? server_->FindSession(cd->session, cd->secret) : nullptr;
    if (!s || !s->rdma) {
      MemdLog("warn", "RDMA: refused a queue pair: %s", cd ? "unknown session or wrong secret" : "no session in the private data");
      rdma_reject(id, nullptr, 0);
      rdma_destroy_id(id);
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    SessionState& st = sessions_[s->id];
    if (st.pd == nullptr) st.pd = ibv_alloc_pd(id->verbs);
    if (st.pd == nullptr || st.pd->context != id->verbs) {
      MemdLog("warn", "RDMA: session %llu: cannot set up a protection domain", (unsigned long long)s->id);
      rdma_reject(id, nullptr, 0);
      rdma_destroy_id(id);
      return;
    }
    Conn c;
    c.id = id;
    c.cq = ibv_create_cq(id->verbs, 4, nullptr, nullptr, 0);
    ibv_qp_init_attr qa{};
    qa.send_cq = c.cq;
    qa.recv_cq = c.cq;
    qa.qp_type = IBV_QPT_RC;
    qa.cap.max_send_wr = 1;
    qa.cap.max_recv_wr = 1;
    qa.cap.max_send_sge = 1;
    qa.cap.max_recv_sge = 1;
    if (c.cq == nullptr || rdma_create_qp(id, st.pd, &qa) != 0) {
      MemdLog("warn", "RDMA: session %llu: cannot create a queue pair: %s", (unsigned long long)s->id, strerror(errno));
      if (c.cq != nullptr) ibv_destroy_cq(c.cq);
      rdma_reject(id, nullptr, 0);
      rdma_destroy_id(id);
      return;
    }
    rdma_conn_param cp{};
    cp.responder_resources = 16;
    cp.initiator_depth = 16;
    cp.rnr_retry_count = 7;
    if (rdma_accept(id, &cp) != 0) {
      MemdLog("warn", "RDMA: rdma_accept: %s", strerror(errno));
      rdma_destroy_qp(id);
      ibv_destroy_cq(c.cq);
      rdma_destroy_id(id);
      return;
    }
    st.conns.push_back(c);
    MemdLog("info", "RDMA: session %llu: queue pair connected", (unsigned long long)s->id);
  }

  void Disconnected(rdma_cm_id* id) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = dead_ids_.begin(); it != dead_ids_.end(); ++it) {
      if (*it == id) {
        dead_ids_.erase(it);
        rdma_destroy_id(id);
        return;
      }
    }
    for (auto& [sid, st] : sessions_) {
      for (auto it = st.conns.begin(); it != st.conns.end(); ++it) {
        if (it->id == id) {
          rdma_destroy_qp(id);
          ibv_destroy_cq(it->cq);
          st.conns.erase(it);
          rdma_destroy_id(id);
          return;
        }
      }
    }
  }

  Server* server_;
  rdma_event_channel* channel_ = nullptr;
  rdma_cm_id* listen_id_ = nullptr;
  std::string desc_;
  std::mutex mu_;
  std::map<uint64_t, SessionState> sessions_;
  std::vector<rdma_cm_id*> dead_ids_;
};

}  // namespace

StatusOr<std::unique_ptr<RdmaServer>> RdmaServer::Start(Server* server, const std::string& host, uint16_t port) {
  auto impl = std::make_unique<RdmaServerImpl>(server);
  TIERMEM_RETURN_IF_ERROR(impl->Init(host, port));
  return std::unique_ptr<RdmaServer>(std::move(impl));
}

}  // namespace tiermem::memd

#endif

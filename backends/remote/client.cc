// tiermem::RemoteClient (include/tiermem/remote.hpp) over the remote tier's transports.
#include "tiermem/remote.hpp"

#include "backends/remote/transport.h"
#include "base/os.h"

namespace tiermem {

class RemoteClient::Impl {
 public:
  std::unique_ptr<remote::Transport> transport;
};

namespace {

remote::SlotRange ToRange(const RemotePages& p) { return {p.first, p.count, p.remote_addr, p.rkey}; }

Status CheckSpan(const RemotePages& p, uint64_t slot, size_t n) {
  if (slot < p.first || slot - p.first > p.count || n > p.count - (slot - p.first)) {
    return InvalidArgument("slots [" + std::to_string(slot) + ", " + std::to_string(slot + n) +
                           ") are not inside the range [" + std::to_string(p.first) + ", " +
                           std::to_string(p.first + p.count) + ")");
  }
  return Status::Ok();
}

}  // namespace

RemoteClient::RemoteClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RemoteClient::~RemoteClient() {
  if (impl_ && impl_->transport) impl_->transport->Close();
}

StatusOr<std::unique_ptr<RemoteClient>> RemoteClient::Connect(std::string_view url, std::string_view token,
                                                              uint32_t timeout_ms) {
  static_assert(kPageSize == remote::proto::kPageSize);
  TIERMEM_ASSIGN_OR_RETURN(remote::Endpoint ep, remote::ParseEndpoint(std::string(url)));
  auto impl = std::make_unique<Impl>();
  TIERMEM_ASSIGN_OR_RETURN(impl->transport, remote::MakeTransport(ep));
  TIERMEM_RETURN_IF_ERROR(impl->transport->Connect(std::string(token), timeout_ms));
  return std::unique_ptr<RemoteClient>(new RemoteClient(std::move(impl)));
}

StatusOr<RemotePages> RemoteClient::Allocate(uint64_t count) {
  TIERMEM_ASSIGN_OR_RETURN(remote::SlotRange r, impl_->transport->AllocSlots(count));
  return RemotePages{r.first, r.count, r.remote_addr, r.rkey};
}

Status RemoteClient::Free(const RemotePages& pages) { return impl_->transport->FreeSlots(ToRange(pages)); }

Status RemoteClient::Write(const RemotePages& pages, uint64_t slot, const void* data, size_t n, size_t window) {
  TIERMEM_RETURN_IF_ERROR(CheckSpan(pages, slot, n));
  return remote::WritePagesSync(*impl_->transport, ToRange(pages), slot, data, n, window == 0 ? 1 : window);
}

Status RemoteClient::Read(const RemotePages& pages, uint64_t slot, void* data, size_t n, size_t window) {
  TIERMEM_RETURN_IF_ERROR(CheckSpan(pages, slot, n));
  return remote::ReadPagesSync(*impl_->transport, ToRange(pages), slot, data, n, window == 0 ? 1 : window);
}

StatusOr<RemoteServerStats> RemoteClient::ServerStats() {
  return impl_->transport->Stats();
}

StatusOr<RemoteServerClients> RemoteClient::ListClients() {
  RemoteServerClients out;
  const uint64_t self = impl_->transport->ticket().session;
  uint64_t after = 0;
  for (;;) {
    TIERMEM_ASSIGN_OR_RETURN(remote::proto::ClientsOk page, impl_->transport->Clients(after));
    out.capacity_pages = page.capacity_pages;
    out.reserved_pages = page.reserved_pages;
    out.written_pages = page.written_pages;
    for (const remote::proto::ClientEntry& e : page.entries) {
      RemoteSessionInfo s;
      s.session = e.session;
      s.peer = e.peer;
      s.rdma = e.data_path == remote::proto::DataPath::kRdma;
      s.self = e.session == self;
      s.connections = e.connections;
      s.slots = e.slots;
      s.written_pages = e.written_pages;
      s.written_known = e.written_known != 0;
      s.quota_pages = e.quota_pages;
      out.sessions.push_back(std::move(s));
    }
    // A page shorter than what remains means more follow; an empty one ends the walk.
    if (page.entries.empty() || page.entries.size() >= page.total) break;
    after = page.entries.back().session;
  }
  return out;
}

std::string RemoteClient::name() const { return impl_->transport->name(); }

StatusOr<std::vector<uint64_t>> MeasureFaultFloor(size_t faults) { return os::UffdFaultFloor(faults); }
StatusOr<std::vector<uint64_t>> MeasureSignalFaultFloor(size_t faults) { return os::UffdSignalFloor(faults); }

}  // namespace tiermem

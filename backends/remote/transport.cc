#include "backends/remote/transport.h"

#include <vector>

#include "base/net.h"
#include "backends/remote/tcp/tcp_transport.h"
#if defined(TIERMEM_HAVE_RDMA) && __has_include("backends/remote/rdma/rdma_transport.h")
#define TIERMEM_REMOTE_RDMA 1
#include "backends/remote/rdma/rdma_transport.h"
#endif

namespace tiermem::remote {

std::string Endpoint::ToString() const {
  return std::string(kind == Kind::kRdma ? "rdma://" : "tcp://") + host + ":" + std::to_string(port);
}

StatusOr<Endpoint> ParseEndpoint(const std::string& text) {
  Endpoint e;
  std::string rest = text;
  if (rest.rfind("tcp://", 0) == 0) {
    rest = rest.substr(6);
  } else if (rest.rfind("rdma://", 0) == 0) {
    e.kind = Endpoint::Kind::kRdma;
    rest = rest.substr(7);
  } else if (rest.find("://") != std::string::npos) {
    return InvalidArgument("memory server '" + text + "': scheme must be tcp:// or rdma://");
  }
  Status s = net::SplitHostPort(rest, 7471, &e.host, &e.port);
  if (!s.ok()) return InvalidArgument("memory server '" + text + "': " + s.message());
  return e;
}

StatusOr<std::vector<Endpoint>> ParseEndpointList(const std::string& text) {
  std::vector<Endpoint> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) {
      TIERMEM_ASSIGN_OR_RETURN(Endpoint e, ParseEndpoint(item));
      out.push_back(e);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (out.empty()) return InvalidArgument("no memory server given");
  return out;
}

Status CheckPart(uint32_t offset, uint32_t length) {
  if (length == 0 || uint64_t(offset) + length > kPage) {
    return InvalidArgument("part of a page: bytes [" + std::to_string(offset) + ", +" + std::to_string(length) +
                           ") are not a non-empty range inside the page (" + std::to_string(kPage) + " bytes)");
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<Transport>> MakeTransport(const Endpoint& endpoint) {
  if (endpoint.kind == Endpoint::Kind::kTcp) {
    return std::unique_ptr<Transport>(new TcpTransport(endpoint));
  }
#ifdef TIERMEM_REMOTE_RDMA
  return std::unique_ptr<Transport>(new RdmaTransport(endpoint));
#else
  return NotSupported(endpoint.ToString() + ": this build of tiermem has no RDMA support (libibverbs/librdmacm were not found)");
#endif
}

namespace {
Status Transfer(Transport& t, const SlotRange& range, uint64_t first_slot, uint8_t* pages,
                size_t npages, size_t window, bool write) {
  size_t posted = 0, done = 0;
  Status first_error;
  std::vector<Completion> c(window);
  while (done < npages) {
    while (posted < npages && posted - done < window) {
      Status s = write ? t.PostWrite(range, first_slot + posted, pages + posted * kPage, posted)
                       : t.PostRead(range, first_slot + posted, pages + posted * kPage, posted);
      if (!s.ok()) return s;
      ++posted;
    }
    TIERMEM_ASSIGN_OR_RETURN(size_t n, t.Poll(c.data(), c.size(), -1));
    if (n == 0) return DeadlineExceeded(t.name() + ": no completion within the timeout");
    for (size_t i = 0; i < n; ++i) {
      if (!c[i].status.ok() && first_error.ok()) first_error = c[i].status;
    }
    done += n;
  }
  return first_error;
}
}  // namespace

Status WritePagesSync(Transport& t, const SlotRange& range, uint64_t first_slot, const void* pages,
                      size_t npages, size_t window) {
  return Transfer(t, range, first_slot, static_cast<uint8_t*>(const_cast<void*>(pages)), npages, window, true);
}

Status ReadPagesSync(Transport& t, const SlotRange& range, uint64_t first_slot, void* pages,
                     size_t npages, size_t window) {
  return Transfer(t, range, first_slot, static_cast<uint8_t*>(pages), npages, window, false);
}

}  // namespace tiermem::remote

#include "tools/memd/rdma_server.h"

namespace tiermem::memd {

StatusOr<std::unique_ptr<RdmaServer>> RdmaServer::Start(Server* server, const std::string& host, uint16_t port) {
  (void)server;
  (void)host;
  (void)port;
  return NotSupported("this build of tiermem-memd has no RDMA support");
}

}  // namespace tiermem::memd

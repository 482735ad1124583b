// RDMA devices and ports (libibverbs).
#include <cstdio>
#include <string>

#include "runtime/topology/topology_internal.h"

#ifdef TIERMEM_HAVE_RDMA
#include "backends/remote/rdma/rdma_api.h"
#endif

namespace tiermem::internal {

#ifdef TIERMEM_HAVE_RDMA
namespace {
const char* PortState(ibv_port_state s) {
  switch (s) {
    case IBV_PORT_NOP: return "nop";
    case IBV_PORT_DOWN: return "down";
    case IBV_PORT_INIT: return "init";
    case IBV_PORT_ARMED: return "armed";
    case IBV_PORT_ACTIVE: return "active";
    case IBV_PORT_ACTIVE_DEFER: return "active_defer";
  }
  return "unknown";
}
int MtuBytes(ibv_mtu m) {
  switch (m) {
    case IBV_MTU_256: return 256;
    case IBV_MTU_512: return 512;
    case IBV_MTU_1024: return 1024;
    case IBV_MTU_2048: return 2048;
    case IBV_MTU_4096: return 4096;
  }
  return 0;
}
}  // namespace

void DiscoverRdma(Topology* topo) {
  // libibverbs is loaded only when sysfs lists a verbs device: most hosts have none.
  if (!remote::VerbsDeviceInSysfs()) {
    topo->rdma_absent_reason =
        "/sys/class/infiniband lists none (no RDMA NIC, and no rxe/siw soft device configured); "
        "libibverbs not loaded";
    return;
  }
  Status why;
  const remote::VerbsApi* v = remote::Verbs(&why);
  if (v == nullptr) {
    topo->rdma_absent_reason = "/sys/class/infiniband lists RDMA devices but " + why.message();
    return;
  }
  int num = 0;
  ibv_device** list = v->get_device_list(&num);
  if (list == nullptr) {
    topo->rdma_absent_reason = "ibv_get_device_list failed (no ib_uverbs in this kernel?)";
    return;
  }
  for (int i = 0; i < num; ++i) {
    RdmaDevice dev;
    dev.name = v->get_device_name(list[i]);
    dev.transport = list[i]->transport_type == IBV_TRANSPORT_IB      ? "InfiniBand"
                    : list[i]->transport_type == IBV_TRANSPORT_IWARP ? "iWARP"
                                                                     : "unknown";
    char guid[32];
    snprintf(guid, sizeof(guid), "%016llx",
             static_cast<unsigned long long>(be64toh(v->get_device_guid(list[i]))));
    dev.node_guid = guid;
    ibv_context* ctx = v->open_device(list[i]);
    if (ctx == nullptr) {
      topo->notes.push_back("cannot open RDMA device " + dev.name + " (permissions?)");
      topo->rdma_devices.push_back(std::move(dev));
      continue;
    }
    ibv_device_attr attr{};
    if (v->query_device(ctx, &attr) == 0) {
      for (uint8_t p = 1; p <= attr.phys_port_cnt; ++p) {
        ibv_port_attr pa{};
        if (remote::QueryPort(*v, ctx, p, &pa) != 0) continue;
        RdmaPort port;
        port.port = p;
        port.state = PortState(pa.state);
        port.link_layer = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand";
        port.active_mtu = MtuBytes(pa.active_mtu);
        ibv_gid gid{};
        if (v->query_gid(ctx, p, 0, &gid) == 0) {
          char g[48];
          const uint8_t* r = gid.raw;
          snprintf(g, sizeof(g),
                   "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x",
                   r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11],
                   r[12], r[13], r[14], r[15]);
          port.gid0 = g;
        }
        dev.ports.push_back(std::move(port));
      }
    }
    v->close_device(ctx);
    topo->rdma_devices.push_back(std::move(dev));
  }
  v->free_device_list(list);
  if (topo->rdma_devices.empty()) {
    topo->rdma_absent_reason =
        "libibverbs found no RDMA device (no RDMA NIC, and no rxe/siw soft device configured)";
  }
}
#else
void DiscoverRdma(Topology* topo) {
  topo->rdma_absent_reason = "tiermem built without libibverbs/librdmacm (TIERMEM_RDMA=OFF or not found)";
}
#endif

}  // namespace tiermem::internal

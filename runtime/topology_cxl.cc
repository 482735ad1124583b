// CXL memdevs and regions (libcxl) and dax devices (libdaxctl).
#include <climits>
#include <cstdlib>
#include <string>

#include "runtime/topology_internal.h"

#ifdef TIERMEM_HAVE_CXL
#include <cxl/libcxl.h>
#include <daxctl/libdaxctl.h>
#endif

namespace tiermem::internal {

#ifdef TIERMEM_HAVE_CXL
namespace {
std::string RealPath(const char* p) {
  if (p == nullptr) return "";
  char buf[PATH_MAX];
  if (realpath(p, buf) == nullptr) return p;
  return buf;
}
}  // namespace

void DiscoverCxl(Topology* topo) {
  struct cxl_ctx* cctx = nullptr;
  if (cxl_new(&cctx) != 0 || cctx == nullptr) {
    topo->notes.push_back("libcxl: cxl_new failed; CXL devices not listed");
  } else {
    cxl_set_log_priority(cctx, 0);  // libcxl's own messages stay quiet; we report absences
    struct cxl_memdev* memdev;
    cxl_memdev_foreach(cctx, memdev) {
      CxlDevice d;
      d.name = cxl_memdev_get_devname(memdev);
      d.type = "memdev";
      uint64_t pmem = cxl_memdev_get_pmem_size(memdev), ram = cxl_memdev_get_ram_size(memdev);
      d.bytes = pmem + ram;
      d.detail = "pmem " + std::to_string(pmem >> 20) + " MiB, ram " + std::to_string(ram >> 20) +
                 " MiB";
      topo->cxl_devices.push_back(std::move(d));
    }
    struct cxl_bus* bus;
    cxl_bus_foreach(cctx, bus) {
      struct cxl_port* port = cxl_bus_get_port(bus);
      struct cxl_decoder* decoder;
      cxl_decoder_foreach(port, decoder) {
        struct cxl_region* region;
        cxl_region_foreach(decoder, region) {
          CxlDevice d;
          d.name = cxl_region_get_devname(region);
          d.type = "region";
          d.bytes = cxl_region_get_size(region);
          d.detail = std::string(cxl_decoder_get_devname(decoder)) + ", interleave " +
                     std::to_string(cxl_region_get_interleave_ways(region));
          topo->cxl_devices.push_back(std::move(d));
        }
      }
    }
    cxl_unref(cctx);
  }

  struct daxctl_ctx* dctx = nullptr;
  if (daxctl_new(&dctx) != 0 || dctx == nullptr) {
    topo->notes.push_back("libdaxctl: daxctl_new failed; dax devices not listed");
    return;
  }
  daxctl_set_log_priority(dctx, 0);
  struct daxctl_region* region;
  daxctl_region_foreach(dctx, region) {
    std::string rpath = RealPath(daxctl_region_get_path(region));
    struct daxctl_dev* dev;
    daxctl_dev_foreach(region, dev) {
      DaxDevice d;
      d.name = daxctl_dev_get_devname(dev);
      d.bytes = daxctl_dev_get_size(dev);
      if (d.bytes == 0) continue;  // the seed device of a region
      d.target_node = daxctl_dev_get_target_node(dev);
      bool ram = daxctl_dev_get_memory(dev) != nullptr && daxctl_dev_has_online_memory(dev) > 0;
      d.mode = ram ? "system-ram" : "devdax";
      d.path = rpath;
      // A dax region created from a CXL region sits below the CXL root (ACPI0017) decoders.
      d.cxl_backed = rpath.find("ACPI0017") != std::string::npos ||
                     (rpath.find("/decoder") != std::string::npos &&
                      rpath.find("/region") != std::string::npos);
      topo->dax_devices.push_back(std::move(d));
    }
  }
  daxctl_unref(dctx);
  if (topo->cxl_devices.empty() && topo->dax_devices.empty()) {
    topo->cxl_absent_reason = "libcxl and libdaxctl found no CXL memdev, region or dax device";
  }
}
#else
void DiscoverCxl(Topology* topo) {
  topo->cxl_absent_reason = "tiermem built without libcxl/libdaxctl (TIERMEM_CXL=OFF or not found)";
}
#endif

}  // namespace tiermem::internal

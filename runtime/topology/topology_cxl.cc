// CXL memdevs and regions (libcxl) and dax devices (libdaxctl).
#include <climits>
#include <cstdlib>
#include <string>

#include "runtime/topology/topology_internal.h"

#ifdef TIERMEM_HAVE_CXL
// The headers give the types; libcxl.so.1 and libdaxctl.so.1 are loaded at run time (dlopen),
// and only when sysfs lists a CXL or dax device, so most hosts never map them (nor libkmod,
// libcrypto, ... which they pull in).
#include <cxl/libcxl.h>
#include <daxctl/libdaxctl.h>

#include "base/dynlib.h"
#include "base/os.h"
#endif

namespace tiermem::internal {

#ifdef TIERMEM_HAVE_CXL
namespace {

// Member `x` is cxl_x.
#define TIERMEM_CXL_FUNCS(X) \
  X(unref)                   \
  X(set_log_priority)        \
  X(memdev_get_first)        \
  X(memdev_get_next)         \
  X(memdev_get_devname)      \
  X(memdev_get_pmem_size)    \
  X(memdev_get_ram_size)     \
  X(bus_get_first)           \
  X(bus_get_next)            \
  X(bus_get_port)            \
  X(decoder_get_first)       \
  X(decoder_get_next)        \
  X(decoder_get_devname)     \
  X(region_get_first)        \
  X(region_get_next)         \
  X(region_get_devname)      \
  X(region_get_size)         \
  X(region_get_interleave_ways)

// Member `x` is daxctl_x.
#define TIERMEM_DAXCTL_FUNCS(X) \
  X(unref)                      \
  X(set_log_priority)           \
  X(region_get_first)           \
  X(region_get_next)            \
  X(region_get_path)            \
  X(dev_get_first)              \
  X(dev_get_next)               \
  X(dev_get_devname)            \
  X(dev_get_size)               \
  X(dev_get_target_node)        \
  X(dev_get_memory)             \
  X(dev_has_online_memory)

struct CxlApi {
  decltype(&::cxl_new) new_ = nullptr;
#define TIERMEM_X(name) decltype(&::cxl_##name) name = nullptr;
  TIERMEM_CXL_FUNCS(TIERMEM_X)
#undef TIERMEM_X
  Status status;
};

struct DaxctlApi {
  decltype(&::daxctl_new) new_ = nullptr;
#define TIERMEM_X(name) decltype(&::daxctl_##name) name = nullptr;
  TIERMEM_DAXCTL_FUNCS(TIERMEM_X)
#undef TIERMEM_X
  Status status;
};

void FillCxl(os::DynLib& lib, CxlApi* a) {
  a->new_ = reinterpret_cast<decltype(a->new_)>(lib.Sym("cxl_new"));
#define TIERMEM_X(name) TIERMEM_DYNLIB_RESOLVE(lib, *a, cxl_, name);
  TIERMEM_CXL_FUNCS(TIERMEM_X)
#undef TIERMEM_X
}

void FillDaxctl(os::DynLib& lib, DaxctlApi* a) {
  a->new_ = reinterpret_cast<decltype(a->new_)>(lib.Sym("daxctl_new"));
#define TIERMEM_X(name) TIERMEM_DYNLIB_RESOLVE(lib, *a, daxctl_, name);
  TIERMEM_DAXCTL_FUNCS(TIERMEM_X)
#undef TIERMEM_X
}

void ListCxl(const CxlApi& c, Topology* topo) {
  struct cxl_ctx* cctx = nullptr;
  if (c.new_(&cctx) != 0 || cctx == nullptr) {
    topo->notes.push_back("libcxl: cxl_new failed; CXL devices not listed");
    return;
  }
  c.set_log_priority(cctx, 0);  // libcxl's own messages stay quiet; we report absences
  for (cxl_memdev* memdev = c.memdev_get_first(cctx); memdev != nullptr;
       memdev = c.memdev_get_next(memdev)) {
    CxlDevice d;
    d.name = c.memdev_get_devname(memdev);
    d.type = "memdev";
    uint64_t pmem = c.memdev_get_pmem_size(memdev), ram = c.memdev_get_ram_size(memdev);
    d.bytes = pmem + ram;
    d.detail = "pmem " + std::to_string(pmem >> 20) + " MiB, ram " + std::to_string(ram >> 20) +
               " MiB";
    topo->cxl_devices.push_back(std::move(d));
  }
  for (cxl_bus* bus = c.bus_get_first(cctx); bus != nullptr; bus = c.bus_get_next(bus)) {
    cxl_port* port = c.bus_get_port(bus);
    for (cxl_decoder* decoder = c.decoder_get_first(port); decoder != nullptr;
         decoder = c.decoder_get_next(decoder)) {
      for (cxl_region* region = c.region_get_first(decoder); region != nullptr;
           region = c.region_get_next(region)) {
        CxlDevice d;
        d.name = c.region_get_devname(region);
        d.type = "region";
        d.bytes = c.region_get_size(region);
        d.detail = std::string(c.decoder_get_devname(decoder)) + ", interleave " +
                   std::to_string(c.region_get_interleave_ways(region));
        topo->cxl_devices.push_back(std::move(d));
      }
    }
  }
  c.unref(cctx);
}

std::string RealPath(const char* p) {
  if (p == nullptr) return "";
  std::string out;
  return os::RealPath(p, &out) == 0 ? out : std::string(p);
}

void ListDax(const DaxctlApi& x, Topology* topo) {
  struct daxctl_ctx* dctx = nullptr;
  if (x.new_(&dctx) != 0 || dctx == nullptr) {
    topo->notes.push_back("libdaxctl: daxctl_new failed; dax devices not listed");
    return;
  }
  x.set_log_priority(dctx, 0);
  for (daxctl_region* region = x.region_get_first(dctx); region != nullptr;
       region = x.region_get_next(region)) {
    std::string rpath = RealPath(x.region_get_path(region));
    for (daxctl_dev* dev = x.dev_get_first(region); dev != nullptr; dev = x.dev_get_next(dev)) {
      DaxDevice d;
      d.name = x.dev_get_devname(dev);
      d.bytes = x.dev_get_size(dev);
      if (d.bytes == 0) continue;  // the seed device of a region
      d.target_node = x.dev_get_target_node(dev);
      bool ram = x.dev_get_memory(dev) != nullptr && x.dev_has_online_memory(dev) > 0;
      d.mode = ram ? "system-ram" : "devdax";
      d.path = rpath;
      // A dax region created from a CXL region sits below the CXL root (ACPI0017) decoders.
      d.cxl_backed = rpath.find("ACPI0017") != std::string::npos ||
                     (rpath.find("/decoder") != std::string::npos &&
                      rpath.find("/region") != std::string::npos);
      topo->dax_devices.push_back(std::move(d));
    }
  }
  x.unref(dctx);
}

}  // namespace

void DiscoverCxl(Topology* topo) {
  // The libraries are loaded only when sysfs lists a device on the bus they serve.
  const bool cxl_bus = os::DirHasEntries("/sys/bus/cxl/devices");
  const bool dax_bus = os::DirHasEntries("/sys/bus/dax/devices");
  if (!cxl_bus && !dax_bus) {
    topo->cxl_absent_reason =
        "no CXL or dax device in sysfs (/sys/bus/cxl/devices and /sys/bus/dax/devices empty or "
        "missing); libcxl/libdaxctl not loaded";
    return;
  }
  std::string missing;
  if (cxl_bus) {
    const CxlApi& c = os::LoadOnce<CxlApi, FillCxl>("libcxl.so.1", "libcxl1");
    if (c.status.ok()) {
      ListCxl(c, topo);
    } else {
      topo->notes.push_back("/sys/bus/cxl lists devices but " + c.status.message() +
                            "; CXL devices not listed");
      missing = c.status.message();
    }
  }
  if (dax_bus) {
    const DaxctlApi& x = os::LoadOnce<DaxctlApi, FillDaxctl>("libdaxctl.so.1", "libdaxctl1");
    if (x.status.ok()) {
      ListDax(x, topo);
    } else {
      topo->notes.push_back("/sys/bus/dax lists devices but " + x.status.message() +
                            "; dax devices not listed");
      if (missing.empty()) missing = x.status.message();
    }
  }
  if (topo->cxl_devices.empty() && topo->dax_devices.empty()) {
    topo->cxl_absent_reason =
        missing.empty() ? "libcxl and libdaxctl found no CXL memdev, region or dax device"
                        : "CXL/dax devices not listed: " + missing;
  }
}
#else
void DiscoverCxl(Topology* topo) {
  topo->cxl_absent_reason = "tiermem built without libcxl/libdaxctl (TIERMEM_CXL=OFF or not found)";
}
#endif

}  // namespace tiermem::internal

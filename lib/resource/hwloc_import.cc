#include "lib/resource/hwloc_import.h"

#include <hwloc.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string_view>

namespace hpcq::resource {
namespace {

constexpr std::string_view kSyntheticPrefix = "synthetic:";
constexpr std::string_view kXmlPrefix = "xml:";

// Owns one hwloc topology; destroyed on every path out of discover_topology.
struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using TopologyPtr = std::unique_ptr<hwloc_topology, TopologyDeleter>;

std::string errno_text() { return errno != 0 ? std::strerror(errno) : "unknown error"; }

int package_of(hwloc_topology_t topo, hwloc_obj_t obj) {
  hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, obj);
  return pkg != nullptr ? static_cast<int>(pkg->logical_index) : 0;
}

bool is_gpu_osdev(hwloc_obj_t obj) {
  return obj->type == HWLOC_OBJ_OS_DEVICE && (obj->attr->osdev.type == HWLOC_OBJ_OSDEV_GPU ||
                                              obj->attr->osdev.type == HWLOC_OBJ_OSDEV_COPROC);
}

// The NUMA domain whose cpuset holds the I/O object's locality (its first
// non-I/O ancestor); -1 when that ancestor spans several domains.
int numa_of_io(hwloc_topology_t topo, hwloc_obj_t obj, const std::vector<hwloc_obj_t>& numa) {
  hwloc_obj_t anchor = hwloc_get_non_io_ancestor_obj(topo, obj);
  if (anchor == nullptr || anchor->cpuset == nullptr) return -1;
  for (std::size_t n = 0; n < numa.size(); ++n) {
    if (hwloc_bitmap_isincluded(anchor->cpuset, numa[n]->cpuset)) return static_cast<int>(n);
  }
  return -1;
}

// One GPU per PCI device that carries a GPU or co-processor OS device (an
// NVIDIA card shows both "cardN" and "cudaN"), named after its CUDA/OpenCL
// device when it has one; then any such OS device not under a PCI device.
void read_gpus(hwloc_topology_t topo, const std::vector<hwloc_obj_t>& numa, NodeTopology& out) {
  hwloc_obj_t pci = nullptr;
  while ((pci = hwloc_get_next_pcidev(topo, pci)) != nullptr) {
    std::string gpu_name;
    std::string coproc_name;
    for (hwloc_obj_t child = pci->io_first_child; child != nullptr; child = child->next_sibling) {
      if (!is_gpu_osdev(child) || child->name == nullptr) continue;
      std::string& slot =
          child->attr->osdev.type == HWLOC_OBJ_OSDEV_COPROC ? coproc_name : gpu_name;
      if (slot.empty()) slot = child->name;
    }
    if (gpu_name.empty() && coproc_name.empty()) continue;
    Gpu gpu;
    gpu.id = out.num_gpus();
    gpu.numa = numa_of_io(topo, pci, numa);
    gpu.name = coproc_name.empty() ? gpu_name : coproc_name;
    char busid[32];
    std::snprintf(busid, sizeof busid, "%04x:%02x:%02x.%01x", pci->attr->pcidev.domain,
                  pci->attr->pcidev.bus, pci->attr->pcidev.dev, pci->attr->pcidev.func);
    gpu.pci_bus_id = busid;
    out.gpus.push_back(std::move(gpu));
  }
  hwloc_obj_t os = nullptr;
  while ((os = hwloc_get_next_osdev(topo, os)) != nullptr) {
    if (!is_gpu_osdev(os)) continue;
    if (os->parent != nullptr && os->parent->type == HWLOC_OBJ_PCI_DEVICE) continue;
    Gpu gpu;
    gpu.id = out.num_gpus();
    gpu.numa = numa_of_io(topo, os, numa);
    gpu.name = os->name != nullptr ? os->name : "";
    out.gpus.push_back(std::move(gpu));
  }
}

NodeTopology read_topology(hwloc_topology_t topo, bool default_memory) {
  NodeTopology out;
  const int npackages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
  out.packages = npackages > 0 ? npackages : 1;

  const int nnuma = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  std::vector<hwloc_obj_t> numa_objs;
  for (int i = 0; i < nnuma; ++i) {
    hwloc_obj_t obj = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    numa_objs.push_back(obj);
    NumaDomain domain;
    domain.id = i;
    // A NUMA node is a memory child; its package is the first package
    // among the cores it is local to, else its normal-tree ancestor.
    domain.package = package_of(topo, obj);
    hwloc_obj_t first_core =
        hwloc_get_next_obj_inside_cpuset_by_type(topo, obj->cpuset, HWLOC_OBJ_CORE, nullptr);
    if (first_core != nullptr) domain.package = package_of(topo, first_core);
    domain.memory_bytes = obj->attr->numanode.local_memory;
    if (default_memory || domain.memory_bytes == 0) domain.memory_bytes = kDefaultNumaMemoryBytes;
    out.memory_bytes += domain.memory_bytes;
    out.numa.push_back(domain);
  }
  if (out.numa.empty()) {
    // hwloc 2 always reports one NUMA node; this keeps the model whole anyway.
    out.numa.push_back({0, 0, kDefaultNumaMemoryBytes});
    out.memory_bytes = kDefaultNumaMemoryBytes;
  }

  hwloc_obj_type_t core_type = HWLOC_OBJ_CORE;
  if (hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE) <= 0) core_type = HWLOC_OBJ_PU;
  const int ncores = hwloc_get_nbobjs_by_type(topo, core_type);
  for (int i = 0; i < ncores; ++i) {
    hwloc_obj_t obj = hwloc_get_obj_by_type(topo, core_type, static_cast<unsigned>(i));
    Core core;
    core.id = i;
    core.package = package_of(topo, obj);
    for (std::size_t n = 0; n < numa_objs.size(); ++n) {
      if (hwloc_bitmap_isincluded(obj->cpuset, numa_objs[n]->cpuset)) {
        core.numa = static_cast<int>(n);
        break;
      }
    }
    hwloc_obj_t pu = nullptr;
    while ((pu = hwloc_get_next_obj_inside_cpuset_by_type(topo, obj->cpuset, HWLOC_OBJ_PU, pu)) !=
           nullptr) {
      core.pus.push_back(static_cast<int>(pu->logical_index));
    }
    out.cores.push_back(std::move(core));
  }
  read_gpus(topo, numa_objs, out);
  return out;
}

}  // namespace

Result<NodeTopology> discover_topology(const std::string& spec) {
  if (spec.empty()) {
    return invalid_argument("topology spec is empty (want host, xml:PATH or a synthetic string)");
  }
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) {
    return internal_error("hwloc_topology_init: " + errno_text());
  }
  TopologyPtr topo(raw);

  const std::string_view view(spec);
  bool synthetic = false;
  bool default_memory = false;
  std::string source;
  if (spec == "host") {
    source = "host";
    // hwloc's "pci" plugin (libpciaccess, from libhwloc-plugins when it is
    // installed) leaks about 1 KB per load, which LeakSanitizer reports; the
    // Linux backend reads the same PCI devices (and so the GPUs) from sysfs.
    hwloc_topology_set_components(topo.get(), HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
  } else if (view.starts_with(kXmlPrefix)) {
    const std::string path(view.substr(kXmlPrefix.size()));
    errno = 0;
    if (path.empty() || hwloc_topology_set_xml(topo.get(), path.c_str()) != 0) {
      return not_found("topology '" + spec + "': hwloc cannot read XML file '" + path +
                       "': " + errno_text());
    }
    source = spec;
  } else {
    const std::string desc(view.starts_with(kSyntheticPrefix) ? view.substr(kSyntheticPrefix.size())
                                                              : view);
    errno = 0;
    if (desc.empty() || hwloc_topology_set_synthetic(topo.get(), desc.c_str()) != 0) {
      // hwloc says only errno here (details need HWLOC_SYNTHETIC_VERBOSE=1).
      return invalid_argument("topology '" + spec +
                              "': hwloc rejected the synthetic description (" + errno_text() +
                              "; want e.g. 'pack:2 numa:2 core:4 pu:1')");
    }
    synthetic = true;
    default_memory = desc.find("memory=") == std::string::npos;
    source = "synthetic:" + desc;
  }

  // Keep PCI and OS devices (GPUs) for the host and XML files; a synthetic
  // topology has none.
  if (!synthetic) hwloc_topology_set_io_types_filter(topo.get(), HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  errno = 0;
  if (hwloc_topology_load(topo.get()) != 0) {
    const std::string why = errno_text();
    if (synthetic || spec != "host") {
      return invalid_argument("topology '" + spec + "': hwloc cannot load it: " + why);
    }
    return internal_error("hwloc cannot load the host topology: " + why);
  }
  NodeTopology out = read_topology(topo.get(), default_memory);
  if (out.cores.empty()) return invalid_argument("topology '" + spec + "' has no cores");
  out.source = std::move(source);
  return out;
}

}  // namespace hpcq::resource

// Builds a NodeTopology from hwloc: the real machine, a synthetic description
// or an XML export.
//
// Specs:
//   "host"                          the machine this runs on (the CPUs this
//                                   process may use, as hwloc sees them)
//   "synthetic:pack:2 numa:2 core:4 pu:1", or the bare string
//   "pack:2 numa:2 core:4 pu:1"     hwloc_topology_set_synthetic
//   "xml:/path/topo.xml"            hwloc_topology_set_xml (lstopo --of xml)
//
// Memory: a NUMA domain with no memory size (hwloc reports 0 on some hosts)
// and every domain of a synthetic description without a "memory=" attribute
// (hwloc would give 1 GiB) gets kDefaultNumaMemoryBytes, so that emulated
// nodes can run jobs that ask for realistic memory. Write
// "numa:2(memory=64GB)" to choose.
//
// Cores: logical ids in hwloc's order. A topology without a Core level (e.g.
// "pack:1 pu:4") gets one core per PU. A core's NUMA domain is the first NUMA
// node whose cpuset contains the core's; a core's package is its Package
// ancestor (0 when the topology has no packages, which then counts as one).
//
// GPUs: from the host and from XML files (synthetic strings have none), one
// per PCI device carrying a GPU or co-processor OS device, plus such OS
// devices not on PCI; a GPU's NUMA domain is the one holding its locality
// (-1 when that spans several). An XML file with PCI devices under NUMA-level
// objects emulates a GPU node (tests/unit/resource/gpu_node.xml).
//
// This is the only I/O in lib/resource (hwloc reads /sys or the XML file).
// Thread-safe: each call builds and destroys its own hwloc topology.
//
// Errors: kInvalidArgument for an empty or malformed spec (the message quotes
// the spec and hwloc's complaint), kNotFound for an unreadable XML file,
// kInternal when hwloc fails on the host.
#pragma once

#include <cstdint>
#include <string>

#include "lib/core/status.h"
#include "lib/resource/topology.h"

namespace hpcq::resource {

inline constexpr std::uint64_t kDefaultNumaMemoryBytes = 16ULL << 30;

Result<NodeTopology> discover_topology(const std::string& spec);

}  // namespace hpcq::resource

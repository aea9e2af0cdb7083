// The model of one node's hardware: packages, NUMA domains, cores, PUs and
// GPUs (with the NUMA domain each is attached to).
//
// Built from hwloc (resource/hwloc_import.h) on the agent and shipped to the
// leader on join. Plain values; ids are logical (0..n-1, in hwloc's logical
// order) and a core's index in `cores` equals its id.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hpcq::resource {

struct Core {
  int id = 0;
  int package = 0;
  int numa = 0;          // id of the NUMA domain this core's memory is local to
  std::vector<int> pus;  // logical PU (hardware thread) ids
};

struct NumaDomain {
  int id = 0;
  int package = 0;
  std::uint64_t memory_bytes = 0;
};

// A GPU (an hwloc OS device of type GPU or CoProc). `id` is its index among
// the node's GPUs in hwloc's order: the index NodeAllocation::gpus names and
// the agent maps to CUDA_VISIBLE_DEVICES.
struct Gpu {
  int id = 0;
  int numa = -1;           // NUMA domain it is local to; -1 when hwloc cannot tell
  std::string name;        // hwloc's OS device name ("cuda0", "card1", "opencl0d0")
  std::string pci_bus_id;  // "0000:3b:00.0"; empty when not on PCI
};

struct NodeTopology {
  int packages = 0;
  std::vector<NumaDomain> numa;
  std::vector<Core> cores;
  std::uint64_t memory_bytes = 0;  // sum over NUMA domains
  // Where it came from: "host", "synthetic:pack:2 numa:2 core:4 pu:1", "xml:PATH".
  std::string source;

  std::vector<Gpu> gpus;  // by id; empty on nodes without GPUs

  int num_cores() const { return static_cast<int>(cores.size()); }
  int num_gpus() const { return static_cast<int>(gpus.size()); }
  int num_pus() const {
    int n = 0;
    for (const Core& c : cores) n += static_cast<int>(c.pus.size());
    return n;
  }
};

}  // namespace hpcq::resource

// The model of one node's hardware: packages, NUMA domains, cores, PUs.
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

struct NodeTopology {
  int packages = 0;
  std::vector<NumaDomain> numa;
  std::vector<Core> cores;
  std::uint64_t memory_bytes = 0;  // sum over NUMA domains
  // Where it came from: "host", "synthetic:pack:2 numa:2 core:4 pu:1", "xml:PATH".
  std::string source;

  int num_cores() const { return static_cast<int>(cores.size()); }
};

}  // namespace hpcq::resource

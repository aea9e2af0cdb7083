// The spellings of the placement choices of a ResourceRequest, shared by
// `hpcq submit`, the gRPC API and the store, so that every interface accepts
// and shows the same words:
//   --distribution  NODES[:CORES], each block or cyclic (Slurm's first two
//                   levels; "block" alone is "block:block")
//   --cpu-bind      cores, threads or none (Slurm's --cpu-bind types)
//   --numa-policy   best-effort, single-numa-node or none (Kubernetes'
//                   topology manager policies)
// Parsers return kInvalidArgument with the accepted words.
#pragma once

#include <string>
#include <string_view>

#include "lib/core/status.h"
#include "lib/resource/allocation.h"

namespace hpcq::resource {

const char* distribution_name(Distribution d);
// "block", "cyclic:block", ...: the node level, then ":" and the core level
// when it is not block.
std::string distribution_text(Distribution nodes, Distribution cores);
Status parse_distribution(std::string_view text, Distribution& nodes, Distribution& cores);

const char* cpu_bind_name(CpuBind b);
Result<CpuBind> parse_cpu_bind(std::string_view text);

const char* numa_policy_name(NumaPolicy p);
Result<NumaPolicy> parse_numa_policy(std::string_view text);

}  // namespace hpcq::resource

// Conversions between the overlay's wire messages and the pure model types.
// The receiving side validates what it builds (NodePool::add_node checks a
// topology): a message is data from another process, never trusted to be
// well formed.
#pragma once

#include <string>
#include <string_view>

#include "lib/core/status.h"
#include "lib/resource/allocation.h"
#include "lib/resource/topology.h"
#include "proto/overlay.pb.h"

namespace hpcq::overlay {

// How a JobUpdate FAILED reason starts when the agent could not restore a
// job from its checkpoint (the leader then runs it afresh).
inline constexpr std::string_view kRestoreFailedReason = "restore failed";
// How it starts when the node itself could not start the job (a cgroup, a
// directory or a process it could not make): not the job's failure, so the
// leader requeues the job and drains the node, as Slurm does.
inline constexpr std::string_view kNodeErrorReason = "node error";
// How a NodeCheck's reason starts when the health check failed: the leader
// resumes a node on a passing health check only if its drain reason does.
inline constexpr std::string_view kHealthCheckReason = "health check";

// The name of the message an envelope carries ("job_update", "heartbeat"),
// for logs and metrics; "empty" for none.
std::string body_name(const Envelope& envelope);

void topology_to_message(const resource::NodeTopology& topology, Topology* message);
resource::NodeTopology topology_from_message(const Topology& message);

// The layout choices; kInvalidArgument for a value this side does not know
// (a newer peer's).
Distribution to_message(resource::Distribution distribution);
Result<resource::Distribution> from_message(Distribution distribution);
CpuBind to_message(resource::CpuBind bind);
Result<resource::CpuBind> from_message(CpuBind bind);

}  // namespace hpcq::overlay

// How an MPI job is cut into workers (containers) and groups: Liu & Guitart,
// "Fine-Grained Scheduling for Containerized HPC Workloads in Kubernetes
// Clusters" (papers/000), Algorithm 1 (granularity selection) and Algorithm 2
// (the MPI-aware controller: ranks dealt round-robin to workers, resources
// proportional to ranks, a hostfile line "host slots=N" per worker).
//
// Algorithm 1, N_n the nodes available (the node shape's count), N_t ranks:
//   policy scale:       network -> 1,1,1; cpu|memory -> N_n=min(N_n,N_t), N_w=N_n, N_g=N_n
//   policy granularity: network -> 1,1,1; cpu|memory -> N_n=min(N_n,N_t), N_w=N_t, N_g=N_n
//   no policy:          N_n=1, N_w=the user's value (1 when none), N_g=N_n
// Extensions the paper leaves open (its conclusion: "coarse-grained within
// each node" for network jobs that do not fit one node):
//   - a job whose ranks do not fit the nodes chosen gets more, at most
//     ceil(N_t / usable cores per node) in all (kFailedPrecondition when even
//     all N_n nodes cannot hold it); a network job then gets one worker per
//     node;
//   - a user's worker count (user_workers > 0) overrides the policy's N_w
//     (clamped to 1..N_t; nodes become min(nodes, N_w)), except that a
//     network job is never split one rank per container: it always gets one
//     worker per node it needs.
// Groups (Algorithm 3, balanced): each worker joins the group with the fewest
// ranks so far (lowest id on ties), which for round-robin workers is worker
// i -> group i mod N_g.
//
// Pure functions on values; safe from any thread. Errors: kInvalidArgument
// for ranks < 1, nodes < 1, cores_per_node < 1 or user_workers < 0.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lib/core/status.h"

namespace hpcq::resource {

enum class Profile { kCpu, kMemory, kNetwork };
enum class GranularityPolicy { kScale, kGranularity, kNone };

// The words users and configuration files write: "cpu", "memory", "network";
// "scale", "granularity", "none". parse_* is exact (lower case) and returns
// nullopt for anything else, so the caller can name the bad value.
std::string_view profile_name(Profile profile);
std::optional<Profile> parse_profile(std::string_view word);
std::string_view policy_name(GranularityPolicy policy);
std::optional<GranularityPolicy> parse_policy(std::string_view word);

struct GranularityRequest {
  int ranks = 1;  // N_t (-n)
  Profile profile = Profile::kCpu;
  GranularityPolicy policy = GranularityPolicy::kNone;
  int nodes_available = 1;  // N_n the cluster offers
  int cores_per_node = 1;   // usable (reserved system cores excluded)
  int user_workers = 0;     // the user's N_w; 0: none given
};

struct Granularity {
  int nodes = 1;    // N_n
  int workers = 1;  // N_w
  int groups = 1;   // N_g
};

Result<Granularity> choose_granularity(const GranularityRequest& request);

struct Worker {
  int id = 0;
  int group = 0;
  std::vector<int> ranks;  // MPI ranks, ascending (round-robin: i, i + N_w, ...)
  int slots() const { return static_cast<int>(ranks.size()); }
  std::int64_t cpu_millis = 0;     // the job's CPUs * slots / N_t, in thousandths
  std::uint64_t memory_bytes = 0;  // the job's memory * slots / N_t
};

// Algorithm 2 and the groups: `ranks` dealt to g.workers workers, each sized
// in proportion to its ranks from the job's total CPUs (in thousandths) and
// memory. Workers with no rank (N_w > N_t) are not made. kInvalidArgument
// for ranks < 1 or a granularity with fewer than one worker or group.
Result<std::vector<Worker>> split_workers(int ranks, const Granularity& g,
                                          std::int64_t total_cpu_millis,
                                          std::uint64_t total_memory_bytes);

// The MPI hostfile: one "HOST slots=N" line per worker, HOST = hosts[id]
// (hosts must have one name per worker; a missing name is written as
// "worker-ID").
std::string hostfile(std::span<const Worker> workers, std::span<const std::string> hosts);

}  // namespace hpcq::resource

// How long an MPI benchmark job runs in the simulator for the paper's
// Experiment 2 (Liu & Guitart, ../shared/papers/000, V-D): pinned or not
// (Kubelet's CPU/memory affinity), split into workers or not (the
// "granularity" plugin), and next to which other jobs.
//
// A job of class C (SimJob.mpi_class) with base time T (SimJob.runtime_s:
// its time pinned, in one container, on a socket of its own) runs
//   T * U * S * M * N   seconds, fixed when it starts:
//   U  unpinned (scenario NONE): cpu classes 1.28, network 1.10, memory
//      1.00. 1.28 is Experiment 1's EP-DGEMM: CM_S improves the response
//      time 26% on NONE and 5% on CM, so NONE / CM = 0.95 / 0.74. Network
//      1.10 is assumed (no figure in the text). Memory-bound jobs lose
//      nothing from floating: the paper says CM adds memory contention
//      for them instead, which M models.
//   S  split (pinned only; cpu and memory classes): one rank per worker
//      0.85, several 0.95, one worker 1.00: Experiment 1's CM_G and CM_S
//      against CM (15% and 5% less response time for EP-DGEMM).
//   M  memory bandwidth: each socket sustains kSocketBandwidthRanks (8,
//      assumed: half a 16-core socket saturates STREAM) memory-bound
//      ranks; a socket's load L is the sum of the memory weights of the
//      ranks on it (this job's and those of the jobs running when it
//      starts). Pinned, a rank is on its cores' package; unpinned, a node's
//      ranks float, so each socket carries the node's load / packages.
//      M = 1 + w * max(0, L_max / 8 - 1), w the class's weight and L_max
//      the most loaded socket the job runs on. Weights (assumed from the
//      paper's profiles, Fig. 3): stream 1.0, minife 0.5, dgemm 0.1, fft
//      0.2, rrb 0.
//   N  a network-bound job split over k > 1 nodes: 1 + 2 (k - 1) (assumed;
//      Table III's Volcano run, every rank its own container on any node,
//      took 123,055 s against CM's 2,529 s, so the real penalty on 1 GbE is
//      larger still). The "granularity" plugin never does this.
// Classes and profiles (papers/000, V-B): dgemm cpu, stream memory,
// fft network, rrb network (G-RandomRing bandwidth), minife cpu (the paper
// calls it "memory and CPU intensive" and splits it).
//
// The runtime is fixed at the start from the jobs running then; jobs that
// start later do not slow it (a simplification: the simulator has no
// rate-based progress). Whole seconds, at least one.
//
// Pure; a plain value; not thread-safe. Errors: an unknown class is
// refused by parse_mpi_class (the job set names it).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string_view>

#include "lib/core/ids.h"
#include "lib/resource/allocation.h"
#include "lib/resource/granularity.h"
#include "lib/resource/topology.h"
#include "lib/sched/snapshot.h"

namespace hpcq::sim {

struct SimJob;

enum class MpiClass { kDgemm, kStream, kFft, kRrb, kMinife };

std::optional<MpiClass> parse_mpi_class(std::string_view word);
std::string_view mpi_class_name(MpiClass c);
resource::Profile class_profile(MpiClass c);
double class_memory_weight(MpiClass c);

constexpr double kSocketBandwidthRanks = 8.0;

class GranularityModel {
 public:
  // `jobs`: the whole job set (classes are looked up by id); `node`: every
  // node's topology (the cluster's nodes are alike).
  GranularityModel(std::span<const SimJob> jobs, resource::NodeTopology node, bool pinned);

  // Seconds `job` runs when it starts on `allocation` beside `running`.
  // A job with no class runs its runtime_s.
  std::int64_t runtime_s(const SimJob& job, const resource::Allocation& allocation,
                         std::span<const sched::RunningJob> running) const;

  // The factors alone (for tests and the README): U, S, M, N.
  struct Factors {
    double unpinned = 1;
    double split = 1;
    double memory = 1;
    double network = 1;
  };
  Factors factors(MpiClass c, const resource::Allocation& allocation,
                  std::span<const sched::RunningJob> running) const;

 private:
  // Memory load per (node rank, package) of `allocation`'s ranks, weight w.
  void add_load(std::map<std::pair<Rank, int>, double>& load,
                const resource::Allocation& allocation, double weight) const;

  std::map<JobId, MpiClass> classes_;
  resource::NodeTopology node_;
  bool pinned_;
};

}  // namespace hpcq::sim

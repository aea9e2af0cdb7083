// A job set for `hpcq simulate --jobs FILE`: jobs with a node range, a
// priority and the elastic flag (hpcq issue 7), which SWF cannot say.
//
// The text is one JSON array of objects, one per job:
//   id               > 0, unique (required)
//   submit_s         >= 0 (required)
//   runtime_s        >= 0, its run time on min_nodes (required)
//   requested_s      > 0, the user's estimate on min_nodes (default runtime_s, at least 1)
//   min_nodes        >= 1 (required)
//   max_nodes        >= min_nodes (default min_nodes: rigid)
//   elastic          bool (default false: moldable when max_nodes > min_nodes)
//   priority         integer (default 0; higher goes first in the "elastic" action)
//   cores_per_node   >= 1 cores on each of its nodes (default 1)
//   serial_fraction  0..1, for the runtime model of elastic_model.h (default 0.05)
//   user             integer (default -1: none)
//   queue            string (default "": the default queue)
// An MPI job of papers/000 says `ranks` instead of min_nodes (and takes no
// max_nodes, cores_per_node or elastic): `ranks` one-core tasks placed by the
// scheduler (PendingJob.request.ntasks, nodes 0), with
//   ranks            >= 1 (SimJob.size)
//   profile          "cpu" | "memory" | "network" (PendingJob.profile;
//                    default: the class's, else none)
//   workers          0..ranks, the user's worker count (default 0: none)
//   class            "dgemm" | "stream" | "fft" | "rrb" | "minife": the
//                    benchmark, for granularity_model.h (runtime_s is then
//                    its base time)
// Any other key is an error (a misspelt key must not pass silently).
//
// Also the paper's priority-weighted means (../shared/papers/001, 4.3):
// response = start - submit, completion = end - submit, each weighted by
// the job's priority.
//
// Pure functions; no I/O (the caller reads the file). Errors:
// kInvalidArgument naming `where` and the job ("jobs.json: job 3 (entry 2):
// max_nodes 1 is below min_nodes 2").
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lib/core/status.h"
#include "lib/sim/simulator.h"

namespace hpcq::sim {

Result<std::vector<SimJob>> parse_job_set(std::string_view text, std::string_view where);

struct WeightedTimes {
  double mean_response_s = 0;
  double mean_completion_s = 0;
};

// Over the outcomes whose job is in `jobs`; zeros when the priorities add
// up to zero or less.
WeightedTimes priority_weighted(std::span<const SimJob> jobs, std::span<const JobOutcome> outcomes);

}  // namespace hpcq::sim

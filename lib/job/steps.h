// Job steps: `hpcq run` inside an allocation (a batch job) launches tasks on
// part of the job's nodes and cores, as srun does inside sbatch. A step is
// placed within the job's allocation, on cores no other running step holds
// (unless --overlap), or waits until some are free.
//
// Pure: no I/O, no clock; safe from any thread. hpcqd's steps room
// (daemon/steps.h) keeps the records and drives them.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "lib/core/ids.h"
#include "lib/core/status.h"
#include "lib/job/job.h"
#include "lib/resource/allocation.h"

namespace hpcq::job {

using StepId = std::uint32_t;

// What hpcq run asks of a step (0: the default).
struct StepRequest {
  int nodes = 0;          // 0: as many as tasks, up to all of the job's
  int ntasks = 0;         // 0: one per node with nodes, else the job's task count
  int cpus_per_task = 0;  // 0: the job's
  bool overlap = false;   // may share cores with other steps
  // -w: exactly these of the job's nodes, in the job's order; empty: the
  // first that fit.
  std::vector<std::string> nodelist;
  // -x: none of these of the job's nodes.
  std::vector<std::string> exclude;
  // Each node's task(s) get all of the job's cores there that no other step
  // holds (hpcq-rsh: an MPI launcher's daemon, whose ranks share them).
  bool whole = false;
};

struct StepRecord {
  StepId id = 0;
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::string cwd;
  StepRequest request;
  JobState state = JobState::kPending;  // then kRunning; ends kCompleted, kFailed or kCancelled
  resource::Allocation allocation;      // once placed: the step's nodes, cores and tasks
  int exit_code = 0;                    // the highest task exit code
  std::int64_t cpu_time_us = 0;         // measured: its tasks' CPU time, all nodes
  std::uint64_t max_memory_bytes = 0;   // measured: its cgroup's peak on any one node
  std::string reason;
  // While it runs: the first part that did not complete decides its end.
  JobState outcome = JobState::kCompleted;
  std::optional<TimeUs> failure_seen_at;  // as JobRecord's
  TimeUs submit_time = 0, start_time = 0, end_time = 0;
  std::set<Rank> running_on;  // nodes whose part has not reported its end
  std::set<Rank> confirmed;   // nodes whose part reported STARTED
  bool cancel_requested = false;
  bool pty = false;  // hpcq run --pty: task 0 on a terminal
  std::string mpi;   // --mpi; empty: the job's
};

// The cores each node's running steps hold (without --overlap).
using BusyCores = std::map<Rank, std::set<int>>;

// Where a step goes within `job` (the job's allocation): the first nodes in
// the job's order with enough free cores, tasks spread evenly (the first
// ntasks % nodes nodes get one more), each node's lowest free cores.
// kUnavailable when the cores are held by other steps now; kInvalidArgument
// when it could never fit in the job, with why.
Result<resource::Allocation> place_step(const resource::Allocation& job, const BusyCores& busy,
                                        const StepRequest& request);

// The cores `step` holds, added to or taken from `busy` (a step with
// --overlap holds none).
void hold_cores(BusyCores& busy, const StepRecord& step);
void release_cores(BusyCores& busy, const StepRecord& step);

}  // namespace hpcq::job

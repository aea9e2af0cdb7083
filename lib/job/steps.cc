#include "lib/job/steps.h"

#include <algorithm>

#include "lib/core/units.h"

namespace hpcq::job {
namespace {

int job_tasks(const resource::Allocation& job) {
  int n = 0;
  for (const auto& node : job.nodes) n += node.ntasks;
  return n;
}

// Greedy placement against `busy` (empty: the job's whole allocation): an
// even share of the tasks on each node, the remainder on the first ones, as
// Slurm's block layout; or `shares`, the tasks of each of the job's nodes.
Result<resource::Allocation> place(const resource::Allocation& job, const BusyCores& busy,
                                   int nodes, int ntasks, int cpus_per_task, bool whole,
                                   const std::vector<int>& shares = {}) {
  resource::Allocation step;
  step.cpus_per_task = cpus_per_task;
  step.gpus_per_task = 0;
  step.cpu_bind = job.cpu_bind;
  const int base = ntasks / nodes, extra = ntasks % nodes;
  int first_task = 0;
  for (std::size_t i = 0; i < job.nodes.size(); ++i) {
    const resource::NodeAllocation& node = job.nodes[i];
    if (static_cast<int>(step.nodes.size()) == nodes) break;
    const int tasks =
        !shares.empty() ? shares[i] : base + (static_cast<int>(step.nodes.size()) < extra ? 1 : 0);
    const auto held = busy.find(node.rank);
    std::vector<int> free;
    for (int core : node.cores) {
      if (held == busy.end() || !held->second.count(core)) free.push_back(core);
    }
    const std::size_t need =
        whole ? std::max(free.size(), static_cast<std::size_t>(tasks))
              : static_cast<std::size_t>(tasks) * static_cast<std::size_t>(cpus_per_task);
    if (free.size() < need) continue;
    if (whole) {
      const int each = static_cast<int>(need) / tasks;
      step.cpus_per_task = step.nodes.empty() ? each : std::min(step.cpus_per_task, each);
    }
    resource::NodeAllocation part;
    part.rank = node.rank;
    part.node = node.node;
    std::sort(free.begin(), free.end());
    part.cores.assign(free.begin(), free.begin() + static_cast<std::ptrdiff_t>(need));
    part.numa = node.numa;
    part.gpus = node.gpus;
    part.ntasks = tasks;
    part.first_task = first_task;
    first_task += tasks;
    step.nodes.push_back(std::move(part));
  }
  if (static_cast<int>(step.nodes.size()) < nodes) return unavailable("");
  return step;
}

}  // namespace

Result<resource::Allocation> place_step(const resource::Allocation& job, const BusyCores& busy,
                                        const StepRequest& request) {
  if (request.nodes < 0 || request.ntasks < 0 || request.cpus_per_task < 0) {
    return invalid_argument("step: negative node, task or CPU count");
  }
  if (!request.exclude.empty()) {
    resource::Allocation rest = job;
    std::erase_if(rest.nodes, [&](const resource::NodeAllocation& node) {
      return std::find(request.exclude.begin(), request.exclude.end(), node.node) !=
             request.exclude.end();
    });
    if (rest.nodes.empty()) return invalid_argument("step: -x excludes all of the job's nodes");
    StepRequest without = request;
    without.exclude.clear();
    return place_step(rest, busy, without);
  }
  if (!request.nodelist.empty()) {
    // Only the named nodes, each of which must be the job's.
    resource::Allocation named = job;
    named.nodes.clear();
    std::string names;
    for (const resource::NodeAllocation& node : job.nodes) {
      names += (names.empty() ? "" : ",") + node.node;
      if (std::find(request.nodelist.begin(), request.nodelist.end(), node.node) !=
          request.nodelist.end()) {
        named.nodes.push_back(node);
      }
    }
    for (const std::string& name : request.nodelist) {
      if (std::none_of(job.nodes.begin(), job.nodes.end(),
                       [&](const auto& node) { return node.node == name; })) {
        return invalid_argument("step: node " + quote(name) + " is not one of the job's (" + names +
                                ")");
      }
    }
    if (request.nodes > 0 && request.nodes != static_cast<int>(named.nodes.size())) {
      return invalid_argument("step: -N " + std::to_string(request.nodes) + " with " +
                              std::to_string(named.nodes.size()) + " nodes named by -w");
    }
    StepRequest on_named = request;
    on_named.nodelist.clear();
    on_named.nodes = static_cast<int>(named.nodes.size());
    return place_step(named, busy, on_named);
  }
  const int job_nodes = static_cast<int>(job.nodes.size());
  const int cpus_per_task =
      request.cpus_per_task > 0 ? request.cpus_per_task : std::max(1, job.cpus_per_task);
  const int ntasks = request.ntasks > 0  ? request.ntasks
                     : request.nodes > 0 ? request.nodes
                                         : job_tasks(job);
  const int nodes = request.nodes > 0 ? request.nodes : std::min(ntasks, job_nodes);
  if (nodes > job_nodes) {
    return invalid_argument("step: asks for " + std::to_string(nodes) + " nodes; the job has " +
                            std::to_string(job_nodes));
  }
  if (ntasks < nodes) {
    return invalid_argument("step: " + std::to_string(ntasks) + " tasks cannot run on " +
                            std::to_string(nodes) + " nodes");
  }
  // A step of the job's size (srun with no size) whose even layout does not
  // fit an uneven allocation (2,1 cores) takes the job's own.
  std::vector<int> job_layout;
  if (nodes == job_nodes && ntasks == job_tasks(job)) {
    for (const auto& node : job.nodes) job_layout.push_back(node.ntasks);
  }
  auto place_on = [&](const BusyCores& against) {
    auto placed = place(job, against, nodes, ntasks, cpus_per_task, request.whole);
    if (!placed.is_ok() && !job_layout.empty()) {
      placed = place(job, against, nodes, ntasks, cpus_per_task, request.whole, job_layout);
    }
    return placed;
  };
  if (!place_on({}).is_ok()) {
    return invalid_argument("step: " + std::to_string(ntasks) + " tasks of " +
                            std::to_string(cpus_per_task) + " cores on " + std::to_string(nodes) +
                            " nodes do not fit in the job's allocation");
  }
  auto placed = place_on(request.overlap ? BusyCores{} : busy);
  if (!placed.is_ok()) return unavailable("step: the job's free cores are held by other steps");
  return placed;
}

void hold_cores(BusyCores& busy, const StepRecord& step) {
  if (step.request.overlap) return;
  for (const auto& node : step.allocation.nodes) {
    busy[node.rank].insert(node.cores.begin(), node.cores.end());
  }
}

void release_cores(BusyCores& busy, const StepRecord& step) {
  if (step.request.overlap) return;
  for (const auto& node : step.allocation.nodes) {
    auto held = busy.find(node.rank);
    if (held == busy.end()) continue;
    for (int core : node.cores) held->second.erase(core);
    if (held->second.empty()) busy.erase(held);
  }
}

}  // namespace hpcq::job

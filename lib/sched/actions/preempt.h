// Action "preempt": Volcano's preempt with Slurm's preempt/partition_prio
// and preempt/qos. For each starving pending job, in job order, frees
// resources by stopping whole running jobs of lower standing.
//
// A starving job: not started or served earlier this cycle, ready
// (Session::job_ready), does not fit now, and would fit on the idle
// cluster. Its candidate victims are running jobs whose queue's
// preempt_mode is not "off", not already preempted this cycle, and that are
//   (a) in a queue of lower priority_tier than the job's queue (by queue),
//   (b) in the job's own queue and after it by the job order hooks alone
//       (Session::job_order; the submit-time / id tie-break does not count,
//       so equal priorities never preempt each other; with "fcfs" listed an
//       older job outranks a younger one) -- option by_priority, or
//   (c) of a QOS that the job's QOS lists in its preempt list.
// Victims are taken in this order: lowest queue tier, then last in job
// order, then youngest (latest start), then highest id; added one at a time
// to a trial copy of the free resources (less what earlier preemptors of
// this cycle were promised) until the job fits there (every
// predicate, allocatable hook and advance reservation still applies), then
// each victim whose cores turn out not to be needed is given back, the most
// valuable first. That gives a small, cheap set without searching subsets.
// When the job would not fit even with every candidate gone, nothing is
// preempted for it. Otherwise the action emits Preempt{victim, job, mode of
// the victim's queue} for each victim and Reserve{job, now}: the job starts
// in a later cycle, once the victims' cores are free. A job is preempted
// whole (a gang's every node) or not at all, and at most once per cycle.
//
// Without a SitePolicy with queues, nothing is preemptible.
//
// Options: max_preemptors = N >= 1 (default 8): at most N jobs search for
// victims per cycle. by_priority = true|false (default true): rule (b).
//
// Cost per cycle (Q queued, R running, N nodes, P = max_preemptors): O(Q)
// cheap checks and one O(N) placement per starving job up to P of them,
// then per preemptor O(R log R) to rank candidates and O(V * N) placements
// for V victims tried (twice: adding, then giving back), plus an O(N) pool
// copy.
#pragma once

#include <memory>
#include <optional>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "lib/core/status.h"
#include "lib/sched/action.h"

namespace hpcq::sched {

struct PreemptOptions {
  int max_preemptors = 8;
  bool by_priority = true;
};

class PreemptAction final : public Action {
 public:
  static constexpr std::string_view kName = "preempt";

  static Result<std::unique_ptr<Action>> create(const ActionOptions& options);

  explicit PreemptAction(PreemptOptions options = {}) : options_(options) {}
  std::string_view name() const override { return kName; }
  void execute(Session& session) override;

 private:
  PreemptOptions options_;
};

// Shared by "preempt" and "reclaim".
//
// The running jobs already preempted this cycle (Preempt decisions so far).
std::unordered_set<JobId> preempted_this_cycle(const Session& session);
// The pending jobs already started, promised victims, or reserved now this
// cycle: no further preemption for them.
std::unordered_set<JobId> served_this_cycle(const Session& session);
// The fewest whole jobs of `candidates` (in the order they should go) whose
// release lets `job` be placed on `base` (the Session's free resources with
// earlier preemptors' promises applied; see above), and where it would go;
// nullopt when even all of them are not enough.
struct Eviction {
  std::vector<const RunningJob*> victims;
  resource::Allocation allocation;
};
std::optional<Eviction> choose_victims(const Session& session, const PendingJob& job,
                                       const std::vector<const RunningJob*>& candidates,
                                       const resource::NodePool& base);
// Applies an eviction to `base`: the victims' cores freed, the job's taken,
// so that later preemptors in the cycle do not count on the same cores.
void promise(resource::NodePool& base, const Eviction& eviction);
// Emits Preempt for each victim (mode from its queue; requeue without one)
// and Reserve{job, now}.
void emit_preemption(Session& session, const PendingJob& job, const Eviction& eviction);
// The running job as the pending job it was (for job order hooks).
PendingJob as_pending(const RunningJob& job);

}  // namespace hpcq::sched

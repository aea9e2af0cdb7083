// One scheduling cycle's state, as in Volcano's framework: the snapshot, the
// hooks plugins registered for this cycle, a working copy of the free
// resources with this cycle's trial placements applied, and the decisions
// made so far. A Statement groups placements that must all happen or none
// (a gang): it applies them to the working copy at once, then commits them
// as Start decisions or discards them.
//
// Hooks (typed; each registered under the plugin's name, consulted in
// registration order):
//   job order   (a, b) -> <0 a first, >0 b first, 0 no opinion; when all
//               say 0: submit time, then job id
//   predicate   (job, node) -> may the job run on this node at all
//   node score  (job, node) -> higher is preferred; scores of all plugins are
//               added; equal scores keep rank order
//
// Ownership: borrows the Snapshot (must outlive the Session). A Session lives
// for one Scheduler::cycle() on one thread. Statements borrow their Session.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lib/core/status.h"
#include "lib/resource/allocation.h"
#include "lib/resource/node_pool.h"
#include "lib/sched/decision.h"
#include "lib/sched/snapshot.h"

namespace hpcq::sched {

using JobOrderFn = std::function<int(const PendingJob& a, const PendingJob& b)>;
using PredicateFn = std::function<bool(const PendingJob& job, const resource::NodeState& node)>;
using NodeScoreFn = std::function<double(const PendingJob& job, const resource::NodeState& node)>;
using NodeFilterFn = std::function<bool(const resource::NodeState& node)>;

class Statement;

class Session {
 public:
  explicit Session(const Snapshot& snapshot);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const Snapshot& snapshot() const { return snapshot_; }
  TimeUs now() const { return snapshot_.now; }

  void add_job_order(std::string plugin, JobOrderFn fn);
  void add_predicate(std::string plugin, PredicateFn fn);
  void add_node_score(std::string plugin, NodeScoreFn fn);

  // true when `a` goes before `b`: the job order hooks, then submit time, then id.
  bool job_before(const PendingJob& a, const PendingJob& b) const;
  // The queue in job order. Sorted on first call (skipped when the snapshot
  // is already in order); valid for the Session's life.
  const std::vector<const PendingJob*>& ordered_queue();

  // Free resources now, with this cycle's placements applied.
  const resource::NodePool& pool() const;
  // Where the job fits now: schedulable nodes that pass every predicate, in
  // score order. nullopt when it does not fit (or the request is malformed).
  std::optional<resource::Allocation> place(const PendingJob& job) const;
  // The same over another pool (a trial copy, as backfill's with reserved
  // cores held back); predicates and scores as for place(), and only nodes
  // that `usable` accepts (all when empty).
  std::optional<resource::Allocation> place_on(const PendingJob& job,
                                               const resource::NodePool& pool,
                                               const NodeFilterFn& usable = {}) const;
  // The nodes of pool() the job may run on (schedulable, every predicate
  // passes), best score first: where place() looks. Pointers valid until
  // the next placement.
  std::vector<const resource::NodeState*> candidates(const PendingJob& job) const {
    return candidates_in(job, pool());
  }
  // Whether any plugin registered a predicate (feasibility then depends on
  // the job, not only on its request).
  bool has_predicates() const { return !predicates_.empty(); }
  // Whether the job would fit if nothing were running (predicates honoured):
  // false means waiting cannot help until the nodes change.
  bool fits_when_idle(const PendingJob& job);

  Statement statement();
  // For decisions that take no resources (Reserve).
  void add_decision(Decision decision) { decisions_.decisions.push_back(std::move(decision)); }
  // The decisions made so far this cycle (by earlier actions).
  const Decisions& decisions() const { return decisions_; }
  // The decisions in the order they were made; leaves the Session empty.
  Decisions take_decisions() { return std::move(decisions_); }

 private:
  friend class Statement;

  template <typename Fn>
  struct Hook {
    std::string plugin;
    Fn fn;
  };

  std::vector<const resource::NodeState*> candidates_in(const PendingJob& job,
                                                        const resource::NodePool& pool,
                                                        const NodeFilterFn& usable = {}) const;
  std::optional<resource::Allocation> place_in(const PendingJob& job,
                                               const resource::NodePool& pool) const;
  resource::NodePool& working();

  const Snapshot& snapshot_;
  std::vector<Hook<JobOrderFn>> job_order_;
  std::vector<Hook<PredicateFn>> predicates_;
  std::vector<Hook<NodeScoreFn>> node_scores_;
  std::optional<std::vector<const PendingJob*>> ordered_;
  // Copied from the snapshot on the first placement: a cycle that starts
  // nothing (a full cluster) copies nothing.
  std::optional<resource::NodePool> working_;
  std::optional<resource::NodePool> idle_;
  resource::NodePool empty_;
  Decisions decisions_;
};

// Trial placements that become Start decisions together or not at all.
// Destroying an uncommitted Statement discards it.
class Statement {
 public:
  explicit Statement(Session& session) : session_(&session) {}
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&&) = delete;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  // Takes the allocation's resources in the working copy. kFailedPrecondition
  // (and nothing taken) when any core is not free there.
  Status allocate(const PendingJob& job, resource::Allocation allocation);
  // Turns the placements into Start decisions, in allocate() order.
  void commit();
  // Gives the placements back to the working copy.
  void discard();

 private:
  Session* session_;
  std::vector<Start> starts_;
};

}  // namespace hpcq::sched

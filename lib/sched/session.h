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
//   job ready   (job) -> may the job start this cycle at all (Volcano's
//               JobReady/Overused: queue limits, proportional share); a job
//               any hook rejects gets no candidates, no placement and no
//               Statement, so every action honours it
//   allocatable (job, allocation) -> may the job take this placement
//               (limits on nodes, known only once placed); place() returns
//               nullopt and Statement::allocate() refuses when one says no
//   on allocate / on deallocate (job, allocation): a Statement's placement
//               was applied / given back, so plugins keep in-cycle counters
//   enqueueable (job) / on enqueue (job): consulted by the "enqueue" action
//               (Volcano's JobEnqueueable / JobEnqueued); jobs it does not
//               admit are held (not ready) for the rest of the cycle
//   shape       (job, request&) -> rewrites the request the job is placed
//               with this cycle (node count, layout: the "granularity"
//               plugin's Algorithm 1); applied in registration order by
//               request_of(), which place(), place_on(),
//               fits_when_idle() and backfill's reservations use; the
//               snapshot is not changed
//   placed      (job, allocation&) -> completes an allocation place() or
//               place_on() found (the job's workers) before the allocatable
//               hooks see it
//
// Built in, whatever the configuration: generic resources (a job's
// request.gres; a node with fewer units in all is no candidate, and the pool
// checks the free ones on placement). Also advance reservations
// (Snapshot.reservations). A node of a reservation that has not ended is a
// candidate for a job only if the job ends (now + time limit; a limit <= 0
// never ends) by the reservation's start, or the reservation admits the job,
// has started, and the job ends by the reservation's end. A node in several
// reservations must pass each.
//
// Ownership: borrows the Snapshot (must outlive the Session). A Session lives
// for one Scheduler::cycle() on one thread. Statements borrow their Session.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
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
using JobReadyFn = std::function<bool(const PendingJob& job)>;
using AllocatableFn =
    std::function<bool(const PendingJob& job, const resource::Allocation& allocation)>;
using AllocationEventFn =
    std::function<void(const PendingJob& job, const resource::Allocation& allocation)>;
using JobEventFn = std::function<void(const PendingJob& job)>;
using ShapeFn = std::function<void(const PendingJob& job, resource::ResourceRequest& request)>;
using PlacedFn = std::function<void(const PendingJob& job, resource::Allocation& allocation)>;

// One queue's proportional share this cycle, in cores (filled by the
// "proportion" plugin, read by "reclaim" and the plugin's own hooks).
struct QueueShare {
  std::string queue;  // the queue's name in the SitePolicy
  double weight = 0;
  double deserved = 0;   // water-filled share, capped by `request`
  double allocated = 0;  // running at the snapshot + started this cycle
  double request = 0;    // running + pending at the snapshot
  double pending = 0;    // pending and not started this cycle
};

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
  void add_job_ready(std::string plugin, JobReadyFn fn);
  void add_allocatable(std::string plugin, AllocatableFn fn);
  void add_on_allocate(std::string plugin, AllocationEventFn fn);
  void add_on_deallocate(std::string plugin, AllocationEventFn fn);
  void add_job_enqueueable(std::string plugin, JobReadyFn fn);
  void add_on_enqueue(std::string plugin, JobEventFn fn);
  void add_shape(std::string plugin, ShapeFn fn);
  void add_placed(std::string plugin, PlacedFn fn);

  // The request the job is placed with this cycle: job.request as the shape
  // hooks rewrite it (job.request itself when there are none).
  resource::ResourceRequest request_of(const PendingJob& job) const;

  // Every job-ready hook accepts the job and it is not held.
  bool job_ready(const PendingJob& job) const;
  // Every allocatable hook accepts the placement.
  bool allocatable(const PendingJob& job, const resource::Allocation& allocation) const;
  // Every enqueueable hook accepts the job (true with none).
  bool job_enqueueable(const PendingJob& job) const;
  // Tells the on-enqueue hooks that the job was admitted.
  void job_enqueued(const PendingJob& job);
  // Keeps the job out of this cycle: job_ready() is false from now on.
  void hold(JobId job);
  bool held(JobId job) const;

  // true when `a` goes before `b`: the job order hooks, then submit time, then id.
  bool job_before(const PendingJob& a, const PendingJob& b) const;
  // The job order hooks' verdict alone (<0 a first, >0 b first, 0 none),
  // without the submit time / id tie-break: what "higher priority" means to
  // preemption.
  int job_order(const PendingJob& a, const PendingJob& b) const;
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
  // The same, but ignoring advance reservations: where the job could run
  // at some later time (for planners making future promises, which must
  // then check the reservations' windows themselves).
  std::vector<const resource::NodeState*> candidates_any_time(const PendingJob& job) const;
  // Whether the reservations let the job use node `rank` now.
  bool reservations_allow(const PendingJob& job, Rank rank) const;
  // Whether feasibility depends on the job, not only on its request: a
  // predicate, job-ready or allocatable hook, a held job, an advance
  // reservation, a job bound to a node list, or separated gap jobs exist.
  bool has_predicates() const {
    return !predicates_.empty() || !job_ready_.empty() || !allocatable_.empty() || !held_.empty() ||
           !reserved_.empty() || nodelists_ || gap_separate_;
  }
  // Whether the job would fit if nothing were running (predicates, job-ready
  // and allocatable hooks honoured; reservations not, as they end): false
  // means it cannot start this cycle whatever ends, so actions pass it over.
  bool fits_when_idle(const PendingJob& job);

  // Gap jobs (papers/004): jobs of a queue with migratable = true. Once the
  // "gap" action separates them, they are its alone: job_ready() is false
  // for them except in the gap phase (and for every other job in it), and
  // backfill counts their cores free from now (they leave, checkpointed,
  // before a reservation needs them). Without the action they are ordinary
  // jobs.
  void separate_gap_jobs() { gap_separate_ = true; }
  bool gap_jobs_separate() const { return gap_separate_; }
  void set_gap_phase(bool on) { gap_phase_ = on; }
  bool is_gap_queue(const std::string& queue) const;

  // The proportion plugin's per-queue shares (empty without it).
  void set_queue_shares(std::vector<QueueShare> shares) { queue_shares_ = std::move(shares); }
  const std::vector<QueueShare>& queue_shares() const { return queue_shares_; }
  // nullptr when the queue has no share record.
  QueueShare* queue_share(std::string_view queue);
  const QueueShare* queue_share(std::string_view queue) const;

  Statement statement();
  // Elastic resizes (actions/elastic.h), applied to the working copy at once
  // so that later actions of the cycle see them. shrink() gives the running
  // job's parts on `ranks` back and records Shrink; expand() takes `added`
  // (placed by the caller, e.g. with place_on()) and records Expand.
  // kInvalidArgument (nothing changed) when the ranks are not the job's, would
  // take all of it, or `added` names one of its nodes (resize.h);
  // kFailedPrecondition when a core of `added` is not free. The allocation
  // hooks are not told: they count jobs, and a resize starts or ends none.
  Status shrink(const RunningJob& job, std::span<const Rank> ranks);
  Status expand(const RunningJob& job, resource::Allocation added);
  // The running job's allocation with this cycle's shrinks and expands
  // applied (its snapshot allocation when it has none).
  const resource::Allocation& allocation_of(const RunningJob& job) const;
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
                                                        const NodeFilterFn& usable = {},
                                                        bool reservations = true) const;
  std::optional<resource::Allocation> place_in(const PendingJob& job,
                                               const resource::NodePool& pool,
                                               const NodeFilterFn& usable = {}) const;
  resource::NodePool& working();
  void applied(const PendingJob& job, const resource::Allocation& allocation);
  void undone(const PendingJob& job, const resource::Allocation& allocation);

  const Snapshot& snapshot_;
  bool nodelists_ = false;  // a queued job has a node list
  bool gap_separate_ = false;
  bool gap_phase_ = false;
  std::vector<Hook<JobOrderFn>> job_order_;
  std::vector<Hook<PredicateFn>> predicates_;
  std::vector<Hook<NodeScoreFn>> node_scores_;
  std::vector<Hook<JobReadyFn>> job_ready_;
  std::vector<Hook<AllocatableFn>> allocatable_;
  std::vector<Hook<AllocationEventFn>> on_allocate_;
  std::vector<Hook<AllocationEventFn>> on_deallocate_;
  std::vector<Hook<JobReadyFn>> enqueueable_;
  std::vector<Hook<JobEventFn>> on_enqueue_;
  std::vector<Hook<ShapeFn>> shape_;
  std::vector<Hook<PlacedFn>> placed_;
  std::unordered_set<JobId> held_;
  // Rank -> the reservations (not yet ended) that hold it.
  std::unordered_map<Rank, std::vector<const AdvanceReservation*>> reserved_;
  std::vector<QueueShare> queue_shares_;
  std::optional<std::vector<const PendingJob*>> ordered_;
  // Copied from the snapshot on the first placement: a cycle that starts
  // nothing (a full cluster) copies nothing.
  std::optional<resource::NodePool> working_;
  std::optional<resource::NodePool> idle_;
  resource::NodePool empty_;
  std::unordered_map<JobId, resource::Allocation> resized_;  // by shrink() / expand()
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

  // Takes the allocation's resources in the working copy and tells the
  // on-allocate hooks. kFailedPrecondition (and nothing taken) when any core
  // is not free there, the job is not ready, a hook refuses the placement,
  // or a node is one the reservations keep from the job.
  Status allocate(const PendingJob& job, resource::Allocation allocation);
  // Turns the placements into Start decisions, in allocate() order.
  void commit();
  // Gives the placements back to the working copy (on-deallocate hooks told,
  // newest first).
  void discard();

 private:
  Session* session_;
  std::vector<Start> starts_;
  std::vector<PendingJob> jobs_;  // parallel to starts_, for on-deallocate
};

}  // namespace hpcq::sched

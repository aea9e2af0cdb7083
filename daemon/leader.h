// hpcqd's core: the job queue, the node table and the scheduler driver.
//
// One event-loop thread owns every piece of mutable state here (STYLE.md
// rule 5). gRPC threads call the public entry points, which post to the loop
// and return futures; the store's writer thread completes submissions. A
// job's path: submit() -> store commit -> admit (PENDING) -> scheduler cycle
// -> start (Launch to each node over the overlay) -> JobUpdate from every
// node -> end (store, events, resources released).
//
// Errors reach callers as Status values; the loop never throws.
#pragma once

#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "daemon/decision_log.h"
#include "daemon/job_events.h"
#include "daemon/peer_credentials.h"
#include "daemon/reservations.h"
#include "daemon/submit_policy.h"
#include "lib/core/clock.h"
#include "lib/core/config.h"
#include "lib/job/job.h"
#include "lib/job/job_table.h"
#include "lib/job/records.h"
#include "lib/overlay/event_loop.h"
#include "lib/overlay/overlay.h"
#include "lib/resource/node_pool.h"
#include "lib/resource/topology.h"
#include "lib/sched/plugins/priority.h"
#include "lib/sched/scheduler.h"
#include "lib/sched/usage.h"
#include "lib/store/group_commit.h"
#include "proto/hpcq.pb.h"

namespace hpcq::daemon {

// What a submission made: one job, or an array's tasks with consecutive ids.
struct SubmitResult {
  JobId first = 0;
  std::uint32_t count = 1;
};

class Leader {
 public:
  static Result<std::unique_ptr<Leader>> create(const ClusterConfig& config);
  ~Leader();

  void run();   // the loop thread; returns after stop()
  void stop();  // any thread

  // Any thread.
  std::future<Result<SubmitResult>> submit(const Caller& caller, job::JobSpec spec);
  std::future<Status> cancel(const Caller& caller, JobId id);
  std::future<Result<v1::Job>> get_job(const Caller& caller, JobId id);
  std::future<v1::ListJobsResponse> list_jobs(const Caller& caller, v1::ListJobsRequest request);
  std::future<v1::ListNodesResponse> list_nodes();
  std::future<Status> hold(const Caller& caller, JobId id, bool held);
  // to: the node names the restore may use (requeue/stop only; empty: any);
  // elsewhere: `to` becomes other nodes that can take it now (hpcq migrate).
  std::future<Result<v1::CheckpointRecord>> checkpoint(const Caller& caller, JobId id,
                                                       job::CheckpointThen then,
                                                       std::vector<std::string> to = {},
                                                       bool elsewhere = false);
  // hpcq resize: a running elastic job to `nodes` nodes within its range
  // (owner or admin); answered with the record once the application has
  // answered or the resize timed out (overlay.proto, message Resize).
  std::future<Result<v1::ResizeRecord>> resize(const Caller& caller, JobId id, int nodes);
  std::future<Status> drain(const Caller& caller, const std::string& node, bool drained,
                            const std::string& reason);
  std::future<Result<v1::Reservation>> create_reservation(const Caller& caller,
                                                          v1::Reservation request);
  std::future<Status> delete_reservation(const Caller& caller, std::string name);
  std::future<v1::ListReservationsResponse> list_reservations();
  JobEvents& events() { return events_; }

 private:
  enum class NodeState { kUnknown, kUp, kDown };
  struct NodeEntry {
    Rank rank = 0;
    std::string name;
    NodeState state = NodeState::kUnknown;
    resource::NodeTopology topology;
    int host_cpus = 1;
    TimeUs last_seen = 0;
    bool in_pool = false;
    std::uint64_t incarnation = 0;
    // After a leader restart: a node that ran jobs is awaited; if it does not
    // say Hello within node_down_after_ms it is declared down like a silent node.
    bool awaited = false;
    bool drained = false;       // hpcq drain: no new work until hpcq resume
    bool unresponsive = false;  // up, but silent for node_unresponsive_after_ms: no new work
    std::string reason;         // why it is drained or down
    bool checkpoint_capable = false;
    std::string checkpoint_reason;
    bool checkpoint_other_users = false;  // and of users other than root
    std::string checkpoint_other_users_reason;
  };
  // The table's record of a job (lib/job/job_table.h) plus the daemon's
  // state of its run in flight.
  struct JobEntry : job::JobRecord {
    bool kill_sent = false;
    // Launch and Kill are repeated until each node confirms (STARTED, or the
    // end), since the overlay may drop them while the tree heals.
    std::shared_ptr<const overlay::Launch> launch;
    std::set<Rank> started_on;
    TimeUs sent_at = 0;     // the last Launch or Kill sent
    bool launched = false;  // the Launch went out (after the start's commit)
    // Nodes whose part of the allocation is taken in the pool. All of them
    // once started; after a leader restart, each as its agent confirms it.
    std::set<Rank> held_on;
    // Being dumped to leave (preempted by checkpoint, or moving): its cores
    // are back in the pool already, its memory and GPUs not (hand_over_cores).
    bool cores_handed_over = false;
    // A checkpoint in flight (hpcq checkpoint): the nodes yet to answer.
    struct Checkpointing {
      std::shared_ptr<std::promise<Result<v1::CheckpointRecord>>> promise;
      v1::CheckpointRecord record;
      std::set<Rank> waiting;
      TimeUs deadline = 0;
    };
    std::optional<Checkpointing> checkpointing;
    std::vector<v1::CheckpointRecord> checkpoints;  // done, oldest first
    // Pending: the next start restores this checkpoint (its directory):
    // the last one, if it took the job off its nodes and was not restored.
    std::string restore_from;
    bool restoring = false;        // this attempt was started from restore_from
    std::string restored_image;    // ... and this was its image
    std::vector<Rank> restore_to;  // the restore's nodes (migrate --to), ascending; empty: any
    // Every run of the job, oldest first; the last is open while it runs.
    std::vector<v1::Placement> placements;
    // Elastic resizes (hpcq issue 7; the protocol is in overlay.proto,
    // message Resize). At most one in flight per job.
    struct Resizing {
      std::uint32_t seq = 0;
      v1::ResizeRecord record;      // time, from, to, kind, by
      resource::Allocation before;  // the allocation when it was asked
      resource::Allocation after;   // the allocation asked for
      std::set<Rank> added;         // expand: launched, awaiting STARTED before the notice
      bool notified = false;        // the Resize went to the first node
      bool forced = false;          // a node died: the allocation shrank already; tell only
      TimeUs deadline = 0;  // past it, the outcome is timed_out (or failed before the notice)
      std::shared_ptr<std::promise<Result<v1::ResizeRecord>>> promise;  // hpcq resize
    };
    std::optional<Resizing> resizing;
    std::uint32_t resize_seq = 0;  // resizes asked for so far (this attempt)
    TimeUs last_resize = 0;        // the last resize's outcome: the rescale gap counts from it
    std::vector<v1::ResizeRecord> resizes;  // done, oldest first
    // Launch.part of each node's current part (absent: 0, or unknown after
    // a leader restart; then any part is taken as the current one).
    std::map<Rank, std::uint32_t> part_of;
    // Parts taken away (an acknowledged shrink, a declined expansion):
    // killed; their cores return to the pool as each reports its end, which
    // neither ends nor fails the job. Still in running_on until then.
    std::map<Rank, resource::Allocation> removing;  // the part, as part_on() gives it
    // Fair-share: charged up to here (the start, then each resize).
    TimeUs usage_from = 0;
  };

  explicit Leader(const ClusterConfig& config);
  Status start();

  // Loop thread only, below.
  void admit(job::Job job);
  // Carries out what a change of the job table asks for, in order.
  void apply(const job::Effects& effects);
  // What the table decided for a job none of whose parts runs any more.
  void carry_out(JobEntry& entry, const job::AfterRun& after, TimeUs end_time);
  // The run's resources, placement and usage end (before the table ends or
  // requeues the job): `outcome` is the placement's.
  void end_run(JobEntry& entry, const std::string& outcome, TimeUs end_time);
  // Runs `fn` on the loop thread and answers with what it returns: how a
  // request that answers at once reaches the state the loop owns.
  template <typename Fn>
  auto ask(Fn fn) -> std::future<decltype(fn())> {
    auto promise = std::make_shared<std::promise<decltype(fn())>>();
    auto future = promise->get_future();
    loop_.post([promise, fn = std::move(fn)]() mutable { promise->set_value(fn()); });
    return future;
  }
  // Nodes other than the job's own, up and free enough now to take each of
  // its parts (a migration without --to); kFailedPrecondition saying what
  // it needs when there are not enough.
  Result<std::vector<std::string>> other_nodes_for(const JobEntry& entry) const;
  // Whether `caller` may see and act on `job`: its owner or an admin (like
  // Slurm's PrivateData=jobs).
  static bool may_see(const Caller& caller, const job::Job& job);
  // The job `id` if `caller` may act on it; else kNotFound, or
  // kPermissionDenied saying the same neutral thing on every path.
  Result<JobEntry*> find_for(const Caller& caller, JobId id);
  void apply_preempt(const sched::Preempt& preempt);
  void apply_migrate(const sched::Migrate& migrate);
  void set_schedulable_in_pool(Rank rank, bool schedulable);
  std::vector<sched::AdvanceReservation> current_reservations();
  void schedule_soon();
  void run_cycle();
  bool may_expand() const;
  // after_shrink: a Shrink of this cycle only asked for its nodes, so the
  // allocation may not be free yet; the job then waits (no error).
  void start_job(JobEntry& entry, resource::Allocation allocation, bool after_shrink = false);
  void on_message(overlay::Envelope&& envelope);
  void on_hello(Rank rank, const overlay::Hello& hello);
  void on_job_update(Rank rank, const overlay::JobUpdate& update);
  void on_checkpoint_done(Rank rank, const overlay::CheckpointDone& done);
  // Every node has answered (or the deadline passed): record it, then
  // requeue, hold or leave the job as asked.
  void finish_checkpoint(JobEntry& entry, bool timed_out);
  std::string checkpoint_root() const;
  void persist_checkpoint(const JobEntry& entry, std::size_t index);
  // The checkpoint in flight, under the number its finished record will
  // have, with no outcome yet: a leader restarted before the answers came
  // waits for them again (resume_checkpoint_in_flight).
  void persist_checkpoint_in_flight(const JobEntry& entry);
  static void resume_checkpoint_in_flight(JobEntry& entry, TimeUs now);
  void persist_job_record(JobId id, const char* kind, std::size_t number,
                          const google::protobuf::Message& record);
  // A job's records of one kind ("checkpoint", "placement", "resize"), kept
  // under "<job>/<n>": appended to `list` of each known job in `jobs`.
  template <typename Record, typename Jobs, typename Entry>
  static Status load_job_records(store::Store& store, const char* kind, Jobs& jobs,
                                 std::vector<Record> Entry::*list);
  // Whether the job can be checkpointed now (then: continue|requeue|stop).
  Status checkpointable(const JobEntry& entry, job::CheckpointThen then) const;
  // Sends the Checkpoint to every node of the job; `promise` (null for a
  // periodic or preemption checkpoint) gets the record once every node has
  // answered.
  Status begin_checkpoint(JobEntry& entry, job::CheckpointThen then,
                          std::shared_ptr<std::promise<Result<v1::CheckpointRecord>>> promise,
                          const std::vector<std::string>& to = {}, bool periodic = false);
  // The ranks of `names` (checkpoint records' "to"), ascending; unknown names skipped.
  std::vector<Rank> ranks_of(const google::protobuf::RepeatedPtrField<std::string>& names) const;
  std::vector<Rank> ranks_of(const std::vector<std::string>& names) const;
  void checkpoint_due_jobs();
  void prune_periodic_checkpoints(JobEntry& entry);
  // The checkpoint a job that lost a node restarts from: the image its run
  // was restored from, or for --checkpoint-interval its newest good one of
  // this run; -1 for none (then it is requeued or fails as before).
  int restart_checkpoint(const JobEntry& entry) const;
  // Placements: opened at a start, closed at the run's end (persisted).
  void open_placement(JobEntry& entry);
  void close_placement(JobEntry& entry, const std::string& outcome);
  void persist_placement(const JobEntry& entry, std::size_t index);
  // Resizes (see JobEntry::Resizing). `by`: "scheduler" or "user". Each
  // returns an error (and changes nothing) when the job cannot be resized now.
  Status begin_shrink(JobEntry& entry, const std::vector<Rank>& ranks, const std::string& by,
                      std::shared_ptr<std::promise<Result<v1::ResizeRecord>>> promise);
  Status begin_expand(JobEntry& entry, resource::Allocation added, const std::string& by,
                      std::shared_ptr<std::promise<Result<v1::ResizeRecord>>> promise);
  // Why the job cannot start a resize now; empty when it can.
  std::string resize_blocked(const JobEntry& entry) const;
  void send_resize_notice(JobEntry& entry);
  void on_resize_done(Rank rank, const overlay::ResizeDone& done);
  // The outcome is known: record it (store too), answer hpcq resize.
  void finish_resize(JobEntry& entry, const std::string& outcome, const std::string& reason,
                     double answer_seconds);
  // Kills the job's parts on `ranks` (taken from its current allocation)
  // without ending the job; see JobEntry::removing.
  void take_parts_away(JobEntry& entry, const std::vector<Rank>& ranks);
  void send_part_kill(JobEntry& entry, Rank rank);
  void check_resize_deadlines();
  void shrink_off(Rank rank, const std::string& by);
  bool lose_elastic_part(JobEntry& entry, Rank rank, const std::string& node_name);
  void handle_job_update(Rank rank, const overlay::JobUpdate& update);
  // Every part has ended: finished, requeued or cancelled as the job's
  // outcome, cancel or preemption says.
  void all_parts_ended(JobEntry& entry, TimeUs end_time);
  // Sends a started job's Launch to its nodes, once its start is committed.
  void send_launches(JobId id, int attempt);
  void ack_after_commit(Rank rank, JobId job, std::uint32_t attempt);
  void check_heartbeats();
  void heard_from(NodeEntry& node);
  bool schedulable(const NodeEntry& node) const;
  void node_down(NodeEntry& node, const std::string& reason);
  void kill_job_parts(JobEntry& entry);
  void send_kill(JobEntry& entry, Rank rank);
  // Repeats the Launch or Kill messages that nodes have not confirmed.
  void repeat_unconfirmed();
  void finish_job(JobEntry& entry, job::JobState state, const std::string& reason,
                  TimeUs end_time = 0);
  void release_held(JobEntry& entry);
  void hand_over_cores(JobEntry& entry);
  void lose_part(JobEntry& entry, Rank rank, const std::string& why);
  // Requeues the job to be restored from restart_checkpoint() where it has
  // one (kept as restore_pending, so a restarted leader does the same), else
  // to run from the start.
  void requeue_from_checkpoint(JobEntry& entry, const std::string& why);
  void adopt_reported_jobs(NodeEntry& node, const overlay::Hello& hello, bool same_agent);
  overlay::Launch make_launch(const job::Job& job) const;
  void requeue_job(JobEntry& entry, const std::string& reason);
  void persist(const job::Job& job, const std::string& event, const std::string& detail);
  void persist_node(const NodeEntry& node);
  void publish(const job::Job& job);
  // Fair-share usage: the job's cores for the time it held them.
  // From `from` (at least the job's start) to `end`, at its current allocation.
  void charge_usage(const job::Job& job, TimeUs from, TimeUs end);
  void charge_segment(JobEntry& entry);
  void persist_usage();
  // With the multifactor "priority" plugin, the pending jobs a cycle looks
  // at, best first: twice queue_depth of the highest priority (as Slurm
  // sorts by priority first). O(pending). Without it a cycle walks the queue
  // in (submit time, id) order and stops after queue_depth.
  std::vector<JobId> priority_window(const sched::Snapshot& snapshot);
  int host_cpu_of(Rank rank, int core) const;
  v1::Job describe(const job::Job& job) const;
  TimeUs now() const;

  const ClusterConfig config_;
  overlay::EventLoop loop_;
  std::unique_ptr<store::GroupCommitter> committer_;
  std::unique_ptr<overlay::Overlay> overlay_;
  std::unique_ptr<sched::Scheduler> scheduler_;
  resource::NodePool pool_;
  // Event numbers start at this run's start time in microseconds: above
  // every number an earlier run handed out.
  JobEvents events_{100000, static_cast<std::uint64_t>(wall_clock_now())};

  std::map<Rank, NodeEntry> nodes_;
  // Every configured node's shape by rank - 1, for check_fits
  // (daemon/submit_policy.h): kept as Hellos arrive, not rebuilt per submit.
  std::vector<std::optional<NodeShape>> node_shapes_;
  job::JobTable<JobEntry> table_;
  std::map<std::string, Reservation> reservations_;
  std::unique_ptr<DecisionLog> decision_log_;
  sched::UsageLedger usage_;
  bool usage_dirty_ = false;
  // Set when the "priority" plugin is configured: its weights rank the queue.
  std::optional<sched::MultifactorWeights> priority_weights_;
  JobId next_job_id_ = 1;
  TimeUs started_at_ = 0;  // when start() began watching the nodes
  bool cycle_posted_ = false;
  bool frees_resources_ = false;  // a configured action may preempt or shrink: cycle even when full
  bool elastic_action_ = false;   // the "elastic" action is configured
};

}  // namespace hpcq::daemon

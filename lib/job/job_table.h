// The job table: every job's state and the queue, changed only here.
//
// Pure, like lib/sched: no I/O, no clock, no threads. A caller (hpcqd's
// leader) applies an event or a decision with the time it happened and gets
// back the effects to carry out, in order: what to store and publish, which
// jobs entered or left the queue, whose parts to kill, that a cycle is due.
// The model is flux-core's job-manager (one place changes a job, the rest
// reacts to its events) and leveldb's VersionSet (state plus edits).
//
// What the table owns: a job's state, reason, exit code, times, allocation
// and requeue count; the FCFS queue (submit time, then id); the running set;
// dependencies (--dependency) and the jobs that wait on them, with the jobs
// not ended of each user and name that singleton asks about; an array's
// running tasks. What it does not own: resources (the caller's NodePool),
// the protocol state of a run in flight (launches, checkpoints, resizes:
// the daemon's), and the wire.
//
// A run ends in two steps: each part's end is applied (part_ended), and once
// none runs, after_run() says what becomes of the job (finish, requeue, or
// requeue from a checkpoint), which the caller carries out with finish() or
// requeue() after releasing the run's resources.
//
// The table is a template over the entry type so that the daemon can keep
// its own per-job fields next to the table's (Entry derives from JobRecord);
// the logic is in JobTableCore, on JobRecord only.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "lib/core/ids.h"
#include "lib/core/site_policy.h"
#include "lib/core/status.h"
#include "lib/job/job.h"

namespace hpcq::job {

// A running job being stopped for another (a scheduler's Preempt, or a
// move: for_job 0); once its parts have ended it is requeued or cancelled as
// `mode` says, never left running twice.
struct Preemption {
  JobId for_job = 0;
  PreemptMode mode = PreemptMode::kRequeue;
  bool operator==(const Preemption&) const = default;
};

// The table's part of one job.
struct JobRecord {
  Job job;
  std::set<Rank> running_on;                // nodes that have not reported their part's end
  JobState outcome = JobState::kCompleted;  // decided by the first part not completed
  std::string outcome_reason;
  // Set when an MPI world failure decided the outcome: when its shell saw it.
  std::optional<TimeUs> failure_seen_at;
  bool cancel_requested = false;
  // hpcq alloc's command has ended (end_allocation): the outcome and exit
  // code are its, whatever its killed parts report.
  bool allocation_ended = false;
  std::optional<Preemption> preempted;
  // After a preemption: the victim waits until the job it made room for has
  // started (or left the queue), so that it does not take the room back.
  JobId yields_to = 0;
  // Once every part has ended, requeue the job with this reason (a
  // checkpoint that failed half-way; a restore that failed; hpcq requeue).
  std::string requeue_when_ended;
};

// What a change asks the caller to do, in order.
// The reason a pending job with a --begin time still to come shows (as
// Slurm's "BeginTime").
inline constexpr char kBeginReason[] = "begin time not reached";
// Why a pending job with a --deadline ended CANCELLED (Slurm's DEADLINE).
inline constexpr char kDeadlineReason[] = "deadline: it can no longer end by its --deadline";

struct Effect {
  enum class Kind {
    kStored,     // store the job with event `event` and publish it
    kPublished,  // publish the job (its reason changed; not stored)
    kQueued,     // entered the queue
    kDequeued,   // left the queue without starting (held, cancelled)
    kRunEnded,   // left the running set (the decision log's "end")
    kKillParts,  // kill the parts still running
    kSchedule,   // a scheduling cycle is due
  };
  Kind kind;
  JobId job = 0;
  std::string event = {};  // kStored: "submit", "COMPLETED", "requeue", "hold", ...
  bool operator==(const Effect&) const = default;
};
using Effects = std::vector<Effect>;

// What becomes of a job once none of its parts runs.
struct AfterRun {
  enum class Kind { kFinish, kRequeue, kRequeueFromCheckpoint };
  Kind kind = Kind::kFinish;
  JobState state = JobState::kCompleted;  // kFinish
  std::string reason;
  JobId yields_to = 0;  // a requeued victim of a preemption waits for this job
  bool operator==(const AfterRun&) const = default;
};

// Whether an MPI world failure its shell saw at `seen_at` replaces the one
// that decided a run's (or step's) end, seen at `decided_at` (none: a part's
// end decided). The first seen is the cause: a rank's MPI_Abort closes its
// connections, ranks on other nodes may then abort on their own, and their
// report can reach the leader first. Across nodes this is as exact as the
// nodes' clocks agree; 0 (not known) replaces nothing and is not replaced.
bool replaces_world_failure(std::optional<TimeUs> decided_at, TimeUs seen_at);

class JobTableCore {
 public:
  virtual ~JobTableCore() = default;

  // Pending jobs in FCFS order: (submit time, id).
  const std::set<std::pair<TimeUs, JobId>>& pending() const { return pending_; }
  const std::set<JobId>& running() const { return running_; }
  // The running tasks of the array whose first job id is `array_job_id`.
  int array_running(JobId array_job_id) const;

  // A new pending job (the store has it): published, then queued, or left
  // waiting on its dependencies, or cancelled when they can never be met.
  Effects admit(JobRecord& record, TimeUs now);
  // Recovery: a job as the store had it. Running jobs count as running on
  // every node of their allocation until the nodes say otherwise. Call
  // ready_loaded() once every job is loaded.
  void load(JobRecord& record);
  Effects ready_loaded(TimeUs now);
  // A node's Hello (after a leader restart, or its agent's) says it runs
  // `attempt` of the job: true when that is the table's to adopt there;
  // otherwise the caller kills it, so that no job ever runs twice.
  static bool adopts(const JobRecord* record, Rank node, std::uint32_t attempt);
  // The running jobs the table expects on `node` that its Hello did not
  // report (`reported`): lost, unless their launch never reached the node.
  std::vector<JobId> missing_on(Rank node, const std::set<JobId>& reported) const;

  // hpcq hold / release (pending jobs only); `reason`: why it is held
  // ("held by alice").
  Result<Effects> hold(JobRecord& record, bool held, const std::string& reason, TimeUs now);
  // --begin: pending jobs whose begin time has come are queued (call it
  // every few seconds; it costs nothing while none is due).
  Effects release_due(TimeUs now);
  // --deadline: pending jobs (held too) that could no longer end by their
  // deadline, were they started now with their time limit, end CANCELLED
  // (kDeadlineReason). Call it with release_due.
  Effects expire_deadlines(TimeUs now);
  // hpcq update --begin of a pending job: queued now if `begin_us` has come
  // (0: at once), else kept back until it has.
  Result<Effects> set_begin(JobRecord& record, TimeUs begin_us, TimeUs now);
  // hpcq cancel: a pending job ends CANCELLED now; a running one has its
  // parts killed and ends CANCELLED once they have ended.
  Result<Effects> cancel(JobRecord& record, const std::string& by, TimeUs now);
  // hpcq requeue: a running job's parts are killed, then it is requeued to
  // run again from the start (after_run: kRequeue). Running jobs only.
  Result<Effects> requeue_request(JobRecord& record, const std::string& by);
  // hpcq alloc's command ended with `exit_code` (128+N for signal N): the
  // allocation's parts are killed and the job then ends COMPLETED (0) or
  // FAILED with it, as Slurm records a salloc whose command failed. Running
  // jobs of hpcq alloc only (a batch job with no script), not already ending.
  Result<Effects> end_allocation(JobRecord& record, int exit_code);

  // A Start decision the caller's pool accepted: the job runs on every node
  // of `allocation` from `now`. Jobs waiting for it to start (after:) go on.
  Effects start(JobRecord& record, resource::Allocation allocation, TimeUs now);
  // One part's end (`reason` names its node). The first part that did not
  // complete decides the job's state, exit code and reason; the other parts
  // are then killed. A batch job's is decided by its script's part (the
  // first node's), whose end kills the others. When none runs any more, ask
  // after_run().
  Effects part_ended(JobRecord& record, Rank rank, JobState end, int exit_code,
                     const std::string& reason);
  // A task of the running job's MPI world ended it (PMI_Abort, a failure;
  // `reason` names it and its node), reported before its part's end and
  // seen by its shell at `seen_at` (0: not known): unless a part has
  // decided already, the job ends FAILED with `exit_code`, whatever the
  // other nodes' ranks make of it; the parts still running are killed. An
  // earlier-seen failure replaces one that decided (first_world_failure).
  Effects world_failed(JobRecord& record, int exit_code, const std::string& reason, TimeUs seen_at);
  // Every part has ended: what the cancel, the preemption, a failed
  // checkpoint or the parts' outcome make of the job.
  static AfterRun after_run(const JobRecord& record);
  // A node of the running job is lost (down, or not found after a leader
  // restart): from a checkpoint where it has one to restart from, else
  // requeued (--requeue) or ended NODE_FAIL. The other parts are killed.
  static AfterRun after_node_lost(const JobRecord& record, const std::string& why,
                                  bool has_restart_checkpoint);

  // The job ends in `state` at `end_time` (the caller has released its
  // run's resources). Dependents that were waiting on it go on, or are
  // cancelled when it ended in a way they can never accept.
  Effects finish(JobRecord& record, JobState state, const std::string& reason, TimeUs end_time,
                 TimeUs now);
  // Back to the queue at its submit time's place, to run again (its run's
  // resources released by the caller).
  Effects requeue(JobRecord& record, const std::string& reason);

 protected:
  virtual JobRecord* record(JobId id) = 0;
  virtual const JobRecord* record(JobId id) const = 0;

 private:
  enum class Dependencies { kSatisfied, kWaiting, kNever };
  Dependencies check_dependencies(const Job& job, std::string& why) const;
  Dependencies check_dependency(const Job& job, const Dependency& d, std::string& why) const;
  void make_ready(JobRecord& record, TimeUs now, Effects& effects);
  void wait_on_dependencies(Job& job, const std::string& why, Effects& effects);
  void wake_dependents(JobId id, TimeUs now, Effects& effects);

  // --dependency=singleton: each user's and name's jobs not ended (by id:
  // submission order) and those of them running.
  struct NameKey {
    std::uint32_t uid = 0;
    std::string name;
    bool operator==(const NameKey&) const = default;
  };
  struct NameKeyHash {
    std::size_t operator()(const NameKey& key) const noexcept;
  };
  struct SameName {
    std::set<JobId> live;
    std::set<JobId> running;
  };
  static NameKey name_key(const Job& job) { return {job.uid, job.spec.name}; }
  bool singleton_met(const Job& job) const;
  // A job of `key` ended or stopped running: its first job not ended starts
  // if it was waiting on singleton alone.
  void wake_singleton(const NameKey& key, Effects& effects);
  // A job of `key` started, or was admitted ahead of `first`: `first`, if it
  // was queued on singleton's word, waits again.
  void block_singleton(JobId first, Effects& effects);
  void enqueue(const Job& job, Effects& effects);
  void dequeue(const Job& job, Effects& effects);
  void leave_running(const Job& job, Effects& effects);
  void finish_into(JobRecord& record, JobState state, const std::string& reason, TimeUs end_time,
                   TimeUs now, Effects& effects);

  std::set<std::pair<TimeUs, JobId>> pending_;
  std::set<JobId> running_;  // so that a cycle costs O(running), not O(every job ever)
  std::set<JobId> waiting_;  // pending, but held back by --dependency
  std::set<std::pair<TimeUs, JobId>> deferred_;  // pending, held back by --begin, by time
  // Pending jobs with a --deadline, by the last time they may start (kept
  // lazily: an entry of a job that started or ended is dropped when due).
  std::set<std::pair<TimeUs, JobId>> deadlines_;
  void watch_deadline(const Job& job);
  std::map<JobId, std::set<JobId>> dependents_;  // job -> waiting jobs that name it
  std::map<JobId, int> array_running_;           // array job id -> its running tasks
  std::vector<JobId> loaded_pending_;            // load() to ready_loaded()
  // singleton's index of the jobs by user and name.
  std::unordered_map<NameKey, SameName, NameKeyHash> same_name_;
};

// Entry: JobRecord plus the caller's own fields.
template <typename Entry = JobRecord>
class JobTable final : public JobTableCore {
 public:
  // A job the table does not have yet; its entry, to be admitted or loaded.
  Entry& insert(Job job) {
    const JobId id = job.id;
    Entry entry;
    entry.job = std::move(job);
    Entry& stored = jobs_.insert_or_assign(id, std::move(entry)).first->second;
    by_id_[id] = &stored;
    return stored;
  }
  Entry* find(JobId id) {
    auto it = by_id_.find(id);
    return it == by_id_.end() ? nullptr : it->second;
  }
  const Entry* find(JobId id) const {
    auto it = by_id_.find(id);
    return it == by_id_.end() ? nullptr : it->second;
  }
  // Forgets an ended job (for a caller that keeps no history: the
  // simulator). Only a job in a terminal state that no pending job names.
  void erase(JobId id) {
    by_id_.erase(id);
    jobs_.erase(id);
  }
  Entry& at(JobId id) {
    Entry* entry = find(id);
    if (entry == nullptr) throw std::out_of_range("JobTable::at");
    return *entry;
  }
  const Entry& at(JobId id) const {
    const Entry* entry = find(id);
    if (entry == nullptr) throw std::out_of_range("JobTable::at");
    return *entry;
  }
  std::map<JobId, Entry>& jobs() { return jobs_; }
  const std::map<JobId, Entry>& jobs() const { return jobs_; }

 private:
  JobRecord* record(JobId id) override { return find(id); }
  const JobRecord* record(JobId id) const override { return find(id); }

  std::map<JobId, Entry> jobs_;
  // The same entries by id: a lookup costs one hash, not a walk of a tree
  // of every job the leader knows (a scheduling cycle makes a thousand).
  std::unordered_map<JobId, Entry*> by_id_;
};

}  // namespace hpcq::job

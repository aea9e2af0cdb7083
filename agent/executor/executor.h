// What hpcq-agent needs from an executor: start a job's tasks on this node,
// kill them, and say when they ended. Two implementations:
//   ProcessExecutor (process_executor.h): real tasks in cgroups and a PID
//     namespace; the default.
//   TestExecutor (test_executor.h): runs nothing; a job "runs" for the
//     seconds in its HPCQ_TEST_DURATION variable (default 0), as Flux's test
//     execution mode, so that the control plane can be measured alone.
// Checkpoint/restore (CRIU) is part of the interface so that the agent can
// ask any executor; one that cannot answers with kFailedPrecondition and a
// reason (TestExecutor always does: it has no processes to dump).
// Thread: the agent's loop thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/core/ids.h"
#include "lib/core/status.h"
#include "shell/contract.h"

namespace hpcq::agent {

enum class ExitKind { kCompleted, kFailed, kCancelled, kTimeout };
inline const char* exit_kind_name(ExitKind kind) {
  switch (kind) {
    case ExitKind::kCompleted: return "completed";
    case ExitKind::kFailed: return "failed";
    case ExitKind::kCancelled: return "cancelled";
    case ExitKind::kTimeout: return "timeout";
  }
  return "unknown";
}

// A job's or step's end on this node, as reap() reports it.
struct JobExit {
  JobId id = 0;
  ExitKind kind = ExitKind::kCompleted;
  int exit_code = 0;       // 0..255; a process killed by signal N counts as 128 + N
  std::string reason;      // one line; empty for a completed job
  std::uint32_t step = 0;  // set: a step of job `id` ended, not the job
  // Measured on this node: CPU time of its processes (user + system), and
  // the peak memory of its cgroup (with its children's: a job's steps).
  std::int64_t cpu_time_us = 0;
  std::uint64_t max_memory_bytes = 0;
};

// What becomes of a job once its images are written.
enum class CheckpointThen {
  kContinue,  // it runs on here (a checkpoint for later restart)
  kStop,      // it is gone from here (migration, preemption); not reported by reap()
};

struct CheckpointResult;

// The end of a checkpoint begun with begin_checkpoint().
struct CheckpointOutcome;

struct CheckpointResult {
  std::string image_dir;
  bool stopped = false;           // then == kStop: the job no longer runs here
  double dump_seconds = 0;        // wall time of `criu dump` (freeze, write, resume/kill)
  std::uint64_t image_bytes = 0;  // size of the images
};

struct CheckpointOutcome {
  JobId id = 0;
  Status status;            // OK, or why the dump failed (the job still runs)
  CheckpointResult result;  // when status is OK
};

// Some output of a task of a job launched with forward_output.
struct TaskOutput {
  JobId id = 0;
  std::uint32_t step = 0;  // 0: the job's own tasks
  int rank = 0;
  bool is_stderr = false;
  std::string data;
};

// What a job's (or step's) MPI world that spans nodes tells the others
// (pmi.h, pmix_world.h): this node's contribution to a PMI fence (the keys
// its tasks put since the last one), or that a task ended the world (it
// called PMI_Abort, failed, or left without finalizing; sent before the
// node's tasks are ended, so that it, not what its end makes of the other
// nodes' ranks, decides the job's end); both to the leader. A PMIx direct
// modex request for a rank on another node, or this node's answer to one
// (ModexFrame), go to that node.
struct PmiEvent {
  enum class Kind { kFence, kFailure, kModexRequest, kModexData };
  Kind kind = Kind::kFence;
  JobId id = 0;
  std::uint32_t step = 0;
  std::uint32_t seq = 0;             // kFence: the world's fence count, from 0
  int nodes = 0;                     // kFence: the world's nodes, how many contributions make it
  std::vector<std::uint32_t> world;  // kFence: their overlay ranks (JobLaunch::pmi.node_ranks)
  std::string data;    // kFence: pmi::encode_kvs; kFailure: why, "task 3: ..."; kModexData
  int code = 0;        // kFailure: the exit code it gives the job; kModexData: the status
  TimeUs seen_at = 0;  // kFailure: when its shell saw it (wall clock); 0: not said
  // kModexRequest: the shell's request, the world rank asked for and the
  // overlay rank of its node; kModexData: the tag of the request answered.
  std::uint64_t tag = 0;
  std::uint32_t rank = 0;
  std::uint32_t node = 0;
};

// A running job's use of this node so far.
struct LiveUsage {
  std::int64_t cpu_time_us = 0;  // user + system, its live processes and those they reaped
  std::uint64_t memory_bytes = 0;
  std::uint64_t max_memory_bytes = 0;
};

struct RestoreOutcome {
  JobId id = 0;
  Status status;  // OK: the job runs here; else nothing of it does
};

// What the executor runs for a launch: a job's part (step 0), or one of its
// steps.
struct RunId {
  JobId id = 0;
  std::uint32_t step = 0;
  auto operator<=>(const RunId&) const = default;
};
// A launch whose tasks have all been started on this node (take_started).
using LaunchStarted = RunId;

class Executor {
 public:
  virtual ~Executor() = default;

  // Starts the job's tasks without waiting for them (the caller's loop goes
  // on: heartbeats, other jobs); take_started() says when all have started.
  // On error nothing of the job is left.
  virtual Status launch(const JobLaunch& launch, TimeUs now) = 0;
  // A launch with `step` set is a step of a job running here (kNotFound if
  // it is not). The job's end ends its steps too (reaped first).

  // The job and its steps are reported kCancelled by reap(); kNotFound if
  // it is not here.
  virtual Status cancel(JobId id) = 0;
  // Only that step of the job.
  virtual Status cancel_step(JobId id, std::uint32_t step) = 0;
  // Ends the jobs past their time limit (reported kTimeout).
  virtual void check_timeouts(TimeUs now) = 0;
  // Non-blocking: the jobs that ended since the last call.
  virtual std::vector<JobExit> reap() = 0;
  // Non-blocking: the launches (of launch(), not restores) whose tasks have
  // all been started since the last call, or failed to start; each named
  // once, at the latest by the call that follows the reap() reporting its
  // end: call it after reap(), and report a start before an end.
  virtual std::vector<LaunchStarted> take_started() = 0;
  // Non-blocking: the forwarded output read since the last call, in the
  // order written. A job's output is all read by the reap() that reports its
  // end: take it after reap() and send it before the end.
  virtual std::vector<TaskOutput> take_output() = 0;
  // Non-blocking: the PMI fences this node's tasks have entered, and their
  // aborts, since the last call (read by take_output: call it after).
  virtual std::vector<PmiEvent> take_pmi_events() = 0;
  // The outcome of fence `seq` of the job's (or step's) world: every node's
  // contributions. kNotFound if it is not here, kFailedPrecondition if it
  // has no such world.
  virtual Status fence_done(JobId id, std::uint32_t step, std::uint32_t seq,
                            const std::string& data) = 0;
  // Fence `seq` cannot complete: its keys from all nodes passed the job's
  // PMI limit (`why` says so); the shell answers its waiting tasks with it.
  // The same errors as fence_done.
  virtual Status fence_failed(JobId id, std::uint32_t step, std::uint32_t seq,
                              const std::string& why) = 0;
  // A PMIx direct modex frame for the job's (or step's) shell: another
  // node's request for one of this node's ranks (kRequest, whose tag comes
  // back on the answer's kModexData event), or the answer to one of its own
  // (kData, split as split_modex does). Held until the shell has opened its
  // channel. kNotFound if it is not here, kFailedPrecondition if it has no
  // world across nodes.
  virtual Status deliver_modex(JobId id, std::uint32_t step, const ModexFrame& frame) = 0;
  // Fds that become readable when reap(), take_started() or
  // finished_checkpoints() may have something; fetch again after each
  // launch(), reap() and begin_checkpoint().
  virtual std::vector<int> wait_fds() const = 0;
  virtual std::vector<JobId> running() const = 0;
  // Sends `signo` to the job's tasks on this node (an elastic job's resize
  // notice, agent/elastic_job.h); kNotFound if it is not here.
  virtual Status signal(JobId id, int signo) = 0;  // the job's tasks and its steps'
  virtual Status signal_step(JobId id, std::uint32_t step, int signo) = 0;
  // hpcq update --time-limit: the job's limit is now `seconds` from its
  // launch here (0: none); a limit already past ends it at the next check.
  virtual Status set_time_limit(JobId id, std::int64_t seconds) = 0;
  // Standard input for task 0 of a forwarding job (step 0) or step, passed
  // on in order; kNotFound if it is not here, kFailedPrecondition if it does
  // not forward its streams.
  virtual Status write_input(JobId id, std::uint32_t step, const TaskInput& input) = 0;
  // More credit for a forwarded task stream (output_credit.h): its job
  // shell may read `bytes` more of the task's stdout or stderr. kNotFound if
  // it is not here, kFailedPrecondition if its shell does not take credit.
  virtual Status grant_output(JobId id, std::uint32_t step, int rank, bool is_stderr,
                              std::uint64_t bytes) = 0;
  // What the job (with its steps; `step` set: that step) uses here now
  // (hpcq stat); kNotFound if it is not running here.
  virtual Result<LiveUsage> usage(JobId id, std::uint32_t step) const = 0;
  // Ends every job (not reported by reap()) and cleans up.
  virtual void shutdown() = 0;
  // Forgets every job and leaves it running (processes, cgroups, job
  // directory), for the next agent on this node to take back: an agent that
  // restarts keeps its node's jobs. An executor whose jobs cannot outlive it
  // ends them.
  virtual void detach() = 0;
  // The jobs (step 0) and steps taken back from a previous agent when this
  // executor was made, once; they are running(), and reap() reports their
  // ends as of jobs launched here.
  virtual std::vector<RunId> take_adopted() = 0;

  // Whether this node can checkpoint and restore jobs: OK, or
  // kFailedPrecondition with the reason (e.g. "'criu check' failed: ...").
  // The first call does the check (tens of ms); later calls repeat its answer.
  // The agent calls it at start and reports the node's capability.
  virtual Status checkpoint_capability() = 0;
  // Whether it can also checkpoint a job of a user other than its own (a
  // trial dump of an unprivileged process; CRIU without CAP_SYS_RESOURCE
  // cannot): OK, or kFailedPrecondition with the reason. Done once, after
  // checkpoint_capability(), whose failure it repeats.
  virtual Status checkpoint_of_other_users() = 0;
  // Begins writing the images of the running job `id` into `image_dir`
  // (created; it must not hold a checkpoint already); the job then continues
  // or stops. CRIU runs on a thread of the executor while the caller's loop
  // goes on (heartbeats, other jobs); errors found before CRIU starts are
  // returned here: kNotFound, no such job here; kFailedPrecondition, not
  // capable or the job has already ended; kAlreadyExists, image_dir holds a
  // checkpoint. The outcome comes from finished_checkpoints() once one of
  // wait_fds() becomes readable; on error the job still runs here,
  // untouched. While it runs, the job is not reaped, not timed out, and
  // cancel() refuses it (kFailedPrecondition: ask again later).
  virtual Status begin_checkpoint(JobId id, const std::string& image_dir, CheckpointThen then) = 0;
  // Non-blocking: the checkpoints that have ended since the last call.
  virtual std::vector<CheckpointOutcome> finished_checkpoints() = 0;
  // Begins restoring the job from `image_dir` (written by a checkpoint here
  // or on another node) onto `launch`'s allocation (its cpuset, memory limit
  // and per-task CPUs; launch.id must be the checkpointed job), without
  // blocking, as begin_checkpoint: kNotFound, no checkpoint there;
  // kAlreadyExists, the job is running or being restored here. The outcome
  // comes from finished_restores(); on error nothing of the job runs here.
  // Restored, it runs as a launched job: reap() reports its end, and its time
  // limit counts from `now`.
  virtual Status begin_restore(const JobLaunch& launch, const std::string& image_dir,
                               TimeUs now) = 0;
  virtual std::vector<RestoreOutcome> finished_restores() = 0;
};

}  // namespace hpcq::agent

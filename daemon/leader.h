// hpcqd's composition root: builds the rooms on their shared context (see
// docs/ARCHITECTURE.md), recovers the store's state, routes overlay messages
// and timers to the rooms, and answers the API's requests.
//
// One event-loop thread owns every piece of mutable state (STYLE.md rule 5).
// gRPC threads call the public entry points, which post to the loop and
// return futures; the store's writer thread completes submissions. A job's
// path: submit() -> store commit -> admit (the job table: PENDING) ->
// SchedDriver's cycle -> start (Launch to each node over the overlay, by
// JobActions) -> JobUpdate from every node (JobReports) -> end (the table,
// then the store, events, resources released).
//
// Errors reach callers as Status values; the loop never throws.
#pragma once

#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "daemon/checkpoints.h"
#include "daemon/context.h"
#include "daemon/job_actions.h"
#include "daemon/job_reports.h"
#include "daemon/job_stats.h"
#include "daemon/node_monitor.h"
#include "daemon/peer_credentials.h"
#include "daemon/pmi_exchange.h"
#include "daemon/recovery.h"
#include "daemon/resizes.h"
#include "daemon/sched_driver.h"
#include "daemon/steps.h"
#include "lib/core/config.h"
#include "lib/job/job.h"
#include "lib/job/records.h"
#include "proto/hpcq.pb.h"

namespace hpcq::daemon {

// What a submission made: one job, or an array's tasks with consecutive ids.
struct SubmitResult {
  JobId first = 0;
  std::uint32_t count = 1;
};

class Leader {
 public:
  static Result<std::unique_ptr<Leader>> create(const ClusterConfig& config, StoreGuard guard = {});
  ~Leader();

  void run();   // the loop thread; returns after stop()
  void stop();  // any thread
  // Any thread may call the metrics' thread-safe members (submitted).
  Metrics& metrics() { return ctx_.metrics; }

  // Any thread.
  std::future<Result<SubmitResult>> submit(const Caller& caller, job::JobSpec spec);
  // `step` set: only that step of the job.
  std::future<Status> cancel(const Caller& caller, JobId id, job::StepId step = 0);
  // Sends `signo` (checked by the caller) to every task of a running job
  // (and of its steps), or of one step.
  std::future<Status> signal(const Caller& caller, JobId id, job::StepId step, int signo);
  // hpcq requeue: a running job is killed and queued again from the start.
  std::future<Status> requeue(const Caller& caller, JobId id);
  // hpcq alloc's command ended with `exit_code`: its allocation is given back.
  std::future<Status> end_allocation(const Caller& caller, JobId id, int exit_code);
  // hpcq update: a new time limit (> 0 s); users may only lower theirs.
  // hpcq update: a time limit (> 0) and a pending job's begin time (> 0);
  // 0: unchanged.
  std::future<Result<v1::Job>> update(const Caller& caller, JobId id, std::int64_t time_limit_s,
                                      std::int64_t begin_time_us);
  // hpcq stat: what a running job uses now on each node.
  std::future<Result<v1::StatResponse>> stat(const Caller& caller, JobId id, job::StepId step);
  // Standard input of task 0 of an hpcq run job or a step, sent to its node.
  std::future<Status> send_input(const Caller& caller, JobId id, job::StepId step,
                                 overlay::Input input);
  // hpcq run inside a batch job (daemon/steps.h).
  std::future<Result<v1::Step>> launch_step(const Caller& caller, JobId id, job::StepRecord step,
                                            bool immediate);
  std::future<Result<v1::Job>> get_job(const Caller& caller, JobId id);
  std::future<v1::ListJobsResponse> list_jobs(const Caller& caller, v1::ListJobsRequest request);
  std::future<v1::ListNodesResponse> list_nodes();
  std::future<v1::ListQueuesResponse> list_queues();
  std::future<Status> hold(const Caller& caller, JobId id, bool held);
  // to: the node names the restore may use (requeue/stop only; empty: any);
  // elsewhere: `to` becomes other nodes that can take it now (hpcq migrate).
  std::future<Result<job::CheckpointRecord>> checkpoint(const Caller& caller, JobId id,
                                                        job::CheckpointThen then,
                                                        std::vector<std::string> to = {},
                                                        bool elsewhere = false);
  // hpcq resize: a running elastic job to `nodes` nodes within its range
  // (owner or admin); answered with the record once the application has
  // answered or the resize timed out (overlay.proto, message Resize).
  std::future<Result<job::ResizeRecord>> resize(const Caller& caller, JobId id, int nodes);
  std::future<Status> drain(const Caller& caller, const std::string& node, bool drained,
                            const std::string& reason);
  std::future<Result<v1::Reservation>> create_reservation(const Caller& caller,
                                                          v1::Reservation request);
  std::future<Status> delete_reservation(const Caller& caller, std::string name);
  std::future<v1::ListReservationsResponse> list_reservations();
  JobEvents& events() { return ctx_.events; }
  JobOutput& output() { return ctx_.output; }
  // The hpcq command's calls that agents forward (daemon/forwarded_calls.h):
  // `handler` gets their envelopes on the loop thread (set before run());
  // send_to_node() from any thread.
  void on_forwarded(std::function<void(Rank, overlay::Envelope&&)> handler) {
    on_forwarded_ = std::move(handler);
  }
  void send_to_node(overlay::Envelope envelope);

 private:
  Leader(const ClusterConfig& config, StoreGuard guard);
  Status start();

  // Loop thread only, below.
  // Runs `fn` on the loop thread and answers with what it returns: how a
  // request that answers at once reaches the state the loop owns.
  template <typename Fn>
  auto ask(Fn fn) -> std::future<decltype(fn())> {
    auto promise = std::make_shared<std::promise<decltype(fn())>>();
    auto future = promise->get_future();
    ctx_.loop.post([promise, fn = std::move(fn)]() mutable { promise->set_value(fn()); });
    return future;
  }
  void admit(job::Job job);
  // Whether `caller` may see and act on `job`: its owner or an admin (like
  // Slurm's PrivateData=jobs).
  static bool may_see(const Caller& caller, const job::Job& job);
  // The job `id` if `caller` may act on it; else kNotFound, or
  // kPermissionDenied saying the same neutral thing on every path.
  Result<JobEntry*> find_for(const Caller& caller, JobId id);
  // Routes an overlay message to the room that owns its protocol.
  void on_message(overlay::Envelope&& envelope);
  // The metrics' gauges: jobs, nodes and cores now (every second, when served).
  void count_state();
  int host_cpu_of(Rank rank, int core) const;
  v1::Job describe(const job::Job& job) const;
  // hpcq update --time-limit: users may only lower it (checked first, so
  // that an update changes all it asks or nothing); running parts are told.
  Status check_time_limit(const Caller& caller, const JobEntry& entry,
                          std::int64_t time_limit_s) const;
  void set_time_limit(const Caller& caller, JobEntry& entry, std::int64_t time_limit_s);

  // The rooms, built in this order on the context they share (see
  // docs/ARCHITECTURE.md): each includes only the ones below it.
  Context ctx_;
  StoreGuard guard_;  // for recover()
  JobActions actions_{ctx_};
  Resizes resizes_{ctx_, actions_};
  Checkpoints checkpoints_{ctx_, actions_};
  Steps steps_{ctx_, actions_};
  JobStats stats_{ctx_};
  PmiExchange pmi_{ctx_, actions_, steps_};
  JobReports reports_{ctx_, actions_, resizes_, steps_};
  NodeMonitor monitor_{ctx_, actions_, resizes_, checkpoints_, reports_};
  SchedDriver driver_{ctx_, actions_, checkpoints_, resizes_};
  JobId next_job_id_ = 1;
  std::function<void(Rank, overlay::Envelope&&)> on_forwarded_;
};

}  // namespace hpcq::daemon

#include "daemon/leader.h"

#include <pwd.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <set>
#include <thread>

#include "daemon/authenticator.h"
#include "daemon/recovery.h"
#include "daemon/state_dir.h"
#include "daemon/submit_policy.h"
#include "lib/api/job_proto.h"
#include "lib/core/units.h"
#include "lib/overlay/messages.h"
#include "lib/overlay/tree.h"
#include "lib/resource/allocator.h"
#include "lib/store/codec.h"
#include "lib/store/store.h"

namespace hpcq::daemon {
namespace {

std::string user_name_of(uid_t uid) {
  passwd pw{};
  passwd* result = nullptr;
  char buf[4096];
  if (getpwuid_r(uid, &pw, buf, sizeof buf, &result) == 0 && result) return pw.pw_name;
  return std::to_string(uid);
}

template <typename T>
std::future<T> ready(T value) {
  std::promise<T> p;
  p.set_value(std::move(value));
  return p.get_future();
}

}  // namespace

Leader::Leader(const ClusterConfig& config, StoreGuard guard)
    : ctx_(config), guard_(std::move(guard)) {}

Leader::~Leader() {
  ctx_.events.close();
  ctx_.output.shutdown();
  ctx_.overlay.reset();
  ctx_.committer.reset();  // drains and commits what is queued
}

Result<std::unique_ptr<Leader>> Leader::create(const ClusterConfig& config, StoreGuard guard) {
  std::unique_ptr<Leader> leader(new Leader(config, std::move(guard)));
  HPCQ_RETURN_IF_ERROR(leader->start());
  return leader;
}

Status Leader::start() {
  HPCQ_RETURN_IF_ERROR(prepare_state_dir(ctx_.config.state_dir));
  HPCQ_RETURN_IF_ERROR(driver_.configure());
  if (!ctx_.config.decision_log.empty()) {
    auto log = DecisionLog::open(ctx_.config.decision_log);
    if (!log.is_ok()) return log.status();
    ctx_.decision_log = std::move(log).value();
    ctx_.decision_log->config(ctx_.now(), ctx_.config.actions, ctx_.config.plugins,
                              ctx_.config.scheduler_options, ctx_.config.queue_depth,
                              ctx_.config.site.licenses);
  }
  auto recovered = recover(ctx_, guard_);
  if (!recovered.is_ok()) return recovered.status();
  next_job_id_ = recovered->next_job_id;
  ctx_.committer = std::make_unique<store::GroupCommitter>(
      std::move(recovered->store), store::GroupCommitter::kDefaultMaxOps,
      [this](double seconds) { ctx_.metrics.committed(seconds); });
  if (!ctx_.config.metrics_listen.empty()) {
    HPCQ_RETURN_IF_ERROR(ctx_.metrics.serve(ctx_.config.metrics_listen));
    spdlog::info("hpcqd: metrics at http://{}/metrics", ctx_.config.metrics_listen);
    ctx_.loop.run_every(std::chrono::seconds(1), [this] { count_state(); });
  }
  actions_.apply(recovered->ready);

  auto keys = overlay::read_key_file(ctx_.config.secret_key, /*require_secret=*/true);
  if (!keys.is_ok()) return keys.status();
  if (keys->public_key != ctx_.config.ranks[0].public_key) {
    return invalid_argument(ctx_.config.secret_key + ": its public key is not rank 0's in " +
                            ctx_.config.source);
  }
  auto oc = overlay::OverlayConfig::from_cluster(ctx_.config, 0, *keys);
  auto overlay = overlay::Overlay::create(
      oc, ctx_.loop, [this](overlay::Envelope&& e) { on_message(std::move(e)); });
  // Candidates sharing one address for rank 0 (a moving address): a deposed
  // leader that has not yet noticed (frozen, say) holds it until it does,
  // and exits.
  for (bool told = false; !overlay.is_ok() && ctx_.config.store == "etcd" &&
                          overlay.status().message().find("in use") != std::string::npos;) {
    if (!told)
      spdlog::warn("hpcqd: {}: waiting for the address to be free", overlay.status().message());
    told = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    overlay = overlay::Overlay::create(oc, ctx_.loop,
                                       [this](overlay::Envelope&& e) { on_message(std::move(e)); });
  }
  if (!overlay.is_ok()) return overlay.status();
  ctx_.overlay = std::move(overlay).value();

  actions_.set_cycle([this] { driver_.run_cycle(); });
  actions_.set_run_end([this](JobEntry& entry) {
    resizes_.on_run_end(entry);
    steps_.on_run_end(entry);
  });
  monitor_.start_watching();
  reports_.start();
  ctx_.loop.run_every(std::chrono::milliseconds(ctx_.config.heartbeat_interval_ms), [this] {
    monitor_.check_heartbeats();
    checkpoints_.check_deadlines();
    resizes_.check_deadlines();
    steps_.repeat_unconfirmed();
    stats_.check_deadlines();
    pmi_.drop_ended();
    actions_.repeat_unconfirmed();
    checkpoints_.checkpoint_due_jobs();
    actions_.apply(ctx_.table.release_due(ctx_.now()));  // --begin times that have come
    actions_.apply(ctx_.table.expire_deadlines(ctx_.now()));
    if (driver_.wants_periodic_cycle()) actions_.schedule_soon();
  });
  if (ctx_.config.full_cycle_interval_s > 0) {
    ctx_.loop.run_every(std::chrono::seconds(ctx_.config.full_cycle_interval_s), [this] {
      if (driver_.wants_full_cycle()) driver_.run_cycle(/*full=*/true);
    });
  }
  ctx_.loop.run_every(std::chrono::seconds(10), [this] { actions_.persist_usage(); });
  actions_.schedule_soon();
  return Status::ok();
}

void Leader::run() { ctx_.loop.run(); }

void Leader::stop() { ctx_.loop.stop(); }

std::future<Result<SubmitResult>> Leader::submit(const Caller& caller, job::JobSpec spec) {
  Status valid = job::validate(spec);
  if (valid.is_ok()) {
    // The caller's groups (a database lookup) only where the job's queue
    // admits by group.
    const QueueConfig* queue = ctx_.config.site.find_queue(spec.queue);
    const bool by_group = queue != nullptr && !queue->allow_groups.empty();
    valid = apply_submit_policy(
        ctx_.config, caller.uid,
        by_group ? group_names_of(caller.uid, caller.gid) : std::vector<std::string>{},
        caller.is_admin(), spec);
  }
  if (!valid.is_ok()) return ready<Result<SubmitResult>>(valid);
  std::vector<int> indices;
  int max_running = 0;
  if (!spec.array.empty()) {
    auto array = job::parse_array(spec.array);  // validate() accepted it
    if (!array.is_ok()) return ready<Result<SubmitResult>>(array.status());
    indices = std::move(array->indices);
    max_running = array->max_running;
  }

  auto promise = std::make_shared<std::promise<Result<SubmitResult>>>();
  auto future = promise->get_future();
  job::Job job;
  job.uid = caller.uid;
  job.gid = caller.gid;
  job.user = user_name_of(caller.uid);
  job.spec = std::move(spec);
  job.state = job::JobState::kPending;
  ctx_.loop.post([this, promise, job = std::move(job), indices = std::move(indices),
                  max_running]() mutable {
    // A repeat of a submission (its client did not hear the answer) gets
    // the jobs the first made, or waits for them while it is stored.
    const std::string key = job.spec.submission_key;
    if (!key.empty()) {
      auto answer = [promise](const Result<job::SubmissionKeys::Made>& made) {
        if (!made.is_ok()) return promise->set_value(made.status());
        promise->set_value(SubmitResult{made->first, made->count});
      };
      if (ctx_.submission_keys.claim(job.uid, key, answer) != job::SubmissionKeys::Claim::kNew) {
        spdlog::info("a submission by uid {} came again: answered with what it made", job.uid);
        return;
      }
    }
    const std::uint32_t uid = job.uid;
    auto refuse = [this, promise, uid, key](const Status& why) {
      if (!key.empty()) ctx_.submission_keys.failed(uid, key, why);
      promise->set_value(why);
    };
    if (Status fits = check_fits(ctx_.node_shapes, job.spec); !fits.is_ok()) {
      return refuse(fits);
    }
    for (const job::Dependency& d : job.spec.dependencies) {
      // singleton names no job: it asks the table about the job's name.
      if (d.type != job::DependencyType::kSingleton && ctx_.table.find(d.job) == nullptr) {
        return refuse(invalid_argument("--dependency: no job " + std::to_string(d.job)));
      }
    }
    // One copy of an environment for every job submitted with it (an
    // array's tasks share the job's).
    job.spec.env = ctx_.environments.intern(job.spec.env);
    // An array is one submission: its tasks are stored in one transaction
    // and answered together.
    std::vector<job::Job> made;
    const TimeUs submitted = ctx_.now();
    const std::size_t count = indices.empty() ? 1 : indices.size();
    const JobId first = next_job_id_;
    next_job_id_ += count;
    store::WriteBatch batch;
    for (std::size_t i = 0; i < count; ++i) {
      job::Job task = job;
      task.id = first + i;
      task.submit_time = submitted;
      task.held = task.spec.hold;
      if (!indices.empty()) {
        task.spec.array_job_id = first;
        task.spec.array_task_id = indices[i];
        task.spec.array_max_running = max_running;
      }
      batch.insert_job(task);
      batch.append_event(task.id, submitted, "submit", "{}");
      made.push_back(std::move(task));
    }
    // The answer goes out only after the commit, and after the loop has the
    // jobs, so that a status call right after the answer finds them.
    ctx_.committer->submit(std::move(batch), [this, promise, refuse, made = std::move(made), uid,
                                              key, first, count](Status s) mutable {
      if (!s.is_ok()) {
        spdlog::error("job {}: not stored: {}", first, s.message());
        // The store's code: kResourceExhausted for a full disk, kUnavailable
        // for a busy database. The key is the loop's.
        ctx_.loop.post([refuse, s] {
          refuse(Status(s.code(), "the job could not be stored: " + s.message()));
        });
        return;
      }
      ctx_.loop.post([this, promise, made = std::move(made), uid, key, first, count]() mutable {
        for (job::Job& task : made) admit(std::move(task));
        const SubmitResult result{first, static_cast<std::uint32_t>(count)};
        if (!key.empty()) ctx_.submission_keys.made(uid, key, {result.first, result.count});
        promise->set_value(result);
      });
    });
  });
  return future;
}

bool Leader::may_see(const Caller& caller, const job::Job& job) {
  return caller.is_admin() || caller.uid == job.uid;
}

Result<JobEntry*> Leader::find_for(const Caller& caller, JobId id) {
  JobEntry* entry = ctx_.table.find(id);
  if (entry == nullptr) return not_found("no job " + std::to_string(id));
  // The same neutral answer on every path: whose job it is is not ours to say.
  if (!may_see(caller, entry->job)) {
    return permission_denied("job " + std::to_string(id) + " belongs to another user");
  }
  return entry;
}

std::future<Status> Leader::cancel(const Caller& caller, JobId id, job::StepId step) {
  return ask([this, caller, id, step]() -> Status {
    auto found = find_for(caller, id);
    if (!found.is_ok()) return found.status();
    if (step != 0) return steps_.cancel(**found, step, user_name_of(caller.uid));
    auto cancelled = ctx_.table.cancel(**found, user_name_of(caller.uid), ctx_.now());
    if (!cancelled.is_ok()) return cancelled.status();
    actions_.apply(*cancelled);
    return Status::ok();
  });
}

std::future<Status> Leader::signal(const Caller& caller, JobId id, job::StepId step, int signo) {
  return ask([this, caller, id, step, signo]() -> Status {
    auto found = find_for(caller, id);
    if (!found.is_ok()) return found.status();
    JobEntry& entry = **found;
    if (entry.job.state != job::JobState::kRunning) {
      return failed_precondition("job " + std::to_string(id) + " is " +
                                 job::state_name(entry.job.state) + ", not running");
    }
    if (step != 0) return steps_.signal(entry, step, signo);
    actions_.send_signal(entry, entry.running_on, 0, signo);
    return Status::ok();
  });
}

std::future<Result<v1::StatResponse>> Leader::stat(const Caller& caller, JobId id,
                                                   job::StepId step) {
  auto promise = std::make_shared<JobStats::Promise>();
  auto future = promise->get_future();
  ctx_.loop.post([this, caller, id, step, promise] {
    auto found = find_for(caller, id);
    if (!found.is_ok()) return promise->set_value(found.status());
    const JobEntry& entry = **found;
    if (entry.job.state != job::JobState::kRunning) {
      return promise->set_value(failed_precondition("job " + std::to_string(id) + " is " +
                                                    job::state_name(entry.job.state) +
                                                    ", not running"));
    }
    if (step != 0) {
      auto running = Steps::running(entry, step);
      if (!running.is_ok()) return promise->set_value(running.status());
    }
    stats_.ask(entry, step, promise);
  });
  return future;
}

std::future<Status> Leader::send_input(const Caller& caller, JobId id, job::StepId step,
                                       overlay::Input input) {
  return ask([this, caller, id, step, input = std::move(input)]() mutable -> Status {
    auto found = find_for(caller, id);
    if (!found.is_ok()) return found.status();
    JobEntry& entry = **found;
    const std::string job = "job " + std::to_string(id);
    if (job::is_terminal(entry.job.state)) {
      return failed_precondition(job + " is " + job::state_name(entry.job.state) + ", not running");
    }
    if (entry.job.state != job::JobState::kRunning) {
      return unavailable(job + " has not started yet");
    }
    Rank rank = 0;
    if (step != 0) {
      auto first = steps_.first_node(entry, step);
      if (!first.is_ok()) return first.status();
      rank = *first;
    } else if (!entry.job.spec.forward_output || entry.job.allocation.nodes.empty()) {
      return failed_precondition(job + " reads no input (only hpcq run's jobs and steps do)");
    } else {
      rank = entry.job.allocation.nodes.front().rank;  // task 0's, block or cyclic
      // (An adopted job, after a restart of hpcqd, runs: it has no Launch.)
      if (entry.launch && !entry.started_on.count(rank)) {
        return unavailable(job + " has not started yet");
      }
    }
    return actions_.send_input(entry, rank, step, std::move(input));
  });
}

std::future<Status> Leader::requeue(const Caller& caller, JobId id) {
  return ask([this, caller, id]() -> Status {
    auto found = find_for(caller, id);
    if (!found.is_ok()) return found.status();
    auto asked = ctx_.table.requeue_request(**found, user_name_of(caller.uid));
    if (!asked.is_ok()) return asked.status();
    actions_.apply(*asked);
    return Status::ok();
  });
}

std::future<Status> Leader::end_allocation(const Caller& caller, JobId id, int exit_code) {
  return ask([this, caller, id, exit_code]() -> Status {
    auto found = find_for(caller, id);
    if (!found.is_ok()) return found.status();
    auto ended = ctx_.table.end_allocation(**found, exit_code);
    if (!ended.is_ok()) return ended.status();
    actions_.apply(*ended);
    return Status::ok();
  });
}

std::future<Result<v1::Job>> Leader::update(const Caller& caller, JobId id,
                                            std::int64_t time_limit_s, std::int64_t begin_time_us) {
  return ask([this, caller, id, time_limit_s, begin_time_us]() -> Result<v1::Job> {
    auto found = find_for(caller, id);
    if (!found.is_ok()) return found.status();
    JobEntry& entry = **found;
    const std::string job = "job " + std::to_string(id);
    if (job::is_terminal(entry.job.state)) {
      return failed_precondition(job + " already ended (" + job::state_name(entry.job.state) + ")");
    }
    if (time_limit_s <= 0 && begin_time_us <= 0) {
      return invalid_argument("update: nothing to change");
    }
    // All or nothing: the time limit is checked before the begin time
    // changes, which the table refuses for a job that is not pending.
    if (time_limit_s > 0) HPCQ_RETURN_IF_ERROR(check_time_limit(caller, entry, time_limit_s));
    if (begin_time_us > 0) {
      auto changed = ctx_.table.set_begin(entry, begin_time_us, ctx_.now());
      if (!changed.is_ok()) return changed.status();
      actions_.apply(*changed);
    }
    if (time_limit_s > 0) set_time_limit(caller, entry, time_limit_s);
    return describe(entry.job);
  });
}

Status Leader::check_time_limit(const Caller& caller, const JobEntry& entry,
                                std::int64_t time_limit_s) const {
  const std::string job = "job " + std::to_string(entry.job.id);
  const std::int64_t now_limit = entry.job.spec.time_limit_s;
  if (!caller.is_admin() && (now_limit <= 0 || time_limit_s > now_limit)) {
    return permission_denied("update: only root may raise a time limit (" + job + "'s is " +
                             (now_limit > 0 ? std::to_string(now_limit) + " s" : "unlimited") +
                             ")");
  }
  job::JobSpec changed = entry.job.spec;
  changed.time_limit_s = time_limit_s;
  return job::validate(changed);
}

void Leader::set_time_limit(const Caller& caller, JobEntry& entry, std::int64_t time_limit_s) {
  entry.job.spec.time_limit_s = time_limit_s;
  entry.time_limit_updated = true;
  actions_.persist(
      entry.job, "update",
      "time limit " + std::to_string(time_limit_s) + " s by " + user_name_of(caller.uid));
  for (Rank rank : entry.running_on) actions_.send_time_limit(entry, rank);
  actions_.schedule_soon();  // backfill reads the limits
}

std::future<Result<v1::Step>> Leader::launch_step(const Caller& caller, JobId id,
                                                  job::StepRecord step, bool immediate) {
  return ask([this, caller, id, step = std::move(step), immediate]() mutable -> Result<v1::Step> {
    auto found = find_for(caller, id);
    if (!found.is_ok()) return found.status();
    return steps_.launch(**found, std::move(step), immediate);
  });
}

std::future<Result<v1::Job>> Leader::get_job(const Caller& caller, JobId id) {
  return ask([this, caller, id]() -> Result<v1::Job> {
    auto found = find_for(caller, id);
    if (!found.is_ok()) return found.status();
    const JobEntry& entry = **found;
    v1::Job described = describe(entry.job);
    for (const job::CheckpointRecord& r : entry.checkpoints)
      *described.add_checkpoints() = api::to_proto(r);
    for (const job::ResizeRecord& r : entry.resizes) *described.add_resizes() = api::to_proto(r);
    described.set_restore_from(entry.restore_from);
    for (const job::Placement& p : entry.placements) *described.add_placements() = api::to_proto(p);
    for (const job::StepRecord& s : entry.steps) *described.add_steps() = api::to_proto(s);
    return described;
  });
}

std::future<v1::ListJobsResponse> Leader::list_jobs(const Caller& caller,
                                                    v1::ListJobsRequest request) {
  return ask([this, caller, request]() -> v1::ListJobsResponse {
    v1::ListJobsResponse response;
    const std::set<int> states(request.states().begin(), request.states().end());
    for (const auto& [id, entry] : ctx_.table.jobs()) {
      const job::Job& job = entry.job;
      const bool ended = job::is_terminal(job.state);
      if (!request.all() && !request.ended_only() && ended) continue;
      if (request.ended_only() && !ended) continue;
      if (request.has_uid() && job.uid != request.uid()) continue;
      if (request.array_job_id() != 0 && job.spec.array_job_id != request.array_job_id()) continue;
      if (!states.empty() && !states.count(api::to_proto(job.state))) continue;
      if (request.ended_after_us() && job.end_time < request.ended_after_us()) continue;
      if (request.ended_before_us() && job.end_time >= request.ended_before_us()) continue;
      // Like Slurm's PrivateData=jobs: users see their own jobs, admins all.
      if (!may_see(caller, job)) continue;
      v1::Job* listed = response.add_jobs();
      *listed = describe(job);
      // Accounting shows every node set a job ran on (migrations, restarts).
      for (const job::Placement& p : entry.placements) *listed->add_placements() = api::to_proto(p);
      for (const job::StepRecord& s : entry.steps) *listed->add_steps() = api::to_proto(s);
    }
    return response;
  });
}

std::future<Status> Leader::hold(const Caller& caller, JobId id, bool held) {
  return ask([this, caller, id, held]() -> Status {
    auto found = find_for(caller, id);
    if (!found.is_ok()) return found.status();
    auto changed =
        ctx_.table.hold(**found, held, "held by " + user_name_of(caller.uid), ctx_.now());
    if (!changed.is_ok()) return changed.status();
    actions_.apply(*changed);
    return Status::ok();
  });
}

std::future<Result<v1::Reservation>> Leader::create_reservation(const Caller& caller,
                                                                v1::Reservation request) {
  auto promise = std::make_shared<std::promise<Result<v1::Reservation>>>();
  auto future = promise->get_future();
  ctx_.loop.post([this, caller, request = std::move(request), promise] {
    if (!caller.is_admin()) {
      return promise->set_value(permission_denied("reserve: only root may create reservations"));
    }
    auto known = [this](const std::string& name) {
      return std::any_of(ctx_.nodes.begin(), ctx_.nodes.end(),
                         [&](const auto& n) { return n.second.name == name; });
    };
    auto made = reservation_from_request(request, known, ctx_.now());
    if (!made.is_ok()) return promise->set_value(made.status());
    Reservation r = std::move(made).value();
    if (ctx_.reservations.count(r.name)) {
      return promise->set_value(
          Status(Code::kAlreadyExists, "reservation " + quote(r.name) + " already exists"));
    }
    for (const auto& [name, other] : ctx_.reservations) {
      if (overlaps(r, other)) {
        return promise->set_value(failed_precondition("reservation " + quote(r.name) +
                                                      " overlaps reservation " + quote(name)));
      }
    }
    // As Slurm: the nodes must be free of other users' jobs by the start,
    // judged by the running jobs' time limits.
    for (JobId id : ctx_.table.running()) {
      const job::Job& job = ctx_.table.at(id).job;
      const bool admitted =
          std::find(r.uids.begin(), r.uids.end(), job.uid) != r.uids.end() ||
          std::find(r.accounts.begin(), r.accounts.end(), job.spec.account) != r.accounts.end();
      const TimeUs end = job.spec.time_limit_s > 0
                             ? job.start_time + job.spec.time_limit_s * kUsPerSecond
                             : std::numeric_limits<TimeUs>::max();
      if (admitted || end <= r.start) continue;
      for (const auto& part : job.allocation.nodes) {
        if (std::find(r.nodes.begin(), r.nodes.end(), part.node) != r.nodes.end()) {
          return promise->set_value(
              failed_precondition("node " + part.node + " is busy during the reservation (job " +
                                  std::to_string(id) + " may run until its time limit)"));
        }
      }
    }
    store::WriteBatch batch;
    batch.put_record("reservation", r.name, encode_reservation(r));
    v1::Reservation answer = to_proto(r);
    ctx_.committer->submit(
        std::move(batch), [this, r = std::move(r), answer, promise](Status s) mutable {
          if (!s.is_ok()) {
            return promise->set_value(
                Status(s.code(), "the reservation could not be stored: " + s.message()));
          }
          ctx_.loop.post([this, r = std::move(r), answer, promise]() mutable {
            spdlog::info("reservation {}: {} nodes for [{}, {}) us", r.name, r.nodes.size(),
                         r.start, r.end);
            const std::string name = r.name;
            ctx_.reservations.emplace(name, std::move(r));
            actions_.schedule_soon();
            promise->set_value(answer);
          });
        });
  });
  return future;
}

std::future<Status> Leader::delete_reservation(const Caller& caller, std::string name) {
  auto promise = std::make_shared<std::promise<Status>>();
  auto future = promise->get_future();
  ctx_.loop.post([this, caller, name = std::move(name), promise] {
    if (!caller.is_admin()) {
      return promise->set_value(permission_denied("reserve: only root may delete reservations"));
    }
    if (ctx_.reservations.erase(name) == 0) {
      return promise->set_value(not_found("no reservation " + quote(name)));
    }
    store::WriteBatch batch;
    batch.delete_record("reservation", name);
    ctx_.committer->submit(std::move(batch), [promise](Status s) { promise->set_value(s); });
    actions_.schedule_soon();
  });
  return future;
}

std::future<v1::ListReservationsResponse> Leader::list_reservations() {
  return ask([this]() -> v1::ListReservationsResponse {
    v1::ListReservationsResponse response;
    const TimeUs t = ctx_.now();
    for (const auto& [name, r] : ctx_.reservations) {
      if (r.end > t) *response.add_reservations() = to_proto(r);
    }
    return response;
  });
}

void Leader::admit(job::Job job) {
  actions_.apply(ctx_.table.admit(ctx_.table.insert(std::move(job)), ctx_.now()));
}

void Leader::count_state() {
  StateCounts counts;
  const bool per_node = ctx_.config.metrics_per_node;
  std::map<Rank, int> jobs_on;  // per_node: running jobs by node
  for (const auto& [id, entry] : ctx_.table.jobs()) {
    const job::Job& job = entry.job;
    if (job::is_terminal(job.state)) continue;
    ++counts.jobs[{state_label(job::state_name(job.state)), job.spec.queue}];
    if (per_node && job.state == job::JobState::kRunning) {
      for (const auto& part : job.allocation.nodes) ++jobs_on[part.rank];
    }
  }
  for (const auto& [rank, node] : ctx_.nodes) {
    const resource::NodeState* pooled = ctx_.pool.find(rank);
    const char* state = node.state != NodeState::kUp ? "down"
                        : node.drained               ? "drained"
                        : node.unresponsive          ? "unresponsive"
                                                     : "up";
    ++counts.nodes[state];
    StateCounts::Node* mine = nullptr;
    if (per_node) {
      mine = &counts.per_node[node.name];
      mine->state = state;
      mine->jobs = jobs_on[rank];
      mine->heartbeat_age =
          node.last_seen == 0 ? 0 : static_cast<double>(ctx_.now() - node.last_seen) / kUsPerSecond;
    }
    if (node.state != NodeState::kUp || pooled == nullptr) continue;
    const double total = pooled->topology().num_cores();
    const double free = pooled->free_cores();
    counts.cores_allocated += total - free;
    if (pooled->schedulable()) {
      counts.cores_free += free;
    } else {
      counts.cores_unavailable += free;
    }
    counts.gpus_allocated += pooled->topology().gpus.size() - pooled->free_gpus();
    counts.gpus_free += pooled->free_gpus();
    if (mine != nullptr) {
      mine->cores_allocated = total - free;
      mine->cores_free = free;
      mine->gpus_allocated =
          static_cast<double>(pooled->topology().gpus.size()) - pooled->free_gpus();
      mine->gpus_free = pooled->free_gpus();
      mine->memory_free = static_cast<double>(pooled->free_memory());
      mine->memory_allocated =
          static_cast<double>(pooled->topology().memory_bytes) - mine->memory_free;
    }
  }
  ctx_.metrics.set_state(counts);
}

void Leader::on_message(overlay::Envelope&& envelope) {
  Rank rank = envelope.src();
  auto node = ctx_.nodes.find(rank);
  if (node == ctx_.nodes.end()) {
    spdlog::warn("overlay: message from unknown rank {}", rank);
    return;
  }
  if (ctx_.metrics.serving()) ctx_.metrics.overlay_received(overlay::body_name(envelope));
  switch (envelope.body_case()) {
    case overlay::Envelope::kHello: monitor_.on_hello(rank, envelope.hello()); break;
    case overlay::Envelope::kResizeDone:
      monitor_.heard_from(node->second);
      resizes_.on_resize_done(rank, envelope.resize_done());
      break;
    case overlay::Envelope::kHeartbeat:
      if (node->second.state != NodeState::kUp) {
        // An agent that was declared down, or that the leader forgot (it
        // restarted): ask it to introduce itself again.
        overlay::Envelope reply;
        reply.set_dst(rank);
        reply.mutable_welcome()->set_send_hello(true);
        (void)ctx_.overlay->send(std::move(reply));
      } else {
        monitor_.heard_from(node->second);
        // The answer renews the node's lease on its jobs: without one for
        // fence_after_ms they kill themselves, before node_down_after_ms
        // lets this leader run them elsewhere (leader_lease.h).
        overlay::Envelope answer;
        answer.set_dst(rank);
        answer.mutable_heartbeat()->set_sent_at_us(envelope.heartbeat().sent_at_us());
        (void)ctx_.overlay->send(std::move(answer));
      }
      break;
    case overlay::Envelope::kJobUpdate:
      if (node->second.state == NodeState::kUp) monitor_.heard_from(node->second);
      if (auto why = reports_.on_job_update(rank, envelope.job_update())) {
        (void)monitor_.drain(node->second.name, true, *why, "hpcqd");
      }
      break;
    case overlay::Envelope::kCheckpointDone:
      checkpoints_.on_checkpoint_done(rank, envelope.checkpoint_done());
      break;
    case overlay::Envelope::kUsageReport: stats_.on_report(rank, envelope.usage_report()); break;
    case overlay::Envelope::kPmiFence: pmi_.on_fence(rank, envelope.pmi_fence()); break;
    case overlay::Envelope::kPmiFailure: pmi_.on_failure(rank, envelope.pmi_failure()); break;
    case overlay::Envelope::kOutput:
      reports_.on_output(rank, std::move(*envelope.mutable_output()));
      break;
    case overlay::Envelope::kNodeCheck: monitor_.on_node_check(rank, envelope.node_check()); break;
    case overlay::Envelope::kForwardedCall:
    case overlay::Envelope::kForwardedCancel:
      if (on_forwarded_) on_forwarded_(rank, std::move(envelope));
      break;
    default:
      spdlog::warn("overlay: unexpected message {} from rank {}",
                   static_cast<int>(envelope.body_case()), rank);
  }
}

void Leader::send_to_node(overlay::Envelope envelope) {
  ctx_.loop.post([this, envelope = std::move(envelope)]() mutable {
    if (ctx_.overlay) (void)ctx_.overlay->send(std::move(envelope));
  });
}

int Leader::host_cpu_of(Rank rank, int core) const {
  auto it = ctx_.nodes.find(rank);
  if (it == ctx_.nodes.end()) return core;
  const NodeEntry& node = it->second;
  if (core >= 0 && static_cast<std::size_t>(core) < node.core_host_cpus.size()) {
    return node.core_host_cpus[static_cast<std::size_t>(core)];
  }
  return core % node.host_cpus;  // an agent from before core_host_cpus
}

v1::Job Leader::describe(const job::Job& job) const {
  v1::Job described = api::to_proto(job, [this](Rank r, int c) { return host_cpu_of(r, c); });
  described.set_queue(job.spec.queue);
  // Every node's part runs in workers (the agent gives each its cgroup or
  // container): the plugin's, or the part itself as one worker.
  const char* executor = job.spec.image.empty() ? "process" : "oci";
  for (int i = 0; i < described.allocation_size(); ++i) {
    v1::NodeAllocation& part = *described.mutable_allocation(i);
    if (part.workers_size() == 0) {
      v1::Worker& whole = *part.add_workers();
      whole.set_id(i);
      whole.set_group(i);
      for (int r : resource::task_ranks(job.allocation, static_cast<std::size_t>(i))) {
        whole.add_ranks(r);
      }
      *whole.mutable_cores() = part.cores();
    }
    auto node = ctx_.nodes.find(part.rank());
    for (v1::Worker& w : *part.mutable_workers()) {
      w.set_executor(executor);
      if (node == ctx_.nodes.end()) continue;
      std::set<int> numa;
      for (int c : w.cores()) {
        if (c >= 0 && c < node->second.topology.num_cores()) {
          numa.insert(node->second.topology.cores[static_cast<std::size_t>(c)].numa);
        }
      }
      for (int m : numa) w.add_numa(m);
    }
  }
  return described;
}

std::future<v1::ListNodesResponse> Leader::list_nodes() {
  return ask([this] { return monitor_.list_nodes(); });
}

std::future<v1::ListQueuesResponse> Leader::list_queues() {
  return ask([this] { return monitor_.list_queues(); });
}

std::future<Status> Leader::drain(const Caller& caller, const std::string& name, bool drained,
                                  const std::string& reason) {
  return ask([this, caller, name, drained, reason]() -> Status {
    if (!caller.is_admin()) {
      return permission_denied(std::string(drained ? "drain" : "resume") +
                               ": only root may change a node's state");
    }
    return monitor_.drain(name, drained, reason, user_name_of(caller.uid));
  });
}

std::future<Result<job::CheckpointRecord>> Leader::checkpoint(const Caller& caller, JobId id,
                                                              job::CheckpointThen then,
                                                              std::vector<std::string> to,
                                                              bool elsewhere) {
  auto promise = std::make_shared<std::promise<Result<job::CheckpointRecord>>>();
  auto future = promise->get_future();
  ctx_.loop.post([this, caller, id, then, to = std::move(to), elsewhere, promise]() mutable {
    auto found = find_for(caller, id);
    if (!found.is_ok()) return promise->set_value(found.status());
    checkpoints_.request(**found, then, std::move(to), elsewhere, promise);
  });
  return future;
}

std::future<Result<job::ResizeRecord>> Leader::resize(const Caller& caller, JobId id, int nodes) {
  auto promise = std::make_shared<std::promise<Result<job::ResizeRecord>>>();
  auto future = promise->get_future();
  ctx_.loop.post([this, caller, id, nodes, promise] {
    auto found = find_for(caller, id);
    if (!found.is_ok()) return promise->set_value(found.status());
    resizes_.request(**found, nodes, promise);
  });
  return future;
}

}  // namespace hpcq::daemon

#include "daemon/leader.h"

#include <pwd.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <limits>
#include <set>

#include <google/protobuf/util/json_util.h>

#include "daemon/state_dir.h"
#include "daemon/submit_policy.h"
#include "daemon/usage_record.h"
#include "lib/api/job_proto.h"
#include "lib/core/clock.h"
#include "lib/job/job_env.h"
#include "lib/overlay/messages.h"
#include "lib/overlay/tree.h"
#include "lib/resource/allocator.h"
#include "lib/resource/granularity.h"
#include "lib/resource/placement_names.h"
#include "lib/sched/resize.h"
#include "lib/store/codec.h"
#include "lib/store/store.h"

namespace hpcq::daemon {
namespace {

// A checkpoint a node has not answered by then is given up (the part is
// told to end, and the job requeued to run from the start).
constexpr TimeUs kCheckpointTimeoutUs = 300 * kUsPerSecond;
// A resize answer is awaited this long past the application's own timeout
// (the agent's timer), for the messages' way back.
constexpr TimeUs kResizeMarginUs = 5 * kUsPerSecond;

std::vector<std::string> node_names(const resource::Allocation& allocation) {
  std::vector<std::string> names;
  for (const auto& part : allocation.nodes) names.push_back(part.node);
  return names;
}

void fill_node_allocs(const resource::Allocation& allocation,
                      google::protobuf::RepeatedPtrField<overlay::NodeAlloc>* out) {
  for (const auto& a : allocation.nodes) {
    overlay::NodeAlloc* n = out->Add();
    n->set_rank(a.rank);
    n->set_node(a.node);
    for (int c : a.cores) n->add_cores(c);
    for (int m : a.numa) n->add_numa(m);
    n->set_memory_bytes(a.memory_bytes);
    n->set_ntasks(a.ntasks);
    n->set_first_task(a.first_task);
    for (int g : a.gpus) n->add_gpus(g);
    for (const resource::WorkerPlacement& w : a.workers) {
      overlay::Worker* worker = n->add_workers();
      worker->set_id(w.id);
      worker->set_group(w.group);
      for (int r : w.ranks) worker->add_ranks(r);
      for (int c : w.cores) worker->add_cores(c);
    }
  }
}

std::string user_name_of(uid_t uid) {
  passwd pw{};
  passwd* result = nullptr;
  char buf[4096];
  if (getpwuid_r(uid, &pw, buf, sizeof buf, &result) == 0 && result) return pw.pw_name;
  return std::to_string(uid);
}

// A stored record's `then` (written only by begin_checkpoint, so one of the
// three words).
job::CheckpointThen then_of(const v1::CheckpointRecord& record) {
  return job::parse_checkpoint_then(record.then()).value_or(job::CheckpointThen::kContinue);
}

// One node's slice of an allocation, for the pool (adoption and release go
// node by node after a leader restart).
resource::Allocation part_on(const resource::Allocation& allocation, Rank rank) {
  resource::Allocation part = allocation;  // its layout fields, `shared` above all
  part.nodes.clear();
  for (const auto& a : allocation.nodes) {
    if (a.rank == rank) part.nodes.push_back(a);
  }
  return part;
}

// Without its cores: what the pool still holds of a job that has handed
// them over (JobEntry::cores_handed_over).
resource::Allocation without_cores(resource::Allocation allocation) {
  for (resource::NodeAllocation& part : allocation.nodes) part.cores.clear();
  return allocation;
}

// What the scheduler needs to know of a job (pending or running).
sched::PendingJob pending_of(const job::Job& job) {
  sched::PendingJob p;
  p.id = job.id;
  p.uid = job.uid;
  p.submit_time = job.submit_time;
  p.request = job.spec.request;
  p.time_limit_s = job.spec.time_limit_s;
  p.queue = job.spec.queue;
  p.account = job.spec.account;
  p.qos = job.spec.qos;
  p.priority = job.spec.priority;
  // validate() let only known words through.
  if (!job.spec.profile.empty()) p.profile = resource::parse_profile(job.spec.profile);
  p.workers = job.spec.workers;
  p.max_nodes = job.spec.max_nodes;
  p.elastic = job.spec.elastic;
  return p;
}

// A job's records of one kind ("checkpoint", "placement", "resize"), kept
// under "<job>/<n>" as protobuf JSON: appended to `list` of each known job,
// in key order (callers sort by time).
}  // namespace

template <typename Record, typename Jobs, typename Entry>
Status Leader::load_job_records(store::Store& store, const char* kind, Jobs& jobs,
                                std::vector<Record> Entry::*list) {
  auto stored = store.load_records(kind);
  if (!stored.is_ok()) return stored.status();
  for (const auto& [key, value] : *stored) {
    Record record;
    auto it = jobs.find(std::strtoull(key.c_str(), nullptr, 10));
    if (it == jobs.end() || !google::protobuf::util::JsonStringToMessage(value, &record).ok()) {
      spdlog::warn("store: {} record {} ignored", kind, key);
      continue;
    }
    (it->second.*list).push_back(std::move(record));
  }
  return Status::ok();
}

namespace {

template <typename T>
std::future<T> ready(T value) {
  std::promise<T> p;
  p.set_value(std::move(value));
  return p.get_future();
}

}  // namespace

Leader::Leader(const ClusterConfig& config) : config_(config), usage_(config.usage_half_life_s) {}

Leader::~Leader() {
  events_.close();
  overlay_.reset();
  committer_.reset();  // drains and commits what is queued
}

TimeUs Leader::now() const { return wall_clock_now(); }

Result<std::unique_ptr<Leader>> Leader::create(const ClusterConfig& config) {
  std::unique_ptr<Leader> leader(new Leader(config));
  HPCQ_RETURN_IF_ERROR(leader->start());
  return leader;
}

Status Leader::start() {
  HPCQ_RETURN_IF_ERROR(prepare_state_dir(config_.state_dir));

  auto scheduler =
      sched::Scheduler::create({config_.actions, config_.plugins, config_.scheduler_options});
  if (!scheduler.is_ok()) return scheduler.status();
  scheduler_ = std::make_unique<sched::Scheduler>(std::move(scheduler).value());
  frees_resources_ = std::any_of(config_.actions.begin(), config_.actions.end(), [](const auto& a) {
    return a == "preempt" || a == "reclaim" || a == "elastic";
  });
  elastic_action_ =
      std::find(config_.actions.begin(), config_.actions.end(), "elastic") != config_.actions.end();
  if (std::find(config_.plugins.begin(), config_.plugins.end(), "priority") !=
      config_.plugins.end()) {
    sched::PluginOptions options;
    for (const auto& [key, value] : config_.scheduler_options) {
      if (key.starts_with("priority.")) options[key.substr(9)] = value;
    }
    auto weights = sched::parse_multifactor_options(options);  // create() accepted them
    if (!weights.is_ok()) return weights.status();
    priority_weights_ = *weights;
  }

  auto store = store::Store::open(config_.state_dir + "/hpcq.db");
  if (!store.is_ok()) return store.status();
  auto jobs = (*store)->load_jobs();
  if (!jobs.is_ok()) return jobs.status();
  auto max_id = (*store)->max_job_id();
  if (!max_id.is_ok()) return max_id.status();
  next_job_id_ = *max_id + 1;

  // Jobs that were running when the leader stopped keep running on their
  // agents. They stay RUNNING here and are adopted node by node as each agent
  // says Hello and reports what it runs and what ended meanwhile; a node that
  // does not come back is declared down after node_down_after_ms.
  std::set<Rank> awaited;
  if (!config_.decision_log.empty()) {
    auto log = DecisionLog::open(config_.decision_log);
    if (!log.is_ok()) return log.status();
    decision_log_ = std::move(log).value();
    decision_log_->config(now(), config_.actions, config_.plugins, config_.scheduler_options,
                          config_.queue_depth);
  }
  for (job::Job& job : *jobs) {
    JobEntry& entry = table_.insert(std::move(job));
    table_.load(entry);
    awaited.insert(entry.running_on.begin(), entry.running_on.end());
  }
  // Once every job is known, so that dependencies can be judged; carried out
  // once the store's writer runs.
  const job::Effects ready = table_.ready_loaded(now());
  auto stored_usage = (*store)->load_records("usage");
  if (!stored_usage.is_ok()) return stored_usage.status();
  for (const auto& [key, value] : *stored_usage) {
    auto entries = decode_usage(value);
    if (!entries.is_ok()) return invalid_argument("store: usage: " + entries.status().message());
    usage_.restore(*entries);
  }
  HPCQ_RETURN_IF_ERROR(load_job_records<v1::CheckpointRecord>(**store, "checkpoint", table_.jobs(),
                                                              &JobEntry::checkpoints));
  HPCQ_RETURN_IF_ERROR(
      load_job_records<v1::Placement>(**store, "placement", table_.jobs(), &JobEntry::placements));
  for (auto& [id, entry] : table_.jobs()) {
    std::sort(entry.checkpoints.begin(), entry.checkpoints.end(),
              [](const auto& a, const auto& b) { return a.time_us() < b.time_us(); });
    std::sort(entry.placements.begin(), entry.placements.end(),
              [](const auto& a, const auto& b) { return a.start_us() < b.start_us(); });
    resume_checkpoint_in_flight(entry, now());
    // A pending job whose last checkpoint took it off its nodes and has not
    // been restored yet, or that waits to restart from a checkpoint after a
    // node loss, is restored where it next starts.
    if (entry.job.state == job::JobState::kPending && !entry.checkpoints.empty()) {
      const v1::CheckpointRecord& last = entry.checkpoints.back();
      if (then_of(last) != job::CheckpointThen::kContinue && last.outcome() == "ok" &&
          !last.restored()) {
        entry.restore_from = last.image();
        entry.restore_to = ranks_of(last.to());
      }
      for (const v1::CheckpointRecord& r : entry.checkpoints) {
        if (r.restore_pending()) entry.restore_from = r.image();
      }
    }
    if (entry.job.state == job::JobState::kRunning && !entry.placements.empty() &&
        entry.placements.back().end_us() == 0) {
      entry.restored_image = entry.placements.back().restored_from();
      entry.restoring = !entry.restored_image.empty();
    }
  }
  // Resize records are kept as checkpoint records are: "<job>/<n>".
  HPCQ_RETURN_IF_ERROR(
      load_job_records<v1::ResizeRecord>(**store, "resize", table_.jobs(), &JobEntry::resizes));
  for (auto& [id, entry] : table_.jobs()) {
    std::sort(entry.resizes.begin(), entry.resizes.end(),
              [](const auto& a, const auto& b) { return a.time_us() < b.time_us(); });
    if (!entry.resizes.empty()) {
      entry.last_resize = entry.resizes.back().answered_us();
      // The segments before it were charged then (the ledger is saved
      // every 10 s, so at most those seconds are lost or counted twice).
      entry.usage_from = entry.last_resize;
    }
  }
  auto stored_reservations = (*store)->load_records("reservation");
  if (!stored_reservations.is_ok()) return stored_reservations.status();
  for (const auto& [name, value] : *stored_reservations) {
    auto r = decode_reservation(value);
    if (!r.is_ok())
      return invalid_argument("store: reservation " + name + ": " + r.status().message());
    reservations_.emplace(name, std::move(r).value());
  }
  spdlog::info("store: {} jobs loaded ({} pending, {} running), next job id {}",
               table_.jobs().size(), table_.pending().size(), table_.running().size(),
               next_job_id_);
  auto stored_nodes = (*store)->load_nodes();
  if (!stored_nodes.is_ok()) return stored_nodes.status();
  std::set<Rank> drained;
  std::map<Rank, std::uint64_t> incarnations;
  for (const auto& n : *stored_nodes) {
    if (n.state == "drain") drained.insert(n.rank);
    const std::string key = "\"incarnation\":";
    if (const auto at = n.topology_json.find(key); at != std::string::npos) {
      incarnations[n.rank] = std::strtoull(n.topology_json.c_str() + at + key.size(), nullptr, 10);
    }
  }
  committer_ = std::make_unique<store::GroupCommitter>(std::move(store).value());
  apply(ready);

  if (config_.ranks.empty()) return invalid_argument("config: no ranks");
  auto keys = overlay::read_key_file(config_.secret_key, /*require_secret=*/true);
  if (!keys.is_ok()) return keys.status();
  if (keys->public_key != config_.ranks[0].public_key) {
    return invalid_argument(config_.secret_key + ": its public key is not rank 0's in " +
                            config_.source);
  }
  auto oc = overlay::OverlayConfig::from_cluster(config_, 0, *keys);
  auto overlay = overlay::Overlay::create(
      oc, loop_, [this](overlay::Envelope&& e) { on_message(std::move(e)); });
  if (!overlay.is_ok()) return overlay.status();
  overlay_ = std::move(overlay).value();

  for (Rank r = 1; r < config_.ranks.size(); ++r) {
    NodeEntry node;
    node.rank = r;
    node.name = config_.ranks[r].name;
    node.awaited = awaited.count(r) > 0;
    node.drained = drained.count(r) > 0;
    if (auto known = incarnations.find(r); known != incarnations.end()) {
      node.incarnation = known->second;
    }
    if (node.drained) node.reason = "drained before the leader restarted";
    node.last_seen = now();
    nodes_.emplace(r, std::move(node));
  }
  node_shapes_.assign(nodes_.size(), std::nullopt);  // not heard from yet: could be anything
  started_at_ = now();
  loop_.run_every(std::chrono::milliseconds(config_.heartbeat_interval_ms), [this] {
    check_heartbeats();
    repeat_unconfirmed();
    checkpoint_due_jobs();
    // Resizes wait out their rescale gap with no event to wake a cycle:
    // look again every heartbeat while the "elastic" action may have work.
    if (elastic_action_ && !table_.running().empty()) schedule_soon();
  });
  // Usage is advisory (it orders the queue): written every 10 s rather than
  // with every job end, so a crash forgets at most the last 10 s of it.
  loop_.run_every(std::chrono::seconds(10), [this] { persist_usage(); });
  schedule_soon();
  return Status::ok();
}

void Leader::run() { loop_.run(); }
void Leader::stop() { loop_.stop(); }

// ---- API entry points (any thread) ----

std::future<Result<SubmitResult>> Leader::submit(const Caller& caller, job::JobSpec spec) {
  Status valid = job::validate(spec);
  if (valid.is_ok()) valid = apply_submit_policy(config_, caller.uid, caller.is_admin(), spec);
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
  loop_.post([this, promise, job = std::move(job), indices = std::move(indices),
              max_running]() mutable {
    if (Status fits = check_fits(node_shapes_, job.spec); !fits.is_ok()) {
      return promise->set_value(fits);
    }
    for (const job::Dependency& d : job.spec.dependencies) {
      if (!table_.jobs().count(d.job)) {
        return promise->set_value(
            invalid_argument("--dependency: no job " + std::to_string(d.job)));
      }
    }
    // An array is one submission: its tasks are stored in one transaction
    // and answered together.
    std::vector<job::Job> made;
    const TimeUs submitted = now();
    const std::size_t count = indices.empty() ? 1 : indices.size();
    const JobId first = next_job_id_;
    next_job_id_ += count;
    store::WriteBatch batch;
    for (std::size_t i = 0; i < count; ++i) {
      job::Job task = job;
      task.id = first + i;
      task.submit_time = submitted;
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
    committer_->submit(
        std::move(batch), [this, promise, made = std::move(made), first, count](Status s) mutable {
          if (!s.is_ok()) {
            spdlog::error("job {}: not stored: {}", first, s.message());
            // The store's code: kResourceExhausted for a full disk, kUnavailable
            // for a busy database.
            promise->set_value(Status(s.code(), "the job could not be stored: " + s.message()));
            return;
          }
          loop_.post([this, promise, made = std::move(made), first, count]() mutable {
            for (job::Job& task : made) admit(std::move(task));
            promise->set_value(SubmitResult{first, static_cast<std::uint32_t>(count)});
          });
        });
  });
  return future;
}

bool Leader::may_see(const Caller& caller, const job::Job& job) {
  return caller.is_admin() || caller.uid == job.uid;
}

Result<Leader::JobEntry*> Leader::find_for(const Caller& caller, JobId id) {
  auto it = table_.jobs().find(id);
  if (it == table_.jobs().end()) return not_found("no job " + std::to_string(id));
  // The same neutral answer on every path: whose job it is is not ours to say.
  if (!may_see(caller, it->second.job)) {
    return permission_denied("job " + std::to_string(id) + " belongs to another user");
  }
  return &it->second;
}

std::future<Status> Leader::cancel(const Caller& caller, JobId id) {
  return ask([this, caller, id]() -> Status {
    auto found = find_for(caller, id);
    if (!found.is_ok()) return found.status();
    auto cancelled = table_.cancel(**found, user_name_of(caller.uid), now());
    if (!cancelled.is_ok()) return cancelled.status();
    apply(*cancelled);
    return Status::ok();
  });
}

std::future<Result<v1::Job>> Leader::get_job(const Caller& caller, JobId id) {
  return ask([this, caller, id]() -> Result<v1::Job> {
    auto found = find_for(caller, id);
    if (!found.is_ok()) return found.status();
    const JobEntry& entry = **found;
    v1::Job described = describe(entry.job);
    for (const v1::CheckpointRecord& r : entry.checkpoints) *described.add_checkpoints() = r;
    for (const v1::ResizeRecord& r : entry.resizes) *described.add_resizes() = r;
    described.set_restore_from(entry.restore_from);
    for (const v1::Placement& p : entry.placements) *described.add_placements() = p;
    return described;
  });
}

std::future<v1::ListJobsResponse> Leader::list_jobs(const Caller& caller,
                                                    v1::ListJobsRequest request) {
  return ask([this, caller, request]() -> v1::ListJobsResponse {
    v1::ListJobsResponse response;
    const std::set<int> states(request.states().begin(), request.states().end());
    for (const auto& [id, entry] : table_.jobs()) {
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
      for (const v1::Placement& p : entry.placements) *listed->add_placements() = p;
    }
    return response;
  });
}

std::future<v1::ListNodesResponse> Leader::list_nodes() {
  return ask([this]() -> v1::ListNodesResponse {
    v1::ListNodesResponse response;
    std::map<Rank, int> running;
    for (JobId id : table_.running()) {
      for (const auto& a : table_.jobs().at(id).job.allocation.nodes) running[a.rank]++;
    }
    for (const auto& [rank, node] : nodes_) {
      v1::Node* n = response.add_nodes();
      n->set_name(node.name);
      n->set_rank(rank);
      std::string state = node.state == NodeState::kUp     ? "up"
                          : node.state == NodeState::kDown ? "down"
                                                           : "unknown";
      if (node.state == NodeState::kUp && node.unresponsive) {
        state = "unresponsive";
      } else if (node.drained && node.state == NodeState::kUp) {
        state = running[rank] > 0 ? "draining" : "drained";
      }
      n->set_state(state);
      n->set_reason(node.reason);
      n->set_checkpoint_capable(node.checkpoint_capable);
      n->set_checkpoint_reason(node.checkpoint_reason);
      n->set_checkpoint_other_users(node.checkpoint_other_users);
      n->set_checkpoint_other_users_reason(node.checkpoint_other_users_reason);
      n->set_cores(node.topology.num_cores());
      n->set_numa(static_cast<int>(node.topology.numa.size()));
      n->set_packages(node.topology.packages);
      n->set_memory_bytes(node.topology.memory_bytes);
      n->set_topology(node.topology.source);
      n->set_host_cpus(node.host_cpus);
      n->set_free_cores(node.in_pool ? pool_.free_cores(rank) : 0);
      n->set_gpus(node.topology.num_gpus());
      const resource::NodeState* pooled = node.in_pool ? pool_.find(rank) : nullptr;
      n->set_free_gpus(pooled ? pooled->free_gpus() : 0);
      n->set_running_jobs(running[rank]);
    }
    return response;
  });
}

std::future<Status> Leader::hold(const Caller& caller, JobId id, bool held) {
  return ask([this, caller, id, held]() -> Status {
    auto found = find_for(caller, id);
    if (!found.is_ok()) return found.status();
    auto changed = table_.hold(**found, held, "held by " + user_name_of(caller.uid), now());
    if (!changed.is_ok()) return changed.status();
    apply(*changed);
    return Status::ok();
  });
}

// Checkpoint records are kept under "<job>/<n>", n counting from 1 in the
// order they were taken.
void Leader::persist_checkpoint(const JobEntry& entry, std::size_t index) {
  persist_job_record(entry.job.id, "checkpoint", index + 1, entry.checkpoints[index]);
}

void Leader::persist_checkpoint_in_flight(const JobEntry& entry) {
  persist_job_record(entry.job.id, "checkpoint", entry.checkpoints.size() + 1,
                     entry.checkpointing->record);
}

// A record without an outcome was in flight when the leader stopped. If it
// was to take a running job off its nodes (stop, requeue), the job waits
// again for every node's answer: the agents repeat theirs in their Hello,
// and the deadline kills and requeues it as for a node that never answers;
// a job that left its nodes for another job is adopted without its cores.
// One that was to leave the job running is not waited for: the job runs on
// either way, and the record says its outcome is unknown (as it says on
// every load: the stored record keeps no outcome).
void Leader::resume_checkpoint_in_flight(JobEntry& entry, TimeUs now) {
  const job::Job& job = entry.job;
  const bool resumes = job.state == job::JobState::kRunning && !entry.checkpoints.empty() &&
                       entry.checkpoints.back().outcome().empty() &&
                       then_of(entry.checkpoints.back()) != job::CheckpointThen::kContinue;
  for (std::size_t i = 0; i + (resumes ? 1 : 0) < entry.checkpoints.size(); ++i) {
    v1::CheckpointRecord& record = entry.checkpoints[i];
    if (record.outcome().empty()) record.set_outcome("unknown: the leader restarted during it");
  }
  if (!resumes) return;
  v1::CheckpointRecord record = std::move(entry.checkpoints.back());
  entry.checkpoints.pop_back();
  JobEntry::Checkpointing op;
  op.record = std::move(record);
  op.deadline = now + kCheckpointTimeoutUs;
  for (const auto& part : job.allocation.nodes) op.waiting.insert(part.rank);
  if (op.record.preempted()) {
    entry.preempted = job::Preemption{op.record.preempted_for(), PreemptMode::kCheckpoint};
    entry.cores_handed_over = true;
  }
  spdlog::info("job {}: waiting again for its checkpoint ({}) into {}", job.id, op.record.then(),
               op.record.image());
  entry.checkpointing = std::move(op);
}

// A job's record "<job>/<number>" of `kind` (load_job_records reads them).
void Leader::persist_job_record(JobId id, const char* kind, std::size_t number,
                                const google::protobuf::Message& record) {
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(record, &json);
  store::WriteBatch batch;
  batch.put_record(kind, std::to_string(id) + "/" + std::to_string(number), json);
  committer_->submit(std::move(batch), [id, kind](Status s) {
    if (!s.is_ok()) spdlog::error("job {}: {} record: {}", id, kind, s.message());
  });
}

// ---- elastic resizes (hpcq issue 7; protocol: overlay.proto, message Resize) ----

std::future<Result<v1::ResizeRecord>> Leader::resize(const Caller& caller, JobId id, int nodes) {
  auto promise = std::make_shared<std::promise<Result<v1::ResizeRecord>>>();
  auto future = promise->get_future();
  loop_.post([this, caller, id, nodes, promise] {
    auto found = find_for(caller, id);
    if (!found.is_ok()) return promise->set_value(found.status());
    JobEntry& entry = **found;
    const job::Job& job = entry.job;
    const std::string name = "job " + std::to_string(id);
    if (!job.spec.elastic || job.spec.max_nodes == 0) {
      return promise->set_value(
          failed_precondition(name + " is not elastic (submit it with -N MIN-MAX --elastic)"));
    }
    const int lo = job.spec.request.nodes;
    const int hi = job.spec.max_nodes;
    if (nodes < lo || nodes > hi) {
      return promise->set_value(invalid_argument("--nodes: " + std::to_string(nodes) +
                                                 " is outside " + name + "'s range " +
                                                 std::to_string(lo) + "-" + std::to_string(hi)));
    }
    if (job.state != job::JobState::kRunning) {
      return promise->set_value(failed_precondition(name + " is " + job::state_name(job.state) +
                                                    ": only running jobs can be resized"));
    }
    const int current = static_cast<int>(job.allocation.nodes.size());
    if (nodes == current) {
      return promise->set_value(
          failed_precondition(name + " runs on " + std::to_string(current) + " nodes already"));
    }
    if (std::string why = resize_blocked(entry); !why.empty()) {
      return promise->set_value(failed_precondition(name + " cannot be resized now: " + why));
    }
    Status asked = Status::ok();
    if (nodes < current) {
      // The last nodes first, so that the first node (the application's
      // contact) stays, as the "elastic" action does.
      std::vector<Rank> ranks;
      for (int i = current - 1; i >= nodes; --i) {
        ranks.push_back(job.allocation.nodes[static_cast<std::size_t>(i)].rank);
      }
      asked = begin_shrink(entry, ranks, "user", promise);
    } else {
      std::vector<const resource::NodeState*> candidates;
      for (const resource::NodeState& node : pool_.nodes()) {
        if (!node.schedulable()) continue;
        const bool has =
            std::any_of(job.allocation.nodes.begin(), job.allocation.nodes.end(),
                        [&node](const auto& part) { return part.rank == node.rank(); });
        if (!has) candidates.push_back(&node);
      }
      std::optional<resource::Allocation> more = resource::find_allocation(
          sched::request_at(job.spec.request, nodes - current), candidates);
      if (!more) {
        return promise->set_value(failed_precondition(
            name + ": no room for " + std::to_string(nodes - current) + " more node(s) now"));
      }
      asked = begin_expand(entry, std::move(*more), "user", promise);
    }
    if (!asked.is_ok()) promise->set_value(asked);
  });
  return future;
}

std::string Leader::resize_blocked(const JobEntry& entry) const {
  if (entry.job.state != job::JobState::kRunning) return "the job is not running";
  if (!entry.job.spec.elastic || entry.job.spec.max_nodes == 0) return "the job is not elastic";
  if (entry.resizing) return "a resize is in flight";
  if (!entry.removing.empty()) return "parts of an earlier resize are still ending";
  if (entry.checkpointing) return "the job is being checkpointed";
  if (entry.kill_sent || entry.cancel_requested || entry.preempted ||
      !entry.requeue_when_ended.empty()) {
    return "the job is ending";
  }
  // Every node has confirmed its part (by STARTED, or by reporting it to a
  // restarted leader, which does not launch an adopted job again).
  if (entry.started_on != entry.running_on) {
    return "the job has not started on all of its nodes yet";
  }
  if (entry.job.allocation.nodes.empty()) return "the job has no nodes";
  return "";
}

Status Leader::begin_shrink(JobEntry& entry, const std::vector<Rank>& ranks, const std::string& by,
                            std::shared_ptr<std::promise<Result<v1::ResizeRecord>>> promise) {
  job::Job& job = entry.job;
  const std::string name = "job " + std::to_string(job.id);
  if (std::string why = resize_blocked(entry); !why.empty()) {
    return failed_precondition(name + " cannot be resized now: " + why);
  }
  if (std::find(ranks.begin(), ranks.end(), job.allocation.nodes.front().rank) != ranks.end()) {
    // The application's contact (the agent that relays its answer) stays.
    return invalid_argument(name + ": a shrink cannot take the job's first node");
  }
  auto after = sched::shrunk(job.allocation, ranks);
  if (!after.is_ok()) return Status(after.status().code(), name + ": " + after.status().message());
  if (static_cast<int>(after->nodes.size()) < job.spec.request.nodes) {
    return invalid_argument(name + ": a shrink below the range's minimum");
  }
  JobEntry::Resizing r;
  r.seq = ++entry.resize_seq;
  r.before = job.allocation;
  r.after = std::move(after).value();
  r.record.set_time_us(now());
  r.record.set_from(static_cast<int>(r.before.nodes.size()));
  r.record.set_to(static_cast<int>(r.after.nodes.size()));
  r.record.set_kind("shrink");
  r.record.set_by(by);
  r.promise = std::move(promise);
  entry.resizing = std::move(r);
  spdlog::info("job {}: shrink {} -> {} nodes asked ({})", job.id, entry.resizing->record.from(),
               entry.resizing->record.to(), by);
  send_resize_notice(entry);
  return Status::ok();
}

Status Leader::begin_expand(JobEntry& entry, resource::Allocation added, const std::string& by,
                            std::shared_ptr<std::promise<Result<v1::ResizeRecord>>> promise) {
  job::Job& job = entry.job;
  const std::string name = "job " + std::to_string(job.id);
  if (std::string why = resize_blocked(entry); !why.empty()) {
    return failed_precondition(name + " cannot be resized now: " + why);
  }
  auto after = sched::expanded(job.allocation, added);
  if (!after.is_ok()) return Status(after.status().code(), name + ": " + after.status().message());
  if (static_cast<int>(after->nodes.size()) > job.spec.max_nodes) {
    return invalid_argument(name + ": an expansion above the range's maximum");
  }
  for (const auto& part : added.nodes) {
    auto node = nodes_.find(part.rank);
    if (node == nodes_.end() || !schedulable(node->second)) {
      return failed_precondition(name + ": node rank " + std::to_string(part.rank) +
                                 " is not schedulable");
    }
  }
  Status taken = pool_.allocate(added);
  if (!taken.is_ok()) return Status(taken.code(), name + ": " + taken.message());
  JobEntry::Resizing r;
  r.seq = ++entry.resize_seq;
  r.before = job.allocation;
  r.after = std::move(after).value();
  r.record.set_time_us(now());
  r.record.set_from(static_cast<int>(r.before.nodes.size()));
  r.record.set_to(static_cast<int>(r.after.nodes.size()));
  r.record.set_kind("expand");
  r.record.set_by(by);
  r.promise = std::move(promise);
  // Covers the new parts' start as well; the notice sets its own.
  r.deadline = now() + static_cast<TimeUs>(config_.resize_timeout_ms) * 1000 + kResizeMarginUs;
  for (const auto& part : added.nodes) {
    r.added.insert(part.rank);
    entry.held_on.insert(part.rank);
    entry.running_on.insert(part.rank);
    entry.part_of[part.rank] = r.seq;
  }
  charge_segment(entry);
  job.allocation = r.after;
  entry.resizing = std::move(r);
  overlay::Launch launch = make_launch(job);
  launch.set_part(entry.resizing->seq);
  entry.launch = std::make_shared<const overlay::Launch>(std::move(launch));
  spdlog::info("job {}: expand {} -> {} nodes ({}): launching on the new nodes", job.id,
               entry.resizing->record.from(), entry.resizing->record.to(), by);
  // As at a start: the new parts are launched once the allocation is
  // committed, so that a restarted leader knows the nodes are the job's.
  const JobId id = job.id;
  const std::uint32_t seq = entry.resizing->seq;
  store::WriteBatch batch;
  batch.update_job(job);
  batch.append_event(job.id, now(), "expand", "{}");
  committer_->submit(std::move(batch), [this, id, seq](Status s) {
    if (!s.is_ok()) spdlog::error("job {}: store update failed: {}", id, s.message());
    loop_.post([this, id, seq] {
      auto it = table_.jobs().find(id);
      if (it == table_.jobs().end()) return;
      JobEntry& e = it->second;
      if (!e.resizing || e.resizing->seq != seq || !e.launch) return;
      e.sent_at = now();
      for (Rank rank : e.resizing->added) {
        overlay::Envelope envelope;
        envelope.set_dst(rank);
        *envelope.mutable_launch() = *e.launch;
        Status sent = overlay_->send(std::move(envelope));
        if (!sent.is_ok()) spdlog::warn("job {}: launch on rank {}: {}", id, rank, sent.message());
      }
    });
  });
  return Status::ok();
}

void Leader::send_resize_notice(JobEntry& entry) {
  JobEntry::Resizing& r = *entry.resizing;
  r.notified = true;
  r.deadline = now() + static_cast<TimeUs>(config_.resize_timeout_ms) * 1000 + kResizeMarginUs;
  overlay::Envelope envelope;
  envelope.set_dst(r.before.nodes.front().rank);
  overlay::Resize* m = envelope.mutable_resize();
  m->set_job_id(entry.job.id);
  m->set_attempt(static_cast<std::uint32_t>(entry.job.requeue_count));
  m->set_seq(r.seq);
  m->set_kind(r.record.kind() == "shrink" ? overlay::Resize::SHRINK : overlay::Resize::EXPAND);
  fill_node_allocs(r.after, m->mutable_allocation());
  m->set_timeout_ms(config_.resize_timeout_ms);
  m->set_forced(r.forced);
  Status sent = overlay_->send(std::move(envelope));
  // Not repeated: a lost notice times out, which is a safe outcome both ways.
  if (!sent.is_ok()) {
    spdlog::warn("job {}: resize notice not sent: {}", entry.job.id, sent.message());
  }
}

void Leader::on_resize_done(Rank rank, const overlay::ResizeDone& done) {
  auto it = table_.jobs().find(done.job_id());
  if (it == table_.jobs().end()) return;
  JobEntry& entry = it->second;
  if (!entry.resizing || !entry.resizing->notified || entry.resizing->seq != done.seq() ||
      done.attempt() != static_cast<std::uint32_t>(entry.job.requeue_count) ||
      entry.resizing->before.nodes.front().rank != rank) {
    spdlog::info("job {}: stale resize answer (seq {}) ignored", done.job_id(), done.seq());
    return;
  }
  JobEntry::Resizing& r = *entry.resizing;
  const bool shrink = r.record.kind() == "shrink";
  std::string outcome;
  switch (done.outcome()) {
    case overlay::ResizeDone::ACKNOWLEDGED: outcome = "acknowledged"; break;
    case overlay::ResizeDone::DECLINED: outcome = "declined"; break;
    case overlay::ResizeDone::TIMED_OUT: outcome = "timed_out"; break;
    default: outcome = "failed"; break;
  }
  if (r.forced) {
    // The node is gone already: whatever the answer, nothing more to do.
  } else if (shrink && outcome == "acknowledged") {
    // The application has let the nodes go: take them back.
    std::vector<Rank> removed;
    for (const auto& part : r.before.nodes) {
      const bool stays = std::any_of(r.after.nodes.begin(), r.after.nodes.end(),
                                     [&part](const auto& p) { return p.rank == part.rank; });
      if (!stays) removed.push_back(part.rank);
    }
    take_parts_away(entry, removed);
    charge_segment(entry);
    entry.job.allocation = r.after;
    persist(entry.job, "shrink", "{}");
  } else if (!shrink && (outcome == "declined" || outcome == "failed")) {
    // The application refused the new nodes (or could not be told): give
    // them back. A timeout keeps them: the nodes are the job's either way.
    std::vector<Rank> added(r.added.begin(), r.added.end());
    take_parts_away(entry, added);
    charge_segment(entry);
    entry.job.allocation = r.before;
    persist(entry.job, "expand_undone", "{}");
  }
  finish_resize(entry, outcome, done.reason(), done.answer_seconds());
}

void Leader::finish_resize(JobEntry& entry, const std::string& outcome, const std::string& reason,
                           double answer_seconds) {
  JobEntry::Resizing r = std::move(*entry.resizing);
  entry.resizing.reset();
  const TimeUs t = now();
  r.record.set_outcome(outcome);
  r.record.set_reason(reason);
  r.record.set_answered_us(t);
  r.record.set_answer_seconds(answer_seconds);
  for (const std::string& n : node_names(entry.job.allocation)) r.record.add_nodes(n);
  entry.last_resize = t;
  entry.resizes.push_back(r.record);
  persist_job_record(entry.job.id, "resize", entry.resizes.size(), r.record);
  spdlog::info("job {}: {} {} -> {} {}{} (answer in {:.3f} s)", entry.job.id, r.record.kind(),
               r.record.from(), r.record.to(), outcome, reason.empty() ? "" : ": " + reason,
               answer_seconds);
  if (r.promise) r.promise->set_value(std::move(r.record));
  schedule_soon();
}

void Leader::take_parts_away(JobEntry& entry, const std::vector<Rank>& ranks) {
  for (Rank rank : ranks) {
    resource::Allocation part = part_on(entry.job.allocation, rank);
    if (part.nodes.empty()) continue;
    entry.held_on.erase(rank);
    if (!entry.running_on.count(rank)) {
      // Ended already (or never launched): nothing to wait for.
      Status released = pool_.release(part);
      if (!released.is_ok()) spdlog::error("job {}: release: {}", entry.job.id, released.message());
      entry.part_of.erase(rank);
      continue;
    }
    entry.removing[rank] = std::move(part);
    send_part_kill(entry, rank);
  }
}

void Leader::send_part_kill(JobEntry& entry, Rank rank) {
  overlay::Envelope kill;
  kill.set_dst(rank);
  overlay::Kill* k = kill.mutable_kill();
  k->set_job_id(entry.job.id);
  k->set_attempt(static_cast<uint32_t>(entry.job.requeue_count));
  k->set_only_part(true);
  auto part = entry.part_of.find(rank);
  k->set_part(part == entry.part_of.end() ? 0 : part->second);
  Status sent = overlay_->send(std::move(kill));
  if (!sent.is_ok()) {
    spdlog::warn("job {}: kill on rank {}: {}", entry.job.id, rank, sent.message());
  }
}

// Asks every elastic job that runs on `rank` (and could do without it) to
// shrink off it; a job that declines keeps running there, as a rigid job
// does on a drained node.
void Leader::shrink_off(Rank rank, const std::string& by) {
  for (JobId id : table_.running()) {
    JobEntry& entry = table_.jobs().at(id);
    const job::Job& job = entry.job;
    if (!job.spec.elastic || job.spec.max_nodes == 0 || !entry.held_on.count(rank)) continue;
    Status asked = begin_shrink(entry, {rank}, by, nullptr);
    if (!asked.is_ok()) {
      spdlog::info("job {}: not shrunk off rank {}: {}", id, rank, asked.message());
    }
  }
}

// An elastic job above its minimum whose part on a dead node is gone goes on
// without it: its allocation shrinks at once (the node is gone whatever the
// application says) and the application is told as of any shrink (outcome
// recorded, kind "shrink", by "node_down"). False when this does not apply
// (not elastic, at its minimum, the dead node is its first, something in
// flight): the caller then fails or requeues the job as a rigid one.
bool Leader::lose_elastic_part(JobEntry& entry, Rank rank, const std::string& node_name) {
  job::Job& job = entry.job;
  if (!job.spec.elastic || job.spec.max_nodes == 0) return false;
  if (job.allocation.nodes.empty() || job.allocation.nodes.front().rank == rank) return false;
  if (static_cast<int>(job.allocation.nodes.size()) - 1 < job.spec.request.nodes) return false;
  if (entry.resizing || !entry.removing.empty() || entry.checkpointing || entry.kill_sent ||
      entry.cancel_requested || entry.preempted || !entry.requeue_when_ended.empty()) {
    return false;
  }
  const std::vector<Rank> gone = {rank};
  auto after = sched::shrunk(job.allocation, gone);
  if (!after.is_ok()) return false;
  Status released = pool_.release(part_on(job.allocation, rank));
  if (!released.is_ok()) spdlog::error("job {}: release: {}", job.id, released.message());
  entry.held_on.erase(rank);
  entry.running_on.erase(rank);
  entry.started_on.erase(rank);
  entry.part_of.erase(rank);
  JobEntry::Resizing r;
  r.seq = ++entry.resize_seq;
  r.before = job.allocation;
  r.after = std::move(after).value();
  r.forced = true;
  r.record.set_time_us(now());
  r.record.set_from(static_cast<int>(r.before.nodes.size()));
  r.record.set_to(static_cast<int>(r.after.nodes.size()));
  r.record.set_kind("shrink");
  r.record.set_by("node_down");
  charge_segment(entry);
  job.allocation = r.after;
  persist(job, "shrink", "{}");
  entry.resizing = std::move(r);
  spdlog::warn("job {}: node {} is down: the elastic job goes on without it ({} -> {} nodes)",
               job.id, node_name, entry.resizing->record.from(), entry.resizing->record.to());
  send_resize_notice(entry);
  return true;
}

// Fair-share: the job's current allocation is charged up to now, before a
// resize changes it, so that each size is charged for the time it was held.
void Leader::charge_segment(JobEntry& entry) {
  const TimeUs t = now();
  charge_usage(entry.job, entry.usage_from, t);
  entry.usage_from = t;
}

void Leader::check_resize_deadlines() {
  const TimeUs t = now();
  std::vector<JobId> overdue;
  for (JobId id : table_.running()) {
    const JobEntry& entry = table_.jobs().at(id);
    if (entry.resizing && t > entry.resizing->deadline) overdue.push_back(id);
  }
  for (JobId id : overdue) {
    JobEntry& entry = table_.jobs().at(id);
    JobEntry::Resizing& r = *entry.resizing;
    if (!r.notified) {
      // The added nodes never all started their parts: undo the expansion.
      std::vector<Rank> added(r.added.begin(), r.added.end());
      take_parts_away(entry, added);
      charge_segment(entry);
      entry.job.allocation = r.before;
      persist(entry.job, "expand_undone", "{}");
      finish_resize(entry, "failed", "the new nodes did not start the job in time", 0);
      continue;
    }
    // No answer came back: a shrink is treated as declined (nothing
    // changes), an expansion keeps its nodes.
    finish_resize(entry, "timed_out", "no answer from the job's first node", 0);
  }
}

std::string Leader::checkpoint_root() const {
  return config_.checkpoint_dir.empty() ? config_.state_dir + "/checkpoints"
                                        : config_.checkpoint_dir;
}

Result<std::vector<std::string>> Leader::other_nodes_for(const JobEntry& entry) const {
  const job::Job& job = entry.job;
  std::set<Rank> own;
  for (const auto& part : job.allocation.nodes) own.insert(part.rank);
  std::vector<std::string> picked;
  // Each node of the job is restored whole on one other node: it needs as
  // many free cores and GPUs as that part holds.
  std::set<Rank> taken;
  for (const resource::NodeAllocation& part : job.allocation.nodes) {
    for (const auto& [rank, node] : nodes_) {
      if (own.count(rank) || taken.count(rank) || node.state != NodeState::kUp || node.drained ||
          node.unresponsive || !node.in_pool || !node.checkpoint_capable) {
        continue;
      }
      const resource::NodeState* pooled = pool_.find(rank);
      if (pooled == nullptr || pooled->free_cores() < static_cast<int>(part.cores.size()) ||
          pooled->free_gpus() < static_cast<int>(part.gpus.size())) {
        continue;
      }
      taken.insert(rank);
      picked.push_back(node.name);
      break;
    }
  }
  if (picked.size() < job.allocation.nodes.size()) {
    return failed_precondition(
        "job " + std::to_string(job.id) + " stays where it is: it needs " +
        std::to_string(job.allocation.nodes.size()) + " other node(s) with " +
        std::to_string(job.allocation.nodes.front().cores.size()) + " free cores, and " +
        std::to_string(picked.size()) + " can take it now (--to names nodes to wait for)");
  }
  return picked;
}

std::future<Result<v1::CheckpointRecord>> Leader::checkpoint(const Caller& caller, JobId id,
                                                             job::CheckpointThen then,
                                                             std::vector<std::string> to,
                                                             bool elsewhere) {
  auto promise = std::make_shared<std::promise<Result<v1::CheckpointRecord>>>();
  auto future = promise->get_future();
  loop_.post([this, caller, id, then, to = std::move(to), elsewhere, promise]() mutable {
    auto found = find_for(caller, id);
    if (!found.is_ok()) return promise->set_value(found.status());
    JobEntry& entry = **found;
    const job::Job& job = entry.job;
    const std::string name = "job " + std::to_string(id);
    if (elsewhere) {
      if (then == job::CheckpointThen::kContinue || !to.empty()) {
        return promise->set_value(
            invalid_argument("elsewhere: only for a job that leaves its nodes, without --to"));
      }
      if (Status ok = checkpointable(entry, then); !ok.is_ok()) return promise->set_value(ok);
      auto others = other_nodes_for(entry);
      if (!others.is_ok()) return promise->set_value(others.status());
      to = std::move(others).value();
    }
    if (!to.empty()) {
      if (then == job::CheckpointThen::kContinue) {
        return promise->set_value(
            invalid_argument("--to: only when the job leaves its nodes "
                             "(migrate, or --then requeue|stop)"));
      }
      for (const std::string& node : to) {
        const bool known = std::any_of(nodes_.begin(), nodes_.end(),
                                       [&](const auto& n) { return n.second.name == node; });
        if (!known)
          return promise->set_value(invalid_argument("--to: unknown node '" + node + "'"));
      }
      const std::set<std::string> distinct(to.begin(), to.end());
      const std::size_t needed = job.allocation.nodes.size();
      if (distinct.size() < needed) {
        return promise->set_value(invalid_argument(
            "--to: " + name + " runs on " + std::to_string(needed) +
            " nodes and is restored on as many; " + std::to_string(distinct.size()) + " given"));
      }
    }
    Status started = begin_checkpoint(entry, then, promise, to);
    if (!started.is_ok()) promise->set_value(started);
  });
  return future;
}

Status Leader::checkpointable(const JobEntry& entry, job::CheckpointThen then) const {
  const job::Job& job = entry.job;
  const std::string name = "job " + std::to_string(job.id);
  if (job.state != job::JobState::kRunning) {
    return failed_precondition(name + " is " + job::state_name(job.state) +
                               ": only running jobs can be checkpointed");
  }
  // A restore needs each node's part to hold as many tasks as its image:
  // it asks for as many nodes as the dump, which gives every node the same
  // count only when the tasks divide evenly over them.
  const int nodes = static_cast<int>(job.allocation.nodes.size());
  if (then != job::CheckpointThen::kContinue && job.spec.request.ntasks % nodes != 0) {
    return failed_precondition(name + " runs " + std::to_string(job.spec.request.ntasks) +
                               " tasks on " + std::to_string(nodes) +
                               " nodes, unevenly, so a restore could not lay them out the same "
                               "way; only --then continue");
  }
  if (entry.checkpointing) return failed_precondition(name + " is being checkpointed already");
  if (entry.resizing || !entry.removing.empty()) {
    return failed_precondition(name + " is being resized");
  }
  if (entry.kill_sent || entry.cancel_requested || entry.preempted ||
      !entry.requeue_when_ended.empty()) {
    return failed_precondition(name + " is ending");
  }
  if (!entry.launched || entry.started_on != entry.running_on) {
    return failed_precondition(name + " has not started on all of its nodes yet");
  }
  for (Rank rank : entry.running_on) {
    const NodeEntry& node = nodes_.at(rank);
    if (!node.checkpoint_capable) {
      return failed_precondition(
          "node " + node.name + " cannot checkpoint: " +
          (node.checkpoint_reason.empty() ? "no working CRIU" : node.checkpoint_reason));
    }
    if (job.uid != 0 && !node.checkpoint_other_users) {
      return failed_precondition("node " + node.name + " cannot checkpoint " + name + " (of uid " +
                                 std::to_string(job.uid) +
                                 "): " + node.checkpoint_other_users_reason);
    }
  }
  return Status::ok();
}

std::vector<Rank> Leader::ranks_of(
    const google::protobuf::RepeatedPtrField<std::string>& names) const {
  return ranks_of(std::vector<std::string>(names.begin(), names.end()));
}

std::vector<Rank> Leader::ranks_of(const std::vector<std::string>& names) const {
  std::vector<Rank> ranks;
  for (const auto& [rank, node] : nodes_) {
    if (std::find(names.begin(), names.end(), node.name) != names.end()) ranks.push_back(rank);
  }
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

Status Leader::begin_checkpoint(JobEntry& entry, job::CheckpointThen then,
                                std::shared_ptr<std::promise<Result<v1::CheckpointRecord>>> promise,
                                const std::vector<std::string>& to, bool periodic) {
  HPCQ_RETURN_IF_ERROR(checkpointable(entry, then));
  const job::Job& job = entry.job;
  const JobId id = job.id;
  {
    JobEntry::Checkpointing op;
    op.promise = std::move(promise);
    op.record.set_periodic(periodic);
    for (const std::string& node : to) op.record.add_to(node);
    op.record.set_time_us(now());
    op.record.set_then(job::checkpoint_then_name(then));
    op.record.set_image(checkpoint_root() + "/job-" + std::to_string(id) + "/" +
                        std::to_string(entry.checkpoints.size() + 1) + "-" +
                        std::to_string(job.requeue_count));
    op.deadline = now() + kCheckpointTimeoutUs;
    for (std::size_t i = 0; i < job.allocation.nodes.size(); ++i) {
      const resource::NodeAllocation& part = job.allocation.nodes[i];
      op.record.add_nodes(part.node);
      op.waiting.insert(part.rank);
      overlay::Envelope envelope;
      envelope.set_dst(part.rank);
      overlay::Checkpoint* c = envelope.mutable_checkpoint();
      c->set_job_id(id);
      c->set_attempt(static_cast<uint32_t>(job.requeue_count));
      c->set_image_dir(op.record.image() + "/part-" + std::to_string(i));
      c->set_stop(then != job::CheckpointThen::kContinue);
      Status sent = overlay_->send(std::move(envelope));
      if (!sent.is_ok())
        spdlog::warn("job {}: checkpoint to {}: {}", id, part.node, sent.message());
    }
    spdlog::info("job {}: checkpoint ({}) into {}", id, job::checkpoint_then_name(then),
                 op.record.image());
    entry.checkpointing = std::move(op);
  }
  persist_checkpoint_in_flight(entry);
  return Status::ok();
}

// --checkpoint-interval: a running job whose last checkpoint of this run (or
// its start) is older than its interval is checkpointed now, and runs on.
void Leader::checkpoint_due_jobs() {
  const TimeUs t = now();
  for (JobId id : table_.running()) {
    JobEntry& entry = table_.jobs().at(id);
    const job::Job& job = entry.job;
    if (job.spec.checkpoint_interval_s <= 0 || entry.checkpointing) continue;
    TimeUs last = job.start_time;
    for (const v1::CheckpointRecord& r : entry.checkpoints) last = std::max(last, r.time_us());
    if (t - last < job.spec.checkpoint_interval_s * kUsPerSecond) continue;
    if (!checkpointable(entry, job::CheckpointThen::kContinue).is_ok()) continue;  // next tick
    Status s =
        begin_checkpoint(entry, job::CheckpointThen::kContinue, nullptr, {}, /*periodic=*/true);
    if (!s.is_ok()) spdlog::warn("job {}: periodic checkpoint: {}", id, s.message());
  }
}

void Leader::on_checkpoint_done(Rank rank, const overlay::CheckpointDone& done) {
  auto it = table_.jobs().find(done.job_id());
  if (it == table_.jobs().end()) return;
  JobEntry& entry = it->second;
  // An answer repeated in a Hello may be of an earlier checkpoint: each has
  // its own directory.
  if (!entry.checkpointing || entry.job.state != job::JobState::kRunning ||
      done.attempt() != static_cast<uint32_t>(entry.job.requeue_count) ||
      done.image_dir().rfind(entry.checkpointing->record.image() + "/", 0) != 0 ||
      !entry.checkpointing->waiting.erase(rank)) {
    return;
  }
  v1::CheckpointRecord& record = entry.checkpointing->record;
  if (!done.ok()) {
    const std::string why = nodes_.at(rank).name + ": " + done.reason();
    record.set_outcome(record.outcome().empty() ? why : record.outcome() + "; " + why);
  } else {
    record.set_image_bytes(record.image_bytes() + done.image_bytes());
    record.set_dump_seconds(std::max(record.dump_seconds(), done.dump_seconds()));
  }
  // A stopped part is gone from its node, silently: no end will be reported.
  if (done.stopped()) entry.running_on.erase(rank);
  if (entry.checkpointing->waiting.empty()) finish_checkpoint(entry, /*timed_out=*/false);
}

void Leader::finish_checkpoint(JobEntry& entry, bool timed_out) {
  JobEntry::Checkpointing op = std::move(*entry.checkpointing);
  entry.checkpointing.reset();
  job::Job& job = entry.job;
  v1::CheckpointRecord& record = op.record;
  if (timed_out) {
    std::string late;
    for (Rank rank : op.waiting) late += (late.empty() ? "" : ",") + nodes_.at(rank).name;
    record.set_outcome((record.outcome().empty() ? "" : record.outcome() + "; ") + late +
                       ": no answer");
  }
  const bool ok = record.outcome().empty();
  if (ok) record.set_outcome("ok");
  entry.checkpoints.push_back(record);
  persist_checkpoint(entry, entry.checkpoints.size() - 1);
  const std::string name = "job " + std::to_string(job.id);
  if (then_of(record) == job::CheckpointThen::kContinue) {
    spdlog::info("{}: {}checkpoint {}", name, record.periodic() ? "periodic " : "",
                 record.outcome());
    if (ok && record.periodic()) prune_periodic_checkpoints(entry);
    if (!op.promise) return;
    op.promise->set_value(
        ok ? Result<v1::CheckpointRecord>(record)
           : Result<v1::CheckpointRecord>(failed_precondition(
                 name + ": checkpoint failed (" + record.outcome() + "); the job runs on")));
    return;
  }
  if (!ok && op.promise && !timed_out && entry.running_on.size() == job.allocation.nodes.size()) {
    // Asked for by a user (checkpoint --then, migrate) and no part was
    // stopped (a failed dump resumes its part): the job runs on where it was.
    // A preemption's victim (no promise) must leave all the same: below.
    spdlog::info("{}: checkpoint ({}) {}: it runs on", name, record.then(), record.outcome());
    if (op.promise) {
      op.promise->set_value(failed_precondition(name + ": checkpoint failed (" + record.outcome() +
                                                "); the job runs on"));
    }
    return;
  }
  if (!ok) {
    // The parts that were stopped are gone; the others still run: end
    // them, then run the job again from the start. Never lost, never twice.
    entry.requeue_when_ended = "checkpoint failed (" + record.outcome() + ")";
    if (entry.running_on.empty()) {
      all_parts_ended(entry, now());
    } else {
      kill_job_parts(entry);
    }
    if (op.promise) {
      op.promise->set_value(failed_precondition(name + ": checkpoint failed (" + record.outcome() +
                                                "); the job is requeued to run from the start"));
    }
    return;
  }
  const bool stop = then_of(record) == job::CheckpointThen::kStop;
  // The restore asks for as many nodes as the dump ran on; with as many
  // tasks on each (checked before the dump), any placement fits the images.
  job.spec.request.nodes = record.nodes_size();
  const std::optional<job::Preemption> preempted = entry.preempted;
  std::string why = stop ? "checkpointed and stopped" : "checkpointed";
  if (preempted && preempted->for_job != 0) {
    why = "preempted by job " + std::to_string(preempted->for_job) + ", checkpointed";
  } else if (preempted) {
    // The gap action's own saves: a move to a hole, or Mode A's slot end.
    std::string to;
    for (const std::string& node : record.to()) to += (to.empty() ? "" : ",") + node;
    why = to.empty() ? "checkpointed at the end of its slot" : "checkpointed to move to " + to;
  }
  requeue_job(entry, why);
  if (preempted) entry.yields_to = preempted->for_job;
  entry.restore_from = record.image();
  entry.restore_to = ranks_of(record.to());
  if (stop) {
    auto held = table_.hold(entry, true, "checkpointed; held until released", now());
    if (held.is_ok()) apply(*held);  // requeued: pending
  }
  schedule_soon();
  if (op.promise) op.promise->set_value(record);
}

// A good periodic checkpoint replaces the earlier periodic ones: their
// images go (the records stay, marked pruned), unless a restore needs them.
void Leader::prune_periodic_checkpoints(JobEntry& entry) {
  const std::string& newest = entry.checkpoints.back().image();
  for (std::size_t i = 0; i + 1 < entry.checkpoints.size(); ++i) {
    v1::CheckpointRecord& r = entry.checkpoints[i];
    if (!r.periodic() || r.pruned() || r.restore_pending() || r.image() == newest ||
        r.image() == entry.restored_image || r.image() == entry.restore_from) {
      continue;
    }
    std::error_code ec;
    std::filesystem::remove_all(r.image(), ec);
    if (ec) {
      spdlog::warn("job {}: removing {}: {}", entry.job.id, r.image(), ec.message());
      continue;
    }
    r.set_pruned(true);
    persist_checkpoint(entry, i);
  }
}

std::future<Status> Leader::drain(const Caller& caller, const std::string& name, bool drained,
                                  const std::string& reason) {
  auto promise = std::make_shared<std::promise<Status>>();
  auto future = promise->get_future();
  loop_.post([this, caller, name, drained, reason, promise] {
    if (!caller.is_admin()) {
      return promise->set_value(permission_denied(std::string(drained ? "drain" : "resume") +
                                                  ": only root may change a node's state"));
    }
    auto it = std::find_if(nodes_.begin(), nodes_.end(),
                           [&](const auto& n) { return n.second.name == name; });
    if (it == nodes_.end()) return promise->set_value(not_found("no node '" + name + "'"));
    NodeEntry& node = it->second;
    node.drained = drained;
    node.reason =
        drained ? (reason.empty() ? "drained by " + user_name_of(caller.uid) : reason) : "";
    if (node.in_pool) set_schedulable_in_pool(node.rank, schedulable(node));
    persist_node(node);
    spdlog::info("node {}: {}{}", name, drained ? "drained" : "resumed",
                 drained ? " (" + node.reason + ")" : "");
    if (drained) shrink_off(node.rank, "drain");
    if (!drained) schedule_soon();
    promise->set_value(Status::ok());
  });
  return future;
}

std::future<Result<v1::Reservation>> Leader::create_reservation(const Caller& caller,
                                                                v1::Reservation request) {
  auto promise = std::make_shared<std::promise<Result<v1::Reservation>>>();
  auto future = promise->get_future();
  loop_.post([this, caller, request = std::move(request), promise] {
    if (!caller.is_admin()) {
      return promise->set_value(permission_denied("reserve: only root may create reservations"));
    }
    auto known = [this](const std::string& name) {
      return std::any_of(nodes_.begin(), nodes_.end(),
                         [&](const auto& n) { return n.second.name == name; });
    };
    auto made = reservation_from_request(request, known, now());
    if (!made.is_ok()) return promise->set_value(made.status());
    Reservation r = std::move(made).value();
    if (reservations_.count(r.name)) {
      return promise->set_value(
          Status(Code::kAlreadyExists, "reservation '" + r.name + "' already exists"));
    }
    for (const auto& [name, other] : reservations_) {
      if (overlaps(r, other)) {
        return promise->set_value(failed_precondition("reservation '" + r.name +
                                                      "' overlaps reservation '" + name + "'"));
      }
    }
    // As Slurm: the nodes must be free of other users' jobs by the start,
    // judged by the running jobs' time limits.
    for (JobId id : table_.running()) {
      const job::Job& job = table_.jobs().at(id).job;
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
    committer_->submit(
        std::move(batch), [this, r = std::move(r), answer, promise](Status s) mutable {
          if (!s.is_ok()) {
            return promise->set_value(
                Status(s.code(), "the reservation could not be stored: " + s.message()));
          }
          loop_.post([this, r = std::move(r), answer, promise]() mutable {
            spdlog::info("reservation {}: {} nodes for [{}, {}) us", r.name, r.nodes.size(),
                         r.start, r.end);
            const std::string name = r.name;
            reservations_.emplace(name, std::move(r));
            schedule_soon();
            promise->set_value(answer);
          });
        });
  });
  return future;
}

std::future<Status> Leader::delete_reservation(const Caller& caller, std::string name) {
  auto promise = std::make_shared<std::promise<Status>>();
  auto future = promise->get_future();
  loop_.post([this, caller, name = std::move(name), promise] {
    if (!caller.is_admin()) {
      return promise->set_value(permission_denied("reserve: only root may delete reservations"));
    }
    if (reservations_.erase(name) == 0) {
      return promise->set_value(not_found("no reservation '" + name + "'"));
    }
    store::WriteBatch batch;
    batch.delete_record("reservation", name);
    committer_->submit(std::move(batch), [promise](Status s) { promise->set_value(s); });
    schedule_soon();
  });
  return future;
}

std::future<v1::ListReservationsResponse> Leader::list_reservations() {
  return ask([this]() -> v1::ListReservationsResponse {
    v1::ListReservationsResponse response;
    const TimeUs t = now();
    for (const auto& [name, r] : reservations_) {
      if (r.end > t) *response.add_reservations() = to_proto(r);
    }
    return response;
  });
}

// ---- the loop thread ----

void Leader::admit(job::Job job) { apply(table_.admit(table_.insert(std::move(job)), now())); }

void Leader::apply(const job::Effects& effects) {
  using Kind = job::Effect::Kind;
  for (const job::Effect& effect : effects) {
    switch (effect.kind) {
      case Kind::kStored: {
        const job::Job& job = table_.at(effect.job).job;
        persist(job, effect.event, "{}");
        publish(job);
        spdlog::info("job {}: {} (exit code {}){}", job.id, effect.event, job.exit_code,
                     job.reason.empty() ? "" : ": " + job.reason);
        break;
      }
      case Kind::kPublished: publish(table_.at(effect.job).job); break;
      case Kind::kQueued:
        if (decision_log_) decision_log_->queue(now(), table_.at(effect.job).job);
        break;
      case Kind::kDequeued:
        if (decision_log_) decision_log_->dequeue(now(), effect.job);
        break;
      case Kind::kRunEnded:
        if (decision_log_) decision_log_->end(now(), effect.job);
        break;
      case Kind::kKillParts: kill_job_parts(table_.at(effect.job)); break;
      case Kind::kSchedule: schedule_soon(); break;
    }
  }
}

void Leader::carry_out(JobEntry& entry, const job::AfterRun& after, TimeUs end_time) {
  switch (after.kind) {
    case job::AfterRun::Kind::kFinish:
      finish_job(entry, after.state, after.reason, end_time);
      break;
    case job::AfterRun::Kind::kRequeue: requeue_job(entry, after.reason); break;
    case job::AfterRun::Kind::kRequeueFromCheckpoint:
      requeue_from_checkpoint(entry, after.reason);
      break;
  }
  if (after.yields_to != 0) entry.yields_to = after.yields_to;
  schedule_soon();
}

void Leader::schedule_soon() {
  if (cycle_posted_) return;
  cycle_posted_ = true;
  // Posted rather than run now, so that a burst of submissions or ends that
  // are already queued on the loop is scheduled in one cycle.
  loop_.post([this] {
    cycle_posted_ = false;
    run_cycle();
  });
}

// Whether a running elastic job is below its maximum and could grow: the
// "elastic" action has work even with an empty queue.
bool Leader::may_expand() const {
  if (!elastic_action_) return false;
  for (JobId id : table_.running()) {
    const job::Job& job = table_.jobs().at(id).job;
    if (job.spec.elastic && static_cast<int>(job.allocation.nodes.size()) < job.spec.max_nodes) {
      return true;
    }
  }
  return false;
}

void Leader::run_cycle() {
  if (table_.pending().empty() && !may_expand()) return;
  // Nothing can start while no node has a free core: a queue of 100k jobs
  // behind a full or drained cluster then costs nothing per submission.
  // Actions that free resources (preempt, reclaim) still have work to do.
  bool room = std::any_of(
      pool_.nodes().begin(), pool_.nodes().end(),
      [](const resource::NodeState& n) { return n.schedulable() && n.free_cores() > 0; });
  if (!room && !frees_resources_) return;
  sched::Snapshot snapshot;
  snapshot.now = now();
  snapshot.pool = &pool_;
  snapshot.site = &config_.site;
  snapshot.usage = &usage_;
  snapshot.reservations = current_reservations();
  // A cycle looks at the first queue_depth pending jobs (as Slurm's
  // default_queue_depth), so its cost does not grow with the queue. An
  // array's tasks beyond its throttle (--array=...%N) are not shown.
  std::map<JobId, int> array_shown;
  std::vector<JobId> shown;
  const auto depth = static_cast<std::size_t>(config_.queue_depth);
  // Whether to look further: false once the snapshot's queue is full.
  auto consider = [&](JobId id) {
    JobEntry& entry = table_.jobs().at(id);
    const job::Job& job = entry.job;
    if (entry.yields_to != 0) {
      auto preemptor = table_.jobs().find(entry.yields_to);
      if (preemptor != table_.jobs().end() &&
          preemptor->second.job.state == job::JobState::kPending && !preemptor->second.job.held) {
        return true;
      }
      entry.yields_to = 0;
    }
    if (job.spec.array_max_running > 0) {
      int& more = array_shown[job.spec.array_job_id];
      // What queue shows for it (Slurm's JobArrayTaskLimit); not stored.
      constexpr std::string_view kThrottled = "array throttle: ";
      if (table_.array_running(job.spec.array_job_id) + more >= job.spec.array_max_running) {
        if (!job.reason.starts_with(kThrottled)) {
          entry.job.reason = std::string(kThrottled) + "at most " +
                             std::to_string(job.spec.array_max_running) + " running";
        }
        return true;
      }
      if (job.reason.starts_with(kThrottled)) entry.job.reason.clear();
      ++more;
    }
    snapshot.queue.push_back(pending_of(job));
    if (!entry.restore_from.empty()) {
      snapshot.queue.back().nodelist = entry.restore_to;
    } else if (!job.spec.nodelist.empty()) {
      snapshot.queue.back().nodelist = ranks_of(job.spec.nodelist);
    }
    if (decision_log_) shown.push_back(id);
    return snapshot.queue.size() < depth;
  };
  // In queue order the walk stops after queue_depth jobs, so a cycle costs
  // the same with 1k or 100k queued; only an order by priority must look
  // at every pending job.
  if (priority_weights_ && table_.pending().size() > depth) {
    for (JobId id : priority_window(snapshot)) {
      if (!consider(id)) break;
    }
  } else {
    for (const auto& [submit_time, id] : table_.pending()) {
      if (!consider(id)) break;
    }
  }
  if (decision_log_) decision_log_->cycle(snapshot.now, shown);
  for (JobId id : table_.running()) {
    const job::Job& job = table_.jobs().at(id).job;
    // A job without a limit (0 after submit) is expected to run for ever.
    TimeUs end = job.spec.time_limit_s > 0 ? job.start_time + job.spec.time_limit_s * kUsPerSecond
                                           : std::numeric_limits<TimeUs>::max();
    snapshot.running.push_back(sched::running_from(
        pending_of(job),
        table_.jobs().at(id).cores_handed_over ? without_cores(job.allocation) : job.allocation,
        job.start_time, end));
    // The rescale gap counts from the last resize's outcome; a job with a
    // resize in flight (or parts still being taken away) is not resized
    // again, which a gap starting now says to the "elastic" action.
    const JobEntry& entry = table_.jobs().at(id);
    snapshot.running.back().last_resize = entry.resizing || !entry.removing.empty()
                                              ? snapshot.now
                                              : std::max(job.start_time, entry.last_resize);
    snapshot.running.back().leaving = entry.preempted.has_value() || entry.cancel_requested;
    if (entry.preempted && entry.checkpointing) {
      snapshot.running.back().moving_to = ranks_of(entry.checkpointing->record.to());
    }
  }
  sched::Decisions decisions = scheduler_->cycle(snapshot);
  // A Shrink only asks the application: the nodes come free once it has
  // acknowledged, so a Start of this cycle that counted on them is refused
  // by the pool and the job waits for a later cycle.
  bool shrink_asked = false;
  for (auto& decision : decisions.decisions) {
    if (auto* start = std::get_if<sched::Start>(&decision)) {
      auto it = table_.jobs().find(start->job);
      if (it == table_.jobs().end() || it->second.job.state != job::JobState::kPending) continue;
      start_job(it->second, std::move(start->allocation), shrink_asked);
    } else if (auto* preempt = std::get_if<sched::Preempt>(&decision)) {
      apply_preempt(*preempt);
    } else if (auto* migrate = std::get_if<sched::Migrate>(&decision)) {
      apply_migrate(*migrate);
    } else if (auto* shrink = std::get_if<sched::Shrink>(&decision)) {
      auto it = table_.jobs().find(shrink->job);
      if (it == table_.jobs().end()) continue;
      Status asked = begin_shrink(it->second, shrink->nodes, "scheduler", nullptr);
      if (!asked.is_ok()) {
        spdlog::info("job {}: shrink not asked: {}", shrink->job, asked.message());
      } else {
        shrink_asked = true;
      }
    } else if (auto* expand = std::get_if<sched::Expand>(&decision)) {
      auto it = table_.jobs().find(expand->job);
      if (it == table_.jobs().end()) continue;
      Status asked = begin_expand(it->second, std::move(expand->allocation), "scheduler", nullptr);
      if (!asked.is_ok()) spdlog::info("job {}: expand not done: {}", expand->job, asked.message());
    }
  }
  if (decision_log_) decision_log_->flush();
}

std::vector<JobId> Leader::priority_window(const sched::Snapshot& snapshot) {
  std::vector<JobId> ids;
  ids.reserve(table_.pending().size());
  for (const auto& [submit_time, id] : table_.pending()) ids.push_back(id);
  // Some slack over queue_depth: array tasks beyond their throttle are
  // skipped after this.
  const std::size_t depth = std::min(ids.size(), static_cast<std::size_t>(config_.queue_depth) * 2);
  // O(pending): every pending job's priority, then the best `depth` of them
  // in (priority, submit time, id) order.
  std::vector<sched::PendingJob> pending;
  pending.reserve(ids.size());
  std::vector<sched::FairShareTree::Key> seen;
  for (JobId id : ids) {
    pending.push_back(pending_of(table_.jobs().at(id).job));
    seen.emplace_back(pending.back().uid, pending.back().account);
  }
  const sched::FairShareTree tree =
      sched::FairShareTree::compute(snapshot.site, snapshot.usage, snapshot.now, seen);
  const sched::MultifactorPriority multifactor(snapshot, *priority_weights_, &tree);
  std::vector<std::pair<double, std::size_t>> ranked;
  ranked.reserve(pending.size());
  for (std::size_t i = 0; i < pending.size(); ++i) {
    ranked.emplace_back(multifactor.priority(pending[i]), i);  // ids are in queue order
  }
  auto better = [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  };
  std::nth_element(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(depth),
                   ranked.end(), better);
  ranked.resize(depth);
  std::sort(ranked.begin(), ranked.end(), better);
  std::vector<JobId> window;
  window.reserve(depth);
  for (const auto& [priority, index] : ranked) window.push_back(ids[index]);
  return window;
}

void Leader::charge_usage(const job::Job& job, TimeUs from, TimeUs end) {
  from = std::max(from, job.start_time);
  if (job.start_time <= 0 || end <= from) return;
  sched::UsageCharge charge;
  const double seconds = static_cast<double>(end - from) / 1e6;
  int gpus = 0;
  for (const auto& part : job.allocation.nodes) gpus += static_cast<int>(part.gpus.size());
  charge.core_seconds = job.allocation.total_cores() * seconds;
  std::uint64_t memory = 0;
  for (const auto& part : job.allocation.nodes) memory += part.memory_bytes;
  charge.memory_byte_seconds = static_cast<double>(memory) * seconds;
  charge.gpu_seconds = gpus * seconds;
  usage_.charge(job.uid, job.spec.account, charge, end);
  usage_dirty_ = true;
}

void Leader::persist_usage() {
  if (!usage_dirty_) return;
  usage_dirty_ = false;
  store::WriteBatch batch;
  batch.put_record("usage", "ledger", encode_usage(usage_.entries()));
  committer_->submit(std::move(batch), [](Status s) {
    if (!s.is_ok()) spdlog::error("usage: store update failed: {}", s.message());
  });
}

// A job being dumped to leave its nodes (a preemption by checkpoint, a move)
// runs on none of its cores: CRIU freezes its tasks before it dumps them.
// So its cores go back to the pool at once and the job it leaves for starts
// without waiting for the dump (papers/004: a regular job never waits for a
// gap job's save); its memory and GPUs stay taken until its parts end. A
// dump that fails lets the tasks run on until they are killed (they are
// requeued from their last good checkpoint): briefly, the cores are shared.
void Leader::hand_over_cores(JobEntry& entry) {
  if (entry.cores_handed_over) return;
  if (entry.checkpointing) {
    // So that a leader restarted before the dump's answers adopts the job
    // without its cores (the job it left for has them).
    v1::CheckpointRecord& record = entry.checkpointing->record;
    record.set_preempted(true);
    record.set_preempted_for(entry.preempted ? entry.preempted->for_job : 0);
    persist_checkpoint_in_flight(entry);
  }
  for (Rank rank : entry.held_on) {
    resource::Allocation cores = part_on(entry.job.allocation, rank);
    for (resource::NodeAllocation& part : cores.nodes) {
      part.memory_bytes = 0;
      part.gpus.clear();
    }
    Status released = pool_.release(cores);
    if (!released.is_ok()) spdlog::error("job {}: hand over: {}", entry.job.id, released.message());
  }
  entry.cores_handed_over = true;
  schedule_soon();  // the job they were freed for starts in the next cycle
}

void Leader::apply_preempt(const sched::Preempt& preempt) {
  auto it = table_.jobs().find(preempt.job);
  if (it == table_.jobs().end() || it->second.job.state != job::JobState::kRunning) return;
  JobEntry& entry = it->second;
  if (entry.preempted || entry.cancel_requested) return;
  spdlog::info("job {}: preempted ({}) for job {}", entry.job.id, preempt_mode_name(preempt.mode),
               preempt.for_job);
  if (preempt.mode == PreemptMode::kCheckpoint) {
    // Its work is kept: dumped, requeued and restored where it next starts
    // (finish_checkpoint); a failed dump kills and requeues it as kRequeue.
    // A preemption by checkpoint (sched::PreemptMode::kCheckpoint) requeues.
    Status begun = begin_checkpoint(entry, job::CheckpointThen::kRequeue, nullptr);
    entry.preempted = job::Preemption{preempt.for_job, preempt.mode};
    if (begun.is_ok()) {
      hand_over_cores(entry);
      return;
    }
    spdlog::info(
        "job {}: not checkpointed ({}): requeued from its last good checkpoint or "
        "the start",
        entry.job.id, begun.message());
  }
  entry.preempted = job::Preemption{preempt.for_job, preempt.mode};
  // The whole job, on every node; its resources come back when every part
  // has reported its end.
  kill_job_parts(entry);
}

// The gap action's move to a hole that lasts: checkpointed and requeued with
// the hole's nodes as its restore target (as `migrate --to`), where the
// action then restores it (the job comes early in the queue's order). It
// leaves its cores as a preempted job does: a failed dump still requeues it.
void Leader::apply_migrate(const sched::Migrate& migrate) {
  auto it = table_.jobs().find(migrate.job);
  if (it == table_.jobs().end() || it->second.job.state != job::JobState::kRunning) return;
  JobEntry& entry = it->second;
  if (entry.preempted || entry.cancel_requested) return;
  std::vector<std::string> to;
  for (const auto& part : migrate.allocation.nodes) to.push_back(part.node);
  spdlog::info("job {}: moved to a lasting hole on {}", entry.job.id, fmt::join(to, ","));
  Status begun = begin_checkpoint(entry, job::CheckpointThen::kRequeue, nullptr, to);
  entry.preempted = job::Preemption{0, PreemptMode::kCheckpoint};
  if (begun.is_ok()) {
    hand_over_cores(entry);
    return;
  }
  spdlog::info(
      "job {}: not checkpointed ({}): requeued from its last good checkpoint or the "
      "start",
      entry.job.id, begun.message());
  kill_job_parts(entry);
}

void Leader::set_schedulable_in_pool(Rank rank, bool schedulable) {
  const resource::NodeState* node = pool_.find(rank);
  if (node == nullptr) return;
  const bool changed = node->schedulable() != schedulable;
  pool_.set_schedulable(rank, schedulable);
  if (changed && decision_log_) decision_log_->node_state(now(), rank, schedulable);
}

std::vector<sched::AdvanceReservation> Leader::current_reservations() {
  std::vector<sched::AdvanceReservation> out;
  const TimeUs t = now();
  for (auto it = reservations_.begin(); it != reservations_.end();) {
    const Reservation& r = it->second;
    if (r.end <= t) {
      spdlog::info("reservation {}: ended", r.name);
      store::WriteBatch batch;
      batch.delete_record("reservation", r.name);
      committer_->submit(std::move(batch), [name = r.name](Status s) {
        if (!s.is_ok()) spdlog::error("reservation {}: store: {}", name, s.message());
      });
      it = reservations_.erase(it);
      continue;
    }
    sched::AdvanceReservation a;
    a.name = r.name;
    for (const std::string& node : r.nodes) {
      for (const auto& [rank, entry] : nodes_) {
        if (entry.name == node) a.nodes.push_back(rank);
      }
    }
    a.start = r.start;
    a.end = r.end;
    a.uids = r.uids;
    a.accounts = r.accounts;
    out.push_back(std::move(a));
    ++it;
  }
  return out;
}

void Leader::start_job(JobEntry& entry, resource::Allocation allocation, bool after_shrink) {
  job::Job& job = entry.job;
  Status taken = pool_.allocate(allocation);
  if (!taken.is_ok() && after_shrink) {
    spdlog::info("job {}: waits for the nodes a shrink is asking for", job.id);
    return;
  }
  if (!taken.is_ok()) {
    // The scheduler proposed cores that are not free: a bug, never a double allocation.
    spdlog::error("job {}: scheduler decision refused: {}", job.id, taken.message());
    return;
  }
  const TimeUs started = now();
  if (decision_log_) {
    const TimeUs end = job.spec.time_limit_s > 0 ? started + job.spec.time_limit_s * kUsPerSecond
                                                 : std::numeric_limits<TimeUs>::max();
    decision_log_->start(started, job.id, end, allocation);
  }
  const job::Effects effects = table_.start(entry, std::move(allocation), started);
  entry.kill_sent = false;
  entry.launched = false;
  entry.started_on.clear();
  entry.held_on.clear();
  for (const auto& a : job.allocation.nodes) entry.held_on.insert(a.rank);
  entry.resizing.reset();
  entry.resize_seq = 0;
  entry.last_resize = job.start_time;
  entry.usage_from = job.start_time;
  entry.part_of.clear();
  entry.removing.clear();

  overlay::Launch launch = make_launch(job);
  entry.restoring = !entry.restore_from.empty();
  entry.restored_image = entry.restore_from;
  if (entry.restoring) {
    // Restored, not started: once. A failed restore runs it from the start.
    launch.set_restore_from(entry.restore_from);
    for (std::size_t i = 0; i < entry.checkpoints.size(); ++i) {
      if (entry.checkpoints[i].image() != entry.restore_from) continue;
      entry.checkpoints[i].set_restored(true);
      entry.checkpoints[i].set_restore_pending(false);
      persist_checkpoint(entry, i);
    }
    entry.restore_from.clear();
  }
  entry.restore_to.clear();
  open_placement(entry);

  apply(effects);  // published; --dependency=after goes on
  entry.launch = std::make_shared<const overlay::Launch>(launch);
  // The Launch goes out only once the start is committed: a job an agent
  // runs is then RUNNING in the store, so a restarted leader adopts it and
  // never schedules it a second time.
  const JobId id = job.id;
  const int attempt = job.requeue_count;
  store::WriteBatch batch;
  batch.update_job(job);
  batch.append_event(job.id, now(), "start", "{}");
  committer_->submit(std::move(batch), [this, id, attempt](Status s) {
    if (!s.is_ok()) spdlog::error("job {}: store update failed: {}", id, s.message());
    loop_.post([this, id, attempt] { send_launches(id, attempt); });
  });
  spdlog::info("job {}: started on {}", job.id, job::nodelist(job.allocation));
}

// The Launch message of a job's current attempt (every node gets the same).
overlay::Launch Leader::make_launch(const job::Job& job) const {
  overlay::Launch launch;
  launch.set_job_id(job.id);
  launch.set_uid(job.uid);
  launch.set_gid(job.gid);
  launch.set_user(job.user);
  for (const auto& a : job.spec.argv) launch.add_argv(a);
  launch.set_script(job.spec.script);
  for (const auto& [k, v] : job::launch_environment(job)) (*launch.mutable_env())[k] = v;
  launch.set_cwd(job.spec.cwd);
  launch.set_stdout_path(job::expand_output_path(job.spec.output, job.id, job.spec.cwd,
                                                 job.spec.array_job_id, job.spec.array_task_id));
  launch.set_stderr_path(
      job::expand_output_path(job.spec.error.empty() ? job.spec.output : job.spec.error, job.id,
                              job.spec.cwd, job.spec.array_job_id, job.spec.array_task_id));
  fill_node_allocs(job.allocation, launch.mutable_allocation());
  launch.set_image(job.spec.image);
  launch.set_cpus_per_task(job.allocation.cpus_per_task);
  launch.set_gpus_per_task(job.allocation.gpus_per_task);
  launch.set_distribution(resource::distribution_name(job.allocation.node_distribution));
  launch.set_cpu_bind(resource::cpu_bind_name(job.allocation.cpu_bind));
  launch.set_time_limit_s(job.spec.time_limit_s);
  launch.set_ntasks(job::task_count(job));
  launch.set_attempt(static_cast<uint32_t>(job.requeue_count));
  launch.set_elastic(job.spec.elastic && job.spec.max_nodes > 0);
  return launch;
}

void Leader::send_launches(JobId id, int attempt) {
  auto it = table_.jobs().find(id);
  if (it == table_.jobs().end()) return;
  JobEntry& entry = it->second;
  if (entry.job.state != job::JobState::kRunning || entry.job.requeue_count != attempt ||
      !entry.launch) {
    return;
  }
  if (entry.kill_sent) {
    // Cancelled or preempted before any node heard of it: nothing ran.
    entry.running_on.clear();
    if (entry.outcome_reason.empty()) entry.outcome_reason = "ended before it was launched";
    all_parts_ended(entry, now());
    return;
  }
  entry.sent_at = now();
  entry.launched = true;
  for (Rank rank : entry.running_on) {
    overlay::Envelope envelope;
    envelope.set_dst(rank);
    *envelope.mutable_launch() = *entry.launch;
    Status sent = overlay_->send(std::move(envelope));
    if (!sent.is_ok()) {
      // Repeated until confirmed (repeat_unconfirmed): the path may be
      // healing. A node that is really gone is declared down by its silence.
      spdlog::warn("job {}: launch on rank {} not sent yet: {}", id, rank, sent.message());
    }
  }
}

void Leader::on_message(overlay::Envelope&& envelope) {
  Rank rank = envelope.src();
  auto node = nodes_.find(rank);
  if (node == nodes_.end()) {
    spdlog::warn("overlay: message from unknown rank {}", rank);
    return;
  }
  switch (envelope.body_case()) {
    case overlay::Envelope::kHello: on_hello(rank, envelope.hello()); break;
    case overlay::Envelope::kResizeDone:
      heard_from(node->second);
      on_resize_done(rank, envelope.resize_done());
      break;
    case overlay::Envelope::kHeartbeat:
      if (node->second.state != NodeState::kUp) {
        // An agent that was declared down, or that the leader forgot (it
        // restarted): ask it to introduce itself again.
        overlay::Envelope reply;
        reply.set_dst(rank);
        reply.mutable_welcome()->set_send_hello(true);
        (void)overlay_->send(std::move(reply));
      } else {
        heard_from(node->second);
      }
      break;
    case overlay::Envelope::kJobUpdate:
      if (node->second.state == NodeState::kUp) heard_from(node->second);
      on_job_update(rank, envelope.job_update());
      break;
    case overlay::Envelope::kCheckpointDone:
      on_checkpoint_done(rank, envelope.checkpoint_done());
      break;
    default:
      spdlog::warn("overlay: unexpected message {} from rank {}",
                   static_cast<int>(envelope.body_case()), rank);
  }
}

void Leader::on_hello(Rank rank, const overlay::Hello& hello) {
  NodeEntry& node = nodes_.at(rank);
  if (hello.name() != node.name) {
    spdlog::warn("overlay: rank {} says it is '{}' but the config names it '{}'; refused", rank,
                 hello.name(), node.name);
    return;
  }
  overlay::Envelope welcome;
  welcome.set_dst(rank);
  welcome.mutable_welcome()->set_heartbeat_interval_ms(config_.heartbeat_interval_ms);
  if (node.state == NodeState::kUp && node.incarnation == hello.incarnation()) {
    // A retried Hello (the agent had not yet seen our Welcome): nothing changed.
    heard_from(node);
    (void)overlay_->send(std::move(welcome));
    return;
  }
  if (node.state == NodeState::kUp) {
    // The agent restarted while the leader still counted on it. The ends its
    // journal kept are real and recorded first; what else it ran is gone
    // with it.
    for (const overlay::JobUpdate& update : hello.finished()) on_job_update(rank, update);
    node_down(node, "its agent restarted");
  }
  // The same agent process as before a leader restart: what it does not
  // know of never reached it (a Launch lost in flight), rather than died.
  const bool same_agent = node.state == NodeState::kUnknown && node.incarnation != 0 &&
                          node.incarnation == hello.incarnation();
  node.incarnation = hello.incarnation();
  resource::NodeTopology topo = overlay::topology_from_message(hello.topology());
  if (node.in_pool) {
    // A node that comes back after being declared down: its jobs were
    // already ended or requeued, and nothing of the pool is in use there.
    pool_.remove_node(rank);
    node.in_pool = false;
    if (decision_log_) decision_log_->node_gone(now(), rank);
  }
  node.topology = std::move(topo);
  node_shapes_.at(rank - 1) =
      NodeShape{node.topology.num_cores(), node.topology.memory_bytes, node.topology.num_gpus()};
  node.host_cpus = std::max(1, hello.host_cpus());
  node.checkpoint_capable = hello.checkpoint_capable();
  node.checkpoint_reason = hello.checkpoint_reason();
  node.checkpoint_other_users = hello.checkpoint_other_users();
  node.checkpoint_other_users_reason = hello.checkpoint_other_users_reason();
  node.state = NodeState::kUp;
  node.unresponsive = false;
  node.last_seen = now();
  // Schedulable while the jobs it still runs are adopted (the pool gives no
  // cores on an unschedulable node), then as its drain says.
  Status added = pool_.add_node(rank, node.name, node.topology, /*schedulable=*/true);
  if (!added.is_ok()) {
    spdlog::error("node {}: {}", node.name, added.message());
    node.state = NodeState::kDown;
    return;
  }
  node.in_pool = true;
  node.awaited = false;
  if (decision_log_) decision_log_->node(now(), rank, node.name, true, node.topology);
  if (!node.drained) node.reason.clear();
  adopt_reported_jobs(node, hello, same_agent);
  set_schedulable_in_pool(rank, schedulable(node));
  (void)overlay_->send(std::move(welcome));
  persist_node(node);
  spdlog::info("node {} (rank {}) is up: {} cores, {} NUMA domains ({})", node.name, rank,
               node.topology.num_cores(), node.topology.numa.size(), node.topology.source);
  schedule_soon();
}

void Leader::adopt_reported_jobs(NodeEntry& node, const overlay::Hello& hello, bool same_agent) {
  const Rank rank = node.rank;
  // Ends that happened while the leader was away (or whose report was lost).
  for (const overlay::JobUpdate& update : hello.finished()) on_job_update(rank, update);
  // Dumps answered while the leader was away: a part they stopped is gone.
  for (const overlay::CheckpointDone& done : hello.checkpoints_done()) {
    on_checkpoint_done(rank, done);
  }
  std::set<JobId> reported;
  for (const overlay::RunningJob& r : hello.running()) {
    auto it = table_.jobs().find(r.job_id());
    bool expected = it != table_.jobs().end() && it->second.job.state == job::JobState::kRunning &&
                    r.attempt() == static_cast<uint32_t>(it->second.job.requeue_count) &&
                    it->second.running_on.count(rank);
    if (!expected) {
      // Not ours to run any more (cancelled, requeued, failed elsewhere):
      // killed, so that no job ever runs twice.
      overlay::Envelope kill;
      kill.set_dst(rank);
      kill.mutable_kill()->set_job_id(r.job_id());
      kill.mutable_kill()->set_attempt(r.attempt());
      (void)overlay_->send(std::move(kill));
      continue;
    }
    reported.insert(r.job_id());
    JobEntry& entry = it->second;
    if (entry.held_on.count(rank)) continue;
    resource::Allocation part = part_on(entry.job.allocation, rank);
    if (entry.cores_handed_over) part = without_cores(std::move(part));
    Status taken = pool_.allocate(part);
    if (!taken.is_ok()) {
      spdlog::error("job {}: cannot adopt its part on {}: {}", r.job_id(), node.name,
                    taken.message());
      continue;
    }
    entry.held_on.insert(rank);
    entry.started_on.insert(rank);
    spdlog::info("job {}: adopted on {} (still running)", r.job_id(), node.name);
  }
  // Jobs the leader expected on this node that its agent neither runs nor
  // reported ended: lost (the agent restarted, or the launch never arrived).
  const std::vector<JobId> running(table_.running().begin(), table_.running().end());
  for (JobId id : running) {
    JobEntry& entry = table_.jobs().at(id);
    if (!entry.running_on.count(rank) || reported.count(id)) continue;
    if (same_agent && !entry.kill_sent) {
      // Never arrived: launched now, and repeated until confirmed.
      Status taken = pool_.allocate(part_on(entry.job.allocation, rank));
      if (taken.is_ok()) {
        entry.held_on.insert(rank);
        if (!entry.launch)
          entry.launch = std::make_shared<const overlay::Launch>(make_launch(entry.job));
        entry.launched = true;
        overlay::Envelope envelope;
        envelope.set_dst(rank);
        *envelope.mutable_launch() = *entry.launch;
        (void)overlay_->send(std::move(envelope));
        entry.sent_at = now();
        spdlog::info("job {}: its launch never reached {}; launched again", id, node.name);
        continue;
      }
    }
    if (lose_elastic_part(entry, rank, node.name)) continue;
    lose_part(entry, rank, "its part on " + node.name + " was lost");
  }
}

void Leader::on_job_update(Rank rank, const overlay::JobUpdate& update) {
  // Recorded (or stale): either way the agent may forget it, but only once
  // whatever this update changed is committed. Batches commit in order, so an
  // empty one submitted after the job's record completes after it: an
  // acknowledged end is never lost.
  handle_job_update(rank, update);
  if (update.kind() != overlay::JobUpdate::STARTED) {
    ack_after_commit(rank, update.job_id(), update.attempt());
  }
}

void Leader::ack_after_commit(Rank rank, JobId job, std::uint32_t attempt) {
  committer_->submit(store::WriteBatch{}, [this, rank, job, attempt](Status) {
    loop_.post([this, rank, job, attempt] {
      overlay::Envelope ack;
      ack.set_dst(rank);
      ack.mutable_job_update_ack()->set_job_id(job);
      ack.mutable_job_update_ack()->set_attempt(attempt);
      (void)overlay_->send(std::move(ack));
    });
  });
}

void Leader::handle_job_update(Rank rank, const overlay::JobUpdate& update) {
  auto it = table_.jobs().find(update.job_id());
  if (it == table_.jobs().end()) return;
  JobEntry& entry = it->second;
  if (entry.job.state != job::JobState::kRunning ||
      update.attempt() != static_cast<uint32_t>(entry.job.requeue_count) ||
      !entry.running_on.count(rank)) {
    return;  // stale: from an earlier attempt, or the job already ended
  }
  if (auto part = entry.part_of.find(rank);
      part != entry.part_of.end() && update.part() != part->second) {
    return;  // stale: from a part an earlier resize took off this node
  }
  if (auto removed = entry.removing.find(rank); removed != entry.removing.end()) {
    if (update.kind() == overlay::JobUpdate::STARTED) return;
    // A part a resize took away has ended: its cores are free; the job
    // goes on without it, whatever the part's end.
    Status released = pool_.release(removed->second);
    if (!released.is_ok()) spdlog::error("job {}: release: {}", entry.job.id, released.message());
    entry.removing.erase(removed);
    entry.running_on.erase(rank);
    entry.started_on.erase(rank);
    entry.part_of.erase(rank);
    spdlog::info("job {}: its part on {} has ended (resized away)", entry.job.id,
                 nodes_.at(rank).name);
    // The job's other parts may have ended meanwhile (it was cancelled).
    if (entry.running_on.empty()) {
      all_parts_ended(entry, update.time_us());
    } else {
      schedule_soon();
    }
    return;
  }
  if (entry.resizing && !entry.resizing->notified && entry.resizing->added.count(rank) &&
      update.kind() != overlay::JobUpdate::STARTED) {
    // An added node could not start its part: the expansion fails, the job
    // goes on as it was. This part has ended already; the others are killed.
    spdlog::warn("job {}: expansion failed on {}: {}", entry.job.id, nodes_.at(rank).name,
                 update.reason());
    std::vector<Rank> added(entry.resizing->added.begin(), entry.resizing->added.end());
    take_parts_away(entry, added);
    charge_segment(entry);
    entry.job.allocation = entry.resizing->before;
    persist(entry.job, "expand_failed", "{}");
    finish_resize(entry, "failed",
                  nodes_.at(rank).name + ": " +
                      (update.reason().empty() ? "part ended at start" : update.reason()),
                  0);
    handle_job_update(rank, update);  // now a removed part's end
    return;
  }
  job::JobState end;
  switch (update.kind()) {
    case overlay::JobUpdate::STARTED:
      entry.started_on.insert(rank);
      if (entry.resizing && !entry.resizing->notified && !entry.resizing->added.empty() &&
          std::all_of(entry.resizing->added.begin(), entry.resizing->added.end(),
                      [&entry](Rank r) { return entry.started_on.count(r) > 0; })) {
        send_resize_notice(entry);  // expand: the nodes are added, then the app is told
      }
      return;
    case overlay::JobUpdate::COMPLETED: end = job::JobState::kCompleted; break;
    case overlay::JobUpdate::FAILED: end = job::JobState::kFailed; break;
    case overlay::JobUpdate::CANCELLED: end = job::JobState::kCancelled; break;
    case overlay::JobUpdate::TIMEOUT: end = job::JobState::kTimeout; break;
    default: return;
  }
  if (entry.restoring && end == job::JobState::kFailed &&
      update.reason().rfind(overlay::kRestoreFailedReason, 0) == 0) {
    // Never lost: the checkpoint could not be restored, so run it afresh.
    entry.requeue_when_ended =
        nodes_.at(rank).name + ": " + update.reason() + "; running it from the start";
  }
  const std::string reason =
      update.reason().empty() ? "" : nodes_.at(rank).name + ": " + update.reason();
  apply(table_.part_ended(entry, rank, end, update.exit_code(), reason));
  if (!entry.running_on.empty()) return;
  all_parts_ended(entry, update.time_us());
}

void Leader::all_parts_ended(JobEntry& entry, TimeUs end_time) {
  carry_out(entry, job::JobTableCore::after_run(entry), end_time);
}

void Leader::kill_job_parts(JobEntry& entry) {
  if (entry.kill_sent) return;
  entry.kill_sent = true;
  entry.sent_at = now();
  for (Rank rank : entry.running_on) send_kill(entry, rank);
}

void Leader::send_kill(JobEntry& entry, Rank rank) {
  overlay::Envelope kill;
  kill.set_dst(rank);
  kill.mutable_kill()->set_job_id(entry.job.id);
  kill.mutable_kill()->set_attempt(static_cast<uint32_t>(entry.job.requeue_count));
  Status sent = overlay_->send(std::move(kill));
  if (!sent.is_ok())
    spdlog::warn("job {}: kill on rank {}: {}", entry.job.id, rank, sent.message());
}

void Leader::repeat_unconfirmed() {
  const TimeUs t = now();
  std::vector<JobId> overdue;
  for (JobId id : table_.running()) {
    const JobEntry& entry = table_.jobs().at(id);
    if (entry.checkpointing && t > entry.checkpointing->deadline) overdue.push_back(id);
  }
  for (JobId id : overdue) {
    JobEntry& entry = table_.jobs().at(id);
    // A node that did not answer may have stopped its part or not: it is
    // told to kill it and no longer waited for.
    for (Rank rank : entry.checkpointing->waiting) {
      send_kill(entry, rank);
      entry.running_on.erase(rank);
    }
    finish_checkpoint(entry, /*timed_out=*/true);
  }
  check_resize_deadlines();
  const TimeUs after = 2 * static_cast<TimeUs>(config_.heartbeat_interval_ms) * 1000;
  for (JobId id : table_.running()) {
    JobEntry& entry = table_.jobs().at(id);
    // Parts taken away by a resize: told again until each reports its end.
    for (const auto& [rank, part] : entry.removing) send_part_kill(entry, rank);
    if (t - entry.sent_at < after) continue;
    if (entry.kill_sent) {
      // Until every node reports the end; a node that has no such job
      // ignores it.
      for (Rank rank : entry.running_on) send_kill(entry, rank);
      entry.sent_at = t;
      continue;
    }
    if (!entry.launch || !entry.launched) continue;  // adopted, or its start not yet committed
    bool repeated = false;
    for (Rank rank : entry.running_on) {
      // A part being taken away is not launched again (it may never have
      // started: an expansion undone).
      if (entry.started_on.count(rank) || entry.removing.count(rank)) continue;
      overlay::Envelope envelope;
      envelope.set_dst(rank);
      *envelope.mutable_launch() = *entry.launch;
      (void)overlay_->send(std::move(envelope));
      repeated = true;
    }
    if (repeated) {
      spdlog::info("job {}: launch repeated to the nodes that have not confirmed it", id);
      entry.sent_at = t;
    }
  }
}

// The job's part on `rank` is gone (node down, or not found after a leader
// restart): the rest is killed and the job requeued (--requeue) or failed.
void Leader::lose_part(JobEntry& entry, Rank rank, const std::string& why) {
  entry.running_on.erase(rank);
  kill_job_parts(entry);
  carry_out(entry, job::JobTableCore::after_node_lost(entry, why, restart_checkpoint(entry) >= 0),
            0);
}

void Leader::requeue_from_checkpoint(JobEntry& entry, const std::string& why) {
  const int restart = restart_checkpoint(entry);
  if (restart < 0) {
    requeue_job(entry, why);
    return;
  }
  v1::CheckpointRecord& from = entry.checkpoints[static_cast<std::size_t>(restart)];
  entry.job.spec.request.nodes = from.nodes_size();  // its images' layout
  requeue_job(entry, why + "; restarting from checkpoint " + from.image());
  entry.restore_from = from.image();
  from.set_restore_pending(true);
  persist_checkpoint(entry, static_cast<std::size_t>(restart));
}

int Leader::restart_checkpoint(const JobEntry& entry) const {
  const job::Job& job = entry.job;
  for (int i = static_cast<int>(entry.checkpoints.size()) - 1; i >= 0; --i) {
    const v1::CheckpointRecord& r = entry.checkpoints[static_cast<std::size_t>(i)];
    if (r.outcome() != "ok" || r.pruned() || r.nodes_size() == 0 ||
        job.spec.request.ntasks % r.nodes_size() != 0) {
      continue;
    }
    const bool this_run = r.time_us() >= job.start_time;
    if (job.spec.checkpoint_interval_s > 0 && this_run) return i;
    if (entry.restoring && r.image() == entry.restored_image) return i;
  }
  return -1;
}

void Leader::open_placement(JobEntry& entry) {
  v1::Placement p;
  for (const auto& a : entry.job.allocation.nodes) p.add_nodes(a.node);
  p.set_start_us(entry.job.start_time);
  p.set_restored_from(entry.restored_image);
  entry.placements.push_back(std::move(p));
  persist_placement(entry, entry.placements.size() - 1);
}

void Leader::close_placement(JobEntry& entry, const std::string& outcome) {
  if (entry.placements.empty() || entry.placements.back().end_us() != 0) return;
  entry.placements.back().set_end_us(now());
  entry.placements.back().set_outcome(outcome);
  persist_placement(entry, entry.placements.size() - 1);
}

// Placement records are kept under "<job>/<n>", n counting runs from 1.
void Leader::persist_placement(const JobEntry& entry, std::size_t index) {
  persist_job_record(entry.job.id, "placement", index + 1, entry.placements[index]);
}

void Leader::release_held(JobEntry& entry) {
  for (Rank rank : entry.held_on) {
    resource::Allocation part = part_on(entry.job.allocation, rank);
    if (entry.cores_handed_over) part = without_cores(std::move(part));
    Status released = pool_.release(part);
    if (!released.is_ok()) spdlog::error("job {}: release: {}", entry.job.id, released.message());
  }
  entry.held_on.clear();
  entry.cores_handed_over = false;
  for (const auto& [rank, part] : entry.removing) {
    Status released = pool_.release(part);
    if (!released.is_ok()) spdlog::error("job {}: release: {}", entry.job.id, released.message());
  }
  entry.removing.clear();
  entry.part_of.clear();
  if (entry.resizing) finish_resize(entry, "failed", "the job ended", 0);
  entry.launch.reset();
}

void Leader::end_run(JobEntry& entry, const std::string& outcome, TimeUs end_time) {
  release_held(entry);
  close_placement(entry, outcome);
  charge_usage(entry.job, entry.usage_from, end_time);
}

// end_time: when the job ended on its last node (the agent's clock), or 0 for now.
void Leader::finish_job(JobEntry& entry, job::JobState state, const std::string& reason,
                        TimeUs end_time) {
  const TimeUs end = end_time > 0 ? end_time : now();
  if (entry.job.state == job::JobState::kRunning) {
    end_run(entry, std::string(job::state_name(state)) + (reason.empty() ? "" : ": " + reason),
            end);
  }
  apply(table_.finish(entry, state, reason, end, now()));
}

void Leader::requeue_job(JobEntry& entry, const std::string& reason) {
  end_run(entry, "requeued: " + reason, now());  // the work it did counts, though it is lost
  entry.restoring = false;
  entry.restored_image.clear();
  apply(table_.requeue(entry, reason));
}

bool Leader::schedulable(const NodeEntry& node) const {
  return node.state == NodeState::kUp && !node.unresponsive && !node.drained;
}

void Leader::heard_from(NodeEntry& node) {
  node.last_seen = now();
  if (!node.unresponsive) return;
  node.unresponsive = false;
  set_schedulable_in_pool(node.rank, schedulable(node));
  spdlog::info("node {} (rank {}) is responsive again", node.name, node.rank);
  schedule_soon();
}

// Two-level liveness, as Flux's: a short silence only stops new work (the
// node may be busy or its network slow); a long one declares the node down
// and handles its jobs.
void Leader::check_heartbeats() {
  const TimeUs t = now();
  const TimeUs down_limit = t - static_cast<TimeUs>(config_.node_down_after_ms) * 1000;
  const TimeUs quiet_limit = t - static_cast<TimeUs>(config_.node_unresponsive_after_ms) * 1000;
  for (auto& [rank, node] : nodes_) {
    if (node.state == NodeState::kUnknown && !node.awaited && started_at_ < down_limit) {
      // Configured but absent since the leader started: down, as Flux
      // counts a rank that never joined (DESIGN.md: "a node configured but
      // absent is simply down"). Its Hello brings it up whenever it comes.
      node.state = NodeState::kDown;
      if (!node.drained) node.reason = "has not joined";
      spdlog::warn("node {} (rank {}) is down: it has not joined in {} ms", node.name, rank,
                   config_.node_down_after_ms);
      continue;
    }
    bool watched =
        node.state == NodeState::kUp || (node.state == NodeState::kUnknown && node.awaited);
    if (!watched) continue;
    if (node.last_seen < down_limit) {
      node_down(node, "no heartbeat for " + std::to_string(config_.node_down_after_ms) + " ms");
    } else if (node.state == NodeState::kUp && !node.unresponsive && node.last_seen < quiet_limit) {
      node.unresponsive = true;
      set_schedulable_in_pool(rank, false);
      spdlog::warn("node {} (rank {}) is unresponsive: no heartbeat for {} ms", node.name, rank,
                   config_.node_unresponsive_after_ms);
    }
  }
}

void Leader::node_down(NodeEntry& node, const std::string& reason) {
  if (node.state == NodeState::kDown) return;
  spdlog::warn("node {} (rank {}) is down: {}", node.name, node.rank, reason);
  node.state = NodeState::kDown;
  node.unresponsive = false;
  set_schedulable_in_pool(node.rank, false);
  // Copied: finish_job and requeue_job take jobs out of table_.running().
  const std::vector<JobId> running(table_.running().begin(), table_.running().end());
  for (JobId id : running) {
    JobEntry& entry = table_.jobs().at(id);
    if (!entry.running_on.count(node.rank)) continue;
    if (entry.resizing && !entry.resizing->notified && entry.resizing->added.count(node.rank)) {
      // An expansion onto this node had not been told to the app yet: it
      // fails, and the job goes on as it was (the added parts are taken
      // away; this one is gone with its node, just below).
      std::vector<Rank> added(entry.resizing->added.begin(), entry.resizing->added.end());
      take_parts_away(entry, added);
      charge_segment(entry);
      entry.job.allocation = entry.resizing->before;
      persist(entry.job, "expand_failed", "{}");
      finish_resize(entry, "failed", "node " + node.name + " went down", 0);
    }
    if (auto removed = entry.removing.find(node.rank); removed != entry.removing.end()) {
      // A part a resize took away: the job does not need it.
      Status released = pool_.release(removed->second);
      if (!released.is_ok()) spdlog::error("job {}: release: {}", id, released.message());
      entry.removing.erase(removed);
      entry.running_on.erase(node.rank);
      entry.part_of.erase(node.rank);
      continue;
    }
    if (lose_elastic_part(entry, node.rank, node.name)) continue;
    lose_part(entry, node.rank, "node " + node.name + " failed (" + reason + ")");
  }
  if (!node.drained) node.reason = reason;
  persist_node(node);
  schedule_soon();
}

void Leader::persist_node(const NodeEntry& node) {
  // A drain outlives restarts of the node and of the leader.
  std::string state = node.drained ? "drain" : node.state == NodeState::kUp ? "up" : "down";
  store::WriteBatch batch;
  // The agent's incarnation: after a leader restart, the same value in its
  // Hello means the agent did not restart meanwhile.
  batch.upsert_node(node.rank, node.name, state,
                    "{\"incarnation\":" + std::to_string(node.incarnation) + "}", now());
  committer_->submit(std::move(batch), [rank = node.rank](Status s) {
    if (!s.is_ok()) spdlog::error("node rank {}: store update failed: {}", rank, s.message());
  });
}

void Leader::persist(const job::Job& job, const std::string& event, const std::string& detail) {
  store::WriteBatch batch;
  batch.update_job(job);
  batch.append_event(job.id, now(), event, detail);
  committer_->submit(std::move(batch), [id = job.id](Status s) {
    if (!s.is_ok()) spdlog::error("job {}: store update failed: {}", id, s.message());
  });
}

void Leader::publish(const job::Job& job) {
  v1::JobEvent event;
  event.set_id(job.id);
  event.set_time_us(now());
  event.set_state(api::to_proto(job.state));
  event.set_exit_code(job.exit_code);
  event.set_reason(job.reason);
  events_.append(std::move(event), job.uid);
}

int Leader::host_cpu_of(Rank rank, int core) const {
  auto it = nodes_.find(rank);
  int host = it == nodes_.end() ? 1 : it->second.host_cpus;
  return core % host;  // the documented emulation mapping: logical core i -> host CPU i mod ncpus
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
    auto node = nodes_.find(part.rank());
    for (v1::Worker& w : *part.mutable_workers()) {
      w.set_executor(executor);
      if (node == nodes_.end()) continue;
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

}  // namespace hpcq::daemon

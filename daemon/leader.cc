#include "daemon/leader.h"

#include <pwd.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <chrono>
#include <algorithm>
#include <filesystem>
#include <limits>

#include "lib/api/job_proto.h"
#include "lib/core/clock.h"
#include "lib/overlay/tree.h"
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

// Which end wins when a job's nodes report different ends: the most severe.
int severity(job::JobState state) {
  switch (state) {
    case job::JobState::kCompleted: return 0;
    case job::JobState::kFailed: return 1;
    case job::JobState::kNodeFail: return 2;
    case job::JobState::kTimeout: return 3;
    case job::JobState::kCancelled: return 4;
    default: return 0;
  }
}

// One node's slice of an allocation, for the pool (adoption and release go
// node by node after a leader restart).
resource::Allocation part_on(const resource::Allocation& allocation, Rank rank) {
  resource::Allocation part;
  part.cpus_per_task = allocation.cpus_per_task;
  for (const auto& a : allocation.nodes) {
    if (a.rank == rank) part.nodes.push_back(a);
  }
  return part;
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
  return p;
}

template <typename T>
std::future<T> ready(T value) {
  std::promise<T> p;
  p.set_value(std::move(value));
  return p.get_future();
}

}  // namespace

Leader::Leader(const ClusterConfig& config) : config_(config) {}

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
  std::error_code ec;
  std::filesystem::create_directories(config_.state_dir, ec);
  if (ec) return internal_error("state dir " + config_.state_dir + ": " + ec.message());

  auto scheduler = sched::Scheduler::create({config_.actions, config_.plugins});
  if (!scheduler.is_ok()) return scheduler.status();
  scheduler_ = std::make_unique<sched::Scheduler>(std::move(scheduler).value());

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
  for (job::Job& job : *jobs) {
    JobEntry entry;
    entry.job = job;
    if (job.state == job::JobState::kPending && !job.held) {
      pending_.insert({job.submit_time, job.id});
    }
    if (job.state == job::JobState::kRunning) {
      running_.insert(job.id);
      for (const auto& part : job.allocation.nodes) {
        entry.running_on.insert(part.rank);
        awaited.insert(part.rank);
      }
    }
    jobs_.emplace(job.id, std::move(entry));
  }
  spdlog::info("store: {} jobs loaded ({} pending, {} running), next job id {}", jobs_.size(),
               pending_.size(), running_.size(), next_job_id_);
  auto stored_nodes = (*store)->load_nodes();
  if (!stored_nodes.is_ok()) return stored_nodes.status();
  std::set<Rank> drained;
  for (const auto& n : *stored_nodes) {
    if (n.state == "drain") drained.insert(n.rank);
  }
  committer_ = std::make_unique<store::GroupCommitter>(std::move(store).value());

  if (config_.ranks.empty()) return invalid_argument("config: no ranks");
  auto keys = overlay::read_key_file(config_.secret_key, /*require_secret=*/true);
  if (!keys.is_ok()) return keys.status();
  if (keys->public_key != config_.ranks[0].public_key) {
    return invalid_argument(config_.secret_key + ": its public key is not rank 0's in " +
                            config_.source);
  }
  auto oc = overlay::OverlayConfig::from_cluster(config_, 0, *keys);
  auto overlay = overlay::Overlay::create(oc, loop_, [this](overlay::Envelope&& e) {
    on_message(std::move(e));
  });
  if (!overlay.is_ok()) return overlay.status();
  overlay_ = std::move(overlay).value();

  for (Rank r = 1; r < config_.ranks.size(); ++r) {
    NodeEntry node;
    node.rank = r;
    node.name = config_.ranks[r].name;
    node.awaited = awaited.count(r) > 0;
    node.drained = drained.count(r) > 0;
    if (node.drained) node.reason = "drained before the leader restarted";
    node.last_seen = now();
    nodes_.emplace(r, std::move(node));
  }
  loop_.run_every(std::chrono::milliseconds(config_.heartbeat_interval_ms),
                  [this] { check_heartbeats(); });
  schedule_soon();
  return Status::ok();
}

void Leader::run() { loop_.run(); }
void Leader::stop() { loop_.stop(); }

// ---- API entry points (any thread) ----

std::future<Result<JobId>> Leader::submit(const Caller& caller, job::JobSpec spec) {
  if (spec.time_limit_s == 0) spec.time_limit_s = config_.default_time_limit_s;
  if (spec.time_limit_s == job::JobSpec::kUnlimited) {
    // As Slurm's --time=UNLIMITED: the most the site allows; none if it sets none.
    spec.time_limit_s = config_.max_time_limit_s > 0 ? config_.max_time_limit_s : 0;
  }
  if (config_.max_time_limit_s > 0 && spec.time_limit_s > config_.max_time_limit_s) {
    return ready<Result<JobId>>(invalid_argument(
        "--time: " + std::to_string(spec.time_limit_s) + " s exceeds the limit of " +
        std::to_string(config_.max_time_limit_s) + " s"));
  }
  Status valid = job::validate(spec);
  if (!valid.is_ok()) return ready<Result<JobId>>(valid);

  auto promise = std::make_shared<std::promise<Result<JobId>>>();
  auto future = promise->get_future();
  job::Job job;
  job.uid = caller.uid;
  job.gid = caller.gid;
  job.user = user_name_of(caller.uid);
  job.spec = std::move(spec);
  job.state = job::JobState::kPending;
  loop_.post([this, promise, job = std::move(job)]() mutable {
    job.id = next_job_id_++;
    job.submit_time = now();
    store::WriteBatch batch;
    batch.insert_job(job);
    batch.append_event(job.id, job.submit_time, "submit", "{}");
    // The answer goes out only after the commit, and after the loop has the
    // job, so that a status call right after the answer finds it.
    committer_->submit(std::move(batch), [this, promise, job = std::move(job)](Status s) mutable {
      if (!s.is_ok()) {
        spdlog::error("job {}: not stored: {}", job.id, s.message());
        promise->set_value(Status(Code::kUnavailable, "the job could not be stored: " + s.message()));
        return;
      }
      loop_.post([this, promise, job = std::move(job)]() mutable {
        JobId id = job.id;
        admit(std::move(job));
        promise->set_value(id);
      });
    });
  });
  return future;
}

std::future<Status> Leader::cancel(const Caller& caller, JobId id) {
  auto promise = std::make_shared<std::promise<Status>>();
  auto future = promise->get_future();
  loop_.post([this, caller, id, promise] {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return promise->set_value(not_found("no job " + std::to_string(id)));
    JobEntry& entry = it->second;
    if (!caller.is_admin() && caller.uid != entry.job.uid) {
      return promise->set_value(permission_denied("job " + std::to_string(id) +
                                                  " belongs to user " + entry.job.user));
    }
    if (job::is_terminal(entry.job.state)) {
      return promise->set_value(failed_precondition("job " + std::to_string(id) + " already ended (" +
                                                    job::state_name(entry.job.state) + ")"));
    }
    if (entry.job.state == job::JobState::kPending) {
      pending_.erase({entry.job.submit_time, id});
      finish_job(entry, job::JobState::kCancelled, "cancelled by " + user_name_of(caller.uid));
      schedule_soon();
    } else {
      entry.cancel_requested = true;
      entry.outcome_reason = "cancelled by " + user_name_of(caller.uid);
      kill_job_parts(entry);
    }
    promise->set_value(Status::ok());
  });
  return future;
}

std::future<Result<v1::Job>> Leader::get_job(const Caller& caller, JobId id) {
  auto promise = std::make_shared<std::promise<Result<v1::Job>>>();
  auto future = promise->get_future();
  loop_.post([this, caller, id, promise] {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return promise->set_value(not_found("no job " + std::to_string(id)));
    if (!caller.is_admin() && caller.uid != it->second.job.uid) {
      return promise->set_value(permission_denied("job " + std::to_string(id) +
                                                  " belongs to another user"));
    }
    promise->set_value(describe(it->second.job));
  });
  return future;
}

std::future<v1::ListJobsResponse> Leader::list_jobs(const Caller& caller,
                                                    v1::ListJobsRequest request) {
  auto promise = std::make_shared<std::promise<v1::ListJobsResponse>>();
  auto future = promise->get_future();
  loop_.post([this, caller, request, promise] {
    v1::ListJobsResponse response;
    const std::set<int> states(request.states().begin(), request.states().end());
    for (const auto& [id, entry] : jobs_) {
      const job::Job& job = entry.job;
      const bool ended = job::is_terminal(job.state);
      if (!request.all() && !request.ended_only() && ended) continue;
      if (request.ended_only() && !ended) continue;
      if (request.has_uid() && job.uid != request.uid()) continue;
      if (!states.empty() && !states.count(api::to_proto(job.state))) continue;
      if (request.ended_after_us() && job.end_time < request.ended_after_us()) continue;
      if (request.ended_before_us() && job.end_time >= request.ended_before_us()) continue;
      // Like Slurm's PrivateData=jobs: users see their own jobs, admins all.
      if (!caller.is_admin() && caller.uid != job.uid) continue;
      *response.add_jobs() = describe(job);
    }
    promise->set_value(std::move(response));
  });
  return future;
}

std::future<v1::ListNodesResponse> Leader::list_nodes() {
  auto promise = std::make_shared<std::promise<v1::ListNodesResponse>>();
  auto future = promise->get_future();
  loop_.post([this, promise] {
    v1::ListNodesResponse response;
    std::map<Rank, int> running;
    for (JobId id : running_) {
      for (const auto& a : jobs_.at(id).job.allocation.nodes) running[a.rank]++;
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
      n->set_cores(node.topology.num_cores());
      n->set_numa(static_cast<int>(node.topology.numa.size()));
      n->set_packages(node.topology.packages);
      n->set_memory_bytes(node.topology.memory_bytes);
      n->set_topology(node.topology.source);
      n->set_host_cpus(node.host_cpus);
      n->set_free_cores(node.in_pool ? pool_.free_cores(rank) : 0);
      n->set_running_jobs(running[rank]);
    }
    promise->set_value(std::move(response));
  });
  return future;
}

std::future<Status> Leader::hold(const Caller& caller, JobId id, bool held) {
  auto promise = std::make_shared<std::promise<Status>>();
  auto future = promise->get_future();
  loop_.post([this, caller, id, held, promise] {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return promise->set_value(not_found("no job " + std::to_string(id)));
    job::Job& job = it->second.job;
    if (!caller.is_admin() && caller.uid != job.uid) {
      return promise->set_value(permission_denied("job " + std::to_string(id) +
                                                  " belongs to user " + job.user));
    }
    if (job.state != job::JobState::kPending) {
      return promise->set_value(failed_precondition(
          "job " + std::to_string(id) + " is " + job::state_name(job.state) +
          ": only pending jobs can be " + (held ? "held" : "released")));
    }
    if (job.held == held) return promise->set_value(Status::ok());
    job.held = held;
    if (held) {
      pending_.erase({job.submit_time, id});
      job.reason = "held by " + user_name_of(caller.uid);
    } else {
      pending_.insert({job.submit_time, id});
      job.reason.clear();
      schedule_soon();
    }
    persist(job, held ? "hold" : "release", "{}");
    publish(job);
    promise->set_value(Status::ok());
  });
  return future;
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
    node.reason = drained ? (reason.empty() ? "drained by " + user_name_of(caller.uid) : reason) : "";
    if (node.in_pool) pool_.set_schedulable(node.rank, schedulable(node));
    persist_node(node);
    spdlog::info("node {}: {}{}", name, drained ? "drained" : "resumed",
                 drained ? " (" + node.reason + ")" : "");
    if (!drained) schedule_soon();
    promise->set_value(Status::ok());
  });
  return future;
}

// ---- the loop thread ----

void Leader::admit(job::Job job) {
  JobId id = job.id;
  pending_.insert({job.submit_time, id});
  JobEntry entry;
  entry.job = std::move(job);
  auto [it, inserted] = jobs_.emplace(id, std::move(entry));
  publish(it->second.job);
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

void Leader::run_cycle() {
  if (pending_.empty()) return;
  // Nothing can start while no node has a free core: a queue of 100k jobs
  // behind a full or drained cluster then costs nothing per submission.
  bool room = std::any_of(pool_.nodes().begin(), pool_.nodes().end(),
                          [](const resource::NodeState& n) { return n.schedulable() && n.free_cores() > 0; });
  if (!room) return;
  sched::Snapshot snapshot;
  snapshot.now = now();
  snapshot.pool = &pool_;
  // A cycle looks at the first queue_depth pending jobs (as Slurm's
  // default_queue_depth), so its cost does not grow with the queue.
  int depth = 0;
  for (const auto& [submit_time, id] : pending_) {
    (void)submit_time;
    if (depth++ == config_.queue_depth) break;
    const job::Job& job = jobs_.at(id).job;
    snapshot.queue.push_back(pending_of(job));
  }
  for (JobId id : running_) {
    const job::Job& job = jobs_.at(id).job;
    // A job without a limit (0 after submit) is expected to run for ever.
    TimeUs end = job.spec.time_limit_s > 0 ? job.start_time + job.spec.time_limit_s * kUsPerSecond
                                           : std::numeric_limits<TimeUs>::max();
    snapshot.running.push_back(sched::running_from(pending_of(job), job.allocation, job.start_time, end));
  }
  sched::Decisions decisions = scheduler_->cycle(snapshot);
  for (auto& decision : decisions.decisions) {
    if (auto* start = std::get_if<sched::Start>(&decision)) {
      auto it = jobs_.find(start->job);
      if (it == jobs_.end() || it->second.job.state != job::JobState::kPending) continue;
      start_job(it->second, std::move(start->allocation));
    }
  }
}

void Leader::start_job(JobEntry& entry, resource::Allocation allocation) {
  job::Job& job = entry.job;
  Status taken = pool_.allocate(allocation);
  if (!taken.is_ok()) {
    // The scheduler proposed cores that are not free: a bug, never a double allocation.
    spdlog::error("job {}: scheduler decision refused: {}", job.id, taken.message());
    return;
  }
  pending_.erase({job.submit_time, job.id});
  running_.insert(job.id);
  job.state = job::JobState::kRunning;
  job.start_time = now();
  job.allocation = std::move(allocation);
  job.reason.clear();
  entry.outcome = job::JobState::kCompleted;
  entry.outcome_reason.clear();
  entry.cancel_requested = false;
  entry.kill_sent = false;
  entry.running_on.clear();
  entry.held_on.clear();
  for (const auto& a : job.allocation.nodes) entry.held_on.insert(a.rank);

  std::string nodelist;
  for (const auto& a : job.allocation.nodes) {
    if (!nodelist.empty()) nodelist += ",";
    nodelist += a.node;
  }
  overlay::Launch launch;
  launch.set_job_id(job.id);
  launch.set_uid(job.uid);
  launch.set_gid(job.gid);
  launch.set_user(job.user);
  for (const auto& a : job.spec.argv) launch.add_argv(a);
  launch.set_script(job.spec.script);
  auto& env = *launch.mutable_env();
  for (const auto& [k, v] : job.spec.env) env[k] = v;
  env["HPCQ_JOB_ID"] = std::to_string(job.id);
  env["HPCQ_JOB_NAME"] = job.spec.name;
  env["HPCQ_NODELIST"] = nodelist;
  env["HPCQ_NNODES"] = std::to_string(job.allocation.nodes.size());
  env["HPCQ_NTASKS"] = std::to_string(job.spec.request.ntasks);
  env["HPCQ_CPUS_PER_TASK"] = std::to_string(job.spec.request.cpus_per_task);
  env["HPCQ_SUBMIT_DIR"] = job.spec.cwd;
  launch.set_cwd(job.spec.cwd);
  launch.set_stdout_path(job::expand_output_path(job.spec.output, job.id, job.spec.cwd));
  launch.set_stderr_path(job::expand_output_path(
      job.spec.error.empty() ? job.spec.output : job.spec.error, job.id, job.spec.cwd));
  for (const auto& a : job.allocation.nodes) {
    overlay::NodeAlloc* n = launch.add_allocation();
    n->set_rank(a.rank);
    n->set_node(a.node);
    for (int c : a.cores) n->add_cores(c);
    for (int m : a.numa) n->add_numa(m);
    n->set_memory_bytes(a.memory_bytes);
    n->set_ntasks(a.ntasks);
    n->set_first_task(a.first_task);
  }
  launch.set_cpus_per_task(job.allocation.cpus_per_task);
  launch.set_time_limit_s(job.spec.time_limit_s);
  launch.set_ntasks(job.spec.request.ntasks);
  launch.set_attempt(static_cast<uint32_t>(job.requeue_count));

  persist(job, "start", "{}");
  publish(job);
  for (const auto& a : job.allocation.nodes) {
    entry.running_on.insert(a.rank);
    overlay::Envelope envelope;
    envelope.set_dst(a.rank);
    *envelope.mutable_launch() = launch;
    Status sent = overlay_->send(std::move(envelope));
    if (!sent.is_ok()) {
      spdlog::warn("job {}: launch on {} failed: {}", job.id, a.node, sent.message());
      auto node = nodes_.find(a.rank);
      if (node != nodes_.end()) node_down(node->second, "unreachable: " + sent.message());
      return;  // node_down ended or requeued the job
    }
  }
  spdlog::info("job {}: started on {}", job.id, nodelist);
}

void Leader::on_message(overlay::Envelope&& envelope) {
  Rank rank = envelope.src();
  auto node = nodes_.find(rank);
  if (node == nodes_.end()) {
    spdlog::warn("overlay: message from unknown rank {}", rank);
    return;
  }
  switch (envelope.body_case()) {
    case overlay::Envelope::kHello:
      on_hello(rank, envelope.hello());
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
    // The agent restarted while the leader still counted on it: what it ran
    // is gone with it.
    node_down(node, "its agent restarted");
  }
  node.incarnation = hello.incarnation();
  resource::NodeTopology topo;
  topo.packages = hello.topology().packages();
  topo.memory_bytes = hello.topology().memory_bytes();
  topo.source = hello.topology().source();
  for (const auto& n : hello.topology().numa()) {
    topo.numa.push_back({n.id(), n.package(), n.memory_bytes()});
  }
  for (const auto& c : hello.topology().cores()) {
    topo.cores.push_back({c.id(), c.package(), c.numa(), {c.pus().begin(), c.pus().end()}});
  }
  if (node.in_pool) {
    // A node that comes back after being declared down: its jobs were
    // already ended or requeued, and nothing of the pool is in use there.
    pool_.remove_node(rank);
    node.in_pool = false;
  }
  node.topology = std::move(topo);
  node.host_cpus = std::max(1, hello.host_cpus());
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
  if (!node.drained) node.reason.clear();
  adopt_reported_jobs(node, hello);
  pool_.set_schedulable(rank, schedulable(node));
  (void)overlay_->send(std::move(welcome));
  persist_node(node);
  spdlog::info("node {} (rank {}) is up: {} cores, {} NUMA domains ({})", node.name, rank,
               node.topology.num_cores(), node.topology.numa.size(), node.topology.source);
  schedule_soon();
}

void Leader::adopt_reported_jobs(NodeEntry& node, const overlay::Hello& hello) {
  const Rank rank = node.rank;
  // Ends that happened while the leader was away (or whose report was lost).
  for (const overlay::JobUpdate& update : hello.finished()) on_job_update(rank, update);
  std::set<JobId> reported;
  for (const overlay::RunningJob& r : hello.running()) {
    auto it = jobs_.find(r.job_id());
    bool expected = it != jobs_.end() && it->second.job.state == job::JobState::kRunning &&
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
    Status taken = pool_.allocate(part_on(entry.job.allocation, rank));
    if (!taken.is_ok()) {
      spdlog::error("job {}: cannot adopt its part on {}: {}", r.job_id(), node.name, taken.message());
      continue;
    }
    entry.held_on.insert(rank);
    spdlog::info("job {}: adopted on {} (still running)", r.job_id(), node.name);
  }
  // Jobs the leader expected on this node that its agent neither runs nor
  // reported ended: lost (the agent restarted, or the launch never arrived).
  const std::vector<JobId> running(running_.begin(), running_.end());
  for (JobId id : running) {
    JobEntry& entry = jobs_.at(id);
    if (!entry.running_on.count(rank) || reported.count(id)) continue;
    lose_part(entry, rank, "its part on " + node.name + " was lost");
  }
}

void Leader::on_job_update(Rank rank, const overlay::JobUpdate& update) {
  if (update.kind() != overlay::JobUpdate::STARTED) {
    // Recorded (or stale): either way the agent may forget it.
    overlay::Envelope ack;
    ack.set_dst(rank);
    ack.mutable_job_update_ack()->set_job_id(update.job_id());
    ack.mutable_job_update_ack()->set_attempt(update.attempt());
    (void)overlay_->send(std::move(ack));
  }
  auto it = jobs_.find(update.job_id());
  if (it == jobs_.end()) return;
  JobEntry& entry = it->second;
  if (entry.job.state != job::JobState::kRunning ||
      update.attempt() != static_cast<uint32_t>(entry.job.requeue_count) ||
      !entry.running_on.count(rank)) {
    return;  // stale: from an earlier attempt, or the job already ended
  }
  job::JobState end;
  switch (update.kind()) {
    case overlay::JobUpdate::STARTED:
      return;
    case overlay::JobUpdate::COMPLETED: end = job::JobState::kCompleted; break;
    case overlay::JobUpdate::FAILED: end = job::JobState::kFailed; break;
    case overlay::JobUpdate::CANCELLED: end = job::JobState::kCancelled; break;
    case overlay::JobUpdate::TIMEOUT: end = job::JobState::kTimeout; break;
    default: return;
  }
  entry.running_on.erase(rank);
  entry.job.exit_code = std::max(entry.job.exit_code, update.exit_code());
  if (severity(end) > severity(entry.outcome)) {
    entry.outcome = end;
    entry.outcome_reason = update.reason().empty() ? "" : nodes_.at(rank).name + ": " + update.reason();
  }
  // One failed part fails the job: the other nodes' tasks are killed rather
  // than left to wait for peers that are gone.
  if (end != job::JobState::kCompleted && !entry.running_on.empty()) kill_job_parts(entry);
  if (!entry.running_on.empty()) return;
  job::JobState final_state = entry.cancel_requested ? job::JobState::kCancelled : entry.outcome;
  finish_job(entry, final_state, entry.outcome_reason, update.time_us());
  schedule_soon();
}

void Leader::kill_job_parts(JobEntry& entry) {
  if (entry.kill_sent) return;
  entry.kill_sent = true;
  for (Rank rank : entry.running_on) {
    overlay::Envelope kill;
    kill.set_dst(rank);
    kill.mutable_kill()->set_job_id(entry.job.id);
    kill.mutable_kill()->set_attempt(static_cast<uint32_t>(entry.job.requeue_count));
    Status sent = overlay_->send(std::move(kill));
    if (!sent.is_ok()) spdlog::warn("job {}: kill on rank {}: {}", entry.job.id, rank, sent.message());
  }
}

// The job's part on `rank` is gone (node down, or not found after a leader
// restart): the rest is killed and the job requeued (--requeue) or failed.
void Leader::lose_part(JobEntry& entry, Rank rank, const std::string& why) {
  entry.running_on.erase(rank);
  kill_job_parts(entry);
  if (entry.job.spec.requeue && !entry.cancel_requested) {
    requeue_job(entry, why);
  } else {
    finish_job(entry, job::JobState::kNodeFail, why);
  }
}

void Leader::release_held(JobEntry& entry) {
  for (Rank rank : entry.held_on) {
    Status released = pool_.release(part_on(entry.job.allocation, rank));
    if (!released.is_ok()) spdlog::error("job {}: release: {}", entry.job.id, released.message());
  }
  entry.held_on.clear();
  running_.erase(entry.job.id);
}

// end_time: when the job ended on its last node (the agent's clock), or 0 for now.
void Leader::finish_job(JobEntry& entry, job::JobState state, const std::string& reason,
                        TimeUs end_time) {
  job::Job& job = entry.job;
  if (job.state == job::JobState::kRunning) release_held(entry);
  job.state = state;
  job.end_time = end_time > 0 ? end_time : now();
  job.reason = reason;
  if (state == job::JobState::kTimeout && job.reason.empty()) job.reason = "time limit reached";
  entry.running_on.clear();
  persist(job, job::state_name(state), "{}");
  publish(job);
  spdlog::info("job {}: {} (exit code {}){}", job.id, job::state_name(state), job.exit_code,
               reason.empty() ? "" : ": " + reason);
}

void Leader::requeue_job(JobEntry& entry, const std::string& reason) {
  job::Job& job = entry.job;
  release_held(entry);
  job.state = job::JobState::kPending;
  job.allocation = {};
  job.start_time = 0;
  job.exit_code = 0;
  job.requeue_count++;
  job.reason = "requeued: " + reason;
  entry.running_on.clear();
  pending_.insert({job.submit_time, job.id});
  persist(job, "requeue", "{}");
  publish(job);
  spdlog::info("job {}: requeued ({})", job.id, reason);
}

bool Leader::schedulable(const NodeEntry& node) const {
  return node.state == NodeState::kUp && !node.unresponsive && !node.drained;
}

void Leader::heard_from(NodeEntry& node) {
  node.last_seen = now();
  if (!node.unresponsive) return;
  node.unresponsive = false;
  pool_.set_schedulable(node.rank, schedulable(node));
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
    bool watched = node.state == NodeState::kUp || (node.state == NodeState::kUnknown && node.awaited);
    if (!watched) continue;
    if (node.last_seen < down_limit) {
      node_down(node, "no heartbeat for " + std::to_string(config_.node_down_after_ms) + " ms");
    } else if (node.state == NodeState::kUp && !node.unresponsive && node.last_seen < quiet_limit) {
      node.unresponsive = true;
      pool_.set_schedulable(rank, false);
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
  pool_.set_schedulable(node.rank, false);
  // Copied: finish_job and requeue_job take jobs out of running_.
  const std::vector<JobId> running(running_.begin(), running_.end());
  for (JobId id : running) {
    JobEntry& entry = jobs_.at(id);
    if (!entry.running_on.count(node.rank)) continue;
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
  batch.upsert_node(node.rank, node.name, state, "{}", now());
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
  return api::to_proto(job, [this](Rank r, int c) { return host_cpu_of(r, c); });
}

}  // namespace hpcq::daemon

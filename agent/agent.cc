#include "agent/agent.h"

#include <sched.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>

#include "agent/executor/output_credit.h"
#include "agent/executor/process_executor.h"
#include "agent/executor/test_executor.h"
#include "lib/core/build_info.h"
#include "lib/core/clock.h"
#include "lib/core/protocol_version.h"
#include "lib/overlay/messages.h"
#include "lib/resource/hwloc_import.h"

namespace hpcq::agent {
namespace {

// Warns when one piece of the loop's work held the loop long enough to miss
// heartbeats: what held it is the first thing to look for when a node is
// declared down while its agent runs (a guest run of g0003 saw the loop
// held about 30 s while a batch job started after a restore).
class SlowWork {
 public:
  explicit SlowWork(std::string what)
      : what_(std::move(what)), start_(std::chrono::steady_clock::now()) {}
  ~SlowWork() {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start_)
                        .count();
    if (ms >= 1000) spdlog::warn("agent: {} held the loop for {} ms", what_, ms);
  }
  SlowWork(const SlowWork&) = delete;
  SlowWork& operator=(const SlowWork&) = delete;

 private:
  std::string what_;
  std::chrono::steady_clock::time_point start_;
};

int count_host_numa_nodes() {
  int n = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/devices/system/node", ec)) {
    const std::string name = entry.path().filename();
    if (name.rfind("node", 0) == 0 && name.size() > 4 && std::isdigit(name[4])) ++n;
  }
  return std::max(n, 1);
}

// The agent's cgroups live under hpcq/<instance>/. Several agents (and
// several `hpcq start` clusters, whose job ids all start at 1) may share a
// machine, so the name comes from the agent's state directory, which is its
// own and stays the same across restarts (so stale cgroups are found again).
std::string cgroup_instance_name(const std::string& state_dir) {
  std::string path = std::filesystem::absolute(state_dir).lexically_normal().string();
  std::string name;
  for (char c : path) {
    if (c == '/') {
      if (!name.empty() && name.back() != '-') name += '-';
    } else {
      name += std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' ? c : '_';
    }
  }
  while (!name.empty() && name.back() == '-') name.pop_back();
  return name.empty() ? "root" : name;
}

}  // namespace

Agent::Agent(const ClusterConfig& config, AgentOptions options)
    : config_(config),
      options_(std::move(options)),
      lease_(TimeUs{config_.fence_after_ms()} * 1000) {}

Agent::~Agent() {
  overlay_.reset();
  if (!executor_) return;
  if (end_jobs_on_exit_) {
    executor_->shutdown();
  } else {
    executor_->detach();
  }
}

Result<std::unique_ptr<Agent>> Agent::create(const ClusterConfig& config, AgentOptions options) {
  std::unique_ptr<Agent> agent(new Agent(config, std::move(options)));
  HPCQ_RETURN_IF_ERROR(agent->start());
  return agent;
}

Result<GpuDevices> Agent::gpu_devices() const {
  if (topology_.num_gpus() == 0) return GpuDevices{};
  if (!config_.agent_gpu_devices.empty()) {
    return named_gpu_devices(config_.agent_gpu_devices, topology_.num_gpus());
  }
  GpuDevices found = host_.host_topology ? discover_gpu_devices(topology_) : GpuDevices{};
  if (found.empty()) {
    spdlog::warn(
        "agent: the device files of this node's {} GPU(s) are unknown: tasks are not kept "
        "from each other's GPUs (name them with [agent] gpu_devices)",
        topology_.num_gpus());
  }
  return found;
}

Status Agent::start() {
  const Rank rank = options_.rank;
  if (rank == 0 || rank >= config_.ranks.size()) {
    return invalid_argument("--rank " + std::to_string(rank) + ": agents are ranks 1.." +
                            std::to_string(config_.ranks.size() - 1) + " in " + config_.source);
  }
  const RankConfig& me = config_.ranks[rank];
  std::string topology_spec = options_.topology.empty() ? me.topology : options_.topology;
  auto topology = resource::discover_topology(topology_spec);
  if (!topology.is_ok()) return topology.status();
  topology_ = std::move(topology).value();
  host_.topology = &topology_;
  host_.host_topology = topology_spec == "host";

  cpu_set_t set;
  CPU_ZERO(&set);
  host_.host_cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  host_.host_cpus = std::max(host_.host_cpus, 1);
  host_.host_numa = count_host_numa_nodes();
  host_.fold_start = static_cast<int>(rank % static_cast<Rank>(host_.host_cpus));
  host_.shared_host = config_.agent_shared_host;

  std::error_code ec;
  std::filesystem::create_directories(options_.state_dir, ec);
  if (ec) return internal_error("state dir " + options_.state_dir + ": " + ec.message());
  auto journal = EndJournal::open(options_.state_dir + "/ends", "end journal", /*sync=*/true);
  if (!journal.is_ok()) return journal.status();
  unacknowledged_ = std::move(journal).value();
  if (unacknowledged_->size() > 0) {
    spdlog::info("agent: {} job ends from an earlier run await the leader",
                 unacknowledged_->size());
  }

  auto parts = PartJournal::open(options_.state_dir + "/parts", "part journal", /*sync=*/false);
  if (!parts.is_ok()) return parts.status();
  part_journal_ = std::move(parts).value();
  output_spool_ = std::make_unique<OutputSpool>(options_.state_dir + "/output");
  HPCQ_RETURN_IF_ERROR(start_executor());
  take_back_parts();

  auto keys = overlay::read_key_file(options_.secret_key, /*require_secret=*/true);
  if (!keys.is_ok()) return keys.status();
  auto oc = overlay::OverlayConfig::from_cluster(config_, rank, *keys);
  auto overlay = overlay::Overlay::create(
      oc, loop_, [this](overlay::Envelope&& e) { on_message(std::move(e)); });
  if (!overlay.is_ok()) return overlay.status();
  overlay_ = std::move(overlay).value();
  // After a detour around a lost parent (or back), announce ourselves on the
  // new path: the leader answers, which also tells the overlay the path works.
  overlay_->on_reroute([this](Rank) { on_reroute(); });
  MpiRelay::Options relay;
  relay.rank = rank;
  relay.fanout = config_.fanout;
  relay.max_kvs_bytes = static_cast<std::size_t>(config_.pmi_max_kvs_bytes);
  relay.repeat_after = 2 * static_cast<TimeUs>(config_.heartbeat_interval_ms) * 1000;
  mpi_ = std::make_unique<MpiRelay>(relay, *overlay_, *executor_, parts_);
  overlay_->on_relay([this](overlay::Envelope& e) { return mpi_->on_relay(e, wall_clock_now()); });
  if (!options_.socket.empty()) {
    forwarder_ = std::make_unique<CallForwarder>(
        [this](std::function<void()> work) { loop_.post(std::move(work)); },
        [this](overlay::Envelope e) { return overlay_->send(std::move(e)).is_ok(); },
        static_cast<std::size_t>(config_.api_max_message_bytes));
    HPCQ_RETURN_IF_ERROR(forwarder_->start(options_.socket));
  }

  std::random_device random;
  // A node without a working CRIU still runs jobs; it says so in its Hello.
  checkpoint_ = executor_->checkpoint_capability();
  if (!checkpoint_.is_ok()) spdlog::info("agent: cannot checkpoint: {}", checkpoint_.message());
  checkpoint_others_ = executor_->checkpoint_of_other_users();
  incarnation_ = (static_cast<std::uint64_t>(random()) << 32) | random();
  // The output the previous agent sent lately of the jobs taken back.
  for (const OutputLog::Chunk& chunk : output_log_.kept()) send_output_chunk(chunk);
  send_hello();
  start_timers();
  spdlog::info("agent {} (rank {}): {} cores, {} NUMA domains ({}); host has {} CPUs", me.name,
               rank, topology_.num_cores(), topology_.numa.size(), topology_.source,
               host_.host_cpus);
  return Status::ok();
}

Status Agent::start_executor() {
  if (options_.executor == "test") {
    auto executor = TestExecutor::create();
    if (!executor.is_ok()) return executor.status();
    executor_ = std::move(executor).value();
  } else if (options_.executor == "process") {
    ExecutorConfig ec_config;
    ec_config.instance = cgroup_instance_name(options_.state_dir);
    ec_config.state_dir = options_.run_dir.empty() ? options_.state_dir : options_.run_dir;
    // Beside the job directories: where the shells can read it.
    ec_config.leader_lease = ec_config.state_dir + "/leader-lease";
    ec_config.job_shell_path = options_.job_shell;
    ec_config.container_shell_path =
        (std::filesystem::path(options_.job_shell).parent_path() / "hpcq-container-shell").string();
    ec_config.kill_grace = config_.kill_grace_s * kUsPerSecond;
    ec_config.pids_per_core = config_.pids_per_core;
    auto gpus = gpu_devices();
    if (!gpus.is_ok()) return gpus.status();
    ec_config.gpu_devices = std::move(gpus).value();
    ec_config.private_tmp = config_.agent_private_tmp;
    ec_config.pmi_max_kvs_bytes = config_.pmi_max_kvs_bytes;
    ec_config.take_back_shells = true;
    auto executor = ProcessExecutor::create(ec_config);
    if (!executor.is_ok()) return executor.status();
    executor_ = std::move(executor).value();
    auto lease_file = LeaseFile::open(ec_config.leader_lease);
    if (!lease_file.is_ok()) return lease_file.status();
    lease_file_.emplace(std::move(lease_file).value());
  } else {
    return invalid_argument("--executor: unknown executor '" + options_.executor +
                            "' (process or test)");
  }
  return Status::ok();
}

void Agent::start_timers() {
  loop_.run_every(std::chrono::milliseconds(config_.heartbeat_interval_ms), [this] {
    const SlowWork slow("the heartbeat timer");
    if (!welcomed_) send_hello();  // the leader may not be up yet
    send_heartbeat();
    if (lease_.expired(boot_clock_us()) && parts_.any_running() && !lease_lost_logged_) {
      spdlog::warn("agent: no answer from the leader for {} ms: this node's jobs are killed",
                   config_.fence_after_ms());
    }
    lease_lost_logged_ = lease_.expired(boot_clock_us());
    repeat_unacknowledged_ends();
    mpi_->repeat_unanswered(wall_clock_now());
  });
  loop_.run_every(std::chrono::milliseconds(200), [this] {
    const SlowWork slow("the time limits and job ends");
    executor_->check_timeouts(wall_clock_now());
    on_job_exits();
  });
  if (!config_.agent_health_check.empty()) {
    run_health_check();  // at start too, as slurmd does
    loop_.run_every(std::chrono::seconds(config_.agent_health_check_interval_s),
                    [this] { run_health_check(); });
  }
}

void Agent::run() { loop_.run(); }

void Agent::stop(bool end_jobs) {
  if (end_jobs) end_jobs_on_exit_ = true;
  loop_.stop();
}

void Agent::on_reroute() {
  if (forwarder_) forwarder_->on_reroute();
  // Output before the Hello: the Hello may carry its job's end.
  for (const OutputLog::Chunk& chunk : output_log_.kept()) send_output_chunk(chunk);
  send_hello();
}

void Agent::renew_lease(TimeUs sent_at) {
  if (!lease_.renew(sent_at) || !lease_file_) return;
  Status written = lease_file_->write(lease_.deadline());
  if (!written.is_ok()) spdlog::warn("agent: {}", written.message());
}

void Agent::send_hello() {
  if (hello_unanswered_since_ == 0) hello_unanswered_since_ = boot_clock_us();
  overlay::Envelope envelope;
  envelope.set_dst(0);
  overlay::Hello* hello = envelope.mutable_hello();
  hello->set_name(config_.ranks[options_.rank].name);
  overlay::topology_to_message(topology_, hello->mutable_topology());
  hello->set_incarnation(incarnation_);
  hello->set_protocol_version(kProtocolVersion);
  hello->set_agent_version(version_with_commit());
  hello->set_checkpoint_capable(checkpoint_.is_ok());
  hello->set_checkpoint_reason(checkpoint_.message());
  hello->set_checkpoint_other_users(checkpoint_others_.is_ok());
  hello->set_checkpoint_other_users_reason(checkpoint_others_.message());
  hello->set_host_cpus(host_.host_cpus);
  hello->set_host_numa(host_.host_numa);
  for (int cpu : host_.first_cpu_of_each_core()) hello->add_core_host_cpus(cpu);
  for (overlay::RunningJob& running : parts_.running_jobs()) {
    *hello->add_running() = std::move(running);
  }
  for (const overlay::JobUpdate& update : unacknowledged_->entries()) {
    *hello->add_finished() = update;
  }
  // The latest checkpoint answers: a leader that restarted meanwhile may
  // have missed one (a stopped part is neither running nor reported ended,
  // so nothing else would tell it).
  for (const overlay::CheckpointDone& done : parts_.checkpoint_answers()) {
    *hello->add_checkpoints_done() = done;
  }
  Status s = overlay_->send(std::move(envelope));
  if (!s.is_ok()) spdlog::debug("hello: {}", s.message());
}

// An end whose ack has not come within two heartbeats is sent again: the
// message or its ack may have been lost on a link that broke meanwhile. The
// leader records an end once and acks every copy.
void Agent::repeat_unacknowledged_ends() {
  const TimeUs now = wall_clock_now();
  const TimeUs after = 2 * static_cast<TimeUs>(config_.heartbeat_interval_ms) * 1000;
  for (const overlay::JobUpdate& update : unacknowledged_->entries()) {
    TimeUs& sent = end_sent_at_[{update.job_id(), update.step()}];
    if (sent == 0) sent = now;  // from an earlier run: sent with the Hello
    if (now - sent < after) continue;
    overlay::Envelope envelope;
    envelope.set_dst(0);
    *envelope.mutable_job_update() = update;
    (void)overlay_->send(std::move(envelope));
    sent = now;
  }
  // Forget the times of ends that were acknowledged.
  if (end_sent_at_.size() > unacknowledged_->size()) {
    std::set<std::pair<JobId, std::uint32_t>> pending;
    for (const auto& update : unacknowledged_->entries()) {
      pending.emplace(update.job_id(), update.step());
    }
    std::erase_if(end_sent_at_, [&](const auto& e) { return !pending.count(e.first); });
  }
}

void Agent::send_heartbeat() {
  overlay::Envelope envelope;
  envelope.set_dst(0);
  envelope.mutable_heartbeat()->set_time_us(wall_clock_now());
  envelope.mutable_heartbeat()->set_sent_at_us(boot_clock_us());
  Status s = overlay_->send(std::move(envelope));
  if (!s.is_ok()) spdlog::debug("heartbeat: {}", s.message());
  repeat_unacknowledged_checks();
}

void Agent::on_message(overlay::Envelope&& envelope) {
  const SlowWork slow("a " + overlay::body_name(envelope) + " message");
  switch (envelope.body_case()) {
    case overlay::Envelope::kWelcome:
      if (const ProtocolCheck check = check_leader_protocol(envelope.welcome().protocol_version());
          !envelope.welcome().send_hello() && !check.accepted()) {
        spdlog::error("agent: {}", check.reason);
        exit_code_ = 1;
        stop();
        break;
      }
      if (envelope.welcome().send_hello()) {
        // The leader restarted: the output it held is gone, and what was
        // in flight to it too; what is kept goes again.
        welcomed_ = false;
        on_reroute();
      } else {
        if (!welcomed_) spdlog::info("agent: joined the leader");
        welcomed_ = true;
        // The leader heard the oldest Hello not yet answered, or a later one.
        renew_lease(hello_unanswered_since_);
        hello_unanswered_since_ = 0;
      }
      break;
    case overlay::Envelope::kHeartbeat:
      if (welcomed_) renew_lease(envelope.heartbeat().sent_at_us());
      break;
    case overlay::Envelope::kLaunch: on_launch(envelope.launch()); break;
    case overlay::Envelope::kKill: on_kill(envelope.kill()); break;
    case overlay::Envelope::kCheckpoint: on_checkpoint(envelope.checkpoint()); break;
    case overlay::Envelope::kResize: on_resize(envelope.resize()); break;
    case overlay::Envelope::kSignal: on_signal(envelope.signal()); break;
    case overlay::Envelope::kSetTimeLimit: on_set_time_limit(envelope.set_time_limit()); break;
    case overlay::Envelope::kInput: on_input(envelope.input()); break;
    case overlay::Envelope::kOutputCredit: on_output_credit(envelope.output_credit()); break;
    case overlay::Envelope::kUsageQuery: on_usage_query(envelope.usage_query()); break;
    case overlay::Envelope::kPmiFenceDone:
      mpi_->on_fence_done(envelope.dst(), envelope.pmi_fence_done());
      break;
    case overlay::Envelope::kPmiModexRequest:
      mpi_->on_modex_request(envelope.src(), envelope.pmi_modex_request());
      break;
    case overlay::Envelope::kPmiModexReply: mpi_->on_modex_reply(envelope.pmi_modex_reply()); break;
    case overlay::Envelope::kForwardedReply:
      if (forwarder_) forwarder_->on_reply(envelope.forwarded_reply());
      break;
    case overlay::Envelope::kNodeCheckAck:
      unacknowledged_checks_.erase(envelope.node_check_ack().seq());
      break;
    case overlay::Envelope::kJobUpdateAck: {
      const overlay::JobUpdateAck& ack = envelope.job_update_ack();
      unacknowledged_->ack(ack.job_id(), ack.attempt(), ack.step());
      output_log_.forget(ack.job_id(), ack.attempt(), ack.step());
      output_spool_->forget(ack.job_id(), ack.step());
      break;
    }
    default:
      spdlog::warn("agent: unexpected message {} from rank {}",
                   static_cast<int>(envelope.body_case()), envelope.src());
  }
}

void Agent::on_checkpoint(const overlay::Checkpoint& request) {
  overlay::Envelope envelope;
  envelope.set_dst(0);
  overlay::CheckpointDone* done = envelope.mutable_checkpoint_done();
  done->set_job_id(request.job_id());
  done->set_attempt(request.attempt());
  done->set_image_dir(request.image_dir());
  if (!parts_.runs(request.job_id(), request.attempt())) {
    done->set_reason("the job does not run here");
  } else {
    // CRIU runs beside the loop (a fraction of a second to seconds per GB,
    // bench/checkpoint_cost.py): heartbeats and other jobs go on; the answer
    // goes out when the executor says it is done (on_job_exits).
    Status begun = executor_->begin_checkpoint(
        request.job_id(), request.image_dir(),
        request.stop() ? CheckpointThen::kStop : CheckpointThen::kContinue);
    if (begun.is_ok()) {
      parts_.checkpoint_began(request);
      sync_wait_fds();  // the executor's "dump done" fd
      return;
    }
    done->set_reason(begun.message());
  }
  send_checkpoint_done(request, std::move(envelope));
}

void Agent::send_checkpoint_done(const overlay::Checkpoint& request, overlay::Envelope envelope) {
  const overlay::CheckpointDone& done = envelope.checkpoint_done();
  spdlog::info("job {}: checkpoint into {}: {}", request.job_id(), request.image_dir(),
               done.ok() ? "done" : done.reason());
  parts_.checkpoint_answered(done);
  Status sent = overlay_->send(std::move(envelope));
  if (!sent.is_ok())
    spdlog::warn("job {}: checkpoint answer: {}", request.job_id(), sent.message());
}

void Agent::on_checkpoints_done() {
  for (const CheckpointOutcome& outcome : executor_->finished_checkpoints()) {
    std::optional<overlay::Checkpoint> request = parts_.checkpoint_ended(outcome.id);
    if (!request) continue;
    overlay::Envelope envelope;
    envelope.set_dst(0);
    overlay::CheckpointDone* done = envelope.mutable_checkpoint_done();
    done->set_job_id(outcome.id);
    done->set_attempt(request->attempt());
    done->set_image_dir(request->image_dir());
    if (!outcome.status.is_ok()) {
      done->set_reason(outcome.status.message());
    } else {
      done->set_ok(true);
      done->set_stopped(outcome.result.stopped);
      done->set_image_bytes(outcome.result.image_bytes);
      done->set_dump_seconds(outcome.result.dump_seconds);
      if (outcome.result.stopped) forget(outcome.id);
    }
    send_checkpoint_done(*request, std::move(envelope));
  }
}

void Agent::on_resize(const overlay::Resize& request) {
  const JobId id = request.job_id();
  auto files = elastic_.find(id);
  if (!parts_.runs(id, request.attempt()) || files == elastic_.end()) {
    answer_resize(request, overlay::ResizeDone::FAILED, "the job's first part does not run here",
                  0);
    return;
  }
  spdlog::info("job {}: {} to {} nodes: telling the application", id,
               request.kind() == overlay::Resize::SHRINK ? "shrink" : "expand",
               request.allocation_size());
  // Copied: the answer may come long after this message is gone.
  files->second->notify(
      request.kind(), request.allocation(),
      std::chrono::milliseconds(std::max<std::int64_t>(request.timeout_ms(), 1)),
      [this, request](overlay::ResizeDone::Outcome outcome, const std::string& reason,
                      double seconds) { answer_resize(request, outcome, reason, seconds); },
      request.forced());
  // Only the process that opened the resize socket asked for notices: a
  // signal sent to the others could kill them (SIGUSR1's default action).
  const pid_t application = files->second->application_pid();
  if (config_.resize_signal != 0 && application > 0 &&
      kill(application, config_.resize_signal) != 0) {
    spdlog::warn("job {}: resize signal to {}: {}", id, application, strerror(errno));
  }
}

void Agent::answer_resize(const overlay::Resize& request, overlay::ResizeDone::Outcome outcome,
                          const std::string& reason, double answer_seconds) {
  overlay::Envelope envelope;
  envelope.set_dst(0);
  overlay::ResizeDone* done = envelope.mutable_resize_done();
  done->set_job_id(request.job_id());
  done->set_attempt(request.attempt());
  done->set_seq(request.seq());
  done->set_outcome(outcome);
  done->set_reason(reason);
  done->set_answer_seconds(answer_seconds);
  spdlog::info("job {}: resize {}: {}{}", request.job_id(), request.seq(),
               overlay::ResizeDone::Outcome_Name(outcome),
               reason.empty() ? "" : " (" + reason + ")");
  Status sent = overlay_->send(std::move(envelope));
  if (!sent.is_ok()) spdlog::warn("job {}: resize answer: {}", request.job_id(), sent.message());
}

void Agent::on_kill(const overlay::Kill& kill) {
  const PartTable::Kill decision = parts_.kill(kill);
  switch (decision.kind) {
    case PartTable::Kill::Kind::kIgnore: return;
    case PartTable::Kill::Kind::kCancelledBeforeStart:
      report(kill.job_id(), kill.attempt(), overlay::JobUpdate::CANCELLED, 0,
             "cancelled before it started here", decision.part);
      return;
    case PartTable::Kill::Kind::kCancelStep:
      if (Status s = executor_->cancel_step(kill.job_id(), kill.step()); !s.is_ok()) {
        spdlog::info("job {} step {}: cancel: {}", kill.job_id(), kill.step(), s.message());
      }
      return;
    case PartTable::Kill::Kind::kCancelPart:
      if (Status s = executor_->cancel(kill.job_id()); !s.is_ok()) {
        spdlog::warn("job {}: cancel: {}", kill.job_id(), s.message());
      }
      return;
  }
}

void Agent::on_job_exits() {
  on_checkpoints_done();
  on_restores_done();
  const std::vector<JobExit> exits = executor_->reap();
  report_started();  // a part's start before its end
  // Output before ends: the leader closes a job's output at its end.
  send_output(executor_->take_output());
  mpi_->send_events(executor_->take_pmi_events(), wall_clock_now());
  for (const JobExit& exit : exits) {
    overlay::JobUpdate::Kind kind = overlay::JobUpdate::COMPLETED;
    switch (exit.kind) {
      case ExitKind::kCompleted: kind = overlay::JobUpdate::COMPLETED; break;
      case ExitKind::kFailed: kind = overlay::JobUpdate::FAILED; break;
      case ExitKind::kCancelled: kind = overlay::JobUpdate::CANCELLED; break;
      case ExitKind::kTimeout: kind = overlay::JobUpdate::TIMEOUT; break;
    }
    if (exit.step != 0) {
      const std::uint32_t run = parts_.step_ended(exit.id, exit.step);
      report(exit.id, run, kind, exit.exit_code, exit.reason, std::nullopt, exit.step, &exit);
      part_journal_->ack(exit.id, run, exit.step);
      continue;
    }
    // Its steps have ended before it (reap() saw to it).
    const Part* part = parts_.running(exit.id);
    report(exit.id, part ? part->attempt : 0, kind, exit.exit_code, exit.reason, std::nullopt, 0,
           &exit);
    std::optional<Part> gone = forget(exit.id);
    run_epilog(exit.id, gone ? std::move(gone->script_env) : ScriptEnv{});
  }
  sync_wait_fds();
}

void Agent::send_output(std::vector<TaskOutput> chunks) {
  for (TaskOutput& out : chunks) {
    OutputLog::Chunk chunk;
    chunk.id = out.id;
    chunk.step = out.step;
    const Part* part = parts_.running(out.id);
    chunk.attempt = part ? part->attempt : 0;
    chunk.rank = out.rank;
    chunk.is_stderr = out.is_stderr;
    chunk.data = std::move(out.data);
    chunk.incarnation = incarnation_;
    const OutputLog::Chunk& numbered = output_log_.add(std::move(chunk));
    if (output_spool_->append(numbered)) {
      output_spool_->rewrite({numbered.id, numbered.step},
                             output_log_.kept(numbered.id, numbered.step));
    }
    send_output_chunk(numbered);
  }
}

void Agent::on_output_credit(const overlay::OutputCredit& credit) {
  const bool is_stderr = credit.stream() == overlay::Output::STDERR;
  const int rank = static_cast<int>(credit.rank());
  const std::uint64_t more =
      output_log_.credit(credit.job_id(), credit.attempt(), credit.step(), rank, is_stderr,
                         credit.granted(), credit.consumed(), kInitialOutputCredit);
  if (more == 0) return;  // a copy, or a stream that is not here any more
  Status s = executor_->grant_output(credit.job_id(), credit.step(), rank, is_stderr, more);
  if (!s.is_ok()) spdlog::debug("job {}: output credit: {}", credit.job_id(), s.message());
}

void Agent::send_output_chunk(const OutputLog::Chunk& chunk) {
  overlay::Envelope envelope;
  envelope.set_dst(0);
  overlay::Output* output = envelope.mutable_output();
  output->set_job_id(chunk.id);
  output->set_step(chunk.step);
  output->set_attempt(chunk.attempt);
  output->set_rank(static_cast<std::uint32_t>(chunk.rank));
  output->set_stream(chunk.is_stderr ? overlay::Output::STDERR : overlay::Output::STDOUT);
  output->set_data(chunk.data);
  output->set_offset(chunk.offset);
  output->set_incarnation(chunk.incarnation != 0 ? chunk.incarnation : incarnation_);
  Status s = overlay_->send(std::move(envelope));
  if (!s.is_ok()) spdlog::debug("job {}: output: {}", chunk.id, s.message());
}

void Agent::on_signal(const overlay::Signal& request) {
  // Not a stale attempt's, nor a copy sent again after the tree healed.
  if (!parts_.take_signal(request.job_id(), request.attempt(), request.seq())) return;
  Status s = request.step() != 0
                 ? executor_->signal_step(request.job_id(), request.step(), request.signo())
                 : executor_->signal(request.job_id(), request.signo());
  if (!s.is_ok())
    spdlog::info("job {}: signal {}: {}", request.job_id(), request.signo(), s.message());
}

void Agent::on_set_time_limit(const overlay::SetTimeLimit& request) {
  if (!parts_.runs(request.job_id(), request.attempt())) return;  // stale
  Status s = executor_->set_time_limit(request.job_id(), request.time_limit_s());
  if (!s.is_ok()) spdlog::info("job {}: time limit: {}", request.job_id(), s.message());
}

void Agent::on_input(const overlay::Input& input) {
  // Not a stale attempt's; of a copy sent again after the tree healed, only
  // what was not written yet.
  std::optional<PartTable::InputToWrite> fresh = parts_.take_input(input);
  if (!fresh) return;
  TaskInput in;
  in.data = std::move(fresh->data);
  in.eof = fresh->eof;
  in.rows = input.rows();
  in.cols = input.cols();
  Status s = executor_->write_input(input.job_id(), input.step(), in);
  if (!s.is_ok()) spdlog::debug("job {}: input: {}", input.job_id(), s.message());
}

void Agent::on_usage_query(const overlay::UsageQuery& query) {
  overlay::Envelope envelope;
  envelope.set_dst(0);
  overlay::UsageReport& report = *envelope.mutable_usage_report();
  report.set_job_id(query.job_id());
  report.set_query(query.query());
  const bool here = parts_.runs(query.job_id(), query.attempt());
  auto usage = here ? executor_->usage(query.job_id(), query.step())
                    : Result<LiveUsage>(not_found("not here"));
  report.set_found(usage.is_ok());
  if (usage.is_ok()) {
    report.set_cpu_time_us(usage->cpu_time_us);
    report.set_memory_bytes(usage->memory_bytes);
    report.set_max_memory_bytes(usage->max_memory_bytes);
  }
  if (usage.is_ok() && query.step() == 0) {
    for (std::uint32_t step_id : parts_.steps_of(query.job_id())) {
      auto step = executor_->usage(query.job_id(), step_id);
      if (!step.is_ok()) continue;  // ended meanwhile
      overlay::StepUsage& s = *report.add_steps();
      s.set_step(step_id);
      s.set_cpu_time_us(step->cpu_time_us);
      s.set_memory_bytes(step->memory_bytes);
      s.set_max_memory_bytes(step->max_memory_bytes);
    }
  }
  (void)overlay_->send(std::move(envelope));
}

void Agent::sync_wait_fds() {
  std::vector<int> fds = executor_->wait_fds();
  std::set<int> now(fds.begin(), fds.end());
  for (int fd : watched_fds_) {
    if (!now.count(fd)) loop_.unwatch_fd(fd);
  }
  for (int fd : now) {
    if (!watched_fds_.count(fd)) {
      loop_.watch_fd(fd, [this] {
        const SlowWork slow("a job's start, end or output");
        on_job_exits();
      });
    }
  }
  watched_fds_ = std::move(now);
}

void Agent::report(JobId id, std::uint32_t attempt, overlay::JobUpdate::Kind kind, int exit_code,
                   const std::string& reason, std::optional<std::uint32_t> part, std::uint32_t step,
                   const JobExit* measured) {
  overlay::Envelope envelope;
  envelope.set_dst(0);
  overlay::JobUpdate* update = envelope.mutable_job_update();
  update->set_job_id(id);
  update->set_kind(kind);
  update->set_exit_code(exit_code);
  update->set_reason(reason);
  update->set_time_us(wall_clock_now());
  update->set_attempt(attempt);
  update->set_step(step);
  if (measured) {
    update->set_cpu_time_us(measured->cpu_time_us);
    update->set_max_memory_bytes(measured->max_memory_bytes);
  }
  if (part) {
    update->set_part(*part);
  } else if (const Part* running = parts_.running(id)) {
    update->set_part(running->part);
  }
  if (kind != overlay::JobUpdate::STARTED) {
    end_sent_at_[{id, step}] = update->time_us();
    Status kept = unacknowledged_->add(*update);
    if (!kept.is_ok()) spdlog::error("job {}: end not saved to disk: {}", id, kept.message());
  }
  Status s = overlay_->send(std::move(envelope));
  if (!s.is_ok()) spdlog::warn("job {}: report lost: {}", id, s.message());
}

}  // namespace hpcq::agent

#include "lib/api/job_proto.h"

#include <algorithm>

#include "lib/core/bytes.h"
#include "lib/core/units.h"
#include "lib/resource/placement_names.h"

namespace hpcq::api {
namespace {

v1::Distribution distribution_to_proto(resource::Distribution d) {
  return d == resource::Distribution::kCyclic ? v1::DISTRIBUTION_CYCLIC : v1::DISTRIBUTION_BLOCK;
}

// Unspecified leaves `out` as it is (the word's, or the default).
Status read_distribution(v1::Distribution d, const char* field, resource::Distribution& out) {
  switch (d) {
    case v1::DISTRIBUTION_UNSPECIFIED: return Status::ok();
    case v1::DISTRIBUTION_BLOCK: out = resource::Distribution::kBlock; return Status::ok();
    case v1::DISTRIBUTION_CYCLIC: out = resource::Distribution::kCyclic; return Status::ok();
    default: break;
  }
  return invalid_argument(std::string(field) + ": unknown value " + std::to_string(d));
}

v1::CpuBind cpu_bind_to_proto(resource::CpuBind b) {
  switch (b) {
    case resource::CpuBind::kCores: return v1::CPU_BIND_CORES;
    case resource::CpuBind::kThreads: return v1::CPU_BIND_THREADS;
    case resource::CpuBind::kNone: return v1::CPU_BIND_NONE;
  }
  return v1::CPU_BIND_CORES;
}

Status read_cpu_bind(v1::CpuBind b, resource::CpuBind& out) {
  switch (b) {
    case v1::CPU_BIND_UNSPECIFIED: return Status::ok();
    case v1::CPU_BIND_CORES: out = resource::CpuBind::kCores; return Status::ok();
    case v1::CPU_BIND_THREADS: out = resource::CpuBind::kThreads; return Status::ok();
    case v1::CPU_BIND_NONE: out = resource::CpuBind::kNone; return Status::ok();
    default: break;
  }
  return invalid_argument("cpu_bind_type: unknown value " + std::to_string(b));
}

}  // namespace

Status read_layout(const v1::JobSpec& p, resource::ResourceRequest& request) {
  // Empty: a client that predates the field gets the default.
  if (!p.distribution().empty()) {
    HPCQ_RETURN_IF_ERROR(resource::parse_distribution(p.distribution(), request.node_distribution,
                                                      request.core_distribution));
  }
  if (!p.cpu_bind().empty()) {
    auto bind = resource::parse_cpu_bind(p.cpu_bind());
    if (!bind.is_ok()) return bind.status();
    request.cpu_bind = *bind;
  }
  // The typed fields, where given, over the words.
  HPCQ_RETURN_IF_ERROR(
      read_distribution(p.node_distribution(), "node_distribution", request.node_distribution));
  HPCQ_RETURN_IF_ERROR(
      read_distribution(p.core_distribution(), "core_distribution", request.core_distribution));
  return read_cpu_bind(p.cpu_bind_type(), request.cpu_bind);
}

v1::CheckpointThen to_proto(job::CheckpointThen then) {
  switch (then) {
    case job::CheckpointThen::kContinue: return v1::CHECKPOINT_CONTINUE;
    case job::CheckpointThen::kRequeue: return v1::CHECKPOINT_REQUEUE;
    case job::CheckpointThen::kStop: return v1::CHECKPOINT_STOP;
  }
  return v1::CHECKPOINT_CONTINUE;
}

Result<job::CheckpointThen> checkpoint_then_of(v1::CheckpointThen action, const std::string& word) {
  switch (action) {
    case v1::CHECKPOINT_THEN_UNSPECIFIED: break;
    case v1::CHECKPOINT_CONTINUE: return job::CheckpointThen::kContinue;
    case v1::CHECKPOINT_REQUEUE: return job::CheckpointThen::kRequeue;
    case v1::CHECKPOINT_STOP: return job::CheckpointThen::kStop;
    default: return invalid_argument("then: unknown value " + std::to_string(action));
  }
  if (word.empty()) return job::CheckpointThen::kContinue;
  auto then = job::parse_checkpoint_then(word);
  if (!then) return invalid_argument("then: '" + word + "' is not continue, requeue or stop");
  return *then;
}

v1::ResizeKind to_proto(job::ResizeKind kind) {
  return kind == job::ResizeKind::kShrink ? v1::RESIZE_SHRINK : v1::RESIZE_EXPAND;
}

Result<job::ResizeKind> resize_kind_of(v1::ResizeKind kind, const std::string& word) {
  switch (kind) {
    case v1::RESIZE_KIND_UNSPECIFIED: break;
    case v1::RESIZE_SHRINK: return job::ResizeKind::kShrink;
    case v1::RESIZE_EXPAND: return job::ResizeKind::kExpand;
    default: return invalid_argument("resize kind: unknown value " + std::to_string(kind));
  }
  auto parsed = job::parse_resize_kind(word);
  if (!parsed) return invalid_argument("resize kind: '" + word + "' is not shrink or expand");
  return *parsed;
}

namespace {

// Text in the string field; what is not UTF-8 in its *_bytes twin
// (hpcq.proto, JobSpec).
void set_bytes(const std::string& value, std::string* text, std::string* twin) {
  *(is_utf8(value) ? text : twin) = value;
}

// A string field, or its *_bytes twin when that is set.
const std::string& bytes_of(const std::string& text, const std::string& twin) {
  return twin.empty() ? text : twin;
}

}  // namespace

std::vector<std::string> argv_of(const v1::JobSpec& p) {
  return p.argv_bytes_size() > 0
             ? std::vector<std::string>(p.argv_bytes().begin(), p.argv_bytes().end())
             : std::vector<std::string>(p.argv().begin(), p.argv().end());
}

std::string cwd_of(const v1::JobSpec& p) { return bytes_of(p.cwd(), p.cwd_bytes()); }

v1::JobSpec to_proto(const job::JobSpec& spec) {
  v1::JobSpec p;
  p.set_name(spec.name);
  const bool argv_text = std::all_of(spec.argv.begin(), spec.argv.end(),
                                     [](const std::string& a) { return is_utf8(a); });
  for (const auto& a : spec.argv) argv_text ? p.add_argv(a) : p.add_argv_bytes(a);
  set_bytes(spec.script, p.mutable_script(), p.mutable_script_bytes());
  p.set_nodes(spec.request.nodes);
  p.set_ntasks(spec.request.ntasks);
  p.set_cpus_per_task(spec.request.cpus_per_task);
  p.set_mem_per_node_bytes(spec.request.mem_per_node_bytes);
  p.set_time_limit_s(spec.time_limit_s);
  set_bytes(spec.output, p.mutable_output(), p.mutable_output_bytes());
  set_bytes(spec.error, p.mutable_error(), p.mutable_error_bytes());
  p.set_queue(spec.queue);
  set_bytes(spec.cwd, p.mutable_cwd(), p.mutable_cwd_bytes());
  for (const auto& [k, v] : spec.env)
    (*(is_utf8(v) ? p.mutable_env() : p.mutable_env_bytes()))[k] = v;
  p.set_requeue(spec.requeue);
  p.set_account(spec.account);
  p.set_qos(spec.qos);
  p.set_priority(spec.priority);
  p.set_dependency(job::format_dependencies(spec.dependencies));
  p.set_array(spec.array);
  p.set_gpus_per_node(spec.request.gpus_per_node);
  p.set_gpus_per_task(spec.request.gpus_per_task);
  p.set_mem_per_cpu_bytes(spec.request.mem_per_cpu_bytes);
  p.set_distribution(
      resource::distribution_text(spec.request.node_distribution, spec.request.core_distribution));
  p.set_cpu_bind(resource::cpu_bind_name(spec.request.cpu_bind));
  p.set_node_distribution(distribution_to_proto(spec.request.node_distribution));
  p.set_core_distribution(distribution_to_proto(spec.request.core_distribution));
  p.set_cpu_bind_type(cpu_bind_to_proto(spec.request.cpu_bind));
  p.set_numa_policy(resource::numa_policy_name(spec.request.numa_policy));
  p.set_oversubscribe(spec.request.oversubscribe);
  p.set_profile(spec.profile);
  p.set_image(spec.image);
  p.set_checkpoint_interval_s(spec.checkpoint_interval_s);
  p.set_begin_time_us(spec.begin_time_us);
  p.set_workers(spec.workers);
  p.set_max_nodes(spec.max_nodes);
  for (const auto& n : spec.nodelist) p.add_nodelist(n);
  for (const auto& n : spec.exclude) p.add_exclude(n);
  p.set_constraint(spec.constraint);
  p.set_ntasks_per_node(spec.ntasks_per_node);
  for (const auto& [name, count] : spec.licenses) (*p.mutable_licenses())[name] = count;
  for (const auto& [name, count] : spec.request.gres) (*p.mutable_gres())[name] = count;
  p.set_elastic(spec.elastic);
  p.set_batch(spec.batch);
  p.set_forward_output(spec.forward_output);
  p.set_warn_signal(spec.warn_signal);
  p.set_warn_seconds(spec.warn_seconds);
  p.set_pty(spec.pty);
  p.set_mpi(spec.mpi);
  p.set_hold(spec.hold);
  p.set_slurm_environment(spec.slurm_environment);
  p.set_exclusive(spec.request.exclusive);
  p.set_warn_target(job::warn_target_word(spec.warn_target));
  p.set_deadline_us(spec.deadline_us);
  return p;
}

Result<job::JobSpec> from_proto(const v1::JobSpec& p) {
  job::JobSpec spec;
  spec.name = p.name();
  spec.argv = argv_of(p);
  spec.script = bytes_of(p.script(), p.script_bytes());
  spec.request.nodes = p.nodes();
  spec.request.ntasks = p.ntasks();
  spec.request.cpus_per_task = p.cpus_per_task();
  spec.request.mem_per_node_bytes = p.mem_per_node_bytes();
  spec.time_limit_s = p.time_limit_s();
  spec.output = bytes_of(p.output(), p.output_bytes());
  spec.error = bytes_of(p.error(), p.error_bytes());
  spec.queue = p.queue();
  spec.cwd = cwd_of(p);
  job::SharedEnvironment::Map env(p.env().begin(), p.env().end());
  for (const auto& [k, v] : p.env_bytes()) env[k] = v;
  spec.env = std::move(env);
  spec.requeue = p.requeue();
  spec.account = p.account();
  spec.qos = p.qos();
  spec.priority = p.priority();
  if (!p.dependency().empty()) {
    auto deps = job::parse_dependencies(p.dependency());
    if (!deps.is_ok()) return deps.status();
    spec.dependencies = std::move(deps).value();
  }
  spec.array = p.array();
  spec.request.gpus_per_node = p.gpus_per_node();
  spec.request.gpus_per_task = p.gpus_per_task();
  spec.request.mem_per_cpu_bytes = p.mem_per_cpu_bytes();
  HPCQ_RETURN_IF_ERROR(read_layout(p, spec.request));
  if (!p.numa_policy().empty()) {
    auto policy = resource::parse_numa_policy(p.numa_policy());
    if (!policy.is_ok()) return policy.status();
    spec.request.numa_policy = *policy;
  }
  spec.request.oversubscribe = p.oversubscribe();
  spec.profile = p.profile();
  spec.image = p.image();
  spec.checkpoint_interval_s = p.checkpoint_interval_s();
  spec.begin_time_us = p.begin_time_us();
  spec.workers = p.workers();
  spec.max_nodes = p.max_nodes();
  spec.elastic = p.elastic();
  spec.batch = p.batch();
  spec.forward_output = p.forward_output();
  spec.warn_signal = p.warn_signal();
  spec.warn_seconds = p.warn_seconds();
  spec.pty = p.pty();
  spec.mpi = p.mpi();
  spec.hold = p.hold();
  spec.slurm_environment = p.slurm_environment();
  spec.request.exclusive = p.exclusive();
  const auto warn_target = job::parse_warn_target(p.warn_target());
  if (!warn_target) return invalid_argument("warn_target: unknown " + quote(p.warn_target()));
  spec.warn_target = *warn_target;
  spec.deadline_us = p.deadline_us();
  spec.nodelist.assign(p.nodelist().begin(), p.nodelist().end());
  spec.exclude.assign(p.exclude().begin(), p.exclude().end());
  spec.constraint = p.constraint();
  spec.ntasks_per_node = p.ntasks_per_node();
  spec.licenses.insert(p.licenses().begin(), p.licenses().end());
  spec.request.gres.insert(p.gres().begin(), p.gres().end());
  return spec;
}

v1::JobState to_proto(job::JobState state) {
  switch (state) {
    case job::JobState::kPending: return v1::PENDING;
    case job::JobState::kRunning: return v1::RUNNING;
    case job::JobState::kCompleted: return v1::COMPLETED;
    case job::JobState::kFailed: return v1::FAILED;
    case job::JobState::kCancelled: return v1::CANCELLED;
    case job::JobState::kTimeout: return v1::TIMEOUT;
    case job::JobState::kNodeFail: return v1::NODE_FAIL;
  }
  return v1::JOB_STATE_UNSPECIFIED;
}

const char* state_name(v1::JobState state) {
  switch (state) {
    case v1::PENDING: return "PENDING";
    case v1::RUNNING: return "RUNNING";
    case v1::COMPLETED: return "COMPLETED";
    case v1::FAILED: return "FAILED";
    case v1::CANCELLED: return "CANCELLED";
    case v1::TIMEOUT: return "TIMEOUT";
    case v1::NODE_FAIL: return "NODE_FAIL";
    default: return "UNKNOWN";
  }
}

namespace {

// One node's part of a job's or a step's allocation (host CPUs and workers:
// the job's caller adds them).
void node_to_proto(const resource::NodeAllocation& node, v1::NodeAllocation* a) {
  a->set_node(node.node);
  a->set_rank(node.rank);
  for (int c : node.cores) a->add_cores(c);
  for (int n : node.numa) a->add_numa(n);
  for (int g : node.gpus) a->add_gpus(g);
  a->set_memory_bytes(node.memory_bytes);
  a->set_ntasks(node.ntasks);
  a->set_first_task(node.first_task);
}

}  // namespace

v1::Job to_proto(const job::Job& job, const std::function<int(Rank, int)>& host_cpu_of) {
  v1::Job p;
  p.set_id(job.id);
  p.set_user(job.user);
  p.set_uid(job.uid);
  p.set_name(job.spec.name);
  p.set_state(to_proto(job.state));
  p.set_exit_code(job.exit_code);
  p.set_reason(job.reason);
  for (const auto& node : job.allocation.nodes) {
    p.add_nodes(node.node);
    auto* a = p.add_allocation();
    node_to_proto(node, a);
    if (host_cpu_of) {
      for (int c : node.cores) a->add_host_cpus(host_cpu_of(node.rank, c));
    }
  }
  set_bytes(job::expand_output_path(job.spec.output, job), p.mutable_stdout(),
            p.mutable_stdout_bytes());
  set_bytes(job::expand_output_path(job.spec.error.empty() ? job.spec.output : job.spec.error, job),
            p.mutable_stderr(), p.mutable_stderr_bytes());
  p.set_submit_time_us(job.submit_time);
  p.set_start_time_us(job.start_time);
  p.set_end_time_us(job.end_time);
  *p.mutable_spec() = to_proto(job.spec);
  p.set_requeue_count(job.requeue_count);
  p.set_cpu_time_us(job.cpu_time_us);
  p.set_max_memory_bytes(job.max_memory_bytes);
  p.set_held(job.held);
  p.set_array_job_id(job.spec.array_job_id);
  p.set_array_task_id(job.spec.array_task_id);
  for (const auto& node : job.allocation.nodes) {
    auto* a = p.mutable_allocation(static_cast<int>(&node - job.allocation.nodes.data()));
    for (const resource::WorkerPlacement& w : node.workers) {
      v1::Worker* worker = a->add_workers();
      worker->set_id(w.id);
      worker->set_group(w.group);
      for (int r : w.ranks) worker->add_ranks(r);
      for (int c : w.cores) worker->add_cores(c);
    }
  }
  return p;
}

v1::Step to_proto(const job::StepRecord& step) {
  v1::Step p;
  p.set_id(step.id);
  v1::StepSpec& spec = *p.mutable_spec();
  for (const std::string& a : step.argv) spec.add_argv(a);
  for (const auto& [k, v] : step.env) (*spec.mutable_env())[k] = v;
  spec.set_cwd(step.cwd);
  spec.set_nodes(step.request.nodes);
  spec.set_ntasks(step.request.ntasks);
  spec.set_cpus_per_task(step.request.cpus_per_task);
  spec.set_overlap(step.request.overlap);
  for (const auto& n : step.request.nodelist) spec.add_nodelist(n);
  for (const auto& n : step.request.exclude) spec.add_exclude(n);
  spec.set_whole(step.request.whole);
  spec.set_pty(step.pty);
  spec.set_mpi(step.mpi);
  int ntasks = 0;
  for (const resource::NodeAllocation& node : step.allocation.nodes) {
    p.add_nodes(node.node);
    node_to_proto(node, p.add_allocation());
    ntasks += node.ntasks;
  }
  p.set_ntasks(ntasks);
  p.set_cpus_per_task(step.allocation.cpus_per_task);
  p.set_state(to_proto(step.state));
  p.set_exit_code(step.exit_code);
  p.set_reason(step.reason);
  p.set_cpu_time_us(step.cpu_time_us);
  p.set_max_memory_bytes(step.max_memory_bytes);
  p.set_submit_time_us(step.submit_time);
  p.set_start_time_us(step.start_time);
  p.set_end_time_us(step.end_time);
  for (Rank r : step.running_on) p.add_running_on(r);
  return p;
}

Result<job::StepRecord> from_proto(const v1::Step& p) {
  job::StepRecord step;
  step.id = p.id();
  step.argv.assign(p.spec().argv().begin(), p.spec().argv().end());
  for (const auto& [k, v] : p.spec().env()) step.env[k] = v;
  step.cwd = p.spec().cwd();
  step.request.nodes = p.spec().nodes();
  step.request.ntasks = p.spec().ntasks();
  step.request.cpus_per_task = p.spec().cpus_per_task();
  step.request.overlap = p.spec().overlap();
  step.request.nodelist.assign(p.spec().nodelist().begin(), p.spec().nodelist().end());
  step.request.exclude.assign(p.spec().exclude().begin(), p.spec().exclude().end());
  step.request.whole = p.spec().whole();
  step.pty = p.spec().pty();
  step.mpi = p.spec().mpi();
  step.allocation.cpus_per_task = p.cpus_per_task();
  for (const v1::NodeAllocation& a : p.allocation()) {
    resource::NodeAllocation node;
    node.node = a.node();
    node.rank = a.rank();
    node.cores.assign(a.cores().begin(), a.cores().end());
    node.numa.assign(a.numa().begin(), a.numa().end());
    node.gpus.assign(a.gpus().begin(), a.gpus().end());
    node.ntasks = a.ntasks();
    node.first_task = a.first_task();
    step.allocation.nodes.push_back(std::move(node));
  }
  switch (p.state()) {
    case v1::PENDING: step.state = job::JobState::kPending; break;
    case v1::RUNNING: step.state = job::JobState::kRunning; break;
    case v1::COMPLETED: step.state = job::JobState::kCompleted; break;
    case v1::FAILED: step.state = job::JobState::kFailed; break;
    case v1::CANCELLED: step.state = job::JobState::kCancelled; break;
    default:
      return invalid_argument("step " + std::to_string(p.id()) + ": state " +
                              state_name(p.state()) + " is not a step's");
  }
  step.exit_code = p.exit_code();
  step.reason = p.reason();
  step.cpu_time_us = p.cpu_time_us();
  step.max_memory_bytes = p.max_memory_bytes();
  step.submit_time = p.submit_time_us();
  step.start_time = p.start_time_us();
  step.end_time = p.end_time_us();
  step.running_on.insert(p.running_on().begin(), p.running_on().end());
  step.confirmed = step.running_on;  // adopted: running where it was
  return step;
}

v1::CheckpointRecord to_proto(const job::CheckpointRecord& r) {
  v1::CheckpointRecord p;
  p.set_time_us(r.time_us);
  p.set_then(job::checkpoint_then_name(r.then));
  p.set_action(to_proto(r.then));
  for (const std::string& n : r.nodes) p.add_nodes(n);
  p.set_image(r.image);
  p.set_image_bytes(r.image_bytes);
  p.set_dump_seconds(r.dump_seconds);
  p.set_outcome(r.outcome);
  p.set_restored(r.restored);
  p.set_restore_pending(r.restore_pending);
  p.set_periodic(r.periodic);
  p.set_pruned(r.pruned);
  for (const std::string& n : r.to) p.add_to(n);
  p.set_preempted(r.preempted);
  p.set_preempted_for(r.preempted_for);
  return p;
}

Result<job::CheckpointRecord> from_proto(const v1::CheckpointRecord& p) {
  job::CheckpointRecord r;
  auto then = checkpoint_then_of(p.action(), p.then());
  if (!then.is_ok()) return invalid_argument("checkpoint record: " + then.status().message());
  r.time_us = p.time_us();
  r.then = *then;
  r.nodes.assign(p.nodes().begin(), p.nodes().end());
  r.image = p.image();
  r.image_bytes = p.image_bytes();
  r.dump_seconds = p.dump_seconds();
  r.outcome = p.outcome();
  r.restored = p.restored();
  r.restore_pending = p.restore_pending();
  r.periodic = p.periodic();
  r.pruned = p.pruned();
  r.to.assign(p.to().begin(), p.to().end());
  r.preempted = p.preempted();
  r.preempted_for = p.preempted_for();
  return r;
}

v1::Placement to_proto(const job::Placement& r) {
  v1::Placement p;
  for (const std::string& n : r.nodes) p.add_nodes(n);
  p.set_start_us(r.start_us);
  p.set_end_us(r.end_us);
  p.set_restored_from(r.restored_from);
  p.set_outcome(r.outcome);
  return p;
}

job::Placement from_proto(const v1::Placement& p) {
  job::Placement r;
  r.nodes.assign(p.nodes().begin(), p.nodes().end());
  r.start_us = p.start_us();
  r.end_us = p.end_us();
  r.restored_from = p.restored_from();
  r.outcome = p.outcome();
  return r;
}

v1::ResizeRecord to_proto(const job::ResizeRecord& r) {
  v1::ResizeRecord p;
  p.set_time_us(r.time_us);
  p.set_from(r.from);
  p.set_to(r.to);
  p.set_kind(job::resize_kind_name(r.kind));
  p.set_resize_kind(to_proto(r.kind));
  p.set_outcome(job::resize_outcome_name(r.outcome));
  p.set_reason(r.reason);
  p.set_by(job::resize_by_name(r.by));
  p.set_answered_us(r.answered_us);
  p.set_answer_seconds(r.answer_seconds);
  for (const std::string& n : r.nodes) p.add_nodes(n);
  return p;
}

Result<job::ResizeRecord> from_proto(const v1::ResizeRecord& p) {
  auto kind = resize_kind_of(p.resize_kind(), p.kind());
  auto outcome = job::parse_resize_outcome(p.outcome());
  auto by = job::parse_resize_by(p.by());
  if (!kind.is_ok() || !outcome || !by) {
    return invalid_argument("resize record: unknown kind, outcome or by ('" + p.kind() + "', '" +
                            p.outcome() + "', '" + p.by() + "')");
  }
  job::ResizeRecord r;
  r.time_us = p.time_us();
  r.from = p.from();
  r.to = p.to();
  r.kind = *kind;
  r.outcome = *outcome;
  r.reason = p.reason();
  r.by = *by;
  r.answered_us = p.answered_us();
  r.answer_seconds = p.answer_seconds();
  r.nodes.assign(p.nodes().begin(), p.nodes().end());
  return r;
}

}  // namespace hpcq::api

#include "lib/store/codec.h"

#include <concepts>
#include <cstdint>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include <string>
#include <type_traits>
#include <utility>
#include <vector>
#include "lib/core/json_bytes.h"
#include "lib/core/units.h"

#include "lib/resource/placement_names.h"

namespace hpcq::store {
namespace {

using nlohmann::json;

struct StateName {
  job::JobState state;
  const char* name;
};

constexpr StateName kStateNames[] = {
    {job::JobState::kPending, "PENDING"},     {job::JobState::kRunning, "RUNNING"},
    {job::JobState::kCompleted, "COMPLETED"}, {job::JobState::kFailed, "FAILED"},
    {job::JobState::kCancelled, "CANCELLED"}, {job::JobState::kTimeout, "TIMEOUT"},
    {job::JobState::kNodeFail, "NODE_FAIL"},
};

// The struct readers are declared first so that the container templates
// below find them (our namespace is not an associated one for ADL).
Status read_value(const nlohmann::json& v, const std::string& where,
                  resource::ResourceRequest& out);
Status read_value(const nlohmann::json& v, const std::string& where, resource::NodeAllocation& out);
Status read_value(const nlohmann::json& v, const std::string& where,
                  resource::WorkerPlacement& out);

// Reads one JSON value into `out` with the type checked by hand, so that the
// message names the field and no nlohmann exception is ever thrown.
Status read_value(const json& v, const std::string& where, std::string& out) {
  if (!v.is_string()) return invalid_argument(where + ": must be a string");
  out = v.get_ref<const std::string&>();
  return Status::ok();
}

Status read_value(const json& v, const std::string& where, bool& out) {
  if (!v.is_boolean()) return invalid_argument(where + ": must be true or false");
  out = v.get<bool>();
  return Status::ok();
}

template <std::integral Int>
Status read_value(const json& v, const std::string& where, Int& out) {
  // A negative value arrives as number_integer, a large positive one as
  // number_unsigned; both are range-checked against the target type.
  if (v.is_number_unsigned()) {
    auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<Int>::max())) {
      return invalid_argument(where + ": " + std::to_string(u) + " is out of range");
    }
    out = static_cast<Int>(u);
    return Status::ok();
  }
  if (v.is_number_integer()) {
    auto i = v.get<std::int64_t>();
    if constexpr (std::is_unsigned_v<Int>) {
      return invalid_argument(where + ": " + std::to_string(i) + " must not be negative");
    } else {
      if (i < static_cast<std::int64_t>(std::numeric_limits<Int>::min()) ||
          i > static_cast<std::int64_t>(std::numeric_limits<Int>::max())) {
        return invalid_argument(where + ": " + std::to_string(i) + " is out of range");
      }
      out = static_cast<Int>(i);
      return Status::ok();
    }
  }
  return invalid_argument(where + ": must be an integer");
}

template <typename T>
Status read_value(const json& v, const std::string& where, std::vector<T>& out) {
  if (!v.is_array()) return invalid_argument(where + ": must be an array");
  out.clear();
  out.reserve(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    T item{};
    HPCQ_RETURN_IF_ERROR(read_value(v[i], where + "[" + std::to_string(i) + "]", item));
    out.push_back(std::move(item));
  }
  return Status::ok();
}

// Counts by name (gres, licenses): an object of integers.
Status read_value(const json& v, const std::string& where, std::map<std::string, int>& out) {
  if (!v.is_object()) return invalid_argument(where + ": must be an object");
  out.clear();
  for (const auto& [name, count] : v.items()) {
    HPCQ_RETURN_IF_ERROR(read_value(count, where + "." + name, out[name]));
  }
  return Status::ok();
}

// An absent field keeps the default `out` already holds (see the header).
template <typename T>
Status read_field(const json& obj, const std::string& where, const char* key, T& out) {
  auto it = obj.find(key);
  if (it == obj.end()) return Status::ok();
  return read_value(*it, where + "." + key, out);
}

// User bytes (lib/core/json_bytes.h): a string, or {"base64": ...} for
// bytes that are not UTF-8. Messages name the element, as read_value's do.
Status read_bytes(const json& v, const std::string& where, std::string& out) {
  if (!bytes_from_json(v, out)) {
    return invalid_argument(where + ": must be a string (or {\"base64\": ...})");
  }
  return Status::ok();
}

Status read_bytes(const json& v, const std::string& where, std::vector<std::string>& out) {
  if (!v.is_array()) return invalid_argument(where + ": must be an array");
  out.clear();
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::string item;
    HPCQ_RETURN_IF_ERROR(read_bytes(v[i], where + "[" + std::to_string(i) + "]", item));
    out.push_back(std::move(item));
  }
  return Status::ok();
}

Status read_bytes(const json& v, const std::string& where,
                  std::map<std::string, std::string>& out) {
  if (!v.is_object()) return invalid_argument(where + ": must be an object");
  out.clear();
  for (const auto& [key, value] : v.items()) {
    std::string item;
    HPCQ_RETURN_IF_ERROR(read_bytes(value, where + "." + key, item));
    out.emplace(key, std::move(item));
  }
  return Status::ok();
}

// Absent: left as it is.
template <typename T>
Status read_bytes_field(const json& obj, const std::string& where, const char* key, T& out) {
  auto it = obj.find(key);
  if (it == obj.end()) return Status::ok();
  return read_bytes(*it, where + "." + key, out);
}

// "distribution" and "cpu_bind" as the words placement_names.h spells; absent:
// the defaults (records written before they existed).
Status read_placement(const json& v, const std::string& where, resource::Distribution& nodes,
                      resource::Distribution& cores, resource::CpuBind& bind) {
  std::string distribution, cpu_bind;
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "distribution", distribution));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "cpu_bind", cpu_bind));
  if (!distribution.empty()) {
    Status parsed = resource::parse_distribution(distribution, nodes, cores);
    if (!parsed.is_ok()) return invalid_argument(where + ".distribution: " + parsed.message());
  }
  if (!cpu_bind.empty()) {
    auto parsed = resource::parse_cpu_bind(cpu_bind);
    if (!parsed.is_ok()) return invalid_argument(where + ".cpu_bind: " + parsed.status().message());
    bind = *parsed;
  }
  return Status::ok();
}

Status read_value(const json& v, const std::string& where, resource::ResourceRequest& out) {
  if (!v.is_object()) return invalid_argument(where + ": must be an object");
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "nodes", out.nodes));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "ntasks", out.ntasks));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "cpus_per_task", out.cpus_per_task));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "mem_per_node_bytes", out.mem_per_node_bytes));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "gpus_per_node", out.gpus_per_node));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "gpus_per_task", out.gpus_per_task));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "mem_per_cpu_bytes", out.mem_per_cpu_bytes));
  HPCQ_RETURN_IF_ERROR(
      read_placement(v, where, out.node_distribution, out.core_distribution, out.cpu_bind));
  std::string numa_policy;
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "numa_policy", numa_policy));
  if (!numa_policy.empty()) {
    auto policy = resource::parse_numa_policy(numa_policy);
    if (!policy.is_ok())
      return invalid_argument(where + ".numa_policy: " + policy.status().message());
    out.numa_policy = *policy;
  }
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "oversubscribe", out.oversubscribe));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "exclusive", out.exclusive));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "gres", out.gres));
  return Status::ok();
}

Status read_value(const json& v, const std::string& where, resource::WorkerPlacement& out) {
  if (!v.is_object()) return invalid_argument(where + ": must be an object");
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "id", out.id));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "group", out.group));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "ranks", out.ranks));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "cores", out.cores));
  return Status::ok();
}

Status read_value(const json& v, const std::string& where, resource::NodeAllocation& out) {
  if (!v.is_object()) return invalid_argument(where + ": must be an object");
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "rank", out.rank));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "node", out.node));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "cores", out.cores));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "numa", out.numa));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "memory_bytes", out.memory_bytes));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "ntasks", out.ntasks));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "first_task", out.first_task));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "gpus", out.gpus));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "gres", out.gres));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "workers", out.workers));
  return Status::ok();
}

// Parses without exceptions: a syntax error yields a discarded value.
Result<json> parse_object(std::string_view text, const std::string& where) {
  json doc = json::parse(text.begin(), text.end(), /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return invalid_argument(where + ": not valid JSON");
  if (!doc.is_object()) return invalid_argument(where + ": must be a JSON object");
  return doc;
}

// Column text must stay valid UTF-8 JSON: user bytes are written by
// bytes_to_json; anything else that is not UTF-8 (a name from an older
// client) becomes U+FFFD instead of making dump() throw.
std::string dump(const json& doc) {
  return doc.dump(/*indent=*/-1, /*indent_char=*/' ', /*ensure_ascii=*/false,
                  json::error_handler_t::replace);
}

}  // namespace

std::string encode_state(job::JobState state) {
  for (const auto& s : kStateNames) {
    if (s.state == state) return s.name;
  }
  // Only reachable with a value cast from outside the enum; keep it decodable
  // as an error rather than inventing a state.
  return "UNKNOWN(" + std::to_string(static_cast<int>(state)) + ")";
}

Result<job::JobState> decode_state(std::string_view name) {
  for (const auto& s : kStateNames) {
    if (name == s.name) return s.state;
  }
  return invalid_argument("unknown job state '" + std::string(name) + "'");
}

std::string encode_spec(const job::JobSpec& spec) {
  json doc = {
      {"name", spec.name},
      {"argv", bytes_to_json(spec.argv)},
      {"script", bytes_to_json(spec.script)},
      {"request",
       {{"nodes", spec.request.nodes},
        {"ntasks", spec.request.ntasks},
        {"cpus_per_task", spec.request.cpus_per_task},
        {"mem_per_node_bytes", spec.request.mem_per_node_bytes}}},
      {"time_limit_s", spec.time_limit_s},
      {"output", bytes_to_json(spec.output)},
      {"error", bytes_to_json(spec.error)},
      {"queue", spec.queue},
      {"cwd", bytes_to_json(spec.cwd)},
      {"env", bytes_to_json(spec.env.vars())},
      {"requeue", spec.requeue},
  };
  // Newer fields are written only when set, so the rows of jobs that do not
  // use them read the same as before.
  if (!spec.account.empty()) doc["account"] = spec.account;
  if (!spec.qos.empty()) doc["qos"] = spec.qos;
  if (spec.priority != 0) doc["priority"] = spec.priority;
  if (!spec.dependencies.empty()) doc["dependency"] = job::format_dependencies(spec.dependencies);
  if (!spec.array.empty()) doc["array"] = spec.array;
  if (spec.array_job_id != 0) {
    doc["array_job_id"] = spec.array_job_id;
    doc["array_task_id"] = spec.array_task_id;
    doc["array_max_running"] = spec.array_max_running;
  }
  if (spec.request.gpus_per_node != 0) doc["request"]["gpus_per_node"] = spec.request.gpus_per_node;
  if (spec.request.gpus_per_task != 0) doc["request"]["gpus_per_task"] = spec.request.gpus_per_task;
  const resource::ResourceRequest& r = spec.request;
  if (r.mem_per_cpu_bytes != 0) doc["request"]["mem_per_cpu_bytes"] = r.mem_per_cpu_bytes;
  if (r.node_distribution != resource::Distribution::kBlock ||
      r.core_distribution != resource::Distribution::kBlock) {
    doc["request"]["distribution"] =
        resource::distribution_text(r.node_distribution, r.core_distribution);
  }
  if (r.cpu_bind != resource::CpuBind::kCores) {
    doc["request"]["cpu_bind"] = resource::cpu_bind_name(r.cpu_bind);
  }
  if (r.numa_policy != resource::NumaPolicy::kBestEffort) {
    doc["request"]["numa_policy"] = resource::numa_policy_name(r.numa_policy);
  }
  if (r.oversubscribe) doc["request"]["oversubscribe"] = true;
  if (r.exclusive) doc["request"]["exclusive"] = true;
  if (!r.gres.empty()) doc["request"]["gres"] = r.gres;
  if (!spec.profile.empty()) doc["profile"] = spec.profile;
  if (!spec.image.empty()) doc["image"] = spec.image;
  if (spec.checkpoint_interval_s != 0) doc["checkpoint_interval_s"] = spec.checkpoint_interval_s;
  if (spec.begin_time_us != 0) doc["begin_time_us"] = spec.begin_time_us;
  if (spec.workers != 0) doc["workers"] = spec.workers;
  if (spec.max_nodes != 0) doc["max_nodes"] = spec.max_nodes;
  if (spec.elastic) doc["elastic"] = true;
  if (spec.batch) doc["batch"] = true;
  if (spec.forward_output) doc["forward_output"] = true;
  if (spec.pty) doc["pty"] = true;
  if (!spec.mpi.empty()) doc["mpi"] = spec.mpi;
  if (spec.warn_signal != 0) {
    doc["warn_signal"] = spec.warn_signal;
    doc["warn_seconds"] = spec.warn_seconds;
  }
  if (!spec.nodelist.empty()) doc["nodelist"] = spec.nodelist;
  if (!spec.exclude.empty()) doc["exclude"] = spec.exclude;
  if (!spec.constraint.empty()) doc["constraint"] = spec.constraint;
  if (spec.ntasks_per_node != 0) doc["ntasks_per_node"] = spec.ntasks_per_node;
  if (!spec.licenses.empty()) doc["licenses"] = spec.licenses;
  if (!spec.submission_key.empty()) doc["submission_key"] = spec.submission_key;
  if (spec.slurm_environment) doc["slurm_environment"] = true;
  if (spec.warn_target != job::WarnTarget::kScriptAndSteps) {
    doc["warn_target"] = job::warn_target_word(spec.warn_target);
  }
  if (spec.deadline_us != 0) doc["deadline_us"] = spec.deadline_us;
  return dump(doc);
}

Result<job::JobSpec> decode_spec(std::string_view text) {
  const std::string where = "spec";
  auto doc = parse_object(text, where);
  if (!doc.is_ok()) return doc.status();
  const json& v = *doc;
  job::JobSpec spec;
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "name", spec.name));
  HPCQ_RETURN_IF_ERROR(read_bytes_field(v, where, "argv", spec.argv));
  HPCQ_RETURN_IF_ERROR(read_bytes_field(v, where, "script", spec.script));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "request", spec.request));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "time_limit_s", spec.time_limit_s));
  HPCQ_RETURN_IF_ERROR(read_bytes_field(v, where, "output", spec.output));
  HPCQ_RETURN_IF_ERROR(read_bytes_field(v, where, "error", spec.error));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "queue", spec.queue));
  HPCQ_RETURN_IF_ERROR(read_bytes_field(v, where, "cwd", spec.cwd));
  job::SharedEnvironment::Map env;
  HPCQ_RETURN_IF_ERROR(read_bytes_field(v, where, "env", env));
  spec.env = std::move(env);
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "requeue", spec.requeue));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "account", spec.account));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "qos", spec.qos));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "priority", spec.priority));
  std::string dependency;
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "dependency", dependency));
  if (!dependency.empty()) {
    auto deps = job::parse_dependencies(dependency);
    if (!deps.is_ok()) return invalid_argument(where + ".dependency: " + deps.status().message());
    spec.dependencies = std::move(deps).value();
  }
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "array", spec.array));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "array_job_id", spec.array_job_id));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "array_task_id", spec.array_task_id));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "array_max_running", spec.array_max_running));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "profile", spec.profile));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "image", spec.image));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "checkpoint_interval_s", spec.checkpoint_interval_s));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "begin_time_us", spec.begin_time_us));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "workers", spec.workers));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "max_nodes", spec.max_nodes));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "elastic", spec.elastic));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "batch", spec.batch));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "forward_output", spec.forward_output));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "pty", spec.pty));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "mpi", spec.mpi));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "warn_signal", spec.warn_signal));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "warn_seconds", spec.warn_seconds));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "nodelist", spec.nodelist));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "exclude", spec.exclude));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "constraint", spec.constraint));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "ntasks_per_node", spec.ntasks_per_node));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "licenses", spec.licenses));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "submission_key", spec.submission_key));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "slurm_environment", spec.slurm_environment));
  std::string warn_target;
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "warn_target", warn_target));
  const auto target = job::parse_warn_target(warn_target);
  if (!target) return invalid_argument(where + ".warn_target: unknown " + quote(warn_target));
  spec.warn_target = *target;
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "deadline_us", spec.deadline_us));
  return spec;
}

std::string encode_allocation(const resource::Allocation& allocation) {
  json nodes = json::array();
  for (const auto& n : allocation.nodes) {
    nodes.push_back({
        {"rank", n.rank},
        {"node", n.node},
        {"cores", n.cores},
        {"numa", n.numa},
        {"memory_bytes", n.memory_bytes},
        {"ntasks", n.ntasks},
        {"first_task", n.first_task},
    });
    if (!n.gpus.empty()) nodes.back()["gpus"] = n.gpus;
    if (!n.gres.empty()) nodes.back()["gres"] = n.gres;
    if (!n.workers.empty()) {
      json workers = json::array();
      for (const resource::WorkerPlacement& w : n.workers) {
        workers.push_back(
            {{"id", w.id}, {"group", w.group}, {"ranks", w.ranks}, {"cores", w.cores}});
      }
      nodes.back()["workers"] = std::move(workers);
    }
  }
  json doc = {{"nodes", std::move(nodes)}, {"cpus_per_task", allocation.cpus_per_task}};
  if (allocation.shared) doc["shared"] = true;
  if (allocation.gpus_per_task != 0) doc["gpus_per_task"] = allocation.gpus_per_task;
  if (allocation.node_distribution != resource::Distribution::kBlock) {
    doc["distribution"] = resource::distribution_name(allocation.node_distribution);
  }
  if (allocation.cpu_bind != resource::CpuBind::kCores) {
    doc["cpu_bind"] = resource::cpu_bind_name(allocation.cpu_bind);
  }
  return dump(doc);
}

Result<resource::Allocation> decode_allocation(std::string_view text) {
  const std::string where = "allocation";
  auto doc = parse_object(text, where);
  if (!doc.is_ok()) return doc.status();
  const json& v = *doc;
  resource::Allocation allocation;
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "nodes", allocation.nodes));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "cpus_per_task", allocation.cpus_per_task));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "shared", allocation.shared));
  HPCQ_RETURN_IF_ERROR(read_field(v, where, "gpus_per_task", allocation.gpus_per_task));
  resource::Distribution unused_core_level = resource::Distribution::kBlock;
  HPCQ_RETURN_IF_ERROR(read_placement(v, where, allocation.node_distribution, unused_core_level,
                                      allocation.cpu_bind));
  return allocation;
}

std::string encode_node_detail(const NodeDetail& detail) {
  return dump(json{{"incarnation", detail.incarnation}});
}

Result<NodeDetail> decode_node_detail(std::string_view text) {
  if (text.empty()) return NodeDetail{};  // a row written before there was a detail
  auto doc = parse_object(text, "node");
  if (!doc.is_ok()) return doc.status();
  NodeDetail detail;
  HPCQ_RETURN_IF_ERROR(read_field(*doc, "node", "incarnation", detail.incarnation));
  return detail;
}

}  // namespace hpcq::store

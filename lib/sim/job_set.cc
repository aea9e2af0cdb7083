#include "lib/sim/job_set.h"

#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "lib/core/units.h"
#include "lib/job/constraint.h"
#include "lib/job/job.h"
#include "lib/sim/granularity_model.h"

namespace hpcq::sim {
namespace {

using Json = nlohmann::json;

const std::set<std::string, std::less<>> kKeys = {
    "id",      "submit_s", "runtime_s",      "requested_s",     "min_nodes",  "max_nodes",
    "elastic", "priority", "cores_per_node", "serial_fraction", "user",       "queue",
    "ranks",   "profile",  "workers",        "class",           "constraint", "licenses",
    "gres"};

// Reads an integer field into `out`; absent leaves it. An error names it.
Status get_int(const Json& entry, const char* key, bool required, std::int64_t* out,
               const std::string& who) {
  const auto it = entry.find(key);
  if (it == entry.end()) {
    return required ? invalid_argument(who + ": " + key + " is missing") : Status::ok();
  }
  if (!it->is_number_integer()) return invalid_argument(who + ": " + key + " is not an integer");
  *out = it->get<std::int64_t>();
  return Status::ok();
}

// ranks (>= 1), profile, workers and class of an MPI job into `job`.
Status mpi_fields(const Json& entry, const std::string& who, std::int64_t ranks, SimJob* job) {
  if (ranks < 1 || ranks > 1'000'000) {
    return invalid_argument(who + ": ranks " + std::to_string(ranks) + " is not >= 1");
  }
  std::int64_t workers = 0;
  HPCQ_RETURN_IF_ERROR(get_int(entry, "workers", false, &workers, who));
  if (workers < 0 || workers > ranks) {
    return invalid_argument(who + ": workers " + std::to_string(workers) + " is not in 0.." +
                            std::to_string(ranks));
  }
  job->workers = static_cast<int>(workers);
  if (const auto it = entry.find("class"); it != entry.end()) {
    const std::optional<MpiClass> c =
        it->is_string() ? parse_mpi_class(it->get<std::string>()) : std::nullopt;
    if (!c) {
      return invalid_argument(who + ": class is not dgemm, stream, fft, rrb or minife");
    }
    job->mpi_class = std::string(mpi_class_name(*c));
    job->profile = class_profile(*c);
  }
  if (const auto it = entry.find("profile"); it != entry.end()) {
    const std::optional<resource::Profile> p =
        it->is_string() ? resource::parse_profile(it->get<std::string>()) : std::nullopt;
    if (!p) return invalid_argument(who + ": profile is not cpu, memory or network");
    job->profile = *p;
  }
  return Status::ok();
}

Result<SimJob> job_of(const Json& entry, const std::string& where_entry) {
  if (!entry.is_object()) return invalid_argument(where_entry + " is not an object");
  for (const auto& [key, value] : entry.items()) {
    if (!kKeys.contains(key)) return invalid_argument(where_entry + ": unknown key " + quote(key));
  }
  std::int64_t id = 0;
  HPCQ_RETURN_IF_ERROR(get_int(entry, "id", true, &id, where_entry));
  if (id <= 0) return invalid_argument(where_entry + ": id " + std::to_string(id) + " is not > 0");
  const std::string who = where_entry + " (job " + std::to_string(id) + ")";
  SimJob job;
  job.id = static_cast<JobId>(id);
  std::int64_t min_nodes = 0;
  std::int64_t max_nodes = -1;
  std::int64_t priority = 0;
  std::int64_t cores = 1;
  std::int64_t requested = -1;
  HPCQ_RETURN_IF_ERROR(get_int(entry, "submit_s", true, &job.submit_s, who));
  HPCQ_RETURN_IF_ERROR(get_int(entry, "runtime_s", true, &job.runtime_s, who));
  HPCQ_RETURN_IF_ERROR(get_int(entry, "requested_s", false, &requested, who));
  std::int64_t ranks = 0;
  HPCQ_RETURN_IF_ERROR(get_int(entry, "ranks", false, &ranks, who));
  // An MPI job of papers/000 (ranks, profile, workers, class) is not on
  // whole nodes: no node range.
  const bool mpi = entry.contains("ranks");
  for (const char* key : {"profile", "workers", "class"}) {
    if (!mpi && entry.contains(key)) return invalid_argument(who + ": " + key + " needs ranks");
  }
  for (const char* key : {"min_nodes", "max_nodes", "cores_per_node", "elastic"}) {
    if (mpi && entry.contains(key)) {
      return invalid_argument(who + ": " + key + " does not go with ranks");
    }
  }
  if (mpi) {
    HPCQ_RETURN_IF_ERROR(mpi_fields(entry, who, ranks, &job));
    min_nodes = 1;
  }
  HPCQ_RETURN_IF_ERROR(get_int(entry, "min_nodes", !mpi, &min_nodes, who));
  HPCQ_RETURN_IF_ERROR(get_int(entry, "max_nodes", false, &max_nodes, who));
  HPCQ_RETURN_IF_ERROR(get_int(entry, "priority", false, &priority, who));
  HPCQ_RETURN_IF_ERROR(get_int(entry, "cores_per_node", false, &cores, who));
  HPCQ_RETURN_IF_ERROR(get_int(entry, "user", false, &job.user, who));
  if (job.submit_s < 0) return invalid_argument(who + ": submit_s is negative");
  if (job.runtime_s < 0) return invalid_argument(who + ": runtime_s is negative");
  if (min_nodes < 1 || min_nodes > 1'000'000) {
    return invalid_argument(who + ": min_nodes " + std::to_string(min_nodes) + " is not >= 1");
  }
  if (max_nodes < 0) max_nodes = min_nodes;
  if (max_nodes < min_nodes || max_nodes > 1'000'000) {
    return invalid_argument(who + ": max_nodes " + std::to_string(max_nodes) +
                            " is below min_nodes " + std::to_string(min_nodes));
  }
  if (cores < 1 || cores > 1'000'000) {
    return invalid_argument(who + ": cores_per_node " + std::to_string(cores) + " is not >= 1");
  }
  if (priority < INT32_MIN || priority > INT32_MAX) {
    return invalid_argument(who + ": priority " + std::to_string(priority) + " is out of range");
  }
  job.requested_s = requested > 0 ? requested : std::max<std::int64_t>(job.runtime_s, 1);
  job.min_nodes = mpi ? 0 : static_cast<int>(min_nodes);
  job.max_nodes = mpi ? 0 : static_cast<int>(max_nodes);
  job.size = mpi ? static_cast<int>(ranks) : static_cast<int>(cores);
  job.priority = static_cast<std::int32_t>(priority);
  if (const auto it = entry.find("elastic"); it != entry.end()) {
    if (!it->is_boolean()) return invalid_argument(who + ": elastic is not true or false");
    job.elastic = it->get<bool>();
  }
  if (const auto it = entry.find("serial_fraction"); it != entry.end()) {
    if (!it->is_number()) return invalid_argument(who + ": serial_fraction is not a number");
    job.serial_fraction = it->get<double>();
    if (!(job.serial_fraction >= 0 && job.serial_fraction <= 1)) {
      return invalid_argument(who + ": serial_fraction is not in [0, 1]");
    }
  }
  if (const auto it = entry.find("queue"); it != entry.end()) {
    if (!it->is_string()) return invalid_argument(who + ": queue is not a string");
    job.queue = it->get<std::string>();
  }
  if (const auto it = entry.find("constraint"); it != entry.end()) {
    if (!it->is_string()) return invalid_argument(who + ": constraint is not a string");
    job.constraint = it->get<std::string>();
    auto parsed = job::parse_constraint(job.constraint);
    if (!parsed.is_ok()) return invalid_argument(who + ": " + parsed.status().message());
  }
  if (const auto it = entry.find("licenses"); it != entry.end()) {
    if (!it->is_string()) {
      return invalid_argument(who + ": licenses is not a string (\"matlab:2,fluent\")");
    }
    auto parsed = job::parse_licenses(it->get<std::string>());
    if (!parsed.is_ok()) return invalid_argument(who + ": " + parsed.status().message());
    job.licenses = std::move(parsed).value();
  }
  if (const auto it = entry.find("gres"); it != entry.end()) {
    if (!it->is_string()) return invalid_argument(who + ": gres is not a string (\"nvme:2,fpga\")");
    auto parsed = job::parse_gres(it->get<std::string>());
    if (!parsed.is_ok()) return invalid_argument(who + ": " + parsed.status().message());
    job.gres = std::move(parsed).value();
  }
  return job;
}

}  // namespace

Result<std::vector<SimJob>> parse_job_set(std::string_view text, std::string_view where) {
  const std::string file(where);
  Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return invalid_argument(file + ": not valid JSON");
  if (!doc.is_array()) return invalid_argument(file + ": not a JSON array of jobs");
  std::vector<SimJob> jobs;
  jobs.reserve(doc.size());
  for (std::size_t i = 0; i < doc.size(); ++i) {
    auto job = job_of(doc[i], file + ": entry " + std::to_string(i + 1));
    if (!job.is_ok()) return job.status();
    jobs.push_back(std::move(job).value());
  }
  return jobs;
}

WeightedTimes priority_weighted(std::span<const SimJob> jobs,
                                std::span<const JobOutcome> outcomes) {
  std::unordered_map<JobId, std::int32_t> priority;
  for (const SimJob& job : jobs) priority[job.id] = job.priority;
  double weight = 0;
  double response = 0;
  double completion = 0;
  for (const JobOutcome& o : outcomes) {
    const auto it = priority.find(o.id);
    if (it == priority.end()) continue;
    const double p = it->second;
    weight += p;
    response += p * static_cast<double>(o.start_s - o.submit_s);
    completion += p * static_cast<double>(o.end_s - o.submit_s);
  }
  if (weight <= 0) return {};
  return {response / weight, completion / weight};
}

}  // namespace hpcq::sim

#include "lib/sim/replay.h"

#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "lib/core/ids.h"
#include "lib/core/site_policy.h"
#include "lib/core/units.h"
#include "lib/resource/allocation.h"
#include "lib/resource/node_pool.h"
#include "lib/resource/topology.h"
#include "lib/sched/scheduler.h"
#include "lib/sched/snapshot.h"
#include "lib/sched/usage.h"

namespace hpcq::sim {
namespace {

using nlohmann::json;

// Field readers: each names the field in its error. The caller prefixes
// "LOG:LINE: ".
Status missing(std::string_view field, std::string_view expected) {
  return invalid_argument("field '" + std::string(field) + "': expected " + std::string(expected));
}

const json* member(const json& o, std::string_view field) {
  auto it = o.find(field);
  return it == o.end() ? nullptr : &*it;
}

Status get(const json& o, std::string_view field, std::int64_t& out) {
  const json* v = member(o, field);
  if (v == nullptr || !v->is_number_integer()) return missing(field, "an integer");
  if (v->is_number_unsigned() &&
      v->get<std::uint64_t>() >
          static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    return missing(field, "an integer that fits 64 bits");
  }
  out = v->get<std::int64_t>();
  return Status::ok();
}

Status get(const json& o, std::string_view field, int& out) {
  std::int64_t v = 0;
  HPCQ_RETURN_IF_ERROR(get(o, field, v));
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    return missing(field, "an integer that fits 32 bits");
  }
  out = static_cast<int>(v);
  return Status::ok();
}

Status get_nonnegative(const json& o, std::string_view field, std::uint64_t& out) {
  std::int64_t v = 0;
  HPCQ_RETURN_IF_ERROR(get(o, field, v));
  if (v < 0) return missing(field, "a non-negative integer");
  out = static_cast<std::uint64_t>(v);
  return Status::ok();
}

Status get_id(const json& o, std::string_view field, JobId& out) {
  std::uint64_t v = 0;
  HPCQ_RETURN_IF_ERROR(get_nonnegative(o, field, v));
  out = static_cast<JobId>(v);
  return Status::ok();
}

Status get_rank(const json& o, std::string_view field, Rank& out) {
  std::int64_t v = 0;
  HPCQ_RETURN_IF_ERROR(get(o, field, v));
  if (v < 0 || v > std::numeric_limits<Rank>::max()) return missing(field, "a rank");
  out = static_cast<Rank>(v);
  return Status::ok();
}

Status get(const json& o, std::string_view field, bool& out) {
  const json* v = member(o, field);
  if (v == nullptr || !v->is_boolean()) return missing(field, "true or false");
  out = v->get<bool>();
  return Status::ok();
}

Status get(const json& o, std::string_view field, std::string& out) {
  const json* v = member(o, field);
  if (v == nullptr || !v->is_string()) return missing(field, "a string");
  out = v->get<std::string>();
  return Status::ok();
}

Status get(const json& o, std::string_view field, std::vector<std::string>& out) {
  const json* v = member(o, field);
  if (v == nullptr || !v->is_array()) return missing(field, "an array of strings");
  out.clear();
  for (const json& e : *v) {
    if (!e.is_string()) return missing(field, "an array of strings");
    out.push_back(e.get<std::string>());
  }
  return Status::ok();
}

Status get(const json& o, std::string_view field, std::vector<int>& out) {
  const json* v = member(o, field);
  if (v == nullptr || !v->is_array()) return missing(field, "an array of integers");
  out.clear();
  for (const json& e : *v) {
    if (!e.is_number_integer()) return missing(field, "an array of integers");
    const std::int64_t n = e.get<std::int64_t>();
    if (n < std::numeric_limits<int>::min() || n > std::numeric_limits<int>::max()) {
      return missing(field, "an array of 32-bit integers");
    }
    out.push_back(static_cast<int>(n));
  }
  return Status::ok();
}

// Optional fields, written only when set: absent leaves `out` as it is.
// Counts by name (licenses, gres): an object of positive integers.
Status get_optional_counts(const json& o, std::string_view field, std::map<std::string, int>& out) {
  const json* v = member(o, field);
  if (v == nullptr) return Status::ok();
  if (!v->is_object()) return missing(field, "an object of counts");
  for (const auto& [name, count] : v->items()) {
    if (!count.is_number_integer() || count.get<std::int64_t>() < 1 ||
        count.get<std::int64_t>() > std::numeric_limits<int>::max()) {
      return missing(std::string(field) + "." + name, "a positive integer");
    }
    out[name] = count.get<int>();
  }
  return Status::ok();
}

Status get_optional_ranks(const json& o, std::string_view field, std::vector<Rank>& out) {
  const json* v = member(o, field);
  if (v == nullptr) return Status::ok();
  if (!v->is_array()) return missing(field, "an array of ranks");
  for (const json& e : *v) {
    if (!e.is_number_unsigned() || e.get<std::uint64_t>() > std::numeric_limits<Rank>::max()) {
      return missing(field, "an array of ranks");
    }
    out.push_back(e.get<Rank>());
  }
  return Status::ok();
}

Status get_objects(const json& o, std::string_view field, const json*& out) {
  const json* v = member(o, field);
  if (v == nullptr || !v->is_array()) return missing(field, "an array of objects");
  for (const json& e : *v) {
    if (!e.is_object()) return missing(field, "an array of objects");
  }
  out = v;
  return Status::ok();
}

Status get_object(const json& o, std::string_view field, const json*& out) {
  const json* v = member(o, field);
  if (v == nullptr || !v->is_object()) return missing(field, "an object");
  out = v;
  return Status::ok();
}

// A field of a nested object, named "outer.inner" in errors.
Status nested(std::string_view outer, Status status) {
  if (status.is_ok()) return status;
  return invalid_argument("field '" + std::string(outer) + "." + status.message().substr(7));
}

Result<resource::NodeTopology> parse_topology(const json& line) {
  const json* t = nullptr;
  HPCQ_RETURN_IF_ERROR(get_object(line, "topology", t));
  resource::NodeTopology topology;
  HPCQ_RETURN_IF_ERROR(nested("topology", get(*t, "packages", topology.packages)));
  HPCQ_RETURN_IF_ERROR(
      nested("topology", get_nonnegative(*t, "memory_bytes", topology.memory_bytes)));
  const json* numa = nullptr;
  HPCQ_RETURN_IF_ERROR(nested("topology", get_objects(*t, "numa", numa)));
  for (const json& d : *numa) {
    resource::NumaDomain domain;
    HPCQ_RETURN_IF_ERROR(nested("topology.numa[]", get(d, "id", domain.id)));
    HPCQ_RETURN_IF_ERROR(nested("topology.numa[]", get(d, "package", domain.package)));
    HPCQ_RETURN_IF_ERROR(
        nested("topology.numa[]", get_nonnegative(d, "memory_bytes", domain.memory_bytes)));
    topology.numa.push_back(domain);
  }
  const json* cores = nullptr;
  HPCQ_RETURN_IF_ERROR(nested("topology", get_objects(*t, "cores", cores)));
  for (const json& c : *cores) {
    resource::Core core;
    HPCQ_RETURN_IF_ERROR(nested("topology.cores[]", get(c, "id", core.id)));
    HPCQ_RETURN_IF_ERROR(nested("topology.cores[]", get(c, "package", core.package)));
    HPCQ_RETURN_IF_ERROR(nested("topology.cores[]", get(c, "numa", core.numa)));
    HPCQ_RETURN_IF_ERROR(nested("topology.cores[]", get(c, "pus", core.pus)));
    topology.cores.push_back(std::move(core));
  }
  topology.source = "decision log";
  return topology;
}

Result<sched::PendingJob> parse_pending(const json& line) {
  sched::PendingJob job;
  std::int64_t uid = 0;
  HPCQ_RETURN_IF_ERROR(get_id(line, "job", job.id));
  HPCQ_RETURN_IF_ERROR(get(line, "uid", uid));
  if (uid < 0 || uid > std::numeric_limits<std::uint32_t>::max()) return missing("uid", "a uid");
  job.uid = static_cast<std::uint32_t>(uid);
  HPCQ_RETURN_IF_ERROR(get(line, "submit_time", job.submit_time));
  const json* r = nullptr;
  HPCQ_RETURN_IF_ERROR(get_object(line, "request", r));
  HPCQ_RETURN_IF_ERROR(nested("request", get(*r, "nodes", job.request.nodes)));
  HPCQ_RETURN_IF_ERROR(nested("request", get(*r, "ntasks", job.request.ntasks)));
  HPCQ_RETURN_IF_ERROR(nested("request", get(*r, "cpus_per_task", job.request.cpus_per_task)));
  HPCQ_RETURN_IF_ERROR(
      nested("request", get_nonnegative(*r, "mem_per_node_bytes", job.request.mem_per_node_bytes)));
  HPCQ_RETURN_IF_ERROR(nested("request", get(*r, "gpus_per_node", job.request.gpus_per_node)));
  HPCQ_RETURN_IF_ERROR(nested("request", get(*r, "gpus_per_task", job.request.gpus_per_task)));
  HPCQ_RETURN_IF_ERROR(nested("request", get_optional_counts(*r, "gres", job.request.gres)));
  HPCQ_RETURN_IF_ERROR(get_optional_ranks(line, "nodelist", job.nodelist));
  HPCQ_RETURN_IF_ERROR(get_optional_counts(line, "licenses", job.licenses));
  HPCQ_RETURN_IF_ERROR(get(line, "time_limit_s", job.time_limit_s));
  HPCQ_RETURN_IF_ERROR(get(line, "queue", job.queue));
  HPCQ_RETURN_IF_ERROR(get(line, "account", job.account));
  HPCQ_RETURN_IF_ERROR(get(line, "qos", job.qos));
  int priority = 0;
  HPCQ_RETURN_IF_ERROR(get(line, "priority", priority));
  job.priority = priority;
  return job;
}

Result<resource::Allocation> parse_allocation(const json& line) {
  resource::Allocation allocation;
  const json* nodes = nullptr;
  HPCQ_RETURN_IF_ERROR(get_objects(line, "allocation", nodes));
  for (const json& n : *nodes) {
    resource::NodeAllocation part;
    HPCQ_RETURN_IF_ERROR(nested("allocation[]", get_rank(n, "rank", part.rank)));
    HPCQ_RETURN_IF_ERROR(nested("allocation[]", get(n, "cores", part.cores)));
    HPCQ_RETURN_IF_ERROR(nested("allocation[]", get(n, "numa", part.numa)));
    HPCQ_RETURN_IF_ERROR(
        nested("allocation[]", get_nonnegative(n, "memory_bytes", part.memory_bytes)));
    HPCQ_RETURN_IF_ERROR(nested("allocation[]", get(n, "gpus", part.gpus)));
    HPCQ_RETURN_IF_ERROR(nested("allocation[]", get(n, "ntasks", part.ntasks)));
    HPCQ_RETURN_IF_ERROR(nested("allocation[]", get(n, "first_task", part.first_task)));
    allocation.nodes.push_back(std::move(part));
  }
  HPCQ_RETURN_IF_ERROR(get(line, "cpus_per_task", allocation.cpus_per_task));
  return allocation;
}

std::string join(const std::vector<int>& v) {
  std::string s;
  for (int x : v) {
    if (!s.empty()) s += ',';
    s += std::to_string(x);
  }
  return s;
}

// The logged fields of an allocation, in order: equal strings, same decision.
std::string describe(const resource::Allocation& a) {
  std::string s;
  for (const resource::NodeAllocation& n : a.nodes) {
    if (!s.empty()) s += ' ';
    s += "rank " + std::to_string(n.rank) + " cores [" + join(n.cores) + "] numa [" + join(n.numa) +
         "]";
    if (n.memory_bytes != 0) s += " mem " + std::to_string(n.memory_bytes);
    if (!n.gpus.empty()) s += " gpus [" + join(n.gpus) + "]";
    s += " tasks " + std::to_string(n.ntasks) + "@" + std::to_string(n.first_task);
  }
  s += " cpus_per_task " + std::to_string(a.cpus_per_task);
  return s;
}

struct Running {
  sched::RunningJob job;
  std::set<Rank> held;  // ranks whose part is still in the pool
};

class Replayer {
 public:
  // One line; Status errors are malformed lines (without the prefix).
  // Returns false when the replay must stop (a difference or a restart).
  Result<bool> line(int number, const std::string& text) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) return true;  // blank
    const json obj = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (obj.is_discarded() || !obj.is_object()) return invalid_argument("not a JSON object");
    std::string type;
    HPCQ_RETURN_IF_ERROR(get(obj, "type", type));
    TimeUs t = 0;
    HPCQ_RETURN_IF_ERROR(get(obj, "t", t));
    if (type == "start") return start(number, obj, t);
    // Any other line closes the cycle before it.
    if (!close_cycle()) return false;
    if (type == "config") {
      if (scheduler_) {
        result_.restart_line = number;
        return false;
      }
      return config(obj);
    }
    if (!scheduler_) return invalid_argument("a '" + type + "' line before the config line");
    if (type == "node") return node(obj);
    if (type == "node_state") return node_state(obj);
    if (type == "node_gone") return node_gone(obj);
    if (type == "queue") return queue(obj);
    if (type == "dequeue") return dequeue(obj);
    if (type == "end") return end(obj, t);
    if (type == "cycle") return cycle(number, obj, t);
    return invalid_argument("field 'type': unknown line type " + quote(type));
  }

  // At the end of the log: the last cycle's missing starts count too.
  ReplayResult finish() {
    close_cycle();
    return result_;
  }

 private:
  Result<bool> config(const json& line) {
    sched::SchedulerConfig config;
    HPCQ_RETURN_IF_ERROR(get(line, "actions", config.actions));
    HPCQ_RETURN_IF_ERROR(get(line, "plugins", config.plugins));
    const json* options = nullptr;
    HPCQ_RETURN_IF_ERROR(get_object(line, "options", options));
    for (const auto& [key, value] : options->items()) {
      if (!value.is_string()) return missing("options." + key, "a string");
      config.options[key] = value.get<std::string>();
    }
    HPCQ_RETURN_IF_ERROR(get(line, "queue_depth", queue_depth_));
    HPCQ_RETURN_IF_ERROR(get_optional_counts(line, "licenses", site_.licenses));
    if (queue_depth_ < 1) return missing("queue_depth", "an integer >= 1");
    auto scheduler = sched::Scheduler::create(config);
    if (!scheduler.is_ok()) return invalid_argument("config: " + scheduler.status().message());
    scheduler_.emplace(std::move(scheduler).value());
    return true;
  }

  Result<bool> node(const json& line) {
    Rank rank = 0;
    std::string name;
    bool schedulable = true;
    HPCQ_RETURN_IF_ERROR(get_rank(line, "rank", rank));
    HPCQ_RETURN_IF_ERROR(get(line, "name", name));
    HPCQ_RETURN_IF_ERROR(get(line, "schedulable", schedulable));
    auto topology = parse_topology(line);
    if (!topology.is_ok()) return topology.status();
    std::map<std::string, int> gres;
    HPCQ_RETURN_IF_ERROR(get_optional_counts(line, "gres", gres));
    Status added = pool_.add_node(rank, name, std::move(topology).value(), schedulable);
    if (added.is_ok()) added = pool_.set_gres(rank, gres);
    if (!added.is_ok()) return invalid_argument("node " + name + ": " + added.message());
    return true;
  }

  Result<bool> node_state(const json& line) {
    Rank rank = 0;
    bool schedulable = true;
    HPCQ_RETURN_IF_ERROR(get_rank(line, "rank", rank));
    HPCQ_RETURN_IF_ERROR(get(line, "schedulable", schedulable));
    if (!pool_.set_schedulable(rank, schedulable)) return not_in_pool(rank);
    return true;
  }

  Result<bool> node_gone(const json& line) {
    Rank rank = 0;
    HPCQ_RETURN_IF_ERROR(get_rank(line, "rank", rank));
    if (!pool_.remove_node(rank)) return not_in_pool(rank);
    for (auto& [id, running] : running_) running.held.erase(rank);
    return true;
  }

  static Status not_in_pool(Rank rank) {
    return invalid_argument("field 'rank': rank " + std::to_string(rank) + " is not in the pool");
  }

  Result<bool> queue(const json& line) {
    auto job = parse_pending(line);
    if (!job.is_ok()) return job.status();
    if (pending_.count(job->id) != 0) return job_state(job->id, "queued twice");
    if (running_.count(job->id) != 0) return job_state(job->id, "queued while running");
    order_.insert({job->submit_time, job->id});
    pending_.emplace(job->id, std::move(job).value());
    return true;
  }

  Result<bool> dequeue(const json& line) {
    JobId id = 0;
    HPCQ_RETURN_IF_ERROR(get_id(line, "job", id));
    auto it = pending_.find(id);
    if (it == pending_.end()) return job_state(id, "is not pending");
    order_.erase({it->second.submit_time, id});
    pending_.erase(it);
    return true;
  }

  Result<bool> end(const json& line, TimeUs t) {
    JobId id = 0;
    HPCQ_RETURN_IF_ERROR(get_id(line, "job", id));
    auto it = running_.find(id);
    if (it == running_.end()) return job_state(id, "is not running");
    Running& running = it->second;
    resource::Allocation held = running.job.allocation;
    std::erase_if(held.nodes, [&](const resource::NodeAllocation& n) {
      return running.held.count(n.rank) == 0;
    });
    Status released = pool_.release(held);
    if (!released.is_ok()) return job_state(id, "cannot be released: " + released.message());
    if (t > running.job.start_time) {
      const double seconds = static_cast<double>(t - running.job.start_time) / 1e6;
      usage_.charge(running.job.uid, running.job.account,
                    running.job.allocation.total_cores() * seconds, t);
    }
    running_.erase(it);
    return true;
  }

  Result<bool> cycle(int number, const json& line, TimeUs t) {
    sched::Snapshot snapshot;
    snapshot.now = t;
    snapshot.pool = &pool_;
    snapshot.site = &site_;
    snapshot.usage = &usage_;
    if (const json* shown = member(line, "queue"); shown != nullptr) {
      if (!shown->is_array()) return missing("queue", "an array of job ids");
      for (const json& e : *shown) {
        if (!e.is_number_unsigned()) return missing("queue", "an array of job ids");
        const JobId id = e.get<JobId>();
        auto it = pending_.find(id);
        if (it == pending_.end()) {
          return invalid_argument("field 'queue': job " + std::to_string(id) + " is not pending");
        }
        snapshot.queue.push_back(it->second);
      }
    } else {
      for (const auto& [submit, id] : order_) {
        if (static_cast<int>(snapshot.queue.size()) == queue_depth_) break;
        snapshot.queue.push_back(pending_.at(id));
      }
    }
    snapshot.running.reserve(running_.size());
    for (const auto& [id, running] : running_) snapshot.running.push_back(running.job);
    sched::Decisions decisions = scheduler_->cycle(snapshot);
    decided_.clear();
    for (sched::Decision& d : decisions.decisions) {
      if (auto* s = std::get_if<sched::Start>(&d)) decided_.push_back(std::move(*s));
    }
    next_ = 0;
    cycle_line_ = number;
    in_cycle_ = true;
    ++result_.cycles;
    return true;
  }

  Result<bool> start(int number, const json& line, TimeUs t) {
    if (!in_cycle_) return invalid_argument("a 'start' line with no 'cycle' line before it");
    JobId id = 0;
    TimeUs end_estimate = 0;
    HPCQ_RETURN_IF_ERROR(get_id(line, "job", id));
    HPCQ_RETURN_IF_ERROR(get(line, "end_estimate", end_estimate));
    auto recorded = parse_allocation(line);
    if (!recorded.is_ok()) return recorded.status();
    auto pending = pending_.find(id);
    if (pending == pending_.end()) return job_state(id, "started but not pending");
    if (next_ >= decided_.size()) {
      return differ(number, "the log starts job " + std::to_string(id) +
                                "; the replayed cycle (line " + std::to_string(cycle_line_) +
                                ") started " + std::to_string(decided_.size()) + " jobs, not more");
    }
    sched::Start& mine = decided_[next_++];
    if (mine.job != id) {
      return differ(number, "the log starts job " + std::to_string(id) + ", the replay job " +
                                std::to_string(mine.job));
    }
    const std::string theirs_text = describe(*recorded);
    const std::string mine_text = describe(mine.allocation);
    if (theirs_text != mine_text) {
      return differ(number, "job " + std::to_string(id) + ": the log gives " + theirs_text +
                                "; the replay gives " + mine_text);
    }
    // Identical in every logged field: apply the replay's own allocation,
    // which also carries what the log leaves out.
    Status taken = pool_.allocate(mine.allocation);
    if (!taken.is_ok()) return job_state(id, "cannot be started: " + taken.message());
    Running running;
    for (const auto& part : mine.allocation.nodes) running.held.insert(part.rank);
    running.job = sched::running_from(pending->second, std::move(mine.allocation), t, end_estimate);
    order_.erase({pending->second.submit_time, id});
    pending_.erase(pending);
    running_.emplace(id, std::move(running));
    ++result_.starts;
    return true;
  }

  // Ends the open cycle; false (and the difference recorded) when the replay
  // started more jobs than the log did.
  bool close_cycle() {
    if (!in_cycle_) return true;
    in_cycle_ = false;
    if (next_ < decided_.size() && result_.identical) {
      differ(cycle_line_, "the replay also starts job " + std::to_string(decided_[next_].job) +
                              " on " + describe(decided_[next_].allocation) + "; the log started " +
                              std::to_string(next_) + " jobs in this cycle");
      return false;
    }
    return true;
  }

  bool differ(int number, std::string what) {
    result_.identical = false;
    result_.difference_line = number;
    result_.difference = std::move(what);
    in_cycle_ = false;
    return false;
  }

  static Status job_state(JobId id, const std::string& what) {
    return invalid_argument("field 'job': job " + std::to_string(id) + " " + what);
  }

  std::optional<sched::Scheduler> scheduler_;
  int queue_depth_ = 0;
  resource::NodePool pool_;
  SitePolicy site_;           // what a config without queues, QOS or accounts gives
  sched::UsageLedger usage_;  // approximate: see the header
  std::map<JobId, sched::PendingJob> pending_;
  std::set<std::pair<TimeUs, JobId>> order_;  // pending, in (submit_time, id) order
  std::map<JobId, Running> running_;          // in id order, as the daemon's running set
  // The open cycle: what the replay decided and how many the log matched.
  bool in_cycle_ = false;
  int cycle_line_ = 0;
  std::vector<sched::Start> decided_;
  std::size_t next_ = 0;
  ReplayResult result_;
};

}  // namespace

std::string format_replay(const ReplayResult& r) {
  std::string s =
      "replayed " + std::to_string(r.cycles) + " cycles, " + std::to_string(r.starts) + " starts: ";
  if (!r.identical) return s + "line " + std::to_string(r.difference_line) + ": " + r.difference;
  s += "identical";
  if (r.restart_line > 0) {
    s += " (replayed up to the restart at line " + std::to_string(r.restart_line) + ")";
  }
  return s;
}

Result<ReplayResult> replay(std::istream& log, const std::string& name) {
  Replayer replayer;
  std::string text;
  int number = 0;
  while (std::getline(log, text)) {
    ++number;
    auto more = replayer.line(number, text);
    if (!more.is_ok()) {
      return invalid_argument(name + ":" + std::to_string(number) + ": " + more.status().message());
    }
    if (!*more) break;
  }
  ReplayResult result = replayer.finish();
  if (number == 0) return invalid_argument(name + ": empty decision log");
  return result;
}

Result<ReplayResult> replay_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return not_found("cannot read decision log " + path);
  return replay(in, path);
}

}  // namespace hpcq::sim

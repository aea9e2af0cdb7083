#include "daemon/decision_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

namespace hpcq::daemon {
namespace {

using nlohmann::json;

json allocation_json(const resource::Allocation& allocation) {
  json nodes = json::array();
  for (const auto& n : allocation.nodes) {
    nodes.push_back({{"rank", n.rank},
                     {"cores", n.cores},
                     {"numa", n.numa},
                     {"memory_bytes", n.memory_bytes},
                     {"gpus", n.gpus},
                     {"ntasks", n.ntasks},
                     {"first_task", n.first_task}});
  }
  return nodes;
}

}  // namespace

Result<std::unique_ptr<DecisionLog>> DecisionLog::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    return invalid_argument("decision log " + path + ": " + std::strerror(errno));
  }
  std::FILE* file = ::fdopen(fd, "a");
  if (file == nullptr) {
    ::close(fd);
    return internal_error("decision log " + path + ": " + std::strerror(errno));
  }
  return std::unique_ptr<DecisionLog>(new DecisionLog(file, path));
}

DecisionLog::~DecisionLog() {
  if (file_ != nullptr) std::fclose(file_);
}

void DecisionLog::write(const std::string& line) {
  if (failed_) return;
  if (std::fputs(line.c_str(), file_) < 0 || std::fputc('\n', file_) == EOF) {
    failed_ = true;
    spdlog::error("decision log {}: write failed ({}); no longer recording", path_,
                  std::strerror(errno));
  }
}

void DecisionLog::flush() {
  if (!failed_ && std::fflush(file_) != 0) {
    failed_ = true;
    spdlog::error("decision log {}: write failed ({}); no longer recording", path_,
                  std::strerror(errno));
  }
}

void DecisionLog::config(TimeUs t, const std::vector<std::string>& actions,
                         const std::vector<std::string>& plugins,
                         const std::map<std::string, std::string>& options, int queue_depth,
                         const std::map<std::string, int>& licenses) {
  json line = {{"t", t},
               {"type", "config"},
               {"actions", actions},
               {"plugins", plugins},
               {"options", options},
               {"queue_depth", queue_depth}};
  if (!licenses.empty()) line["licenses"] = licenses;
  write(line.dump());
  flush();
}

void DecisionLog::node(TimeUs t, Rank rank, const std::string& name, bool schedulable,
                       const resource::NodeTopology& topology,
                       const std::map<std::string, int>& gres) {
  json numa = json::array();
  for (const auto& d : topology.numa) {
    numa.push_back({{"id", d.id}, {"package", d.package}, {"memory_bytes", d.memory_bytes}});
  }
  json cores = json::array();
  for (const auto& c : topology.cores) {
    cores.push_back({{"id", c.id}, {"package", c.package}, {"numa", c.numa}, {"pus", c.pus}});
  }
  json line = {{"t", t},
               {"type", "node"},
               {"rank", rank},
               {"name", name},
               {"schedulable", schedulable},
               {"topology",
                {{"packages", topology.packages},
                 {"memory_bytes", topology.memory_bytes},
                 {"numa", std::move(numa)},
                 {"cores", std::move(cores)}}}};
  if (!gres.empty()) line["gres"] = gres;
  write(line.dump());
}

void DecisionLog::node_state(TimeUs t, Rank rank, bool schedulable) {
  write(
      json{{"t", t}, {"type", "node_state"}, {"rank", rank}, {"schedulable", schedulable}}.dump());
}

void DecisionLog::node_gone(TimeUs t, Rank rank) {
  write(json{{"t", t}, {"type", "node_gone"}, {"rank", rank}}.dump());
}

void DecisionLog::queue(TimeUs t, const job::Job& job, const std::vector<Rank>& eligible) {
  const auto& r = job.spec.request;
  json line = {{"t", t},
               {"type", "queue"},
               {"job", job.id},
               {"uid", job.uid},
               {"submit_time", job.submit_time},
               {"request",
                {{"nodes", r.nodes},
                 {"ntasks", r.ntasks},
                 {"cpus_per_task", r.cpus_per_task},
                 {"mem_per_node_bytes", r.mem_per_node_bytes},
                 {"gpus_per_node", r.gpus_per_node},
                 {"gpus_per_task", r.gpus_per_task}}},
               {"time_limit_s", job.spec.time_limit_s},
               {"queue", job.spec.queue},
               {"account", job.spec.account},
               {"qos", job.spec.qos},
               {"priority", job.spec.priority}};
  // Written only when set: older logs read the same.
  if (!r.gres.empty()) line["request"]["gres"] = r.gres;
  if (!eligible.empty()) line["nodelist"] = eligible;
  if (!job.spec.licenses.empty()) line["licenses"] = job.spec.licenses;
  write(line.dump());
}

void DecisionLog::dequeue(TimeUs t, JobId id) {
  write(json{{"t", t}, {"type", "dequeue"}, {"job", id}}.dump());
}

void DecisionLog::cycle(TimeUs t, const std::vector<JobId>& shown) {
  write(json{{"t", t}, {"type", "cycle"}, {"queue", shown}}.dump());
}

void DecisionLog::start(TimeUs t, JobId id, TimeUs end_estimate,
                        const resource::Allocation& allocation) {
  write(json{{"t", t},
             {"type", "start"},
             {"job", id},
             {"end_estimate", end_estimate},
             {"allocation", allocation_json(allocation)},
             {"cpus_per_task", allocation.cpus_per_task}}
            .dump());
}

void DecisionLog::end(TimeUs t, JobId id) {
  write(json{{"t", t}, {"type", "end"}, {"job", id}}.dump());
}

}  // namespace hpcq::daemon

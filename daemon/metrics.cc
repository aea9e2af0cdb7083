#include "daemon/metrics.h"

#include <prometheus/text_serializer.h>

#include <cctype>
#include <sstream>

#include "daemon/metrics_server.h"

namespace hpcq::daemon {
namespace {

// From half a millisecond to 5 s: a submit's durable answer, a scheduling
// cycle and a store transaction all fall in it.
const prometheus::Histogram::BucketBoundaries kSeconds = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};

}  // namespace

std::string state_label(const char* state_name) {
  std::string label = state_name;
  for (char& c : label) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return label;
}

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      jobs_(prometheus::BuildGauge()
                .Name("hpcq_jobs")
                .Help("Jobs not yet ended, by state and queue")
                .Register(*registry_)),
      starts_(prometheus::BuildCounter()
                  .Name("hpcq_job_starts_total")
                  .Help("Job starts (each attempt), by queue")
                  .Register(*registry_)),
      ends_(prometheus::BuildCounter()
                .Name("hpcq_job_ends_total")
                .Help("Jobs ended, by outcome (completed, failed, cancelled, timeout, node_fail) "
                      "and queue")
                .Register(*registry_)),
      overlay_(prometheus::BuildCounter()
                   .Name("hpcq_overlay_messages_received_total")
                   .Help("Overlay messages hpcqd received from the agents, by type")
                   .Register(*registry_)),
      pmi_fences_(prometheus::BuildCounter()
                      .Name("hpcq_pmi_fences_total")
                      .Help("Fences of MPI worlds across nodes completed (PMI-1 and PMIx); "
                            "the agents combine each subtree's contributions, so hpcqd "
                            "receives a pmi_fence message per child subtree, not per node")
                      .Register(*registry_)
                      .Add({})),
      pmi_fence_parts_(prometheus::BuildCounter()
                           .Name("hpcq_pmi_fence_parts_total")
                           .Help("Nodes' contributions in the pmi_fence messages hpcqd received "
                                 "(more than the messages where agents combined them)")
                           .Register(*registry_)
                           .Add({})),
      nodes_(prometheus::BuildGauge()
                 .Name("hpcq_nodes")
                 .Help("Configured nodes by state (up, unresponsive, drained, down)")
                 .Register(*registry_)),
      cores_(prometheus::BuildGauge()
                 .Name("hpcq_cores")
                 .Help("Cores of the up nodes: allocated, free, or unavailable (drained, "
                       "unresponsive)")
                 .Register(*registry_)),
      gpus_(prometheus::BuildGauge()
                .Name("hpcq_gpus")
                .Help("GPUs of the up nodes: allocated or free")
                .Register(*registry_)),
      node_state_(prometheus::BuildGauge()
                      .Name("hpcq_node_state")
                      .Help("1 for each node's state (up, unresponsive, drained, down), 0 for "
                            "the others ([metrics] per_node)")
                      .Register(*registry_)),
      node_cores_(prometheus::BuildGauge()
                      .Name("hpcq_node_cores")
                      .Help("Each up node's cores: allocated or free ([metrics] per_node)")
                      .Register(*registry_)),
      node_gpus_(prometheus::BuildGauge()
                     .Name("hpcq_node_gpus")
                     .Help("Each up node's GPUs: allocated or free ([metrics] per_node)")
                     .Register(*registry_)),
      node_memory_(prometheus::BuildGauge()
                       .Name("hpcq_node_memory_bytes")
                       .Help("Each up node's memory: allocated to jobs or free ([metrics] "
                             "per_node)")
                       .Register(*registry_)),
      node_jobs_(prometheus::BuildGauge()
                     .Name("hpcq_node_jobs")
                     .Help("Running jobs with a part on each node ([metrics] per_node)")
                     .Register(*registry_)),
      node_heartbeat_age_(prometheus::BuildGauge()
                              .Name("hpcq_node_heartbeat_age_seconds")
                              .Help("Seconds since hpcqd last heard from each node's agent "
                                    "([metrics] per_node)")
                              .Register(*registry_)),
      submit_seconds_(prometheus::BuildHistogram()
                          .Name("hpcq_submit_seconds")
                          .Help("A submit's time from the call to its durable answer")
                          .Register(*registry_)
                          .Add({}, kSeconds)),
      cycle_seconds_(prometheus::BuildHistogram()
                         .Name("hpcq_scheduling_cycle_seconds")
                         .Help("The time of one scheduling cycle")
                         .Register(*registry_)
                         .Add({}, kSeconds)),
      commit_seconds_(prometheus::BuildHistogram()
                          .Name("hpcq_store_commit_seconds")
                          .Help("The time of one SQLite transaction of the store")
                          .Register(*registry_)
                          .Add({}, kSeconds)) {}

Metrics::~Metrics() = default;

Status Metrics::serve(const std::string& listen) {
  // The server's thread collects: the registry and its metrics are safe there.
  auto server = std::make_unique<MetricsServer>([registry = registry_] {
    std::ostringstream text;
    prometheus::TextSerializer().Serialize(text, registry->Collect());
    return text.str();
  });
  if (Status s = server->start(listen); !s.is_ok()) {
    return unavailable("[metrics] " + s.message());
  }
  server_ = std::move(server);
  return Status::ok();
}

int Metrics::port() const { return server_ ? server_->port() : 0; }

void Metrics::job_started(const std::string& queue) { starts_.Add({{"queue", queue}}).Increment(); }

void Metrics::job_ended(const std::string& outcome, const std::string& queue) {
  ends_.Add({{"outcome", outcome}, {"queue", queue}}).Increment();
}

void Metrics::overlay_received(const std::string& type) {
  overlay_.Add({{"type", type}}).Increment();
}

void Metrics::pmi_fence_completed() { pmi_fences_.Increment(); }
void Metrics::pmi_fence_parts(std::size_t parts) {
  pmi_fence_parts_.Increment(static_cast<double>(parts));
}
void Metrics::scheduling_cycle(double seconds) { cycle_seconds_.Observe(seconds); }
void Metrics::submitted(double seconds) { submit_seconds_.Observe(seconds); }
void Metrics::committed(double seconds) { commit_seconds_.Observe(seconds); }

void Metrics::set_state(const StateCounts& counts) {
  // A label set that emptied reads 0 rather than vanishing.
  for (auto& [key, gauge] : job_gauges_) gauge->Set(0);
  for (const auto& [key, value] : counts.jobs) {
    prometheus::Gauge*& gauge = job_gauges_[key];
    if (gauge == nullptr) gauge = &jobs_.Add({{"state", key.first}, {"queue", key.second}});
    gauge->Set(value);
  }
  for (const char* state : {"up", "unresponsive", "drained", "down"}) {
    prometheus::Gauge*& gauge = node_gauges_[state];
    if (gauge == nullptr) gauge = &nodes_.Add({{"state", state}});
    auto it = counts.nodes.find(state);
    gauge->Set(it == counts.nodes.end() ? 0 : it->second);
  }
  cores_.Add({{"state", "allocated"}}).Set(counts.cores_allocated);
  cores_.Add({{"state", "free"}}).Set(counts.cores_free);
  cores_.Add({{"state", "unavailable"}}).Set(counts.cores_unavailable);
  gpus_.Add({{"state", "allocated"}}).Set(counts.gpus_allocated);
  gpus_.Add({{"state", "free"}}).Set(counts.gpus_free);
  for (const auto& [name, node] : counts.per_node) {
    for (const char* state : {"up", "unresponsive", "drained", "down"}) {
      node_state_.Add({{"node", name}, {"state", state}}).Set(node.state == state ? 1 : 0);
    }
    node_cores_.Add({{"node", name}, {"state", "allocated"}}).Set(node.cores_allocated);
    node_cores_.Add({{"node", name}, {"state", "free"}}).Set(node.cores_free);
    node_gpus_.Add({{"node", name}, {"state", "allocated"}}).Set(node.gpus_allocated);
    node_gpus_.Add({{"node", name}, {"state", "free"}}).Set(node.gpus_free);
    node_memory_.Add({{"node", name}, {"state", "allocated"}}).Set(node.memory_allocated);
    node_memory_.Add({{"node", name}, {"state", "free"}}).Set(node.memory_free);
    node_jobs_.Add({{"node", name}}).Set(node.jobs);
    node_heartbeat_age_.Add({{"node", name}}).Set(node.heartbeat_age);
  }
}

}  // namespace hpcq::daemon

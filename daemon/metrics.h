// hpcqd's metrics for Prometheus, through prometheus-cpp: served over HTTP
// at http://[metrics] listen/metrics in Prometheus' text format (0.0.4, what
// prometheus-cpp 1.0 writes), when hpcq.toml(5) sets `[metrics] listen`, by
// a MetricsServer (daemon/metrics_server.h: its own thread, and limits that
// keep idle clients from holding up scrapes).
//
// Counters and histograms are bumped where things happen (the loop thread,
// the API's threads, the store's writer: prometheus-cpp's metrics are
// atomic). The gauges of the cluster's state (jobs by state and queue,
// nodes, cores) are set from a snapshot the loop takes every second
// (`StateCounts`), never read by the HTTP threads from the loop's state.
// With `[metrics] per_node` each node gets its own gauges too (hpcq_node_*,
// labelled with its name): a series per node, which a large cluster may not
// want, hence off by default.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "lib/core/status.h"

namespace hpcq::daemon {

class MetricsServer;

// A job state's name as a label value: "COMPLETED" -> "completed".
std::string state_label(const char* state_name);

// What the loop counts every second for the gauges.
struct StateCounts {
  std::map<std::pair<std::string, std::string>, double> jobs;  // (state, queue) -> jobs
  std::map<std::string, double> nodes;                         // up, down, drained, unresponsive
  double cores_allocated = 0, cores_free = 0, cores_unavailable = 0;
  double gpus_allocated = 0, gpus_free = 0;
  // [metrics] per_node: each node's own figures, by name.
  struct Node {
    std::string state;  // up, unresponsive, drained, down
    double cores_allocated = 0, cores_free = 0;
    double gpus_allocated = 0, gpus_free = 0;
    double memory_allocated = 0, memory_free = 0;  // bytes
    double jobs = 0;                               // running jobs with a part there
    double heartbeat_age = 0;                      // seconds since it was last heard from
  };
  std::map<std::string, Node> per_node;
};

class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Serves /metrics on `listen` ("ADDR:PORT"); an error if it cannot bind.
  Status serve(const std::string& listen);
  bool serving() const { return server_ != nullptr; }
  // The port it listens on (for listen "ADDR:0"); 0 when not serving.
  int port() const;

  // Loop thread.
  void job_started(const std::string& queue);
  void job_ended(const std::string& outcome, const std::string& queue);
  void overlay_received(const std::string& type);
  void pmi_fence_completed();               // an MPI world's fence across nodes
  void pmi_fence_parts(std::size_t parts);  // node contributions in one pmi_fence message
  void scheduling_cycle(double seconds);
  void set_state(const StateCounts& counts);
  // Any thread.
  void submitted(double seconds);  // a submit, from the call to its durable answer
  void committed(double seconds);  // one store transaction

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Gauge>& jobs_;
  prometheus::Family<prometheus::Counter>& starts_;
  prometheus::Family<prometheus::Counter>& ends_;
  prometheus::Family<prometheus::Counter>& overlay_;
  prometheus::Counter& pmi_fences_;
  prometheus::Counter& pmi_fence_parts_;
  prometheus::Family<prometheus::Gauge>& nodes_;
  prometheus::Family<prometheus::Gauge>& cores_;
  prometheus::Family<prometheus::Gauge>& gpus_;
  prometheus::Family<prometheus::Gauge>& node_state_;
  prometheus::Family<prometheus::Gauge>& node_cores_;
  prometheus::Family<prometheus::Gauge>& node_gpus_;
  prometheus::Family<prometheus::Gauge>& node_memory_;
  prometheus::Family<prometheus::Gauge>& node_jobs_;
  prometheus::Family<prometheus::Gauge>& node_heartbeat_age_;
  prometheus::Histogram& submit_seconds_;
  prometheus::Histogram& cycle_seconds_;
  prometheus::Histogram& commit_seconds_;
  // Label sets of the jobs gauge set last time: set to 0 when they empty.
  std::map<std::pair<std::string, std::string>, prometheus::Gauge*> job_gauges_;
  std::map<std::string, prometheus::Gauge*> node_gauges_;
  // Last: stopped (its thread joined) before the metrics it reads go.
  std::unique_ptr<MetricsServer> server_;
};

}  // namespace hpcq::daemon

// Schedule metrics of a simulation, defined as in the published results we
// compare with (../shared/traces/README.md blocks A and B), per job with
// wait = start - submit and run = end - start, in seconds:
//
//   makespan_s   = max end - min submit
//   utilization  = sum(size * run) / (capacity_cores * makespan_s), with
//                  a job's JobOutcome.core_seconds for size * run when set
//                  (a resized job)
//   mean_wait_s, p95_wait_s
//   bsld(tau)    = (wait + run) / max(run, tau)
//   mean_bsld_10 = mean of max(1, bsld(10))   RLScheduler's average bounded
//                  slowdown (job.py / HPCSimPickJobs.py: the max(1, ...) keeps a
//                  job shorter than tau that did not wait from counting < 1)
//   p95_bsld_60  = 95th percentile of bsld(60), NOT clamped to 1, as block A's
//                  Batsim/HPCOpt figures (a job of 30 s that did not wait is 0.5)
//
// Breakdowns per user and per queue (JobOutcome.queue; "" is the default
// queue): jobs, core-seconds, mean wait, mean_bsld_10 and share = the group's
// core-seconds / everyone's (its part of the machine's used time; the shares
// add up to 1 when any work was done).
//
// Percentiles are numpy's default (linear interpolation between closest
// ranks): position p/100 * (n - 1) in the sorted values.
//
// Plain values and pure functions; safe from any thread. No errors: an
// empty job list gives all zeros.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lib/sim/simulator.h"

namespace hpcq::sim {

struct UserMetrics {
  std::int64_t user = -1;
  std::size_t jobs = 0;
  double core_seconds = 0;  // sum of size * run
  double mean_wait_s = 0;
  double mean_bsld_10 = 0;
  double share = 0;  // of all core-seconds
};

struct QueueMetrics {
  std::string queue;  // "" : the default queue
  std::size_t jobs = 0;
  double core_seconds = 0;
  double mean_wait_s = 0;
  double mean_bsld_10 = 0;
  double share = 0;
};

struct Metrics {
  std::size_t jobs = 0;
  std::int64_t makespan_s = 0;
  double utilization = 0;
  double mean_wait_s = 0;
  double p95_wait_s = 0;
  double mean_bsld_10 = 0;
  double p95_bsld_60 = 0;
  std::size_t backfilled = 0;
  std::size_t preempted = 0;         // preemptions (SimResult.preempted; set by the caller)
  std::vector<UserMetrics> users;    // by user id
  std::vector<QueueMetrics> queues;  // by queue name
};

// numpy.percentile(values, p) with the default linear method; 0 when empty.
double percentile(std::vector<double> values, double p);

// (wait + run) / max(run, tau), unclamped.
double bounded_slowdown(std::int64_t wait_s, std::int64_t run_s, std::int64_t tau_s);

Metrics compute_metrics(std::span<const JobOutcome> jobs, std::int64_t capacity_cores);

}  // namespace hpcq::sim

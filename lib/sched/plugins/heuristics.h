// Job-order plugins "sjf", "wfp3", "unicep" and "f1": the priority functions
// of RLScheduler (Zhang et al., SC'20; DIR-LAB/deep-batch-scheduler @
// cd433e3d, HPCSimPickJobs.py), as ../shared/traces/README.md block B states
// them. Each maps a pending job to a score; the smaller score goes first;
// equal scores fall back to the Session's tie-break (submit time, then id).
// With req = the job's time limit in seconds, procs = ntasks * cpus_per_task,
// wait = now - submit in seconds, submit in seconds since the epoch of the
// times given (the trace's origin in the simulator):
//
//   sjf     (req, submit)                       shortest request first
//   wfp3    -(wait / req)^3 * procs             long waits, short and wide jobs first
//   unicep  -(wait + 1e-15) / (log2(procs + 1e-15) * req)
//   f1      log10(req) * procs + 870 * log10(submit)
//
// The 1e-15 terms and the 0.1 that F1 uses for a zero request or submit time
// are theirs, kept so that one-core jobs (log2(1) = 0) and time zero order
// exactly as in their code. A job without a time limit (<= 0) counts as
// 1 s in wfp3 and unicep (theirs never has one: the request falls back to the
// runtime) and 0.1 s in f1, as theirs does.
//
// wfp3 and unicep depend on now: the order is recomputed every cycle (the
// Session sorts once per cycle). F1 was fitted on trace-relative submit times;
// on the daemon's epoch times its second term hardly varies between jobs.
//
// Option (wfp3 and unicep only; "wfp3.wait" / "unicep.wait"):
//   wait  "now" (default): wait = now - submit, as the formulas state.
//         "rlscheduler": wait = -1 - submit, a reproduction of their code,
//         not a policy anyone should use: HPCSimPickJobs.py computes the
//         wait as job.scheduled_time - job.submit_time, and a waiting job's
//         scheduled_time is still -1, so their WFP3 and UNICEP rank by
//         submit time, size and request, never by how long a job waited.
//         (Implemented as the score at now = -1 s, which is exactly that.)
// sjf and f1 take no options. No state between cycles. Called on the
// Scheduler's thread.
#pragma once

#include <memory>
#include <string_view>

#include "lib/core/status.h"
#include "lib/sched/plugin.h"

namespace hpcq::sched {

// The scores, exposed for tests and for the simulator's documentation.
double wfp3_score(const PendingJob& job, TimeUs now);
double unicep_score(const PendingJob& job, TimeUs now);
double f1_score(const PendingJob& job);

class SjfPlugin final : public Plugin {
 public:
  static constexpr std::string_view kName = "sjf";
  std::string_view name() const override { return kName; }
  void on_session_open(Session& session) override;
};

// How wfp3 and unicep measure a job's wait (the "wait" option above).
enum class HeuristicWait { kNow, kRlScheduler };

// Parses the "wait" option of `plugin` ("wfp3" or "unicep", for messages);
// kInvalidArgument naming the option for a bad value or an unknown option.
Result<HeuristicWait> parse_heuristic_wait(std::string_view plugin, const PluginOptions& options);

class Wfp3Plugin final : public Plugin {
 public:
  static constexpr std::string_view kName = "wfp3";
  static Result<std::unique_ptr<Plugin>> create(const PluginOptions& options);
  explicit Wfp3Plugin(HeuristicWait wait = HeuristicWait::kNow) : wait_(wait) {}
  std::string_view name() const override { return kName; }
  void on_session_open(Session& session) override;

 private:
  HeuristicWait wait_;
};

class UnicepPlugin final : public Plugin {
 public:
  static constexpr std::string_view kName = "unicep";
  static Result<std::unique_ptr<Plugin>> create(const PluginOptions& options);
  explicit UnicepPlugin(HeuristicWait wait = HeuristicWait::kNow) : wait_(wait) {}
  std::string_view name() const override { return kName; }
  void on_session_open(Session& session) override;

 private:
  HeuristicWait wait_;
};

class F1Plugin final : public Plugin {
 public:
  static constexpr std::string_view kName = "f1";
  std::string_view name() const override { return kName; }
  void on_session_open(Session& session) override;
};

}  // namespace hpcq::sched

#include "lib/sched/plugins/heuristics.h"

#include <cmath>
#include <memory>
#include <string>

namespace hpcq::sched {
namespace {

double procs_of(const PendingJob& job) {
  return static_cast<double>(job.request.ntasks) * static_cast<double>(job.request.cpus_per_task);
}

double seconds(TimeUs us) { return static_cast<double>(us) / static_cast<double>(kUsPerSecond); }

double wait_s(const PendingJob& job, TimeUs now) { return seconds(now - job.submit_time); }

// wfp3 and unicep divide by the request: a job without one counts as 1 s.
double request_s(const PendingJob& job) {
  return job.time_limit_s > 0 ? static_cast<double>(job.time_limit_s) : 1.0;
}

int compare(double a, double b) {
  if (a < b) return -1;
  if (a > b) return 1;
  return 0;  // equal (or NaN): the Session's tie-break decides
}

// Their waiting job's scheduled_time is -1 (seconds): scoring at that
// "now" gives their wait, -1 - submit.
constexpr TimeUs kRlSchedulerNow = -kUsPerSecond;

// Registers "smaller score first" for a score that depends on now.
template <typename Score>
void add_score_order(Session& session, std::string_view name, Score score,
                     HeuristicWait wait = HeuristicWait::kNow) {
  const TimeUs now = wait == HeuristicWait::kRlScheduler ? kRlSchedulerNow : session.now();
  session.add_job_order(std::string(name), [now, score](const PendingJob& a, const PendingJob& b) {
    return compare(score(a, now), score(b, now));
  });
}

}  // namespace

double wfp3_score(const PendingJob& job, TimeUs now) {
  return -std::pow(wait_s(job, now) / request_s(job), 3) * procs_of(job);
}

double unicep_score(const PendingJob& job, TimeUs now) {
  return -(wait_s(job, now) + 1e-15) / (std::log2(procs_of(job) + 1e-15) * request_s(job));
}

double f1_score(const PendingJob& job) {
  const double req = job.time_limit_s > 0 ? static_cast<double>(job.time_limit_s) : 0.1;
  const double submit = job.submit_time > 0 ? seconds(job.submit_time) : 0.1;
  return std::log10(req) * procs_of(job) + 870.0 * std::log10(submit);
}

void SjfPlugin::on_session_open(Session& session) {
  // Ties in the request fall to the Session's (submit, id) order, which is
  // their (request, submit) key with the id added.
  session.add_job_order(std::string(kName), [](const PendingJob& a, const PendingJob& b) {
    if (a.time_limit_s == b.time_limit_s) return 0;
    // No limit is the longest request.
    if (a.time_limit_s <= 0) return 1;
    if (b.time_limit_s <= 0) return -1;
    return a.time_limit_s < b.time_limit_s ? -1 : 1;
  });
}

Result<HeuristicWait> parse_heuristic_wait(std::string_view plugin, const PluginOptions& options) {
  HeuristicWait wait = HeuristicWait::kNow;
  for (const auto& [name, value] : options) {
    const std::string key = "scheduler option '" + std::string(plugin) + "." + name + "'";
    if (name != "wait") return invalid_argument("unknown " + key + " (known: wait)");
    if (value == "now") {
      wait = HeuristicWait::kNow;
    } else if (value == "rlscheduler") {
      wait = HeuristicWait::kRlScheduler;
    } else {
      return invalid_argument(key + ": '" + value + "' is not now or rlscheduler");
    }
  }
  return wait;
}

Result<std::unique_ptr<Plugin>> Wfp3Plugin::create(const PluginOptions& options) {
  auto wait = parse_heuristic_wait(kName, options);
  if (!wait.is_ok()) return wait.status();
  return std::unique_ptr<Plugin>(std::make_unique<Wfp3Plugin>(*wait));
}

Result<std::unique_ptr<Plugin>> UnicepPlugin::create(const PluginOptions& options) {
  auto wait = parse_heuristic_wait(kName, options);
  if (!wait.is_ok()) return wait.status();
  return std::unique_ptr<Plugin>(std::make_unique<UnicepPlugin>(*wait));
}

void Wfp3Plugin::on_session_open(Session& session) {
  add_score_order(session, kName, &wfp3_score, wait_);
}

void UnicepPlugin::on_session_open(Session& session) {
  add_score_order(session, kName, &unicep_score, wait_);
}

void F1Plugin::on_session_open(Session& session) {
  add_score_order(session, kName, [](const PendingJob& job, TimeUs) { return f1_score(job); });
}

}  // namespace hpcq::sched

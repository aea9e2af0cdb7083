// The site's programs on this node ([agent] prolog, epilog and health_check
// in hpcq.toml(5)): the prolog before a job's part starts, the epilog after
// it ends (launches held meanwhile), the health check on a timer, and the
// NodeCheck verdicts sent to the leader (an epilog's failure until it is
// acknowledged). The programs themselves run in NodeScripts.
#include <spdlog/spdlog.h>

#include "agent/agent.h"
#include "lib/overlay/messages.h"

namespace hpcq::agent {

ScriptEnv Agent::script_env(JobId id, const JobLaunch& job) const {
  if (config_.agent_prolog.empty() && config_.agent_epilog.empty()) return {};
  // Slurm's prolog and epilog environment, with HPCQ_ names.
  auto nodelist = job.env.find("HPCQ_NODELIST");
  return {{"HPCQ_JOB_ID", std::to_string(id)},
          {"HPCQ_JOB_UID", std::to_string(job.uid)},
          {"HPCQ_JOB_GID", std::to_string(job.gid)},
          {"HPCQ_JOB_USER", job.user},
          {"HPCQ_JOB_NODELIST", nodelist == job.env.end() ? "" : nodelist->second},
          {"HPCQ_NODENAME", config_.ranks[options_.rank].name},
          {"HPCQ_SCRIPT_CONTEXT", "prolog"}};
}

void Agent::run_prolog_then_start(const overlay::Launch& launch, JobLaunch job) {
  const JobId id = launch.job_id();
  if (config_.agent_prolog.empty()) return start_part(launch, std::move(job));
  ScriptEnv env = script_env(id, job);
  parts_.start_prolog(launch, env);
  scripts_.run(
      config_.agent_prolog, env, std::chrono::seconds(config_.agent_script_timeout_s),
      [this, id, attempt = launch.attempt(), job = std::move(job)](const ScriptOutcome& outcome) {
        std::optional<overlay::Launch> launch = parts_.prolog_ended(id, attempt, outcome.ok());
        if (!launch) return;  // cancelled meanwhile
        if (outcome.ok()) return start_part(*launch, job);
        // Not the job's failure: it is requeued and the node drained.
        const std::string why = std::string(overlay::kNodeErrorReason) + ": " +
                                outcome.describe("prolog", config_.agent_prolog);
        spdlog::warn("job {}: {}", id, why);
        report(id, attempt, overlay::JobUpdate::FAILED, 1, why, launch->part());
      });
}

void Agent::run_epilog(JobId id, ScriptEnv env) {
  if (config_.agent_epilog.empty()) return;
  if (env.empty()) {
    // A part this agent adopted after its restart: what it knows of it.
    env = {{"HPCQ_JOB_ID", std::to_string(id)},
           {"HPCQ_NODENAME", config_.ranks[options_.rank].name}};
  }
  env["HPCQ_SCRIPT_CONTEXT"] = "epilog";
  parts_.epilog_began();
  scripts_.run(config_.agent_epilog, env, std::chrono::seconds(config_.agent_script_timeout_s),
               [this, id](const ScriptOutcome& outcome) {
                 if (!outcome.ok()) {
                   const std::string why = outcome.describe("epilog", config_.agent_epilog) +
                                           " (job " + std::to_string(id) + ")";
                   spdlog::warn("agent: {}", why);
                   send_node_check(overlay::NodeCheck::EPILOG, why);
                 }
                 // As Slurm's COMPLETING node, this node started no new job
                 // until its last epilog ended.
                 for (const overlay::Launch& held : parts_.epilog_ended()) on_launch(held);
               });
}

void Agent::run_health_check() {
  if (health_check_running_) return;  // a slow one is not run twice at once
  health_check_running_ = true;
  const std::map<std::string, std::string> env = {
      {"HPCQ_NODENAME", config_.ranks[options_.rank].name},
      {"HPCQ_SCRIPT_CONTEXT", "health_check"}};
  scripts_.run(config_.agent_health_check, env,
               std::chrono::seconds(config_.agent_script_timeout_s),
               [this](const ScriptOutcome& outcome) {
                 health_check_running_ = false;
                 const std::string why =
                     outcome.ok() ? ""
                                  : outcome.describe(std::string(overlay::kHealthCheckReason),
                                                     config_.agent_health_check);
                 if (!why.empty()) spdlog::warn("agent: {}", why);
                 send_node_check(overlay::NodeCheck::HEALTH_CHECK, why);
               });
}

void Agent::send_node_check(overlay::NodeCheck::Source source, const std::string& failure) {
  overlay::Envelope envelope;
  envelope.set_dst(0);
  overlay::NodeCheck* check = envelope.mutable_node_check();
  check->set_source(source);
  check->set_failed(!failure.empty());
  check->set_reason(failure);
  if (source == overlay::NodeCheck::EPILOG) {
    check->set_seq(next_check_seq_++);
    unacknowledged_checks_[check->seq()] = *check;
  }
  Status s = overlay_->send(std::move(envelope));
  if (!s.is_ok()) spdlog::debug("node check: {}", s.message());
}

void Agent::repeat_unacknowledged_checks() {
  for (const auto& [seq, check] : unacknowledged_checks_) {
    overlay::Envelope again;
    again.set_dst(0);
    *again.mutable_node_check() = check;
    (void)overlay_->send(std::move(again));
  }
}

}  // namespace hpcq::agent

// What agents report of the jobs' parts (overlay JobUpdate): a part
// STARTED, or ended COMPLETED, FAILED, CANCELLED or TIMEOUT. Stale reports
// (an earlier attempt, a part a resize took away) are told apart here; the
// rest go to the job table, and once no part runs the job ends or is
// requeued. Every report is acknowledged to its agent only after what it
// changed is committed, so an acknowledged end is never lost. Agents also
// send the output of hpcq run's tasks (overlay Output), kept in ctx.output.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "daemon/context.h"
#include "daemon/job_actions.h"
#include "daemon/resizes.h"
#include "daemon/steps.h"

namespace hpcq::daemon {

class JobReports {
 public:
  JobReports(Context& ctx, JobActions& actions, Resizes& resizes, Steps& steps)
      : ctx_(ctx), actions_(actions), resizes_(resizes), steps_(steps) {}
  ~JobReports();
  // Once the overlay is up (loop thread): sends JobOutput's grants as they
  // fall due (posted to the loop), and each heartbeat again those the
  // agents may not have had.
  void start();
  JobReports(const JobReports&) = delete;
  JobReports& operator=(const JobReports&) = delete;

  // Returns why the node should be drained: it could not start the job (the
  // job is requeued), which says more of the node than of the job.
  std::optional<std::string> on_job_update(Rank rank, const overlay::JobUpdate& update);
  void on_output(Rank rank, overlay::Output&& output);

 private:
  std::optional<std::string> handle_job_update(Rank rank, const overlay::JobUpdate& update);
  void ack_after_commit(Rank rank, const overlay::JobUpdate& update);
  void send_output_credit();  // JobOutput's grants, as OutputCredit to their nodes

  Context& ctx_;
  JobActions& actions_;
  Resizes& resizes_;
  Steps& steps_;
};

}  // namespace hpcq::daemon

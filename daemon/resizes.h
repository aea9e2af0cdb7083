// Elastic resizes (hpcq issue 7; the protocol is in overlay.proto, message
// Resize): asked by hpcq resize or the scheduler's "elastic" action, told to
// the application through its first node, and finished when it answers or
// times out. A node lost under an elastic job shrinks it instead of ending
// it. Owns JobEntry::resizing, removing and part_of.
#pragma once

#include <future>
#include <memory>
#include <string>
#include <vector>

#include "daemon/context.h"
#include "daemon/job_actions.h"

namespace hpcq::daemon {

using ResizePromise = std::shared_ptr<std::promise<Result<job::ResizeRecord>>>;

class Resizes {
 public:
  Resizes(Context& ctx, JobActions& actions) : ctx_(ctx), actions_(actions) {}
  Resizes(const Resizes&) = delete;
  Resizes& operator=(const Resizes&) = delete;

  // hpcq resize: the running elastic job to `nodes` nodes within its range;
  // `promise` gets the record once the application has answered or the
  // resize timed out, or the error at once.
  void request(JobEntry& entry, int nodes, ResizePromise promise);
  // Why the job cannot start a resize now; empty when it can.
  std::string blocked(const JobEntry& entry) const;
  // Each returns an error (and changes nothing) when the job cannot be
  // resized now.
  Status begin_shrink(JobEntry& entry, const std::vector<Rank>& ranks, job::ResizeBy by,
                      ResizePromise promise);
  Status begin_expand(JobEntry& entry, resource::Allocation added, job::ResizeBy by,
                      ResizePromise promise);
  void on_resize_done(Rank rank, const overlay::ResizeDone& done);
  // A part's report, before the job's own handling: true when it was a
  // resize's (a part taken away has ended, or an added part failed to
  // start). A part STARTED on an added node may complete an expansion.
  bool on_part_update(JobEntry& entry, Rank rank, const overlay::JobUpdate& update);
  void on_part_started(JobEntry& entry);
  // Node `node` of the running job is down: an expansion onto it fails; a
  // part taken away or an elastic job that can do without it is handled
  // here (true); otherwise the job loses the part as a rigid one (false).
  bool on_node_lost(JobEntry& entry, const NodeEntry& node);
  // An elastic job above its minimum whose part on a dead node is gone goes
  // on without it (see the definition); false when this does not apply.
  bool lose_elastic_part(JobEntry& entry, Rank rank, const std::string& node_name);
  // Asks every elastic job that runs on `rank` (and could do without it) to
  // shrink off it; a job that declines keeps running there, as a rigid job
  // does on a drained node.
  void shrink_off(Rank rank, job::ResizeBy by);
  // The job's run ended: a resize in flight fails.
  void on_run_end(JobEntry& entry);
  // Every heartbeat: resizes past their deadline; parts taken away told
  // again until each reports its end.
  void check_deadlines();

 private:
  // A resize of the job's current allocation to `after`, numbered and
  // recorded (time, from, to, kind, by).
  JobEntry::Resizing resizing_to(JobEntry& entry, resource::Allocation after, job::ResizeKind kind,
                                 job::ResizeBy by) const;
  void send_resize_notice(JobEntry& entry);
  // Carries out what settles the resize in flight (the allocation kept,
  // parts taken away, or the expansion undone), then records it (store
  // too) and answers hpcq resize.
  void settle(JobEntry& entry, const job::ResizeEnd& end, double answer_seconds);
  // The application's own timeout for an answer (hpcq.toml).
  TimeUs resize_timeout() const;
  // Kills the job's parts on `ranks` (taken from its current allocation)
  // without ending the job; see JobEntry::removing.
  void take_parts_away(JobEntry& entry, const std::vector<Rank>& ranks);
  void send_part_kill(JobEntry& entry, Rank rank);

  Context& ctx_;
  JobActions& actions_;
};

}  // namespace hpcq::daemon

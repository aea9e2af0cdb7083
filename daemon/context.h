// What every room of hpcqd shares (flux-core's job-manager context): the
// configuration, the loop, the job table, the nodes, the resource pool, the
// store's writer, the overlay, the watch stream, hpcq run's output, the decision log and the
// fair-share ledger. The leader owns it and builds the rooms on it; each
// room owns its own protocol's state and meets the others here.
//
// One event-loop thread uses all of it (STYLE.md rule 5).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/decision_log.h"
#include "daemon/job_entry.h"
#include "daemon/job_events.h"
#include "daemon/job_output.h"
#include "daemon/metrics.h"
#include "daemon/node_entry.h"
#include "daemon/reservations.h"
#include "daemon/submit_policy.h"
#include "lib/core/clock.h"
#include "lib/core/config.h"
#include "lib/job/submission_keys.h"
#include "lib/overlay/event_loop.h"
#include "lib/overlay/overlay.h"
#include "lib/resource/node_pool.h"
#include "lib/sched/usage.h"
#include "lib/store/group_commit.h"

namespace hpcq::daemon {

struct Context {
  explicit Context(const ClusterConfig& cluster)
      : config(cluster), usage(cluster.usage_half_life_s) {}

  TimeUs now() const { return wall_clock_now(); }

  const ClusterConfig config;
  overlay::EventLoop loop;
  std::unique_ptr<store::GroupCommitter> committer;
  std::unique_ptr<overlay::Overlay> overlay;
  resource::NodePool pool;
  // Event numbers start at this run's start time in microseconds: above
  // every number an earlier run handed out.
  JobEvents events{100000, static_cast<std::uint64_t>(wall_clock_now())};
  // hpcq run's output: 8 MiB per job; the last 64 ended jobs' kept.
  JobOutput output{8 << 20, 64};
  JobTable table;
  NodeMap nodes;
  // Every configured node's shape by rank - 1, for check_fits
  // (daemon/submit_policy.h): kept as Hellos arrive, not rebuilt per submit.
  std::vector<std::optional<NodeShape>> node_shapes;
  std::map<std::string, Reservation> reservations;
  std::unique_ptr<DecisionLog> decision_log;  // null unless configured
  sched::UsageLedger usage;
  bool usage_dirty = false;  // changed since it was last stored
  // Jobs submitted with the same environment share one copy of it.
  job::EnvironmentPool environments;
  // Submissions' idempotency keys: a repeat is answered with the jobs the
  // first made (filled from the stored jobs at a start).
  job::SubmissionKeys submission_keys;
  // What Prometheus scrapes ([metrics] listen); counted whether served or not.
  Metrics metrics;
};

}  // namespace hpcq::daemon

// Replays hpcqd's decision log (daemon/decision_log.h, [scheduler]
// decision_log in hpcq.toml) through the same lib/sched Scheduler and checks
// that it decides the same: `hpcq simulate --replay LOG`.
//
// The log is JSON lines, every time an integer in microseconds ("t"):
//   config      actions, plugins, options, queue_depth, licenses {name:
//               count} where [licenses] has any: builds the Scheduler.
//               A second config line means the daemon restarted: the replay
//               stops there (ReplayResult.restart_line), since the state
//               before a restart is not in the log.
//   node        rank, name, schedulable, topology {packages, memory_bytes,
//               numa [{id, package, memory_bytes}], cores [{id, package,
//               numa, pus}]}, gres {name: count} (where it has any): the
//               node joins the pool.
//   node_state  rank, schedulable (drain, down, resume).
//   node_gone   rank: the node leaves the pool; running jobs keep their
//               other parts.
//   queue       job, uid, submit_time, request {nodes, ntasks, cpus_per_task,
//               mem_per_node_bytes, gpus_per_node, gpus_per_task, gres
//               {name: count} where asked}, time_limit_s, queue, account,
//               qos, priority, and where set nodelist (the ranks it may run
//               on: its queue's nodes, -w, -x and -C as hpcqd resolved them)
//               and licenses {name: count}: the job is pending (submit,
//               release, requeue).
//   dequeue     job: a pending job leaves the queue without starting.
//   cycle       a cycle ran at now = t. "queue": [ids], when present, is the
//               pending jobs it was shown, in order (the daemon leaves out
//               array tasks beyond their throttle); without it the replay
//               shows the first queue_depth pending jobs in (submit_time,
//               id) order. Running jobs are shown with their end_estimate.
//   start       job, end_estimate, allocation [{rank, cores, numa,
//               memory_bytes, gpus, ntasks, first_task}], cpus_per_task: a
//               Start of the cycle line before it, in the order decided.
//   end         job: a running job's resources are released.
// At each cycle line the replay runs the Scheduler on the state rebuilt so
// far and compares its Start decisions, in order, with the start lines that
// follow (job id, then every logged field of the allocation); the first
// difference ends the replay. Reserve and Preempt decisions are not logged
// and not compared (a preemption shows up later as end and queue lines).
//
// What the log does not hold, the replay cannot see: the site's queues, QOS
// and accounts (a default SitePolicy is used), advance reservations (none),
// request fields beyond those listed (memory per cpu, distribution,
// binding, oversubscribe: defaults) and the exact usage the daemon charged
// (the replay charges each job's cores x (end line t - start line t) with
// the default 7-day half-life, which the daemon's own charge at the agent's
// end time only approximates). Replays are exact for configurations whose
// decisions do not depend on those: e.g. fcfs/sjf with allocate and
// backfill and no [[queue]], [[qos]] or reservations.
//
// The parser is strict: every line must be a JSON object with a known
// "type" and each listed field present with its type; a line that does not
// fit the state (a start for a job not pending, an end for a job not
// running, a rank not in the pool, a start with no cycle before it) is
// malformed too. Fields not listed are ignored, so the daemon may add some.
//
// Pure apart from replay_file() reading its file; one thread.
// Errors: kInvalidArgument "LOG:LINE: what" for a malformed line (the field
// it is about named), or a config the Scheduler rejects; kNotFound when the
// file cannot be opened. A difference is not an error: it is a result.
#pragma once

#include <cstddef>
#include <istream>
#include <string>

#include "lib/core/status.h"

namespace hpcq::sim {

struct ReplayResult {
  std::size_t cycles = 0;  // cycle lines replayed
  std::size_t starts = 0;  // start lines compared (and found identical)
  bool identical = true;
  int difference_line = 0;  // the first differing line, when !identical
  std::string difference;   // what differs, one line (no line number)
  int restart_line = 0;     // a later config line (daemon restart) stopped the replay; 0: none
};

// "replayed N cycles, M starts: identical" (+ " (replayed up to the restart
// at line L)"), or "replayed N cycles, M starts: line L: <difference>".
std::string format_replay(const ReplayResult& result);

// `name` is used in error messages ("name:line: ...").
Result<ReplayResult> replay(std::istream& log, const std::string& name);
Result<ReplayResult> replay_file(const std::string& path);

}  // namespace hpcq::sim

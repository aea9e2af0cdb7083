// A record of what hpcqd's scheduler saw and decided, one JSON object per
// line, so that `hpcq simulate --replay FILE` can run the same scheduler over
// the same inputs and check it decides the same (lib/sim/replay.h has the
// format). Lines: config (once), node / node_state / node_gone (the pool),
// queue / dequeue (the pending set), cycle (now, and the pending jobs the
// cycle was shown, in order), start (a decision applied), end (a job's
// resources released). Times are microseconds.
//
// Opt-in ([scheduler] decision_log in hpcq.toml): it costs a line per event
// and a list of the shown queue per cycle. Loop thread only. Write errors are
// logged once and the log stops; the scheduler never waits on it.
#pragma once

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/core/ids.h"
#include "lib/core/status.h"
#include "lib/job/job.h"
#include "lib/resource/allocation.h"
#include "lib/resource/topology.h"

namespace hpcq::daemon {

class DecisionLog {
 public:
  // Appends to `path` (created 0600 if missing).
  static Result<std::unique_ptr<DecisionLog>> open(const std::string& path);
  ~DecisionLog();
  DecisionLog(const DecisionLog&) = delete;
  DecisionLog& operator=(const DecisionLog&) = delete;

  void config(TimeUs t, const std::vector<std::string>& actions,
              const std::vector<std::string>& plugins,
              const std::map<std::string, std::string>& options, int queue_depth,
              const std::map<std::string, int>& licenses);
  void node(TimeUs t, Rank rank, const std::string& name, bool schedulable,
            const resource::NodeTopology& topology, const std::map<std::string, int>& gres);
  void node_state(TimeUs t, Rank rank, bool schedulable);
  void node_gone(TimeUs t, Rank rank);
  // `eligible`: the ranks the job may run on (PendingJob::nodelist; empty: any).
  void queue(TimeUs t, const job::Job& job, const std::vector<Rank>& eligible);
  void dequeue(TimeUs t, JobId id);
  void cycle(TimeUs t, const std::vector<JobId>& shown);
  void start(TimeUs t, JobId id, TimeUs end_estimate, const resource::Allocation& allocation);
  void end(TimeUs t, JobId id);
  // Pushes buffered lines to the file (after each cycle).
  void flush();

 private:
  explicit DecisionLog(std::FILE* file, std::string path) : file_(file), path_(std::move(path)) {}
  void write(const std::string& line);

  std::FILE* file_;
  std::string path_;
  bool failed_ = false;
};

}  // namespace hpcq::daemon

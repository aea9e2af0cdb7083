// The ends of jobs this agent reported and the leader has not acknowledged
// yet, kept in memory and on disk (<state_dir>/ends/) until the ack comes, so
// that no end is lost across a leader restart, a long partition, or a
// restart of the agent itself. Every Hello repeats them, oldest first.
//
// One file per end, "<seq>-<job>.pb" (the serialized JobUpdate), written to a
// temporary name, fsynced and renamed, so that a crash leaves either the
// whole record or none; the seq keeps the order across restarts. Bounded by
// the jobs that ended while the leader was not listening; a job (and each of
// its steps) has at most one entry (a later attempt's end replaces an
// earlier one).
//
// Loop thread only. Errors: open() fails with kInternal when the directory
// cannot be made or read; add() returns the write error (the end is still
// kept in memory and sent).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/core/ids.h"
#include "lib/core/status.h"
#include "proto/overlay.pb.h"

namespace hpcq::agent {

class EndJournal {
 public:
  // Loads what an earlier run left in `dir` (created if missing); files that
  // do not parse are logged and removed.
  static Result<std::unique_ptr<EndJournal>> open(const std::string& dir);

  Status add(const overlay::JobUpdate& update);
  // The leader has recorded this end; forgets it when the attempt matches.
  void ack(JobId job, std::uint32_t attempt, std::uint32_t step = 0);
  // Oldest first.
  std::vector<overlay::JobUpdate> entries() const;
  std::size_t size() const { return by_seq_.size(); }

 private:
  explicit EndJournal(std::string dir) : dir_(std::move(dir)) {}
  using Key = std::pair<JobId, std::uint32_t>;  // a job, or one of its steps
  static Key key_of(const overlay::JobUpdate& u) { return {u.job_id(), u.step()}; }
  std::string path_of(std::uint64_t seq, const overlay::JobUpdate& update) const;
  void remove(std::uint64_t seq);

  std::string dir_;
  std::uint64_t next_seq_ = 1;
  std::map<std::uint64_t, overlay::JobUpdate> by_seq_;
  std::map<Key, std::uint64_t> seq_of_job_;
};

}  // namespace hpcq::agent

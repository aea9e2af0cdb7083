// The ends of jobs this agent reported and the leader has not acknowledged
// yet, kept in memory and on disk (<state_dir>/ends/) until the ack comes, so
// that no end is lost across a leader restart, a long partition, or a
// restart of the agent itself. Every Hello repeats them, oldest first.
//
// One append-only file, <dir>/journal. An end is a record appended and
// fdatasync'd before add() returns. An acknowledgement appends a record that
// forgets it, not synced: one lost to a crash only sends that end once more,
// which the leader takes as a repeat. Past compact_bytes the file is emptied,
// or rewritten with the live ends alone. (One file per end, as before, cost
// the agent more than the job itself: a create, rename and unlink each, and
// ext4 searched its inode bitmaps past the recently deleted on every create.)
//
// A record: u32 body length, u32 FNV-1a of the body, then the body: a kind
// ('E' an end, 'F' forget), the u64 seq that orders the ends across restarts,
// and for an end the serialized JobUpdate. A crash mid-append leaves a tail
// whose length or checksum does not hold; open() cuts it off. Damage in the
// middle (the disk's) loses only the records it hits: open() finds the next
// whole record after it and rewrites the file without it. It also takes in
// the one file per end ("<seq>-<job>.pb") an older agent left.
//
// A job (and each of its steps) has at most one entry: a later attempt's end
// replaces an earlier one. Loop thread only. Errors: open() fails with
// kInternal when the directory or the file cannot be made or read; add()
// returns the write error (the end is still kept in memory and sent).
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
  // `compact_bytes`: the size past which the file is compacted.
  static constexpr std::uint64_t kCompactBytes = 1 << 20;  // about 24,000 ends
  static Result<std::unique_ptr<EndJournal>> open(const std::string& dir,
                                                  std::uint64_t compact_bytes = kCompactBytes);
  ~EndJournal();
  EndJournal(const EndJournal&) = delete;
  EndJournal& operator=(const EndJournal&) = delete;

  Status add(const overlay::JobUpdate& update);
  // The leader has recorded this end; forgets it when the attempt matches.
  void ack(JobId job, std::uint32_t attempt, std::uint32_t step = 0);
  // Oldest first.
  std::vector<overlay::JobUpdate> entries() const;
  std::size_t size() const { return by_seq_.size(); }

 private:
  EndJournal(std::string dir, std::uint64_t compact_bytes)
      : dir_(std::move(dir)), compact_bytes_(compact_bytes) {}
  using Key = std::pair<JobId, std::uint32_t>;  // a job, or one of its steps
  static Key key_of(const overlay::JobUpdate& u) { return {u.job_id(), u.step()}; }
  // In memory: keeps the newer of two ends of one job.
  void remember(std::uint64_t seq, const overlay::JobUpdate& update);
  void forget(std::uint64_t seq);
  // Takes in the journal's whole records, skipping damage; file_bytes_ ends
  // at the end of the last one.
  void load(const std::string& bytes);
  Status append(const std::string& record);
  void compact_if_large();
  // Writes the live ends to a new file, then renames it over the journal.
  Status rewrite();

  std::string dir_;
  int fd_ = -1;  // the journal, O_APPEND
  std::uint64_t file_bytes_ = 0;
  bool damaged_ = false;  // load() skipped damage: open() rewrites the file
  std::uint64_t compact_bytes_;
  std::uint64_t next_seq_ = 1;
  std::map<std::uint64_t, overlay::JobUpdate> by_seq_;
  std::map<Key, std::uint64_t> seq_of_job_;
};

}  // namespace hpcq::agent

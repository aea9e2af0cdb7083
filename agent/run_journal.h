// Records of a node's runs (a job's part, or one of its steps) that must
// outlive this agent process, in memory and on disk until they are
// forgotten; one per (job, step), a later attempt's replacing an earlier one.
// Two are kept (agent.h):
// - EndJournal, <state_dir>/ends/: the ends this agent reported and the
//   leader has not acknowledged yet, so that no end is lost across a leader
//   restart, a long partition, or a restart of the agent itself. Every Hello
//   repeats them, oldest first. Each is fdatasync'd before add() returns.
// - PartJournal, <state_dir>/parts/: the Launch of each part and step this
//   node runs, written before its shell starts and forgotten once its end is
//   in the EndJournal: what a restarted agent takes its running jobs back
//   with. Not synced: a crash of the machine ends the jobs too, and a killed
//   agent's writes are in the page cache for the next one to read.
//
// One append-only file, <dir>/journal. A record is appended (and synced, if
// asked) before add() returns. Forgetting appends a record that forgets it,
// not synced: one lost to a crash only brings the record back once more,
// which the leader takes as a repeat. Past compact_bytes the file is emptied,
// or rewritten with the live records alone. (One file per record, as before,
// cost the agent more than the job itself: a create, rename and unlink each,
// and ext4 searched its inode bitmaps past the recently deleted on every
// create.)
//
// A record: u32 body length, u32 FNV-1a of the body, then the body: a kind
// ('E' an entry, 'F' forget), the u64 seq that orders the entries across
// restarts, and for an entry the serialized message. A crash mid-append
// leaves a tail whose length or checksum does not hold; open() cuts it off.
// Damage in the middle (the disk's) loses only the records it hits: open()
// finds the next whole record after it and rewrites the file without it. It
// also takes in the one file per end ("<seq>-<job>.pb") an older agent left.
//
// Loop thread only. Errors: open() fails with kInternal when the directory or
// the file cannot be made or read; add() returns the write error (the entry
// is still kept in memory).
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

// Message: a protobuf message with job_id(), step() and attempt().
template <typename Message>
class RunJournal {
 public:
  // Loads what an earlier run left in `dir` (created if missing); files that
  // do not parse are logged and removed. `name` says which journal in logs.
  // `sync`: each add() is on disk before it returns.
  // `compact_bytes`: the size past which the file is compacted.
  static constexpr std::uint64_t kCompactBytes = 1 << 20;  // about 24,000 ends
  static Result<std::unique_ptr<RunJournal>> open(const std::string& dir, std::string name,
                                                  bool sync,
                                                  std::uint64_t compact_bytes = kCompactBytes);
  ~RunJournal();
  RunJournal(const RunJournal&) = delete;
  RunJournal& operator=(const RunJournal&) = delete;

  Status add(const Message& entry);
  // Done with (an end: the leader has recorded it; a part: its end is
  // journaled): forgets it when the attempt matches.
  void ack(JobId job, std::uint32_t attempt, std::uint32_t step = 0);
  // Oldest first.
  std::vector<Message> entries() const;
  std::size_t size() const { return by_seq_.size(); }

 private:
  RunJournal(std::string dir, std::string name, bool sync, std::uint64_t compact_bytes)
      : dir_(std::move(dir)), name_(std::move(name)), sync_(sync), compact_bytes_(compact_bytes) {}
  using Key = std::pair<JobId, std::uint32_t>;  // a job, or one of its steps
  static Key key_of(const Message& m) { return {m.job_id(), m.step()}; }
  // In memory: keeps the newer of two entries of one run.
  void remember(std::uint64_t seq, const Message& entry);
  void forget(std::uint64_t seq);
  // Takes in the journal's whole records, skipping damage; file_bytes_ ends
  // at the end of the last one.
  void load(const std::string& bytes);
  Status append(const std::string& record);
  void compact_if_large();
  // Writes the live ends to a new file, then renames it over the journal.
  Status rewrite();

  std::string dir_;
  std::string name_;
  bool sync_ = true;
  int fd_ = -1;  // the journal, O_APPEND
  std::uint64_t file_bytes_ = 0;
  bool damaged_ = false;  // load() skipped damage: open() rewrites the file
  std::uint64_t compact_bytes_;
  std::uint64_t next_seq_ = 1;
  std::map<std::uint64_t, Message> by_seq_;
  std::map<Key, std::uint64_t> seq_of_job_;
};

using EndJournal = RunJournal<overlay::JobUpdate>;
using PartJournal = RunJournal<overlay::Launch>;

}  // namespace hpcq::agent

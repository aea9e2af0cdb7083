// A checkpoint in flight and what it makes of its job: the protocol's
// transitions, pure (no I/O, no clock) like the job table beside it.
//
// A checkpoint is asked of every node of a running job (begin), answered
// node by node (take_answer), and ends once every node has answered or its
// deadline has passed (give_up_waiting). end_checkpoint then says what
// becomes of the job: it runs on (a checkpoint that leaves it running, or a
// user's failed one whose parts all still run), it is requeued to run from
// the start (a failed checkpoint that stopped some of its parts), or it
// leaves its nodes to be restored where it next starts (held, for --then
// stop). After a leader restart, resume_checkpoint_run waits again for a
// checkpoint that was taking the job off its nodes.
//
// The caller (hpcqd's Checkpoints room) sends the messages, keeps the
// records, kills parts and answers whoever asked, as the results say.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lib/core/ids.h"
#include "lib/job/job_table.h"
#include "lib/job/records.h"

namespace hpcq::job {

// A node that has not answered a checkpoint by then is given up.
inline constexpr TimeUs kCheckpointTimeoutUs = 300 * kUsPerSecond;

struct CheckpointRun {
  CheckpointRecord record;  // outcome: empty, or the failures so far
  std::set<Rank> waiting;   // nodes yet to answer
  TimeUs deadline = 0;
};

// The images' directory of a job's next checkpoint: under `root`, numbered
// from 1 in the order they are taken (`taken` before it), with the run's
// attempt so that a requeued run never writes over an earlier run's images.
std::string checkpoint_image(const std::string& root, const Job& job, std::size_t taken);
// Part `index` (allocation order) of the job dumps its images here.
std::string part_image_dir(const CheckpointRecord& record, std::size_t index);

// A checkpoint of the running job into `image`, asked of every node of its
// allocation. `to`: the nodes its restore may use (empty: any).
CheckpointRun begin_checkpoint_run(const Job& job, CheckpointThen then, std::string image,
                                   std::vector<std::string> to, bool periodic, TimeUs now);

// --checkpoint-interval: the running job's last checkpoint of this run (or
// its start) is older than its interval.
bool periodic_checkpoint_due(const Job& job, const std::vector<CheckpointRecord>& taken,
                             TimeUs now);

// One node's answer.
struct CheckpointAnswer {
  std::uint32_t attempt = 0;
  std::string image_dir;
  bool ok = false;
  std::string reason;  // when not ok
  std::uint64_t image_bytes = 0;
  double dump_seconds = 0;
  bool stopped = false;  // the part is gone from its node (no end will be reported)
};

// Takes `node`'s answer (node named `node_name` in the outcome) into the
// run; a stopped part leaves record.running_on. False, and nothing
// changed, when the answer is not this run's: an answer repeated in a Hello
// may be of an earlier checkpoint (each has its own directory), or of an
// earlier run of the job, or repeated.
bool take_answer(JobRecord& record, CheckpointRun& run, Rank node, const std::string& node_name,
                 const CheckpointAnswer& answer);
// The deadline has passed: the nodes still waited for (`late`, by name,
// comma-separated) go into the outcome and are no longer waited for. Their
// parts may have stopped or not: the caller kills them and takes them off
// record.running_on.
void give_up_waiting(CheckpointRun& run, const std::string& late);

// What becomes of the job once a checkpoint has ended.
struct CheckpointEnd {
  enum class Kind {
    kRunsOn,            // it runs on where it was
    kRequeueFromStart,  // its parts are killed, then it runs again from the start
    kLeaves,            // requeued, to be restored from the record's image
  };
  Kind kind = Kind::kRunsOn;
  bool ok = false;    // the images are complete (record.outcome is "ok")
  std::string why;    // kLeaves: the requeue's reason
  bool hold = false;  // kLeaves: held until released (--then stop)
  std::string error;  // not ok: what the one who asked is told
  bool operator==(const CheckpointEnd&) const = default;
};

// Every node has answered, or `timed_out` (give_up_waiting was called):
// the record's outcome is settled ("ok" or the failures) and the job's fate
// decided. `asked`: a user waits for the answer (hpcq checkpoint, migrate);
// a preemption's or a periodic checkpoint has no one to answer. kRequeueFromStart
// sets record.requeue_when_ended (the table requeues the job once its parts
// have ended); kLeaves sets the job's node count to the images' (a restore
// asks for as many nodes as the dump ran on).
CheckpointEnd end_checkpoint(JobRecord& record, CheckpointRun& run, bool asked, bool timed_out);

// Restores. The checkpoint a running job that lost a node restarts from
// (its index in `taken`): the newest good one of this run for a job with
// --checkpoint-interval, or the one this run was restored from
// (`restored_image`; empty when it started afresh); one whose images fit
// the job (as many tasks on each of its nodes) and were not pruned.
// nullopt: none (the job runs again from the start, or ends).
std::optional<std::size_t> restart_checkpoint(const Job& job,
                                              const std::vector<CheckpointRecord>& taken,
                                              const std::string& restored_image);
// After a leader restart: what a pending job's next start restores (the
// image of the checkpoint that took it off its nodes and was not restored
// yet, or of one a node loss left to restart from) and the nodes named for
// it (migrate --to); an empty image: it starts afresh.
struct NextRestore {
  std::string image;
  std::vector<std::string> to;
  bool operator==(const NextRestore&) const = default;
};
NextRestore next_restore(const std::vector<CheckpointRecord>& taken);
// A start that restores `image`: its records say so (restored, no longer
// pending). Returns the indexes of the records changed (to be stored).
std::vector<std::size_t> mark_restored(std::vector<CheckpointRecord>& taken,
                                       const std::string& image);

// After a leader restart: the stored records of a job, the last perhaps in
// flight (no outcome). One that was to take a running job off its nodes is
// waited for again (returned, taken off `taken`; the agents repeat their
// answers in their Hello), with the job's preemption restored when it had
// handed its cores over; the others in flight get an outcome saying it is
// unknown (the job runs on either way).
std::optional<CheckpointRun> resume_checkpoint_run(JobRecord& record,
                                                   std::vector<CheckpointRecord>& taken,
                                                   TimeUs now);

}  // namespace hpcq::job

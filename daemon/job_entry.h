// What hpcqd keeps of one job: the job table's record (lib/job/job_table.h)
// plus the protocol state of its run in flight (launches and kills, the
// pool's parts, a checkpoint, a resize) and its records (checkpoints,
// placements, resizes). The rooms of daemon/ share it through the table.
#pragma once

#include <cstdint>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lib/core/ids.h"
#include "lib/core/status.h"
#include "lib/job/checkpoint_run.h"
#include "lib/job/job_table.h"
#include "lib/job/records.h"
#include "lib/job/resize_run.h"
#include "lib/job/steps.h"
#include "lib/resource/allocation.h"
#include "proto/hpcq.pb.h"
#include "proto/overlay.pb.h"

namespace hpcq::daemon {

struct JobEntry : job::JobRecord {
  bool kill_sent = false;
  // Launch and Kill are repeated until each node confirms (STARTED, or the
  // end), since the overlay may drop them while the tree heals.
  std::shared_ptr<const overlay::Launch> launch;
  std::set<Rank> started_on;
  TimeUs sent_at = 0;     // the last Launch or Kill sent
  bool launched = false;  // the Launch went out (after the start's commit)
  // Nodes whose part of the allocation is taken in the pool. All of them
  // once started; after a leader restart, each as its agent confirms it.
  std::set<Rank> held_on;
  // Being dumped to leave (preempted by checkpoint, or moving): its cores
  // are back in the pool already, its memory and GPUs not (hand_over_cores).
  bool cores_handed_over = false;
  // A checkpoint in flight (lib/job/checkpoint_run.h), and who waits for
  // its record (hpcq checkpoint, migrate; none for the scheduler's).
  struct Checkpointing : job::CheckpointRun {
    std::shared_ptr<std::promise<Result<job::CheckpointRecord>>> promise;
  };
  std::optional<Checkpointing> checkpointing;
  std::vector<job::CheckpointRecord> checkpoints;  // done, oldest first
  // Pending: the next start restores this checkpoint (its directory):
  // the last one, if it took the job off its nodes and was not restored.
  std::string restore_from;
  bool restoring = false;        // this attempt was started from restore_from
  std::string restored_image;    // ... and this was its image
  std::vector<Rank> restore_to;  // the restore's nodes (migrate --to), ascending; empty: any
  // Every run of the job, oldest first; the last is open while it runs.
  std::vector<job::Placement> placements;
  // Elastic resizes (the wire is overlay.proto's message Resize): at most
  // one in flight per job (lib/job/resize_run.h), with who waits for its
  // record (hpcq resize).
  struct Resizing : job::ResizeRun {
    std::shared_ptr<std::promise<Result<job::ResizeRecord>>> promise;
  };
  std::optional<Resizing> resizing;
  std::uint32_t resize_seq = 0;  // resizes asked for so far (this attempt)
  TimeUs last_resize = 0;        // the last resize's outcome: the rescale gap counts from it
  std::vector<job::ResizeRecord> resizes;  // done, oldest first
  // Launch.part of each node's current part (absent: 0, or unknown after
  // a leader restart; then any part is taken as the current one).
  std::map<Rank, std::uint32_t> part_of;
  // Parts taken away (an acknowledged shrink, a declined expansion):
  // killed; their cores return to the pool as each reports its end, which
  // neither ends nor fails the job. Still in running_on until then.
  std::map<Rank, resource::Allocation> removing;  // the part, as part_on() gives it
  // Fair-share: charged up to here (the start, then each resize).
  TimeUs usage_from = 0;
  // A batch job's steps (daemon/steps.h), by id - 1; and the cores its
  // running steps hold, which the next step may not use (without --overlap).
  std::vector<job::StepRecord> steps;
  job::BusyCores step_cores;
  TimeUs steps_sent_at = 0;  // the last repeat of unconfirmed step launches
  // After a leader restart: pending steps are tried once every node has
  // confirmed the job (a step that ended before the restart may have left
  // room that no later end will announce).
  bool steps_to_try = false;
  // What went to the job's nodes one way and may be lost while the tree
  // heals: a node's Hello after it took another way says what arrived, and
  // JobActions::send_again sends the rest (the agent skips copies).
  struct SentSignal {
    std::uint64_t seq = 0;
    std::uint32_t attempt = 0;
    std::uint32_t step = 0;
    int signo = 0;
    std::set<Rank> ranks;
  };
  std::deque<SentSignal> signals_sent;  // the latest, oldest first
  std::uint64_t signal_seq = 0;         // signals sent so far
  struct SentInput {
    std::uint32_t attempt = 0;
    Rank rank = 0;            // task 0's node
    std::uint64_t begin = 0;  // offset of bytes' first byte in the input
    std::string bytes;        // the latest sent
    bool eof = false;
  };
  std::map<std::uint32_t, SentInput> input_sent;  // by step (0: the job's)
  bool time_limit_updated = false;                // since its launch (hpcq update)
};

using JobTable = job::JobTable<JobEntry>;

// One node's slice of an allocation, for the pool (adoption and release go
// node by node after a leader restart).
resource::Allocation part_on(const resource::Allocation& allocation, Rank rank);
// Without its cores: what the pool still holds of a job that has handed
// them over (JobEntry::cores_handed_over).
resource::Allocation without_cores(resource::Allocation allocation);

}  // namespace hpcq::daemon

// The part table: what this node runs of each job, and the state of each
// part and step, changed only here.
//
// Pure, like lib/job/job_table: no I/O, no clock, no threads. The agent
// applies what happened (a Launch, the prolog's verdict, the executor's
// word that tasks started or ended, a Kill, the leader's signal or input)
// and gets back a decision to carry out: start, report, hold, cancel,
// ignore a repeat. The executor, the journals and the wire stay the
// agent's.
//
// One part of a job runs on a node at a time (a resize gives a node a new
// part of the same attempt only once the earlier part has ended). A part's
// life here:
//
//   Launch ─► kHeld ────────────┐  (an epilog runs: as Slurm's COMPLETING)
//     │                         ▼
//     ├───────────────────► kInProlog ─► kStarting ─► kRunning ─► ended
//     │                         │   └──► kRestoring ──┘             │
//     │                         └► failed/cancelled: ended          ▼
//     └─ a repeat, or an ended (attempt, part): nothing      the epilog counted
//
// An ended part leaves the table and is remembered (bounded), so that a
// Launch the leader repeats after it ran does not run it again. Steps of a
// running part are kStarting or kRunning, then remembered until the part
// ends. An agent that restarted adopts what its predecessor left running
// (adopt) as kRunning.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lib/core/ids.h"
#include "proto/overlay.pb.h"

namespace hpcq::agent {

enum class PartState { kHeld, kInProlog, kRestoring, kStarting, kRunning };
const char* part_state_name(PartState state);

// What the prolog and epilog of a part are told (HPCQ_JOB_ID, ...).
using ScriptEnv = std::map<std::string, std::string>;

struct Part {
  JobId job = 0;
  std::uint32_t attempt = 0;
  std::uint32_t part = 0;  // Launch.part
  PartState state = PartState::kStarting;
  overlay::Launch launch;  // kHeld, kInProlog: what starts it once it may
  std::string image_dir;   // kRestoring: this part's checkpoint image
  ScriptEnv script_env;    // empty where the site has no prolog or epilog
  // Steps started in the part (the value: still starting), and those ended.
  std::map<std::uint32_t, bool> steps;
  std::set<std::uint32_t> ended_steps;
  // What arrived of the leader's numbered signals, and of standard input by
  // step, reported in the Hello: the leader sends again what a healed tree
  // lost, and a copy is not delivered twice.
  std::uint64_t signals_received = 0;
  struct Input {
    std::uint64_t bytes = 0;
    bool eof = false;
  };
  std::map<std::uint32_t, Input> input_received;
};

class PartTable {
 public:
  // What a part's Launch (step 0) asks for.
  enum class Launch {
    kStart,          // translate it, then start_prolog or starting/restoring
    kHold,           // an epilog runs: held (released by epilog_ended)
    kReportStarted,  // a repeat of a part that runs: STARTED again
    kRefuse,         // a new part while an earlier one of the attempt still ends here
    kIgnore,         // a repeat of one on its way, or of one that ended here
  };
  Launch launch(const overlay::Launch& launch);
  // A step's Launch: kStart (then step_starting), kReportStarted, kIgnore
  // (ended here already), or kRefuse (the job's attempt does not run here).
  Launch step_launch(const overlay::Launch& launch) const;

  // A part's launch goes through the site's prolog first.
  void start_prolog(const overlay::Launch& launch, ScriptEnv env);
  // The prolog ended: the launch to start (ok), or the failed part is gone
  // and remembered; nullopt where it was cancelled meanwhile.
  std::optional<overlay::Launch> prolog_ended(JobId job, std::uint32_t attempt, bool ok);
  // The executor took the part's launch (or the restore of its image).
  void starting(const overlay::Launch& launch, ScriptEnv env);
  void restoring(const overlay::Launch& launch, ScriptEnv env, std::string image_dir);
  // The executor refused it: forgotten (the leader may launch it again).
  void start_failed(JobId job);
  void step_starting(JobId job, std::uint32_t step);

  // The executor says the tasks of (job, step) have all started: the part
  // to report STARTED of; nullopt where nothing waited for it (a restore's
  // start goes through restored; a part stopped by its checkpoint).
  std::optional<Part> started(JobId job, std::uint32_t step);
  // CRIU's restore ended: the part (kRunning where ok, else gone).
  std::optional<Part> restored(JobId job, bool ok);

  // The part ended (or a checkpoint stopped it): gone, remembered, and
  // returned (its script env for the epilog). nullopt: not here.
  std::optional<Part> ended(JobId job);
  // A step ended: the attempt it belonged to (0 where the part is gone).
  std::uint32_t step_ended(JobId job, std::uint32_t step);

  // What a Kill asks for.
  struct Kill {
    enum class Kind {
      kCancelledBeforeStart,  // held or in its prolog: gone; report CANCELLED (part)
      kCancelPart,
      kCancelStep,
      kIgnore,
    };
    Kind kind = Kind::kIgnore;
    std::uint32_t part = 0;
  };
  Kill kill(const overlay::Kill& kill);

  // A site epilog began, or ended: the launches held meanwhile, to apply
  // again once none runs (they left the table).
  void epilog_began() { ++epilogs_running_; }
  std::vector<overlay::Launch> epilog_ended();

  // The previous agent's part or step, still running (its Launch from the
  // part journal): kRunning. A step without its part is not adopted.
  bool adopt(const overlay::Launch& launch, ScriptEnv env);

  // The part of `attempt` of the job starts or runs here: what the leader's
  // signals, input, checkpoints, resizes, fences and queries act on.
  bool runs(JobId job, std::uint32_t attempt) const;
  // ... and its step `step` runs too (0: the part itself).
  bool runs(JobId job, std::uint32_t attempt, std::uint32_t step) const;
  bool step_runs(JobId job, std::uint32_t step) const;
  // The part starting or running (not held, in its prolog or restoring).
  const Part* running(JobId job) const;
  bool any_running() const;
  std::vector<std::uint32_t> steps_of(JobId job) const;
  // Hello: every part starting or running, with what it received.
  std::vector<overlay::RunningJob> running_jobs() const;

  // The leader's numbered signal `seq` (0: not numbered) to deliver; false
  // for a copy, or for an attempt not running here.
  bool take_signal(JobId job, std::uint32_t attempt, std::uint64_t seq);
  // The part of the leader's input not delivered yet; nullopt where there
  // is none (a copy) or the attempt does not run here.
  struct InputToWrite {
    std::string data;
    bool eof = false;
  };
  std::optional<InputToWrite> take_input(const overlay::Input& input);

  // Dumps in flight (CRIU runs beside the loop), and the last answers sent,
  // which every Hello repeats (a leader that restarted may have missed one).
  void checkpoint_began(const overlay::Checkpoint& request);
  std::optional<overlay::Checkpoint> checkpoint_ended(JobId job);
  void checkpoint_answered(const overlay::CheckpointDone& done);
  const std::deque<overlay::CheckpointDone>& checkpoint_answers() const { return answers_; }

  // For tests.
  const Part* find(JobId job) const;
  bool remembers(JobId job, std::uint32_t attempt, std::uint32_t part) const;
  int epilogs_running() const { return epilogs_running_; }

 private:
  Part& enter(const overlay::Launch& launch, PartState state, ScriptEnv env);
  void remember(JobId job, std::uint32_t attempt, std::uint32_t part);

  std::map<JobId, Part> parts_;
  // (job, attempt << 32 | part) of the parts that ended here lately, oldest
  // first in ended_order_.
  std::set<std::pair<JobId, std::uint64_t>> ended_;
  std::deque<std::pair<JobId, std::uint64_t>> ended_order_;
  int epilogs_running_ = 0;
  std::map<JobId, overlay::Checkpoint> dumps_;
  std::deque<overlay::CheckpointDone> answers_;
};

}  // namespace hpcq::agent

// The commands about jobs: submit (and batch, alloc, run), their state and
// output, signals and ends, checkpoints, resizes, the queue and the history.
// Each prints what the user asked for (a table, or JSON with `json`) and
// returns the command's exit status (client.h's exit_code_of), with a
// one-line reason on stderr when it fails. A job id is written as users do:
// N, or ARRAY_INDEX (an array's element as queue shows it), and JOB.STEP
// where a step is meant.
#pragma once

#include <string>
#include <vector>

#include "cli/run.h"
#include "lib/job/submit_options.h"

namespace hpcq::cli {

// hpcq submit, batch, alloc and run: `args` are the words after the command.
// In Slurm's dialect (sbatch, srun, salloc of compat/slurm) a submission
// prints "Submitted batch job N" (--parsable: "N"), the site's downgraded
// options are read from $HPCQ_SLURM_DOWNGRADE (comma-separated), and
// `stdin_script` (sbatch given no script) reads the script from stdin.
struct SubmitStyle {
  std::string program = "hpcq";  // who warns
  job::Dialect dialect = job::Dialect::kHpcq;
  bool stdin_script = false;
  // Where the Slurm commands are: first on the job's PATH, so that srun and
  // Slurm-aware MPI launchers inside the job find these, not another Slurm's.
  std::string bin_dir;
};
int cmd_submit(const std::vector<std::string>& args, job::SubmitKind kind, SubmitStyle style = {});
int cmd_attach(const std::string& given, FollowOptions options);
int cmd_stat(const std::string& text, bool json);
int cmd_update(const std::string& text, const std::string& time_limit, const std::string& begin,
               bool json);
// --json (signal, cancel, requeue, hold, release): an array of each job's
// outcome, {"id", "step" when given, "ok", "error"} (cli/outcomes.h).
int cmd_signal(const std::string& given, const std::string& name, bool json);
int cmd_wait(const std::vector<std::string>& ids, bool json);
// One call per id; an array's own id stands for all its elements.
int cmd_cancel(const std::vector<std::string>& ids, bool json);
int cmd_requeue(const std::vector<std::string>& ids, bool json);
int cmd_hold(const std::vector<std::string>& ids, bool json);
int cmd_release(const std::vector<std::string>& ids, bool json);
// hpcq checkpoint, and hpcq migrate (`elsewhere`: to other nodes).
int cmd_checkpoint(const std::string& text, const std::string& then, const std::string& to,
                   bool json, bool elsewhere = false);
int cmd_resize(const std::string& text, int nodes, bool json);
// JOB: the job; JOB.STEP: that step of it.
int cmd_status(const std::vector<std::string>& ids, bool json);
int cmd_queue(bool all, bool json);
int cmd_queues(bool json);

struct HistoryFilter {
  std::string user;
  std::vector<std::string> states;
  std::string since, until;  // YYYY-MM-DD[THH:MM[:SS]], local time
  bool steps = false;        // a row per step too
};
int cmd_history(const HistoryFilter& filter, bool json);

}  // namespace hpcq::cli

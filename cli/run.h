// hpcq run and hpcq attach: a job's tasks' output as it comes (the job was
// launched with forward_output; hpcqd's WatchOutput), then its exit status.
#pragma once

#include <string>

#include "cli/client.h"
#include "lib/core/ids.h"
#include "lib/job/submit_options.h"

namespace hpcq::cli {

// Blocks SIGINT, SIGTERM, SIGHUP and SIGWINCH in this thread and the threads
// it starts from now on (call it before any thread exists): follow_job takes
// them with sigwait.
void block_interrupts();

struct FollowOptions {
  std::uint32_t step = 0;  // a step of the job (hpcq run inside an allocation)
  bool from_start = true;  // else only the output that comes from now on
  bool label = false;      // prefix each line with "RANK: "
  // hpcq run: Ctrl-C sends SIGINT to the tasks (or cancels the job while it
  // is pending); a second Ctrl-C within a second cancels it; SIGTERM or
  // SIGHUP cancels it at once (then follow_job returns 128 + the signal).
  // Needs block_interrupts() first.
  bool interrupts = false;
  // hpcq run: this command's standard input goes to task 0 (not when it is
  // a terminal of which we are in the background); with `pty`, task 0 is on
  // a terminal: ours is put in raw mode, and its size follows ours.
  bool input = false;
  bool pty = false;
};

// Copies the job's output to stdout and stderr until the job has ended and
// all of it has come. Returns hpcq run's exit status: 0 when the job
// COMPLETED, else its exit code (the highest task code, 128+N for a signal),
// at least 1, with a line on stderr saying how it ended.
int follow_job(const Client& client, JobId id, const FollowOptions& options);

// hpcq alloc: submits the allocation job (options.spec), waits until it
// runs, then runs its command here, where the caller is (interactive on
// their terminal), with the job's environment; `hpcq run` inside makes steps
// of it. The command's end ends the job (EndAllocation: COMPLETED, or FAILED
// with its exit code); the job's end (time limit, cancel) hangs the command
// up. Ctrl-C, SIGQUIT, SIGHUP or SIGTERM while it waits, and SIGHUP or
// SIGTERM while the command runs (passed on to it), cancel the job and exit
// the process with 128 + the signal. Returns the command's exit status.
int alloc_job(const Client& client, const job::SubmitOptions& options);

// hpcq run inside an allocation (HPCQ_JOB_ID = `job`): launches the step,
// then follows it as follow_job does. Needs block_interrupts() first.
// `quiet`: no line about a step that waits for cores (hpcq-rsh's callers
// read stderr as the remote command's).
int run_step(const Client& client, JobId job, const job::SubmitOptions& options,
             bool quiet = false);

}  // namespace hpcq::cli

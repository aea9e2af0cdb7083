// A job: what the user asked for (JobSpec) and what became of it (Job).
//
// JobSpec is filled by the CLI (lib/job/submit_options.h) or a portal, checked
// by validate(), committed by the store, then scheduled. Job adds the leader's
// view: owner, state, allocation, times. Plain values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lib/core/ids.h"
#include "lib/core/status.h"
#include "lib/resource/allocation.h"

namespace hpcq::job {

enum class JobState {
  kPending,
  kRunning,
  kCompleted,
  kFailed,
  kCancelled,
  kTimeout,
  kNodeFail,
};

// "PENDING", "RUNNING", ... (the names users see and --json prints).
const char* state_name(JobState state);
std::optional<JobState> parse_state(const std::string& name);
bool is_terminal(JobState state);

struct JobSpec {
  std::string name;                // -J; default: the command's basename
  std::vector<std::string> argv;   // the command run by every task
  std::string script;              // the batch script's text when submitted as a script
  resource::ResourceRequest request;
  std::int64_t time_limit_s = 0;   // -t; 0: the queue's default; kUnlimited: the queue's maximum
  static constexpr std::int64_t kUnlimited = -1;  // -t UNLIMITED, as Slurm's: the most allowed
  std::string output;              // -o; %j expands to the job id; default hpcq-%j.out
  std::string error;               // -e; default: same file as output
  std::string queue;               // -q; empty: the default queue
  std::string cwd;                 // -D; default: the submit directory
  std::map<std::string, std::string> env;  // the environment the tasks get
  bool requeue = false;            // --requeue: requeue (not fail) on node failure
};

// Checks the spec for internal consistency; the message names the option.
Status validate(const JobSpec& spec);

struct Job {
  JobId id = 0;
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::string user;
  JobSpec spec;
  JobState state = JobState::kPending;
  int exit_code = 0;    // the highest task exit code; 128+N for a signal
  std::string reason;   // why it ended, or why it is pending (one line)
  resource::Allocation allocation;
  TimeUs submit_time = 0;
  TimeUs start_time = 0;
  TimeUs end_time = 0;
  int requeue_count = 0;
  bool held = false;    // pending but not eligible until released (hpcq hold/release)
};

// Output path with %j replaced by the id; relative paths are against cwd.
std::string expand_output_path(const std::string& pattern, JobId id, const std::string& cwd);

}  // namespace hpcq::job

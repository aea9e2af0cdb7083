// A job: what the user asked for (JobSpec) and what became of it (Job).
//
// JobSpec is filled by the CLI (lib/job/submit_options.h) or a portal, checked
// by validate(), committed by the store, then scheduled. Job adds the leader's
// view: owner, state, allocation, times. Plain values.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
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

// A signal hpcq signal may send to a job's tasks, the ones the job shell
// forwards (HUP INT QUIT USR1 USR2 ALRM TERM CONT) and KILL: a name with or
// without "SIG" ("TERM", "SIGUSR1", any case) or a number. Errors name it.
Result<int> parse_signal(std::string_view text);

// --dependency=TYPE:ID[:ID...][,TYPE:ID...] (sbatch's form; all must hold),
// or the same joined by '?' (any one is enough; as Slurm, a list joins by
// one or the other): after (the job has started), afterany (ended in any
// state), afterok (COMPLETED), afternotok (ended in any other state), and
// singleton, with no ID (every job of the same user and name submitted
// before it has ended, and none of that user and name runs: one at a time,
// in submission order).
enum class DependencyType { kAfter, kAfterAny, kAfterOk, kAfterNotOk, kSingleton };
const char* dependency_type_name(DependencyType type);  // "afterok", ...

struct Dependency {
  DependencyType type = DependencyType::kAfterAny;
  JobId job = 0;  // 0 for singleton
  // Set on every item of a list joined by '?' (Slurm's SLURM_FLAGS_OR).
  bool any_of = false;
  bool operator==(const Dependency&) const = default;
};

// "afterok:12:13,afterany:14" -> {afterok 12, afterok 13, afterany 14};
// "afterok:12?singleton" -> {afterok 12, singleton}, both any_of.
// Errors name --dependency and quote the bad part.
Result<std::vector<Dependency>> parse_dependencies(std::string_view text);
// The inverse, for display and for the text the API and the store carry:
// "afterok:12:13,afterany:14", "afterok:12?afterok:13?singleton".
std::string format_dependencies(const std::vector<Dependency>& deps);
// Whether the list is joined by '?': any one item met is enough, and it
// can never be met only when none of its items can.
bool dependencies_any_of(const std::vector<Dependency>& deps);

// --array=INDICES[%MAX]: INDICES is a comma-separated list of N, N-M and
// N-M:STEP; MAX bounds how many of the array's tasks run at once.
struct ArraySpec {
  std::vector<int> indices;  // ascending, unique
  int max_running = 0;       // 0: no bound
};
inline constexpr int kMaxArrayIndex = 999'999;
inline constexpr int kMaxArraySize = 10'001;  // tasks per array
Result<ArraySpec> parse_array(std::string_view text);

// The environment a job's tasks get (names are text, values bytes), held
// once and shared by its copies: an array's tasks, and in hpcqd every job
// submitted with the same environment (EnvironmentPool). Immutable: assign
// a new one to change it.
class SharedEnvironment {
 public:
  using Map = std::map<std::string, std::string>;
  SharedEnvironment() = default;
  SharedEnvironment(Map vars);  // NOLINT(google-explicit-constructor): a map is one
  SharedEnvironment(std::initializer_list<Map::value_type> vars) : SharedEnvironment(Map(vars)) {}

  const Map& vars() const {
    static const Map kEmpty;  // inline: the job shells link job_env.cc without job.cc
    return vars_ ? *vars_ : kEmpty;
  }
  Map::const_iterator begin() const { return vars().begin(); }
  Map::const_iterator end() const { return vars().end(); }
  Map::const_iterator find(const std::string& name) const { return vars().find(name); }
  std::size_t size() const { return vars().size(); }
  bool empty() const { return vars().empty(); }
  std::size_t count(const std::string& name) const { return vars().count(name); }
  const std::string& at(const std::string& name) const { return vars().at(name); }
  // Sets one variable in a copy of its own (the others sharing the old one
  // keep it).
  void set(const std::string& name, std::string value);
  // Whether both hold the very same map (not just equal ones).
  bool shares_with(const SharedEnvironment& other) const { return vars_ == other.vars_; }

  friend bool operator==(const SharedEnvironment& a, const SharedEnvironment& b) {
    return a.vars_ == b.vars_ || a.vars() == b.vars();
  }
  friend bool operator==(const SharedEnvironment& a, const Map& b) { return a.vars() == b; }

 private:
  friend class EnvironmentPool;
  std::shared_ptr<const Map> vars_;
};

// Hands out one copy of each distinct environment still in use, so that a
// queue of jobs submitted from the same shell holds it once (hpcqd). Not
// thread-safe: one owner (the leader's loop).
class EnvironmentPool {
 public:
  SharedEnvironment intern(const SharedEnvironment& env);
  std::size_t distinct() const;  // environments in use that the pool knows

 private:
  std::unordered_map<std::size_t, std::vector<std::weak_ptr<const SharedEnvironment::Map>>>
      by_hash_;
  std::size_t interned_ = 0;  // since the last sweep of expired entries
};

// --signal's receivers in a batch job (JobSpec::warn_target).
enum class WarnTarget { kScriptAndSteps, kSteps, kScript };
const char* warn_target_word(WarnTarget target);  // "", "steps", "script"
std::optional<WarnTarget> parse_warn_target(std::string_view word);

struct JobSpec {
  std::string name;               // -J; default: the command's basename
  std::vector<std::string> argv;  // the command run by every task
  std::string script;             // the batch script's text when submitted as a script
  resource::ResourceRequest request;
  std::int64_t time_limit_s = 0;  // -t; 0: the queue's default; kUnlimited: the queue's maximum
  static constexpr std::int64_t kUnlimited = -1;  // -t UNLIMITED, as Slurm's: the most allowed
  std::string output;     // -o; %j expands to the job id; default hpcq-%j.out
  std::string error;      // -e; default: same file as output
  std::string queue;      // -q; empty: the default queue
  std::string cwd;        // -D; default: the submit directory
  SharedEnvironment env;  // the environment the tasks get
  bool requeue = false;   // --requeue: requeue (not fail) on node failure
  std::string account;    // -A; empty: the user's default account
  std::string qos;        // --qos
  // --priority: added to the scheduler's priority; above 0 for admins only,
  // so a user can only lower (nice) their own jobs.
  std::int32_t priority = 0;
  std::vector<Dependency> dependencies;  // -d/--dependency
  std::string array;                     // -a/--array as given ("0-99%10"); the leader expands it
  // --profile cpu|memory|network (papers/000): with the scheduler's
  // "granularity" plugin, how many nodes and workers the ranks are cut
  // into; empty: none. --workers: the user's worker count (0: the policy's).
  std::string profile;
  int workers = 0;
  // --image DIR: the tasks run in OCI containers (runc) of this root file
  // system, or of this bundle (a directory with config.json and its rootfs);
  // absolute; empty: plain processes.
  std::string image;
  // --checkpoint-interval: hpcqd checkpoints the running job this often (it
  // runs on) and, when a node of it is lost, restarts it from its last good
  // checkpoint instead of failing or rerunning it. 0: never.
  std::int64_t checkpoint_interval_s = 0;
  // --begin: not eligible to start before this (µs since the epoch), as
  // sbatch --begin; 0: at once.
  std::int64_t begin_time_us = 0;
  // -w/--nodelist: the only nodes the job may run on (names, as Slurm's -w,
  // but a set to choose from, not nodes it must all have); empty: any.
  std::vector<std::string> nodelist;
  // -x/--exclude: nodes the job may not run on (with -w: taken from its list).
  std::vector<std::string> exclude;
  // -C/--constraint: the node features it needs (lib/job/constraint.h);
  // empty: any node.
  std::string constraint;
  // --ntasks-per-node (as sbatch's): at most this many tasks per node; the
  // request's nodes and ntasks already follow from it. 0: not given.
  int ntasks_per_node = 0;
  // -L/--licenses: cluster-wide licenses ([licenses] of hpcq.toml(5)) it
  // holds while it runs, by name.
  std::map<std::string, int> licenses;
  // -N MIN-MAX (hpcq issue 7): request.nodes is MIN and max_nodes MAX; 0
  // when no range was given (a range MIN-MIN is stored as no range). Each
  // node runs request.ntasks / request.nodes tasks whatever the size.
  // Without --elastic the scheduler picks the size at start (moldable);
  // with it the running job may also be shrunk and expanded in the range.
  int max_nodes = 0;
  bool elastic = false;
  // hpcq batch: the script runs once, as task 0 on the first node of the
  // allocation; the other nodes hold their part for the job's steps. The
  // job ends when the script does. Without a script (hpcq alloc) no node
  // runs anything: the job holds its allocation for steps until it is
  // signalled (SIGTERM: it completes), cancelled or timed out.
  bool batch = false;
  // hpcq run: the tasks' stdout and stderr go to the leader, which streams
  // them to the caller and to `hpcq attach` (proto WatchOutput), instead of
  // to files; output and error are then empty.
  bool forward_output = false;
  // --signal SIG[@SECONDS]: the tasks (and steps) get SIG this many seconds
  // before the time limit (sbatch's --signal; default 60 s); 0: none.
  int warn_signal = 0;
  int warn_seconds = 0;
  // Who of a batch job gets warn_signal: hpcq's default, the script and its
  // steps; sbatch's default, the steps only; sbatch's B:, the script only.
  WarnTarget warn_target = WarnTarget::kScriptAndSteps;
  // hpcq run --pty: task 0 on a terminal (forward_output too).
  bool pty = false;
  // --mpi: "pmi1", "pmix", "pmi1,pmix" (both) or "none"; empty: the site's
  // default (hpcq.toml's leader.mpi).
  std::string mpi;
  // Set by the leader on each task of an expanded array; 0/-1 otherwise.
  JobId array_job_id = 0;     // the array's first job id (Slurm's %A)
  int array_task_id = -1;     // this task's index (%a)
  int array_max_running = 0;  // the array's throttle (%MAX)
  // The submission's idempotency key (SubmitRequest.submission_key): a
  // repeat of it by the same user is answered with this job, not a new one
  // (lib/job/submission_keys.h). Stored with the job, so that the leader
  // after a failover knows it; an array's tasks all carry it. Empty: none.
  std::string submission_key;
  // --deadline (sbatch's): a job that cannot end by then (its start plus its
  // time limit) is not started, and ends DEADLINE-cancelled instead (µs
  // since the epoch; 0: none).
  std::int64_t deadline_us = 0;
  // Submitted held (sbatch -H): pending but not eligible until released.
  // Only the submission reads it; the job's own Job::held is what changes.
  bool hold = false;
  // Submitted through the Slurm commands (compat/slurm): the tasks also get
  // Slurm's SLURM_* variables (lib/job/job_env.h).
  bool slurm_environment = false;
};

// Checks the spec for internal consistency; the message names the option.
Status validate(const JobSpec& spec);
// --mpi's value: "pmi1", "pmix", "pmi1,pmix" or "none" (the interfaces hpcq
// serves).
Status check_mpi(const std::string& mpi, const std::string& option);
// -L/--licenses "matlab:2,fluent" (a count of 1 when none is given, at
// most kMaxLicenseCount), as sbatch's; each name once.
inline constexpr int kMaxLicenseCount = 1'000'000;
Result<std::map<std::string, int>> parse_licenses(std::string_view text);
// --gres "nvme:2,fpga" (per node, as sbatch's; the same form and bounds as
// -L's); "gpu" is refused (GPUs have --gpus-per-node and --gpus-per-task).
Result<std::map<std::string, int>> parse_gres(std::string_view text);

struct Job {
  JobId id = 0;
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::string user;
  JobSpec spec;
  JobState state = JobState::kPending;
  int exit_code = 0;   // the highest task exit code; 128+N for a signal
  std::string reason;  // why it ended, or why it is pending (one line)
  resource::Allocation allocation;
  TimeUs submit_time = 0;
  TimeUs start_time = 0;
  TimeUs end_time = 0;
  int requeue_count = 0;
  // Measured on its nodes over its last run (sacct's TotalCPU and MaxRSS):
  // CPU time (user + system) of its processes and its steps', and the
  // largest peak memory of its cgroup on any one node.
  std::int64_t cpu_time_us = 0;
  std::uint64_t max_memory_bytes = 0;
  bool held = false;  // pending but not eligible until released (hpcq hold/release)
};

// What the % fields of an output path pattern stand for, as sbatch's.
struct OutputNames {
  JobId id = 0;            // %j
  JobId array_job_id = 0;  // %A: the array's job id; 0 outside an array (the id)
  int array_task_id = -1;  // %a: the array task index; 0 outside an array
  std::string job_name;    // %x
  std::string user;        // %u
  std::string first_node;  // %N; empty before the job has nodes: "%N" stays
  // A batch job's one output file is its script's: %t (task) and %n (node)
  // are 0, as in sbatch's; else they stay (hpcq writes no file per task).
  bool batch = false;
};

// The path a pattern names: %j %A %a %x %u %N (and a batch job's %t %n)
// replaced, %% a '%'; other
// fields (and a trailing %) stay as written, as sbatch leaves them. A
// relative path is against cwd.
std::string expand_output_path(const std::string& pattern, const OutputNames& names,
                               const std::string& cwd);
// The same with the job's own names, against its working directory.
std::string expand_output_path(const std::string& pattern, const Job& job);

}  // namespace hpcq::job

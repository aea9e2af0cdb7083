// `hpcq submit` arguments and `#HPCQ` script directives -> a JobSpec.
//
// The options and their meaning follow sbatch (-N, -n, -c, --mem, -t, -J, -o,
// -e, -q, -A, --qos, -d, -a, -D, --export, --requeue); see parse_submit_args for the forms. The
// file system and the environment come in through SubmitContext, so tests and
// the fuzzer run without a disk. Pure functions; safe from any thread (the
// read_file callback is called on the caller's thread). Nothing throws and
// nothing is printed: every error is Status(kInvalidArgument) with one line
// naming the option (or SCRIPT:LINE for a directive) and quoting the bad value,
// e.g. "--mem: bad size 'lots'", "job.sh:3: unknown option '--frobnicate'".
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lib/core/status.h"
#include "lib/job/job.h"
#include "lib/job/steps.h"

namespace hpcq::job {

// Whose spelling the options are in: hpcq's (hpcq submit, batch, run,
// alloc; #HPCQ directives) or Slurm's (sbatch, srun, salloc of compat/slurm;
// #SBATCH directives). In Slurm's, -p/--partition names the queue, -q is
// --qos, -H/--hold, -W/--wait, --parsable, --wrap, --nice, -G/--gpus,
// --gres=gpu:N, -i/--input /dev/null and -s/--oversubscribe are read, --mpi
// takes Slurm's names (pmi2, pmix_v4), and the job gets the SLURM_*
// variables (JobSpec::slurm_environment). The options of Slurm's that hpcq
// cannot honour (kSlurmUnhonoured) are refused, each in one line naming it,
// unless the site downgrades it to a warning (SubmitContext::downgraded).
enum class Dialect { kHpcq, kSlurm };

// Slurm's options that hpcq does not honour yet (docs/slurm.md says why).
inline constexpr const char* kSlurmUnhonoured[] = {"--mail-type",    "--mail-user", "--comment",
                                                   "--time-min",     "--test-only", "--mem-per-gpu",
                                                   "--cpus-per-gpu", "--open-mode"};

struct SubmitContext {
  Dialect dialect = Dialect::kHpcq;
  // Slurm's: of kSlurmUnhonoured, the options the site lets through with a
  // warning (SubmitOptions::warnings) instead of refusing the submission.
  std::vector<std::string> downgraded;
  std::string host;  // the submitting host (Slurm's: SLURM_SUBMIT_HOST)
  std::string cwd;   // the submit directory (absolute)
  std::map<std::string, std::string> environment;  // the submitter's environment
  std::optional<unsigned> umask;                   // the submitter's, carried as HPCQ_UMASK
  std::int64_t now_us = 0;                         // now, for --begin now+DURATION
  // Reads a file named on the command line (relative to the submit
  // directory), as read_script_file (lib/job/script_file.h) does: kNotFound
  // means "not a file", so the word is a command; any other error (a device,
  // a script past kMaxScriptBytes) is the submission's error. Only "#!" at
  // its start makes a file a script, so a reader may return just the start
  // of one that is not.
  std::function<Result<std::string>(const std::string& path)> read_file;
};

// Which command the words are for: they share the options and differ in how
// the command runs (JobSpec::batch, JobSpec::forward_output).
enum class SubmitKind {
  kSubmit,  // hpcq submit: every task runs COMMAND or SCRIPT
  kBatch,   // hpcq batch: SCRIPT (required, "#!") runs once, on the first node
  kRun,     // hpcq run: every task runs COMMAND (never read as a script); the
            // output goes to the caller, not to files (no -o/-e)
  kAlloc,   // hpcq alloc: no task runs; COMMAND (optional: the caller runs it,
            // default $SHELL) is kept as the job's command and name; no
            // --array, -o/-e, --wait or --requeue
};

struct SubmitOptions {
  JobSpec spec;
  bool json = false;   // --json: print machine-readable output
  bool wait = false;   // --wait: block until the job ends
  bool label = false;  // -l/--label (run only): prefix each output line with its task rank
  // hpcq run inside an allocation makes a step: what -N, -n and -c gave (0:
  // not given, the step's defaults apply), --overlap; and --immediate.
  StepRequest step;
  bool immediate = false;
  bool pty = false;       // --pty (run only): task 0 on a terminal
  bool parsable = false;  // Slurm's --parsable: print the id alone
  // Slurm's: what the site's downgraded options did not do, one line each.
  std::vector<std::string> warnings;
};

// `args` are the words after "submit": `[options] [--] COMMAND [ARGS...]` or
// `[options] SCRIPT [ARGS...]`. Options end at the first word that is not an
// option or an option's value; everything from there on is the command. The
// command is a script when read_file(COMMAND) succeeds and the text starts
// with "#!": its directives are applied first and command-line options
// override them (the last occurrence of an option wins), spec.script holds
// the text and spec.argv is {COMMAND as given, ARGS...}.
//
// Options (long and short; "--opt=value", "--opt value", "-Nvalue"):
//   -N/--nodes N or MIN-MAX (a node range, JobSpec::max_nodes), --elastic/
//   --no-elastic, -n/--ntasks N, -c/--cpus-per-task N, --mem SIZE (per node,
//   see parse_memory_bytes), -t/--time DURATION (see parse_duration_s),
//   -J/--job-name NAME, -o/--output PATTERN, -e/--error PATTERN, -q/--queue
//   NAME, -D/--chdir DIR, --export ALL|NONE|[ALL,]VAR[=value][,...],
//   --requeue/--no-requeue, -A/--account NAME, --qos NAME, --priority N
//   (-1000000..1000000), -d/--dependency TYPE:ID[:ID][,...] (see
//   parse_dependencies), -a/--array INDICES[%MAX] (see parse_array), --json,
//   --wait.
// Defaults: ntasks = nodes (the range's minimum) when only -N is given, else 1; name = basename of
// the command; cwd = ctx.cwd (a relative -D is taken from ctx.cwd); output
// "hpcq-%j.out"; error empty (same file as output); --export=ALL (the whole
// submitter environment). The result has passed validate().
Result<SubmitOptions> parse_submit_args(const std::vector<std::string>& args,
                                        const SubmitContext& ctx,
                                        SubmitKind kind = SubmitKind::kSubmit);

// True when -h or --help stands among the options, before the command:
// `hpcq batch -N 2 --help`, but not `hpcq submit grep --help`.
bool asks_for_help(const std::vector<std::string>& args);

// True when the words name what to run: a word after the options, or
// Slurm's --wrap among them (sbatch reads its script from stdin otherwise).
bool names_command(const std::vector<std::string>& args);

// The full help of hpcq submit, batch, run or alloc (what --help prints).
std::string submit_help(SubmitKind kind);

// The option words of a script's directive lines: "#HPCQ -N 2" lines (in
// Slurm's dialect "#SBATCH -N 2") after
// the shebang, up to the first line that is neither blank nor a comment (as
// sbatch stops at the first command). Words are split like a shell does:
// 'single' and "double" quotes, backslash escapes, and an unquoted '#' at the
// start of a word begins a comment. A malformed line (an unterminated quote,
// a trailing backslash) is an error "SCRIPT:LINE: ...".
Result<std::vector<std::string>> parse_directives(const std::string& script_text,
                                                  const std::string& script_name,
                                                  Dialect dialect = Dialect::kHpcq);

}  // namespace hpcq::job

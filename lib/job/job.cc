#include "lib/job/job.h"

#include <array>
#include <utility>

#include "lib/core/units.h"

namespace hpcq::job {
namespace {

constexpr std::array<std::pair<JobState, const char*>, 7> kStateNames = {{
    {JobState::kPending, "PENDING"},
    {JobState::kRunning, "RUNNING"},
    {JobState::kCompleted, "COMPLETED"},
    {JobState::kFailed, "FAILED"},
    {JobState::kCancelled, "CANCELLED"},
    {JobState::kTimeout, "TIMEOUT"},
    {JobState::kNodeFail, "NODE_FAIL"},
}};

// Upper bounds that no real request reaches; they keep later arithmetic
// (tasks * cpus, seconds to microseconds) far from overflow and turn a typo
// into an error instead of a job that waits forever.
constexpr int kMaxNodes = 100'000;
constexpr int kMaxTasks = 1'000'000;
constexpr int kMaxCpusPerTask = 4096;
constexpr std::int64_t kMaxTimeLimitS = std::int64_t{366} * 24 * 3600 * 10;  // ten years
constexpr std::uint64_t kMaxMemPerNode = std::uint64_t{1} << 60;             // 1 EiB
constexpr size_t kMaxNameLength = 256;

bool has_control(const std::string& text) {
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return true;
  }
  return false;
}

bool has_nul(const std::string& text) { return text.find('\0') != std::string::npos; }

// Names from the submitter's environment can be odd (bash exports functions
// as "BASH_FUNC_f%%"), so only what execve() cannot carry is refused.
bool is_env_name(const std::string& name) {
  return !name.empty() && name.find('=') == std::string::npos && !has_nul(name);
}

Status check_text(const char* option, const std::string& value) {
  if (has_control(value)) {
    return invalid_argument(std::string(option) + ": control character in " + quote(value));
  }
  return Status::ok();
}

}  // namespace

const char* state_name(JobState state) {
  for (const auto& [s, name] : kStateNames) {
    if (s == state) return name;
  }
  return "UNKNOWN";
}

std::optional<JobState> parse_state(const std::string& name) {
  for (const auto& [s, n] : kStateNames) {
    if (name == n) return s;
  }
  return std::nullopt;
}

bool is_terminal(JobState state) {
  return state != JobState::kPending && state != JobState::kRunning;
}

Status validate(const JobSpec& spec) {
  const auto& r = spec.request;
  if (r.ntasks < 1 || r.ntasks > kMaxTasks) {
    return invalid_argument("--ntasks: must be 1.." + std::to_string(kMaxTasks) + ", got " +
                            std::to_string(r.ntasks));
  }
  if (r.nodes < 0 || r.nodes > kMaxNodes) {
    return invalid_argument("--nodes: must be 0.." + std::to_string(kMaxNodes) + ", got " +
                            std::to_string(r.nodes));
  }
  if (r.nodes > r.ntasks) {
    return invalid_argument("--nodes: " + std::to_string(r.nodes) + " nodes for " +
                            std::to_string(r.ntasks) +
                            " tasks (every node runs at least one task)");
  }
  if (r.cpus_per_task < 1 || r.cpus_per_task > kMaxCpusPerTask) {
    return invalid_argument("--cpus-per-task: must be 1.." + std::to_string(kMaxCpusPerTask) +
                            ", got " + std::to_string(r.cpus_per_task));
  }
  if (r.mem_per_node_bytes > kMaxMemPerNode) {
    return invalid_argument("--mem: " + format_memory(r.mem_per_node_bytes) +
                            " per node is more than any node has");
  }
  if ((spec.time_limit_s < 0 && spec.time_limit_s != JobSpec::kUnlimited) ||
      spec.time_limit_s > kMaxTimeLimitS) {
    return invalid_argument("--time: must be 0.." + std::to_string(kMaxTimeLimitS) + " s, got " +
                            std::to_string(spec.time_limit_s));
  }
  if (spec.argv.empty() || spec.argv[0].empty()) {
    return invalid_argument("submit: no command or script given");
  }
  for (const auto& arg : spec.argv) {
    // exec() cannot pass a NUL inside an argument.
    if (has_nul(arg)) return invalid_argument("command: NUL byte in argument " + quote(arg));
  }
  if (spec.name.size() > kMaxNameLength) {
    return invalid_argument("--job-name: longer than " + std::to_string(kMaxNameLength) +
                            " characters: " + quote(spec.name));
  }
  HPCQ_RETURN_IF_ERROR(check_text("--job-name", spec.name));
  HPCQ_RETURN_IF_ERROR(check_text("--output", spec.output));
  HPCQ_RETURN_IF_ERROR(check_text("--error", spec.error));
  HPCQ_RETURN_IF_ERROR(check_text("--queue", spec.queue));
  HPCQ_RETURN_IF_ERROR(check_text("--chdir", spec.cwd));
  if (!spec.cwd.empty() && spec.cwd[0] != '/') {
    return invalid_argument("--chdir: " + quote(spec.cwd) + " is not an absolute path");
  }
  for (const auto& [name, value] : spec.env) {
    if (!is_env_name(name)) {
      return invalid_argument("--export: bad variable name " + quote(name));
    }
    if (has_nul(value)) {
      return invalid_argument("--export: NUL byte in the value of " + name);
    }
  }
  return Status::ok();
}

std::string expand_output_path(const std::string& pattern, JobId id, const std::string& cwd) {
  std::string path;
  path.reserve(pattern.size() + 16);
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      const char next = pattern[i + 1];
      if (next == 'j') {
        path += std::to_string(id);
        ++i;
        continue;
      }
      if (next == '%') {
        path += '%';
        ++i;
        continue;
      }
    }
    // Unknown %x (and a trailing %) stay as written, as sbatch leaves them.
    path += pattern[i];
  }
  if (path.empty() || path[0] == '/' || cwd.empty()) return path;
  if (cwd.back() == '/') return cwd + path;
  return cwd + "/" + path;
}

}  // namespace hpcq::job

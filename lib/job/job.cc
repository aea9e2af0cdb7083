#include "lib/job/job.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <csignal>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include "lib/core/bytes.h"
#include "lib/core/config.h"
#include "lib/core/units.h"
#include "lib/job/constraint.h"
#include "lib/job/submission_keys.h"
#include "lib/resource/granularity.h"

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
constexpr int kMaxGpus = 1024;  // per node or per task

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

SharedEnvironment::SharedEnvironment(Map vars)
    : vars_(vars.empty() ? nullptr : std::make_shared<const Map>(std::move(vars))) {}

void SharedEnvironment::set(const std::string& name, std::string value) {
  Map copy = vars();
  copy[name] = std::move(value);
  vars_ = std::make_shared<const Map>(std::move(copy));
}

namespace {

std::size_t hash_of(const SharedEnvironment::Map& vars) {
  std::size_t h = vars.size();
  const std::hash<std::string> hash;
  for (const auto& [name, value] : vars) {
    h = h * 1099511628211ULL ^ hash(name);
    h = h * 1099511628211ULL ^ hash(value);
  }
  return h;
}

}  // namespace

SharedEnvironment EnvironmentPool::intern(const SharedEnvironment& env) {
  if (!env.vars_) return env;
  if (++interned_ >= 4096) {
    // Environments no job uses any more: forgotten now and then.
    interned_ = 0;
    for (auto it = by_hash_.begin(); it != by_hash_.end();) {
      std::erase_if(it->second, [](const auto& weak) { return weak.expired(); });
      it = it->second.empty() ? by_hash_.erase(it) : std::next(it);
    }
  }
  auto& bucket = by_hash_[hash_of(*env.vars_)];
  for (const auto& weak : bucket) {
    if (auto known = weak.lock(); known && *known == *env.vars_) {
      SharedEnvironment shared;
      shared.vars_ = std::move(known);
      return shared;
    }
  }
  std::erase_if(bucket, [](const auto& weak) { return weak.expired(); });
  bucket.push_back(env.vars_);
  return env;
}

std::size_t EnvironmentPool::distinct() const {
  std::size_t n = 0;
  for (const auto& [hash, bucket] : by_hash_) {
    for (const auto& weak : bucket) n += weak.expired() ? 0 : 1;
  }
  return n;
}

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

Result<int> parse_signal(std::string_view text) {
  static const std::pair<const char*, int> kSignals[] = {
      {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"KILL", SIGKILL}, {"USR1", SIGUSR1},
      {"USR2", SIGUSR2}, {"ALRM", SIGALRM}, {"TERM", SIGTERM}, {"CONT", SIGCONT}};
  std::string name(text);
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (name.starts_with("SIG")) name = name.substr(3);
  for (const auto& [known, number] : kSignals) {
    if (name == known || name == std::to_string(number)) return number;
  }
  return invalid_argument("signal: " + quote(std::string(text)) +
                          " is not one hpcq sends to tasks (HUP INT QUIT KILL USR1 USR2 ALRM TERM "
                          "CONT, or their numbers)");
}

namespace {

// Names are text: they reach the API's string fields, JSON and logs.
// Commands, scripts, paths and the environment's values are bytes.
Status check_names_utf8(const JobSpec& spec) {
  const std::pair<const char*, const std::string*> names[] = {
      {"-J/--job-name", &spec.name}, {"-q/--queue", &spec.queue},  {"-A/--account", &spec.account},
      {"--qos", &spec.qos},          {"--profile", &spec.profile}, {"--image", &spec.image},
      {"--array", &spec.array}};
  for (const auto& [option, value] : names) {
    if (!is_utf8(*value)) return invalid_argument(std::string(option) + ": not valid UTF-8");
  }
  for (const std::string& node : spec.nodelist) {
    if (!is_utf8(node)) return invalid_argument("-w/--nodelist: a node name is not valid UTF-8");
  }
  for (const auto& [name, value] : spec.env) {
    if (!is_utf8(name)) {
      return invalid_argument("the environment: a variable's name is not valid UTF-8");
    }
  }
  if (!spec.image.empty()) {
    // runc takes the command in config.json, which is JSON text.
    for (const std::string& arg : spec.argv) {
      if (!is_utf8(arg)) {
        return invalid_argument("--image: a container's command must be valid UTF-8");
      }
    }
  }
  return Status::ok();
}

}  // namespace

Status check_mpi(const std::string& mpi, const std::string& option) {
  if (known_mpi(mpi)) return Status::ok();
  if (mpi == "pmi2") {
    return invalid_argument(option + " pmi2: not served; hpcq serves pmi1 (MPICH and its kin; " +
                            "PMI-2 on the same socket), pmix (Open MPI), both (" + kMpiBoth +
                            ") or none");
  }
  return invalid_argument(option + ": want pmi1, pmix, " + kMpiBoth + " or none, got " +
                          quote(mpi));
}

namespace {

// NAME[:COUNT][,...] of -L and --gres; `option` and `noun` name them in
// messages.
Result<std::map<std::string, int>> parse_counts(std::string_view text, const std::string& option,
                                                const std::string& noun) {
  std::map<std::string, int> counts;
  const auto bad = [&](const std::string& why) {
    return invalid_argument(option + " " + quote(text) + ": " + why);
  };
  if (text.empty()) return bad("want NAME[:COUNT][,NAME[:COUNT]...]");
  for (std::size_t at = 0; at <= text.size();) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string_view item = text.substr(at, comma - at);
    const std::size_t colon = item.find(':');
    const std::string name(item.substr(0, colon));
    if (!is_plain_name(name)) return bad("bad " + noun + " name " + quote(name));
    int count = 1;
    if (colon != std::string_view::npos) {
      const std::string_view digits = item.substr(colon + 1);
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
      if (ec != std::errc() || end != digits.data() + digits.size() || count < 1 ||
          count > kMaxLicenseCount) {
        return bad("bad count " + quote(digits) + " for " + quote(name) + " (want 1.." +
                   std::to_string(kMaxLicenseCount) + ")");
      }
    }
    if (!counts.emplace(name, count).second) return bad(quote(name) + " given twice");
    at = comma + 1;
  }
  return counts;
}

// GPUs have options of their own, which bind them by id; gres only counts.
Status check_not_gpu(const std::map<std::string, int>& gres) {
  if (gres.contains("gpu")) {
    return invalid_argument("--gres: GPUs are not gres here: ask with --gpus-per-node or " +
                            std::string("--gpus-per-task"));
  }
  return Status::ok();
}

}  // namespace

Result<std::map<std::string, int>> parse_licenses(std::string_view text) {
  return parse_counts(text, "-L/--licenses", "license");
}

Result<std::map<std::string, int>> parse_gres(std::string_view text) {
  auto gres = parse_counts(text, "--gres", "gres");
  if (gres.is_ok()) HPCQ_RETURN_IF_ERROR(check_not_gpu(*gres));
  return gres;
}

Status validate(const JobSpec& spec) {
  HPCQ_RETURN_IF_ERROR(check_names_utf8(spec));
  HPCQ_RETURN_IF_ERROR(check_submission_key(spec.submission_key));
  if (!spec.mpi.empty()) HPCQ_RETURN_IF_ERROR(check_mpi(spec.mpi, "--mpi"));
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
  if (r.gpus_per_node < 0 || r.gpus_per_node > kMaxGpus || r.gpus_per_task < 0 ||
      r.gpus_per_task > kMaxGpus) {
    return invalid_argument("--gpus-per-node/--gpus-per-task: must be 0.." +
                            std::to_string(kMaxGpus));
  }
  if (r.gpus_per_node > 0 && r.gpus_per_task > 0) {
    return invalid_argument("--gpus-per-node and --gpus-per-task: give one, not both");
  }
  if (r.mem_per_cpu_bytes > kMaxMemPerNode) {
    return invalid_argument("--mem-per-cpu: " + format_memory(r.mem_per_cpu_bytes) +
                            " per CPU is more than any node has");
  }
  if (r.mem_per_node_bytes > 0 && r.mem_per_cpu_bytes > 0) {
    return invalid_argument("--mem and --mem-per-cpu: give one, not both");
  }
  if (r.exclusive && r.oversubscribe) {
    return invalid_argument(
        "--exclusive and --oversubscribe: whole nodes are shared with no job; give one, not both");
  }
  if (spec.max_nodes != 0) {
    if (spec.max_nodes < 0 || spec.max_nodes > kMaxNodes) {
      return invalid_argument("--nodes: the range's maximum must be 1.." +
                              std::to_string(kMaxNodes) + ", got " +
                              std::to_string(spec.max_nodes));
    }
    if (r.nodes < 1) return invalid_argument("--nodes: a range's minimum must be at least 1");
    if (spec.max_nodes <= r.nodes) {
      return invalid_argument("--nodes: range " + std::to_string(r.nodes) + "-" +
                              std::to_string(spec.max_nodes) + " has MIN >= MAX");
    }
    if (r.ntasks % r.nodes != 0) {
      return invalid_argument("--ntasks: " + std::to_string(r.ntasks) +
                              " tasks do not divide over a range's minimum of " +
                              std::to_string(r.nodes) +
                              " nodes (each node of a range runs the same task count)");
    }
    if (!spec.array.empty() || spec.array_job_id != 0) {
      return invalid_argument("--nodes: a node range cannot be given to an array");
    }
  }
  if (spec.elastic && spec.max_nodes == 0) {
    return invalid_argument("--elastic: needs a node range (-N MIN-MAX with MIN < MAX)");
  }
  if (!spec.profile.empty() && !resource::parse_profile(spec.profile)) {
    return invalid_argument("--profile: unknown profile " + quote(spec.profile) +
                            " (want cpu, memory or network)");
  }
  HPCQ_RETURN_IF_ERROR(parse_constraint(spec.constraint).status());
  for (const auto& [name, count] : spec.licenses) {
    if (!is_plain_name(name) || count < 1 || count > kMaxLicenseCount) {
      return invalid_argument("-L/--licenses: bad license " + quote(name) + ":" +
                              std::to_string(count));
    }
  }
  for (const auto& [name, count] : r.gres) {
    if (!is_plain_name(name) || count < 1 || count > kMaxLicenseCount) {
      return invalid_argument("--gres: bad gres " + quote(name) + ":" + std::to_string(count));
    }
  }
  HPCQ_RETURN_IF_ERROR(check_not_gpu(r.gres));
  if (spec.ntasks_per_node < 0 || spec.ntasks_per_node > kMaxTasks) {
    return invalid_argument("--ntasks-per-node: must be 1.." + std::to_string(kMaxTasks) +
                            ", got " + std::to_string(spec.ntasks_per_node));
  }
  if (spec.ntasks_per_node > 0 && r.nodes > 0 &&
      r.ntasks > static_cast<std::int64_t>(r.nodes) * spec.ntasks_per_node) {
    return invalid_argument("--ntasks-per-node: " + std::to_string(r.ntasks) + " tasks on " +
                            std::to_string(r.nodes) + " nodes are more than " +
                            std::to_string(spec.ntasks_per_node) + " per node");
  }
  if (spec.workers < 0 || spec.workers > r.ntasks) {
    return invalid_argument("--workers: must be 0.." + std::to_string(r.ntasks) +
                            " (at most one worker per task), got " + std::to_string(spec.workers));
  }
  if (!spec.image.empty() && (spec.image[0] != '/' || spec.image.find('\n') != std::string::npos)) {
    return invalid_argument("--image: want a directory path, got " + quote(spec.image));
  }
  if (spec.begin_time_us < 0) {
    return invalid_argument("--begin: before 1970 (" + std::to_string(spec.begin_time_us) + ")");
  }
  if (spec.checkpoint_interval_s < 0 || spec.checkpoint_interval_s > kMaxTimeLimitS) {
    return invalid_argument("--checkpoint-interval: must be 0.." + std::to_string(kMaxTimeLimitS) +
                            " s, got " + std::to_string(spec.checkpoint_interval_s));
  }
  if (spec.warn_signal != 0 &&
      (!parse_signal(std::to_string(spec.warn_signal)).is_ok() || spec.warn_seconds < 1)) {
    return invalid_argument("--signal: want SIG[@SECONDS], got signal " +
                            std::to_string(spec.warn_signal) + " at " +
                            std::to_string(spec.warn_seconds) + " s");
  }
  if (spec.batch && (spec.elastic || !spec.image.empty())) {
    return invalid_argument(spec.elastic ? "batch: a batch job cannot be --elastic"
                                         : "batch: a batch job cannot run in an --image");
  }
  if (spec.pty && !spec.forward_output) {
    return invalid_argument("--pty: only hpcq run gives a task a terminal");
  }
  if (spec.forward_output &&
      (spec.batch || !spec.output.empty() || !spec.error.empty() || !spec.array.empty())) {
    return invalid_argument(
        "run: a job whose output goes to its caller takes no --output, --error or --array");
  }
  if (spec.forward_output && !spec.image.empty() && spec.checkpoint_interval_s > 0) {
    return invalid_argument(
        "run --image: a job in containers whose output goes to its caller cannot be "
        "checkpointed (--checkpoint-interval)");
  }
  if (spec.workers > 0 && spec.profile.empty()) {
    return invalid_argument(
        "--workers: give --profile too (workers are how a profiled job is cut)");
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
  HPCQ_RETURN_IF_ERROR(check_text("--account", spec.account));
  HPCQ_RETURN_IF_ERROR(check_text("--qos", spec.qos));
  if (!spec.array.empty()) {
    auto array = parse_array(spec.array);
    if (!array.is_ok()) return array.status();
  }
  const bool any_of = dependencies_any_of(spec.dependencies);
  for (const Dependency& d : spec.dependencies) {
    if (d.type == DependencyType::kSingleton && d.job != 0) {
      return invalid_argument("--dependency: singleton names no job (job " + std::to_string(d.job) +
                              ")");
    }
    if (d.type != DependencyType::kSingleton && d.job == 0) {
      return invalid_argument("--dependency: job id 0");
    }
    if (d.any_of != any_of) {
      return invalid_argument("--dependency: a list joined by both ',' and '?'");
    }
  }
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

namespace {

constexpr std::array<std::pair<DependencyType, const char*>, 5> kDependencyNames = {{
    {DependencyType::kAfter, "after"},
    {DependencyType::kAfterAny, "afterany"},
    {DependencyType::kAfterOk, "afterok"},
    {DependencyType::kAfterNotOk, "afternotok"},
    {DependencyType::kSingleton, "singleton"},
}};

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  std::size_t from = 0;
  while (true) {
    const std::size_t at = text.find(sep, from);
    out.push_back(text.substr(from, at == std::string_view::npos ? text.npos : at - from));
    if (at == std::string_view::npos) return out;
    from = at + 1;
  }
}

// A whole decimal number in [0, max], or nullopt.
template <typename Int>
std::optional<Int> parse_number(std::string_view text, Int max) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  Int value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value > max) return std::nullopt;
  if constexpr (std::is_signed_v<Int>) {
    if (value < 0) return std::nullopt;
  }
  return value;
}

}  // namespace

const char* dependency_type_name(DependencyType type) {
  for (const auto& [t, name] : kDependencyNames) {
    if (t == type) return name;
  }
  return "afterany";
}

Result<std::vector<Dependency>> parse_dependencies(std::string_view text) {
  if (text.empty()) return invalid_argument("--dependency: empty value");
  const bool any_of = text.find('?') != std::string_view::npos;
  if (any_of && text.find(',') != std::string_view::npos) {
    // As Slurm: which of the two binds tighter would be a guess.
    return invalid_argument("--dependency: " + quote(std::string(text)) +
                            " joins items by both ',' (all must hold) and '?' (any one is "
                            "enough): use one");
  }
  std::vector<Dependency> out;
  for (std::string_view clause : split(text, any_of ? '?' : ',')) {
    const std::vector<std::string_view> parts = split(clause, ':');
    const auto type = std::find_if(kDependencyNames.begin(), kDependencyNames.end(),
                                   [&](const auto& e) { return parts[0] == e.second; });
    if (type == kDependencyNames.end()) {
      return invalid_argument("--dependency: unknown type " + quote(std::string(parts[0])) +
                              " (want after, afterany, afterok, afternotok or singleton)");
    }
    if (type->first == DependencyType::kSingleton) {
      if (parts.size() > 1) {
        return invalid_argument("--dependency: " + quote(std::string(clause)) +
                                ": singleton names no job");
      }
      out.push_back({DependencyType::kSingleton, 0, any_of});
      continue;
    }
    if (parts.size() < 2) {
      return invalid_argument("--dependency: " + quote(std::string(clause)) + " names no job");
    }
    for (std::size_t i = 1; i < parts.size(); ++i) {
      const auto id =
          parse_number<JobId>(parts[i], JobId{std::numeric_limits<std::int64_t>::max()});
      if (!id || *id == 0) {
        return invalid_argument("--dependency: bad job id " + quote(std::string(parts[i])));
      }
      out.push_back({type->first, *id, any_of});
    }
  }
  return out;
}

std::string format_dependencies(const std::vector<Dependency>& deps) {
  const bool any_of = dependencies_any_of(deps);
  std::string out;
  for (std::size_t i = 0; i < deps.size(); ++i) {
    const bool singleton = deps[i].type == DependencyType::kSingleton;
    // Items of a '?' list each get their type: "afterok:1:2" alone would
    // read back as both.
    if (i == 0 || any_of || singleton || deps[i].type != deps[i - 1].type) {
      if (!out.empty()) out += any_of ? '?' : ',';
      out += dependency_type_name(deps[i].type);
    }
    if (!singleton) out += ':' + std::to_string(deps[i].job);
  }
  return out;
}

bool dependencies_any_of(const std::vector<Dependency>& deps) {
  return std::any_of(deps.begin(), deps.end(), [](const Dependency& d) { return d.any_of; });
}

Result<ArraySpec> parse_array(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return invalid_argument("--array: " + why + " in " + quote(std::string(text)));
  };
  ArraySpec spec;
  std::string_view list = text;
  if (const std::size_t pct = text.find('%'); pct != std::string_view::npos) {
    const auto max = parse_number<int>(text.substr(pct + 1), kMaxArraySize);
    if (!max || *max == 0) return bad("bad task limit after '%'");
    spec.max_running = *max;
    list = text.substr(0, pct);
  }
  if (list.empty()) return bad("no indices");
  std::set<int> indices;
  for (std::string_view item : split(list, ',')) {
    std::string_view range = item;
    int step = 1;
    if (const std::size_t colon = item.find(':'); colon != std::string_view::npos) {
      const auto s = parse_number<int>(item.substr(colon + 1), kMaxArrayIndex);
      if (!s || *s == 0) return bad("bad step " + quote(std::string(item.substr(colon + 1))));
      step = *s;
      range = item.substr(0, colon);
    }
    const std::size_t dash = range.find('-');
    const auto first = parse_number<int>(range.substr(0, dash), kMaxArrayIndex);
    const auto last = dash == std::string_view::npos
                          ? first
                          : parse_number<int>(range.substr(dash + 1), kMaxArrayIndex);
    if (!first || !last) {
      return bad("bad index " + quote(std::string(item)) + " (indices are 0.." +
                 std::to_string(kMaxArrayIndex) + ")");
    }
    if (*last < *first) return bad("range " + quote(std::string(item)) + " runs backwards");
    for (int i = *first; i <= *last; i += step) {
      indices.insert(i);
      if (indices.size() > static_cast<std::size_t>(kMaxArraySize)) {
        return bad("more than " + std::to_string(kMaxArraySize) + " tasks");
      }
      if (*last - i < step) break;  // no overflow past kMaxArrayIndex
    }
  }
  spec.indices.assign(indices.begin(), indices.end());
  return spec;
}

std::string expand_output_path(const std::string& pattern, const OutputNames& names,
                               const std::string& cwd) {
  std::string path;
  path.reserve(pattern.size() + 16);
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char next = i + 1 < pattern.size() ? pattern[i + 1] : '\0';
    std::optional<std::string> field;
    if (pattern[i] == '%') {
      switch (next) {
        case 'j': field = std::to_string(names.id); break;
        case 'A':
          field = std::to_string(names.array_job_id != 0 ? names.array_job_id : names.id);
          break;
        case 'a': field = std::to_string(std::max(names.array_task_id, 0)); break;
        case 'x': field = names.job_name; break;
        case 'u': field = names.user; break;
        case 'N':
          if (!names.first_node.empty()) field = names.first_node;
          break;
        case 't':
        case 'n':
          if (names.batch) field = "0";
          break;
        case '%': field = "%"; break;
        default: break;
      }
    }
    if (field) {
      path += *field;
      ++i;
    } else {
      path += pattern[i];
    }
  }
  if (path.empty() || path[0] == '/' || cwd.empty()) return path;
  if (cwd.back() == '/') return cwd + path;
  return cwd + "/" + path;
}

std::string expand_output_path(const std::string& pattern, const Job& job) {
  OutputNames names;
  names.id = job.id;
  names.array_job_id = job.spec.array_job_id;
  names.array_task_id = job.spec.array_task_id;
  names.job_name = job.spec.name;
  names.user = job.user;
  if (!job.allocation.nodes.empty()) names.first_node = job.allocation.nodes.front().node;
  names.batch = job.spec.batch;
  return expand_output_path(pattern, names, job.spec.cwd);
}

const char* warn_target_word(WarnTarget target) {
  switch (target) {
    case WarnTarget::kSteps: return "steps";
    case WarnTarget::kScript: return "script";
    case WarnTarget::kScriptAndSteps: break;
  }
  return "";
}

std::optional<WarnTarget> parse_warn_target(std::string_view word) {
  for (WarnTarget t : {WarnTarget::kScriptAndSteps, WarnTarget::kSteps, WarnTarget::kScript}) {
    if (word == warn_target_word(t)) return t;
  }
  return std::nullopt;
}

}  // namespace hpcq::job

// squeue, sacct and sinfo: ListJobs, ListNodes and ListQueues, printed as
// Slurm prints them, in the fields and forms scripts and portals parse.
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <iostream>
#include <set>

#include "cli/client.h"
#include "compat/slurm/commands.h"
#include "compat/slurm/slurm_text.h"
#include "lib/core/hostlist.h"
#include "lib/core/units.h"

namespace hpcq::compat {

Result<std::vector<v1::Job>> list_jobs(const cli::Client& client, bool ended_too) {
  v1::ListJobsRequest request;
  request.set_all(ended_too);
  v1::ListJobsResponse response;
  HPCQ_RETURN_IF_ERROR(client.call("ListJobs", request, &response));
  std::vector<v1::Job> jobs(response.jobs().begin(), response.jobs().end());
  std::sort(jobs.begin(), jobs.end(),
            [](const v1::Job& a, const v1::Job& b) { return a.id() < b.id(); });
  return jobs;
}

bool allowed(const std::vector<std::string>& values, const std::string& value) {
  return values.empty() || std::find(values.begin(), values.end(), value) != values.end();
}

bool printed_usage(const ReadOptions& options, const char* program, const char* operands) {
  if (options.usage.empty()) return false;
  std::cout << "Usage: " << program << " [OPTIONS]" << (*operands != 0 ? " " : "") << operands
            << "\n"
            << options.usage << "hpcq's " << program
            << " reads these of Slurm's options; docs/slurm.md says which it refuses and how the "
               "rest differ.\n";
  return true;
}

void print_table(const std::vector<Field>& fields, const TableStyle& style, std::size_t rows,
                 const std::function<std::string(std::size_t, const Field&)>& value_of) {
  auto print = [&](const std::function<std::string(const Field&)>& value) {
    std::string out;
    for (std::size_t i = 0; i < fields.size(); ++i) {
      const Field& f = fields[i];
      if (style.parsable) {
        out += (i > 0 ? style.delimiter : "") + value(f);
      } else {
        out += (i > 0 ? " " : "") + pad(value(f), f, '+');
      }
    }
    if (style.parsable && style.trailing) out += style.delimiter;
    std::cout << out << "\n";
  };
  if (style.header) {
    print([](const Field& f) { return f.name; });
    if (!style.parsable)
      print([](const Field& f) { return std::string(static_cast<std::size_t>(f.width), '-'); });
  }
  for (std::size_t row = 0; row < rows; ++row) {
    print([&](const Field& f) { return value_of(row, f); });
  }
}

namespace {

using cli::Client;
using cli::fail;

// -j's ids: N (the job, or all of an array with that id), A_I, N.S (sacct).
bool matches_id(const v1::Job& job, const std::vector<std::string>& ids) {
  if (ids.empty()) return true;
  for (std::string id : ids) {
    id = id.substr(0, id.find('.'));
    if (id == std::to_string(job.id()) || id == job_id_text(job)) return true;
    if (job.array_job_id() != 0 && id == std::to_string(job.array_job_id())) return true;
  }
  return false;
}

// -t/--states and sacct -s: long names or compact ones, any case.
bool state_matches(const std::vector<std::string>& wanted, const std::string& state) {
  if (wanted.empty()) return true;
  for (std::string w : wanted) {
    std::transform(w.begin(), w.end(), w.begin(), [](unsigned char c) { return std::toupper(c); });
    if (w == "ALL" || w == state || w == compact_state(state)) return true;
  }
  return false;
}

std::string reason_text(const v1::Job& job) {
  if (job.state() != v1::PENDING) return job.reason().empty() ? "None" : job.reason();
  if (job.held()) return "JobHeldUser";
  if (job.spec().begin_time_us() > cli::wall_clock_us()) return "BeginTime";
  if (!job.spec().dependency().empty()) return "Dependency";
  return job.reason().empty() ? "Priority" : "Resources";
}

// ---- squeue ----

std::string squeue_letter(const v1::Job& job, char letter, std::int64_t now) {
  const std::string state = state_name(job.state(), job.reason());
  switch (letter) {
    case 'i': return job_id_text(job);
    case 'A': return std::to_string(job.id());
    case 'F': return std::to_string(job.array_job_id() != 0 ? job.array_job_id() : job.id());
    case 'K': return job.array_job_id() != 0 ? std::to_string(job.array_task_id()) : "N/A";
    case 'j': return job.name();
    case 'u': return job.user();
    case 'U': return std::to_string(job.uid());
    case 'a': return job.spec().account().empty() ? "(null)" : job.spec().account();
    case 'P': return partition_of(job.queue());
    case 'q': return job.spec().qos().empty() ? "normal" : job.spec().qos();
    case 't': return compact_state(state);
    case 'T': return state;
    case 'M': return squeue_duration(run_seconds(job, now));
    case 'l': return limit_text(job.spec().time_limit_s(), true);
    case 'L': {
      if (job.spec().time_limit_s() <= 0) return "UNLIMITED";
      return squeue_duration(job.spec().time_limit_s() - run_seconds(job, now));
    }
    case 'D': return std::to_string(node_count(job));
    case 'C': return std::to_string(allocated_cpus(job));
    case 'N': return node_list(job);
    case 'R': return job.state() == v1::PENDING ? "(" + reason_text(job) + ")" : node_list(job);
    case 'r': return reason_text(job);
    case 'Q': return std::to_string(static_cast<long long>(job.priority()));
    case 'S': return time_text(job.start_time_us(), "N/A");
    case 'V': return time_text(job.submit_time_us());
    case 'e': return time_text(job.end_time_us(), "N/A");
    case 'Z': return job.spec().cwd();
    case 'o': return job.spec().argv_size() > 0 ? job.spec().argv(0) : "";
    case 'c': return std::to_string(std::max(1, job.spec().cpus_per_task()));
    case 'E': return job.spec().dependency().empty() ? "(null)" : job.spec().dependency();
    case 'y': return "0";
    default: return "";
  }
}

// squeue -O's names for the letters above.
char letter_of(std::string name) {
  name = lower(std::move(name));
  static const std::map<std::string, char> kNames = {
      {"jobid", 'i'},     {"jobarrayid", 'i'}, {"arrayjobid", 'F'},   {"arraytaskid", 'K'},
      {"name", 'j'},      {"username", 'u'},   {"userid", 'U'},       {"account", 'a'},
      {"partition", 'P'}, {"qos", 'q'},        {"statecompact", 't'}, {"state", 'T'},
      {"timeused", 'M'},  {"timelimit", 'l'},  {"timeleft", 'L'},     {"numnodes", 'D'},
      {"numcpus", 'C'},   {"nodelist", 'N'},   {"reasonlist", 'R'},   {"reason", 'r'},
      {"priority", 'Q'},  {"starttime", 'S'},  {"submittime", 'V'},   {"endtime", 'e'},
      {"workdir", 'Z'},   {"command", 'o'},    {"mincpus", 'c'},      {"dependency", 'E'}};
  auto it = kNames.find(name);
  return it == kNames.end() ? 0 : it->second;
}

std::string squeue_header(char letter) {
  static const std::map<char, std::string> kHeaders = {{'i', "JOBID"},
                                                       {'A', "JOBID"},
                                                       {'F', "ARRAY_JOB_ID"},
                                                       {'K', "ARRAY_TASK_ID"},
                                                       {'j', "NAME"},
                                                       {'u', "USER"},
                                                       {'U', "UID"},
                                                       {'a', "ACCOUNT"},
                                                       {'P', "PARTITION"},
                                                       {'q', "QOS"},
                                                       {'t', "ST"},
                                                       {'T', "STATE"},
                                                       {'M', "TIME"},
                                                       {'l', "TIME_LIMIT"},
                                                       {'L', "TIME_LEFT"},
                                                       {'D', "NODES"},
                                                       {'C', "CPUS"},
                                                       {'N', "NODELIST"},
                                                       {'R', "NODELIST(REASON)"},
                                                       {'r', "REASON"},
                                                       {'Q', "PRIORITY"},
                                                       {'S', "START_TIME"},
                                                       {'V', "SUBMIT_TIME"},
                                                       {'e', "END_TIME"},
                                                       {'Z', "WORK_DIR"},
                                                       {'o', "COMMAND"},
                                                       {'c', "MIN_CPUS"},
                                                       {'E', "DEPENDENCY"},
                                                       {'y', "NICE"}};
  auto it = kHeaders.find(letter);
  return it == kHeaders.end() ? std::string(1, letter) : it->second;
}

constexpr const char* kSqueueDefault = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R";
constexpr const char* kSqueueStart = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %R";

}  // namespace

int squeue(const std::vector<std::string>& args) {
  auto read = read_options(args, {{'h', "noheader", false},
                                  {'o', "format", true},
                                  {'O', "Format", true},
                                  {'u', "user", true},
                                  {'t', "states", true},
                                  {'p', "partition", true},
                                  {'j', "jobs", true},
                                  {'A', "account", true},
                                  {0, "start", false},
                                  {0, "me", false},
                                  {'a', "all", false},
                                  {'l', "long", false},
                                  {'r', "array", false},
                                  {'n', "name", true}});
  if (!read.is_ok()) return fail(read.status());
  const ReadOptions& o = *read;
  if (printed_usage(o, "squeue")) return 0;
  std::vector<Field> fields;
  if (o.has("Format")) {
    auto named = parse_named_format(o.last("Format"), ':');
    if (!named.is_ok()) return fail(named.status());
    for (Field f : *named) {
      const char letter = letter_of(f.name);
      if (letter == 0)
        return fail(invalid_argument("Invalid job format specification: " + quote(f.name)));
      f.name = std::string(1, letter);
      if (!f.width_given) f.width = 20;
      f.literal = fields.empty() ? "" : " ";
      fields.push_back(f);
    }
  } else {
    const std::string format = o.last("format", o.has("start") ? kSqueueStart : kSqueueDefault);
    auto parsed = parse_percent_format(format);
    if (!parsed.is_ok()) return fail(parsed.status());
    fields = std::move(parsed).value();
  }
  auto jobs = list_jobs(Client(cli::socket_path()), /*ended_too=*/false);
  if (!jobs.is_ok()) return fail(jobs.status());
  std::vector<std::string> users = o.list("user");
  if (o.has("me")) users.push_back(caller_user());
  const std::int64_t now = cli::wall_clock_us();
  if (!o.has("noheader")) std::cout << format_line(fields, squeue_header);
  for (const v1::Job& job : *jobs) {
    const std::string state = state_name(job.state(), job.reason());
    if (!matches_id(job, o.list("jobs")) || !allowed(users, job.user()) ||
        !allowed(o.list("partition"), partition_of(job.queue())) ||
        !allowed(o.list("account"), job.spec().account()) || !allowed(o.list("name"), job.name()) ||
        !state_matches(o.list("states"), state)) {
      continue;
    }
    if (o.has("start") && job.state() != v1::PENDING) continue;
    std::cout << format_line(fields,
                             [&job, now](char letter) { return squeue_letter(job, letter, now); });
  }
  return 0;
}

// ---- sacct ----

namespace {

// One row of sacct: a job, or one of its steps ("J.batch", "J.0").
struct AcctRow {
  const v1::Job* job = nullptr;
  const v1::Step* step = nullptr;  // a step of the job's (hpcq run inside it)
  bool batch = false;              // the job's batch script, "J.batch"
  bool whole = false;              // a job that is its own step 0 (srun outside a job)
};

std::string row_id(const AcctRow& r, bool raw) {
  const std::string id = raw ? std::to_string(r.job->id()) : job_id_text(*r.job);
  if (r.batch) return id + ".batch";
  if (r.whole) return id + ".0";
  if (r.step != nullptr) return id + "." + std::to_string(slurm_step_of(r.step->id()));
  return id;
}

// A step (or batch script) whose task a signal ended, or that the time
// limit ended, is CANCELLED in Slurm's accounting; the job FAILED (TIMEOUT).
std::string row_state(const AcctRow& r) {
  const bool step_row = r.step != nullptr;
  const v1::JobState state = step_row ? r.step->state() : r.job->state();
  const int code = step_row ? r.step->exit_code() : r.job->exit_code();
  if ((step_row || r.batch) && ((state == v1::FAILED && code > 128) || state == v1::TIMEOUT)) {
    return "CANCELLED";
  }
  return state_name(state, step_row ? r.step->reason() : r.job->reason());
}

std::string row_exit_code(const AcctRow& r) {
  if (r.step != nullptr) return exit_code_text(r.step->exit_code(), r.step->state());
  if (r.batch && r.job->state() == v1::TIMEOUT) return "0:15";  // the script got SIGTERM
  return exit_code_text(r.job->exit_code(), r.job->state());
}

std::string tres(int cpus, std::uint64_t mem_bytes, int nodes) {
  std::string out = "billing=" + std::to_string(cpus) + ",cpu=" + std::to_string(cpus);
  if (mem_bytes > 0) out += ",mem=" + size_text(mem_bytes, 'M');
  return out + ",node=" + std::to_string(nodes);
}

std::string acct_field(const AcctRow& r, std::string name, std::int64_t now) {
  const v1::Job& job = *r.job;
  name = lower(std::move(name));
  const bool step_row = r.step != nullptr;
  const std::int64_t start = step_row ? r.step->start_time_us() : job.start_time_us();
  const std::int64_t end = step_row ? r.step->end_time_us() : job.end_time_us();
  std::uint64_t mem = 0;
  for (const auto& part : job.allocation()) mem += part.memory_bytes();
  int cpus = allocated_cpus(job);
  int nodes = node_count(job);
  if (step_row) {
    cpus = 0;
    for (const auto& part : r.step->allocation()) cpus += part.cores_size();
    nodes = r.step->nodes_size();
  } else if (r.batch) {
    cpus = job.allocation_size() > 0 ? job.allocation(0).cores_size() : cpus;
    nodes = 1;
  }
  if (name == "jobid") return row_id(r, false);
  if (name == "jobidraw") return row_id(r, true);
  if (name == "jobname") {
    if (r.batch) return "batch";
    if (step_row && r.step->spec().argv_size() > 0) {
      const std::string& argv0 = r.step->spec().argv(0);
      return argv0.substr(argv0.rfind('/') + 1);
    }
    return job.name();
  }
  if (name == "state") return row_state(r);
  if (name == "exitcode") return row_exit_code(r);
  if (name == "derivedexitcode") return exit_code_text(job.exit_code(), job.state());
  if (name == "elapsed" || name == "elapsedraw") {
    const std::int64_t seconds = start == 0 ? 0 : ((end != 0 ? end : now) - start) / 1'000'000;
    return name == "elapsedraw" ? std::to_string(seconds) : elapsed_text(seconds);
  }
  if (name == "totalcpu") {
    return cpu_time_text(step_row ? r.step->cpu_time_us() : job.cpu_time_us());
  }
  if (name == "maxrss") {
    // A job's own row has none in Slurm; its steps have theirs.
    if (step_row) return size_text(r.step->max_memory_bytes(), 'K');
    return r.batch || r.whole ? size_text(job.max_memory_bytes(), 'K') : "";
  }
  if (name == "alloctres") return tres(cpus, r.batch || step_row ? 0 : mem, nodes);
  if (name == "alloccpus" || name == "ncpus") return std::to_string(cpus);
  if (name == "nnodes") return std::to_string(nodes);
  if (name == "ntasks") {
    if (step_row) return std::to_string(r.step->ntasks());
    if (r.batch) return "1";
    if (r.whole) return std::to_string(std::max(1, job.spec().ntasks()));
    return "";
  }
  if (name == "nodelist") {
    if (step_row) {
      return compress_hostlist(
          std::vector<std::string>(r.step->nodes().begin(), r.step->nodes().end()));
    }
    if (r.batch) return job.nodes_size() > 0 ? job.nodes(0) : "None assigned";
    return job.nodes_size() > 0 ? node_list(job) : "None assigned";
  }
  if (name == "account") return job.spec().account();
  if (name == "partition") return step_row || r.batch || r.whole ? "" : partition_of(job.queue());
  if (name == "qos") return job.spec().qos().empty() ? "normal" : job.spec().qos();
  if (name == "user") return step_row || r.batch || r.whole ? "" : job.user();
  if (name == "uid") return std::to_string(job.uid());
  if (name == "start") return time_text(start);
  if (name == "end") return time_text(end);
  if (name == "submit")
    return time_text(step_row ? r.step->submit_time_us() : job.submit_time_us());
  if (name == "timelimit")
    return step_row || r.batch ? "" : limit_text(job.spec().time_limit_s(), false);
  if (name == "workdir") return job.spec().cwd();
  if (name == "reqcpus") return std::to_string(allocated_cpus(job));
  if (name == "reqmem") return mem > 0 ? size_text(mem, 'M') : "0";
  if (name == "reqnodes") return std::to_string(node_count(job));
  if (name == "reason") return reason_text(job);
  if (name == "priority") return std::to_string(static_cast<long long>(job.priority()));
  if (name == "cluster") return "hpcq";
  return "";
}

bool known_acct_field(std::string name) {
  name = lower(std::move(name));
  static const std::set<std::string> kKnown = {
      "jobid",     "jobidraw",   "jobname",  "state",    "exitcode",  "derivedexitcode",
      "elapsed",   "elapsedraw", "totalcpu", "maxrss",   "alloctres", "alloccpus",
      "ncpus",     "nnodes",     "ntasks",   "nodelist", "account",   "partition",
      "qos",       "user",       "uid",      "start",    "end",       "submit",
      "timelimit", "workdir",    "reqcpus",  "reqmem",   "reqnodes",  "reason",
      "priority",  "cluster"};
  return kKnown.count(name) > 0;
}

// sacct's default column widths.
int acct_width(std::string name) {
  name = lower(std::move(name));
  static const std::map<std::string, int> kWidths = {
      {"jobid", 12},   {"jobidraw", 12}, {"exitcode", 8},  {"start", 19},
      {"end", 19},     {"submit", 19},   {"nodelist", 15}, {"alloctres", 30},
      {"workdir", 30}, {"nnodes", 8},    {"ntasks", 8},    {"derivedexitcode", 11}};
  auto it = kWidths.find(name);
  return it == kWidths.end() ? 10 : it->second;
}

// -S/-E: sacct's forms that people use: YYYY-MM-DD[THH:MM[:SS]], now, now-N[units].
Result<std::int64_t> acct_time(const std::string& text, const char* option) {
  if (text == "now") return cli::wall_clock_us();
  auto t = parse_local_time(text, option);
  if (t.is_ok()) return t;
  auto when = parse_when(text, option);
  if (!when.is_ok()) return t.status();
  return resolve_when(*when, cli::wall_clock_us(), option);
}

std::int64_t midnight_today_us() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  local.tm_hour = local.tm_min = local.tm_sec = 0;
  return static_cast<std::int64_t>(std::mktime(&local)) * 1'000'000;
}

}  // namespace

int sacct(const std::vector<std::string>& args) {
  auto read = read_options(args, {{'j', "jobs", true},
                                  {'u', "user", true},
                                  {'S', "starttime", true},
                                  {'E', "endtime", true},
                                  {'X', "allocations", false},
                                  {'n', "noheader", false},
                                  {'P', "parsable2", false},
                                  {'p', "parsable", false},
                                  {'o', "format", true},
                                  {'s', "state", true},
                                  {'a', "allusers", false},
                                  {'b', "brief", false},
                                  {'l', "long", false},
                                  {0, "name", true},
                                  {'A', "accounts", true},
                                  {'r', "partition", true},
                                  {0, "delimiter", true},
                                  {'D', "duplicates", false}});
  if (!read.is_ok()) return fail(read.status());
  const ReadOptions& o = *read;
  if (printed_usage(o, "sacct")) return 0;
  std::string format = o.has("brief") ? "JobID,State,ExitCode"
                       : o.has("long")
                           ? "JobID,JobIDRaw,JobName,Partition,MaxRSS,AllocCPUS,Elapsed,TotalCPU,"
                             "State,ExitCode,NNodes,NTasks,NodeList,AllocTRES,Account,Start,End"
                           : "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode";
  if (o.has("format")) format = o.last("format");
  auto fields = parse_named_format(format, '%');
  if (!fields.is_ok()) return fail(fields.status());
  for (Field& f : *fields) {
    if (!known_acct_field(f.name))
      return fail(invalid_argument("Invalid field requested: " + quote(f.name)));
    if (!f.width_given) f.width = acct_width(f.name);
  }
  const bool parsable = o.has("parsable2") || o.has("parsable");
  const std::string delimiter = o.last("delimiter", "|");
  std::int64_t since = 0, until = 0;
  if (o.has("starttime")) {
    auto t = acct_time(o.last("starttime"), "--starttime");
    if (!t.is_ok()) return fail(t.status());
    since = *t;
  } else if (!o.has("jobs")) {
    since = midnight_today_us();  // sacct's default: today's jobs
  }
  if (o.has("endtime")) {
    auto t = acct_time(o.last("endtime"), "--endtime");
    if (!t.is_ok()) return fail(t.status());
    until = *t;
  }
  std::vector<std::string> users = o.list("user");
  if (users.empty() && !o.has("allusers") && getuid() != 0) users.push_back(caller_user());
  auto jobs = list_jobs(Client(cli::socket_path()), /*ended_too=*/true);
  if (!jobs.is_ok()) return fail(jobs.status());
  const std::int64_t now = cli::wall_clock_us();
  std::vector<AcctRow> rows;
  for (const v1::Job& job : *jobs) {
    const std::string state = state_name(job.state(), job.reason());
    if (!matches_id(job, o.list("jobs")) || !allowed(users, job.user()) ||
        !allowed(o.list("accounts"), job.spec().account()) ||
        !allowed(o.list("name"), job.name()) ||
        !allowed(o.list("partition"), partition_of(job.queue())) ||
        !state_matches(o.list("state"), state)) {
      continue;
    }
    // In the window: not ended before it starts, not submitted after it ends.
    if (since != 0 && job.end_time_us() != 0 && job.end_time_us() < since) continue;
    if (until != 0 && job.submit_time_us() > until) continue;
    rows.push_back({&job});
    if (o.has("allocations") || job.start_time_us() == 0) continue;
    if (job.spec().batch() && !(job.spec().script().empty() && job.spec().script_bytes().empty())) {
      rows.push_back({&job, nullptr, true});
    } else if (!job.spec().batch()) {
      rows.push_back({&job, nullptr, false, true});
    }
    for (const v1::Step& step : job.steps()) rows.push_back({&job, &step});
  }
  TableStyle style;
  style.header = !o.has("noheader");
  style.parsable = parsable;
  style.trailing = o.has("parsable");  // -p ends each line with one too
  style.delimiter = delimiter;
  print_table(*fields, style, rows.size(), [&rows, now](std::size_t row, const Field& f) {
    return acct_field(rows[row], f.name, now);
  });
  return 0;
}

// ---- sinfo ----

namespace {

struct NodeRow {
  std::string partition;  // with '*' for the default
  std::string avail = "up";
  std::int64_t limit_s = 0;
  const v1::Node* node = nullptr;
};

std::string node_state(const v1::Node& node) {
  const std::string& s = node.state();
  if (s == "up") {
    if (node.free_cores() >= node.cores()) return "idle";
    return node.free_cores() == 0 ? "allocated" : "mixed";
  }
  if (s == "drained") return "drained";
  if (s == "draining") return "draining";
  if (s == "down") return "down";
  return "unknown";
}

std::string compact_node_state(const std::string& state) {
  static const std::map<std::string, std::string> kCompact = {
      {"idle", "idle"},     {"allocated", "alloc"}, {"mixed", "mix"},  {"drained", "drain"},
      {"draining", "drng"}, {"down", "down"},       {"unknown", "unk"}};
  auto it = kCompact.find(state);
  return it == kCompact.end() ? state : it->second;
}

std::string sinfo_letter(const std::vector<const NodeRow*>& group, char letter) {
  const NodeRow& first = *group.front();
  std::vector<std::string> names;
  int cpus = 0, free = 0, other = 0;
  for (const NodeRow* r : group) {
    names.push_back(r->node->name());
    cpus += r->node->cores();
    if (r->node->state() == "up") {
      free += r->node->free_cores();
    } else {
      other += r->node->cores();
    }
  }
  switch (letter) {
    case 'P': return first.partition;
    case 'R': return first.partition.substr(0, first.partition.find('*'));
    case 'a': return first.avail;
    case 'l': return first.limit_s > 0 ? squeue_duration(first.limit_s) : "infinite";
    case 'D': return std::to_string(group.size());
    case 'T': return node_state(*first.node);
    case 't': return compact_node_state(node_state(*first.node));
    case 'N':
    case 'n': return compress_hostlist(names);
    case 'c': return std::to_string(first.node->cores());
    case 'm': return std::to_string(first.node->memory_bytes() >> 20);
    case 'C':
      return std::to_string(cpus - free - other) + "/" + std::to_string(free) + "/" +
             std::to_string(other) + "/" + std::to_string(cpus);
    case 'f': {
      std::string out;
      for (const auto& f : first.node->features()) out += (out.empty() ? "" : ",") + f;
      return out.empty() ? "(null)" : out;
    }
    case 'G': {
      std::string out;
      if (first.node->gpus() > 0) out = "gpu:" + std::to_string(first.node->gpus());
      for (const auto& [name, n] : first.node->gres()) {
        out += (out.empty() ? "" : ",") + name + ":" + std::to_string(n);
      }
      return out.empty() ? "(null)" : out;
    }
    case 'E': return first.node->reason().empty() ? "none" : first.node->reason();
    default: return "";
  }
}

std::string sinfo_header(char letter) {
  static const std::map<char, std::string> kHeaders = {
      {'P', "PARTITION"},      {'R', "PARTITION"}, {'a', "AVAIL"},  {'l', "TIMELIMIT"},
      {'D', "NODES"},          {'T', "STATE"},     {'t', "STATE"},  {'N', "NODELIST"},
      {'n', "HOSTNAMES"},      {'c', "CPUS"},      {'m', "MEMORY"}, {'C', "CPUS(A/I/O/T)"},
      {'f', "AVAIL_FEATURES"}, {'G', "GRES"},      {'E', "REASON"}};
  auto it = kHeaders.find(letter);
  return it == kHeaders.end() ? std::string(1, letter) : it->second;
}

}  // namespace

int sinfo(const std::vector<std::string>& args) {
  auto read = read_options(args, {{'h', "noheader", false},
                                  {'o', "format", true},
                                  {'N', "Node", false},
                                  {'l', "long", false},
                                  {'p', "partition", true},
                                  {'n', "nodes", true},
                                  {'s', "summarize", false},
                                  {'a', "all", false}});
  if (!read.is_ok()) return fail(read.status());
  const ReadOptions& o = *read;
  if (printed_usage(o, "sinfo")) return 0;
  Client client(cli::socket_path());
  v1::ListQueuesResponse queues;
  Status s = client.call("ListQueues", v1::ListQueuesRequest(), &queues);
  if (!s.is_ok()) return fail(s);
  v1::ListNodesResponse nodes;
  s = client.call("ListNodes", v1::ListNodesRequest(), &nodes);
  if (!s.is_ok()) return fail(s);
  std::map<std::string, const v1::Node*> by_name;
  for (const v1::Node& n : nodes.nodes()) by_name[n.name()] = &n;
  std::vector<std::string> only_nodes;
  for (const std::string& list : o.list("nodes")) {
    auto names = expand_hostlist(list);
    if (!names.is_ok()) return fail(invalid_argument("--nodes: " + names.status().message()));
    only_nodes.insert(only_nodes.end(), names->begin(), names->end());
  }
  std::vector<NodeRow> rows;
  for (const v1::QueueSummary& q : queues.queues()) {
    const std::string name = partition_of(q.name());
    if (!allowed(o.list("partition"), name)) continue;
    for (const std::string& node : q.nodes()) {
      auto it = by_name.find(node);
      if (it == by_name.end() || !allowed(only_nodes, node)) continue;
      rows.push_back({name + (q.is_default() ? "*" : ""), "up", q.max_time_limit_s(), it->second});
    }
  }
  const bool per_node = o.has("Node");
  std::string format = per_node
                           ? (o.has("long") ? "%N %.6D %P %.11T %.4c %.8m %.6E" : "%N %.6D %P %6t")
                       : o.has("summarize") ? "%9P %.5a %.10l %.16C %N"
                       : o.has("long")      ? "%9P %.5a %.10l %.6D %.10T %N"
                                            : "%9P %.5a %.10l %.6D %.6t %N";
  if (o.has("format")) format = o.last("format");
  auto fields = parse_percent_format(format);
  if (!fields.is_ok()) return fail(fields.status());
  // Rows of one partition in one state are one line (-N: one per node).
  std::vector<std::vector<const NodeRow*>> groups;
  for (const NodeRow& row : rows) {
    const std::string state = node_state(*row.node);
    auto same = std::find_if(groups.begin(), groups.end(), [&](const auto& g) {
      return !per_node && g.front()->partition == row.partition &&
             node_state(*g.front()->node) == state;
    });
    if (same == groups.end()) {
      groups.push_back({&row});
    } else {
      same->push_back(&row);
    }
  }
  if (!o.has("noheader")) std::cout << format_line(*fields, sinfo_header);
  for (const auto& group : groups) {
    std::cout << format_line(*fields,
                             [&group](char letter) { return sinfo_letter(group, letter); });
  }
  return 0;
}

}  // namespace hpcq::compat

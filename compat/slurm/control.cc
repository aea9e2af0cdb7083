// scancel and scontrol: hpcq's cancel, signal, hold, release,
// requeue, update and its job, node and partition views, in Slurm's words.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <iostream>

#include "cli/client.h"
#include "compat/slurm/commands.h"
#include "compat/slurm/slurm_text.h"
#include "lib/core/hostlist.h"
#include "lib/core/id_text.h"
#include "lib/core/split.h"
#include "lib/core/units.h"
#include "lib/job/job.h"

namespace hpcq::compat {

using cli::Client;
using cli::fail;

namespace {

// A job (and step) as Slurm's commands take them: N (with every element of
// an array of that id), A_I, and N.S for Slurm's step S.
struct Target {
  std::vector<JobId> jobs;
  std::uint32_t step = 0;  // hpcq's; 0: the job itself
};

Result<Target> resolve(const Client& client, const std::string& text,
                       const std::vector<v1::Job>& jobs) {
  Target target;
  std::string id = text;
  if (const std::size_t dot = text.find('.'); dot != std::string::npos) {
    const std::string step = text.substr(dot + 1);
    auto n = parse_job_id(step);
    if (!n.is_ok() && step != "0") return invalid_argument("Invalid job id " + quote(text));
    target.step = hpcq_step_of(step == "0" ? 0 : static_cast<std::uint32_t>(*n));
    id = text.substr(0, dot);
  }
  for (const v1::Job& job : jobs) {
    if (id == std::to_string(job.id()) || id == job_id_text(job) ||
        (job.array_job_id() != 0 && id == std::to_string(job.array_job_id()) &&
         id.find('_') == std::string::npos)) {
      target.jobs.push_back(job.id());
    }
  }
  if (target.jobs.empty()) {
    // One the list does not hold (ended long ago, another's): hpcqd says why.
    auto n = parse_job_id(id);
    if (!n.is_ok()) return invalid_argument("Invalid job id " + quote(text));
    v1::GetJobRequest request;
    request.set_id(*n);
    v1::Job job;
    Status s = client.call("GetJob", request, &job);
    if (!s.is_ok()) return Status(s.code(), "Invalid job id specified (" + s.message() + ")");
    target.jobs.push_back(*n);
  }
  return target;
}

// One call per job of each id; the worst status, each failure in one line.
template <typename Request, typename Response>
int for_each_target(const std::vector<std::string>& ids, const char* method, const char* what,
                    const std::function<void(Request&)>& fill = {}) {
  Client client(cli::socket_path());
  auto jobs = list_jobs(client, /*ended_too=*/false);
  if (!jobs.is_ok()) return fail(jobs.status());
  int rc = 0;
  for (const std::string& text : ids) {
    auto target = resolve(client, text, *jobs);
    if (!target.is_ok()) {
      rc = std::max(rc, fail(Status(target.status().code(), std::string(what) +
                                                                " error on job id " + quote(text) +
                                                                ": " + target.status().message())));
      continue;
    }
    for (JobId id : target->jobs) {
      Request request;
      request.set_id(id);
      if constexpr (requires(Request r) { r.set_step(1u); }) request.set_step(target->step);
      if (fill) fill(request);
      Response response;
      Status s = client.call(method, request, &response);
      // An array's element that ended already is not the array's error.
      if (!s.is_ok() && !(target->jobs.size() > 1 && s.code() == Code::kFailedPrecondition)) {
        rc = std::max(rc, fail(Status(s.code(), std::string(what) + " error on job id " +
                                                    std::to_string(id) + ": " + s.message())));
      }
    }
  }
  return rc;
}

}  // namespace

int scancel(const std::vector<std::string>& args) {
  auto read = read_options(args, {{'s', "signal", true},
                                  {'u', "user", true},
                                  {'n', "name", true},
                                  {'t', "state", true},
                                  {'p', "partition", true},
                                  {0, "me", false},
                                  {'b', "batch", false},
                                  {'f', "full", false},
                                  {'Q', "quiet", false},
                                  {'v', "verbose", false},
                                  {'A', "account", true}});
  if (!read.is_ok()) return fail(read.status());
  const ReadOptions& o = *read;
  if (printed_usage(o, "scancel", "JOB_ID[.STEP]...")) return 0;
  if (o.has("batch")) {
    return fail(invalid_argument("--batch: not honoured by hpcq (a signal goes to the whole job)"));
  }
  std::vector<std::string> ids = o.operands;
  const bool filtered = o.has("user") || o.has("name") || o.has("state") || o.has("partition") ||
                        o.has("me") || o.has("account");
  if (filtered) {
    // scancel -u USER [-n NAME] [-t STATE]: every matching job (and of the ids given).
    Client client(cli::socket_path());
    auto jobs = list_jobs(client, /*ended_too=*/false);
    if (!jobs.is_ok()) return fail(jobs.status());
    std::vector<std::string> users = o.list("user");
    if (o.has("me")) users.push_back(caller_user());
    // States in any case, as Slurm takes them ("pending", "PD", "r").
    std::vector<std::string> states = o.list("state");
    for (std::string& s : states) s = lower(s);
    std::vector<std::string> matched;
    for (const v1::Job& job : *jobs) {
      const std::string state = state_name(job.state(), job.reason());
      const bool state_ok = states.empty() || allowed(states, lower(state)) ||
                            allowed(states, lower(compact_state(state)));
      if (allowed(users, job.user()) && allowed(o.list("name"), job.name()) && state_ok &&
          allowed(o.list("partition"), partition_of(job.queue())) &&
          allowed(o.list("account"), job.spec().account()) &&
          (ids.empty() ||
           std::find(ids.begin(), ids.end(), std::to_string(job.id())) != ids.end())) {
        matched.push_back(std::to_string(job.id()));
      }
    }
    ids = matched;
    if (ids.empty()) return 0;
  }
  if (ids.empty()) return fail(invalid_argument("No job identification provided"));
  if (o.has("signal")) {
    auto signo = job::parse_signal(o.last("signal"));
    if (!signo.is_ok()) return fail(invalid_argument("Invalid signal: " + quote(o.last("signal"))));
    const int sig = *signo;
    return for_each_target<v1::SignalRequest, v1::SignalResponse>(
        ids, "Signal", "Signal", [sig](v1::SignalRequest& r) { r.set_signal(sig); });
  }
  return for_each_target<v1::CancelRequest, v1::CancelResponse>(ids, "Cancel", "Kill job");
}

// ---- scontrol ----

namespace {

std::string user_with_id(const std::string& name, std::uint32_t id) {
  return name + "(" + std::to_string(id) + ")";
}

// scontrol show job: Slurm's key=value layout, a record per job (-o: one line).
std::string show_job(const v1::Job& job, bool one_line) {
  const std::int64_t now = cli::wall_clock_us();
  const v1::JobSpec& spec = job.spec();
  const std::string state = state_name(job.state(), job.reason());
  std::string reason = job.state() == v1::PENDING ? (job.held() ? "JobHeldUser" : "None") : "None";
  auto or_null = [](const std::string& v) { return v.empty() ? std::string("(null)") : v; };
  std::uint64_t mem = 0;
  for (const auto& part : job.allocation()) mem += part.memory_bytes();
  const int cpus = allocated_cpus(job);
  const int ntasks = std::max(1, spec.ntasks());
  std::vector<std::vector<std::string>> lines = {
      {"JobId=" + std::to_string(job.id()), "JobName=" + job.name()},
      {"UserId=" + user_with_id(job.user(), job.uid())},
      {"Priority=" + std::to_string(static_cast<long long>(job.priority())), "Nice=0",
       "Account=" + or_null(spec.account()), "QOS=" + (spec.qos().empty() ? "normal" : spec.qos())},
      {"JobState=" + state, "Reason=" + reason, "Dependency=" + or_null(spec.dependency())},
      {"Requeue=" + std::string(spec.requeue() ? "1" : "0"),
       "Restarts=" + std::to_string(job.requeue_count()),
       "BatchFlag=" + std::string(spec.batch() ? "1" : "0"), "Reboot=0",
       "ExitCode=" + exit_code_text(job.exit_code(), job.state())},
      {"RunTime=" + elapsed_text(run_seconds(job, now)),
       "TimeLimit=" + limit_text(spec.time_limit_s(), false), "TimeMin=N/A"},
      {"SubmitTime=" + time_text(job.submit_time_us()),
       "EligibleTime=" + time_text(std::max(job.submit_time_us(), spec.begin_time_us()))},
      {"StartTime=" + time_text(job.start_time_us()), "EndTime=" + time_text(job.end_time_us()),
       "Deadline=N/A"},
      {"Partition=" + partition_of(job.queue())},
      {"ReqNodeList=" + or_null(compress_hostlist(std::vector<std::string>(spec.nodelist().begin(),
                                                                           spec.nodelist().end()))),
       "ExcNodeList=" + or_null(compress_hostlist(std::vector<std::string>(spec.exclude().begin(),
                                                                           spec.exclude().end())))},
      {"NodeList=" + or_null(node_list(job)),
       "BatchHost=" + (job.nodes_size() > 0 ? job.nodes(0) : std::string("(null)"))},
      {"NumNodes=" + std::to_string(node_count(job)), "NumCPUs=" + std::to_string(cpus),
       "NumTasks=" + std::to_string(ntasks),
       "CPUs/Task=" + std::to_string(std::max(1, spec.cpus_per_task()))},
      {"TRES=cpu=" + std::to_string(cpus) + (mem > 0 ? ",mem=" + size_text(mem, 'M') : "") +
       ",node=" + std::to_string(node_count(job))},
      {"Features=" + or_null(spec.constraint())},
      {"Command=" + (spec.argv_size() > 0 ? spec.argv(0) : std::string("(null)"))},
      {"WorkDir=" + spec.cwd()},
      {"StdErr=" + (job.stderr().empty() ? job.stdout() : job.stderr())},
      {"StdIn=/dev/null"},
      {"StdOut=" + job.stdout()}};
  if (job.array_job_id() != 0) {
    lines[0].insert(lines[0].begin() + 1, {"ArrayJobId=" + std::to_string(job.array_job_id()),
                                           "ArrayTaskId=" + std::to_string(job.array_task_id())});
  }
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::string text;
    for (const std::string& pair : lines[i]) text += (text.empty() ? "" : " ") + pair;
    out += one_line ? (i > 0 ? " " : "") + text : (i > 0 ? "   " : "") + text + "\n";
  }
  return out + (one_line ? "\n" : "\n");
}

std::string show_node(const v1::Node& node, bool one_line) {
  std::string state = node.state() == "up"         ? (node.free_cores() >= node.cores() ? "IDLE"
                                                      : node.free_cores() == 0          ? "ALLOCATED"
                                                                                        : "MIXED")
                      : node.state() == "down"     ? "DOWN"
                      : node.state() == "drained"  ? "IDLE+DRAIN"
                      : node.state() == "draining" ? "MIXED+DRAIN"
                                                   : "UNKNOWN";
  std::string features;
  for (const auto& f : node.features()) features += (features.empty() ? "" : ",") + f;
  std::vector<std::string> pairs = {
      "NodeName=" + node.name(),
      "CPUAlloc=" + std::to_string(node.cores() - node.free_cores()),
      "CPUTot=" + std::to_string(node.cores()),
      "Sockets=" + std::to_string(std::max(1, node.packages())),
      "RealMemory=" + std::to_string(node.memory_bytes() >> 20),
      "AvailableFeatures=" + (features.empty() ? "(null)" : features),
      "Gres=" + (node.gpus() > 0 ? "gpu:" + std::to_string(node.gpus()) : std::string("(null)")),
      "State=" + state,
      "Reason=" + (node.reason().empty() ? std::string("(null)") : node.reason())};
  std::string out;
  for (const std::string& p : pairs) out += (out.empty() ? "" : one_line ? " " : "\n   ") + p;
  return out + "\n\n";
}

std::string show_partition(const v1::QueueSummary& q, bool one_line) {
  std::vector<std::string> pairs = {
      "PartitionName=" + partition_of(q.name()),
      "Default=" + std::string(q.is_default() ? "YES" : "NO"),
      "MaxTime=" + (q.max_time_limit_s() > 0 ? elapsed_text(q.max_time_limit_s()) : "UNLIMITED"),
      "Nodes=" + compress_hostlist(std::vector<std::string>(q.nodes().begin(), q.nodes().end())),
      "State=UP",
      "TotalCPUs=" + std::to_string(q.cores_total()),
      "TotalNodes=" + std::to_string(q.nodes_size())};
  std::string out;
  for (const std::string& p : pairs) out += (out.empty() ? "" : one_line ? " " : "\n   ") + p;
  return out + "\n\n";
}

int scontrol_show(const std::vector<std::string>& words, bool one_line) {
  if (words.empty()) return fail(invalid_argument("show: what? (job, node, partition, hostnames)"));
  std::string what = words[0];
  if (what.size() > 1 && what.back() == 's' && what != "hostnames") what.pop_back();
  const std::string name = words.size() > 1 ? words[1] : "";
  Client client(cli::socket_path());
  if (what == "hostname" || what == "hostnames") {
    std::string list = name;
    if (list.empty()) {
      const char* env = std::getenv("SLURM_JOB_NODELIST");
      list = env != nullptr ? env : "";
    }
    auto names = expand_hostlist(list);
    if (!names.is_ok()) return fail(names.status());
    for (const std::string& n : *names) std::cout << n << "\n";
    return 0;
  }
  if (what == "hostlist") {
    auto names = expand_hostlist(name);
    if (!names.is_ok()) return fail(names.status());
    std::cout << compress_hostlist(*names) << "\n";
    return 0;
  }
  if (what == "job") {
    auto jobs = list_jobs(client, /*ended_too=*/true);
    if (!jobs.is_ok()) return fail(jobs.status());
    bool any = false;
    for (const v1::Job& job : *jobs) {
      if (!name.empty() && name != std::to_string(job.id()) && name != job_id_text(job) &&
          !(job.array_job_id() != 0 && name == std::to_string(job.array_job_id()))) {
        continue;
      }
      std::cout << show_job(job, one_line);
      any = true;
    }
    if (!any && !name.empty()) return fail(not_found("Invalid job id specified"));
    if (!any) std::cout << "No jobs in the system\n";
    return 0;
  }
  if (what == "node") {
    v1::ListNodesResponse nodes;
    Status s = client.call("ListNodes", v1::ListNodesRequest(), &nodes);
    if (!s.is_ok()) return fail(s);
    bool any = false;
    for (const v1::Node& node : nodes.nodes()) {
      if (!name.empty() && node.name() != name) continue;
      std::cout << show_node(node, one_line);
      any = true;
    }
    if (!any) return fail(not_found("Node " + quote(name) + " not found"));
    return 0;
  }
  if (what == "partition") {
    v1::ListQueuesResponse queues;
    Status s = client.call("ListQueues", v1::ListQueuesRequest(), &queues);
    if (!s.is_ok()) return fail(s);
    bool any = false;
    for (const v1::QueueSummary& q : queues.queues()) {
      if (!name.empty() && partition_of(q.name()) != name) continue;
      std::cout << show_partition(q, one_line);
      any = true;
    }
    if (!any) return fail(not_found("Partition " + quote(name) + " not found"));
    return 0;
  }
  return fail(invalid_argument("show " + quote(what) + ": not known to hpcq's scontrol"));
}

// scontrol update JobId=N TimeLimit=T StartTime=WHEN: hpcq's Update.
int scontrol_update(const std::vector<std::string>& words) {
  std::string id, limit, begin;
  for (const std::string& w : words) {
    const std::size_t eq = w.find('=');
    const std::string key = lower(w.substr(0, eq));
    const std::string value = eq == std::string::npos ? "" : w.substr(eq + 1);
    if (key == "jobid") {
      id = value;
    } else if (key == "timelimit") {
      limit = value;
    } else if (key == "starttime") {
      begin = value;
    } else {
      return fail(
          invalid_argument("Update of " + quote(w.substr(0, eq)) + " is not supported by hpcq"));
    }
  }
  if (id.empty()) return fail(invalid_argument("update: no JobId= given"));
  if (limit.empty() && begin.empty()) return fail(invalid_argument("update: nothing to change"));
  v1::UpdateRequest request;
  if (!limit.empty()) {
    auto seconds = parse_duration_s(limit);
    if (!seconds.is_ok() || *seconds == 0) {
      return fail(invalid_argument("Invalid TimeLimit " + quote(limit)));
    }
    request.set_time_limit_s(*seconds);
  }
  if (!begin.empty()) {
    auto when = parse_when(begin, "StartTime");
    if (!when.is_ok()) return fail(when.status());
    auto at = resolve_when(*when, cli::wall_clock_us(), "StartTime");
    if (!at.is_ok()) return fail(at.status());
    request.set_begin_time_us(std::max<std::int64_t>(*at, 1));
  }
  auto n = parse_job_id(id);
  if (!n.is_ok()) return fail(invalid_argument("Invalid job id " + quote(id)));
  request.set_id(*n);
  v1::Job job;
  Status s = Client(cli::socket_path()).call("Update", request, &job);
  return s.is_ok() ? 0 : fail(s);
}

}  // namespace

int scontrol(const std::vector<std::string>& args) {
  bool one_line = false;
  std::vector<std::string> words;
  for (const std::string& w : args) {
    if (w == "-o" || w == "--oneliner") {
      one_line = true;
    } else if (words.empty() && (w == "-d" || w == "--details" || w == "-Q" || w == "--quiet")) {
      continue;
    } else {
      words.push_back(w);
    }
  }
  if (words.empty())
    return fail(invalid_argument("no command given (show, hold, release, requeue, update)"));
  const std::string command = words[0];
  const std::vector<std::string> rest(words.begin() + 1, words.end());
  if (command == "show") return scontrol_show(rest, one_line);
  if (command == "update") return scontrol_update(rest);
  std::vector<std::string> ids;
  for (const std::string& w : rest) {
    for (std::string& id : split_nonempty(w, ',')) ids.push_back(std::move(id));
  }
  if ((command == "hold" || command == "uhold" || command == "release" || command == "requeue") &&
      ids.empty()) {
    return fail(invalid_argument(quote(command) + ": no job id given"));
  }
  if (command == "hold" || command == "uhold") {
    return for_each_target<v1::HoldRequest, v1::HoldResponse>(ids, "Hold", "Hold");
  }
  if (command == "release") {
    return for_each_target<v1::ReleaseRequest, v1::ReleaseResponse>(ids, "Release", "Release");
  }
  if (command == "requeue") {
    return for_each_target<v1::RequeueRequest, v1::RequeueResponse>(ids, "Requeue", "Requeue");
  }
  return fail(invalid_argument("invalid keyword: " + quote(command) +
                               " (hpcq's scontrol: show, hold, "
                               "release, requeue, update)"));
}

}  // namespace hpcq::compat

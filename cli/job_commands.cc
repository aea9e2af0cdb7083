#include "cli/job_commands.h"

#include <pwd.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <optional>

#include "cli/client.h"
#include "cli/format.h"
#include "cli/list_command.h"
#include "cli/outcomes.h"
#include "lib/api/job_proto.h"
#include "lib/core/host_name.h"
#include "lib/core/hostlist.h"
#include "lib/core/id_text.h"
#include "lib/core/split.h"
#include "lib/core/units.h"
#include "lib/job/script_file.h"

extern char** environ;

namespace hpcq::cli {
namespace {

// The elements of array `array` the caller may see, in index order; empty
// if `array` is no array's id.
Result<std::vector<v1::Job>> array_elements(const Client& client, JobId array) {
  v1::ListJobsRequest request;
  request.set_all(true);
  request.set_array_job_id(array);
  v1::ListJobsResponse response;
  HPCQ_RETURN_IF_ERROR(client.call("ListJobs", request, &response));
  std::vector<v1::Job> elements(response.jobs().begin(), response.jobs().end());
  std::sort(elements.begin(), elements.end(), [](const v1::Job& a, const v1::Job& b) {
    return a.array_task_id() < b.array_task_id();
  });
  return elements;
}

// A job id as users write it: N, or ARRAY_INDEX, an array's element as
// queue shows it (Slurm's 18_1). With `whole_arrays` an array's own id
// stands for all its elements (cancel, hold, release, wait: as scancel
// does); else for the job with that id, its first element.
Result<std::vector<JobId>> resolve_job_ids(const Client& client, const std::string& text,
                                           bool whole_arrays) {
  const std::size_t underscore = text.find('_');
  if (underscore != std::string::npos) {
    auto array = parse_job_id(text.substr(0, underscore));
    const std::string digits = text.substr(underscore + 1);
    if (!array.is_ok() || digits.empty() ||
        !std::all_of(digits.begin(), digits.end(),
                     [](unsigned char c) { return std::isdigit(c); })) {
      return invalid_argument("'" + text + "' is not a job id (want N or ARRAY_INDEX)");
    }
    auto elements = array_elements(client, *array);
    if (!elements.is_ok()) return elements.status();
    for (const v1::Job& job : *elements) {
      if (std::to_string(job.array_task_id()) == digits) return std::vector<JobId>{job.id()};
    }
    return not_found("no job " + text);
  }
  auto id = parse_job_id(text);
  if (!id.is_ok()) return id.status();
  // Only an array's own id lists its elements (a list walks every job the
  // leader has): a plain job is one lookup. A job the caller may not see is
  // left for the command to report.
  v1::GetJobRequest request;
  request.set_id(*id);
  v1::Job job;
  const bool array_head =
      whole_arrays && client.call("GetJob", request, &job).is_ok() && job.array_job_id() == *id;
  if (array_head) {
    auto elements = array_elements(client, *id);
    if (!elements.is_ok()) return elements.status();
    if (!elements->empty()) {
      std::vector<JobId> ids;
      for (const v1::Job& job : *elements) ids.push_back(job.id());
      return ids;
    }
  }
  return std::vector<JobId>{*id};
}

// "JOB.STEP" (a step, as hpcq run inside a batch job made it) or "JOB":
// the job's text and the step (0 for the job itself); digits only
// (lib/core/id_text.h).
Result<std::pair<std::string, std::uint32_t>> split_step(const std::string& text) {
  auto split = split_job_step(text);
  if (!split.is_ok()) return split.status();
  return std::pair<std::string, std::uint32_t>{std::move(split->job), split->step};
}

// The one job `text` names (ARRAY_INDEX accepted).
Result<JobId> resolve_job_id(const Client& client, const std::string& text) {
  auto ids = resolve_job_ids(client, text, /*whole_arrays=*/false);
  if (!ids.is_ok()) return ids.status();
  return ids->front();
}

// The fields a job's outcome row carries besides its id: the step, if one.
nlohmann::json step_field(std::uint32_t step) {
  return step == 0 ? nlohmann::json::object() : nlohmann::json{{"step", step}};
}

// cancel, hold, release, requeue: one RPC per job id; each failure prints its
// one-line error, --json the outcome of each (cli/outcomes.h), and the exit
// status is the worst.
template <typename Request, typename Response>
int for_each_id(const std::vector<std::string>& ids, const char* method, bool json) {
  Client client(socket_path());
  Outcomes outcomes("id");
  for (const auto& given : ids) {
    // cancel takes a step (JOB.STEP); hold and release only jobs.
    constexpr bool kSteps = requires(Request r) { r.set_step(1u); };
    auto split = kSteps ? split_step(given)
                        : Result<std::pair<std::string, std::uint32_t>>(
                              std::pair<std::string, std::uint32_t>{given, 0});
    if (!split.is_ok()) {
      outcomes.failed(given, split.status());
      continue;
    }
    const auto& [text, step] = *split;
    auto resolved = resolve_job_ids(client, text, /*whole_arrays=*/step == 0);
    if (!resolved.is_ok()) {
      outcomes.failed(given, resolved.status(), step_field(step));
      continue;
    }
    for (JobId id : *resolved) {
      Request request;
      request.set_id(id);
      if constexpr (kSteps) request.set_step(step);
      Response response;
      Status s = client.call(method, request, &response);
      // An array's element that ended already is not an error of the array's cancel.
      if (!s.is_ok() && !(resolved->size() > 1 && s.code() == Code::kFailedPrecondition)) {
        outcomes.failed(id, s, step_field(step));
      } else {
        outcomes.ok(id, step_field(step));
      }
    }
  }
  return outcomes.finish(json);
}

// queue and history: one ListJobs call.
template <typename Table>
int list_jobs(const v1::ListJobsRequest& request, bool json, Table table) {
  return print_list<v1::ListJobsResponse>(
      "ListJobs", request, json,
      [](const v1::ListJobsResponse& r) -> const auto& { return r.jobs(); }, job_json, table);
}

}  // namespace

// hpcq submit, batch and run: they differ in how the command runs
// (job::SubmitKind), and run then follows the job's output to its end.
int cmd_submit(const std::vector<std::string>& given_args, job::SubmitKind kind,
               SubmitStyle style) {
  if (job::asks_for_help(given_args)) {
    std::cout << job::submit_help(kind);
    return 0;
  }
  std::vector<std::string> args = given_args;
  // sbatch with no script reads it from stdin, and calls the job "sbatch".
  std::optional<std::string> stdin_text;
  if (style.stdin_script && !job::names_command(args)) {
    std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    if (text.size() > job::kMaxScriptBytes) {
      return fail(invalid_argument("the script on stdin is over " +
                                   std::to_string(job::kMaxScriptBytes) + " bytes"));
    }
    stdin_text = std::move(text);
    args.push_back("sbatch");
  }
  // Inside an allocation (a batch script sets HPCQ_JOB_ID), hpcq run is a step of it.
  std::optional<JobId> allocation;
  if (kind == job::SubmitKind::kRun) {
    if (const char* inside = std::getenv("HPCQ_JOB_ID"); inside && *inside) {
      auto id = parse_job_id(inside);
      if (!id.is_ok()) return fail(invalid_argument("HPCQ_JOB_ID: " + id.status().message()));
      allocation = *id;
    }
    block_interrupts();  // before any gRPC thread exists: they inherit it
  }
  job::SubmitContext ctx;
  std::error_code ec;
  ctx.cwd = std::filesystem::current_path(ec).string();
  const mode_t mask = umask(0);  // reading it means setting it: put it back
  umask(mask);
  ctx.umask = mask;
  ctx.now_us = wall_clock_us();
  ctx.environment = caller_environment();
  ctx.dialect = style.dialect;
  if (style.dialect == job::Dialect::kSlurm) {
    ctx.host = this_host_name();
    if (const char* site = std::getenv("HPCQ_SLURM_DOWNGRADE"); site != nullptr) {
      ctx.downgraded = split_nonempty(site, ',');
    }
  }
  // Bounded, and never a device: `hpcq batch /dev/zero` is refused, not read.
  ctx.read_file = [&stdin_text](const std::string& path) -> Result<std::string> {
    if (stdin_text) return *stdin_text;
    return job::read_script_file(path);
  };
  auto options = job::parse_submit_args(args, ctx, kind);
  if (!options.is_ok()) return fail(options.status());
  if (!style.bin_dir.empty()) {
    std::map<std::string, std::string> env = options->spec.env.vars();
    std::string& path = env["PATH"];  // --export=NONE: the system's, as Slurm's
    if (path.empty()) path = "/usr/local/bin:/usr/bin:/bin";
    if (!path.starts_with(style.bin_dir + ":")) path = style.bin_dir + ":" + path;
    options->spec.env = std::move(env);
  }
  for (const std::string& warning : options->warnings) {
    std::fprintf(stderr, "%s: warning: %s\n", style.program.c_str(), warning.c_str());
  }
  Client client(socket_path());
  if (allocation) return run_step(client, *allocation, *options);
  if (kind == job::SubmitKind::kAlloc) return alloc_job(client, *options);
  v1::SubmitRequest request;
  *request.mutable_spec() = api::to_proto(options->spec);
  v1::SubmitResponse response;
  Status s = client.submit(request, &response);
  if (!s.is_ok()) return fail(s);
  const std::uint32_t count = std::max<std::uint32_t>(response.count(), 1);
  if (kind == job::SubmitKind::kRun) {
    FollowOptions follow;
    follow.label = options->label;
    follow.interrupts = true;
    follow.input = true;
    follow.pty = options->pty;
    return follow_job(client, response.id(), follow);
  }
  if (options->json) {
    nlohmann::json out{{"id", response.id()}};
    if (!options->spec.array.empty()) {
      out["count"] = count;
      out["ids"] = nlohmann::json::array();
      for (std::uint32_t i = 0; i < count; ++i) out["ids"].push_back(response.id() + i);
    }
    std::cout << json_text(out) << "\n";
  } else if (style.dialect == job::Dialect::kSlurm && !options->parsable) {
    std::cout << "Submitted batch job " << response.id() << "\n";
  } else {
    // An array's tasks have consecutive ids from this one.
    std::cout << response.id() << "\n";
  }
  std::cout.flush();
  if (!options->wait) return 0;
  // As sbatch --wait: the job's exit code (an array's highest); 1 for one
  // that did not complete and has none (cancelled before it ran, lost).
  int code = 0;
  for (std::uint32_t i = 0; i < count; ++i) {
    v1::WatchJobsRequest watch;
    watch.set_id(response.id() + i);
    Stream reader(client, "WatchJobs", watch);
    v1::JobEvent event;
    v1::JobEvent last;
    while (reader.read(&event)) last = event;
    s = reader.finish();
    if (!s.is_ok()) return fail(s);
    if (last.state() != v1::COMPLETED) code = std::max(code, std::max(last.exit_code(), 1));
  }
  return std::min(code, 255);
}

int cmd_attach(const std::string& given, FollowOptions options) {
  auto split = split_step(given);
  if (!split.is_ok()) return fail(split.status());
  Client client(socket_path());
  auto id = resolve_job_id(client, split->first);
  if (!id.is_ok()) return fail(id.status());
  options.step = split->second;
  return follow_job(client, *id, options);
}

int cmd_stat(const std::string& text, bool json) {
  auto split = split_step(text);
  if (!split.is_ok()) return fail(split.status());
  Client client(socket_path());
  auto id = resolve_job_id(client, split->first);
  if (!id.is_ok()) return fail(id.status());
  v1::StatRequest request;
  request.set_id(*id);
  request.set_step(split->second);
  v1::StatResponse response;
  Status s = client.call("Stat", request, &response);
  if (!s.is_ok()) return fail(s);
  std::cout << (json ? json_text(stat_json(response)) + "\n" : stat_table(response));
  return 0;
}

int cmd_update(const std::string& text, const std::string& time_limit, const std::string& begin,
               bool json) {
  v1::UpdateRequest request;
  if (time_limit.empty() && begin.empty()) {
    return fail(invalid_argument("update: give --time-limit or --begin"));
  }
  if (!time_limit.empty()) {
    auto seconds = parse_duration_s(time_limit);
    if (!seconds.is_ok())
      return fail(invalid_argument("--time-limit: " + seconds.status().message()));
    if (*seconds == 0) return fail(invalid_argument("--time-limit: want a limit, not UNLIMITED"));
    request.set_time_limit_s(*seconds);
  }
  if (!begin.empty()) {
    auto when = parse_when(begin, "--begin");
    if (!when.is_ok()) return fail(when.status());
    auto at = resolve_when(*when, wall_clock_us(), "--begin");
    if (!at.is_ok()) return fail(at.status());
    request.set_begin_time_us(std::max<std::int64_t>(*at, 1));
  }
  Client client(socket_path());
  auto id = resolve_job_id(client, text);
  if (!id.is_ok()) return fail(id.status());
  request.set_id(*id);
  v1::Job job;
  Status s = client.call("Update", request, &job);
  if (!s.is_ok()) return fail(s);
  if (json) {
    std::cout << json_text(job_json(job)) << "\n";
    return 0;
  }
  std::cout << "job " << job.id() << ":";
  if (!time_limit.empty())
    std::cout << " time limit " << format_duration(job.spec().time_limit_s());
  if (!begin.empty()) std::cout << " begin " << time_text(job.spec().begin_time_us());
  std::cout << "\n";
  return 0;
}

int cmd_signal(const std::string& given, const std::string& name, bool json) {
  auto signo = job::parse_signal(name);
  if (!signo.is_ok()) return fail(signo.status());
  auto split = split_step(given);
  if (!split.is_ok()) return fail(split.status());
  Client client(socket_path());
  auto ids = resolve_job_ids(client, split->first, /*whole_arrays=*/split->second == 0);
  if (!ids.is_ok()) return fail(ids.status());
  // As before --json had outcomes: the first job that cannot be signalled ends the command.
  Outcomes outcomes("id");
  for (JobId id : *ids) {
    v1::SignalRequest request;
    request.set_id(id);
    request.set_step(split->second);
    request.set_signal(*signo);
    v1::SignalResponse response;
    Status s = client.call("Signal", request, &response);
    if (!s.is_ok()) {
      outcomes.failed(id, s, step_field(split->second));
      break;
    }
    outcomes.ok(id, step_field(split->second));
  }
  return outcomes.finish(json);
}

// Blocks until every job has ended; 0 only if all COMPLETED (like flux job wait).
int cmd_wait(const std::vector<std::string>& ids, bool json) {
  Client client(socket_path());
  bool all_completed = true;
  nlohmann::json out = nlohmann::json::array();
  std::vector<JobId> jobs;
  for (const auto& text : ids) {
    auto resolved = resolve_job_ids(client, text, /*whole_arrays=*/true);
    if (!resolved.is_ok()) return fail(resolved.status());
    jobs.insert(jobs.end(), resolved->begin(), resolved->end());
  }
  for (JobId id : jobs) {
    v1::WatchJobsRequest request;
    request.set_id(id);
    Stream reader(client, "WatchJobs", request);
    v1::JobEvent event;
    v1::JobEvent last;
    while (reader.read(&event)) last = event;
    Status s = reader.finish();
    if (!s.is_ok()) return fail(s);
    if (last.state() != v1::COMPLETED) {
      all_completed = false;
      if (!json) {
        std::fprintf(stderr, "hpcq: job %llu ended %s (exit code %d)%s%s\n",
                     static_cast<unsigned long long>(id), api::state_name(last.state()),
                     last.exit_code(), last.reason().empty() ? "" : ": ", last.reason().c_str());
      }
    }
    out.push_back(
        {{"id", id}, {"state", api::state_name(last.state())}, {"exit_code", last.exit_code()}});
  }
  if (json) std::cout << json_text(out) << "\n";
  return all_completed ? 0 : 1;
}

// hpcq checkpoint / migrate: one job; the record on success.
int cmd_checkpoint(const std::string& text, const std::string& then, const std::string& to,
                   bool json, bool elsewhere) {
  const auto action = job::parse_checkpoint_then(then);
  if (!action) {
    return fail(invalid_argument("--then: " + quote(then) + " is not continue, requeue or stop"));
  }
  Client client(socket_path());
  auto id = resolve_job_id(client, text);
  if (!id.is_ok()) return fail(id.status());
  v1::CheckpointRequest request;
  request.set_id(*id);
  request.set_action(api::to_proto(*action));
  request.set_elsewhere(elsewhere);
  if (!to.empty()) {
    auto nodes = expand_hostlist(to);
    if (!nodes.is_ok()) return fail(invalid_argument("--to: " + nodes.status().message()));
    for (const std::string& node : *nodes) request.add_to(node);
  }
  v1::CheckpointRecord record;
  Status s = client.call("Checkpoint", request, &record);
  if (!s.is_ok()) return fail(s);
  if (json) {
    std::cout << json_text(checkpoint_json(record)) << "\n";
  } else {
    std::cout << "job " << *id << ": checkpointed into " << record.image() << " ("
              << record.image_bytes() << " bytes, dump " << record.dump_seconds() << " s)"
              << (*action == job::CheckpointThen::kContinue ? ""
                  : *action == job::CheckpointThen::kStop   ? ", held"
                                                            : ", requeued")
              << "\n";
  }
  return 0;
}

// hpcq resize JOB --nodes N: waits for the application's answer (or the
// timeout); exit 0 only when it acknowledged.
int cmd_resize(const std::string& text, int nodes, bool json) {
  if (nodes < 1) return fail(invalid_argument("--nodes: must be at least 1"));
  Client client(socket_path());
  auto id = resolve_job_id(client, text);
  if (!id.is_ok()) return fail(id.status());
  v1::ResizeRequest request;
  request.set_id(*id);
  request.set_nodes(nodes);
  v1::ResizeRecord record;
  Status s = client.call("Resize", request, &record);
  if (!s.is_ok()) return fail(s);
  if (json) {
    std::cout << json_text(resize_json(record)) << "\n";
  } else {
    std::cout << "job " << *id << ": " << resize_kind_word(record) << " " << record.from() << " -> "
              << record.to() << " nodes: " << record.outcome()
              << (record.reason().empty() ? "" : " (" + record.reason() + ")") << "\n";
  }
  return record.outcome() == "acknowledged" ? 0 : 1;
}

// A JOB shows the job (with its steps); a JOB.STEP that step alone, as
// cancel, signal, attach and stat take JOB.STEP.
int cmd_status(const std::vector<std::string>& ids, bool json) {
  Client client(socket_path());
  nlohmann::json out = nlohmann::json::array();
  for (const auto& given : ids) {
    auto split = split_step(given);
    if (!split.is_ok()) return fail(split.status());
    // Not a structured binding: clang 14 cannot capture one (the lambda below).
    const std::string text = split->first;
    const std::uint32_t step = split->second;
    auto resolved = resolve_job_ids(client, text, /*whole_arrays=*/false);
    if (!resolved.is_ok()) return fail(resolved.status());
    for (JobId id : *resolved) {
      v1::GetJobRequest request;
      request.set_id(id);
      v1::Job job;
      Status s = client.call("GetJob", request, &job);
      if (!s.is_ok()) return fail(s);
      if (step != 0) {
        const auto found = std::find_if(job.steps().begin(), job.steps().end(),
                                        [step](const v1::Step& st) { return st.id() == step; });
        if (found == job.steps().end()) {
          return fail(
              not_found("job " + std::to_string(id) + " has no step " + std::to_string(step)));
        }
        if (json) {
          out.push_back(step_status_json(job, *found));
        } else {
          std::cout << step_status_text(job, *found);
        }
        continue;
      }
      if (json) {
        out.push_back(job_json(job));
      } else {
        std::cout << status_text(job);
      }
    }
  }
  // One job: the object itself; several: an array.
  if (json) std::cout << json_text(out.size() == 1 ? out[0] : out, 2) << "\n";
  return 0;
}

int cmd_queue(bool all, bool json) {
  v1::ListJobsRequest request;
  request.set_all(all);
  return list_jobs(request, json, queue_table);
}

int cmd_queues(bool json) {
  return print_list<v1::ListQueuesResponse>(
      "ListQueues", v1::ListQueuesRequest(), json,
      [](const v1::ListQueuesResponse& r) -> const auto& { return r.queues(); }, queue_summary_json,
      queues_table);
}

int cmd_cancel(const std::vector<std::string>& ids, bool json) {
  return for_each_id<v1::CancelRequest, v1::CancelResponse>(ids, "Cancel", json);
}

int cmd_requeue(const std::vector<std::string>& ids, bool json) {
  return for_each_id<v1::RequeueRequest, v1::RequeueResponse>(ids, "Requeue", json);
}

int cmd_hold(const std::vector<std::string>& ids, bool json) {
  return for_each_id<v1::HoldRequest, v1::HoldResponse>(ids, "Hold", json);
}

int cmd_release(const std::vector<std::string>& ids, bool json) {
  return for_each_id<v1::ReleaseRequest, v1::ReleaseResponse>(ids, "Release", json);
}

// Like sacct: ended jobs with their user, queue, nodes, cores, times, state,
// exit code and CPU time (cores x elapsed).
int cmd_history(const HistoryFilter& filter, bool json) {
  v1::ListJobsRequest request;
  request.set_ended_only(true);
  if (!filter.user.empty()) {
    passwd* pw = getpwnam(filter.user.c_str());
    if (!pw) return fail(invalid_argument("--user: no user " + quote(filter.user)));
    request.set_uid(pw->pw_uid);
    request.set_has_uid(true);
  }
  for (const auto& name : filter.states) {
    v1::JobState state;
    if (!v1::JobState_Parse(name, &state) || state == v1::JOB_STATE_UNSPECIFIED) {
      return fail(invalid_argument("--state: unknown state " + quote(name)));
    }
    request.add_states(state);
  }
  if (!filter.since.empty()) {
    auto t = parse_local_time(filter.since, "--since");
    if (!t.is_ok()) return fail(t.status());
    request.set_ended_after_us(*t);
  }
  if (!filter.until.empty()) {
    auto t = parse_local_time(filter.until, "--until");
    if (!t.is_ok()) return fail(t.status());
    request.set_ended_before_us(*t);
  }
  return list_jobs(request, json, [&filter](const v1::ListJobsResponse& jobs) {
    return history_table(jobs, filter.steps);
  });
}

}  // namespace hpcq::cli

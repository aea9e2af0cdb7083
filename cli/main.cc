// hpcq: the user command. Talks to hpcqd over its unix socket ($HPCQ_SOCKET).
// Human tables by default, --json everywhere; exit 0 on success, 2 on bad
// input, 1 on any other error, always with a one-line reason on stderr.
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>

#include "cli/client.h"
#include "cli/format.h"
#include "cli/rsh.h"
#include "cli/run.h"
#include "cli/simulate.h"
#include "cli/start.h"
#include "lib/api/job_proto.h"
#include "lib/core/bytes.h"
#include "lib/core/host_name.h"
#include "lib/core/hostlist.h"
#include "lib/core/units.h"
#include "lib/job/submit_options.h"
#include "lib/overlay/curve_keys.h"

extern char** environ;

namespace hpcq::cli {
namespace {

int fail(const Status& status) {
  std::fprintf(stderr, "hpcq: %s\n", status.message().c_str());
  return exit_code_of(status);
}

// Now, for --begin and --start: microseconds since the epoch.
std::int64_t wall_clock_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

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
// the job's text and the step (0 for the job itself).
Result<std::pair<std::string, std::uint32_t>> split_step(const std::string& text) {
  const std::size_t dot = text.find('.');
  if (dot == std::string::npos) return std::pair<std::string, std::uint32_t>{text, 0};
  auto step = parse_job_id(text.substr(dot + 1));
  if (!step.is_ok() || *step > 0xffffffffULL) {
    return invalid_argument(quote(text) + " is not a job or step id (want JOB or JOB.STEP)");
  }
  return std::pair<std::string, std::uint32_t>{text.substr(0, dot),
                                               static_cast<std::uint32_t>(*step)};
}

// The one job `text` names (ARRAY_INDEX accepted).
Result<JobId> resolve_job_id(const Client& client, const std::string& text) {
  auto ids = resolve_job_ids(client, text, /*whole_arrays=*/false);
  if (!ids.is_ok()) return ids.status();
  return ids->front();
}

// hpcq submit, batch and run: they differ in how the command runs
// (job::SubmitKind), and run then follows the job's output to its end.
int cmd_submit(const std::vector<std::string>& args, job::SubmitKind kind) {
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
  ctx.read_file = [](const std::string& path) -> Result<std::string> {
    std::ifstream in(path);
    if (!in) return not_found("cannot read " + path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  auto options = job::parse_submit_args(args, ctx, kind);
  if (!options.is_ok()) return fail(options.status());
  Client client(socket_path());
  if (allocation) return run_step(client, *allocation, *options);
  if (kind == job::SubmitKind::kAlloc) return alloc_job(client, *options);
  v1::SubmitRequest request;
  *request.mutable_spec() = api::to_proto(options->spec);
  v1::SubmitResponse response;
  Status s = client.call("Submit", request, &response);
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
  } else {
    // An array's tasks have consecutive ids from this one.
    std::cout << response.id() << "\n";
  }
  std::cout.flush();
  if (!options->wait) return 0;
  bool all_completed = true;
  for (std::uint32_t i = 0; i < count; ++i) {
    v1::WatchJobsRequest watch;
    watch.set_id(response.id() + i);
    Stream reader(client, "WatchJobs", watch);
    v1::JobEvent event;
    v1::JobState last = v1::PENDING;
    while (reader.read(&event)) last = event.state();
    s = reader.finish();
    if (!s.is_ok()) return fail(s);
    all_completed = all_completed && last == v1::COMPLETED;
  }
  return all_completed ? 0 : 1;
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
    request.set_begin_time_us(std::max<std::int64_t>(when->at(wall_clock_us()), 1));
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

int cmd_signal(const std::string& given, const std::string& name) {
  auto signo = job::parse_signal(name);
  if (!signo.is_ok()) return fail(signo.status());
  auto split = split_step(given);
  if (!split.is_ok()) return fail(split.status());
  Client client(socket_path());
  auto ids = resolve_job_ids(client, split->first, /*whole_arrays=*/split->second == 0);
  if (!ids.is_ok()) return fail(ids.status());
  for (JobId id : *ids) {
    v1::SignalRequest request;
    request.set_id(id);
    request.set_step(split->second);
    request.set_signal(*signo);
    v1::SignalResponse response;
    Status s = client.call("Signal", request, &response);
    if (!s.is_ok()) return fail(s);
  }
  return 0;
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

// cancel, hold, release: one RPC per job id; each failure prints its one-line
// error and the exit status is the worst.
template <typename Request, typename Response>
int for_each_id(const std::vector<std::string>& ids, const char* method) {
  Client client(socket_path());
  int code = 0;
  for (const auto& given : ids) {
    // cancel takes a step (JOB.STEP); hold and release only jobs.
    constexpr bool kSteps = requires(Request r) { r.set_step(1u); };
    auto split = kSteps ? split_step(given)
                        : Result<std::pair<std::string, std::uint32_t>>(
                              std::pair<std::string, std::uint32_t>{given, 0});
    if (!split.is_ok()) {
      code = std::max(code, fail(split.status()));
      continue;
    }
    const auto& [text, step] = *split;
    auto resolved = resolve_job_ids(client, text, /*whole_arrays=*/step == 0);
    if (!resolved.is_ok()) {
      code = std::max(code, fail(resolved.status()));
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
        code = std::max(code, fail(s));
      }
    }
  }
  return code;
}

// hpcq checkpoint / migrate: one job; the record on success.
int cmd_checkpoint(const std::string& text, const std::string& then, const std::string& to,
                   bool json, bool elsewhere = false) {
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

int cmd_status(const std::vector<std::string>& ids, bool json) {
  Client client(socket_path());
  nlohmann::json out = nlohmann::json::array();
  for (const auto& text : ids) {
    auto resolved = resolve_job_ids(client, text, /*whole_arrays=*/false);
    if (!resolved.is_ok()) return fail(resolved.status());
    for (JobId id : *resolved) {
      v1::GetJobRequest request;
      request.set_id(id);
      v1::Job job;
      Status s = client.call("GetJob", request, &job);
      if (!s.is_ok()) return fail(s);
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

// queue and history: one ListJobs call, printed as a table or a JSON array.
int list_jobs(const v1::ListJobsRequest& request, bool json,
              const std::function<std::string(const v1::ListJobsResponse&)>& table) {
  Client client(socket_path());
  v1::ListJobsResponse response;
  Status s = client.call("ListJobs", request, &response);
  if (!s.is_ok()) return fail(s);
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& job : response.jobs()) out.push_back(job_json(job));
    std::cout << json_text(out, 2) << "\n";
  } else {
    std::cout << table(response);
  }
  return 0;
}

int cmd_queue(bool all, bool json) {
  v1::ListJobsRequest request;
  request.set_all(all);
  return list_jobs(request, json, queue_table);
}

int cmd_queues(bool json) {
  Client client(socket_path());
  v1::ListQueuesResponse response;
  Status s = client.call("ListQueues", v1::ListQueuesRequest(), &response);
  if (!s.is_ok()) return fail(s);
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& q : response.queues()) out.push_back(queue_summary_json(q));
    std::cout << json_text(out, 2) << "\n";
  } else {
    std::cout << queues_table(response);
  }
  return 0;
}

// hpcq leaders: the leader candidates; a pid only for those on this host.
int cmd_leaders(bool json) {
  Client client(socket_path());
  v1::ListLeadersResponse response;
  Status s = client.call("ListLeaders", v1::ListLeadersRequest(), &response);
  if (!s.is_ok()) return fail(s);
  const std::string host = this_host_name();
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& c : response.candidates()) {
      nlohmann::json j = {
          {"name", c.name()}, {"state", c.state()}, {"host", c.host()}, {"endpoint", c.endpoint()}};
      if (c.host() == host) j["pid"] = c.pid();
      out.push_back(std::move(j));
    }
    std::cout << json_text(out, 2) << "\n";
  } else {
    std::cout << leaders_table(response, host);
  }
  return 0;
}

int cmd_nodes(bool json) {
  Client client(socket_path());
  v1::ListNodesResponse response;
  Status s = client.call("ListNodes", v1::ListNodesRequest(), &response);
  if (!s.is_ok()) return fail(s);
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& n : response.nodes()) out.push_back(node_json(n));
    std::cout << json_text(out, 2) << "\n";
  } else {
    std::cout << nodes_table(response);
  }
  return 0;
}

int cmd_drain(const std::vector<std::string>& lists, bool drain, const std::string& reason) {
  std::vector<std::string> nodes;  // each word a node list: node[1-4],gpu1
  for (const std::string& list : lists) {
    auto names = expand_hostlist(list);
    if (!names.is_ok()) return fail(names.status());
    nodes.insert(nodes.end(), names->begin(), names->end());
  }
  Client client(socket_path());
  int code = 0;
  for (const auto& node : nodes) {
    Status s;
    if (drain) {
      v1::DrainRequest request;
      request.set_node(node);
      request.set_reason(reason);
      v1::DrainResponse response;
      s = client.call("Drain", request, &response);
    } else {
      v1::ResumeRequest request;
      request.set_node(node);
      v1::ResumeResponse response;
      s = client.call("Resume", request, &response);
    }
    if (!s.is_ok()) code = std::max(code, fail(s));
  }
  return code;
}

struct HistoryFilter {
  std::string user;
  std::vector<std::string> states;
  std::string since, until;  // YYYY-MM-DD[THH:MM[:SS]], local time
  bool steps = false;        // a row per step too
};

struct ReserveOptions {
  std::string name;
  std::string nodes;  // a hostlist
  std::vector<std::string> users, accounts;
  std::string start = "now";
  std::string duration;
};

int cmd_reserve_create(const ReserveOptions& o, bool json) {
  auto start = parse_when(o.start, "--start");
  if (!start.is_ok()) return fail(start.status());
  auto duration = parse_duration_s(o.duration);
  if (!duration.is_ok() || *duration <= 0) {
    return fail(invalid_argument("--duration: bad duration " + quote(o.duration)));
  }
  v1::CreateReservationRequest request;
  v1::Reservation& r = *request.mutable_reservation();
  r.set_name(o.name);
  auto nodes = expand_hostlist(o.nodes);
  if (!nodes.is_ok()) return fail(invalid_argument("--nodes: " + nodes.status().message()));
  for (const auto& n : *nodes) r.add_nodes(n);
  for (const auto& u : o.users) r.add_users(u);
  for (const auto& a : o.accounts) r.add_accounts(a);
  const std::int64_t start_us = start->at(wall_clock_us());
  r.set_start_us(start_us);
  r.set_end_us(start_us + *duration * 1000000);
  Client client(socket_path());
  v1::Reservation made;
  Status s = client.call("CreateReservation", request, &made);
  if (!s.is_ok()) return fail(s);
  if (json) {
    std::cout << json_text(reservation_json(made)) << "\n";
  } else {
    std::cout << made.name() << "\n";
  }
  return 0;
}

int cmd_reserve_delete(const std::string& name) {
  Client client(socket_path());
  v1::DeleteReservationRequest request;
  request.set_name(name);
  v1::DeleteReservationResponse response;
  Status s = client.call("DeleteReservation", request, &response);
  return s.is_ok() ? 0 : fail(s);
}

int cmd_reserve_list(bool json) {
  Client client(socket_path());
  v1::ListReservationsResponse response;
  Status s = client.call("ListReservations", v1::ListReservationsRequest{}, &response);
  if (!s.is_ok()) return fail(s);
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : response.reservations()) out.push_back(reservation_json(r));
    std::cout << json_text(out, 2) << "\n";
  } else {
    std::cout << reservations_table(response);
  }
  return 0;
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

// Writes a CURVE key pair (mode 0600) and prints its public key, for
// hpcq.toml's [[rank]] public_key.
int cmd_keygen(const std::string& path, bool force) {
  if (!force && std::filesystem::exists(path)) {
    return fail(Status(hpcq::Code::kAlreadyExists, path + " exists (use --force to replace it)"));
  }
  auto keys = overlay::generate_key_pair();
  if (!keys.is_ok()) return fail(keys.status());
  Status s = overlay::write_key_file(path, *keys);
  if (!s.is_ok()) return fail(s);
  std::cout << keys->public_key << "\n";
  return 0;
}

// The names of a node list, one per line (scontrol show hostnames): the
// given one, else $HPCQ_NODELIST.
int cmd_hostnames(std::string list) {
  if (list.empty()) {
    const char* env = std::getenv("HPCQ_NODELIST");
    if (env == nullptr || *env == '\0') {
      return fail(invalid_argument("hostnames: give a node list, or run it in a job"));
    }
    list = env;
  }
  auto names = expand_hostlist(list);
  if (!names.is_ok())
    return fail(Status(names.status().code(), "hostnames: " + names.status().message()));
  for (const std::string& name : *names) std::cout << name << "\n";
  return 0;
}

}  // namespace
}  // namespace hpcq::cli

int main(int argc, char** argv) {
  using namespace hpcq::cli;
  std::vector<std::string> args(argv + 1, argv + argc);
  // submit has its own parser (lib/job/submit_options), shared with script directives.
  if (!args.empty() && args[0] == "submit") {
    return cmd_submit(std::vector<std::string>(args.begin() + 1, args.end()),
                      hpcq::job::SubmitKind::kSubmit);
  }
  if (!args.empty() && args[0] == "alloc") {
    return cmd_submit(std::vector<std::string>(args.begin() + 1, args.end()),
                      hpcq::job::SubmitKind::kAlloc);
  }
  if (!args.empty() && (args[0] == "batch" || args[0] == "run")) {
    return cmd_submit(
        std::vector<std::string>(args.begin() + 1, args.end()),
        args[0] == "batch" ? hpcq::job::SubmitKind::kBatch : hpcq::job::SubmitKind::kRun);
  }
  // hpcq-rsh (a link to hpcq) and hpcq rsh: ssh's words, not ours (cli/rsh.h).
  if (std::filesystem::path(argv[0]).filename() == "hpcq-rsh") return run_rsh(args);
  if (!args.empty() && args[0] == "rsh") {
    return run_rsh(std::vector<std::string>(args.begin() + 1, args.end()));
  }
  // simulate needs no daemon and parses its own options (cli/simulate.cc).
  if (!args.empty() && args[0] == "simulate") {
    return run_simulate(std::vector<std::string>(args.begin() + 1, args.end()));
  }

  CLI::App app{"hpcq: submit and manage jobs on an hpcq cluster"};
  app.require_subcommand(1);
  bool json = false;
  std::vector<std::string> ids;

  app.add_subcommand("submit", "submit a job: hpcq submit [options] COMMAND|SCRIPT [ARGS...]");
  app.add_subcommand("batch",
                     "submit a batch script that runs once, on the job's first node: "
                     "hpcq batch [options] SCRIPT [ARGS...]");
  app.add_subcommand("run",
                     "run a command in every task and show its output as it comes: "
                     "hpcq run [options] [--] COMMAND [ARGS...]");
  app.add_subcommand("alloc",
                     "wait for an allocation, then run COMMAND (default: your shell) here with "
                     "it: hpcq alloc [options] [-- COMMAND [ARGS...]]");
  app.add_subcommand("simulate", "run an SWF trace through the scheduler: hpcq simulate --help");
  std::string attach_job;
  FollowOptions attach_options;
  bool attach_all = false;
  auto* attach = app.add_subcommand(
      "attach", "show a running hpcq run job's output from now on (--all: from its start)");
  attach->add_option("job", attach_job, "job id")->required();
  attach->add_flag("--all", attach_all, "from the start of the output hpcqd holds");
  attach->add_flag("-l,--label", attach_options.label, "prefix each line with its task rank");
  std::string signal_job, signal_name;
  auto* signal_cmd = app.add_subcommand("signal", "send a signal to every task of a running job");
  signal_cmd->add_option("job", signal_job, "job id")->required();
  signal_cmd
      ->add_option("signal", signal_name, "HUP INT QUIT KILL USR1 USR2 ALRM TERM CONT, or a number")
      ->required();
  auto* cancel = app.add_subcommand("cancel", "cancel jobs");
  cancel->add_option("jobs", ids, "job ids")->required();
  cancel->add_flag("--json", json, "machine-readable output");
  auto* status = app.add_subcommand("status", "show jobs in detail");
  status->add_option("jobs", ids, "job ids")->required();
  status->add_flag("--json", json, "machine-readable output");
  auto* wait = app.add_subcommand("wait", "wait for jobs to end; exit 0 only if all COMPLETED");
  wait->add_option("jobs", ids, "job ids")->required();
  wait->add_flag("--json", json, "machine-readable output");
  bool all = false;
  auto* queue = app.add_subcommand("queue", "list pending and running jobs");
  queue->add_flag("-a,--all", all, "include ended jobs");
  queue->add_flag("--json", json, "machine-readable output");
  auto* nodes = app.add_subcommand("nodes", "list the cluster's nodes");
  nodes->add_flag("--json", json, "machine-readable output");
  auto* queues = app.add_subcommand("queues", "each queue's nodes, cores and jobs, like sinfo");
  queues->add_flag("--json", json, "machine-readable output");
  auto* leaders = app.add_subcommand("leaders", "the hpcqd leader candidates and which one leads");
  leaders->add_flag("--json", json, "machine-readable output");
  auto* hold = app.add_subcommand("hold", "keep pending jobs from starting");
  hold->add_option("jobs", ids, "job ids")->required();
  auto* release = app.add_subcommand("release", "let held jobs start again");
  release->add_option("jobs", ids, "job ids")->required();
  std::string checkpoint_job;
  std::string checkpoint_to;
  std::string then = "continue";
  auto* checkpoint = app.add_subcommand(
      "checkpoint", "dump a running job (CRIU); it runs on, or is requeued to be restored");
  checkpoint->add_option("job", checkpoint_job, "job id")->required();
  checkpoint->add_option("--then", then, "continue (default), requeue or stop (requeued and held)")
      ->check(CLI::IsMember({"continue", "requeue", "stop"}));
  checkpoint->add_flag("--json", json, "machine-readable output");
  checkpoint->add_option("--to", checkpoint_to,
                         "requeue/stop: restore only on these nodes (comma-separated names)");
  auto* migrate = app.add_subcommand("migrate",
                                     "checkpoint a running job and restore it on other nodes "
                                     "(--to: these; else any that fit now)");
  migrate->add_option("job", checkpoint_job, "job id")->required();
  migrate->add_option("--to", checkpoint_to, "restore only on these nodes (comma-separated names)");
  migrate->add_flag("--json", json, "machine-readable output");
  std::string resize_job;
  int resize_nodes = 0;
  auto* resize = app.add_subcommand(
      "resize", "shrink or expand a running elastic job within its node range (its owner or root)");
  resize->add_option("job", resize_job, "job id")->required();
  resize->add_option("-N,--nodes", resize_nodes, "the node count wanted")->required();
  resize->add_flag("--json", json, "machine-readable output");
  std::vector<std::string> node_names;
  std::string reason;
  auto* drain = app.add_subcommand("drain", "give nodes no new work (root)");
  drain->add_option("nodes", node_names, "node names or lists: node[1-4]")->required();
  drain->add_option("--reason", reason, "why (shown by hpcq nodes)");
  auto* resume = app.add_subcommand("resume", "give drained nodes work again (root)");
  auto* requeue = app.add_subcommand(
      "requeue", "kill running jobs and queue them again, to run from the start");
  requeue->add_option("jobs", ids, "job ids")->required();
  std::string stat_job;
  auto* stat =
      app.add_subcommand("stat", "what a running job or step uses now on each node, like sstat");
  stat->add_option("job", stat_job, "JOB or JOB.STEP")->required();
  stat->add_flag("--json", json, "machine-readable output");
  std::string update_job, update_time, update_begin;
  auto* update = app.add_subcommand(
      "update", "change a job: --time-limit (lower it; root: either way), a pending job's --begin");
  update->add_option("job", update_job, "job id")->required();
  update->add_option("-t,--time-limit", update_time, "the new limit (as submit's -t)");
  update->add_option("--begin", update_begin,
                     "not before WHEN: now, now+DURATION or YYYY-MM-DD[THH:MM[:SS]]");
  update->add_flag("--json", json, "machine-readable output");
  resume->add_option("nodes", node_names, "node names or lists: node[1-4]")->required();
  HistoryFilter history_filter;
  auto* history = app.add_subcommand("history", "ended jobs, like sacct");
  history->add_option("-u,--user", history_filter.user, "only this user's jobs");
  history->add_flag("--steps", history_filter.steps, "a row per step of each job too (JOB.STEP)");
  history
      ->add_option("-s,--state", history_filter.states,
                   "only these states (COMPLETED, FAILED, ...)")
      ->delimiter(',');
  history->add_option("-S,--since", history_filter.since,
                      "ended at or after YYYY-MM-DD[THH:MM[:SS]]");
  history->add_option("-E,--until", history_filter.until, "ended before YYYY-MM-DD[THH:MM[:SS]]");
  history->add_flag("--json", json, "machine-readable output");
  std::string key_path;
  bool force = false;
  auto* keygen = app.add_subcommand("keygen", "write a CURVE key pair for the overlay");
  keygen->add_option("file", key_path, "key file to write (mode 0600)")->required();
  keygen->add_flag("--force", force, "replace an existing file");
  std::string hostlist;
  auto* hostnames = app.add_subcommand("hostnames", "expand a node list, one name per line");
  hostnames->add_option("list", hostlist, "e.g. node[1-4,7] (default: $HPCQ_NODELIST)");
  ReserveOptions reserve_options;
  auto* reserve =
      app.add_subcommand("reserve", "advance reservations of nodes (create/delete: root)");
  reserve->require_subcommand(1);
  auto* reserve_create = reserve->add_subcommand("create", "reserve nodes for users or accounts");
  reserve_create->add_option("name", reserve_options.name, "reservation name")->required();
  reserve_create
      ->add_option("--nodes", reserve_options.nodes, "node names: NAME[,NAME...] or node[1-4]")
      ->required();
  reserve_create->add_option("--start", reserve_options.start,
                             "now, now+DURATION, or YYYY-MM-DD[THH:MM[:SS]] (default now)");
  reserve_create
      ->add_option("--duration", reserve_options.duration, "how long (e.g. 2h, 1-00:00:00)")
      ->required();
  reserve_create->add_option("--users", reserve_options.users, "who may use it (names or uids)")
      ->delimiter(',');
  reserve_create->add_option("--accounts", reserve_options.accounts, "accounts that may use it")
      ->delimiter(',');
  reserve_create->add_flag("--json", json, "machine-readable output");
  std::string reservation_name;
  auto* reserve_delete = reserve->add_subcommand("delete", "delete a reservation");
  reserve_delete->add_option("name", reservation_name, "reservation name")->required();
  auto* reserve_list = reserve->add_subcommand("list", "list current and future reservations");
  reserve_list->add_flag("--json", json, "machine-readable output");
  StartOptions start_options;
  auto* start = app.add_subcommand("start", "run a command inside a private local cluster");
  start->add_option("--agents", start_options.agents, "number of agents")->capture_default_str();
  start->add_option("--topology", start_options.topology, "hwloc synthetic topology of each agent")
      ->capture_default_str();
  start->add_option("--fanout", start_options.fanout, "tree fan-out")->capture_default_str();
  start
      ->add_option("--node-down-after", start_options.node_down_after_s,
                   "seconds without a heartbeat before a node is declared down")
      ->capture_default_str();
  start->add_flag("--keep", start_options.keep, "keep the cluster's directory and logs");
  start->add_option("--log-level", start_options.log_level, "log level of the daemons");
  start
      ->add_option("--executor", start_options.executor,
                   "the agents' executor: process, or test (runs nothing; for benchmarks)")
      ->check(CLI::IsMember({"process", "test"}));
  start->add_option("--config", start_options.config_extra,
                    "a TOML file of [scheduler], [[queue]], [[account]]... sections to add");
  start->add_option("--features", start_options.features,
                    "NODELIST=FEATURE[,FEATURE...]: features of those nodes (repeatable)");
  start->add_option("--gres", start_options.gres,
                    "NODELIST=NAME[:COUNT][,...]: generic resources of those nodes (repeatable)");
  start
      ->add_option("--etcd", start_options.etcd_endpoints,
                   "HOST:PORT[,...]: keep hpcqd's state in this etcd 3.4 instead of SQLite")
      ->delimiter(',');
  start
      ->add_option("--leaders", start_options.leaders,
                   "hpcqd candidates: one leads, the others stand by (on etcd: --etcd, or an etcd "
                   "of this many members that hpcq start runs)")
      ->check(CLI::Range(1, 9))
      ->capture_default_str();
  start->add_option("--wait", start_options.wait_s, "seconds to wait for the agents to come up")
      ->capture_default_str();

  // `hpcq start [options] -- CMD ARGS...`: the command is everything after
  // the first "--", kept away from CLI11 (its options are not ours).
  std::vector<std::string> words(argv + 1, argv + argc);
  if (!words.empty() && words[0] == "start") {
    auto dashes = std::find(words.begin(), words.end(), "--");
    if (dashes != words.end()) {
      start_options.command.assign(dashes + 1, words.end());
      words.erase(dashes, words.end());
    }
  }
  const std::set<std::string> commands = {"submit",  "cancel", "status",    "wait",    "queue",
                                          "nodes",   "keygen", "start",     "hold",    "release",
                                          "drain",   "resume", "history",   "reserve", "checkpoint",
                                          "migrate", "resize", "attach",    "signal",  "requeue",
                                          "update",  "stat",   "hostnames", "queues",  "leaders"};
  if (!words.empty() && words[0][0] != '-' && !commands.count(words[0])) {
    std::fprintf(stderr, "hpcq: unknown command '%s' (see hpcq --help)\n", words[0].c_str());
    return 2;
  }
  std::reverse(words.begin(), words.end());  // CLI11 takes a reversed vector
  try {
    app.parse(words);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "hpcq: %s\n", e.what());
    return 2;
  }
  if (*cancel) {
    return for_each_id<hpcq::v1::CancelRequest, hpcq::v1::CancelResponse>(ids, "Cancel");
  }
  if (*status) return cmd_status(ids, json);
  if (*attach) {
    attach_options.from_start = attach_all;
    return cmd_attach(attach_job, attach_options);
  }
  if (*signal_cmd) return cmd_signal(signal_job, signal_name);
  if (*requeue) {
    return for_each_id<hpcq::v1::RequeueRequest, hpcq::v1::RequeueResponse>(ids, "Requeue");
  }
  if (*update) return cmd_update(update_job, update_time, update_begin, json);
  if (*stat) return cmd_stat(stat_job, json);
  if (*wait) return cmd_wait(ids, json);
  if (*queue) return cmd_queue(all, json);
  if (*nodes) return cmd_nodes(json);
  if (*queues) return cmd_queues(json);
  if (*leaders) return cmd_leaders(json);
  if (*keygen) return cmd_keygen(key_path, force);
  if (*hostnames) return cmd_hostnames(hostlist);
  if (*history) return cmd_history(history_filter, json);
  if (*hold) {
    return for_each_id<hpcq::v1::HoldRequest, hpcq::v1::HoldResponse>(ids, "Hold");
  }
  if (*release) {
    return for_each_id<hpcq::v1::ReleaseRequest, hpcq::v1::ReleaseResponse>(ids, "Release");
  }
  if (*checkpoint) return cmd_checkpoint(checkpoint_job, then, checkpoint_to, json);
  // Without --to, a migration goes to other nodes that can take the job now.
  if (*migrate) {
    return cmd_checkpoint(checkpoint_job, "requeue", checkpoint_to, json, checkpoint_to.empty());
  }
  if (*resize) return cmd_resize(resize_job, resize_nodes, json);
  if (*drain) return cmd_drain(node_names, /*drain=*/true, reason);
  if (*resume) return cmd_drain(node_names, /*drain=*/false, "");
  if (*start) return run_start(start_options);
  if (*reserve_create) return cmd_reserve_create(reserve_options, json);
  if (*reserve_delete) return cmd_reserve_delete(reservation_name);
  if (*reserve_list) return cmd_reserve_list(json);
  return 2;
}

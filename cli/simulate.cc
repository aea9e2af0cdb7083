#include "cli/simulate.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "lib/core/config.h"
#include "lib/resource/hwloc_import.h"
#include "lib/sim/granularity_model.h"
#include "lib/sim/job_set.h"
#include "lib/sim/metrics.h"
#include "lib/sim/policy.h"
#include "lib/sim/replay.h"
#include "lib/sim/simulator.h"
#include "lib/sim/swf.h"

namespace hpcq::cli {
namespace {

constexpr int kExitBadInput = 2;
constexpr int kExitFailure = 1;
// Users shown in the human table; --json has them all.
constexpr std::size_t kTopUsers = 10;

int fail(int code, const std::string& message) {
  std::fprintf(stderr, "hpcq simulate: %s\n", message.c_str());
  return code;
}

int exit_code(const Status& status) {
  return status.code() == Code::kInvalidArgument ? kExitBadInput : kExitFailure;
}

struct Options {
  std::string trace;
  std::optional<int> cores;
  std::optional<int> nodes;
  std::optional<int> cores_per_node;
  std::string cluster_file;
  std::string policy = "fcfs";
  std::string estimates = "user";
  bool json = false;
  std::string events;
  bool skip_impossible = false;
  bool kill_at_limit = false;
  std::string half_life = "7d";
  std::int64_t half_life_s = 0;                // parsed
  std::vector<std::string> scheduler_options;  // --option KEY=VALUE
  std::string replay;
  std::string jobs_file;                       // --jobs: a job set instead of a trace
  std::optional<sim::WeightedTimes> weighted;  // --jobs: paper 001's priority-weighted means
  std::string mpi_model;  // --mpi-model: pinned | unpinned (lib/sim/granularity_model.h)
  std::string gap_queue;  // --gap-queue: this queue is migratable (papers/004)
  std::int64_t checkpoint_cost_s = 0;
  double container_efficiency = 1.0;
};

// Seconds, or a whole number with s, m, h or d; 0 means no decay.
Result<std::int64_t> parse_half_life(const std::string& value) {
  std::int64_t unit = 1;
  std::string digits = value;
  if (!digits.empty()) {
    switch (digits.back()) {
      case 's': unit = 1; break;
      case 'm': unit = 60; break;
      case 'h': unit = 3600; break;
      case 'd': unit = 24 * 3600; break;
      default: unit = 0; break;
    }
    if (unit != 0) {
      digits.pop_back();
    } else {
      unit = 1;
    }
  }
  std::int64_t n = -1;
  const char* last = digits.data() + digits.size();
  const auto [end, error] = std::from_chars(digits.data(), last, n);
  if (digits.empty() || error != std::errc() || end != last || n < 0 ||
      n > std::numeric_limits<std::int64_t>::max() / unit / kUsPerSecond) {
    return invalid_argument("--half-life '" + value +
                            "' is not a duration (seconds, or N with s, m, h or d; 0: no decay)");
  }
  return n * unit;
}

// --option KEY=VALUE on top of the policy's own options.
Status add_options(const std::vector<std::string>& options, sched::SchedulerConfig& config) {
  for (const std::string& option : options) {
    const std::size_t eq = option.find('=');
    if (eq == std::string::npos || eq == 0) {
      return invalid_argument("--option '" + option +
                              "' is not KEY=VALUE (e.g. wfp3.wait=rlscheduler)");
    }
    config.options[option.substr(0, eq)] = option.substr(eq + 1);
  }
  return Status::ok();
}

Result<sim::Cluster> cluster_of(const Options& o) {
  sim::Cluster c;
  if (!o.cluster_file.empty()) {
    if (o.cores || o.nodes || o.cores_per_node) {
      return invalid_argument("give --cluster FILE or --cores/--nodes/--cores-per-node, not both");
    }
    auto file = load_sim_cluster(o.cluster_file);
    if (!file.is_ok()) return file.status();
    for (const SimNodeGroup& group : file->groups) {
      if (group.cores > 0) {
        c.groups.push_back(
            {group.count, sim::flat_node_topology(group.cores), group.features, group.gres});
        continue;
      }
      auto topology = resource::discover_topology(group.topology);
      if (!topology.is_ok())
        return invalid_argument(group.where + ": " + topology.status().message());
      c.groups.push_back({group.count, std::move(topology).value(), group.features, group.gres});
    }
    c.licenses = file->licenses;
    return c;
  }
  if (o.cores_per_node) {
    if (o.cores) return invalid_argument("give --cores or --cores-per-node, not both");
    c.nodes = o.nodes.value_or(1);
    c.cores_per_node = *o.cores_per_node;
  } else if (o.cores) {
    c.nodes = o.nodes.value_or(1);
    if (c.nodes >= 1 && *o.cores % c.nodes != 0) {
      return invalid_argument("--cores " + std::to_string(*o.cores) +
                              " does not split evenly over " + std::to_string(c.nodes) + " nodes");
    }
    c.cores_per_node = c.nodes >= 1 ? *o.cores / c.nodes : 0;
  } else {
    return invalid_argument(
        "the cluster size is missing: --cores N (or --nodes K --cores-per-node C)");
  }
  if (c.nodes < 1 || c.cores_per_node < 1) {
    return invalid_argument("the cluster needs at least one node and one core per node");
  }
  return c;
}

// The closing file is part of the answer: a full disk must not pass silently.
struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

void print_table(const Options& o, const sim::Cluster& cluster, const sim::SwfTrace& trace,
                 const sim::SimResult& result, const sim::Metrics& m, double elapsed_s) {
  std::printf("trace        %s (%zu rows, %zu dropped, %zu skipped)\n", o.trace.c_str(), trace.rows,
              trace.dropped, result.skipped);
  if (cluster.groups.empty()) {
    std::printf("cluster      %d x %d cores\n", cluster.nodes, cluster.cores_per_node);
  } else {
    std::printf("cluster      %s: %lld nodes, %lld cores\n", o.cluster_file.c_str(),
                static_cast<long long>(cluster.node_count()),
                static_cast<long long>(cluster.total_cores()));
  }
  std::printf("policy       %s (estimates: %s)\n", o.policy.c_str(), o.estimates.c_str());
  std::printf("jobs         %zu\n", m.jobs);
  std::printf("makespan     %lld s\n", static_cast<long long>(m.makespan_s));
  std::printf("utilization  %.2f%%\n", 100.0 * m.utilization);
  std::printf("wait         mean %.0f s, p95 %.0f s\n", m.mean_wait_s, m.p95_wait_s);
  std::printf("bsld         mean(10 s) %.2f, p95(60 s) %.2f\n", m.mean_bsld_10, m.p95_bsld_60);
  std::printf("backfilled   %zu\n", m.backfilled);
  std::printf("preempted    %zu\n", result.preempted);
  if (result.checkpointed > 0) {
    std::printf("checkpointed %zu (%zu of them moved to a hole that lasts)\n", result.checkpointed,
                result.migrated);
  }
  if (result.shrinks + result.expands > 0) {
    std::printf("resized      %zu shrinks, %zu expands\n", result.shrinks, result.expands);
  }
  std::printf("elapsed      %.3f s (%zu cycles)\n", elapsed_s, result.cycles);
  std::vector<const sim::UserMetrics*> users;
  for (const auto& u : m.users) users.push_back(&u);
  std::stable_sort(users.begin(), users.end(),
                   [](const auto* a, const auto* b) { return a->core_seconds > b->core_seconds; });
  if (users.size() > kTopUsers) users.resize(kTopUsers);
  std::printf("\n%-10s %8s %14s %7s %12s %10s   (top %zu of %zu users by core-seconds)\n", "USER",
              "JOBS", "CORE_SECONDS", "SHARE", "MEAN_WAIT_S", "MEAN_BSLD", users.size(),
              m.users.size());
  for (const auto* u : users) {
    std::printf("%-10lld %8zu %14.0f %6.1f%% %12.0f %10.2f\n", static_cast<long long>(u->user),
                u->jobs, u->core_seconds, 100.0 * u->share, u->mean_wait_s, u->mean_bsld_10);
  }
  std::printf("\n%-10s %8s %14s %7s %12s %10s\n", "QUEUE", "JOBS", "CORE_SECONDS", "SHARE",
              "MEAN_WAIT_S", "MEAN_BSLD");
  for (const auto& q : m.queues) {
    std::printf("%-10s %8zu %14.0f %6.1f%% %12.0f %10.2f\n",
                q.queue.empty() ? "(default)" : q.queue.c_str(), q.jobs, q.core_seconds,
                100.0 * q.share, q.mean_wait_s, q.mean_bsld_10);
  }
}

void print_json(const Options& o, const sim::Cluster& cluster, const sim::SwfTrace& trace,
                const sim::SimResult& result, const sim::Metrics& m, double elapsed_s) {
  // Keyed by user id (as a string: JSON keys are) and by queue name ("" is
  // the default queue).
  nlohmann::json users = nlohmann::json::object();
  for (const auto& u : m.users) {
    users[std::to_string(u.user)] = {{"jobs", u.jobs},
                                     {"core_seconds", u.core_seconds},
                                     {"share", u.share},
                                     {"mean_wait_s", u.mean_wait_s},
                                     {"mean_bsld_10", u.mean_bsld_10}};
  }
  nlohmann::json queues = nlohmann::json::object();
  for (const auto& q : m.queues) {
    queues[q.queue] = {{"jobs", q.jobs},
                       {"core_seconds", q.core_seconds},
                       {"share", q.share},
                       {"mean_wait_s", q.mean_wait_s},
                       {"mean_bsld_10", q.mean_bsld_10}};
  }
  nlohmann::json out = {
      {"trace", o.trace},
      {"policy", o.policy},
      {"estimates", o.estimates},
      {"kill_at_limit", o.kill_at_limit},
      {"half_life_s", o.half_life_s},
      {"options", o.scheduler_options},
      {"nodes", cluster.node_count()},
      {"cores_per_node", cluster.groups.empty() ? cluster.cores_per_node : 0},
      {"cluster_file", o.cluster_file},
      {"cores", cluster.total_cores()},
      {"rows", trace.rows},
      {"dropped", trace.dropped},
      {"skipped", result.skipped},
      {"jobs", m.jobs},
      {"makespan_s", m.makespan_s},
      {"utilization", m.utilization},
      {"mean_wait_s", m.mean_wait_s},
      {"p95_wait_s", m.p95_wait_s},
      {"mean_bsld_10", m.mean_bsld_10},
      {"p95_bsld_60", m.p95_bsld_60},
      {"backfilled", m.backfilled},
      {"preempted", result.preempted},
      {"checkpointed", result.checkpointed},
      {"migrated", result.migrated},
      {"preempted_core_seconds", result.preempted_core_seconds},
      {"lost_core_seconds", result.lost_core_seconds},
      {"gap_queue", o.gap_queue},
      {"checkpoint_cost_s", o.checkpoint_cost_s},
      {"container_efficiency", o.container_efficiency},
      {"shrinks", result.shrinks},
      {"expands", result.expands},
      {"cycles", result.cycles},
      {"elapsed_s", elapsed_s},
      {"users", users},
      {"queues", queues},
  };
  if (o.weighted) {
    out["weighted_mean_response_s"] = o.weighted->mean_response_s;
    out["weighted_mean_completion_s"] = o.weighted->mean_completion_s;
  }
  std::printf("%s\n", out.dump().c_str());
}

// --jobs FILE (lib/sim/job_set.h); the file is read here, at the edge.
Result<std::vector<sim::SimJob>> load_job_set(const std::string& path) {
  std::ifstream in(path);
  if (!in) return not_found("cannot read job set " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return sim::parse_job_set(text.str(), path);
}

}  // namespace

int run_simulate(const std::vector<std::string>& args) {
  Options o;
  CLI::App app{"hpcq simulate: run an SWF workload trace through the scheduler on a virtual clock",
               "hpcq simulate"};
  app.add_option("trace", o.trace, "SWF trace (plain or .gz)");
  app.add_option("--cores", o.cores, "cores of the cluster (one node unless --nodes)");
  app.add_option("--nodes", o.nodes, "nodes of the cluster");
  app.add_option("--cores-per-node", o.cores_per_node, "cores of each node (with --nodes)");
  app.add_option("--cluster", o.cluster_file,
                 "TOML file of [[nodes]] groups (count, and cores or topology) instead of --cores");
  app.add_option("--policy", o.policy, "scheduling policy: " + sim::policy_names())
      ->capture_default_str();
  app.add_option("--estimates", o.estimates,
                 "what the scheduler knows of run times: user (requested time) or exact")
      ->check(CLI::IsMember({"user", "exact"}))
      ->capture_default_str();
  app.add_flag("--json", o.json, "one JSON object instead of the table");
  app.add_option("--events", o.events, "write one line per job start and end to FILE");
  app.add_flag("--skip-impossible", o.skip_impossible,
               "skip jobs larger than the cluster (default: fail)");
  app.add_flag("--kill-at-limit", o.kill_at_limit,
               "end a job at its requested time, as Batsim does (default: it runs its trace "
               "runtime)");
  app.add_option("--half-life", o.half_life,
                 "half-life of past usage for fair-share: seconds, or N with s, m, h or d; 0: "
                 "no decay")
      ->capture_default_str();
  app.add_option("--option", o.scheduler_options,
                 "scheduler option KEY=VALUE on top of the policy's (e.g. wfp3.wait=rlscheduler); "
                 "repeatable");
  app.add_option("--replay", o.replay,
                 "replay hpcqd's decision log LOG through the scheduler and check it decides the "
                 "same (no trace)");
  app.add_option("--jobs", o.jobs_file,
                 "JSON job set (node ranges, priority, elastic) instead of a trace; see hpcq(1)");
  app.add_option("--mpi-model", o.mpi_model,
                 "run jobs with a benchmark class (--jobs) by paper 000's runtime model, pinned "
                 "(CPU/memory affinity) or unpinned")
      ->check(CLI::IsMember({"pinned", "unpinned"}));
  app.add_option("--gap-queue", o.gap_queue,
                 "the trace's queue (e.g. q9: SWF queue 9) is a migratable gap queue (papers/004; "
                 "with --policy gap)");
  app.add_option("--checkpoint-cost", o.checkpoint_cost_s,
                 "seconds a checkpoint takes (its cores are free at once: the job is frozen for "
                 "the dump), and again its restore (added to its next run)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--container-efficiency", o.container_efficiency,
                 "gap jobs' speed in containers relative to native, in (0, 1]")
      ->check(CLI::Range(0.001, 1.0));
  std::vector<std::string> words(args.rbegin(), args.rend());  // CLI11 takes a reversed vector
  try {
    app.parse(words);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    return fail(kExitBadInput, e.what());
  }

  if (!o.replay.empty()) {
    if (!o.trace.empty()) return fail(kExitBadInput, "give a trace or --replay LOG, not both");
    auto replayed = sim::replay_file(o.replay);
    if (!replayed.is_ok()) return fail(exit_code(replayed.status()), replayed.status().message());
    std::printf("%s\n", sim::format_replay(*replayed).c_str());
    return replayed->identical ? 0 : kExitFailure;
  }
  if (o.trace.empty() && o.jobs_file.empty()) {
    return fail(kExitBadInput, "the trace is missing (or give --jobs FILE or --replay LOG)");
  }
  if (!o.trace.empty() && !o.jobs_file.empty()) {
    return fail(kExitBadInput, "give a trace or --jobs FILE, not both");
  }

  auto cluster = cluster_of(o);
  if (!cluster.is_ok()) return fail(kExitBadInput, cluster.status().message());
  auto config = sim::policy_config(o.policy);
  if (!config.is_ok()) return fail(kExitBadInput, config.status().message());
  if (Status added = add_options(o.scheduler_options, *config); !added.is_ok()) {
    return fail(kExitBadInput, added.message());
  }
  auto half_life = parse_half_life(o.half_life);
  if (!half_life.is_ok()) return fail(kExitBadInput, half_life.status().message());

  Result<sim::SwfTrace> trace =
      o.jobs_file.empty() ? sim::read_swf(o.trace) : Result<sim::SwfTrace>(sim::SwfTrace{});
  if (!trace.is_ok()) return fail(exit_code(trace.status()), trace.status().message());
  std::vector<sim::SimJob> job_set;
  if (!o.jobs_file.empty()) {
    auto loaded = load_job_set(o.jobs_file);
    if (!loaded.is_ok()) return fail(exit_code(loaded.status()), loaded.status().message());
    job_set = std::move(loaded).value();
    trace->rows = job_set.size();
    o.trace = o.jobs_file;  // the input, in messages and in the report
  }

  std::unique_ptr<std::FILE, FileCloser> events;
  if (!o.events.empty()) {
    events.reset(std::fopen(o.events.c_str(), "w"));
    if (!events) return fail(kExitFailure, "cannot write " + o.events);
  }

  std::vector<sim::SimJob> jobs;
  jobs.reserve(trace->jobs.size());
  for (const sim::SwfJob& j : trace->jobs) {
    jobs.push_back({static_cast<JobId>(j.id), j.user, j.submit_s, j.runtime_s, j.requested_s,
                    j.size, j.line, sim::swf_queue_name(j)});
  }
  if (!job_set.empty()) jobs = job_set;
  sim::SimOptions options;
  options.cluster = *cluster;
  options.scheduler = std::move(config).value();
  options.estimates = o.estimates == "exact" ? sim::Estimates::kExact : sim::Estimates::kUser;
  options.skip_impossible = o.skip_impossible;
  options.kill_at_limit = o.kill_at_limit;
  options.half_life_s = *half_life;
  options.checkpoint_s = o.checkpoint_cost_s;
  options.container_efficiency = o.container_efficiency;
  if (!o.gap_queue.empty()) {
    QueueConfig regular;
    regular.name = "regular";
    QueueConfig gap;
    gap.name = o.gap_queue;
    gap.migratable = true;
    options.site.queues = {regular, gap};
    options.site.default_queue = "regular";
  }
  options.site.licenses = cluster->licenses;
  add_site_plugins(options.site, options.scheduler.plugins);  // as hpcqd does
  o.half_life_s = *half_life;
  std::optional<sim::GranularityModel> mpi_model;
  if (!o.mpi_model.empty()) {
    const resource::NodeTopology node = cluster->groups.empty()
                                            ? sim::flat_node_topology(cluster->cores_per_node)
                                            : cluster->groups.front().topology;
    mpi_model.emplace(jobs, node, o.mpi_model == "pinned");
    options.runtime = [&mpi_model](const sim::SimJob& job, const resource::Allocation& allocation,
                                   std::span<const sched::RunningJob> running) {
      return mpi_model->runtime_s(job, allocation, running);
    };
  }

  std::function<void(const sim::SimEvent&)> on_event;
  if (events) {
    on_event = [f = events.get()](const sim::SimEvent& e) {
      const std::string line = sim::format_event(e);
      std::fputs(line.c_str(), f);
      std::fputc('\n', f);
    };
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto result = sim::simulate(jobs, options, on_event);
  const double elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!result.is_ok()) {
    return fail(exit_code(result.status()), o.trace + ": " + result.status().message());
  }
  if (events) {
    std::FILE* f = events.release();
    if (std::ferror(f) != 0 || std::fclose(f) != 0)
      return fail(kExitFailure, "cannot write " + o.events);
  }

  const sim::Metrics metrics = sim::compute_metrics(result->jobs, cluster->total_cores());
  if (!job_set.empty()) o.weighted = sim::priority_weighted(job_set, result->jobs);
  if (o.json) {
    print_json(o, *cluster, *trace, *result, metrics, elapsed_s);
  } else {
    print_table(o, *cluster, *trace, *result, metrics, elapsed_s);
  }
  return 0;
}

}  // namespace hpcq::cli

#include "lib/sim/simulator.h"

#include <algorithm>
#include <limits>
#include <queue>
#include <unordered_map>
#include <utility>

#include "lib/resource/node_pool.h"
#include "lib/resource/topology.h"

namespace hpcq::sim {
namespace {

constexpr std::size_t kNotRunning = static_cast<std::size_t>(-1);

std::string job_name(const SimJob& job) {
  std::string s = "job " + std::to_string(job.id);
  if (job.line > 0) s += " (trace line " + std::to_string(job.line) + ")";
  return s;
}

resource::NodeTopology node_topology(int cores) {
  resource::NodeTopology topology;
  topology.packages = 1;
  topology.numa.push_back({0, 0, 0});
  for (int c = 0; c < cores; ++c) topology.cores.push_back({c, 0, 0, {c}});
  topology.source = "simulated:core:" + std::to_string(cores);
  return topology;
}

// Cycles at one time while each preempts something: the freed cores are
// used by the next cycle at the same time (decision.h: the Start comes in a
// later cycle). Bounded so that a policy that keeps preempting cannot spin.
constexpr int kMaxPreemptRoundsPerTime = 64;

// A job's end, ordered earliest first, then by job id. `run` tells a stale
// end (of a run that was preempted) from the current one.
struct End {
  std::int64_t time_s;
  JobId id;
  std::size_t index;
  std::uint32_t run;
  bool operator>(const End& o) const {
    return time_s != o.time_s ? time_s > o.time_s : id > o.id;
  }
};

class Simulation {
 public:
  Simulation(std::vector<SimJob> jobs, const SimOptions& options, sched::Scheduler scheduler,
             const std::function<void(const SimEvent&)>& on_event)
      : jobs_(std::move(jobs)),
        options_(options),
        scheduler_(std::move(scheduler)),
        on_event_(on_event),
        running_pos_(jobs_.size(), kNotRunning),
        started_(jobs_.size(), false),
        runs_(jobs_.size(), 0),
        outcome_pos_(jobs_.size(), 0),
        usage_(options.half_life_s) {}

  Status init() {
    std::sort(jobs_.begin(), jobs_.end(), [](const SimJob& a, const SimJob& b) {
      return a.submit_s != b.submit_s ? a.submit_s < b.submit_s : a.id < b.id;
    });
    index_.reserve(jobs_.size());
    for (std::size_t i = 0; i < jobs_.size(); ++i) {
      if (!index_.emplace(jobs_[i].id, i).second) {
        return invalid_argument("duplicate job id " + std::to_string(jobs_[i].id));
      }
    }
    const resource::NodeTopology topology = node_topology(options_.cluster.cores_per_node);
    for (int n = 0; n < options_.cluster.nodes; ++n) {
      HPCQ_RETURN_IF_ERROR(
          pool_.add_node(static_cast<Rank>(n), "n" + std::to_string(n), topology));
    }
    snapshot_.pool = &pool_;
    snapshot_.usage = &usage_;
    result_.jobs.reserve(jobs_.size());
    return Status::ok();
  }

  Result<SimResult> run() {
    std::size_t next_arrival = 0;
    while (next_arrival < jobs_.size() || !ends_.empty()) {
      std::int64_t now = std::numeric_limits<std::int64_t>::max();
      if (next_arrival < jobs_.size()) now = jobs_[next_arrival].submit_s;
      if (!ends_.empty()) now = std::min(now, ends_.top().time_s);
      // Ends first: the cores they free are there for this time's arrivals.
      while (!ends_.empty() && ends_.top().time_s == now) {
        const End end = ends_.top();
        ends_.pop();
        if (end.run != runs_[end.index] || running_pos_[end.index] == kNotRunning) continue;
        HPCQ_RETURN_IF_ERROR(finish(end));
      }
      while (next_arrival < jobs_.size() && jobs_[next_arrival].submit_s == now) {
        arrive(next_arrival++);
      }
      for (int round = 0; round < kMaxPreemptRoundsPerTime && !snapshot_.queue.empty(); ++round) {
        auto preempted = cycle(now);
        if (!preempted.is_ok()) return preempted.status();
        if (!*preempted) break;
      }
    }
    if (!snapshot_.queue.empty()) {
      // Nothing runs and nothing arrives: the scheduler will never start these.
      return internal_error(std::to_string(snapshot_.queue.size()) +
                            " jobs were never started (first: job " +
                            std::to_string(snapshot_.queue.front().id) + ")");
    }
    // Runs cut short by a requeueing preemption left their outcome behind.
    std::erase_if(result_.jobs, [](const JobOutcome& o) { return o.start_s < 0; });
    result_.usage = usage_.entries();
    return std::move(result_);
  }

 private:
  // What the scheduler is told a job needs: whole seconds, at least one (a
  // 0 s request would read as "no limit" to backfill).
  std::int64_t limit_s(const SimJob& job) const {
    const std::int64_t s =
        options_.estimates == Estimates::kExact ? job.runtime_s : job.requested_s;
    return std::max<std::int64_t>(s, 1);
  }

  sched::PendingJob pending_of(const SimJob& job) const {
    sched::PendingJob pending;
    pending.id = job.id;
    pending.uid = job.user >= 0 ? static_cast<std::uint32_t>(job.user) : 0;
    pending.submit_time = job.submit_s * kUsPerSecond;
    pending.request.nodes = 0;
    pending.request.ntasks = job.size;
    pending.request.cpus_per_task = 1;
    pending.time_limit_s = limit_s(job);
    pending.queue = job.queue;
    return pending;
  }

  void arrive(std::size_t index) {
    sched::PendingJob pending = pending_of(jobs_[index]);
    // Arrivals come in (submit, id) order and all arrivals of one time are
    // queued before its cycle, so appending keeps the queue in that order.
    snapshot_.queue.push_back(std::move(pending));
    queue_index_.push_back(index);
  }

  // One scheduling cycle and its decisions; true when it preempted a job.
  Result<bool> cycle(std::int64_t now) {
    snapshot_.now = now * kUsPerSecond;
    ++result_.cycles;
    sched::Decisions decisions =
        options_.decide ? options_.decide(snapshot_) : scheduler_.cycle(snapshot_);
    const std::size_t first_started = result_.jobs.size();
    std::vector<std::size_t> requeued;
    for (sched::Decision& decision : decisions.decisions) {
      if (auto* preempt = std::get_if<sched::Preempt>(&decision)) {
        HPCQ_RETURN_IF_ERROR(apply_preempt(*preempt, now, &requeued));
        continue;
      }
      auto* start = std::get_if<sched::Start>(&decision);
      if (start == nullptr) continue;  // Reserve: a promise, nothing to apply
      auto it = index_.find(start->job);
      if (it == index_.end() || started_[it->second]) {
        return internal_error("scheduler started job " + std::to_string(start->job) +
                              ", which is not queued");
      }
      const std::size_t index = it->second;
      Status taken = pool_.allocate(start->allocation);
      if (!taken.is_ok()) {
        return internal_error("scheduler decision for job " + std::to_string(start->job) +
                              " refused: " + taken.message());
      }
      const SimJob& job = jobs_[index];
      started_[index] = true;
      const std::int64_t end_s = now + job.runtime_s;
      running_pos_[index] = snapshot_.running.size();
      snapshot_.running.push_back(sched::running_from(pending_of(job), std::move(start->allocation),
                                                      now * kUsPerSecond,
                                                      (now + limit_s(job)) * kUsPerSecond));
      running_index_.push_back(index);
      ends_.push({end_s, job.id, index, ++runs_[index]});
      outcome_pos_[index] = result_.jobs.size();
      result_.jobs.push_back({job.id, job.user, job.submit_s, now, end_s, job.size, false, job.queue});
      if (on_event_) on_event_({now, job.id, true, &snapshot_.running.back().allocation});
    }
    if (result_.jobs.size() == first_started) {
      requeue(requeued);
      return take_preempted();
    }
    // One pass keeps the queue and its index list in step, in order.
    std::size_t kept = 0;
    for (std::size_t i = 0; i < snapshot_.queue.size(); ++i) {
      if (started_[queue_index_[i]]) continue;
      if (kept != i) {
        snapshot_.queue[kept] = std::move(snapshot_.queue[i]);
        queue_index_[kept] = queue_index_[i];
      }
      ++kept;
    }
    snapshot_.queue.resize(kept);
    queue_index_.resize(kept);
    if (kept > 0) {
      // The queue is in (submit, id) order: its front is the earliest job
      // still waiting, and anything started after it in that order passed it.
      const SimJob& head = jobs_[queue_index_.front()];
      for (std::size_t i = first_started; i < result_.jobs.size(); ++i) {
        JobOutcome& o = result_.jobs[i];
        o.backfilled = o.submit_s != head.submit_s ? o.submit_s > head.submit_s : o.id > head.id;
      }
    }
    requeue(requeued);
    return take_preempted();
  }

  bool take_preempted() {
    const bool any = preempted_now_ > 0;
    preempted_now_ = 0;
    return any;
  }

  // Stops a running job at once: its cores are free for the next cycle and
  // the work it did is lost. Requeue and checkpoint put it back in the queue
  // with its original submit time (the simulator has no checkpoint image,
  // so a checkpointed job restarts from the beginning too); cancel ends it
  // here, and its outcome records the run that was cut short.
  Status apply_preempt(const sched::Preempt& preempt, std::int64_t now,
                       std::vector<std::size_t>* requeued) {
    auto it = index_.find(preempt.job);
    if (it == index_.end() || running_pos_[it->second] == kNotRunning) {
      return internal_error("scheduler preempted job " + std::to_string(preempt.job) +
                            ", which is not running");
    }
    const std::size_t index = it->second;
    HPCQ_RETURN_IF_ERROR(finish({now, preempt.job, index, runs_[index]}));
    ++runs_[index];  // its pending end is stale now
    ++result_.preempted;
    ++preempted_now_;
    JobOutcome& outcome = result_.jobs[outcome_pos_[index]];
    if (preempt.mode == sched::PreemptMode::kCancel) {
      outcome.end_s = now;
      return Status::ok();
    }
    outcome.start_s = -1;  // erased at the end: the job's run is the next one
    started_[index] = false;
    requeued->push_back(index);
    return Status::ok();
  }

  // Puts preempted jobs back in the queue at their (submit, id) place.
  void requeue(const std::vector<std::size_t>& requeued) {
    for (const std::size_t index : requeued) {
      const SimJob& job = jobs_[index];
      // jobs_ is in (submit, id) order, so the queue's indices are sorted.
      const auto pos = std::lower_bound(queue_index_.begin(), queue_index_.end(), index);
      const auto offset = pos - queue_index_.begin();
      queue_index_.insert(pos, index);
      snapshot_.queue.insert(snapshot_.queue.begin() + offset, pending_of(job));
    }
  }

  Status finish(const End& end) {
    const std::size_t pos = running_pos_[end.index];
    sched::RunningJob& running = snapshot_.running[pos];
    Status released = pool_.release(running.allocation);
    if (!released.is_ok()) {
      return internal_error("job " + std::to_string(end.id) + " end: " + released.message());
    }
    if (on_event_) on_event_({end.time_s, end.id, false, &running.allocation});
    const TimeUs end_us = end.time_s * kUsPerSecond;
    if (end_us > running.start_time) {
      const double seconds = static_cast<double>(end_us - running.start_time) / 1e6;
      usage_.charge(running.uid, running.account, running.allocation.total_cores() * seconds,
                    end_us);
    }
    // Swap-remove: running jobs are a set to the scheduler.
    const std::size_t last = snapshot_.running.size() - 1;
    if (pos != last) {
      snapshot_.running[pos] = std::move(snapshot_.running[last]);
      running_index_[pos] = running_index_[last];
      running_pos_[running_index_[pos]] = pos;
    }
    snapshot_.running.pop_back();
    running_index_.pop_back();
    running_pos_[end.index] = kNotRunning;
    return Status::ok();
  }

  std::vector<SimJob> jobs_;  // in (submit, id) order
  const SimOptions& options_;
  sched::Scheduler scheduler_;
  const std::function<void(const SimEvent&)>& on_event_;
  std::unordered_map<JobId, std::size_t> index_;  // job id -> index in jobs_
  std::vector<std::size_t> running_pos_;          // index -> position in snapshot_.running
  std::vector<std::size_t> running_index_;        // position in snapshot_.running -> index
  std::vector<bool> started_;                     // by index
  std::vector<std::uint32_t> runs_;               // by index: starts so far (End.run)
  std::vector<std::size_t> outcome_pos_;          // by index: its run's place in result_.jobs
  std::size_t preempted_now_ = 0;                 // preemptions in the current cycle
  std::vector<std::size_t> queue_index_;          // position in snapshot_.queue -> index
  resource::NodePool pool_;
  sched::UsageLedger usage_;  // charged at each run's end; snapshot_.usage
  sched::Snapshot snapshot_;
  std::priority_queue<End, std::vector<End>, std::greater<End>> ends_;
  SimResult result_;
};

void append_ranges(std::string& out, const std::vector<int>& cores) {
  std::vector<int> sorted = cores;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    if (i > 0) out += ',';
    out += std::to_string(sorted[i]);
    if (j > i) out += '-' + std::to_string(sorted[j]);
    i = j + 1;
  }
}

}  // namespace

std::string format_event(const SimEvent& event) {
  std::string out = std::to_string(event.time_s) + ' ' + std::to_string(event.job) +
                    (event.start ? " start " : " end ");
  if (event.allocation != nullptr) {
    bool first = true;
    for (const resource::NodeAllocation& node : event.allocation->nodes) {
      if (!first) out += ' ';
      first = false;
      out += node.node + ':';
      append_ranges(out, node.cores);
    }
  }
  return out;
}

Result<SimResult> simulate(const std::vector<SimJob>& jobs, const SimOptions& options,
                           const std::function<void(const SimEvent&)>& on_event) {
  if (options.cluster.nodes < 1 || options.cluster.cores_per_node < 1) {
    return invalid_argument("the cluster needs at least one node and one core per node (got " +
                            std::to_string(options.cluster.nodes) + " x " +
                            std::to_string(options.cluster.cores_per_node) + ")");
  }
  auto scheduler = sched::Scheduler::create(options.scheduler);
  if (!scheduler.is_ok()) return scheduler.status();

  std::vector<SimJob> accepted;
  accepted.reserve(jobs.size());
  std::size_t skipped = 0;
  for (const SimJob& job : jobs) {
    if (job.runtime_s < 0) {
      return invalid_argument(job_name(job) + ": negative runtime " +
                              std::to_string(job.runtime_s));
    }
    if (job.size < 1) {
      return invalid_argument(job_name(job) + ": size " + std::to_string(job.size) +
                              " (needs at least one core)");
    }
    if (job.size > options.cluster.total_cores()) {
      if (options.skip_impossible) {
        ++skipped;
        continue;
      }
      return invalid_argument(job_name(job) + " needs " + std::to_string(job.size) +
                              " cores; the cluster has " +
                              std::to_string(options.cluster.total_cores()));
    }
    accepted.push_back(job);
    if (options.kill_at_limit && job.requested_s > 0) {
      accepted.back().runtime_s = std::min(job.runtime_s, job.requested_s);
    }
  }

  Simulation simulation(std::move(accepted), options, std::move(scheduler).value(), on_event);
  HPCQ_RETURN_IF_ERROR(simulation.init());
  auto result = simulation.run();
  if (result.is_ok()) result->skipped = skipped;
  return result;
}

}  // namespace hpcq::sim

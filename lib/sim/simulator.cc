#include "lib/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <queue>
#include <set>
#include <unordered_map>
#include <utility>

#include "lib/core/units.h"
#include "lib/job/constraint.h"
#include "lib/job/job_table.h"
#include "lib/resource/cpu_list.h"
#include "lib/resource/node_pool.h"
#include "lib/resource/topology.h"
#include "lib/sched/actions/gap.h"
#include "lib/sched/resize.h"
#include "lib/sim/elastic_model.h"

namespace hpcq::sim {
namespace {

constexpr std::size_t kNotRunning = static_cast<std::size_t>(-1);

std::string job_name(const SimJob& job) {
  std::string s = "job " + std::to_string(job.id);
  if (job.line > 0) s += " (trace line " + std::to_string(job.line) + ")";
  return s;
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
  bool operator>(const End& o) const { return time_s != o.time_s ? time_s > o.time_s : id > o.id; }
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
        records_(jobs_.size(), nullptr),
        done_s_(jobs_.size(), 0.0),
        saving_(jobs_.size(), false),
        nodelist_(jobs_.size()),
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
    if (options_.cluster.groups.empty()) {
      const resource::NodeTopology topology = flat_node_topology(options_.cluster.cores_per_node);
      for (int n = 0; n < options_.cluster.nodes; ++n) {
        HPCQ_RETURN_IF_ERROR(
            pool_.add_node(static_cast<Rank>(n), "n" + std::to_string(n), topology));
      }
    } else {
      Rank rank = 0;
      for (const NodeGroup& group : options_.cluster.groups) {
        for (int n = 0; n < group.count; ++n, ++rank) {
          HPCQ_RETURN_IF_ERROR(pool_.add_node(rank, "n" + std::to_string(rank), group.topology));
          HPCQ_RETURN_IF_ERROR(pool_.set_gres(rank, group.gres));
          features_.push_back(&group.features);
        }
      }
    }
    for (const SimJob& job : jobs_) {
      if (!job.constraint.empty() && eligible(job).empty()) {
        return invalid_argument("job " + std::to_string(job.id) + ": constraint " +
                                quote(job.constraint) + " matches no node of the cluster");
      }
      if (!job.gres.empty() && !gres_fits(job)) {
        return invalid_argument("job " + std::to_string(job.id) +
                                ": gres fits no node of the cluster its constraint allows");
      }
    }
    snapshot_.pool = &pool_;
    snapshot_.usage = &usage_;
    snapshot_.site = &options_.site;
    result_.jobs.reserve(jobs_.size());
    const auto& actions = options_.scheduler.actions;
    if (std::find(actions.begin(), actions.end(), sched::GapAction::kName) != actions.end()) {
      sched::ActionOptions gap_options;
      for (const auto& [key, value] : options_.scheduler.options) {
        if (key.rfind("gap.", 0) == 0) gap_options.emplace(key.substr(4), value);
      }
      auto action = sched::GapAction::create(gap_options);
      if (!action.is_ok()) return action.status();
      gap_ = static_cast<const sched::GapAction&>(**action).options();
    }
    return Status::ok();
  }

  Result<SimResult> run() {
    std::size_t next_arrival = 0;
    while (next_arrival < jobs_.size() || !ends_.empty()) {
      std::int64_t now = std::numeric_limits<std::int64_t>::max();
      if (next_arrival < jobs_.size()) now = jobs_[next_arrival].submit_s;
      if (!ends_.empty()) now = std::min(now, ends_.top().time_s);
      // A gap job's save may be due (actions/gap.h): a cycle runs then.
      if (!wakes_.empty()) now = std::min(now, *wakes_.begin());
      bool woke = false;
      while (!wakes_.empty() && *wakes_.begin() <= now) {
        wakes_.erase(wakes_.begin());
        woke = true;
      }
      // Ends first: the cores they free are there for this time's arrivals.
      std::vector<std::size_t> saved;
      while (!ends_.empty() && ends_.top().time_s == now) {
        const End end = ends_.top();
        ends_.pop();
        if (end.run != runs_[end.index] || running_pos_[end.index] == kNotRunning) continue;
        HPCQ_RETURN_IF_ERROR(end_run(end));
        job::JobRecord& record = *records_[end.index];
        if (saving_[end.index]) {
          // Its save is done: back in the queue, to be restored.
          saving_[end.index] = false;
          (void)table_.requeue(record, job::JobTableCore::after_run(record).reason);
          saved.push_back(end.index);
        } else {
          const TimeUs at = end.time_s * kUsPerSecond;
          (void)table_.finish(record, job::JobState::kCompleted, "", at, at);
          forget(end.index);
        }
      }
      std::sort(saved.begin(), saved.end());
      requeue(saved);
      while (next_arrival < jobs_.size() && jobs_[next_arrival].submit_s == now) {
        arrive(next_arrival++);
      }
      // Running elastic jobs may grow into what an end freed, queue or not.
      const bool resizable = elastic_running_ > 0;
      for (int round = 0; round < kMaxPreemptRoundsPerTime &&
                          (!snapshot_.queue.empty() || resizable || (woke && round == 0));
           ++round) {
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

  // The ranks whose features meet the job's constraint; empty: any (also
  // for no constraint). init() refused constraints no node meets.
  std::vector<Rank> eligible(const SimJob& job) const {
    std::vector<Rank> ranks;
    if (job.constraint.empty()) return ranks;
    const auto constraint = job::parse_constraint(job.constraint);  // job_set checked it
    for (std::size_t r = 0; r < features_.size(); ++r) {
      if (constraint.is_ok() && constraint->matches(*features_[r])) {
        ranks.push_back(static_cast<Rank>(r));
      }
    }
    return ranks;
  }

  // Whether some node the job may run on has each of its gres counts.
  bool gres_fits(const SimJob& job) const {
    const std::vector<Rank> eligible_ranks = eligible(job);
    for (const resource::NodeState& node : pool_.nodes()) {
      if (!eligible_ranks.empty() && std::find(eligible_ranks.begin(), eligible_ranks.end(),
                                               node.rank()) == eligible_ranks.end()) {
        continue;
      }
      if (std::all_of(job.gres.begin(), job.gres.end(), [&](const auto& g) {
            const auto has = node.gres().find(g.first);
            return has != node.gres().end() && has->second >= g.second;
          })) {
        return true;
      }
    }
    return false;
  }

  sched::PendingJob pending_of(const SimJob& job) const {
    sched::PendingJob pending;
    pending.id = job.id;
    pending.uid = job.user >= 0 ? static_cast<std::uint32_t>(job.user) : 0;
    pending.submit_time = job.submit_s * kUsPerSecond;
    pending.request.nodes = 0;
    pending.request.ntasks = job.size;
    pending.request.cpus_per_task = 1;
    pending.request.gres = job.gres;
    pending.time_limit_s = limit_s(job);
    pending.queue = job.queue;
    pending.priority = job.priority;
    pending.profile = job.profile;
    pending.workers = job.workers;
    pending.licenses = job.licenses;
    pending.nodelist = eligible(job);
    if (job.min_nodes >= 1) {
      // Whole nodes of `size` cores each; a node range when max > min.
      pending.request.nodes = job.min_nodes;
      pending.request.ntasks = job.min_nodes * job.size;
      pending.max_nodes = std::max(job.max_nodes, job.min_nodes);
      pending.elastic = job.elastic;
    }
    return pending;
  }

  void arrive(std::size_t index) {
    sched::PendingJob pending = pending_of(jobs_[index]);
    job::Job job;
    job.id = pending.id;
    job.uid = pending.uid;
    job.submit_time = pending.submit_time;
    records_[index] = &table_.insert(std::move(job));
    (void)table_.admit(*records_[index], pending.submit_time);  // effects: the daemon's
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
      if (auto* shrink = std::get_if<sched::Shrink>(&decision)) {
        HPCQ_RETURN_IF_ERROR(apply_shrink(*shrink, now));
        continue;
      }
      if (auto* expand = std::get_if<sched::Expand>(&decision)) {
        HPCQ_RETURN_IF_ERROR(apply_expand(*expand, now));
        continue;
      }
      if (auto* migrate = std::get_if<sched::Migrate>(&decision)) {
        // As hpcqd does it: checkpointed out, then restored on the target's
        // nodes (the hole the gap action found) when it next starts.
        auto it = index_.find(migrate->job);
        if (it != index_.end() && running_pos_[it->second] != kNotRunning && !saving_[it->second]) {
          std::vector<Rank>& to = nodelist_[it->second];
          to.clear();
          for (const auto& part : migrate->allocation.nodes) to.push_back(part.rank);
          std::sort(to.begin(), to.end());
          ++result_.migrated;
        }
        HPCQ_RETURN_IF_ERROR(apply_preempt(
            sched::Preempt{migrate->job, 0, PreemptMode::kCheckpoint}, now, &requeued));
        if (it != index_.end() && saving_[it->second]) {
          // Its hole stays its own while it is saved.
          snapshot_.running[running_pos_[it->second]].moving_to = nodelist_[it->second];
        }
        continue;
      }
      auto* start = std::get_if<sched::Start>(&decision);
      if (start == nullptr) continue;  // Reserve: a promise, nothing to apply
      auto it = index_.find(start->job);
      if (it == index_.end() || !queued(it->second)) {
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
      (void)table_.start(*records_[index], start->allocation, now * kUsPerSecond);
      nodelist_[index].clear();  // a migration's target binds its restore only
      std::int64_t end_s = now + job.runtime_s;
      if (done_s_[index] > 0 || gap_job(job)) {
        // A checkpointed job's rest (papers/004's model), in a container
        // at efficiency c when it is a gap job.
        const double left = std::max(0.0, static_cast<double>(job.runtime_s) - done_s_[index]);
        const double c = gap_job(job) ? std::max(options_.container_efficiency, 1e-6) : 1.0;
        end_s = now + static_cast<std::int64_t>(std::ceil(left / c)) +
                (done_s_[index] > 0 ? options_.checkpoint_s : 0);
      }
      if (options_.runtime && job.min_nodes < 1) {
        std::int64_t runs =
            std::max<std::int64_t>(0, options_.runtime(job, start->allocation, snapshot_.running));
        if (options_.kill_at_limit) {
          runs = std::min(runs, std::max<std::int64_t>(job.requested_s, 1));
        }
        end_s = now + runs;
      }
      std::int64_t estimate_s = now + limit_s(job);
      int size = job.size;
      if (job.min_nodes >= 1) {  // on whole nodes: the model's time for its size
        const int nodes = static_cast<int>(start->allocation.nodes.size());
        model_[index].emplace(static_cast<double>(job.runtime_s), job.min_nodes,
                              job.serial_fraction, nodes, now);
        end_s = model_[index]->end_s();
        estimate_s = now + scaled_limit_s(job, nodes, 1.0);
        size = start->allocation.total_cores();
        if (elastic(job)) ++elastic_running_;
      }
      running_pos_[index] = snapshot_.running.size();
      snapshot_.running.push_back(sched::running_from(pending_of(job), std::move(start->allocation),
                                                      now * kUsPerSecond,
                                                      estimate_s * kUsPerSecond));
      running_index_.push_back(index);
      ends_.push({end_s, job.id, index, ++runs_[index]});
      outcome_pos_[index] = result_.jobs.size();
      result_.jobs.push_back({job.id, job.user, job.submit_s, now, end_s, size, false, job.queue});
      if (on_event_) on_event_({now, job.id, true, &snapshot_.running.back().allocation});
    }
    if (gap_) plan_wakes(decisions, now);
    if (result_.jobs.size() == first_started) {
      requeue(requeued);
      return take_preempted();
    }
    // One pass keeps the queue and its index list in step, in order.
    std::size_t kept = 0;
    for (std::size_t i = 0; i < snapshot_.queue.size(); ++i) {
      if (!queued(queue_index_[i])) continue;
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

  bool gap_job(const SimJob& job) const {
    const QueueConfig* q = options_.site.find_queue(job.queue);
    return q != nullptr && q->migratable;
  }

  bool take_preempted() {
    const bool any = preempted_now_ > 0;
    preempted_now_ = 0;
    return any;
  }

  // Stops a running job at once: its cores are free for the next cycle.
  // What becomes of it is the job table's after_run(), as in hpcqd: requeue
  // and checkpoint put it back in the queue with its original submit time;
  // requeue loses the work it did, checkpoint keeps it (its next run does
  // the rest, plus SimOptions::checkpoint_s); cancel ends it here, and its
  // outcome records the run that was cut short.
  Status apply_preempt(const sched::Preempt& preempt, std::int64_t now,
                       std::vector<std::size_t>* requeued) {
    auto it = index_.find(preempt.job);
    if (it == index_.end() || running_pos_[it->second] == kNotRunning) {
      return internal_error("scheduler preempted job " + std::to_string(preempt.job) +
                            ", which is not running");
    }
    const std::size_t index = it->second;
    if (saving_[index]) return Status::ok();  // on its way out already
    job::JobRecord& record = *records_[index];
    record.preempted = job::Preemption{preempt.for_job, preempt.mode};
    const job::AfterRun after = job::JobTableCore::after_run(record);
    const bool keeps_work = after.kind == job::AfterRun::Kind::kRequeueFromCheckpoint;
    const bool save = keeps_work && options_.checkpoint_s > 0;
    if (save) {
      // Frozen for its dump, it gives its cores back at once, as hpcqd
      // hands them over (Checkpoints::hand_over_cores); the dump takes
      // checkpoint_s, then the End loop queues it again.
      saving_[index] = true;
      sched::RunningJob& running = snapshot_.running[running_pos_[index]];
      charge(index, running, now);
      running.last_resize = now * kUsPerSecond;
      HPCQ_RETURN_IF_ERROR(pool_.release(running.allocation));
      if (on_event_) on_event_({now, preempt.job, false, &running.allocation});
      for (resource::NodeAllocation& part : running.allocation.nodes) part.cores.clear();
      running.leaving = true;
      running.end_estimate = (now + options_.checkpoint_s) * kUsPerSecond;
      ends_.push({now + options_.checkpoint_s, preempt.job, index, ++runs_[index]});
      ++preempted_now_;  // its cores are free for another cycle now
    } else {
      HPCQ_RETURN_IF_ERROR(end_run({now, preempt.job, index, runs_[index]}));
      ++runs_[index];  // its pending end is stale now
      ++preempted_now_;
    }
    ++result_.preempted;
    JobOutcome& outcome = result_.jobs[outcome_pos_[index]];
    const SimJob& job = jobs_[index];
    const double ran = static_cast<double>(std::max<std::int64_t>(0, now - outcome.start_s));
    result_.preempted_core_seconds += ran * outcome.size;
    if (keeps_work) {
      // The work of this run is kept, less the restore it began with.
      const double c = gap_job(job) ? options_.container_efficiency : 1.0;
      const double restore = done_s_[index] > 0 ? static_cast<double>(options_.checkpoint_s) : 0;
      done_s_[index] += std::max(0.0, ran - restore) * c;
      ++result_.checkpointed;
    } else {
      result_.lost_core_seconds += ran * outcome.size;
    }
    if (after.kind == job::AfterRun::Kind::kFinish) {
      outcome.end_s = now;
      (void)table_.finish(record, after.state, after.reason, now * kUsPerSecond,
                          now * kUsPerSecond);
      forget(index);
      return Status::ok();
    }
    outcome.start_s = -1;  // erased at the end: the job's run is the next one
    if (!save) {
      (void)table_.requeue(record, after.reason);
      requeued->push_back(index);
    }
    return Status::ok();
  }

  // Whether the job waits in the queue (arrived, not running, not ended).
  bool queued(std::size_t index) const {
    return records_[index] != nullptr && records_[index]->job.state == job::JobState::kPending;
  }

  // An ended job leaves the table: the simulation keeps no history there.
  void forget(std::size_t index) {
    table_.erase(jobs_[index].id);
    records_[index] = nullptr;
  }

  // The next times a cycle must run for the gap action: a reservation's
  // start minus the save deadline, while gap jobs run (the earliest after
  // now; the cycle then plans the next), and Mode A's slot ends.
  void plan_wakes(const sched::Decisions& decisions, std::int64_t now) {
    bool gap_running = false;
    for (const sched::RunningJob& running : snapshot_.running) {
      if (running.leaving || !options_.site.find_queue(running.queue) ||
          !options_.site.find_queue(running.queue)->migratable) {
        continue;
      }
      gap_running = true;
      if (gap_->mode_a) {
        const std::int64_t slot_end = running.start_time / kUsPerSecond + gap_->slot_s;
        if (slot_end > now) wakes_.insert(slot_end);
      }
    }
    if (!gap_running) return;
    std::int64_t earliest = std::numeric_limits<std::int64_t>::max();
    for (const sched::Decision& decision : decisions.decisions) {
      const auto* reserve = std::get_if<sched::Reserve>(&decision);
      if (reserve == nullptr) continue;
      const std::int64_t due = reserve->time / kUsPerSecond - gap_->save_deadline_s;
      if (due > now) earliest = std::min(earliest, due);
    }
    if (earliest != std::numeric_limits<std::int64_t>::max()) wakes_.insert(earliest);
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
      // A migration's target, else where its constraint lets it run.
      if (!nodelist_[index].empty()) {
        snapshot_.queue[static_cast<std::size_t>(offset)].nodelist = nodelist_[index];
      }
    }
  }

  // A Shrink or Expand (simulator.h): the nodes change at once, the work
  // done so far is kept and the end recomputed (elastic_model.h).
  Status apply_shrink(const sched::Shrink& shrink, std::int64_t now) {
    auto index = running_node_job(shrink.job, "shrank");
    if (!index.is_ok()) return index.status();
    const sched::RunningJob& running = snapshot_.running[running_pos_[*index]];
    auto rest = sched::shrunk(running.allocation, shrink.nodes);
    if (!rest.is_ok()) {
      return internal_error("scheduler shrank job " + std::to_string(shrink.job) + ": " +
                            rest.status().message());
    }
    Status released = pool_.release(sched::parts_on(running.allocation, shrink.nodes));
    if (!released.is_ok()) {
      return internal_error("job " + std::to_string(shrink.job) + " shrink: " + released.message());
    }
    ++result_.shrinks;
    resized(*index, std::move(rest).value(), now);
    return Status::ok();
  }

  Status apply_expand(const sched::Expand& expand, std::int64_t now) {
    auto index = running_node_job(expand.job, "expanded");
    if (!index.is_ok()) return index.status();
    const sched::RunningJob& running = snapshot_.running[running_pos_[*index]];
    auto grown = sched::expanded(running.allocation, expand.allocation);
    if (!grown.is_ok()) {
      return internal_error("scheduler expanded job " + std::to_string(expand.job) + ": " +
                            grown.status().message());
    }
    Status taken = pool_.allocate(expand.allocation);
    if (!taken.is_ok()) {
      return internal_error("scheduler decision to expand job " + std::to_string(expand.job) +
                            " refused: " + taken.message());
    }
    ++result_.expands;
    resized(*index, std::move(grown).value(), now);
    return Status::ok();
  }

  Result<std::size_t> running_node_job(JobId id, const char* verb) const {
    const auto it = index_.find(id);
    if (it == index_.end() || running_pos_[it->second] == kNotRunning || !model_[it->second]) {
      return internal_error("scheduler " + std::string(verb) + " job " + std::to_string(id) +
                            ", which is not running on whole nodes");
    }
    return it->second;
  }

  void resized(std::size_t index, resource::Allocation allocation, std::int64_t now) {
    sched::RunningJob& running = snapshot_.running[running_pos_[index]];
    charge(index, running, now);  // what it used at its old size
    const SimJob& job = jobs_[index];
    running.allocation = std::move(allocation);
    running.last_resize = now * kUsPerSecond;
    ElasticRun& model = *model_[index];
    model.resize(running.nodes(), now);
    running.end_estimate =
        (now + scaled_limit_s(job, running.nodes(), model.left())) * kUsPerSecond;
    const std::int64_t end_s = model.end_s();
    ends_.push({end_s, job.id, index, ++runs_[index]});  // the old end is stale now
    result_.jobs[outcome_pos_[index]].end_s = end_s;
  }

  // The job's requested time on `nodes` for `left` of its work (the model's
  // ratio to its time on min_nodes), in whole seconds, at least one.
  std::int64_t scaled_limit_s(const SimJob& job, int nodes, double left) const {
    const double ratio = amdahl_factor(job.serial_fraction, nodes) /
                         amdahl_factor(job.serial_fraction, job.min_nodes);
    const double s = std::ceil(left * ratio * static_cast<double>(limit_s(job)));
    return std::max<std::int64_t>(1, static_cast<std::int64_t>(s));
  }

  static bool elastic(const SimJob& job) {
    return job.elastic && job.min_nodes >= 1 && job.max_nodes > job.min_nodes;
  }

  // Charges the run's usage since its start or last resize, at its current
  // size, to fair-share and to its outcome's core-seconds.
  void charge(std::size_t index, const sched::RunningJob& running, std::int64_t now_s) {
    const TimeUs now_us = now_s * kUsPerSecond;
    if (now_us <= running.last_resize) return;
    const double seconds = static_cast<double>(now_us - running.last_resize) / 1e6;
    const double core_seconds = running.allocation.total_cores() * seconds;
    usage_.charge(running.uid, running.account, core_seconds, now_us);
    result_.jobs[outcome_pos_[index]].core_seconds += core_seconds;
  }

 public:
  // Checks the jobs on whole nodes against the cluster (after init()).
  Status check_node_jobs() {
    model_.resize(jobs_.size());
    const int nodes = static_cast<int>(pool_.nodes().size());
    int widest = 0;
    for (const resource::NodeState& node : pool_.nodes()) {
      widest = std::max(widest, node.total_cores());
    }
    for (const SimJob& job : jobs_) {
      if (job.min_nodes < 1) continue;
      if (!(job.serial_fraction >= 0 && job.serial_fraction <= 1)) {
        return invalid_argument(job_name(job) + ": serial fraction " +
                                std::to_string(job.serial_fraction) + " is not in [0, 1]");
      }
      if (std::max(job.min_nodes, job.max_nodes) > nodes) {
        return invalid_argument(job_name(job) + " asks for up to " +
                                std::to_string(std::max(job.min_nodes, job.max_nodes)) +
                                " nodes; the cluster has " + std::to_string(nodes));
      }
      if (job.size > widest) {
        return invalid_argument(job_name(job) + " needs " + std::to_string(job.size) +
                                " cores on each node; the largest node has " +
                                std::to_string(widest));
      }
    }
    return Status::ok();
  }

 private:
  // The run's resources and usage end (the job table's transition is the
  // caller's: an end, a requeue, a save).
  Status end_run(const End& end) {
    const std::size_t pos = running_pos_[end.index];
    sched::RunningJob& running = snapshot_.running[pos];
    Status released = pool_.release(running.allocation);
    if (!released.is_ok()) {
      return internal_error("job " + std::to_string(end.id) + " end: " + released.message());
    }
    // A saved job's run ended when it handed its cores over (apply_preempt).
    if (on_event_ && !saving_[end.index])
      on_event_({end.time_s, end.id, false, &running.allocation});
    charge(end.index, running, end.time_s);
    if (elastic(jobs_[end.index])) --elastic_running_;
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
  job::JobTable<> table_;                         // the jobs queued or running: their states
  std::vector<job::JobRecord*> records_;          // by index: its entry in table_, or null
  std::vector<double> done_s_;                    // by index: work kept by checkpoints (s)
  std::vector<bool> saving_;                      // by index: being checkpointed out
  std::vector<std::vector<Rank>> nodelist_;       // by index: a migration's target nodes
  std::vector<const std::vector<std::string>*> features_;  // by rank: its group's features
  std::set<std::int64_t> wakes_;                  // times a cycle must run (the gap action)
  std::optional<sched::GapOptions> gap_;          // the "gap" action's options, if configured
  std::vector<std::uint32_t> runs_;               // by index: starts and resizes (End.run)
  std::vector<std::optional<ElasticRun>> model_;  // by index: a job on whole nodes' run
  std::size_t elastic_running_ = 0;               // running jobs the scheduler may resize
  std::vector<std::size_t> outcome_pos_;          // by index: its run's place in result_.jobs
  std::size_t preempted_now_ = 0;                 // preemptions in the current cycle
  std::vector<std::size_t> queue_index_;          // position in snapshot_.queue -> index
  resource::NodePool pool_;
  sched::UsageLedger usage_;  // charged at each run's end; snapshot_.usage
  sched::Snapshot snapshot_;
  std::priority_queue<End, std::vector<End>, std::greater<End>> ends_;
  SimResult result_;
};

}  // namespace

std::string format_event(const SimEvent& event) {
  std::string out = std::to_string(event.time_s) + ' ' + std::to_string(event.job) +
                    (event.start ? " start " : " end ");
  if (event.allocation != nullptr) {
    bool first = true;
    for (const resource::NodeAllocation& node : event.allocation->nodes) {
      if (!first) out += ' ';
      first = false;
      out += node.node + ':' + resource::format_cpu_list(node.cores);
    }
  }
  return out;
}

resource::NodeTopology flat_node_topology(int cores) {
  resource::NodeTopology topology;
  topology.packages = 1;
  topology.numa.push_back({0, 0, 0});
  for (int c = 0; c < cores; ++c) topology.cores.push_back({c, 0, 0, {c}});
  topology.source = "simulated:core:" + std::to_string(cores);
  return topology;
}

std::int64_t Cluster::node_count() const {
  if (groups.empty()) return nodes;
  std::int64_t n = 0;
  for (const NodeGroup& group : groups) n += group.count;
  return n;
}

std::int64_t Cluster::total_cores() const {
  if (groups.empty()) return std::int64_t{nodes} * cores_per_node;
  std::int64_t n = 0;
  for (const NodeGroup& group : groups) {
    n += std::int64_t{group.count} * group.topology.num_cores();
  }
  return n;
}

Result<SimResult> simulate(const std::vector<SimJob>& jobs, const SimOptions& options,
                           const std::function<void(const SimEvent&)>& on_event) {
  if (options.cluster.groups.empty() &&
      (options.cluster.nodes < 1 || options.cluster.cores_per_node < 1)) {
    return invalid_argument("the cluster needs at least one node and one core per node (got " +
                            std::to_string(options.cluster.nodes) + " x " +
                            std::to_string(options.cluster.cores_per_node) + ")");
  }
  for (const NodeGroup& group : options.cluster.groups) {
    if (group.count < 1 || group.topology.num_cores() < 1) {
      return invalid_argument("every group of nodes needs at least one node and one core (got " +
                              std::to_string(group.count) + " x " +
                              std::to_string(group.topology.num_cores()) + ")");
    }
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
  HPCQ_RETURN_IF_ERROR(simulation.check_node_jobs());
  auto result = simulation.run();
  if (result.is_ok()) result->skipped = skipped;
  return result;
}

}  // namespace hpcq::sim

#include "daemon/pmi_exchange.h"

#include <spdlog/spdlog.h>

#include <vector>

#include "lib/core/release_memory.h"
#include "lib/overlay/tree.h"

namespace hpcq::daemon {
namespace {

std::string fence_name(const FenceMerge::Key& key) {
  const auto& [id, attempt, step, seq] = key;
  return "PMI fence " + std::to_string(seq) + " of job " + std::to_string(id) +
         (step == 0 ? "" : "." + std::to_string(step));
}

// Freed memory past this goes back to the OS at once (a fence of a few
// small keys is not worth the page heap's walk).
constexpr std::size_t kReleaseAfterBytes = 1 << 20;

}  // namespace

FenceMerge::Answer FenceMerge::add(const Key& key, std::uint32_t nodes,
                                   const std::vector<Part>& parts, TimeUs now) {
  Answer out;
  if (parts.empty()) return out;
  Fence& f = fences_[key];
  f.nodes = nodes;
  if (f.state != State::kGathering) {  // asked again: its copy was lost on the way
    for (const Part& part : parts) {
      f.from.insert(part.rank);
      out.to.insert(part.rank);
    }
    if (f.state == State::kComplete) {
      out.kvs = f.kvs;
    } else {
      out.error = why_not(key, f);
    }
    return out;
  }
  for (const Part& part : parts) {
    if (!f.from.insert(part.rank).second) continue;  // a copy
    if (f.state != State::kGathering) continue;      // failed: answered with the others
    if (f.kvs.size() + part.kvs.size() > max_bytes_) {
      std::string().swap(f.kvs);
      f.state = State::kFailed;
      f.error = fence_name(key) + ": the keys its nodes put take more than " +
                std::to_string(max_bytes_) + " bytes ([agent] pmi_max_kvs_bytes)";
      continue;
    }
    f.kvs += part.kvs;
  }
  if (f.state == State::kGathering && f.from.size() < f.nodes) return out;
  if (f.state == State::kGathering) f.state = State::kComplete;
  f.completed_at = now;
  out.completed = true;
  out.to = f.from;
  if (f.state == State::kComplete) {
    out.kvs = f.kvs;
  } else {
    out.error = f.error;
  }
  // The world's earlier fences are over for every node now. (Not a
  // structured binding of `key`: clang 14 cannot capture one.)
  std::erase_if(fences_, [&key](const auto& item) {
    const auto& [i, a, s, q] = item.first;
    return i == std::get<0>(key) && a == std::get<1>(key) && s == std::get<2>(key) &&
           q < std::get<3>(key);
  });
  return out;
}

std::string FenceMerge::why_not(const Key& key, const Fence& f) const {
  if (f.state == State::kFailed) return f.error;
  return fence_name(key) + ": its outcome is no longer held (it completed more than " +
         std::to_string(keep_outcome_ / kUsPerSecond) + " s before this node asked again)";
}

std::size_t FenceMerge::bytes() const {
  std::size_t total = 0;
  for (const auto& [key, f] : fences_) total += f.kvs.size();
  return total;
}

PmiExchange::PmiExchange(Context& ctx, JobActions& actions, Steps& steps)
    : ctx_(ctx),
      actions_(actions),
      steps_(steps),
      // A node whose copy of an outcome was lost asks again two heartbeats
      // after it sent its part (agent/mpi_relay.cc), unless it is cut
      // off: then within node_down_after_ms it is down and its jobs end.
      merge_(static_cast<std::size_t>(ctx.config.pmi_max_kvs_bytes),
             (static_cast<TimeUs>(ctx.config.node_down_after_ms) +
              4 * static_cast<TimeUs>(ctx.config.heartbeat_interval_ms)) *
                 1000) {}

bool PmiExchange::runs(JobId id, std::uint32_t attempt, std::uint32_t step, Rank rank) const {
  const JobEntry* entry = ctx_.table.find(id);
  if (!entry || entry->job.state != job::JobState::kRunning ||
      static_cast<std::uint32_t>(entry->job.requeue_count) != attempt) {
    return false;
  }
  if (step == 0) return entry->running_on.count(rank) > 0;
  if (step > entry->steps.size()) return false;
  const job::StepRecord& record = entry->steps[step - 1];
  return record.state == job::JobState::kRunning && record.running_on.count(rank) > 0;
}

void PmiExchange::on_fence(Rank rank, const overlay::PmiFence& fence) {
  ctx_.metrics.pmi_fence_parts(static_cast<std::size_t>(fence.parts_size()));
  const FenceMerge::Key key{fence.job_id(), fence.attempt(), fence.step(), fence.seq()};
  std::vector<FenceMerge::Part> parts;
  for (const overlay::PmiContribution& part : fence.parts()) {
    if (fence.nodes() < 1 || !runs(fence.job_id(), fence.attempt(), fence.step(), part.rank())) {
      spdlog::debug("job {}: PMI fence {} of rank {} (from rank {}) dropped: not a running world's",
                    fence.job_id(), fence.seq(), part.rank(), rank);
      continue;
    }
    parts.push_back({part.rank(), part.kvs()});
  }
  for (const FenceMerge::Part& part : parts) bytes_since_release_ += part.kvs.size();
  const FenceMerge::Answer a = merge_.add(key, fence.nodes(), parts, ctx_.now());
  if (a.completed) {
    ctx_.metrics.pmi_fence_completed();
    if (!a.error.empty()) spdlog::info("job {}: {}", fence.job_id(), a.error);
  }
  if (!a.to.empty()) answer(key, a);
}

void PmiExchange::answer(const FenceMerge::Key& key, const FenceMerge::Answer& a) {
  const auto& [id, attempt, step, seq] = key;
  std::map<Rank, std::vector<Rank>> by_child;
  for (Rank r : a.to) {
    by_child[overlay::next_hop_down(0, r, ctx_.config.fanout).value_or(r)].push_back(r);
  }
  for (const auto& [child, ranks] : by_child) {
    overlay::Envelope envelope;
    envelope.set_dst(ranks.front());  // the shallowest: ranks number the tree level by level
    overlay::PmiFenceDone& done = *envelope.mutable_pmi_fence_done();
    done.set_job_id(id);
    done.set_attempt(attempt);
    done.set_step(step);
    done.set_seq(seq);
    done.set_kvs(std::string(a.kvs));
    bytes_since_release_ += a.kvs.size();
    done.set_error(a.error);
    for (Rank r : ranks) done.add_to(r);
    (void)ctx_.overlay->send(std::move(envelope));
  }
}

void PmiExchange::on_failure(Rank rank, const overlay::PmiFailure& failure) {
  if (!runs(failure.job_id(), failure.attempt(), failure.step(), rank)) return;
  JobEntry& entry = *ctx_.table.find(failure.job_id());
  auto node = ctx_.nodes.find(rank);
  const std::string reason =
      (node == ctx_.nodes.end() ? "rank " + std::to_string(rank) : node->second.name) + ": " +
      failure.reason();
  const int exit_code = failure.code() & 0xff;  // as a process's exit status shows it
  if (failure.step() != 0) {
    steps_.world_failed(entry, failure.step(), exit_code, reason, failure.seen_at_us());
  } else {
    actions_.apply(ctx_.table.world_failed(entry, exit_code, reason, failure.seen_at_us()));
  }
}

void PmiExchange::drop_ended() {
  const std::size_t freed = merge_.drop(ctx_.now(), [&](const FenceMerge::Key& key, Rank any) {
    const auto& [id, attempt, step, seq] = key;
    return !runs(id, attempt, step, any);
  });
  // The messages that carried the keys are gone by now too (ZeroMQ sends
  // from its own thread): their memory goes back with what was dropped.
  if (freed + bytes_since_release_ >= kReleaseAfterBytes) {
    release_free_memory();
    bytes_since_release_ = 0;
  }
}

}  // namespace hpcq::daemon

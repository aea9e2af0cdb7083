#include "daemon/pmi_exchange.h"

#include <spdlog/spdlog.h>

#include <vector>

#include "lib/overlay/tree.h"

namespace hpcq::daemon {

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
  const Key key{fence.job_id(), fence.attempt(), fence.step(), fence.seq()};
  Fence& f = fences_[key];
  f.nodes = fence.nodes();
  std::set<Rank> again;  // nodes that ask for a completed fence's outcome
  for (const overlay::PmiContribution& part : fence.parts()) {
    if (fence.nodes() < 1 || !runs(fence.job_id(), fence.attempt(), fence.step(), part.rank())) {
      spdlog::debug("job {}: PMI fence {} of rank {} (from rank {}) dropped: not a running world's",
                    fence.job_id(), fence.seq(), part.rank(), rank);
      continue;
    }
    if (f.complete) {
      again.insert(part.rank());
    } else if (f.from.insert(part.rank()).second) {  // else a copy
      f.kvs += part.kvs();
    }
  }
  if (f.from.empty()) {
    fences_.erase(key);
    return;
  }
  if (f.complete) {
    if (!again.empty()) answer(key, f.kvs, again);
    return;
  }
  if (f.from.size() < f.nodes) return;
  f.complete = true;
  ctx_.metrics.pmi_fence_completed();
  answer(key, f.kvs, f.from);
  // The world's earlier fences are over for every node now.
  std::erase_if(fences_, [&](const auto& item) {
    const auto& [id, attempt, step, seq] = item.first;
    return id == fence.job_id() && attempt == fence.attempt() && step == fence.step() &&
           seq < fence.seq();
  });
}

void PmiExchange::answer(const Key& key, const std::string& kvs, const std::set<Rank>& to) {
  const auto& [id, attempt, step, seq] = key;
  std::map<Rank, std::vector<Rank>> by_child;
  for (Rank r : to) {
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
    done.set_kvs(kvs);
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
  std::erase_if(fences_, [&](const auto& item) {
    const auto& [id, attempt, step, seq] = item.first;
    const Rank any = *item.second.from.begin();
    return !runs(id, attempt, step, any);
  });
}

}  // namespace hpcq::daemon

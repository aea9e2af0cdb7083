#include "daemon/pmi_exchange.h"

#include <spdlog/spdlog.h>

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
  if (!runs(fence.job_id(), fence.attempt(), fence.step(), rank) || fence.nodes() < 1) {
    spdlog::debug("job {}: PMI fence {} from rank {} dropped: not a running world's",
                  fence.job_id(), fence.seq(), rank);
    return;
  }
  const Key key{fence.job_id(), fence.attempt(), fence.step(), fence.seq()};
  Fence& f = fences_[key];
  f.nodes = fence.nodes();
  if (!f.from.insert(rank).second) return;  // a repeat
  f.kvs += fence.kvs();
  if (f.from.size() < f.nodes) return;
  for (Rank to : f.from) {
    overlay::Envelope envelope;
    envelope.set_dst(to);
    overlay::PmiFenceDone& done = *envelope.mutable_pmi_fence_done();
    done.set_job_id(fence.job_id());
    done.set_attempt(fence.attempt());
    done.set_step(fence.step());
    done.set_seq(fence.seq());
    done.set_kvs(f.kvs);
    (void)ctx_.overlay->send(std::move(envelope));
  }
  fences_.erase(key);
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
    steps_.world_failed(entry, failure.step(), exit_code, reason);
  } else {
    actions_.apply(ctx_.table.world_failed(entry, exit_code, reason));
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

#include "daemon/job_stats.h"

namespace hpcq::daemon {
namespace {

constexpr TimeUs kAnswerWithinUs = 2'000'000;

}  // namespace

void JobStats::ask(const JobEntry& entry, std::uint32_t step, std::shared_ptr<Promise> promise) {
  const std::uint64_t query = next_query_++;
  Question& q = questions_[query];
  q.promise = std::move(promise);
  q.deadline = ctx_.now() + kAnswerWithinUs;
  q.response.set_id(entry.job.id);
  q.response.set_step(step);
  const std::set<Rank>& running_on =
      step == 0 ? entry.running_on : entry.steps.at(step - 1).running_on;
  for (const auto& part : entry.job.allocation.nodes) {
    if (!running_on.count(part.rank)) continue;
    v1::NodeUsage* node = q.response.add_nodes();
    node->set_node(part.node);
    node->set_rank(part.rank);
    q.waiting.insert(part.rank);
    overlay::Envelope envelope;
    envelope.set_dst(part.rank);
    overlay::UsageQuery& ask = *envelope.mutable_usage_query();
    ask.set_job_id(entry.job.id);
    ask.set_attempt(static_cast<std::uint32_t>(entry.job.requeue_count));
    ask.set_query(query);
    ask.set_step(step);
    (void)ctx_.overlay->send(std::move(envelope));
  }
  if (q.waiting.empty()) {
    q.promise->set_value(std::move(q.response));
    questions_.erase(query);
  }
}

void JobStats::on_report(Rank rank, const overlay::UsageReport& report) {
  auto it = questions_.find(report.query());
  if (it == questions_.end() || !it->second.waiting.erase(rank)) return;  // late, or a repeat
  Question& q = it->second;
  for (v1::NodeUsage& node : *q.response.mutable_nodes()) {
    if (node.rank() != rank) continue;
    node.set_answered(report.found());
    node.set_cpu_time_us(report.cpu_time_us());
    node.set_memory_bytes(report.memory_bytes());
    node.set_max_memory_bytes(report.max_memory_bytes());
    for (const overlay::StepUsage& from : report.steps()) {
      v1::StepUsage& to = *node.add_steps();
      to.set_step(from.step());
      to.set_cpu_time_us(from.cpu_time_us());
      to.set_memory_bytes(from.memory_bytes());
      to.set_max_memory_bytes(from.max_memory_bytes());
    }
  }
  if (q.waiting.empty()) {
    q.promise->set_value(std::move(q.response));
    questions_.erase(it);
  }
}

void JobStats::check_deadlines() {
  const TimeUs now = ctx_.now();
  for (auto it = questions_.begin(); it != questions_.end();) {
    if (now < it->second.deadline) {
      ++it;
      continue;
    }
    it->second.promise->set_value(std::move(it->second.response));
    it = questions_.erase(it);
  }
}

}  // namespace hpcq::daemon

// hpcq stat: what a running job uses now, asked of its agents (overlay
// UsageQuery / UsageReport), like sstat. One question per request; it is
// answered once every node has, or after its deadline with the nodes that
// did (the others marked unanswered).
#pragma once

#include <future>
#include <map>
#include <memory>
#include <set>

#include "daemon/context.h"
#include "proto/hpcq.pb.h"

namespace hpcq::daemon {

class JobStats {
 public:
  explicit JobStats(Context& ctx) : ctx_(ctx) {}
  JobStats(const JobStats&) = delete;
  JobStats& operator=(const JobStats&) = delete;

  using Promise = std::promise<Result<v1::StatResponse>>;
  // Asks every node the running job (or its running step) is on; answers
  // `promise` later.
  void ask(const JobEntry& entry, std::uint32_t step, std::shared_ptr<Promise> promise);
  void on_report(Rank rank, const overlay::UsageReport& report);
  // Answers the questions past their deadline (heartbeat timer).
  void check_deadlines();

 private:
  struct Question {
    v1::StatResponse response;
    std::set<Rank> waiting;
    TimeUs deadline = 0;
    std::shared_ptr<Promise> promise;
  };
  Context& ctx_;
  std::uint64_t next_query_ = 1;
  std::map<std::uint64_t, Question> questions_;
};

}  // namespace hpcq::daemon

#include "lib/sched/snapshot.h"

#include <algorithm>

namespace hpcq::sched {

RunningJob running_from(const PendingJob& job, resource::Allocation allocation, TimeUs start,
                        TimeUs end_estimate) {
  RunningJob r;
  r.id = job.id;
  r.allocation = std::move(allocation);
  r.end_estimate = end_estimate;
  r.uid = job.uid;
  r.submit_time = job.submit_time;
  r.start_time = start;
  r.request = job.request;
  r.time_limit_s = job.time_limit_s;
  r.queue = job.queue;
  r.account = job.account;
  r.qos = job.qos;
  r.priority = job.priority;
  r.max_nodes = job.max_nodes;
  r.elastic = job.elastic;
  r.last_resize = start;
  r.profile = job.profile;
  r.workers = job.workers;
  r.licenses = job.licenses;
  return r;
}

bool has_node_range(const resource::ResourceRequest& request, int max_nodes) {
  return request.nodes >= 1 && max_nodes > request.nodes && request.ntasks >= request.nodes &&
         request.ntasks % request.nodes == 0;
}

resource::ResourceRequest request_at(const resource::ResourceRequest& request, int nodes) {
  resource::ResourceRequest r = request;
  r.ntasks = request.ntasks / request.nodes * nodes;
  r.nodes = nodes;
  return r;
}

bool AdvanceReservation::admits(const PendingJob& job) const {
  if (std::find(uids.begin(), uids.end(), job.uid) != uids.end()) return true;
  return !job.account.empty() &&
         std::find(accounts.begin(), accounts.end(), job.account) != accounts.end();
}

}  // namespace hpcq::sched

// Plugin "proportion": Volcano's proportional sharing of the cluster's cores
// between queues, by weight, with reclaim of idle share.
//
// Deserved shares (Volcano's proportion plugin, one resource: cores): the
// total is the cores of the schedulable nodes. Every queue's request is its
// running cores plus its pending jobs' cores. Water-filling: repeatedly give
// each queue not yet satisfied remaining * weight / (sum of those queues'
// weights), capping a queue at its request (it is then satisfied); stop
// when nothing remains or a round hands nothing out. A queue without demand
// deserves 0, so its share flows to the queues that want it: that is the
// reclaim of idle share (and the "reclaim" action takes it back once the
// idle queue has demand again).
//
// Hooks (only with a SitePolicy that has queues):
//   job order    the queue with the lowest allocated / deserved (at session
//                open) first; no opinion within a queue, so list this plugin
//                before ordering plugins (plugins = ["proportion",
//                "priority"]).
//   job ready    false when the queue's allocation (running + started this
//                cycle) plus the job's cores would exceed its deserved
//                share, unless no other queue has pending demand left (the
//                idle share is then free to take); false for an unknown
//                queue.
//   enqueueable  the same, also counting the cores "enqueue" admitted.
// The shares are published with Session::set_queue_shares() (allocated and
// pending kept up to date by on-allocate / on-deallocate) for "reclaim".
//
// State: this cycle's admitted cores, reset by on_session_open; the hooks
// borrow the plugin. Cost: O(R + Q + nodes) at session open plus
// O(queues^2) for the water-filling (each round satisfies a queue or
// stops); O(queues) per hook call.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "lib/sched/plugin.h"

namespace hpcq::sched {

// The water-filling over `shares` (weight and request set): fills deserved.
void fill_deserved(std::vector<QueueShare>& shares, double total);

class ProportionPlugin final : public Plugin {
 public:
  static constexpr std::string_view kName = "proportion";
  std::string_view name() const override { return kName; }
  void on_session_open(Session& session) override;

 private:
  // Whether a job of `queue` taking `cores` (over `extra` already promised)
  // stays within the share or may take idle share.
  bool within_share(const Session& session, const std::string& queue, double cores,
                    double extra) const;

  std::map<std::string, double> admitted_;  // queue -> cores admitted by "enqueue"
};

}  // namespace hpcq::sched

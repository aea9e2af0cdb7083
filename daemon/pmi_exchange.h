// The PMI key exchange of MPI worlds that span nodes (--mpi pmi1 and pmix):
// each node's job shell gathers its ranks' keys at a fence, its agent sends
// them up the tree, where interior agents combine their subtrees' (overlay
// PmiFence, agent/fence_tree.h); once every node of the world has sent its
// own, the merged keys go back down the tree to all of them (one
// PmiFenceDone per child subtree of the leader). One combine and one
// broadcast per fence, as Flux's and Slurm's PMI servers do over their trees.
// A completed fence's outcome is kept until the world's next fence
// completes or its run ends: a node whose copy was lost (the tree healed)
// asks again, and is answered.
//
// A fence that cannot complete (a node's ranks have failed) is not answered:
// the failed part ends the job (or step) and its other parts are killed. A
// task that ends its world (PMI_Abort, a failure) is reported here before
// its part ends, and decides the end.
// Contributions of runs that have ended are dropped at the heartbeat.
#pragma once

#include <map>
#include <set>
#include <string>
#include <tuple>

#include "daemon/context.h"
#include "daemon/job_actions.h"
#include "daemon/steps.h"

namespace hpcq::daemon {

class PmiExchange {
 public:
  PmiExchange(Context& ctx, JobActions& actions, Steps& steps)
      : ctx_(ctx), actions_(actions), steps_(steps) {}
  PmiExchange(const PmiExchange&) = delete;
  PmiExchange& operator=(const PmiExchange&) = delete;

  void on_fence(Rank rank, const overlay::PmiFence& fence);
  // A task ended its world (PMI_Abort, a failure): it decides the job's (or
  // step's) end.
  void on_failure(Rank rank, const overlay::PmiFailure& abort);
  // Drops the fences of runs that no longer run (heartbeat timer).
  void drop_ended();

 private:
  // job, attempt, step, seq
  using Key = std::tuple<JobId, std::uint32_t, std::uint32_t, std::uint32_t>;
  struct Fence {
    std::uint32_t nodes = 0;
    std::set<Rank> from;
    std::string kvs;  // every contribution so far, concatenated (key=value lines)
    bool complete = false;
  };
  bool runs(JobId id, std::uint32_t attempt, std::uint32_t step, Rank rank) const;
  // Sends fence `key`'s outcome to `to`, one copy per child subtree.
  void answer(const Key& key, const std::string& kvs, const std::set<Rank>& to);

  Context& ctx_;
  JobActions& actions_;
  Steps& steps_;
  std::map<Key, Fence> fences_;
};

}  // namespace hpcq::daemon

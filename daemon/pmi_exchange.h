// The PMI key exchange of MPI worlds that span nodes (--mpi pmi1 and pmix):
// each node's job shell gathers its ranks' keys at a fence, its agent sends
// them up the tree, where interior agents combine their subtrees' (overlay
// PmiFence, agent/fence_tree.h); once every node of the world has sent its
// own, the merged keys go back down the tree to all of them (one
// PmiFenceDone per child subtree of the leader). One combine and one
// broadcast per fence, as Flux's and Slurm's PMI servers do over their trees.
//
// The leader is the tree's root, so it holds a fence's keys while they
// come, but no longer than it must (FenceMerge): one fence's keys from all
// nodes together are bounded by [agent] pmi_max_kvs_bytes (past it the
// fence fails on every node, PmiFenceDone.error, and its keys are dropped at
// once); a completed fence's outcome is kept only as long as a node that
// lost its copy (the tree healed) can still ask again, two heartbeats after
// it sent its part, unless it has been away longer than node_down_after_ms
// (then its jobs end); after that window, or once the world's next fence
// completes or its run ends, the outcome is dropped and the memory handed
// back to the OS (lib/core/release_memory.h).
//
// A fence that cannot complete (a node's ranks have failed) is not answered:
// the failed part ends the job (or step) and its other parts are killed. A
// task that ends its world (PMI_Abort, a failure) is reported here before
// its part ends, and decides the end.
// Contributions of runs that have ended are dropped at the heartbeat.
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "daemon/context.h"
#include "daemon/job_actions.h"
#include "daemon/steps.h"

namespace hpcq::daemon {

// The fences of every world in flight, and their outcomes while they are
// kept. Pure: no I/O, no clock (the caller gives the time); one thread.
class FenceMerge {
 public:
  using Key = std::tuple<JobId, std::uint32_t, std::uint32_t, std::uint32_t>;  // job, attempt,
                                                                               // step, seq
  // `max_bytes`: the most keys one fence carries from all nodes together;
  // `keep_outcome`: how long a completed fence's outcome is kept for nodes
  // that ask again.
  FenceMerge(std::size_t max_bytes, TimeUs keep_outcome)
      : max_bytes_(max_bytes), keep_outcome_(keep_outcome) {}

  struct Part {
    Rank rank = 0;  // the node's overlay rank
    std::string_view kvs;
  };
  // What to send once a message's parts are taken: the outcome (or the
  // error) to the nodes in `to`; nothing when `to` is empty.
  struct Answer {
    std::set<Rank> to;
    std::string_view kvs;    // valid until the next call
    std::string error;       // set: the fence failed, why; `kvs` is empty
    bool completed = false;  // this call completed (or failed) the fence
  };
  // Parts of fence `key` of a world of `nodes` nodes (each part of a node
  // that runs the world). A node's second part is a copy; a part that comes
  // after the fence completed asks for its outcome again.
  Answer add(const Key& key, std::uint32_t nodes, const std::vector<Part>& parts, TimeUs now);

  // Drops the outcomes kept longer than `keep_outcome` (a node that asks
  // later is told it is gone), and every fence `ended(key, a node of it)`
  // says is of a run that no longer runs. Returns the bytes of keys freed.
  template <typename Ended>
  std::size_t drop(TimeUs now, Ended ended) {
    std::size_t freed = 0;
    for (auto it = fences_.begin(); it != fences_.end();) {
      Fence& f = it->second;
      if (ended(it->first, *f.from.begin())) {
        freed += f.kvs.size();
        it = fences_.erase(it);
        continue;
      }
      if (f.state == State::kComplete && f.completed_at + keep_outcome_ < now) {
        freed += f.kvs.size();
        std::string().swap(f.kvs);
        f.state = State::kExpired;
      }
      ++it;
    }
    return freed;
  }
  // The bytes of keys held, and the fences.
  std::size_t bytes() const;
  std::size_t size() const { return fences_.size(); }

 private:
  enum class State { kGathering, kComplete, kFailed, kExpired };
  struct Fence {
    std::uint32_t nodes = 0;
    std::set<Rank> from;
    std::string kvs;  // every contribution so far, concatenated (key=value lines, PMIx's bytes)
    State state = State::kGathering;
    std::string error;  // kFailed: why
    TimeUs completed_at = 0;
  };
  // Why a node that asks for `key`'s outcome does not get it.
  std::string why_not(const Key& key, const Fence& f) const;

  std::size_t max_bytes_;
  TimeUs keep_outcome_;
  std::map<Key, Fence> fences_;
};

class PmiExchange {
 public:
  PmiExchange(Context& ctx, JobActions& actions, Steps& steps);
  PmiExchange(const PmiExchange&) = delete;
  PmiExchange& operator=(const PmiExchange&) = delete;

  void on_fence(Rank rank, const overlay::PmiFence& fence);
  // A task ended its world (PMI_Abort, a failure): it decides the job's (or
  // step's) end.
  void on_failure(Rank rank, const overlay::PmiFailure& abort);
  // Drops the fences of runs that no longer run, and outcomes kept long
  // enough (heartbeat timer).
  void drop_ended();

 private:
  bool runs(JobId id, std::uint32_t attempt, std::uint32_t step, Rank rank) const;
  // Sends fence `key`'s outcome (or failure) to `answer.to`, one copy per
  // child subtree.
  void answer(const FenceMerge::Key& key, const FenceMerge::Answer& answer);

  Context& ctx_;
  JobActions& actions_;
  Steps& steps_;
  FenceMerge merge_;
  std::size_t bytes_since_release_ = 0;  // of keys received and sent since memory went back
};

}  // namespace hpcq::daemon

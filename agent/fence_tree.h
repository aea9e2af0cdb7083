// The PMI fences of MPI worlds on their way through this agent's place in
// the tree (proto/overlay.proto PmiFence, PmiFenceDone), as Flux's and
// Slurm's PMI servers reduce over their trees.
//
// Up: a contribution to a fence (this node's own, or one relayed from
// below) is held until every node of the world in this agent's subtree has
// contributed; then they go on to the leader as one PmiFence. A node whose
// subtree holds no other node of the world sends its own at once. Nothing
// is lost by holding: an agent that has been waiting two heartbeats sends
// its fence again, and a copy of a contribution already held sends on what
// is held (so a contribution that cannot come, or a subtree the tree's
// healing has rearranged, delays a fence by those two heartbeats at most);
// a contribution to a fence that went on already (a copy, or one that came
// late) passes straight through. The leader takes each node's part once.
// What is held of one fence stays within the job's PMI limit ([agent]
// pmi_max_kvs_bytes): once its parts pass it they go on at once, and the
// leader, which bounds the whole, fails the fence.
//
// Down: a fence's outcome goes to each node in its `to` list: this agent
// keeps it if it is one of them and sends one copy to each child whose
// subtree holds others.
//
// Pure: no I/O, no clock (the caller passes the time).
#pragma once

#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "lib/core/ids.h"
#include "proto/overlay.pb.h"

namespace hpcq::agent {

class FenceTree {
 public:
  FenceTree(Rank self, int fanout, std::size_t max_bytes)
      : self_(self), fanout_(fanout), max_bytes_(max_bytes) {}

  // A contribution going up: the PmiFences to send to the leader now.
  std::vector<overlay::PmiFence> up(overlay::PmiFence fence, TimeUs now);

  struct Down {
    bool here = false;  // this node is one of the destinations
    // One copy per child subtree holding others: (dst, message).
    std::vector<std::pair<Rank, overlay::PmiFenceDone>> onward;
  };
  // An outcome addressed to `dst` (its `to` list, or dst alone).
  Down down(Rank dst, const overlay::PmiFenceDone& done) const;

  // What has been held longer than `hold` (a world whose other nodes never
  // came), to send on now. Worlds unseen for kForgetAfter are forgotten.
  std::vector<overlay::PmiFence> expire(TimeUs now, TimeUs hold);
  static constexpr TimeUs kForgetAfter = 3600 * kUsPerSecond;

 private:
  using World = std::tuple<JobId, std::uint32_t, std::uint32_t>;               // job, attempt, step
  using Key = std::tuple<JobId, std::uint32_t, std::uint32_t, std::uint32_t>;  // and seq
  struct Held {
    overlay::PmiFence fence;  // the contributions so far
    std::set<Rank> from;
    std::set<Rank> expected;  // the world's nodes in this subtree, this one too
    TimeUs since = 0;
    std::size_t bytes = 0;  // of the parts' keys
  };
  bool below_or_self(Rank rank) const;

  Rank self_;
  int fanout_;
  std::size_t max_bytes_;  // the most of one fence's keys held here
  std::map<Key, Held> held_;
  struct Sent {
    std::uint32_t seq = 0;  // the world's last fence sent on from here
    TimeUs at = 0;          // when its world was last seen
  };
  std::map<World, Sent> sent_;  // later contributions to those fences pass through
};

}  // namespace hpcq::agent

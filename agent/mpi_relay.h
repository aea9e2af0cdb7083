// The MPI worlds that span nodes, on this node (proto/overlay.proto's Pmi*
// messages): a shell's fence contribution goes up the tree and an outcome
// comes down it, each combined or split here on the way (fence_tree.h,
// through the overlay's relay); a shell's failure goes to the leader; PMIx
// direct modex requests go to the node that runs the rank, and their
// answers back. Unanswered fences and requests are sent again, so that a
// world in a fence outlives a leader restart or a healed tree.
//
// What is the job's to hear of, the part table says (a stale attempt's
// outcome is dropped); the executor delivers it to the job's shell.
//
// Thread: the agent's event loop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "agent/executor/executor.h"
#include "agent/fence_tree.h"
#include "agent/part_table.h"
#include "lib/overlay/overlay.h"

namespace hpcq::agent {

class MpiRelay {
 public:
  struct Options {
    Rank rank = 0;
    int fanout = 0;
    std::size_t max_kvs_bytes = 0;  // one fence's keys at most ([pmi] max_kvs_bytes)
    TimeUs repeat_after = 0;        // an unanswered fence or request goes again after this
  };
  MpiRelay(const Options& options, overlay::Overlay& overlay, Executor& executor,
           const PartTable& parts);

  // The executor's PMI events of this node's shells: to the leader, up the
  // tree, or to the node a modex request is for.
  void send_events(std::vector<PmiEvent> events, TimeUs now);
  // The overlay's relay: a fence going up or an outcome going down through
  // this node is taken (true) and sent on, combined or split.
  bool on_relay(overlay::Envelope& envelope, TimeUs now);
  // A fence's outcome addressed to `dst` (this node, or under it).
  void on_fence_done(Rank dst, const overlay::PmiFenceDone& done);
  void on_modex_request(Rank from, const overlay::PmiModexRequest& request);
  void on_modex_reply(const overlay::PmiModexReply& reply);
  // Fences and modex requests not answered are sent again; what no part
  // waits for any more is dropped. Call it at each heartbeat.
  void repeat_unanswered(TimeUs now);
  // A job's part ended: its outcomes queued for its shell are gone, so the
  // allocator's free memory goes back if large fences passed lately.
  void on_part_ended();

 private:
  void fence_up(overlay::PmiFence fence, TimeUs now);
  void send_fence(overlay::PmiFence fence);
  void deliver_fence_done(const overlay::PmiFenceDone& done);
  void send(overlay::Envelope envelope, const char* what);

  const Options options_;
  overlay::Overlay& overlay_;
  Executor& executor_;
  const PartTable& parts_;
  // The fence of each job (or step) of this node that waits for its
  // outcome, and when it was last sent (the leader ignores a repeat).
  struct PendingFence {
    overlay::PmiFence fence;
    TimeUs sent_at = 0;
  };
  std::map<std::pair<JobId, std::uint32_t>, PendingFence> fences_;
  FenceTree fence_tree_;  // other nodes' contributions held here, and outcomes sent down
  // The direct modex requests of this node's shells not answered yet, by
  // (job, step, the shell's request tag).
  struct PendingModex {
    overlay::Envelope request;
    TimeUs sent_at = 0;
  };
  std::map<std::tuple<JobId, std::uint32_t, std::uint64_t>, PendingModex> modex_requests_;
  // Bytes of fence keys that passed through since the allocator last handed
  // its free memory back; and whether it does so again at a part's end.
  std::size_t fence_bytes_since_release_ = 0;
  bool release_at_part_end_ = false;
};

}  // namespace hpcq::agent

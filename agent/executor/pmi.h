// PMI-1, the "simple PMI" wire protocol that MPICH (and Intel MPI, MVAPICH)
// speak to their process manager, served by the job shell to the tasks of
// its node: each task gets one end of a socket pair as PMI_FD, with PMI_RANK
// and PMI_SIZE, and sends newline-ended lines of space-separated key=value
// words ("cmd=put kvsname=... key=... value=..."), answered in the same form.
//
// The key-value space is the world's: a task's puts become visible to the
// other nodes' tasks at a barrier. Once every task of this node has entered
// the barrier, the node's puts since the last one leave as one contribution
// (take_fence); the agents carry it to the leader, which merges every node's
// and sends the whole back (fence_done), and only then does each task get its
// barrier_out. Where the node holds the whole world the barrier completes
// here, with no exchange.
//
// Pure: no I/O. The shell owns the sockets and feeds the lines in
// (hpcq-job-shell, agent/executor/job_shell_main.cc). The protocol, as
// MPICH's client sends it: init, get_maxes, get_appnum, get_my_kvsname,
// get_universe_size, put, get, barrier_in, finalize, abort; publish_name,
// lookup_name, unpublish_name and spawn are answered with an error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "lib/core/status.h"

namespace hpcq::agent::pmi {

using Kvs = std::map<std::string, std::string>;

// The limits told to clients (get_maxes); a longer key or value is refused.
constexpr std::size_t kKvsNameMax = 256;
constexpr std::size_t kKeyMax = 64;
constexpr std::size_t kValueMax = 1024;
// A line longer than this is a broken client (MPICH's own limit is 1024).
constexpr std::size_t kLineMax = 4096;

// A fence's contribution or outcome, as "key=value\n" lines (PMI keys and
// values hold neither spaces nor newlines, and keys no '=').
std::string encode_kvs(const Kvs& kvs);
Result<Kvs> decode_kvs(std::string_view text);

// MPICH's PMI_process_mapping for a world whose rank r runs on node
// node_of_rank[r] (0-based, in allocation order): "(vector,(node,nodes,
// ranks per node),...)", consecutive equal blocks on consecutive nodes
// merged. Empty when it would not fit kValueMax (MPICH then asks the
// nodes' host names instead).
std::string process_mapping(const std::vector<int>& node_of_rank);

struct World {
  std::string kvsname;  // the job's (and step's) name for its key-value space
  int size = 1;         // PMI_SIZE: every rank of the world
  int nodes = 1;        // the nodes its ranks run on (1: no exchange)
  Kvs preset;           // keys every task can get at once (PMI_process_mapping)
};

// What a client asked for that the server cannot finish alone.
struct Reply {
  std::size_t client = 0;  // index of the local task
  std::string line;        // with its newline
};

class Server {
 public:
  // `ranks`: the world rank of each local client, in client order.
  Server(World world, std::vector<int> ranks);

  // One line from `client`, without its newline. Returns the answers to send
  // (none while the client waits in a barrier; every waiting client's when
  // the barrier completes on this node).
  std::vector<Reply> on_line(std::size_t client, std::string_view line);

  // Every local client has entered the barrier and the world spans other
  // nodes: the node's puts since the last fence are to be sent (once).
  bool fence_pending() const { return fence_pending_; }
  // Hands over the contribution of fence number `fence_seq()` and clears it.
  std::string take_fence();
  std::uint32_t fence_seq() const { return fence_seq_; }
  // The merged contributions of every node for the fence in flight: each
  // waiting client gets its barrier_out. Ignored unless `seq` is that fence.
  std::vector<Reply> fence_done(std::uint32_t seq, const Kvs& all);
  // The fence cannot complete (a node's rank died; the job is ending):
  // every waiting client gets an error answer.
  std::vector<Reply> fence_failed();

  // Client `client` has gone (its task ended or closed the socket). Returns
  // true when that breaks the world: it began PMI (init) and did not
  // finalize, or it never began while others have, so no barrier it owes
  // can complete. The barrier's waiters get an error answer in `replies`.
  bool on_client_gone(std::size_t client, std::vector<Reply>& replies);
  // The client whose absence broke the world, once one has: one that went
  // away unfinished, or one that went before init when another then began.
  std::optional<std::size_t> broken_by() const { return broken_by_; }

  // A client called abort: its rank and code (the first one only).
  struct Abort {
    int rank = 0;
    int code = 0;
  };
  const std::optional<Abort>& abort() const { return abort_; }
  // Whether any client has begun PMI (sent init).
  bool in_use() const { return in_use_; }

 private:
  enum class Phase { kNew, kInitialized, kInBarrier, kFinalized, kGone };
  // Once no local client owes the barrier any more: complete it here (one
  // node) or mark the fence pending.
  std::vector<Reply> maybe_complete_barrier();
  std::vector<Reply> release_barrier(const std::string& line);

  World world_;
  std::vector<int> ranks_;
  std::vector<Phase> phase_;
  Kvs kvs_;      // everything known here: preset, the world's and local puts
  Kvs pending_;  // local puts since the last fence
  bool fence_pending_ = false, fence_in_flight_ = false;
  std::uint32_t fence_seq_ = 0;
  bool in_use_ = false;
  std::set<std::size_t> in_multi_line_;  // clients inside an "mcmd" (spawn) request
  std::set<std::size_t> gone_early_;     // clients gone before init, while none had begun
  std::optional<std::size_t> broken_by_;
  std::optional<Abort> abort_;
};

}  // namespace hpcq::agent::pmi

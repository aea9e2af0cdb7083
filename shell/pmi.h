// PMI-1 and PMI-2, the wire protocols that MPICH (and Intel MPI, MVAPICH,
// and Slurm's libpmi2) speak to their process manager, served by the job
// shell to the tasks of its node: each task gets one end of a socket pair as
// PMI_FD, with PMI_RANK and PMI_SIZE, and the shell feeds what it reads there
// to on_bytes, whose answers it sends back.
//
// The wire, per client, is decided by what it says first:
//  - PMI-1 ("simple PMI"): newline-ended lines of space-separated key=value
//    words ("cmd=put kvsname=... key=... value=..."), answered in the same
//    form. MPICH's client sends init, get_maxes, get_appnum, get_my_kvsname,
//    get_universe_size, put, get, barrier_in, finalize, abort;
//    publish_name, lookup_name, unpublish_name and spawn are answered with
//    an error. A spawn (MPI_Comm_spawn) is lines "mcmd=spawn" ... "endcmd",
//    one such block per command of MPI_Comm_spawn_multiple (its
//    "spawnssofar" of "totspawns"), answered once, after the last.
//  - PMI-2: the client opens with the PMI-1 line "cmd=init pmi_version=2
//    pmi_subversion=0", answered "cmd=response_to_init pmi_version=2
//    pmi_subversion=0 rc=0"; from then on each message, both ways, is a
//    6-character decimal length (spaces either side) and that many bytes of
//    "key=value;" pairs, "cmd=..." first, a ';' inside a value doubled
//    (encode_message, decode_message). Served: fullinit, job-getid,
//    kvs-put, kvs-fence, kvs-get, info-putnodeattr, info-getnodeattr (with
//    wait=TRUE, answered once some task of the node puts the key),
//    info-getjobattr (PMI_process_mapping, universeSize), finalize, abort.
//    Anything else (spawn, name-publish/-lookup/-unpublish, job-connect,
//    ring) gets "cmd=<cmd>-response;rc=-1;errmsg=...;". A "thrid" a client
//    sends comes back in its answer (MPICH's threaded client routes by it).
// A refused spawn is kept (spawn_refused()): an MPICH that asks (ch3, and
// ch4 before 4.0; Debian's 4.0.2 fails the spawn itself, on every rank,
// and asks nothing) returns the error to the spawn's root only, and its
// other ranks wait for the root forever, so the shell ends the world after
// a grace (shell_io.h, MpiWorld).
// A client whose bytes cannot be framed (a PMI-1 line longer than kLineMax,
// a PMI-2 length that is no number or more than kMessageMax) gets one error
// answer and is not read any more (refused(): the shell logs it).
//
// The key-value space is the world's, one for both protocols (a world may
// mix them): a task's puts (put, kvs-put) become visible to the other nodes'
// tasks at a barrier (barrier_in, kvs-fence). Once every task of this node
// has entered the barrier, the node's puts since the last one leave as one
// contribution (take_fence); the agents carry it to the leader, which merges
// every node's and sends the whole back (fence_done), and only then does
// each task get its answer. Where the node holds the whole world the barrier
// completes here, with no exchange. PMI-2's node attributes stay on the node.
//
// The key space is bounded (World::max_kvs_bytes, [agent] pmi_max_kvs_bytes):
// a put that would make the keys and values known here (the world's from
// earlier fences and this node's since) take more is refused with an error
// answer naming the limit (key_space_refusal() keeps the first, for the
// job's end reason). Each fence's keys from all nodes together are bounded
// the same way where they are merged (daemon/pmi_exchange.h); a fence that
// passes it fails on every node (fence_failed with the leader's reason).
//
// Pure: no I/O. The shell owns the sockets (PmiClients in
// shell/shell_io.h, hpcq-job-shell). Bad input from a client, the
// user's program, gets an error answer, never a crash
// (tests/fuzz/pmi_fuzz.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
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
// A PMI-2 message longer than this is one (MPICH's client sends at most 64 KiB).
constexpr std::size_t kMessageMax = 64 * 1024;
// The width of a PMI-2 message's length.
constexpr std::size_t kLengthWidth = 6;

// Why a spawn is refused (PMI-1's mcmd=spawn, PMI-2's spawn, PMIx_Spawn):
// a direct launch's world is the launch's tasks, and the job shell starts
// no others. Said in the answer, on the job's stderr and in its end.
constexpr std::string_view kSpawnRefused =
    "MPI_Comm_spawn is not supported under direct launch (hpcq run, hpcq submit): start the "
    "program with mpirun or mpiexec inside an allocation (hpcq alloc, hpcq batch) to spawn "
    "processes";

// A fence's contribution or outcome, as "key=value\n" lines (PMI keys and
// values hold no newlines, and keys no '=').
std::string encode_kvs(const Kvs& kvs);
Result<Kvs> decode_kvs(std::string_view text);

// A PMI-2 message's pairs, in order ("cmd" first).
using Pairs = std::vector<std::pair<std::string, std::string>>;
// The whole message: its length, left-aligned in kLengthWidth characters,
// and "key=value;" for each pair with each ';' of a value doubled.
std::string encode_message(const Pairs& pairs);
// A message's text after its length. Refused: a pair without '=', an empty
// key, a key holding ';'. The last pair's closing ';' may be missing.
Result<Pairs> decode_message(std::string_view text);

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
  // The most bytes of keys and values (each counted as its "key=value\n"
  // line) the server holds; a put past it is refused.
  std::size_t max_kvs_bytes = std::size_t{64} << 20;
};

// One key and value's bytes as a fence carries them ("key=value\n").
constexpr std::size_t kvs_bytes(std::string_view key, std::string_view value) {
  return key.size() + value.size() + 2;
}

// An answer for a client: a PMI-1 line with its newline, or a PMI-2 message
// with its length.
struct Reply {
  std::size_t client = 0;  // index of the local task
  std::string text;
};

class Server {
 public:
  // `ranks`: the world rank of each local client, in client order.
  Server(World world, std::vector<int> ranks);

  // Bytes from `client`'s socket, as they came (any split): its complete
  // lines or messages are served. Returns the answers to send (none while
  // the client waits in a barrier or for a node attribute; every waiting
  // client's when the barrier completes on this node).
  std::vector<Reply> on_bytes(std::size_t client, std::string_view bytes);
  // One PMI-1 line from `client`, without its newline (on_bytes' part for
  // a line; a PMI-2 init switches the client to PMI-2 messages).
  std::vector<Reply> on_line(std::size_t client, std::string_view line);
  // Why the server stopped reading `client`'s bytes, once it has (one line
  // for the shell's log); empty until then.
  const std::string& refused(std::size_t client) const;

  // Every local client has entered the barrier and the world spans other
  // nodes: the node's puts since the last fence are to be sent (once).
  bool fence_pending() const { return fence_pending_; }
  // Hands over the contribution of fence number `fence_seq()` and clears it.
  std::string take_fence();
  std::uint32_t fence_seq() const { return fence_seq_; }
  // The merged contributions of every node for the fence in flight: each
  // waiting client gets its barrier's answer. Ignored unless `seq` is that
  // fence.
  std::vector<Reply> fence_done(std::uint32_t seq, const Kvs& all);
  // The fence cannot complete (a node's rank died; the job is ending; its
  // keys from all nodes passed the limit): every waiting client gets an
  // error answer saying `why`.
  std::vector<Reply> fence_failed(const std::string& why = "a rank of the job has ended");
  // The first put refused for the key space's limit: why, one line; empty
  // while none has been.
  const std::string& key_space_refusal() const { return key_space_refusal_; }

  // Client `client` has gone (its task ended or closed the socket). Returns
  // true when that breaks the world: it began PMI (init) and did not
  // finalize, or it never began while others have, so no barrier it owes
  // can complete. The barrier's waiters get an error answer in `replies`.
  bool on_client_gone(std::size_t client, std::vector<Reply>& replies);
  // The client whose absence broke the world, once one has: one that went
  // away unfinished, or one that went before init when another then began.
  std::optional<std::size_t> broken_by() const { return broken_by_; }

  // A client called abort: its rank and code (the first one only). PMI-2's
  // abort carries no code: 1, what Slurm's libpmi2 then exits with.
  struct Abort {
    int rank = 0;
    int code = 0;
    std::string message;  // what the caller said (PMI-2, PMIx); may be empty
  };
  const std::optional<Abort>& abort() const { return abort_; }
  // Whether any client has begun PMI (sent init).
  bool in_use() const { return in_use_; }
  // The rank of the first client whose spawn was refused, once one was.
  std::optional<int> spawn_refused() const { return spawn_refused_; }

 private:
  enum class Phase { kNew, kInitialized, kInBarrier, kFinalized, kGone };
  enum class Wire { kLines, kMessages };
  struct Client {
    Phase phase = Phase::kNew;
    Wire wire = Wire::kLines;
    std::string unread;          // bytes short of a whole line or message
    std::string refused;         // why its bytes are not read any more
    bool in_multi_line = false;  // inside a PMI-1 "mcmd" (spawn) request
    // PMI-1's spawn: the block's "spawnssofar" of "totspawns" (0: not said).
    long spawns_so_far = 0, spawn_commands = 0;
    std::string fence_thrid;  // PMI-2: the thrid of its kvs-fence
    // PMI-2: the node attribute it waits for, and its request's thrid.
    std::optional<std::pair<std::string, std::string>> awaits;
  };

  // A line of a PMI-1 spawn request ("mcmd=spawn" up to "endcmd"): the
  // answer once the last command's block has ended.
  std::vector<Reply> on_spawn_line(std::size_t client, std::string_view line);
  // One PMI-2 message from `client`, without its length.
  std::vector<Reply> on_message(std::size_t client, std::string_view text);
  // PMI-2's job attributes: universeSize and the preset keys (PMI_process_mapping, ...).
  std::optional<std::string> job_attr(const std::string& key) const;
  // PMI-2's info-putnodeattr: stored, and answered to the clients waiting on it.
  void put_node_attr(std::size_t client, const std::string& key, const std::string& value,
                     const std::string& thrid, std::vector<Reply>& replies);
  // Stops reading `client`: its bytes cannot be framed.
  void refuse(std::size_t client, const std::string& why, std::vector<Reply>& replies);
  // init (either protocol), fullinit: the client has begun PMI.
  void begin(std::size_t client);
  // Once no local client owes the barrier any more: complete it here (one
  // node) or mark the fence pending.
  std::vector<Reply> maybe_complete_barrier();
  // Answers every client in the barrier: released, or failed with `why`.
  std::vector<Reply> release_barrier(std::optional<std::string> why);
  // Stores a put of `key`, or says why not: it would pass max_kvs_bytes.
  std::optional<std::string> put(const std::string& key, const std::string& value);
  // Sets kvs_[key] = value, keeping kvs_bytes_ its size.
  void store(const std::string& key, const std::string& value);

  World world_;
  std::vector<int> ranks_;
  std::vector<Client> clients_;
  Kvs kvs_;                    // everything known here: preset, the world's and local puts
  std::size_t kvs_bytes_ = 0;  // kvs_'s keys and values, as kvs_bytes() counts them
  std::string key_space_refusal_;
  Kvs pending_;     // local puts since the last fence
  Kvs node_attrs_;  // PMI-2's info-putnodeattr: this node's only
  bool fence_pending_ = false, fence_in_flight_ = false;
  std::uint32_t fence_seq_ = 0;
  bool in_use_ = false;
  std::set<std::size_t> gone_early_;  // clients gone before init, while none had begun
  std::optional<std::size_t> broken_by_;
  std::optional<Abort> abort_;
  std::optional<int> spawn_refused_;
};

}  // namespace hpcq::agent::pmi

// One job shell's channel to the executor (shell/contract.h, fd 4): the
// frames the shell sends (its tasks' output, its PMI fence and modex
// chunks, its MPI world's failure) become TaskOutput and PmiEvent, and the
// frames for the shell (task 0's input, output credit, fence outcomes,
// modex) wait in a queue until its socket takes them. The channel is open
// from the shell's start (JobLaunch::has_channel) or once the shell connects
// to its PMI socket (on demand: a world across nodes whose ranks use PMI).
//
// Thread: the agent's loop (the executor's callers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "agent/executor/executor.h"
#include "lib/core/ids.h"
#include "shell/contract.h"

namespace hpcq::agent {

struct ShellChannel {
  // Where what the shell sent goes, in whose name.
  struct Sink {
    JobId id = 0;
    std::uint32_t step = 0;
    std::size_t max_kvs_bytes = 0;  // a fence's keys from this node at most
    std::vector<TaskOutput>& output;
    std::vector<PmiEvent>& events;
  };

  // Reads what the shell has sent into `sink`; closes the channel at the
  // shell's end. A channel on demand is taken here once the shell connects.
  void read(const Sink& sink);
  // Queues a frame for the shell and sends what its socket takes now.
  void send(std::string frame);
  // Sends the queued frames, as many as the socket takes now.
  void send_queued();
  // Whether frames can be sent: the channel is (or may yet be) connected.
  bool takes_frames() const { return fd >= 0; }
  void close();

  bool open = false;                          // JobLaunch::has_channel, or the shell has opened it
  bool on_demand = false;                     // JobLaunch::channel_on_demand
  int pmi_nodes = 0;                          // JobLaunch::pmi.nodes
  std::vector<std::uint32_t> pmi_node_ranks;  // JobLaunch::pmi.node_ranks
  int listen_fd = -1;                         // on demand: where the shell connects
  int fd = -1;                                // our end of it
  // Opened on demand, and the shell's first message (our end of its
  // channel, handed over) not read yet.
  bool awaiting_handoff = false;
  // The inode of the shell's end: a dump takes it as an external socket,
  // which the restore connects to a new one of ours.
  std::uint64_t inode = 0;

 private:
  // A channel opened on demand: the shell sends our end of a socketpair
  // whose other end it keeps, as kHeldChannelFd too (shell/contract.h), so
  // that this channel also outlives the agent. False while it has not come.
  // An older shell sends frames: its connection is the channel.
  bool take_handoff(const Sink& sink);
  // One frame from the shell: output, a fence's or a modex chunk, a failure.
  void take_frame(const Sink& sink, std::string_view frame);
  // A chunk of this node's contribution to a PMI fence from the shell (an
  // event once the last has come), or its failure past max_kvs_bytes.
  void take_fence_frame(const Sink& sink, const FenceFrame& frame);
  // A direct modex frame from the shell: a request of its own, or a chunk of
  // its answer to another node's (an event once the last has come).
  void take_modex_frame(const Sink& sink, ModexFrame frame);

  std::deque<std::string> input_;  // frames for the shell that its socket did not take yet
  std::string fence_data_;         // a PMI fence's chunks from the shell, until its last
  bool fence_too_big_ = false;     // they passed max_kvs_bytes: dropped, the world fails
  std::map<std::uint64_t, std::string> modex_data_;  // modex answers' chunks, by tag
};

}  // namespace hpcq::agent

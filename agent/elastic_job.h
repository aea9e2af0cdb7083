// The application's end of the resize protocol (proto/overlay.proto, message
// Resize; hpcq issue 7), kept by the agent on an elastic job's first node.
//
// What the job sees (environment of its tasks on that node):
//   HPCQ_NODELIST_FILE  the job's nodes, one host name per line
//   HPCQ_HOSTFILE       the same as Open MPI's hostfile ("host slots=N")
//   HPCQ_HOSTFILE_MPICH the same as MPICH hydra's ("host:N")
//   HPCQ_RESIZE_SOCKET  a unix stream socket (owned by the job's user, 0600)
// HPCQ_NODELIST (hostlist form) and HPCQ_NNODES keep their values from the
// start, as for every job; the files are what changes.
//
// A resize: notify() rewrites the files to the new allocation (each written
// aside and renamed over the old one, so a reader sees the old or the new
// list, never half of one) and writes one line to the connected application:
//   "shrink <nodes> <nodelist file>\n"  or  "expand <nodes> <nodelist file>\n"
// The application answers with a line "ack" or "decline". The agent also
// signals the process that connected (Agent; [agent] resize_signal), so an
// application that is not reading the socket learns to; a job that never
// connected gets no signal (it did not ask for notices). An application that connects while a
// notice is outstanding gets it at once; a later connection replaces an
// earlier one. Without an answer within the timeout the outcome is
// TIMED_OUT. After DECLINED, TIMED_OUT of a shrink, or DECLINED of an
// expansion, the files are put back to the allocation before the notice
// (the leader keeps or restores it); lib/elastic/hpcq_elastic.h is the
// application's side.
//
// Every socket is non-blocking and watched on the agent's event loop: no
// call here blocks. Thread: the agent's loop thread only. Ownership: the
// loop must outlive the object; the destructor unwatches its fds, cancels
// its timer and removes its directory.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lib/core/status.h"
#include "lib/overlay/event_loop.h"
#include "proto/overlay.pb.h"

namespace hpcq::agent {

class ElasticJob {
 public:
  // Called once per notice with its outcome; answer_seconds: from the
  // notice to the application's answer (0 unless answered).
  using Answer =
      std::function<void(overlay::ResizeDone::Outcome, const std::string& reason, double)>;
  using NodeAllocs = google::protobuf::RepeatedPtrField<overlay::NodeAlloc>;

  // Makes `dir` (it must not exist but its parent must), writes the files for
  // `allocation` and listens on the socket. Errors name the path.
  static Result<std::unique_ptr<ElasticJob>> create(overlay::EventLoop& loop, std::string dir,
                                                    uid_t uid, gid_t gid,
                                                    const NodeAllocs& allocation);
  ~ElasticJob();
  ElasticJob(const ElasticJob&) = delete;
  ElasticJob& operator=(const ElasticJob&) = delete;

  const std::string& nodelist_path() const { return nodelist_; }
  const std::string& hostfile_path() const { return hostfile_; }
  const std::string& hostfile_mpich_path() const { return hostfile_mpich_; }
  const std::string& socket_path() const { return socket_; }
  // The process connected to the socket (in the agent's PID namespace), or
  // -1: the one that asked for notices, and so the only one to signal.
  pid_t application_pid() const { return client_pid_; }

  // Starts a notice (see the file comment). A notice still outstanding is
  // answered FAILED first (the leader asks one at a time, so that is stale).
  // `answer` may be called before this returns (the files cannot be written).
  // forced: the nodes are gone already; the files keep the new list
  // whatever the answer.
  void notify(overlay::Resize::Kind kind, const NodeAllocs& allocation,
              std::chrono::milliseconds timeout, Answer answer, bool forced = false);

  // The file contents for an allocation (exposed for tests).
  static std::string nodelist_text(const NodeAllocs& allocation);
  static std::string hostfile_text(const NodeAllocs& allocation);

 private:
  ElasticJob(overlay::EventLoop& loop, std::string dir);
  Status write_files(const NodeAllocs& allocation);
  void on_accept();
  void on_client_readable();
  void drop_client();
  void send_notice();
  void finish(overlay::ResizeDone::Outcome outcome, const std::string& reason);

  overlay::EventLoop& loop_;
  const std::string dir_;
  std::string nodelist_, hostfile_, hostfile_mpich_, socket_;
  int listen_fd_ = -1;
  int client_fd_ = -1;
  pid_t client_pid_ = -1;
  std::string input_;   // the client's bytes not yet split into lines
  NodeAllocs current_;  // what the files say
  // The outstanding notice, if any.
  struct Notice {
    overlay::Resize::Kind kind = overlay::Resize::KIND_UNSPECIFIED;
    bool forced = false;
    NodeAllocs before;
    std::string line;
    std::chrono::steady_clock::time_point sent;
    overlay::EventLoop::TimerId timer = 0;
    Answer answer;
  };
  std::unique_ptr<Notice> notice_;
};

}  // namespace hpcq::agent

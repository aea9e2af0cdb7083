// The forwarded output (hpcq run, batch steps) this agent sent and may have
// to send again. Output travels up the tree unacknowledged; when the tree
// heals, what was in flight through the agent that died is gone. So each
// task stream's chunks are numbered by their offset in that stream, the last
// `kept_per_stream` bytes are kept, and all that is kept is sent again when
// the agent's way to the leader changes; the leader skips what it has.
// A stream is kept until the leader acknowledges the end of its job or step
// (then it holds all of it: the agent sends output before the end).
//
// The leader's credit (overlay OutputCredit) says how far its readers have
// taken each stream: what they have not is kept too, whatever its size (the
// credit bounds it), so that a change of way loses none of it. And it says
// how far the stream may go: credit() turns that into the bytes the job
// shell may read on from the task's pipe.
//
// Pure: no I/O. Loop thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "lib/core/ids.h"

namespace hpcq::agent {

class OutputLog {
 public:
  explicit OutputLog(std::size_t kept_per_stream) : kept_per_stream_(kept_per_stream) {}

  // The most of a stream kept that the leader's readers have not taken: twice
  // the most the leader grants a stream (daemon/job_output.h).
  static constexpr std::size_t kMaxUntaken = 16 << 20;

  struct Chunk {
    JobId id = 0;
    std::uint32_t attempt = 0;
    std::uint32_t step = 0;  // 0: the job's own tasks
    int rank = 0;
    bool is_stderr = false;
    std::uint64_t offset = 0;  // of data's first byte in the stream
    std::string data;
    // The agent process that began numbering the stream (Output.incarnation):
    // one that took the stream over from its predecessor numbers on in its
    // name, so that the leader does not count the stream anew.
    std::uint64_t incarnation = 0;
  };

  // Numbers `chunk` (its offset is set here, and its incarnation, from the
  // stream's first chunk) and keeps a copy. A stream of
  // another attempt of the job than the one kept starts again at 0.
  const Chunk& add(Chunk chunk);
  // A stream of a job taken back from a previous agent (an agent restart),
  // kept from now on so that the leader's credit reaches its shell before
  // the stream has sent anything here. Its offsets start again at 0: the
  // leader counts a new agent's streams anew (Output.incarnation).
  void open_stream(JobId id, std::uint32_t attempt, std::uint32_t step, int rank, bool is_stderr);
  // A chunk the previous agent numbered (OutputSpool): kept as it is, its
  // stream going on after it.
  void restore(Chunk chunk);
  // Everything kept, each stream's chunks in order; or of one job (step 0)
  // or step.
  std::vector<Chunk> kept() const;
  std::vector<Chunk> kept(JobId id, std::uint32_t step) const;
  // The job's end (step 0: with all its steps) or a step's end was
  // acknowledged: its streams are not needed any more.
  void forget(JobId id, std::uint32_t attempt, std::uint32_t step);
  std::size_t bytes_kept() const { return bytes_kept_; }

  // The leader's credit for a stream: it may go up to `granted`, its
  // readers have taken it up to `consumed`. Returns how many more bytes the
  // shell may send than it was allowed so far (from `initial`, what the
  // shell starts with); 0 for a stream not kept (ended, another attempt).
  std::uint64_t credit(JobId id, std::uint32_t attempt, std::uint32_t step, int rank,
                       bool is_stderr, std::uint64_t granted, std::uint64_t consumed,
                       std::uint64_t initial);

 private:
  struct Stream {
    std::uint32_t attempt = 0;
    std::uint64_t end = 0;  // offset after the last byte added
    std::size_t held = 0;
    std::deque<Chunk> chunks;
    std::uint64_t consumed = 0;     // the leader's readers have taken up to here
    std::uint64_t allowed = 0;      // the shell may send up to here (0: its initial credit)
    std::uint64_t incarnation = 0;  // of its first chunk
  };
  void trim(Stream& s);  // drops what is neither recent nor untaken
  using Key = std::tuple<JobId, std::uint32_t, int, bool>;  // job, step, rank, stderr
  const std::size_t kept_per_stream_;
  std::map<Key, Stream> streams_;
  std::size_t bytes_kept_ = 0;
};

}  // namespace hpcq::agent

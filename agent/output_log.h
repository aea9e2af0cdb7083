// The forwarded output (hpcq run, batch steps) this agent sent and may have
// to send again. Output travels up the tree unacknowledged; when the tree
// heals, what was in flight through the agent that died is gone. So each
// task stream's chunks are numbered by their offset in that stream, the last
// `kept_per_stream` bytes are kept, and all that is kept is sent again when
// the agent's way to the leader changes; the leader skips what it has.
// A stream is kept until the leader acknowledges the end of its job or step
// (then it holds all of it: the agent sends output before the end).
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

  struct Chunk {
    JobId id = 0;
    std::uint32_t attempt = 0;
    std::uint32_t step = 0;  // 0: the job's own tasks
    int rank = 0;
    bool is_stderr = false;
    std::uint64_t offset = 0;  // of data's first byte in the stream
    std::string data;
  };

  // Numbers `chunk` (its offset is set here) and keeps a copy. A stream of
  // another attempt of the job than the one kept starts again at 0.
  const Chunk& add(Chunk chunk);
  // Everything kept, each stream's chunks in order.
  std::vector<Chunk> kept() const;
  // The job's end (step 0: with all its steps) or a step's end was
  // acknowledged: its streams are not needed any more.
  void forget(JobId id, std::uint32_t attempt, std::uint32_t step);
  std::size_t bytes_kept() const { return bytes_kept_; }

 private:
  struct Stream {
    std::uint32_t attempt = 0;
    std::uint64_t end = 0;  // offset after the last byte added
    std::size_t held = 0;
    std::deque<Chunk> chunks;
  };
  using Key = std::tuple<JobId, std::uint32_t, int, bool>;  // job, step, rank, stderr
  const std::size_t kept_per_stream_;
  std::map<Key, Stream> streams_;
  std::size_t bytes_kept_ = 0;
};

}  // namespace hpcq::agent

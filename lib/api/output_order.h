// A reader's order of a job's live output (WatchOutput's OutputChunk): each
// task stream's bytes printed once and in order. Chunks may come twice (a
// reader that reconnected after hpcqd restarted reads from the start) or out
// of order (an earlier chunk lost on one way of the overlay and sent again
// after a later one); each carries its offset in its task stream. What comes
// after a gap waits for the gap to fill, at most `gap_wait`; then the gap is
// given up as lost. A stream starts where its first chunk does (a reader
// may start late, and hpcqd may no longer hold a stream's start).
//
// Pure: the caller passes the time. Not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace hpcq::api {

class OutputOrder {
 public:
  using Clock = std::chrono::steady_clock;
  explicit OutputOrder(Clock::duration gap_wait) : gap_wait_(gap_wait) {}

  struct Piece {
    int rank = 0;
    bool is_stderr = false;
    std::string data;
    std::uint64_t offset = 0;       // of data's first byte in its stream
    std::uint64_t lost_before = 0;  // bytes of this stream given up just before data
  };
  // A chunk came: what can be printed now, in order (it may be nothing).
  std::vector<Piece> add(std::uint32_t attempt, int rank, bool is_stderr, std::uint64_t offset,
                         std::string data, Clock::time_point now);
  // What has waited behind a gap for longer than gap_wait (`all`: everything,
  // at the end of the output).
  std::vector<Piece> give_up(Clock::time_point now, bool all = false);

 private:
  struct Stream {
    bool started = false;
    std::uint64_t next = 0;                        // the offset printed up to
    std::map<std::uint64_t, std::string> waiting;  // after a gap, by offset
    Clock::time_point waiting_since{};
  };
  using Key = std::tuple<std::uint32_t, int, bool>;  // attempt, rank, stderr
  // Moves the waiting chunks that are now contiguous into `out`.
  static void drain(const Key& key, Stream& s, std::vector<Piece>& out);
  const Clock::duration gap_wait_;
  std::map<Key, Stream> streams_;
};

}  // namespace hpcq::api

#include "lib/api/output_order.h"

namespace hpcq::api {

std::vector<OutputOrder::Piece> OutputOrder::add(std::uint32_t attempt, int rank, bool is_stderr,
                                                 std::uint64_t offset, std::string data,
                                                 Clock::time_point now) {
  std::vector<Piece> out;
  const Key key{attempt, rank, is_stderr};
  Stream& s = streams_[key];
  if (!s.started) {
    s.started = true;
    s.next = offset;
  }
  const std::uint64_t end = offset + data.size();
  if (end <= s.next || data.empty()) return out;  // had it
  if (offset < s.next) {
    data.erase(0, s.next - offset);
    offset = s.next;
  }
  if (offset > s.next) {
    // After a gap: waits (a longer copy of what already waits replaces it).
    if (s.waiting.empty()) s.waiting_since = now;
    std::string& waiting = s.waiting[offset];
    if (data.size() > waiting.size()) waiting = std::move(data);
    return out;
  }
  s.next = end;
  out.push_back({rank, is_stderr, std::move(data), offset, 0});
  drain(key, s, out);
  return out;
}

void OutputOrder::drain(const Key& key, Stream& s, std::vector<Piece>& out) {
  while (!s.waiting.empty() && s.waiting.begin()->first <= s.next) {
    auto first = s.waiting.begin();
    std::string data = std::move(first->second);
    const std::uint64_t offset = first->first;
    s.waiting.erase(first);
    const std::uint64_t end = offset + data.size();
    if (end <= s.next) continue;
    data.erase(0, s.next - offset);
    out.push_back({std::get<1>(key), std::get<2>(key), std::move(data), s.next, 0});
    s.next = end;
  }
}

std::vector<OutputOrder::Piece> OutputOrder::give_up(Clock::time_point now, bool all) {
  std::vector<Piece> out;
  for (auto& [key, s] : streams_) {
    while (!s.waiting.empty() && (all || now - s.waiting_since >= gap_wait_)) {
      // The gap before the first waiting chunk is lost; what follows it goes.
      auto first = s.waiting.begin();
      const std::uint64_t lost = first->first - s.next;
      const std::size_t at = out.size();
      s.next = first->first;
      drain(key, s, out);
      if (out.size() > at) out[at].lost_before = lost;
      s.waiting_since = now;  // a further gap waits its own while
    }
  }
  return out;
}

}  // namespace hpcq::api

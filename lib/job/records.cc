#include "lib/job/records.h"

#include <iterator>

namespace hpcq::job {
namespace {

// The word of each value of an enum whose values count from 0, in order.
template <typename Enum, std::size_t N>
const char* name_in(const char* const (&names)[N], Enum value) {
  const auto i = static_cast<std::size_t>(value);
  return i < N ? names[i] : "";
}

template <typename Enum, std::size_t N>
std::optional<Enum> parse_in(const char* const (&names)[N], std::string_view text) {
  for (std::size_t i = 0; i < N; ++i) {
    if (text == names[i]) return static_cast<Enum>(i);
  }
  return std::nullopt;
}

constexpr const char* kThenNames[] = {"continue", "requeue", "stop"};
constexpr const char* kKindNames[] = {"shrink", "expand"};
constexpr const char* kOutcomeNames[] = {"", "acknowledged", "declined", "timed_out", "failed"};
constexpr const char* kByNames[] = {"user", "scheduler", "node_down", "drain"};

}  // namespace

const char* checkpoint_then_name(CheckpointThen then) { return name_in(kThenNames, then); }
std::optional<CheckpointThen> parse_checkpoint_then(std::string_view text) {
  return parse_in<CheckpointThen>(kThenNames, text);
}

const char* resize_kind_name(ResizeKind kind) { return name_in(kKindNames, kind); }
const char* resize_outcome_name(ResizeOutcome outcome) { return name_in(kOutcomeNames, outcome); }
const char* resize_by_name(ResizeBy by) { return name_in(kByNames, by); }
std::optional<ResizeKind> parse_resize_kind(std::string_view text) {
  return parse_in<ResizeKind>(kKindNames, text);
}
std::optional<ResizeOutcome> parse_resize_outcome(std::string_view text) {
  return parse_in<ResizeOutcome>(kOutcomeNames, text);
}
std::optional<ResizeBy> parse_resize_by(std::string_view text) {
  return parse_in<ResizeBy>(kByNames, text);
}

}  // namespace hpcq::job

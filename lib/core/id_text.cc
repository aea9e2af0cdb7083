#include "lib/core/id_text.h"

#include <limits>
#include <optional>

#include "lib/core/units.h"

namespace hpcq {
namespace {

// A non-empty run of decimal digits no larger than `max`; nullopt otherwise
// (std::stoull would take a sign and leading blanks).
std::optional<std::uint64_t> parse_decimal(std::string_view text, std::uint64_t max) {
  if (text.empty()) return std::nullopt;
  std::uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    if (__builtin_mul_overflow(value, 10u, &value) ||
        __builtin_add_overflow(value, static_cast<unsigned>(c - '0'), &value) || value > max) {
      return std::nullopt;
    }
  }
  return value;
}

}  // namespace

Result<JobId> parse_job_id(std::string_view text) {
  auto id = parse_decimal(text, std::numeric_limits<JobId>::max());
  if (!id || *id == 0) return invalid_argument(quote(text) + " is not a job id (want N: digits)");
  return *id;
}

Result<JobStepText> split_job_step(std::string_view text) {
  const std::size_t dot = text.find('.');
  if (dot == std::string_view::npos) return JobStepText{std::string(text), 0};
  auto step = parse_decimal(text.substr(dot + 1), std::numeric_limits<std::uint32_t>::max());
  if (!step || *step == 0 || dot == 0) {
    return invalid_argument(
        quote(text) + " is not a job or step id (want JOB or JOB.STEP: digits, steps from 1)");
  }
  return JobStepText{std::string(text.substr(0, dot)), static_cast<std::uint32_t>(*step)};
}

}  // namespace hpcq

// libFuzzer target for what the Slurm commands (compat/slurm) read besides
// the submit options: their command-line options and their --format
// fields. It must never crash; errors are one line; a field parsed has a
// width in its bounds and pad() keeps to it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "compat/slurm/slurm_format.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

void check_fields(const hpcq::Result<std::vector<hpcq::compat::Field>>& fields) {
  if (!fields.is_ok()) {
    check(fields.status().message().find('\n') == std::string::npos);
    return;
  }
  for (const auto& f : *fields) {
    check(f.width >= 0 && f.width <= 1'000'000);
    const std::string padded = hpcq::compat::pad("some value", f, '+');
    check(f.width == 0 || padded.size() == static_cast<std::size_t>(f.width));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  check_fields(hpcq::compat::parse_percent_format(input));
  check_fields(hpcq::compat::parse_named_format(input, '%'));
  check_fields(hpcq::compat::parse_named_format(input, ':'));
  std::vector<std::string> words(1);
  for (char c : input) {
    if (c == '\0') {
      words.emplace_back();
    } else {
      words.back() += c;
    }
  }
  auto read = hpcq::compat::read_options(
      words,
      {{'h', "noheader", false}, {'o', "format", true}, {'j', "jobs", true}, {0, "me", false}});
  if (!read.is_ok()) {
    check(read.status().message().find('\n') == std::string::npos);
  } else {
    (void)read->list("jobs");
    (void)read->last("format", "x");
  }
  return 0;
}

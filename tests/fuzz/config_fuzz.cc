// libFuzzer target: arbitrary bytes as hpcq.toml. The loader must answer
// with a config or a one-line kInvalidArgument naming the file, never crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "lib/core/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto config = hpcq::parse_config(text, "fuzz.toml");
  if (!config.is_ok()) {
    const hpcq::Status s = config.status();
    if (s.code() != hpcq::Code::kInvalidArgument) std::abort();
    if (s.message().find('\n') != std::string::npos) std::abort();
    if (s.message().rfind("fuzz.toml", 0) != 0) std::abort();
  }
  return 0;
}

#include "lib/core/build_info.h"

#include <string>

#include "lib/core/protocol_version.h"
#include "lib/core/version.h"

namespace hpcq {

std::string version_with_commit() { return std::string(kVersion) + "+" + build_commit(); }

std::string version_line(std::string_view program) {
  return std::string(program) + " " + kVersion + " (commit " + build_commit() + ", protocol " +
         std::to_string(kProtocolVersion) + ")";
}

}  // namespace hpcq

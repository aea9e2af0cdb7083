// This machine's name as gethostname(2) gives it ("" if it has none).
#pragma once

#include <unistd.h>

#include <string>

namespace hpcq {

inline std::string this_host_name() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

}  // namespace hpcq

// The leader's state directory: hpcq.db holds every job's environment (API
// tokens among them), so the directory is its owner's alone.
#pragma once

#include <string>

#include "lib/core/status.h"

namespace hpcq::daemon {

// Creates `dir` (and missing parents) with mode 0700 whatever the umask, or
// checks an existing one: a directory of this user's that no other user can
// enter or read. Errors are one line naming the path and what to do.
Status prepare_state_dir(const std::string& dir);

}  // namespace hpcq::daemon

// The fair-share usage ledger as the leader stores it ("usage"/"ledger" in
// the store's records): a JSON array of the ledger's entries. Pure; errors
// name the field.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "lib/core/status.h"
#include "lib/sched/usage.h"

namespace hpcq::daemon {

std::string encode_usage(const std::vector<sched::UsageEntry>& entries);
Result<std::vector<sched::UsageEntry>> decode_usage(std::string_view json);

}  // namespace hpcq::daemon

#include "agent/executor/shell_record.h"

#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "agent/executor/posix.h"

namespace hpcq::agent {

using nlohmann::json;

std::string encode_shell_record(const ShellRecord& record) {
  return json{{"pid", record.pid},
              {"start_ticks", record.start_ticks},
              {"launched", record.launched},
              {"time_limit_s", record.time_limit_s}}
      .dump();
}

Result<ShellRecord> decode_shell_record(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return invalid_argument("shell.json: not a JSON object");
  try {
    ShellRecord record;
    record.pid = j.at("pid").get<pid_t>();
    record.start_ticks = j.at("start_ticks").get<std::uint64_t>();
    record.launched = j.at("launched").get<TimeUs>();
    record.time_limit_s = j.at("time_limit_s").get<std::int64_t>();
    if (record.pid <= 1) return invalid_argument("shell.json: pid " + std::to_string(record.pid));
    return record;
  } catch (const json::exception& e) {
    return invalid_argument(std::string("shell.json: ") + e.what());
  }
}

std::uint64_t read_shell_start(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The command name (field 2) is in parentheses and may hold spaces: the
  // fields are counted from the last ')', which is field 2's end.
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  for (int n = 3; n <= 22 && fields >> field; ++n) {
    if (n == 22) return std::strtoull(field.c_str(), nullptr, 10);
  }
  return 0;
}

int open_recorded_shell(const ShellRecord& record) {
  const int pidfd = open_pidfd(record.pid);
  if (pidfd < 0) return -1;
  // Read after the open: the pidfd holds the process that had the PID then,
  // so a matching start time names it, not a later one.
  if (record.start_ticks == 0 || read_shell_start(record.pid) != record.start_ticks) {
    close(pidfd);
    return -1;
  }
  return pidfd;
}

}  // namespace hpcq::agent

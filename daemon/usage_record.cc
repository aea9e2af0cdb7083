#include "daemon/usage_record.h"

#include <nlohmann/json.hpp>

namespace hpcq::daemon {

using nlohmann::json;

std::string encode_usage(const std::vector<sched::UsageEntry>& entries) {
  json out = json::array();
  for (const auto& e : entries) {
    out.push_back({{"uid", e.uid},
                   {"account", e.account},
                   {"core_seconds", e.core_seconds},
                   {"memory_byte_seconds", e.memory_byte_seconds},
                   {"gpu_seconds", e.gpu_seconds},
                   {"as_of", e.as_of}});
  }
  return out.dump();
}

Result<std::vector<sched::UsageEntry>> decode_usage(std::string_view text) {
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_array()) return invalid_argument("usage: not a JSON array");
  std::vector<sched::UsageEntry> entries;
  try {
    for (const json& e : doc) {
      sched::UsageEntry entry;
      entry.uid = e.at("uid").get<std::uint32_t>();
      entry.account = e.at("account").get<std::string>();
      entry.core_seconds = e.at("core_seconds").get<double>();
      entry.memory_byte_seconds = e.at("memory_byte_seconds").get<double>();
      entry.gpu_seconds = e.at("gpu_seconds").get<double>();
      entry.as_of = e.at("as_of").get<TimeUs>();
      entries.push_back(std::move(entry));
    }
  } catch (const json::exception& e) {
    return invalid_argument(std::string("usage: ") + e.what());
  }
  return entries;
}

}  // namespace hpcq::daemon

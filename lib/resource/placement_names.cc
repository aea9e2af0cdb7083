#include "lib/resource/placement_names.h"

#include "lib/core/units.h"

namespace hpcq::resource {
namespace {

Result<Distribution> one_level(std::string_view word, std::string_view whole) {
  if (word == "block") return Distribution::kBlock;
  if (word == "cyclic") return Distribution::kCyclic;
  return invalid_argument("--distribution: unknown distribution " + quote(whole) +
                          " (want block or cyclic, optionally :block or :cyclic)");
}

}  // namespace

const char* distribution_name(Distribution d) {
  return d == Distribution::kCyclic ? "cyclic" : "block";
}

std::string distribution_text(Distribution nodes, Distribution cores) {
  std::string text = distribution_name(nodes);
  if (cores != Distribution::kBlock) text += std::string(":") + distribution_name(cores);
  return text;
}

Status parse_distribution(std::string_view text, Distribution& nodes, Distribution& cores) {
  const std::size_t colon = text.find(':');
  auto n = one_level(text.substr(0, colon), text);
  if (!n.is_ok()) return n.status();
  Distribution c = Distribution::kBlock;
  if (colon != std::string_view::npos) {
    auto parsed = one_level(text.substr(colon + 1), text);
    if (!parsed.is_ok()) return parsed.status();
    c = *parsed;
  }
  nodes = *n;
  cores = c;
  return Status::ok();
}

const char* cpu_bind_name(CpuBind b) {
  switch (b) {
    case CpuBind::kThreads: return "threads";
    case CpuBind::kNone: return "none";
    case CpuBind::kCores: break;
  }
  return "cores";
}

Result<CpuBind> parse_cpu_bind(std::string_view text) {
  if (text == "cores") return CpuBind::kCores;
  if (text == "threads") return CpuBind::kThreads;
  if (text == "none") return CpuBind::kNone;
  return invalid_argument("--cpu-bind: unknown binding " + quote(text) +
                          " (want cores, threads or none)");
}

const char* numa_policy_name(NumaPolicy p) {
  switch (p) {
    case NumaPolicy::kSingleNumaNode: return "single-numa-node";
    case NumaPolicy::kNone: return "none";
    case NumaPolicy::kBestEffort: break;
  }
  return "best-effort";
}

Result<NumaPolicy> parse_numa_policy(std::string_view text) {
  if (text == "best-effort") return NumaPolicy::kBestEffort;
  if (text == "single-numa-node") return NumaPolicy::kSingleNumaNode;
  if (text == "none") return NumaPolicy::kNone;
  return invalid_argument("--numa-policy: unknown policy " + quote(text) +
                          " (want best-effort, single-numa-node or none)");
}

}  // namespace hpcq::resource

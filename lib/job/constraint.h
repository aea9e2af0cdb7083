// -C/--constraint (sbatch's): the node features a job needs, as the
// [[rank]] features of hpcq.toml(5) name them. Features joined by '&' (all
// of them) and '|' (any), '&' binding tighter: "a100&ib|v100" runs on a node
// with both a100 and ib, or on one with v100. Slurm's brackets and counts
// ("[rack1|rack2]", "gpu*2") are refused. Feature names are is_plain_name's
// (lib/core/units.h). Pure.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "lib/core/status.h"

namespace hpcq::job {

struct Constraint {
  // Any of these terms; each term, all of its features. Empty: any node.
  std::vector<std::vector<std::string>> any_of_all;

  bool empty() const { return any_of_all.empty(); }
  bool matches(const std::vector<std::string>& features) const;
};

// An empty text is the empty constraint.
Result<Constraint> parse_constraint(std::string_view text);

}  // namespace hpcq::job

// The commands about the cluster: its nodes (list, drain, resume), its
// leaders, reservations, CURVE keys and node lists. Each returns the
// command's exit status (client.h's exit_code_of), with a one-line reason on
// stderr when it fails.
#pragma once

#include <string>
#include <vector>

namespace hpcq::cli {

int cmd_leaders(bool json);
int cmd_nodes(bool json);
// hpcq drain (`drain`) and resume, of the nodes of every host list; --json:
// an array of each node's outcome, {"node", "ok", "error"} (cli/outcomes.h).
int cmd_drain(const std::vector<std::string>& lists, bool drain, const std::string& reason,
              bool json);

struct ReserveOptions {
  std::string name;
  std::string nodes;  // a hostlist
  std::vector<std::string> users, accounts;
  std::string start = "now";
  std::string duration;
};
int cmd_reserve_create(const ReserveOptions& o, bool json);
// --json: {"name", "deleted": true}.
int cmd_reserve_delete(const std::string& name, bool json);
int cmd_reserve_list(bool json);

// --json: {"file", "public_key"}.
int cmd_keygen(const std::string& path, bool force, bool json);
// --json: the names as one array.
int cmd_hostnames(std::string list, bool json);

}  // namespace hpcq::cli

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
// hpcq drain (`drain`) and resume, of the nodes of every host list.
int cmd_drain(const std::vector<std::string>& lists, bool drain, const std::string& reason);

struct ReserveOptions {
  std::string name;
  std::string nodes;  // a hostlist
  std::vector<std::string> users, accounts;
  std::string start = "now";
  std::string duration;
};
int cmd_reserve_create(const ReserveOptions& o, bool json);
int cmd_reserve_delete(const std::string& name);
int cmd_reserve_list(bool json);

int cmd_keygen(const std::string& path, bool force);
int cmd_hostnames(std::string list);

}  // namespace hpcq::cli

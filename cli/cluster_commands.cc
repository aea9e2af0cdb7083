#include "cli/cluster_commands.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "cli/client.h"
#include "cli/format.h"
#include "cli/list_command.h"
#include "cli/outcomes.h"
#include "lib/api/job_proto.h"
#include "lib/core/host_name.h"
#include "lib/core/hostlist.h"
#include "lib/core/units.h"
#include "lib/job/submit_options.h"
#include "lib/overlay/curve_keys.h"

namespace hpcq::cli {

// hpcq leaders: the leader candidates; a pid only for those on this host.
int cmd_leaders(bool json) {
  const std::string host = this_host_name();
  return print_list<v1::ListLeadersResponse>(
      "ListLeaders", v1::ListLeadersRequest(), json,
      [](const v1::ListLeadersResponse& r) -> const auto& { return r.candidates(); },
      [&host](const v1::LeaderCandidate& c) {
        nlohmann::json j = {{"name", c.name()},
                            {"state", c.state()},
                            {"host", c.host()},
                            {"endpoint", c.endpoint()}};
        if (c.host() == host) j["pid"] = c.pid();
        return j;
      },
      [&host](const v1::ListLeadersResponse& r) { return leaders_table(r, host); });
}

int cmd_nodes(bool json) {
  return print_list<v1::ListNodesResponse>(
      "ListNodes", v1::ListNodesRequest(), json,
      [](const v1::ListNodesResponse& r) -> const auto& { return r.nodes(); }, node_json,
      nodes_table);
}

int cmd_drain(const std::vector<std::string>& lists, bool drain, const std::string& reason,
              bool json) {
  std::vector<std::string> nodes;  // each word a node list: node[1-4],gpu1
  for (const std::string& list : lists) {
    auto names = expand_hostlist(list);
    if (!names.is_ok()) return fail(names.status());
    nodes.insert(nodes.end(), names->begin(), names->end());
  }
  Client client(socket_path());
  Outcomes outcomes("node");
  for (const auto& node : nodes) {
    Status s;
    if (drain) {
      v1::DrainRequest request;
      request.set_node(node);
      request.set_reason(reason);
      v1::DrainResponse response;
      s = client.call("Drain", request, &response);
    } else {
      v1::ResumeRequest request;
      request.set_node(node);
      v1::ResumeResponse response;
      s = client.call("Resume", request, &response);
    }
    if (s.is_ok()) {
      outcomes.ok(node);
    } else {
      outcomes.failed(node, s);
    }
  }
  return outcomes.finish(json);
}

int cmd_reserve_create(const ReserveOptions& o, bool json) {
  auto start = parse_when(o.start, "--start");
  if (!start.is_ok()) return fail(start.status());
  auto duration = parse_duration_s(o.duration);
  if (!duration.is_ok() || *duration <= 0) {
    return fail(invalid_argument("--duration: bad duration " + quote(o.duration)));
  }
  v1::CreateReservationRequest request;
  v1::Reservation& r = *request.mutable_reservation();
  r.set_name(o.name);
  auto nodes = expand_hostlist(o.nodes);
  if (!nodes.is_ok()) return fail(invalid_argument("--nodes: " + nodes.status().message()));
  for (const auto& n : *nodes) r.add_nodes(n);
  for (const auto& u : o.users) r.add_users(u);
  for (const auto& a : o.accounts) r.add_accounts(a);
  auto resolved = resolve_when(*start, wall_clock_us(), "--start");
  if (!resolved.is_ok()) return fail(resolved.status());
  const std::int64_t start_us = *resolved;
  r.set_start_us(start_us);
  r.set_end_us(start_us + *duration * 1000000);
  Client client(socket_path());
  v1::Reservation made;
  Status s = client.call("CreateReservation", request, &made);
  if (!s.is_ok()) return fail(s);
  if (json) {
    std::cout << json_text(reservation_json(made)) << "\n";
  } else {
    std::cout << made.name() << "\n";
  }
  return 0;
}

int cmd_reserve_delete(const std::string& name, bool json) {
  Client client(socket_path());
  v1::DeleteReservationRequest request;
  request.set_name(name);
  v1::DeleteReservationResponse response;
  Status s = client.call("DeleteReservation", request, &response);
  if (!s.is_ok()) return fail(s);
  if (json) std::cout << json_text({{"name", name}, {"deleted", true}}) << "\n";
  return 0;
}

int cmd_reserve_list(bool json) {
  return print_list<v1::ListReservationsResponse>(
      "ListReservations", v1::ListReservationsRequest(), json,
      [](const v1::ListReservationsResponse& r) -> const auto& { return r.reservations(); },
      reservation_json, reservations_table);
}

// Writes a CURVE key pair (mode 0600) and prints its public key, for
// hpcq.toml's [[rank]] public_key.
int cmd_keygen(const std::string& path, bool force, bool json) {
  if (!force && std::filesystem::exists(path)) {
    return fail(Status(hpcq::Code::kAlreadyExists, path + " exists (use --force to replace it)"));
  }
  auto keys = overlay::generate_key_pair();
  if (!keys.is_ok()) return fail(keys.status());
  Status s = overlay::write_key_file(path, *keys);
  if (!s.is_ok()) return fail(s);
  if (json) {
    std::cout << json_text({{"file", path}, {"public_key", keys->public_key}}) << "\n";
  } else {
    std::cout << keys->public_key << "\n";
  }
  return 0;
}

// The names of a node list, one per line (scontrol show hostnames): the
// given one, else $HPCQ_NODELIST.
int cmd_hostnames(std::string list, bool json) {
  if (list.empty()) {
    const char* env = std::getenv("HPCQ_NODELIST");
    if (env == nullptr || *env == '\0') {
      return fail(invalid_argument("hostnames: give a node list, or run it in a job"));
    }
    list = env;
  }
  auto names = expand_hostlist(list);
  if (!names.is_ok())
    return fail(Status(names.status().code(), "hostnames: " + names.status().message()));
  if (json) {
    std::cout << json_text(*names) << "\n";
    return 0;
  }
  for (const std::string& name : *names) std::cout << name << "\n";
  return 0;
}

}  // namespace hpcq::cli

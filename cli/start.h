// `hpcq start`: a private hpcq cluster for one command, in the spirit of
// `flux start --test-size=N`.
//
// Under a new temporary directory it writes a config and CURVE keys, starts
// hpcqd and N agents on loopback (each with its own state dir and the given
// synthetic topology), waits until every node is up, runs the command (or
// $SHELL) with HPCQ_SOCKET pointing at that leader (and, on etcd,
// HPCQ_ETCD_ENDPOINTS at the store), then stops the agents
// (which kill their jobs and remove their cgroups) and the leader, removes
// the directory and exits with the command's status. SIGTERM or SIGHUP to
// it ends the command and then stops the cluster the same way.
#pragma once

#include <string>
#include <vector>

namespace hpcq::cli {

struct StartOptions {
  int agents = 4;
  std::string topology = "pack:2 numa:2 core:4 pu:1";
  int fanout = 16;
  // Seconds without a heartbeat before hpcqd declares a node down (and a
  // third of it, unresponsive); 0: kDefaultNodeDownS. Short, so that tests
  // see a lost node soon; CPU-starved emulated nodes (a guest kernel, an
  // oversubscribed benchmark) need longer. With several candidates longer
  // still: a node's jobs are killed a heartbeat before it would be declared
  // down without the leader's answer (leader_lease.h), so a takeover must
  // fit inside it.
  int node_down_after_s = 0;
  std::vector<std::string> command;  // empty: an interactive shell
  bool keep = false;                 // keep the directory (logs) afterwards
  std::string log_level = "info";
  int wait_s = 30;                   // for the nodes to come up
  std::string executor = "process";  // the agents' executor: process or test
  // TOML sections added to the generated hpcq.toml ([scheduler], [[queue]],
  // [[account]], [agent] prolog..., ...; not [overlay] or [leader]).
  std::string config_extra;
  // --features "node[2-3]=a100,ib" (repeatable): the nodes' [[rank]] features.
  std::vector<std::string> features;
  // --gres "node[2-3]=nvme:2,fpga" (repeatable): the nodes' [[rank]] gres.
  std::vector<std::string> gres;
  // --etcd HOST:PORT[,...]: hpcqd keeps its state in that etcd (leader.store
  // = "etcd") under a prefix of this cluster's own, instead of SQLite.
  std::vector<std::string> etcd_endpoints;
  // With --etcd: the PEM files hpcqd reaches it with (CA, and its client
  // certificate and key for etcd's --client-cert-auth). hpcqd refuses an
  // etcd without them (issue 45): anyone who can write the store can run
  // jobs as any user.
  std::string etcd_ca, etcd_cert, etcd_key;
  // --leaders N: N hpcqd candidates on the etcd store, one active and the
  // others standing by (issue 25); without --etcd, hpcq start runs an etcd
  // of N members for them.
  int leaders = 1;
};

int run_start(const StartOptions& options);

}  // namespace hpcq::cli

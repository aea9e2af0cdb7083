// One process's place in the tree overlay (proto/overlay.proto Envelope).
//
// The leader (rank 0) binds a ROUTER; an agent connects a DEALER to its parent
// and, when it has children, binds a ROUTER of its own. All sockets use CURVE:
// servers accept only keys in the allow-list (ZapAuthenticator), clients pin
// their parent's public key. Envelopes are routed hop by hop: down towards
// the child whose subtree holds `dst`, otherwise up to the parent. An interior
// agent relays without interpreting.
//
// The tree heals itself. An agent watches its connection to its parent (a
// ZeroMQ socket monitor); when the parent has been gone for heal_after_ms it
// connects to its grandparent instead (and further up, one level per
// heal_after_ms, while that one does not answer either), and calls
// `on_reroute` so that the owner can announce itself again (also when the
// parent comes back, before or after a detour: messages queued for a broken
// connection are lost). The connection to
// the parent keeps retrying; once it is back, traffic returns to it and the
// detour is dropped. Going down, a rank whose child towards the destination is
// gone tries the deeper ranks on the path, one of which may have attached to
// it directly. Messages are not acknowledged here: what must not be lost
// (job ends) is journaled and repeated by the agent until the leader acks it.
//
// Rank 0 may have several addresses: the leader's candidates (issue 25),
// of which only the active one binds. A link to rank 0 then connects to
// all of them, sends only over connections made (ZMQ_IMMEDIATE) and drops
// one whose peer stops answering ZeroMQ's heartbeats (a frozen leader); each
// connection made or lost calls `on_reroute`, so the agent says Hello to
// whichever leads now.
//
// Thread: the owning event loop's thread only. Errors: create() fails on bad
// keys or an address in use; send() fails when the next hop is unknown or
// unreachable (ROUTER_MANDATORY), so the caller learns a child is gone.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "lib/core/config.h"
#include "lib/core/ids.h"
#include "lib/core/status.h"
#include "lib/overlay/curve_keys.h"
#include "lib/overlay/event_loop.h"
#include "lib/overlay/zap_authenticator.h"
#include "proto/overlay.pb.h"

namespace hpcq::overlay {

struct OverlayConfig {
  Rank rank = 0;
  int fanout = 16;
  std::vector<std::string> endpoints;    // by rank: where that rank's ROUTER binds
  std::vector<std::string> public_keys;  // by rank: Z85 public key
  CurveKeyPair own_keys;
  int heal_after_ms = 2000;  // how long the parent may be gone before a detour
  // Rank 0's candidates' endpoints (endpoints[0] is the one rank 0 binds);
  // empty or one: just endpoints[0].
  std::vector<std::string> leader_endpoints;
  // With several: a connection to rank 0 silent this long is dropped.
  int leader_timeout_ms = 3000;

  // This rank's view of the [[rank]] table of hpcq.toml.
  static OverlayConfig from_cluster(const ClusterConfig& cluster, Rank rank, CurveKeyPair keys);
};

class Overlay {
 public:
  using Handler = std::function<void(Envelope&&)>;
  // Called on the loop thread with the rank messages up now go through.
  using RerouteHandler = std::function<void(Rank via)>;
  // Called on the loop thread with an envelope passing through on its way to
  // another rank; true: the handler took it and it goes no further.
  using RelayHandler = std::function<bool(Envelope&)>;

  // Binds/connects and registers the sockets with `loop`; envelopes for this
  // rank are handed to `on_message` on the loop thread.
  static Result<std::unique_ptr<Overlay>> create(OverlayConfig config, EventLoop& loop,
                                                 Handler on_message);
  ~Overlay();

  Status send(Envelope envelope);
  void on_reroute(RerouteHandler handler) { on_reroute_ = std::move(handler); }
  void on_relay(RelayHandler handler) { on_relay_ = std::move(handler); }
  // The rank this one sends up through: its parent, or an ancestor while the
  // parent is gone.
  Rank upstream() const { return upstream_; }
  Rank rank() const { return config_.rank; }
  int size() const { return static_cast<int>(config_.endpoints.size()); }
  int refused_connections() const { return zap_ ? zap_->refused() : 0; }

 private:
  Overlay(OverlayConfig config, Handler on_message);
  void on_router_readable();
  void on_dealer_readable();
  void route(Envelope&& envelope, const std::string& bytes);
  void on_detour_readable();
  void read_upstream(zmq::socket_t& socket);
  Status forward(Rank dst, const std::string& bytes);
  void on_monitor_event();
  void parent_lost();
  void detour_to(Rank ancestor);
  void back_to_parent();
  // Where a link to `rank` connects: every candidate's address for rank 0.
  std::vector<std::string> addresses_of(Rank rank) const;
  bool several_leaders() const { return config_.leader_endpoints.size() > 1; }
  // A DEALER towards rank 0's candidates: sends only over made connections,
  // and heartbeats drop a silent one.
  void prepare_for_leaders(zmq::socket_t& socket) const;
  bool parent_connected() const { return !parent_connections_.empty(); }
  Status send_down(Rank child, const std::string& bytes);
  Status send_up(const std::string& bytes);

  OverlayConfig config_;
  Handler on_message_;
  zmq::context_t context_;
  std::unique_ptr<ZapAuthenticator> zap_;
  std::unique_ptr<zmq::socket_t> router_;  // towards children
  std::unique_ptr<zmq::socket_t> dealer_;  // towards the parent
  // Towards an ancestor while the parent is gone; made once, reconnected.
  std::unique_ptr<zmq::socket_t> detour_;
  std::unique_ptr<zmq::socket_t> monitor_;  // the dealer's connection events
  EventLoop* loop_ = nullptr;
  RerouteHandler on_reroute_;
  RelayHandler on_relay_;
  Rank parent_ = 0;
  Rank upstream_ = 0;
  std::set<std::string> parent_connections_;  // the parent's addresses connected now
  bool parent_was_lost_ = false;              // disconnected since the last handshake
  bool detour_answered_ = false;
  std::uint64_t lost_generation_ = 0;  // invalidates heal timers of an earlier loss
};

std::string routing_id_of(Rank rank);

}  // namespace hpcq::overlay

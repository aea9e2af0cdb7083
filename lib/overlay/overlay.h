// One process's place in the tree overlay (proto/overlay.proto Envelope).
//
// The leader (rank 0) binds a ROUTER; an agent connects a DEALER to its parent
// and, when it has children, binds a ROUTER of its own. All sockets use CURVE:
// servers accept only keys in the allow-list (ZapAuthenticator), clients pin
// their parent's public key. Envelopes are routed hop by hop: down towards
// the child whose subtree holds `dst`, otherwise up to the parent. An interior
// agent relays without interpreting.
//
// Thread: the owning event loop's thread only. Errors: create() fails on bad
// keys or an address in use; send() fails when the next hop is unknown or
// unreachable (ROUTER_MANDATORY), so the caller learns a child is gone.
#pragma once

#include <functional>
#include <map>
#include <memory>
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
  std::vector<std::string> endpoints;  // by rank: where that rank's ROUTER binds
  std::vector<std::string> public_keys;  // by rank: Z85 public key
  CurveKeyPair own_keys;

  // This rank's view of the [[rank]] table of hpcq.toml.
  static OverlayConfig from_cluster(const ClusterConfig& cluster, Rank rank, CurveKeyPair keys);
};

class Overlay {
 public:
  using Handler = std::function<void(Envelope&&)>;

  // Binds/connects and registers the sockets with `loop`; envelopes for this
  // rank are handed to `on_message` on the loop thread.
  static Result<std::unique_ptr<Overlay>> create(OverlayConfig config, EventLoop& loop,
                                                 Handler on_message);
  ~Overlay();

  Status send(Envelope envelope);
  Rank rank() const { return config_.rank; }
  int size() const { return static_cast<int>(config_.endpoints.size()); }
  int refused_connections() const { return zap_ ? zap_->refused() : 0; }

 private:
  Overlay(OverlayConfig config, Handler on_message);
  void on_router_readable();
  void on_dealer_readable();
  void route(Envelope&& envelope, const std::string& bytes);
  Status send_down(Rank child, const std::string& bytes);
  Status send_up(const std::string& bytes);

  OverlayConfig config_;
  Handler on_message_;
  zmq::context_t context_;
  std::unique_ptr<ZapAuthenticator> zap_;
  std::unique_ptr<zmq::socket_t> router_;  // towards children
  std::unique_ptr<zmq::socket_t> dealer_;  // towards the parent
};

std::string routing_id_of(Rank rank);

}  // namespace hpcq::overlay

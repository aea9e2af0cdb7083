#include "lib/overlay/overlay.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "lib/overlay/tree.h"

namespace hpcq::overlay {

std::string routing_id_of(Rank rank) { return "rank-" + std::to_string(rank); }

OverlayConfig OverlayConfig::from_cluster(const ClusterConfig& cluster, Rank rank,
                                          CurveKeyPair keys) {
  OverlayConfig config;
  config.rank = rank;
  config.fanout = cluster.fanout;
  for (const auto& r : cluster.ranks) {
    config.endpoints.push_back(r.endpoint);
    config.public_keys.push_back(r.public_key);
  }
  config.leader_endpoints =
      cluster.ranks.empty() ? std::vector<std::string>{} : cluster.ranks.front().endpoints;
  config.own_keys = std::move(keys);
  // Two missed heartbeats: well before the leader calls the node unresponsive.
  config.heal_after_ms = 2 * cluster.heartbeat_interval_ms;
  config.leader_timeout_ms = 3 * cluster.heartbeat_interval_ms;
  return config;
}

Overlay::Overlay(OverlayConfig config, Handler on_message)
    : config_(std::move(config)), on_message_(std::move(on_message)), context_(1) {}

Overlay::~Overlay() {
  router_.reset();
  dealer_.reset();
  zap_.reset();
  context_.shutdown();
}

Result<std::unique_ptr<Overlay>> Overlay::create(OverlayConfig config, EventLoop& loop,
                                                 Handler on_message) {
  const int size = static_cast<int>(config.endpoints.size());
  if (config.rank >= static_cast<Rank>(size)) {
    return invalid_argument("overlay: rank " + std::to_string(config.rank) + " is not below size " +
                            std::to_string(size));
  }
  if (config.public_keys.size() != config.endpoints.size()) {
    return invalid_argument("overlay: every rank needs an endpoint and a public key");
  }
  if (config.fanout < 1) return invalid_argument("overlay: fanout must be >= 1");
  std::unique_ptr<Overlay> self(new Overlay(std::move(config), std::move(on_message)));
  const OverlayConfig& cfg = self->config_;
  try {
    bool has_children = !children_of(cfg.rank, cfg.fanout, size).empty();
    if (cfg.rank == 0 || has_children) {
      std::map<std::string, std::string> allowed;
      for (int r = 1; r < size; ++r) allowed[cfg.public_keys[r]] = "rank " + std::to_string(r);
      self->zap_ = std::make_unique<ZapAuthenticator>(self->context_, std::move(allowed));
      auto router = std::make_unique<zmq::socket_t>(self->context_, zmq::socket_type::router);
      router->set(zmq::sockopt::curve_server, 1);
      router->set(zmq::sockopt::curve_secretkey, cfg.own_keys.secret_key);
      router->set(zmq::sockopt::zap_domain, "hpcq");
      router->set(zmq::sockopt::router_mandatory, 1);
      router->set(zmq::sockopt::router_handover, 1);
      router->set(zmq::sockopt::linger, 0);
      router->set(zmq::sockopt::sndhwm, 0);
      router->set(zmq::sockopt::rcvhwm, 0);
      router->bind(cfg.endpoints[cfg.rank]);
      self->router_ = std::move(router);
    }
    if (cfg.rank != 0) {
      Rank parent = parent_of(cfg.rank, cfg.fanout);
      auto dealer = std::make_unique<zmq::socket_t>(self->context_, zmq::socket_type::dealer);
      dealer->set(zmq::sockopt::routing_id, routing_id_of(cfg.rank));
      dealer->set(zmq::sockopt::curve_serverkey, cfg.public_keys[parent]);
      dealer->set(zmq::sockopt::curve_publickey, cfg.own_keys.public_key);
      dealer->set(zmq::sockopt::curve_secretkey, cfg.own_keys.secret_key);
      dealer->set(zmq::sockopt::linger, 0);
      dealer->set(zmq::sockopt::sndhwm, 0);
      dealer->set(zmq::sockopt::rcvhwm, 0);
      dealer->set(zmq::sockopt::reconnect_ivl, 100);
      dealer->set(zmq::sockopt::reconnect_ivl_max, 2000);
      // Connection events of the link to the parent, for healing.
      const std::string monitor_address = "inproc://hpcq-parent-monitor";
      if (zmq_socket_monitor(dealer->handle(), monitor_address.c_str(),
                             ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED) != 0) {
        return unavailable("overlay: cannot monitor the parent connection");
      }
      auto monitor = std::make_unique<zmq::socket_t>(self->context_, zmq::socket_type::pair);
      monitor->connect(monitor_address);
      if (parent == 0) self->prepare_for_leaders(*dealer);
      for (const std::string& address : self->addresses_of(parent)) dealer->connect(address);
      self->dealer_ = std::move(dealer);
      self->monitor_ = std::move(monitor);
      self->parent_ = parent;
      self->upstream_ = parent;
    }
  } catch (const zmq::error_t& e) {
    return unavailable("overlay rank " + std::to_string(cfg.rank) + " (" + cfg.endpoints[cfg.rank] +
                       "): " + e.what());
  }
  Overlay* raw = self.get();
  self->loop_ = &loop;
  if (self->router_) loop.watch_socket(*self->router_, [raw] { raw->on_router_readable(); });
  if (self->dealer_) loop.watch_socket(*self->dealer_, [raw] { raw->on_dealer_readable(); });
  if (self->monitor_) loop.watch_socket(*self->monitor_, [raw] { raw->on_monitor_event(); });
  return self;
}

std::vector<std::string> Overlay::addresses_of(Rank rank) const {
  if (rank == 0 && several_leaders()) return config_.leader_endpoints;
  return {config_.endpoints[rank]};
}

void Overlay::prepare_for_leaders(zmq::socket_t& socket) const {
  if (!several_leaders()) return;
  // Otherwise a DEALER deals messages round-robin to every address,
  // connected or not: most would wait for candidates that do not lead.
  socket.set(zmq::sockopt::immediate, 1);
  // A frozen leader's TCP connection stays up; its silence drops it.
  socket.set(zmq::sockopt::heartbeat_ivl, std::max(100, config_.leader_timeout_ms / 3));
  socket.set(zmq::sockopt::heartbeat_timeout, config_.leader_timeout_ms);
}

void Overlay::on_monitor_event() {
  while (true) {
    zmq::message_t event;
    if (!monitor_->recv(event, zmq::recv_flags::dontwait)) return;
    zmq::message_t address;
    if (event.more()) (void)monitor_->recv(address, zmq::recv_flags::dontwait);
    if (event.size() < sizeof(std::uint16_t)) continue;
    std::uint16_t id = 0;
    std::memcpy(&id, event.data(), sizeof id);
    if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
      // Another of rank 0's candidates while one is connected: a new leader.
      const bool another = !parent_connections_.empty();
      parent_connections_.insert(address.to_string());
      if (upstream_ != parent_) {
        back_to_parent();
      } else if ((parent_was_lost_ || another) && on_reroute_) {
        // Back before a detour: what was queued for the old connection is
        // gone all the same.
        on_reroute_(parent_);
      }
      parent_was_lost_ = false;
    } else if (id == ZMQ_EVENT_DISCONNECTED && parent_connections_.erase(address.to_string())) {
      if (!parent_connections_.empty()) {
        // One of rank 0's candidates gone, another still connected: what
        // went to the gone one is lost; say Hello to the one left.
        if (on_reroute_) on_reroute_(parent_);
        continue;
      }
      parent_was_lost_ = true;
      parent_lost();
    }
  }
}

void Overlay::parent_lost() {
  spdlog::warn("overlay: lost the connection to parent rank {}", parent_);
  // The leader has no stand-in: its children just reconnect to it.
  if (parent_ == 0) return;
  const std::uint64_t generation = ++lost_generation_;
  loop_->run_after(std::chrono::milliseconds(config_.heal_after_ms), [this, generation] {
    if (generation != lost_generation_ || parent_connected()) return;
    detour_to(parent_of(parent_, config_.fanout));
  });
}

void Overlay::detour_to(Rank ancestor) {
  try {
    if (!detour_) {
      detour_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::dealer);
      detour_->set(zmq::sockopt::routing_id, routing_id_of(config_.rank));
      detour_->set(zmq::sockopt::curve_publickey, config_.own_keys.public_key);
      detour_->set(zmq::sockopt::curve_secretkey, config_.own_keys.secret_key);
      detour_->set(zmq::sockopt::linger, 0);
      detour_->set(zmq::sockopt::sndhwm, 0);
      detour_->set(zmq::sockopt::rcvhwm, 0);
      detour_->set(zmq::sockopt::reconnect_ivl, 100);
      prepare_for_leaders(*detour_);
      Overlay* raw = this;
      loop_->watch_socket(*detour_, [raw] { raw->on_detour_readable(); });
    } else if (upstream_ != parent_) {
      for (const std::string& address : addresses_of(upstream_)) detour_->disconnect(address);
    }
    // The server key applies to the connections made after it is set.
    detour_->set(zmq::sockopt::curve_serverkey, config_.public_keys[ancestor]);
    for (const std::string& address : addresses_of(ancestor)) detour_->connect(address);
  } catch (const zmq::error_t& e) {
    spdlog::error("overlay: cannot detour to rank {}: {}", ancestor, e.what());
    return;
  }
  upstream_ = ancestor;
  spdlog::warn("overlay: parent rank {} is gone; sending through rank {} meanwhile", parent_,
               ancestor);
  if (on_reroute_) on_reroute_(ancestor);
  // If that one does not answer either, go one level higher after a while.
  if (ancestor != 0) {
    const std::uint64_t generation = lost_generation_;
    loop_->run_after(
        std::chrono::milliseconds(config_.heal_after_ms), [this, generation, ancestor] {
          if (generation != lost_generation_ || parent_connected() || upstream_ != ancestor) return;
          if (detour_answered_) return;
          detour_to(parent_of(ancestor, config_.fanout));
        });
  }
  detour_answered_ = false;
}

void Overlay::back_to_parent() {
  ++lost_generation_;
  if (detour_) {
    for (const std::string& address : addresses_of(upstream_)) {
      try {
        detour_->disconnect(address);
      } catch (const zmq::error_t&) {
        // Already disconnected: nothing to undo.
      }
    }
  }
  spdlog::info("overlay: parent rank {} is back; sending through it again", parent_);
  upstream_ = parent_;
  if (on_reroute_) on_reroute_(parent_);
}

void Overlay::on_router_readable() {
  while (true) {
    zmq::message_t id;
    zmq::message_t payload;
    if (!router_->recv(id, zmq::recv_flags::dontwait)) return;
    if (!id.more() || !router_->recv(payload, zmq::recv_flags::dontwait)) continue;
    while (payload.more()) {  // a well-behaved peer sends one frame; drop any extra
      zmq::message_t extra;
      if (!router_->recv(extra, zmq::recv_flags::dontwait)) break;
    }
    Envelope envelope;
    if (!envelope.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
      spdlog::warn("overlay: dropped an unparsable message from {}", id.to_string());
      continue;
    }
    route(std::move(envelope), payload.to_string());
  }
}

void Overlay::on_dealer_readable() { read_upstream(*dealer_); }

void Overlay::on_detour_readable() {
  detour_answered_ = true;
  read_upstream(*detour_);
}

void Overlay::read_upstream(zmq::socket_t& socket) {
  while (true) {
    zmq::message_t payload;
    if (!socket.recv(payload, zmq::recv_flags::dontwait)) return;
    Envelope envelope;
    if (!envelope.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
      spdlog::warn("overlay: dropped an unparsable message from the parent");
      continue;
    }
    route(std::move(envelope), payload.to_string());
  }
}

void Overlay::route(Envelope&& envelope, const std::string& bytes) {
  if (envelope.dst() == config_.rank) {
    on_message_(std::move(envelope));
    return;
  }
  if (on_relay_ && on_relay_(envelope)) return;
  Status status = forward(envelope.dst(), bytes);
  if (!status.is_ok()) {
    spdlog::debug("overlay: cannot relay a message from rank {} to rank {}: {}", envelope.src(),
                  envelope.dst(), status.message());
  }
}

Status Overlay::send(Envelope envelope) {
  envelope.set_src(config_.rank);
  std::string bytes = envelope.SerializeAsString();
  if (envelope.dst() == config_.rank) {
    on_message_(std::move(envelope));
    return Status::ok();
  }
  return forward(envelope.dst(), bytes);
}

Status Overlay::forward(Rank dst, const std::string& bytes) {
  const std::vector<Rank> path = path_down(config_.rank, dst, config_.fanout);
  if (path.empty()) return send_up(bytes);
  // The child on the way first; if it is gone, a deeper rank of the path that
  // attached here while it is away.
  Status status = Status::ok();
  for (Rank hop : path) {
    status = send_down(hop, bytes);
    if (status.is_ok()) return status;
  }
  return status;
}

Status Overlay::send_down(Rank child, const std::string& bytes) {
  if (!router_) return unavailable("rank " + std::to_string(config_.rank) + " has no children");
  try {
    std::string id = routing_id_of(child);
    if (!router_->send(zmq::buffer(id), zmq::send_flags::sndmore | zmq::send_flags::dontwait) ||
        !router_->send(zmq::buffer(bytes), zmq::send_flags::dontwait)) {
      return unavailable("rank " + std::to_string(child) + " is not accepting messages");
    }
  } catch (const zmq::error_t& e) {
    return unavailable("rank " + std::to_string(child) + " is not connected (" + e.what() + ")");
  }
  return Status::ok();
}

Status Overlay::send_up(const std::string& bytes) {
  if (!dealer_) return unavailable("the leader has no parent");
  zmq::socket_t& up = upstream_ == parent_ || !detour_ ? *dealer_ : *detour_;
  try {
    if (!up.send(zmq::buffer(bytes), zmq::send_flags::dontwait)) {
      return unavailable("the parent is not accepting messages");
    }
  } catch (const zmq::error_t& e) {
    return unavailable(std::string("cannot send to the parent: ") + e.what());
  }
  return Status::ok();
}

}  // namespace hpcq::overlay

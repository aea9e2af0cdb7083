#include "lib/overlay/overlay.h"

#include <spdlog/spdlog.h>

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
  config.own_keys = std::move(keys);
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
      dealer->connect(cfg.endpoints[parent]);
      self->dealer_ = std::move(dealer);
    }
  } catch (const zmq::error_t& e) {
    return unavailable("overlay rank " + std::to_string(cfg.rank) + " (" +
                       cfg.endpoints[cfg.rank] + "): " + e.what());
  }
  Overlay* raw = self.get();
  if (self->router_) loop.watch_socket(*self->router_, [raw] { raw->on_router_readable(); });
  if (self->dealer_) loop.watch_socket(*self->dealer_, [raw] { raw->on_dealer_readable(); });
  return self;
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

void Overlay::on_dealer_readable() {
  while (true) {
    zmq::message_t payload;
    if (!dealer_->recv(payload, zmq::recv_flags::dontwait)) return;
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
  auto child = next_hop_down(config_.rank, envelope.dst(), config_.fanout);
  Status status = child ? send_down(*child, bytes) : send_up(bytes);
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
  auto child = next_hop_down(config_.rank, envelope.dst(), config_.fanout);
  return child ? send_down(*child, bytes) : send_up(bytes);
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
  try {
    if (!dealer_->send(zmq::buffer(bytes), zmq::send_flags::dontwait)) {
      return unavailable("the parent is not accepting messages");
    }
  } catch (const zmq::error_t& e) {
    return unavailable(std::string("cannot send to the parent: ") + e.what());
  }
  return Status::ok();
}

}  // namespace hpcq::overlay

#include "lib/overlay/zap_authenticator.h"

#include <spdlog/spdlog.h>

#include <set>
#include <vector>

namespace hpcq::overlay {

ZapAuthenticator::ZapAuthenticator(zmq::context_t& context,
                                   std::map<std::string, std::string> allowed)
    : allowed_(std::move(allowed)) {
  // Bound here, not on the thread, so that the handler exists before any
  // CURVE server socket accepts a connection.
  zmq::socket_t socket(context, zmq::socket_type::rep);
  socket.set(zmq::sockopt::linger, 0);
  socket.bind("inproc://zeromq.zap.01");
  thread_ = std::thread([this, s = std::move(socket)]() mutable { serve(std::move(s)); });
}

ZapAuthenticator::~ZapAuthenticator() {
  stop_ = true;
  thread_.join();
}

void ZapAuthenticator::serve(zmq::socket_t socket) {
  socket.set(zmq::sockopt::rcvtimeo, 100);  // to notice stop_
  std::set<std::string> logged;
  while (!stop_) {
    std::vector<zmq::message_t> frames;
    try {
      while (true) {
        zmq::message_t frame;
        if (!socket.recv(frame)) break;
        bool more = frame.more();
        frames.push_back(std::move(frame));
        if (!more) break;
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      spdlog::error("zap: receive failed: {}", e.what());
      continue;
    }
    if (frames.empty()) continue;
    // Request: version, request id, domain, address, routing id, mechanism, credentials...
    std::string version = frames.size() > 0 ? frames[0].to_string() : "";
    std::string request_id = frames.size() > 1 ? frames[1].to_string() : "";
    std::string address = frames.size() > 3 ? frames[3].to_string() : "?";
    std::string mechanism = frames.size() > 5 ? frames[5].to_string() : "";
    std::string status = "400";
    std::string status_text = "key not allowed";
    std::string user_id;
    if (version == "1.0" && mechanism == "CURVE" && frames.size() > 6 && frames[6].size() == 32) {
      char z85[41];
      zmq_z85_encode(z85, frames[6].data<uint8_t>(), 32);
      auto it = allowed_.find(z85);
      if (it != allowed_.end()) {
        status = "200";
        status_text = "OK";
        user_id = it->second;
      } else {
        ++refused_;
        // A refused peer retries every few hundred ms: log each key once.
        if (logged.insert(z85).second) {
          spdlog::warn(
              "overlay: refused connection from {}: CURVE public key {} is not in the "
              "allow-list",
              address, z85);
        }
      }
    } else {
      ++refused_;
      spdlog::warn("overlay: refused connection from {}: mechanism '{}' is not CURVE", address,
                   mechanism);
    }
    std::vector<std::string> reply = {"1.0", request_id, status, status_text, user_id, ""};
    try {
      for (size_t i = 0; i < reply.size(); ++i) {
        socket.send(zmq::buffer(reply[i]),
                    i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      spdlog::error("zap: reply failed: {}", e.what());
    }
  }
}

}  // namespace hpcq::overlay

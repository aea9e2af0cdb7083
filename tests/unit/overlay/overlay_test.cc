// The tree overlay over real ZeroMQ sockets on loopback, with CURVE: messages
// cross a depth-2 tree in both directions through an interior relay, and a
// peer whose key is not in the allow-list is refused.
#include "lib/overlay/overlay.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include <atomic>
#include <chrono>
#include <future>
#include <set>
#include <thread>

#include "lib/overlay/tree.h"

namespace hpcq::overlay {
namespace {

TEST(TreeTest, ParentsAndChildren) {
  EXPECT_EQ(parent_of(1, 2), 0u);
  EXPECT_EQ(parent_of(2, 2), 0u);
  EXPECT_EQ(parent_of(3, 2), 1u);
  EXPECT_EQ(parent_of(6, 2), 2u);
  EXPECT_EQ(children_of(1, 2, 5), (std::vector<Rank>{3, 4}));
  EXPECT_EQ(children_of(2, 2, 5), (std::vector<Rank>{}));
  EXPECT_EQ(children_of(0, 16, 5), (std::vector<Rank>{1, 2, 3, 4}));
  EXPECT_EQ(next_hop_down(0, 4, 2), std::optional<Rank>(1));
  EXPECT_EQ(next_hop_down(1, 4, 2), std::optional<Rank>(4));
  EXPECT_EQ(next_hop_down(2, 4, 2), std::nullopt);
  EXPECT_EQ(next_hop_down(0, 0, 2), std::nullopt);
  EXPECT_EQ(path_down(0, 9, 2), (std::vector<Rank>{1, 4, 9}));
  EXPECT_EQ(path_down(1, 9, 2), (std::vector<Rank>{4, 9}));
  EXPECT_EQ(path_down(4, 9, 2), (std::vector<Rank>{9}));
  EXPECT_TRUE(path_down(2, 9, 2).empty());
  EXPECT_TRUE(path_down(9, 9, 2).empty());
}

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// One overlay member with its own loop thread; received envelopes are queued.
class Member {
 public:
  Member(OverlayConfig config) {
    std::promise<Status> created;
    thread_ = std::thread([&, config] {
      auto overlay = Overlay::create(config, loop_, [this](Envelope&& e) {
        std::lock_guard lock(mutex_);
        received_.push_back(std::move(e));
      });
      if (!overlay.is_ok()) {
        created.set_value(overlay.status());
        return;
      }
      overlay_ = std::move(overlay).value();
      created.set_value(Status::ok());
      loop_.run();
      overlay_.reset();
    });
    status_ = created.get_future().get();
  }
  ~Member() {
    loop_.stop();
    thread_.join();
  }
  Status status() const { return status_; }
  void send(Envelope e) {
    loop_.post([this, e = std::move(e)]() mutable { (void)overlay_->send(std::move(e)); });
  }
  // Waits up to `tries` x 10 ms for a received envelope.
  std::optional<Envelope> next(int tries = 1000) {
    for (int i = 0; i < tries; ++i) {
      {
        std::lock_guard lock(mutex_);
        if (!received_.empty()) {
          Envelope e = received_.front();
          received_.erase(received_.begin());
          return e;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return std::nullopt;
  }
  int refused() {
    std::promise<int> p;
    loop_.post([&] { p.set_value(overlay_->refused_connections()); });
    return p.get_future().get();
  }

 private:
  EventLoop loop_;
  std::unique_ptr<Overlay> overlay_;
  std::thread thread_;
  Status status_;
  std::mutex mutex_;
  std::vector<Envelope> received_;
};

struct Cluster {
  std::vector<CurveKeyPair> keys;
  OverlayConfig base;
  explicit Cluster(int size, int fanout) {
    base.fanout = fanout;
    for (int r = 0; r < size; ++r) {
      keys.push_back(*generate_key_pair());
      base.endpoints.push_back("tcp://127.0.0.1:" + std::to_string(free_port()));
      base.public_keys.push_back(keys.back().public_key);
    }
  }
  OverlayConfig config(Rank rank, const CurveKeyPair* keys_override = nullptr) const {
    OverlayConfig c = base;
    c.rank = rank;
    c.own_keys = keys_override ? *keys_override : keys[rank];
    return c;
  }
};

Envelope heartbeat(Rank dst, std::int64_t t) {
  Envelope e;
  e.set_dst(dst);
  e.mutable_heartbeat()->set_time_us(t);
  return e;
}

TEST(OverlayTest, MessagesCrossADepthTwoTreeBothWays) {
  Cluster cluster(3, 1);  // 0 <- 1 <- 2: rank 1 relays for rank 2
  Member leader(cluster.config(0));
  Member interior(cluster.config(1));
  Member leaf(cluster.config(2));
  ASSERT_TRUE(leader.status().is_ok()) << leader.status().message();
  ASSERT_TRUE(interior.status().is_ok()) << interior.status().message();
  ASSERT_TRUE(leaf.status().is_ok()) << leaf.status().message();

  leaf.send(heartbeat(0, 42));
  auto up = leader.next();
  ASSERT_TRUE(up.has_value());
  EXPECT_EQ(up->src(), 2u);
  EXPECT_EQ(up->heartbeat().time_us(), 42);

  // The leader can reach rank 2 only once rank 1 has connected; retry until it does.
  std::optional<Envelope> down;
  for (int i = 0; i < 20 && !down; ++i) {
    leader.send(heartbeat(2, 7));
    down = leaf.next();
  }
  ASSERT_TRUE(down.has_value());
  EXPECT_EQ(down->src(), 0u);
  EXPECT_EQ(down->heartbeat().time_us(), 7);
  EXPECT_EQ(leader.refused(), 0);
}

// Sends `e` from `from` until `to` receives one (connections take a moment).
std::optional<Envelope> deliver(Member& from, Member& to, const Envelope& e, int tries = 100) {
  for (int i = 0; i < tries; ++i) {
    from.send(e);
    if (auto got = to.next(5)) return got;
  }
  return std::nullopt;
}

TEST(OverlayTest, TheTreeHealsAroundADeadInteriorRankAndMendsWhenItReturns) {
  Cluster cluster(3, 1);  // 0 <- 1 <- 2
  cluster.base.heal_after_ms = 200;
  Member leader(cluster.config(0));
  auto interior = std::make_unique<Member>(cluster.config(1));
  Member leaf(cluster.config(2));
  ASSERT_TRUE(deliver(leaf, leader, heartbeat(0, 1)).has_value());
  ASSERT_TRUE(deliver(leader, leaf, heartbeat(2, 2)).has_value());

  interior.reset();  // rank 1 dies
  // Within a few heal intervals rank 2 talks to the leader directly, both ways.
  auto up = deliver(leaf, leader, heartbeat(0, 3), 300);
  ASSERT_TRUE(up.has_value()) << "rank 2 did not reach the leader around rank 1";
  EXPECT_EQ(up->src(), 2u);
  auto down = deliver(leader, leaf, heartbeat(2, 4), 300);
  ASSERT_TRUE(down.has_value()) << "the leader did not reach rank 2 around rank 1";

  interior = std::make_unique<Member>(cluster.config(1));  // rank 1 comes back
  ASSERT_TRUE(interior->status().is_ok()) << interior->status().message();
  // Traffic flows again, and rank 1 relays it: its own ROUTER sees rank 2.
  ASSERT_TRUE(deliver(leaf, leader, heartbeat(0, 5), 300).has_value());
  ASSERT_TRUE(deliver(leader, leaf, heartbeat(2, 6), 300).has_value());
  ASSERT_TRUE(deliver(leaf, *interior, heartbeat(1, 7), 300).has_value());
}

TEST(OverlayTest, AgentsFollowTheLeaderToAnotherCandidatesAddress) {
  Cluster cluster(3, 1);  // 0 <- 1 <- 2, rank 0 with two candidates' addresses
  cluster.base.leader_timeout_ms = 600;
  cluster.base.heal_after_ms = 200;
  const std::string first = cluster.base.endpoints[0];
  const std::string second = "tcp://127.0.0.1:" + std::to_string(free_port());
  cluster.base.leader_endpoints = {first, second};
  auto leader = std::make_unique<Member>(cluster.config(0));
  Member child(cluster.config(1));
  Member grandchild(cluster.config(2));
  ASSERT_TRUE(deliver(child, *leader, heartbeat(0, 1)).has_value());
  ASSERT_TRUE(deliver(grandchild, *leader, heartbeat(0, 2)).has_value());

  leader.reset();  // the leader dies; another candidate leads at its own address
  OverlayConfig other = cluster.config(0);
  other.endpoints[0] = second;
  leader = std::make_unique<Member>(other);
  ASSERT_TRUE(leader->status().is_ok()) << leader->status().message();
  ASSERT_TRUE(deliver(child, *leader, heartbeat(0, 5), 300).has_value())
      << "rank 1 did not reach the new leader";
  // Every message reaches it now: none is dealt to the dead address.
  for (int i = 0; i < 20; ++i) child.send(heartbeat(0, 100 + i));
  std::set<std::int64_t> arrived;
  while (auto e = leader->next(100)) {
    if (e->heartbeat().time_us() >= 100) arrived.insert(e->heartbeat().time_us());
    if (arrived.size() == 20) break;
  }
  EXPECT_EQ(arrived.size(), 20u);
  ASSERT_TRUE(deliver(*leader, grandchild, heartbeat(2, 3), 300).has_value());
  ASSERT_TRUE(deliver(grandchild, *leader, heartbeat(0, 4), 300).has_value());
}

TEST(OverlayTest, UnlistedKeyIsRefused) {
  Cluster cluster(2, 16);
  Member leader(cluster.config(0));
  ASSERT_TRUE(leader.status().is_ok());
  CurveKeyPair rogue = *generate_key_pair();
  Member agent(cluster.config(1, &rogue));
  ASSERT_TRUE(agent.status().is_ok());
  agent.send(heartbeat(0, 1));
  for (int i = 0; i < 500 && leader.refused() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GT(leader.refused(), 0);
  // Nothing from the rogue reaches the leader.
  EXPECT_FALSE(leader.next(/*tries=*/50).has_value());
}

TEST(CurveKeysTest, Z85IsZeroMqsEncoding) {
  // The example of ZeroMQ's RFC 32.
  const unsigned char hello[] = {0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B};
  EXPECT_EQ(z85_encode(hello, sizeof hello), "HelloWorld");
  EXPECT_EQ(z85_decode("HelloWorld"), std::string(reinterpret_cast<const char*>(hello), 8));
  EXPECT_FALSE(z85_decode("HelloWorl").has_value());   // not a multiple of 5
  EXPECT_FALSE(z85_decode("Hello~orld").has_value());  // not a digit
  EXPECT_FALSE(z85_decode("#####").has_value());       // over 2^32
  // A generated pair decodes as libzmq decodes it, and its public key is
  // the one libzmq derives from its secret key.
  CurveKeyPair keys = *generate_key_pair();
  ASSERT_TRUE(is_valid_z85_key(keys.public_key) && is_valid_z85_key(keys.secret_key));
  unsigned char raw[32];
  ASSERT_NE(zmq_z85_decode(raw, keys.public_key.c_str()), nullptr);
  EXPECT_EQ(*z85_decode(keys.public_key), std::string(reinterpret_cast<const char*>(raw), 32));
  char derived[41];
  ASSERT_EQ(zmq_curve_public(derived, keys.secret_key.c_str()), 0);
  EXPECT_EQ(keys.public_key, derived);
}

TEST(CurveKeysTest, WriteReadAndPermissions) {
  char dir[] = "/tmp/hpcq-keys-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string path = std::string(dir) + "/k.key";
  CurveKeyPair keys = *generate_key_pair();
  ASSERT_TRUE(write_key_file(path, keys).is_ok());
  auto read = read_key_file(path, true);
  ASSERT_TRUE(read.is_ok()) << read.status().message();
  EXPECT_EQ(read->public_key, keys.public_key);
  EXPECT_EQ(read->secret_key, keys.secret_key);
  chmod(path.c_str(), 0644);
  auto refused = read_key_file(path, true);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), Code::kPermissionDenied);
  EXPECT_NE(refused.status().message().find("readable by others"), std::string::npos);
  EXPECT_FALSE(read_key_file(std::string(dir) + "/missing", false).is_ok());
}

}  // namespace
}  // namespace hpcq::overlay

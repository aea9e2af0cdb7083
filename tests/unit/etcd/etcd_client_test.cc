// EtcdClient against a real single-member etcd (etcd_server.h), started
// once for the suite; without etcd those tests show as skipped. prefix_end, argument
// checks and dead endpoints need no etcd.
#include "lib/etcd/etcd_client.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/etcd/etcd_server.h"

// gRPC's TLS handshaker sometimes leaves OpenSSL's objects of a handshake
// cut off at shutdown unfreed (gRPC frees its own): LeakSanitizer failed this
// binary at exit in 1 of some 23 runs, every leaked block allocated in
// libcrypto. Nothing here calls OpenSSL; leaks of anything else still fail.
extern "C" const char* __lsan_default_suppressions() { return "leak:libcrypto.so\n"; }

namespace hpcq::etcd {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

using testing::EtcdServer;
using testing::Socket;

// A port that nothing listens on: connections to it are refused.
std::string refused_endpoint() { return Socket().endpoint(); }

class EtcdClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new EtcdServer();
    endpoint_ = server_->endpoint();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { HPCQ_NEED_ETCD(*server_); }

  static EtcdClient client(EtcdClient::Options options = {}) { return server_->client(options); }

  static inline EtcdServer* server_ = nullptr;
  static inline std::string endpoint_;
};

TEST(PrefixEnd, IncrementsTheLastByteBelow0xff) {
  EXPECT_EQ(prefix_end("a"), "b");
  EXPECT_EQ(prefix_end("jobs/"), "jobs0");
  EXPECT_EQ(prefix_end("a\xfe"), "a\xff");
  EXPECT_EQ(prefix_end(std::string("a\0", 2)), std::string("a\x01", 2));
  // Trailing 0xff bytes are dropped: "a\xff..." < "b".
  EXPECT_EQ(prefix_end("a\xff"), "b");
  EXPECT_EQ(prefix_end("a\xff\xff"), "b");
  EXPECT_EQ(prefix_end("\x01\xff"), "\x02");
}

TEST(PrefixEnd, NoUpperBoundGivesAllKeysFromTheStart) {
  const std::string from_key(1, '\0');
  EXPECT_EQ(prefix_end(""), from_key);
  EXPECT_EQ(prefix_end("\xff"), from_key);
  EXPECT_EQ(prefix_end("\xff\xff\xff"), from_key);
}

TEST(EtcdClientConnect, RefusesMalformedArguments) {
  EXPECT_EQ(EtcdClient::connect({}).status().code(), Code::kInvalidArgument);
  const Status url = EtcdClient::connect({"https://127.0.0.1:2379"}).status();
  EXPECT_EQ(url.code(), Code::kInvalidArgument);
  EXPECT_EQ(url.message().rfind("etcd https://127.0.0.1:2379: connect: ", 0), 0u) << url.message();
  EtcdClient::Options options;
  options.deadline = 0ms;
  EXPECT_EQ(EtcdClient::connect({"127.0.0.1:2379"}, options).status().code(),
            Code::kInvalidArgument);
}

TEST(EtcdClientDead, AllEndpointsDeadIsUnavailableWithinDeadlineTimesEndpoints) {
  Socket silent;
  silent.listen_silently();
  const std::string refused = refused_endpoint();
  EtcdClient::Options options;
  options.deadline = 300ms;
  Result<EtcdClient> c = EtcdClient::connect({refused, silent.endpoint()}, options);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  for (int i = 0; i < 2; ++i) {
    const auto start = Clock::now();
    const Status s = c->put("k", "v").status();
    const auto took = Clock::now() - start;
    EXPECT_EQ(s.code(), Code::kUnavailable) << s.to_string();
    EXPECT_EQ(s.message().rfind("etcd " + refused + "," + silent.endpoint() + ": put 'k': ", 0), 0u)
        << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
    // Down and hung read differently.
    EXPECT_NE(s.message().find(refused + ": cannot connect: "), std::string::npos) << s.message();
    EXPECT_EQ(s.message().find(silent.endpoint() + ": cannot connect"), std::string::npos)
        << s.message();
    EXPECT_LT(took, 2 * options.deadline + 300ms);
  }
}

TEST_F(EtcdClientTest, PutGetErase) {
  EtcdClient c = client();
  EXPECT_FALSE(c.get("t/pge/k")->has_value());
  const Result<std::int64_t> first = c.put("t/pge/k", "v1");
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  Result<std::optional<KeyValue>> kv = c.get("t/pge/k");
  ASSERT_TRUE(kv.is_ok()) << kv.status().to_string();
  ASSERT_TRUE(kv->has_value());
  EXPECT_EQ((*kv)->key, "t/pge/k");
  EXPECT_EQ((*kv)->value, "v1");
  EXPECT_EQ((*kv)->create_revision, *first);
  EXPECT_EQ((*kv)->mod_revision, *first);
  EXPECT_EQ((*kv)->version, 1);
  EXPECT_EQ((*kv)->lease, 0);

  const Result<std::int64_t> second = c.put("t/pge/k", "v2");
  ASSERT_TRUE(second.is_ok());
  EXPECT_GT(*second, *first);
  kv = c.get("t/pge/k");
  EXPECT_EQ((*kv)->value, "v2");
  EXPECT_EQ((*kv)->create_revision, *first);
  EXPECT_EQ((*kv)->mod_revision, *second);
  EXPECT_EQ((*kv)->version, 2);

  // Keys and values are bytes.
  const std::string key("t/pge/\0\xff", 8), value("\0\x01\xfe", 3);
  ASSERT_TRUE(c.put(key, value).is_ok());
  EXPECT_EQ((*c.get(key))->value, value);

  EXPECT_TRUE(c.erase("t/pge/k").is_ok());
  EXPECT_FALSE(c.get("t/pge/k")->has_value());
  EXPECT_TRUE(c.erase("t/pge/k").is_ok());  // not there: not an error
  EXPECT_TRUE((*c.get(key)).has_value());
}

TEST_F(EtcdClientTest, RangeOverPrefixPagesInKeyOrder) {
  EtcdClient::Options options;
  options.page_size = 7;
  EtcdClient c = client(options);
  // Neighbours just outside the prefix on both sides.
  ASSERT_TRUE(c.put("t/range.", "before").is_ok());
  ASSERT_TRUE(c.put("t/range0", "after").is_ok());
  constexpr int kKeys = 30;  // 4 full pages and a part
  for (int i = kKeys - 1; i >= 0; --i) {
    char key[32];
    std::snprintf(key, sizeof key, "t/range/%02d", i);
    ASSERT_TRUE(c.put(key, "v" + std::to_string(i)).is_ok());
  }
  Result<std::vector<KeyValue>> all = c.range("t/range/");
  ASSERT_TRUE(all.is_ok()) << all.status().to_string();
  ASSERT_EQ(all->size(), static_cast<std::size_t>(kKeys));
  for (int i = 0; i < kKeys; ++i) {
    char key[32];
    std::snprintf(key, sizeof key, "t/range/%02d", i);
    EXPECT_EQ((*all)[i].key, key);
    EXPECT_EQ((*all)[i].value, "v" + std::to_string(i));
    EXPECT_GT((*all)[i].create_revision, 0);
    EXPECT_EQ((*all)[i].mod_revision, (*all)[i].create_revision);
  }
  // Exactly one page, and the empty range.
  ASSERT_TRUE(c.erase_prefix("t/range/1").is_ok());
  ASSERT_TRUE(c.erase_prefix("t/range/2").is_ok());
  ASSERT_TRUE(c.erase("t/range/09").is_ok());
  ASSERT_TRUE(c.erase("t/range/08").is_ok());
  ASSERT_TRUE(c.erase("t/range/07").is_ok());
  EXPECT_EQ(c.range("t/range/")->size(), 7u);
  ASSERT_TRUE(c.erase_prefix("t/range/").is_ok());
  EXPECT_TRUE(c.range("t/range/")->empty());
  EXPECT_TRUE(c.get("t/range.")->has_value());
  EXPECT_TRUE(c.get("t/range0")->has_value());
  // "" is every key.
  EXPECT_GE(c.range("")->size(), 2u);
}

TEST_F(EtcdClientTest, TxnGuardedByCreateRevision) {
  EtcdClient c = client();
  const std::string k = "t/txn/k", side = "t/txn/side";
  // Create if absent: succeeds once.
  Txn create;
  create.if_equal(k, Txn::Target::kCreateRevision, 0).put(k, "first");
  const Result<TxnResult> r1 = c.txn(create);
  ASSERT_TRUE(r1.is_ok()) << r1.status().to_string();
  EXPECT_TRUE(r1->succeeded);
  EXPECT_EQ((*c.get(k))->create_revision, r1->revision);

  Txn again = create;
  again.put(side, "x");
  const Result<TxnResult> r2 = c.txn(again);
  ASSERT_TRUE(r2.is_ok()) << r2.status().to_string();
  EXPECT_FALSE(r2->succeeded);
  EXPECT_EQ(r2->revision, r1->revision);  // nothing written
  EXPECT_EQ((*c.get(k))->value, "first");
  EXPECT_FALSE(c.get(side)->has_value());

  // Guarded by this incarnation of the key: holds until it is recreated.
  Txn guarded;
  guarded.if_equal(k, Txn::Target::kCreateRevision, r1->revision)
      .if_not_equal(k, Txn::Target::kVersion, 0)
      .put(k, "second")
      .put(side, "y");
  const Result<TxnResult> r3 = c.txn(guarded);
  ASSERT_TRUE(r3.is_ok()) << r3.status().to_string();
  EXPECT_TRUE(r3->succeeded);
  EXPECT_GT(r3->revision, r1->revision);
  EXPECT_EQ((*c.get(k))->value, "second");
  EXPECT_EQ((*c.get(side))->value, "y");

  ASSERT_TRUE(c.erase(k).is_ok());
  ASSERT_TRUE(c.put(k, "recreated").is_ok());
  Txn stale;
  stale.if_equal(k, Txn::Target::kCreateRevision, r1->revision).put(k, "stale").erase(side);
  const Result<TxnResult> r4 = c.txn(stale);
  ASSERT_TRUE(r4.is_ok()) << r4.status().to_string();
  EXPECT_FALSE(r4->succeeded);
  EXPECT_EQ((*c.get(k))->value, "recreated");
  EXPECT_EQ((*c.get(side))->value, "y");

  // Value compares and a prefix delete.
  Txn by_value;
  by_value.if_value_equal(k, "recreated").if_value_not_equal(side, "z").erase_prefix("t/txn/");
  EXPECT_TRUE(c.txn(by_value)->succeeded);
  EXPECT_TRUE(c.range("t/txn/")->empty());
}

TEST_F(EtcdClientTest, TxnGuardedByLease) {
  EtcdClient c = client();
  const Result<Lease> lease = c.grant(30);
  ASSERT_TRUE(lease.is_ok()) << lease.status().to_string();
  ASSERT_TRUE(c.put("t/tl/owner", "me", lease->id).is_ok());
  Txn guarded;
  guarded.if_equal("t/tl/owner", Txn::Target::kLease, lease->id).put("t/tl/data", "1");
  Result<TxnResult> r = c.txn(guarded);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_TRUE(r->succeeded);
  ASSERT_TRUE(c.revoke(lease->id).is_ok());
  guarded.ops.front().value = "2";
  r = c.txn(guarded);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_FALSE(r->succeeded);
  EXPECT_EQ((*c.get("t/tl/data"))->value, "1");
  ASSERT_TRUE(c.erase_prefix("t/tl/").is_ok());
}

TEST_F(EtcdClientTest, LeasedKeyGoesWithRevoke) {
  EtcdClient c = client();
  const Result<Lease> lease = c.grant(30);
  ASSERT_TRUE(lease.is_ok()) << lease.status().to_string();
  EXPECT_NE(lease->id, 0);
  EXPECT_EQ(lease->ttl_seconds, 30);
  ASSERT_TRUE(c.put("t/lr/k", "v", lease->id).is_ok());
  EXPECT_EQ((*c.get("t/lr/k"))->lease, lease->id);
  const Result<std::int64_t> ttl = c.keep_alive_once(lease->id);
  ASSERT_TRUE(ttl.is_ok()) << ttl.status().to_string();
  EXPECT_GT(*ttl, 0);
  EXPECT_LE(*ttl, 30);

  ASSERT_TRUE(c.revoke(lease->id).is_ok());
  EXPECT_FALSE(c.get("t/lr/k")->has_value());
  const Status gone = c.keep_alive_once(lease->id).status();
  EXPECT_EQ(gone.code(), Code::kNotFound) << gone.to_string();
  EXPECT_EQ(gone.message().rfind("etcd " + endpoint_ + ": keep-alive lease ", 0), 0u)
      << gone.message();
  EXPECT_EQ(c.revoke(lease->id).code(), Code::kNotFound);
  EXPECT_EQ(c.put("t/lr/k", "v", lease->id).status().code(), Code::kNotFound);
}

TEST_F(EtcdClientTest, LeasedKeyGoesWhenTheLeaseExpires) {
  EtcdClient c = client();
  const Result<Lease> lease = c.grant(1);  // etcd raises it to its minimum (2 s)
  ASSERT_TRUE(lease.is_ok()) << lease.status().to_string();
  EXPECT_GE(lease->ttl_seconds, 1);
  ASSERT_TRUE(c.put("t/le/k", "v", lease->id).is_ok());
  const auto give_up = Clock::now() + 20s;
  while (c.get("t/le/k")->has_value() && Clock::now() < give_up) {
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_FALSE(c.get("t/le/k")->has_value()) << "the key outlived its lease by 20 s";
  EXPECT_EQ(c.keep_alive_once(lease->id).status().code(), Code::kNotFound);
}

TEST_F(EtcdClientTest, FailsOverToTheNextEndpoint) {
  EtcdClient::Options options;
  options.deadline = 500ms;
  // A member that is down (refused) or hung (never answers): the first try
  // waits out its deadline, the call moves on to the live one, and the next
  // call starts there.
  Socket silent;
  silent.listen_silently();
  for (const std::string& dead : {refused_endpoint(), silent.endpoint()}) {
    Result<EtcdClient> c = EtcdClient::connect({dead, endpoint_}, options);
    ASSERT_TRUE(c.is_ok());
    auto start = Clock::now();
    const Result<std::int64_t> put = c->put("t/fo/k", dead);
    EXPECT_TRUE(put.is_ok()) << put.status().to_string();
    EXPECT_LT(Clock::now() - start, 2 * options.deadline);
    start = Clock::now();
    const Result<std::optional<KeyValue>> kv = c->get("t/fo/k");
    ASSERT_TRUE(kv.is_ok()) << kv.status().to_string();
    EXPECT_EQ((*kv)->value, dead);
    EXPECT_LT(Clock::now() - start, options.deadline);
  }
  EXPECT_TRUE(client().erase("t/fo/k").is_ok());
}

// A CA, and certificates it signed for an etcd on 127.0.0.1 and for a
// client, made with the openssl command in a temporary directory.
class TlsFiles {
 public:
  TlsFiles() {
    char pattern[] = "/tmp/hpcq-etcd-tls-XXXXXX";
    if (mkdtemp(pattern) == nullptr) return;
    dir_ = pattern;
    const std::string in = "cd " + dir_ + " && ";
    const std::string quiet = " >> openssl.log 2>&1";
    std::string script =
        in + "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -keyout ca.key -out ca.pem " +
        "-subj /CN=hpcq-test-ca" + quiet;
    for (const char* name : {"server", "client"}) {
      const std::string n = name;
      script += " && openssl req -newkey rsa:2048 -nodes -keyout " + n + ".key -out " + n +
                ".csr -subj /CN=" + n + quiet + " && echo subjectAltName=IP:127.0.0.1 > " + n +
                ".ext && openssl x509 -req -in " + n + ".csr -CA ca.pem -CAkey ca.key " +
                "-CAcreateserial -days 1 -out " + n + ".pem -extfile " + n + ".ext" + quiet;
    }
    made_ = std::system(script.c_str()) == 0;
  }
  ~TlsFiles() {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  bool made() const { return made_; }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

 private:
  std::string dir_;
  bool made_ = false;
};

TEST(EtcdClientTls, TalksToAnEtcdThatRequiresClientCertificates) {
  if (!EtcdServer::installed()) GTEST_SKIP() << testing::kEtcdPath << " is not installed";
  if (std::system("command -v openssl > /dev/null") != 0) GTEST_SKIP() << "needs openssl";
  TlsFiles files;
  ASSERT_TRUE(files.made()) << "openssl failed: see " << files.path("openssl.log");
  testing::EtcdTls tls;
  tls.cert_file = files.path("server.pem");
  tls.key_file = files.path("server.key");
  tls.client_ca_file = files.path("ca.pem");
  tls.client.ca_file = files.path("ca.pem");
  tls.client.cert_file = files.path("client.pem");
  tls.client.key_file = files.path("client.key");
  EtcdServer server(&tls);
  ASSERT_EQ(server.error(), "");
  EtcdClient c = server.client();
  ASSERT_TRUE(c.put("t/tls", "v").is_ok());
  const Result<std::optional<KeyValue>> kv = c.get("t/tls");
  ASSERT_TRUE(kv.is_ok()) << kv.status().to_string();
  EXPECT_EQ((*kv)->value, "v");

  // Without its certificate, or without TLS, the client is refused, in one line.
  EtcdClient::Options options;
  options.deadline = 500ms;
  options.ca_file = files.path("ca.pem");
  for (bool use_tls : {true, false}) {
    if (!use_tls) options.ca_file.clear();
    Result<EtcdClient> refused = EtcdClient::connect({server.endpoint()}, options);
    ASSERT_TRUE(refused.is_ok()) << refused.status().to_string();
    const Status s = refused->get("t/tls").status();
    EXPECT_EQ(s.code(), Code::kUnavailable) << s.to_string();
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
  }

  // Unreadable or half-given files are refused at connect.
  options.ca_file = files.path("missing.pem");
  const Status missing = EtcdClient::connect({server.endpoint()}, options).status();
  EXPECT_EQ(missing.code(), Code::kInvalidArgument);
  EXPECT_NE(missing.message().find("cannot read the TLS CA file"), std::string::npos)
      << missing.message();
  options.ca_file = files.path("ca.pem");
  options.cert_file = files.path("client.pem");
  EXPECT_EQ(EtcdClient::connect({server.endpoint()}, options).status().code(),
            Code::kInvalidArgument);
}

}  // namespace
}  // namespace hpcq::etcd

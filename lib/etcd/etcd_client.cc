#include "lib/etcd/etcd_client.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <utility>

#include "proto/etcd.grpc.pb.h"

namespace hpcq::etcd {

namespace pb = ::etcdserverpb;

namespace {

// Keys may hold any byte; errors stay one printable line.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (const unsigned char c : s) {
    if (c < 0x20 || c >= 0x7f || c == '\'' || c == '\\') {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "'";
}

// etcdctl shows lease ids in hex; so do we, to match its output and logs.
std::string lease_name(std::int64_t id) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "lease %016" PRIx64, static_cast<std::uint64_t>(id));
  return buf;
}

std::string one_line(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

Code code_of(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::INVALID_ARGUMENT: return Code::kInvalidArgument;
    case grpc::StatusCode::NOT_FOUND: return Code::kNotFound;
    case grpc::StatusCode::ALREADY_EXISTS: return Code::kAlreadyExists;
    case grpc::StatusCode::PERMISSION_DENIED: return Code::kPermissionDenied;
    case grpc::StatusCode::UNAUTHENTICATED: return Code::kUnauthenticated;
    case grpc::StatusCode::FAILED_PRECONDITION: return Code::kFailedPrecondition;
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return Code::kResourceExhausted;
    case grpc::StatusCode::OUT_OF_RANGE: return Code::kOutOfRange;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED: return Code::kUnavailable;
    default: return Code::kInternal;
  }
}

// The member is down, cut off, or has no leader (etcd's "no leader", "leader
// changed", "request timed out" are UNAVAILABLE): another member may answer.
bool try_next(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED;
}

KeyValue from_pb(const pb::KeyValue& kv) {
  return {kv.key(), kv.value(), kv.create_revision(), kv.mod_revision(), kv.version(), kv.lease()};
}

void to_pb(const Txn::Compare& c, pb::Compare* out) {
  out->set_key(c.key);
  out->set_result(c.equal ? pb::Compare::EQUAL : pb::Compare::NOT_EQUAL);
  switch (c.target) {
    case Txn::Target::kValue:
      out->set_target(pb::Compare::VALUE);
      out->set_value(c.value);
      break;
    case Txn::Target::kVersion:
      out->set_target(pb::Compare::VERSION);
      out->set_version(c.number);
      break;
    case Txn::Target::kCreateRevision:
      out->set_target(pb::Compare::CREATE);
      out->set_create_revision(c.number);
      break;
    case Txn::Target::kModRevision:
      out->set_target(pb::Compare::MOD);
      out->set_mod_revision(c.number);
      break;
    case Txn::Target::kLease:
      out->set_target(pb::Compare::LEASE);
      out->set_lease(c.number);
      break;
  }
}

void to_pb(const Txn::Op& op, pb::RequestOp* out) {
  switch (op.kind) {
    case Txn::Op::Kind::kPut: {
      pb::PutRequest* put = out->mutable_request_put();
      put->set_key(op.key);
      put->set_value(op.value);
      put->set_lease(op.lease);
      break;
    }
    case Txn::Op::Kind::kErase: out->mutable_request_delete_range()->set_key(op.key); break;
    case Txn::Op::Kind::kErasePrefix: {
      pb::DeleteRangeRequest* del = out->mutable_request_delete_range();
      del->set_key(op.key.empty() ? std::string(1, '\0') : op.key);
      del->set_range_end(prefix_end(op.key));
      break;
    }
  }
}

}  // namespace

std::string prefix_end(const std::string& prefix) {
  std::string end = prefix;
  for (std::size_t i = end.size(); i-- > 0;) {
    if (static_cast<unsigned char>(end[i]) < 0xff) {
      end[i] = static_cast<char>(static_cast<unsigned char>(end[i]) + 1);
      end.resize(i + 1);
      return end;
    }
  }
  return std::string(1, '\0');
}

Txn& Txn::if_equal(std::string key, Target target, std::int64_t number) {
  compares.push_back({std::move(key), target, true, number, {}});
  return *this;
}
Txn& Txn::if_not_equal(std::string key, Target target, std::int64_t number) {
  compares.push_back({std::move(key), target, false, number, {}});
  return *this;
}
Txn& Txn::if_value_equal(std::string key, std::string value) {
  compares.push_back({std::move(key), Target::kValue, true, 0, std::move(value)});
  return *this;
}
Txn& Txn::if_value_not_equal(std::string key, std::string value) {
  compares.push_back({std::move(key), Target::kValue, false, 0, std::move(value)});
  return *this;
}
Txn& Txn::put(std::string key, std::string value, std::int64_t lease) {
  ops.push_back({Op::Kind::kPut, std::move(key), std::move(value), lease});
  return *this;
}
Txn& Txn::erase(std::string key) {
  ops.push_back({Op::Kind::kErase, std::move(key), {}, 0});
  return *this;
}
Txn& Txn::erase_prefix(std::string prefix) {
  ops.push_back({Op::Kind::kErasePrefix, std::move(prefix), {}, 0});
  return *this;
}

struct EtcdClient::Impl {
  struct Endpoint {
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<pb::KV::Stub> kv;
    std::unique_ptr<pb::Lease::Stub> lease;
  };

  std::vector<Endpoint> endpoints;
  std::string names;  // "a:2379,b:2379"
  Options options;
  // The endpoint that answered last: calls start there.
  std::atomic<std::size_t> current{0};

  // Runs rpc(endpoint, context) on each endpoint in turn, from `current`,
  // until one answers or fails for a reason another member would share.
  template <typename Rpc>
  Status call(const std::string& op, Rpc&& rpc) {
    const std::size_t n = endpoints.size();
    const std::size_t first = current.load(std::memory_order_relaxed);
    std::string failures;
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t at = (first + i) % n;
      Endpoint& endpoint = endpoints[at];
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + options.deadline);
      // Wait for the endpoint to connect, up to the deadline. gRPC's sync API
      // moves a connection on only while a call waits on it: fail-fast calls
      // to a channel that once failed fail at once with the old error, and a
      // member that came back looked down until gRPC's 5 s backup poll.
      context.set_wait_for_ready(true);
      const grpc::Status s = rpc(endpoint, context);
      if (s.ok()) {
        if (at != first) current.store(at, std::memory_order_relaxed);
        return Status::ok();
      }
      std::string why = endpoint.address + ": ";
      // Tell a member that is down from one that does not answer in time.
      if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
          endpoint.channel->GetState(false) == GRPC_CHANNEL_TRANSIENT_FAILURE) {
        why += "cannot connect: ";
      }
      why += one_line(s.error_message());
      if (!try_next(s.error_code())) {
        return Status(code_of(s.error_code()), "etcd " + names + ": " + op + ": " + why);
      }
      failures += (failures.empty() ? "" : "; ") + why;
    }
    return unavailable("etcd " + names + ": " + op + ": no endpoint answered (deadline " +
                       std::to_string(options.deadline.count()) + " ms each; " + failures + ")");
  }
};

EtcdClient::EtcdClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EtcdClient::EtcdClient(EtcdClient&&) noexcept = default;
EtcdClient& EtcdClient::operator=(EtcdClient&&) noexcept = default;
EtcdClient::~EtcdClient() = default;

namespace {

Status read_pem(const std::string& where, const std::string& what, const std::string& path,
                std::string& out) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in || text.str().empty())
    return invalid_argument(where + "cannot read the TLS " + what + " file " + quoted(path));
  out = text.str();
  return Status::ok();
}

}  // namespace

Result<EtcdClient> EtcdClient::connect(std::vector<std::string> endpoints, Options options) {
  auto impl = std::make_unique<Impl>();
  for (const std::string& e : endpoints) impl->names += (impl->names.empty() ? "" : ",") + e;
  const std::string where = "etcd " + impl->names + ": connect: ";
  if (endpoints.empty()) return invalid_argument("etcd: connect: no endpoints given");
  if (options.deadline.count() <= 0) return invalid_argument(where + "the deadline must be > 0");
  if (options.page_size <= 0) return invalid_argument(where + "the page size must be > 0");

  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!options.ca_file.empty()) {
    grpc::SslCredentialsOptions tls;
    HPCQ_RETURN_IF_ERROR(read_pem(where, "CA", options.ca_file, tls.pem_root_certs));
    if (options.cert_file.empty() != options.key_file.empty())
      return invalid_argument(where + "a client certificate needs both its cert and key files");
    if (!options.cert_file.empty()) {
      HPCQ_RETURN_IF_ERROR(read_pem(where, "certificate", options.cert_file, tls.pem_cert_chain));
      HPCQ_RETURN_IF_ERROR(read_pem(where, "key", options.key_file, tls.pem_private_key));
    }
    credentials = grpc::SslCredentials(tls);
  } else if (!options.cert_file.empty() || !options.key_file.empty()) {
    return invalid_argument(where + "a client certificate needs the CA file too");
  }

  grpc::ChannelArguments args;
  // A page of large values may pass gRPC's default 4 MiB; page_size bounds
  // what range() asks for instead.
  args.SetMaxReceiveMessageSize(-1);
  // A member that comes back is connected again within a second, not after
  // gRPC's default backoff of up to two minutes.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  for (std::string& address : endpoints) {
    if (address.empty() || address.find("://") != std::string::npos ||
        address.find_first_of(", \t\n") != std::string::npos) {
      return invalid_argument(where + "endpoint " + quoted(address) +
                              " is not host:port (TLS: give the CA file, not https://)");
    }
    auto channel = grpc::CreateCustomChannel(address, credentials, args);
    impl->endpoints.push_back(
        {std::move(address), channel, pb::KV::NewStub(channel), pb::Lease::NewStub(channel)});
  }
  impl->options = options;
  return EtcdClient(std::move(impl));
}

const std::string& EtcdClient::endpoints() const { return impl_->names; }

Result<std::optional<KeyValue>> EtcdClient::get(const std::string& key) const {
  pb::RangeRequest request;
  request.set_key(key);
  pb::RangeResponse response;
  HPCQ_RETURN_IF_ERROR(impl_->call("get " + quoted(key), [&](auto& e, grpc::ClientContext& c) {
    return e.kv->Range(&c, request, &response);
  }));
  if (response.kvs_size() == 0) return std::optional<KeyValue>();
  return std::optional<KeyValue>(from_pb(response.kvs(0)));
}

Result<std::vector<KeyValue>> EtcdClient::range(const std::string& prefix) const {
  pb::RangeRequest request;
  // etcd has no empty key: "all keys" is the range from "\0".
  request.set_key(prefix.empty() ? std::string(1, '\0') : prefix);
  request.set_range_end(prefix_end(prefix));
  request.set_limit(impl_->options.page_size);
  // No sort_order: etcd returns keys ascending anyway, and an explicit sort
  // makes etcd 3.4 read the whole range for every page.
  std::vector<KeyValue> out;
  for (;;) {
    pb::RangeResponse response;
    HPCQ_RETURN_IF_ERROR(impl_->call("range " + quoted(prefix), [&](auto& e, auto& c) {
      return e.kv->Range(&c, request, &response);
    }));
    for (const pb::KeyValue& kv : response.kvs()) out.push_back(from_pb(kv));
    if (!response.more() || response.kvs_size() == 0) break;
    // The next page starts just after the last key, at the first page's
    // revision, so that the pages together are one snapshot.
    request.set_key(response.kvs(response.kvs_size() - 1).key() + '\0');
    request.set_revision(response.header().revision());
  }
  return out;
}

Result<std::int64_t> EtcdClient::put(const std::string& key, const std::string& value,
                                     std::int64_t lease) const {
  pb::PutRequest request;
  request.set_key(key);
  request.set_value(value);
  request.set_lease(lease);
  pb::PutResponse response;
  std::string op = "put " + quoted(key);
  if (lease != 0) op += " with " + lease_name(lease);
  HPCQ_RETURN_IF_ERROR(
      impl_->call(op, [&](auto& e, auto& c) { return e.kv->Put(&c, request, &response); }));
  return response.header().revision();
}

Result<std::int64_t> EtcdClient::erase(const std::string& key) const {
  pb::DeleteRangeRequest request;
  request.set_key(key);
  pb::DeleteRangeResponse response;
  HPCQ_RETURN_IF_ERROR(impl_->call("erase " + quoted(key), [&](auto& e, auto& c) {
    return e.kv->DeleteRange(&c, request, &response);
  }));
  return response.header().revision();
}

Result<std::int64_t> EtcdClient::erase_prefix(const std::string& prefix) const {
  pb::DeleteRangeRequest request;
  request.set_key(prefix.empty() ? std::string(1, '\0') : prefix);
  request.set_range_end(prefix_end(prefix));
  pb::DeleteRangeResponse response;
  HPCQ_RETURN_IF_ERROR(impl_->call("erase prefix " + quoted(prefix), [&](auto& e, auto& c) {
    return e.kv->DeleteRange(&c, request, &response);
  }));
  return response.header().revision();
}

Result<TxnResult> EtcdClient::txn(const Txn& txn) const {
  pb::TxnRequest request;
  for (const Txn::Compare& c : txn.compares) to_pb(c, request.add_compare());
  for (const Txn::Op& op : txn.ops) to_pb(op, request.add_success());
  pb::TxnResponse response;
  const std::string op = "txn (" + std::to_string(txn.compares.size()) + " compares, " +
                         std::to_string(txn.ops.size()) + " ops)";
  HPCQ_RETURN_IF_ERROR(
      impl_->call(op, [&](auto& e, auto& c) { return e.kv->Txn(&c, request, &response); }));
  return TxnResult{response.succeeded(), response.header().revision()};
}

Result<Lease> EtcdClient::grant(std::int64_t ttl_seconds) const {
  pb::LeaseGrantRequest request;
  request.set_ttl(ttl_seconds);
  pb::LeaseGrantResponse response;
  const std::string op = "grant lease of " + std::to_string(ttl_seconds) + " s";
  HPCQ_RETURN_IF_ERROR(impl_->call(
      op, [&](auto& e, auto& c) { return e.lease->LeaseGrant(&c, request, &response); }));
  if (!response.error().empty()) {
    return internal_error("etcd " + impl_->names + ": " + op + ": " + one_line(response.error()));
  }
  return Lease{response.id(), response.ttl()};
}

Status EtcdClient::revoke(std::int64_t id) const {
  pb::LeaseRevokeRequest request;
  request.set_id(id);
  pb::LeaseRevokeResponse response;
  return impl_->call("revoke " + lease_name(id), [&](auto& e, auto& c) {
    return e.lease->LeaseRevoke(&c, request, &response);
  });
}

Result<std::int64_t> EtcdClient::keep_alive_once(std::int64_t id) const {
  const std::string op = "keep-alive " + lease_name(id);
  pb::LeaseKeepAliveRequest request;
  request.set_id(id);
  pb::LeaseKeepAliveResponse response;
  // One request on etcd's keep-alive stream: etcd answers each request, and
  // ends the stream when ours ends.
  HPCQ_RETURN_IF_ERROR(impl_->call(op, [&](auto& e, grpc::ClientContext& c) {
    auto stream = e.lease->LeaseKeepAlive(&c);
    bool answered = false;
    if (stream->Write(request)) {
      stream->WritesDone();
      pb::LeaseKeepAliveResponse r;
      while (stream->Read(&r)) {
        if (!answered) response = r;
        answered = true;
      }
    }
    grpc::Status s = stream->Finish();
    if (s.ok() && !answered) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "keep-alive stream ended without answer");
    }
    return s;
  }));
  // etcd answers TTL 0 for a lease it does not have (expired or revoked).
  if (response.ttl() <= 0) {
    return not_found("etcd " + impl_->names + ": " + op + ": the lease expired or was revoked");
  }
  return response.ttl();
}

}  // namespace hpcq::etcd

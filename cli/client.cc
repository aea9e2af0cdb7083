#include "cli/client.h"

#include <cstdio>
#include <cstdlib>

#include "lib/core/bytes.h"

extern char** environ;

namespace hpcq::cli {

std::string socket_path() {
  const char* env = std::getenv("HPCQ_SOCKET");
  return env && *env ? env : "/run/hpcq/hpcqd.sock";
}

std::unique_ptr<v1::Hpcq::Stub> connect(const std::string& socket) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  auto channel =
      grpc::CreateCustomChannel("unix:" + socket, grpc::InsecureChannelCredentials(), args);
  return v1::Hpcq::NewStub(channel);
}

Status from_grpc(const grpc::Status& status, const std::string& socket) {
  switch (status.error_code()) {
    case grpc::StatusCode::OK: return Status::ok();
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      // gRPC's own transport failures; the daemon's answers say what failed.
      if (status.error_message().find("could not be stored") != std::string::npos) {
        return unavailable(status.error_message());
      }
      return unavailable("hpcqd is not reachable at " + socket + " (" + status.error_message() +
                         ")");
    case grpc::StatusCode::RESOURCE_EXHAUSTED: {
      // gRPC's own refusal of a request over the leader's limit reads
      // "Received message larger than max (SIZE vs. LIMIT)": the user's
      // request is too large, which is bad input.
      unsigned long long size = 0, limit = 0;
      if (std::sscanf(status.error_message().c_str(),
                      "Received message larger than max (%llu vs. %llu)", &size, &limit) == 2) {
        return invalid_argument("the request is " + std::to_string(size) +
                                " bytes, over hpcqd's limit of " + std::to_string(limit) +
                                " ([api] max_message_bytes in hpcq.toml)");
      }
      return Status(Code::kResourceExhausted, status.error_message());
    }
    case grpc::StatusCode::ALREADY_EXISTS:
      return Status(Code::kAlreadyExists, status.error_message());
    case grpc::StatusCode::UNAUTHENTICATED:
      return Status(Code::kUnauthenticated, status.error_message());
    case grpc::StatusCode::INVALID_ARGUMENT: return invalid_argument(status.error_message());
    case grpc::StatusCode::NOT_FOUND: return not_found(status.error_message());
    case grpc::StatusCode::PERMISSION_DENIED: return permission_denied(status.error_message());
    case grpc::StatusCode::FAILED_PRECONDITION: return failed_precondition(status.error_message());
    default: return internal_error(status.error_message());
  }
}

int exit_code_of(const Status& status) {
  if (status.is_ok()) return 0;
  return status.code() == Code::kInvalidArgument ? 2 : 1;
}

Result<JobId> parse_job_id(const std::string& text) {
  JobId id = 0;
  size_t used = 0;
  try {
    id = std::stoull(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || id == 0 || text.empty() || text[0] == '-') {
    return invalid_argument("'" + text + "' is not a job id");
  }
  return id;
}

std::map<std::string, std::string> caller_environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    if (!hpcq::is_utf8(kv.substr(0, eq))) {
      std::fprintf(stderr,
                   "hpcq: warning: an environment variable whose name is not UTF-8 "
                   "is not passed to the job\n");
      continue;
    }
    env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

}  // namespace hpcq::cli

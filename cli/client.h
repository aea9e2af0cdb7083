// The hpcq command's connection to hpcqd: a gRPC channel on the unix socket
// named by $HPCQ_SOCKET (default /run/hpcq/hpcqd.sock). The daemon knows the
// caller from the socket, so requests carry no identity.
#pragma once

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <string>

#include "lib/core/ids.h"
#include "lib/core/status.h"
#include "proto/hpcq.grpc.pb.h"

namespace hpcq::cli {

std::string socket_path();
std::unique_ptr<v1::Hpcq::Stub> connect(const std::string& socket);

// A gRPC failure as a one-line Status ("hpcqd is not reachable at PATH" for
// an unreachable daemon).
Status from_grpc(const grpc::Status& status, const std::string& socket);

// Exit codes: 0 ok, 2 bad input (invalid argument), 1 anything else.
int exit_code_of(const Status& status);

// A job id as the user writes it ("12"); kInvalidArgument otherwise.
Result<JobId> parse_job_id(const std::string& text);

// This process's environment, as a job's tasks get it (a variable whose
// name is not UTF-8 is left out, with a warning: the API carries names as
// text).
std::map<std::string, std::string> caller_environment();

}  // namespace hpcq::cli

#include "lib/core/status.h"

namespace hpcq {

const char* code_name(Code code) {
  switch (code) {
    case Code::kOk: return "ok";
    case Code::kInvalidArgument: return "invalid argument";
    case Code::kNotFound: return "not found";
    case Code::kAlreadyExists: return "already exists";
    case Code::kPermissionDenied: return "permission denied";
    case Code::kFailedPrecondition: return "failed precondition";
    case Code::kUnavailable: return "unavailable";
    case Code::kResourceExhausted: return "resource exhausted";
    case Code::kUnauthenticated: return "unauthenticated";
    case Code::kInternal: return "internal error";
    case Code::kOutOfRange: return "out of range";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  return std::string(code_name(code_)) + ": " + message_;
}

}  // namespace hpcq

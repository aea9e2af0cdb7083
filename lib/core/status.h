// hpcq::Status and hpcq::Result<T>: errors are values, never exceptions.
//
// A Status is a code plus a one-line message written for the person who will
// read it (what was wrong and where: option, file:line, job id). Result<T>
// holds either a T or a non-OK Status. Both are cheap to move and safe to use
// from any thread (they are plain values).
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace hpcq {

enum class Code {
  kOk = 0,
  kInvalidArgument,  // the caller's input is malformed (exit 2 in the CLI)
  kNotFound,         // no such job, node, file
  kAlreadyExists,
  kPermissionDenied,    // the caller may not act on this object
  kFailedPrecondition,  // the object is in the wrong state for the request
  kUnavailable,         // a peer (daemon, agent) cannot be reached; retryable
  kResourceExhausted,   // a limit was hit (request rate, message size); retry later
  kUnauthenticated,     // who is calling is not known (missing or wrong token)
  kInternal,            // a bug or an unexpected system error
  kOutOfRange,          // a position past what is kept (a watcher that fell behind)
};

const char* code_name(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }

  bool is_ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid argument: --mem: bad size 'x'"
  std::string to_string() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string msg) { return {Code::kInvalidArgument, std::move(msg)}; }
inline Status not_found(std::string msg) { return {Code::kNotFound, std::move(msg)}; }
inline Status permission_denied(std::string msg) {
  return {Code::kPermissionDenied, std::move(msg)};
}
inline Status failed_precondition(std::string msg) {
  return {Code::kFailedPrecondition, std::move(msg)};
}
inline Status unavailable(std::string msg) { return {Code::kUnavailable, std::move(msg)}; }
inline Status internal_error(std::string msg) { return {Code::kInternal, std::move(msg)}; }

// Either a value or a non-OK Status. Accessing value() of an error is a bug
// (checked with an assert in debug builds).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: implicit by design

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }

  const T& value() const& { return std::get<T>(v_); }
  T& value() & { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

  // The error; an OK Status when this holds a value.
  Status status() const { return is_ok() ? Status() : std::get<Status>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace hpcq

// Returns the Status of `expr` from the enclosing function if it is not OK.
#define HPCQ_RETURN_IF_ERROR(expr)                  \
  do {                                              \
    ::hpcq::Status hpcq_status_ = (expr);           \
    if (!hpcq_status_.is_ok()) return hpcq_status_; \
  } while (0)

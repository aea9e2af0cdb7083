// Seals on the values hpcqd writes to a store others might reach (the etcd
// store, issue 45): a keyed MAC (libsodium's crypto_auth, HMAC-SHA-512-256)
// over the value and the key it is stored under, with a secret only hpcqd
// has ([leader] store_key). What a store writer without that secret puts
// (a job record with another owner, say) fails to open and is refused when
// hpcqd loads it: the store's own access control (etcd with client
// certificates) is the first line, this is the second.
//
// A sealed value is "hpcq-seal1:" + the tag's 64 hex digits + ":" + the
// value. Binding the store key stops a valid record being moved to another
// key (another job's id).
#pragma once

#include <string>
#include <string_view>

#include "lib/core/status.h"

namespace hpcq::store {

class Sealer {
 public:
  static constexpr std::size_t kKeyBytes = 32;

  // The secret from a file of 64 hex digits (a newline may follow), which
  // must not be readable by group or others.
  static Result<Sealer> from_file(const std::string& path);
  // A new random secret as the file holds it (64 hex digits and a newline).
  static std::string generate_file_text();
  explicit Sealer(std::string secret) : secret_(std::move(secret)) {}

  std::string seal(std::string_view store_key, std::string_view value) const;
  // The value, or kPermissionDenied when it is not sealed with this secret
  // for `store_key`.
  Result<std::string> open(std::string_view store_key, std::string_view sealed) const;

 private:
  std::string tag(std::string_view store_key, std::string_view value) const;
  std::string secret_;  // kKeyBytes raw bytes
};

}  // namespace hpcq::store

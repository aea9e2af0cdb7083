// CURVE key pairs and the allow-list of the overlay.
//
// Keys are Z85 text (40 characters), as ZeroMQ prints them. A key file holds
// two lines, "public <z85>" and "secret <z85>" (a public-only file has just the
// first). Secret key files must not be readable by group or others: load refuses them.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "lib/core/status.h"

namespace hpcq::overlay {

struct CurveKeyPair {
  std::string public_key;  // Z85
  std::string secret_key;  // Z85; empty for a peer's public-only key
};

Result<CurveKeyPair> generate_key_pair();

// Writes the pair to `path` with mode 0600 (created or replaced).
Status write_key_file(const std::string& path, const CurveKeyPair& keys);

// Reads a key file; when `require_secret`, the secret line must be there and
// the file mode must be 0600 or stricter.
Result<CurveKeyPair> read_key_file(const std::string& path, bool require_secret);

bool is_valid_z85_key(const std::string& key);

// Z85 text of `size` bytes (a multiple of 4), and the bytes of Z85 text
// (nullopt unless it is Z85: a multiple of 5 digits, each group under 2^32).
std::string z85_encode(const unsigned char* data, std::size_t size);
std::optional<std::string> z85_decode(std::string_view text);

}  // namespace hpcq::overlay

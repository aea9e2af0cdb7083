#include "lib/store/seal.h"

#include <sodium.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace hpcq::store {

namespace {

constexpr std::string_view kMagic = "hpcq-seal1:";
constexpr std::size_t kTagHex = 2 * crypto_auth_BYTES;

std::string hex(const unsigned char* bytes, std::size_t n) {
  std::string out(2 * n + 1, '\0');
  sodium_bin2hex(out.data(), out.size(), bytes, n);
  out.pop_back();
  return out;
}

}  // namespace

Result<Sealer> Sealer::from_file(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    return not_found("store key " + path + ": " + std::strerror(errno));
  }
  if ((st.st_mode & 077) != 0) {
    return permission_denied("store key " + path + ": readable by others (chmod 600)");
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string digits = text.str();
  while (!digits.empty() && (digits.back() == '\n' || digits.back() == '\r')) digits.pop_back();
  std::string secret(kKeyBytes, '\0');
  std::size_t n = 0;
  if (!in || digits.size() != 2 * kKeyBytes ||
      sodium_hex2bin(reinterpret_cast<unsigned char*>(secret.data()), secret.size(), digits.data(),
                     digits.size(), nullptr, &n, nullptr) != 0 ||
      n != kKeyBytes) {
    return invalid_argument(
        "store key " + path + ": expected " + std::to_string(2 * kKeyBytes) +
        " hex digits (make one with: openssl rand -hex 32 > FILE; chmod 600 FILE)");
  }
  return Sealer(std::move(secret));
}

std::string Sealer::generate_file_text() {
  if (sodium_init() < 0) return "";
  unsigned char secret[kKeyBytes];
  randombytes_buf(secret, sizeof secret);
  return hex(secret, sizeof secret) + "\n";
}

std::string Sealer::tag(std::string_view store_key, std::string_view value) const {
  static_assert(crypto_auth_KEYBYTES == kKeyBytes);
  crypto_auth_hmacsha512256_state state;
  crypto_auth_hmacsha512256_init(&state, reinterpret_cast<const unsigned char*>(secret_.data()),
                                 secret_.size());
  // The key's length first: ("a", "bc") and ("ab", "c") differ.
  const std::string length = std::to_string(store_key.size()) + ":";
  for (std::string_view part : {std::string_view(length), store_key, value}) {
    crypto_auth_hmacsha512256_update(&state, reinterpret_cast<const unsigned char*>(part.data()),
                                     part.size());
  }
  unsigned char out[crypto_auth_BYTES];
  crypto_auth_hmacsha512256_final(&state, out);
  return hex(out, sizeof out);
}

std::string Sealer::seal(std::string_view store_key, std::string_view value) const {
  std::string out(kMagic);
  out += tag(store_key, value);
  out += ':';
  out += value;
  return out;
}

Result<std::string> Sealer::open(std::string_view store_key, std::string_view sealed) const {
  const std::size_t header = kMagic.size() + kTagHex + 1;
  if (sealed.size() < header || !sealed.starts_with(kMagic) || sealed[header - 1] != ':') {
    return permission_denied("not sealed by hpcqd");
  }
  const std::string_view value = sealed.substr(header);
  const std::string expected = tag(store_key, value);
  if (sodium_memcmp(expected.data(), sealed.data() + kMagic.size(), kTagHex) != 0) {
    return permission_denied("its seal does not match (written by another than hpcqd)");
  }
  return std::string(value);
}

}  // namespace hpcq::store

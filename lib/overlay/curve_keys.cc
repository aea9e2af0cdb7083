#include "lib/overlay/curve_keys.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

namespace hpcq::overlay {

// Z85 (ZeroMQ RFC 32): each 4 bytes, big-endian, as 5 base-85 digits. Done
// here rather than by libzmq so that the hpcq command, which makes keys but
// opens no socket, does not load libzmq and its dozen libraries at every start.
namespace {

constexpr std::string_view kZ85Digits =
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

}  // namespace

std::string z85_encode(const unsigned char* data, std::size_t size) {
  std::string out;
  for (std::size_t i = 0; i + 4 <= size; i += 4) {
    std::uint32_t value = (std::uint32_t{data[i]} << 24) | (std::uint32_t{data[i + 1]} << 16) |
                          (std::uint32_t{data[i + 2]} << 8) | data[i + 3];
    char digits[5];
    for (int d = 4; d >= 0; --d) {
      digits[d] = kZ85Digits[value % 85];
      value /= 85;
    }
    out.append(digits, 5);
  }
  return out;
}

std::optional<std::string> z85_decode(std::string_view text) {
  if (text.size() % 5 != 0) return std::nullopt;
  std::string out;
  for (std::size_t i = 0; i < text.size(); i += 5) {
    std::uint64_t value = 0;
    for (std::size_t d = 0; d < 5; ++d) {
      const auto digit = kZ85Digits.find(text[i + d]);
      if (digit == std::string_view::npos) return std::nullopt;
      value = value * 85 + digit;
    }
    if (value > 0xffffffffu) return std::nullopt;
    for (int shift = 24; shift >= 0; shift -= 8) {
      out.push_back(static_cast<char>((value >> shift) & 0xff));
    }
  }
  return out;
}

bool is_valid_z85_key(const std::string& key) {
  return key.size() == 40 && z85_decode(key).has_value();
}

Result<CurveKeyPair> generate_key_pair() {
  if (sodium_init() < 0) return internal_error("cannot generate CURVE keys: libsodium failed");
  unsigned char pub[crypto_box_PUBLICKEYBYTES];
  unsigned char sec[crypto_box_SECRETKEYBYTES];
  crypto_box_keypair(pub, sec);
  CurveKeyPair pair{z85_encode(pub, sizeof pub), z85_encode(sec, sizeof sec)};
  sodium_memzero(sec, sizeof sec);
  return pair;
}

Status write_key_file(const std::string& path, const CurveKeyPair& keys) {
  std::string text = "public " + keys.public_key + "\n";
  if (!keys.secret_key.empty()) text += "secret " + keys.secret_key + "\n";
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return internal_error(path + ": " + std::strerror(errno));
  bool ok = ::fchmod(fd, 0600) == 0 &&
            ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            ::fsync(fd) == 0;
  int saved = errno;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    if (ok) saved = errno;
    ::unlink(tmp.c_str());
    return internal_error(path + ": " + std::strerror(saved));
  }
  return Status::ok();
}

Result<CurveKeyPair> read_key_file(const std::string& path, bool require_secret) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return not_found("key file " + path + ": " + std::strerror(errno));
  }
  std::ifstream in(path);
  if (!in) return not_found("key file " + path + ": cannot open");
  CurveKeyPair keys;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string kind, key;
    words >> kind >> key;
    if (!is_valid_z85_key(key) || (kind != "public" && kind != "secret")) {
      return invalid_argument(path + ":" + std::to_string(lineno) +
                              ": expected 'public <z85 key>' or 'secret <z85 key>'");
    }
    (kind == "public" ? keys.public_key : keys.secret_key) = key;
  }
  if (keys.public_key.empty()) return invalid_argument(path + ": no public key");
  if (require_secret) {
    if (keys.secret_key.empty()) return invalid_argument(path + ": no secret key");
    if ((st.st_mode & 077) != 0) {
      return permission_denied(path + ": secret key file is readable by others (chmod 600)");
    }
  }
  return keys;
}

}  // namespace hpcq::overlay

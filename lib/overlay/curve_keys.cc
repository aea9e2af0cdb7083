#include "lib/overlay/curve_keys.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace hpcq::overlay {

bool is_valid_z85_key(const std::string& key) {
  if (key.size() != 40) return false;
  unsigned char raw[32];
  return zmq_z85_decode(raw, key.c_str()) != nullptr;
}

Result<CurveKeyPair> generate_key_pair() {
  char pub[41];
  char sec[41];
  if (zmq_curve_keypair(pub, sec) != 0) {
    return internal_error(std::string("cannot generate CURVE keys: ") + zmq_strerror(zmq_errno()));
  }
  return CurveKeyPair{pub, sec};
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

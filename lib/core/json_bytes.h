// User bytes in JSON (the store's columns, an agent's launch.json): valid
// UTF-8 as a plain string, anything else as {"base64": "..."}, so that no
// byte is lost or replaced. Readers take both forms.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/core/bytes.h"

namespace hpcq {

inline nlohmann::json bytes_to_json(const std::string& bytes) {
  if (is_utf8(bytes)) return bytes;
  return nlohmann::json{{"base64", base64_encode(bytes)}};
}

inline nlohmann::json bytes_to_json(const std::vector<std::string>& list) {
  nlohmann::json out = nlohmann::json::array();
  for (const std::string& b : list) out.push_back(bytes_to_json(b));
  return out;
}

// Keys (environment names) must be text; values are bytes.
inline nlohmann::json bytes_to_json(const std::map<std::string, std::string>& map) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, value] : map) out[key] = bytes_to_json(value);
  return out;
}

// False when `v` is neither form.
inline bool bytes_from_json(const nlohmann::json& v, std::string& out) {
  if (v.is_string()) {
    out = v.get<std::string>();
    return true;
  }
  if (!v.is_object() || v.size() != 1 || !v.contains("base64") || !v.at("base64").is_string()) {
    return false;
  }
  auto decoded = base64_decode(v.at("base64").get<std::string>());
  if (!decoded) return false;
  out = std::move(*decoded);
  return true;
}

inline bool bytes_from_json(const nlohmann::json& v, std::vector<std::string>& out) {
  if (!v.is_array()) return false;
  out.clear();
  for (const nlohmann::json& item : v) {
    std::string b;
    if (!bytes_from_json(item, b)) return false;
    out.push_back(std::move(b));
  }
  return true;
}

inline bool bytes_from_json(const nlohmann::json& v, std::map<std::string, std::string>& out) {
  if (!v.is_object()) return false;
  out.clear();
  for (const auto& [key, value] : v.items()) {
    std::string b;
    if (!bytes_from_json(value, b)) return false;
    out.emplace(key, std::move(b));
  }
  return true;
}

}  // namespace hpcq

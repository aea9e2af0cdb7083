// User bytes (arguments, scripts, paths, environment values) are bytes on
// Unix, not text: these carry them exactly through text formats.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hpcq {

// Whether `text` is well-formed UTF-8 (no overlong forms, no surrogates,
// nothing above U+10FFFF).
bool is_utf8(std::string_view text);

// RFC 4648 base64 with padding; decode returns nullopt for anything else.
std::string base64_encode(std::string_view bytes);
std::optional<std::string> base64_decode(std::string_view text);

// Little-endian numbers in binary frames and records. get_* read the first
// bytes of `in`, which the caller has checked are there.
void put_u32(std::string& out, std::uint32_t v);
void put_u64(std::string& out, std::uint64_t v);
std::uint32_t get_u32(std::string_view in);
std::uint64_t get_u64(std::string_view in);

}  // namespace hpcq

#include "lib/core/bytes.h"

#include <gtest/gtest.h>

#include <string>

#include "lib/core/json_bytes.h"

namespace hpcq {
namespace {

TEST(Bytes, Utf8) {
  EXPECT_TRUE(is_utf8(""));
  EXPECT_TRUE(is_utf8("plain ascii"));
  EXPECT_TRUE(is_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));  // é € 😀
  EXPECT_FALSE(is_utf8("x\xff"));
  EXPECT_FALSE(is_utf8("caf\xe9"));           // Latin-1
  EXPECT_FALSE(is_utf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(is_utf8("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(is_utf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(is_utf8("\xe2\x82"));          // cut short
  EXPECT_FALSE(is_utf8(std::string("\x80", 1)));
}

TEST(Bytes, Base64RoundTripsEveryByte) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  for (std::size_t n = 0; n <= all.size(); n += 37) {
    const std::string part = all.substr(0, n);
    auto back = base64_decode(base64_encode(part));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, part);
  }
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_FALSE(base64_decode("Zg=").has_value());
  EXPECT_FALSE(base64_decode("Z===").has_value());
  EXPECT_FALSE(base64_decode("Zm9v!A==").has_value());
}

TEST(Bytes, JsonKeepsTextAsTextAndBytesExactly) {
  EXPECT_EQ(bytes_to_json(std::string("caf\xc3\xa9")), "caf\xc3\xa9");
  const std::string raw = "caf\xe9\xff";
  const nlohmann::json j = bytes_to_json(raw);
  ASSERT_TRUE(j.is_object());
  std::string back;
  ASSERT_TRUE(bytes_from_json(nlohmann::json::parse(j.dump()), back));
  EXPECT_EQ(back, raw);
  std::string bad;
  EXPECT_FALSE(bytes_from_json(nlohmann::json{{"base64", "!!"}}, bad));
  EXPECT_FALSE(bytes_from_json(nlohmann::json(3), bad));
}

}  // namespace
}  // namespace hpcq

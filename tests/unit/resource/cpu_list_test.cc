#include "lib/resource/cpu_list.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hpcq::resource {
namespace {

struct ParseCase {
  std::string text;
  std::vector<int> want;
};

TEST(CpuList, ParsesLinuxLists) {
  const ParseCase cases[] = {
      {"", {}},
      {"\n", {}},
      {"0", {0}},
      {"0-3", {0, 1, 2, 3}},
      {"0-3,8,10-11", {0, 1, 2, 3, 8, 10, 11}},
      {"10-11,0-1\n", {0, 1, 10, 11}},
      {"3,1,3,2-2", {1, 2, 3}},
      {" 4 , 5-6 ", {4, 5, 6}},
  };
  for (const ParseCase& c : cases) {
    auto got = parse_cpu_list(c.text);
    ASSERT_TRUE(got.is_ok()) << "'" << c.text << "': " << got.status().to_string();
    EXPECT_EQ(*got, c.want) << "'" << c.text << "'";
  }
}

TEST(CpuList, RejectsMalformedLists) {
  for (const char* text : {"x", "1,", ",1", "1,,2", "3-1", "1-", "-1", "1-2-3", "0x1", "1.5",
                           "70000", "0-4000000000"}) {
    auto got = parse_cpu_list(text);
    ASSERT_FALSE(got.is_ok()) << "'" << text << "' parsed";
    EXPECT_EQ(got.status().code(), Code::kInvalidArgument);
    EXPECT_NE(got.status().message().find(text), std::string::npos) << got.status().message();
  }
}

TEST(CpuList, FormatsShortestList) {
  EXPECT_EQ(format_cpu_list({}), "");
  EXPECT_EQ(format_cpu_list({5}), "5");
  EXPECT_EQ(format_cpu_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(format_cpu_list({11, 10, 3, 2, 1, 0, 8, 8}), "0-3,8,10-11");
  EXPECT_EQ(format_cpu_list({1, 3, 5}), "1,3,5");
}

TEST(CpuList, RoundTrips) {
  for (const char* text : {"0", "0-3,8,10-11", "1,3,5-7,100-200", "0-65535"}) {
    auto parsed = parse_cpu_list(text);
    ASSERT_TRUE(parsed.is_ok());
    EXPECT_EQ(format_cpu_list(*parsed), text);
  }
}

}  // namespace
}  // namespace hpcq::resource

#include "lib/core/split.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace hpcq {
namespace {

TEST(SplitTest, KeepsEmptyItemsForTheCallerToRefuse) {
  EXPECT_EQ(split("a,,b", ','), (std::vector<std::string_view>{"a", "", "b"}));
  EXPECT_EQ(split("", ','), (std::vector<std::string_view>{""}));
  EXPECT_EQ(split("a,", ','), (std::vector<std::string_view>{"a", ""}));
  EXPECT_EQ(split("x:y", ':'), (std::vector<std::string_view>{"x", "y"}));
}

TEST(SplitTest, NonemptyDropsThem) {
  EXPECT_EQ(split_nonempty("1,,2,3,", ','), (std::vector<std::string>{"1", "2", "3"}));
  EXPECT_TRUE(split_nonempty("", ',').empty());
  EXPECT_TRUE(split_nonempty(",,", ',').empty());
}

}  // namespace
}  // namespace hpcq

#include "lib/job/constraint.h"

#include <gtest/gtest.h>

#include "lib/core/units.h"

namespace hpcq::job {
namespace {

TEST(Constraint, AndBindsTighterThanOr) {
  auto c = parse_constraint("a100&ib|v100");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_TRUE(c->matches({"a100", "ib"}));
  EXPECT_TRUE(c->matches({"ib", "a100", "nvme"}));
  EXPECT_TRUE(c->matches({"v100"}));
  EXPECT_FALSE(c->matches({"a100"}));
  EXPECT_FALSE(c->matches({"ib"}));
  EXPECT_FALSE(c->matches({}));
}

TEST(Constraint, EmptyMatchesEveryNode) {
  auto c = parse_constraint("");
  ASSERT_TRUE(c.is_ok());
  EXPECT_TRUE(c->empty());
  EXPECT_TRUE(c->matches({}));
  EXPECT_TRUE(c->matches({"x"}));
}

TEST(Constraint, OneFeatureAndNames) {
  auto c = parse_constraint("rack-1.hot_aisle");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_TRUE(c->matches({"rack-1.hot_aisle"}));
  EXPECT_FALSE(c->matches({"rack-1"}));
  EXPECT_TRUE(is_plain_name("A100"));
  EXPECT_FALSE(is_plain_name(""));
  EXPECT_FALSE(is_plain_name("a b"));
  EXPECT_FALSE(is_plain_name(std::string(65, 'a')));
}

TEST(Constraint, BadTextsSayWhyInOneLine) {
  const std::pair<const char*, const char*> cases[] = {
      {"a100&", "an empty feature name"},
      {"|ib", "an empty feature name"},
      {"a100&&ib", "an empty feature name"},
      {"a b", "bad feature name 'a b'"},
      {"[rack1|rack2]", "brackets, parentheses and counts are not supported"},
      {"gpu*2", "not supported"},
      {"(a|b)&c", "not supported"},
      {"a\nb", "bad feature name 'a\\x0ab'"},
  };
  for (const auto& [text, why] : cases) {
    auto c = parse_constraint(text);
    ASSERT_FALSE(c.is_ok()) << text;
    EXPECT_NE(c.status().message().find(why), std::string::npos) << c.status().message();
    EXPECT_EQ(c.status().message().find('\n'), std::string::npos) << c.status().message();
    EXPECT_EQ(c.status().message().rfind("-C/--constraint", 0), 0u) << c.status().message();
  }
  EXPECT_FALSE(parse_constraint(std::string(2000, 'a')).is_ok());
}

}  // namespace
}  // namespace hpcq::job

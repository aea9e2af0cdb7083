#include "lib/core/hostlist.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hpcq {
namespace {

using Names = std::vector<std::string>;

Names expand(const std::string& text) {
  auto r = expand_hostlist(text);
  EXPECT_TRUE(r.is_ok()) << text << ": " << r.status().message();
  return r.is_ok() ? *r : Names{};
}

TEST(HostlistTest, Expands) {
  EXPECT_EQ(expand("node1"), (Names{"node1"}));
  EXPECT_EQ(expand("node[1-3,5],gpu7"), (Names{"node1", "node2", "node3", "node5", "gpu7"}));
  EXPECT_EQ(expand("n[08-11]"), (Names{"n08", "n09", "n10", "n11"}));
  EXPECT_EQ(expand("n[9-11]"), (Names{"n9", "n10", "n11"}));
  EXPECT_EQ(expand("r[1-2]-n[1-2]"), (Names{"r1-n1", "r1-n2", "r2-n1", "r2-n2"}));
  EXPECT_EQ(expand("n[3,1]"), (Names{"n3", "n1"}));  // in the order written
  EXPECT_EQ(expand("[1-2]x"), (Names{"1x", "2x"}));
}

TEST(HostlistTest, RefusesWithOneLine) {
  for (const std::string text : {"", "a,,b", "n[1-", "n1]", "n[a-b]", "n[3-1]", "n[]", "n[1-2",
                                 "a b", "n[1--2]", "n[0-99999999]", "x\n[1]"}) {
    auto r = expand_hostlist(text);
    ASSERT_FALSE(r.is_ok()) << text;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << r.status().message();
    EXPECT_EQ(r.status().message().rfind("bad node list ", 0), 0u) << r.status().message();
  }
}

TEST(HostlistTest, Compresses) {
  EXPECT_EQ(compress_hostlist({}), "");
  EXPECT_EQ(compress_hostlist({"node1"}), "node1");
  EXPECT_EQ(compress_hostlist({"node1", "node2", "node3", "node5", "gpu1"}), "node[1-3,5],gpu1");
  EXPECT_EQ(compress_hostlist({"n9", "n10", "n11"}), "n[9-11]");
  EXPECT_EQ(compress_hostlist({"n08", "n09", "n10"}), "n[08-09],n10");
  EXPECT_EQ(compress_hostlist({"n3", "n1", "n2"}), "n[3,1-2]");
  EXPECT_EQ(compress_hostlist({"leader", "a", "b"}), "leader,a,b");
}

TEST(HostlistTest, CompressedExpandsBackInOrder) {
  const std::vector<Names> lists = {{"node1", "node2", "node3", "node5", "gpu1"},
                                    {"n08", "n09", "n10", "n11", "n7"},
                                    {"n3", "n1", "n2", "m2", "n4"},
                                    {"a1b2", "a1b3", "x", "x0", "x00", "x01"},
                                    {"node10", "node9", "node11"},
                                    {"n1", "n1", "n2"}};
  for (const Names& names : lists) {
    EXPECT_EQ(expand(compress_hostlist(names)), names) << compress_hostlist(names);
  }
}

}  // namespace
}  // namespace hpcq

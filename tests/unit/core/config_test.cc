// hpcq.toml parsing: defaults, every section, and bad input naming file:line.
#include "lib/core/config.h"

#include <gtest/gtest.h>

namespace hpcq {
namespace {

const char* kRank0 =
    "[[rank]]\nname = \"leader\"\nendpoint = \"tcp://127.0.0.1:7000\"\n"
    "public_key = \"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\"\n";

TEST(ConfigTest, DefaultsAndRanks) {
  std::string text = std::string("[overlay]\nfanout = 2\n") + kRank0 +
                     "[[rank]]\nname = \"node1\"\nendpoint = \"tcp://127.0.0.1:7001\"\n"
                     "public_key = \"Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID\"\n"
                     "topology = \"pack:2 numa:2 core:4 pu:1\"\n";
  auto c = parse_config(text, "t.toml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->fanout, 2);
  EXPECT_EQ(c->heartbeat_interval_ms, 1000);
  ASSERT_EQ(c->ranks.size(), 2u);
  EXPECT_EQ(c->ranks[0].topology, "host");
  EXPECT_EQ(c->ranks[1].topology, "pack:2 numa:2 core:4 pu:1");
  EXPECT_EQ(c->actions, std::vector<std::string>{"allocate"});
}

struct BadCase {
  std::string text;
  std::string expected;  // substring of the message
};

TEST(ConfigTest, BadInputNamesFileLineAndKey) {
  const std::vector<BadCase> cases = {
      {"[leader]\nstate_dirr = \"/x\"\n", "t.toml:2: unknown key 'leader.state_dirr'"},
      {"[overlay]\nfanout = \"wide\"\n", "t.toml:2: bad value for 'overlay.fanout'"},
      {"[overlay]\nfanout = 0\n", "t.toml:2: 'overlay.fanout' must be a positive integer"},
      {"[overlay]\nheartbeat_interval_ms = 500\nnode_down_after_ms = 100\n", "heartbeat_interval_ms <"},
      {"[overlay]\nnode_unresponsive_after_ms = 20000\n", "< node_down_after_ms"},
      {"bogus = 1\n", "t.toml:1: unknown key 'bogus'"},
      {"[leader\n", "t.toml:1: "},
      {"[leader]\nsocket = \"/x\"\n", "no [[rank]]"},
      {"[[rank]]\nname = \"a\"\nendpoint = \"tcp://h:1\"\npublic_key = \"short\"\n", "public_key"},
      {std::string(kRank0) + kRank0, "duplicate node name 'leader'"},
      {"rank = 3\n", "array of tables"},
      {"# comment\n'\xff'\n", "t.toml:2: not valid UTF-8"},
      {"x = \"\xc3\"\n", "t.toml:1: not valid UTF-8"},
  };
  for (const auto& c : cases) {
    auto r = parse_config(c.text, "t.toml");
    ASSERT_FALSE(r.is_ok()) << c.text;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.expected), std::string::npos)
        << "message: " << r.status().message() << "\nexpected: " << c.expected;
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << r.status().message();
  }
}

TEST(ConfigTest, MissingFile) {
  auto r = load_config("/nonexistent/hpcq.toml");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("/nonexistent/hpcq.toml"), std::string::npos);
}

}  // namespace
}  // namespace hpcq

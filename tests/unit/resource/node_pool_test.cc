#include "lib/resource/node_pool.h"

#include <gtest/gtest.h>

#include "lib/resource/hwloc_import.h"

namespace hpcq::resource {
namespace {

NodeTopology topo(const std::string& spec) {
  auto t = discover_topology(spec);
  EXPECT_TRUE(t.is_ok()) << t.status().to_string();
  return *t;
}

NodeAllocation part(Rank rank, std::vector<int> cores, std::uint64_t memory = 0) {
  NodeAllocation a;
  a.rank = rank;
  a.node = "n" + std::to_string(rank);
  a.ntasks = static_cast<int>(cores.size());
  a.cores = std::move(cores);
  a.memory_bytes = memory;
  return a;
}

class NodePoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Added out of order: the pool keeps rank order.
    ASSERT_TRUE(pool_.add_node(2, "n2", topo("pack:2 numa:2 core:4 pu:1")).is_ok());
    ASSERT_TRUE(pool_.add_node(1, "n1", topo("pack:2 numa:2 core:4 pu:1")).is_ok());
  }
  NodePool pool_;
};

TEST_F(NodePoolTest, CountsFreeCoresPerNodeAndNuma) {
  ASSERT_EQ(pool_.nodes().size(), 2u);
  EXPECT_EQ(pool_.nodes()[0].rank(), 1u);
  EXPECT_EQ(pool_.nodes()[1].rank(), 2u);
  EXPECT_EQ(pool_.free_cores(1), 16);
  EXPECT_EQ(pool_.free_cores(9), 0);
  EXPECT_EQ(pool_.free_memory(1), 4 * kDefaultNumaMemoryBytes);

  ASSERT_TRUE(pool_.allocate({{part(1, {0, 1, 5}, 1 << 30), part(2, {15})}}).is_ok());
  EXPECT_EQ(pool_.free_cores(1), 13);
  EXPECT_EQ(pool_.free_cores_in_numa(1, 0), 2);
  EXPECT_EQ(pool_.free_cores_in_numa(1, 1), 3);
  EXPECT_EQ(pool_.free_cores_in_numa(1, 7), 0);
  EXPECT_EQ(pool_.free_cores(2), 15);
  EXPECT_EQ(pool_.free_cores_in_numa(2, 3), 3);
  EXPECT_EQ(pool_.free_memory(1), 4 * kDefaultNumaMemoryBytes - (1 << 30));
  EXPECT_FALSE(pool_.find(1)->core_free(0));
  EXPECT_TRUE(pool_.find(1)->core_free(2));

  ASSERT_TRUE(pool_.release({{part(1, {0, 1, 5}, 1 << 30), part(2, {15})}}).is_ok());
  EXPECT_EQ(pool_.free_cores(1), 16);
  EXPECT_EQ(pool_.free_cores(2), 16);
  EXPECT_EQ(pool_.free_memory(1), 4 * kDefaultNumaMemoryBytes);
}

struct Refusal {
  const char* what;
  Allocation allocation;
  Code code;
};

TEST_F(NodePoolTest, AllocateRefusesAndChangesNothing) {
  ASSERT_TRUE(pool_.allocate({{part(1, {3})}}).is_ok());
  const Refusal cases[] = {
      {"core in use", {{part(2, {0}), part(1, {3})}}, Code::kFailedPrecondition},
      {"core twice", {{part(2, {4, 4})}}, Code::kInvalidArgument},
      {"core twice across parts", {{part(2, {4}), part(2, {4})}}, Code::kInvalidArgument},
      {"core out of range", {{part(2, {16})}}, Code::kInvalidArgument},
      {"negative core", {{part(2, {-1})}}, Code::kInvalidArgument},
      {"unknown rank", {{part(2, {0}), part(7, {0})}}, Code::kNotFound},
      {"too much memory", {{part(2, {0}, 5 * kDefaultNumaMemoryBytes)}}, Code::kFailedPrecondition},
  };
  for (const Refusal& c : cases) {
    Status s = pool_.allocate(c.allocation);
    EXPECT_EQ(s.code(), c.code) << c.what << ": " << s.to_string();
    EXPECT_EQ(pool_.free_cores(1), 15) << c.what;
    EXPECT_EQ(pool_.free_cores(2), 16) << c.what;
    EXPECT_EQ(pool_.free_memory(2), 4 * kDefaultNumaMemoryBytes) << c.what;
  }
}

TEST_F(NodePoolTest, ReleaseRefusesCoresNotInUse) {
  ASSERT_TRUE(pool_.allocate({{part(1, {3, 4}, 100)}}).is_ok());
  const Refusal cases[] = {
      {"free core", {{part(1, {3, 5})}}, Code::kFailedPrecondition},
      {"other node", {{part(1, {3}), part(2, {3})}}, Code::kFailedPrecondition},
      {"unknown rank", {{part(9, {0})}}, Code::kNotFound},
      {"more memory", {{part(1, {3}, 200)}}, Code::kFailedPrecondition},
  };
  for (const Refusal& c : cases) {
    Status s = pool_.release(c.allocation);
    EXPECT_EQ(s.code(), c.code) << c.what << ": " << s.to_string();
    EXPECT_EQ(pool_.free_cores(1), 14) << c.what;
  }
  ASSERT_TRUE(pool_.release({{part(1, {3, 4}, 100)}}).is_ok());
  Status twice = pool_.release({{part(1, {3, 4}, 100)}});
  EXPECT_EQ(twice.code(), Code::kFailedPrecondition);
  EXPECT_NE(twice.message().find("n1"), std::string::npos) << twice.message();
}

TEST_F(NodePoolTest, UnschedulableNodesGetNoWorkButRelease) {
  ASSERT_TRUE(pool_.allocate({{part(2, {0})}}).is_ok());
  EXPECT_TRUE(pool_.set_schedulable(2, false));
  EXPECT_FALSE(pool_.set_schedulable(5, false));
  EXPECT_EQ(pool_.allocate({{part(2, {1})}}).code(), Code::kFailedPrecondition);
  EXPECT_TRUE(pool_.release({{part(2, {0})}}).is_ok());
  EXPECT_TRUE(pool_.set_schedulable(2, true));
  EXPECT_TRUE(pool_.allocate({{part(2, {1})}}).is_ok());
}

TEST_F(NodePoolTest, AddAndRemove) {
  EXPECT_EQ(pool_.add_node(1, "again", topo("core:2 pu:1")).code(), Code::kAlreadyExists);
  NodeTopology bad = topo("core:2 pu:1");
  bad.cores[1].numa = 3;
  EXPECT_EQ(pool_.add_node(3, "bad", bad).code(), Code::kInvalidArgument);
  EXPECT_EQ(pool_.find(3), nullptr);
  ASSERT_TRUE(pool_.allocate({{part(1, {0})}}).is_ok());
  EXPECT_TRUE(pool_.remove_node(1));
  EXPECT_FALSE(pool_.remove_node(1));
  EXPECT_EQ(pool_.release({{part(1, {0})}}).code(), Code::kNotFound);
  ASSERT_TRUE(pool_.add_node(1, "n1", topo("core:2 pu:1")).is_ok());
  EXPECT_EQ(pool_.free_cores(1), 2);
}

TEST_F(NodePoolTest, IdleCopyAndCopiesAreIndependent) {
  ASSERT_TRUE(pool_.allocate({{part(1, {0, 1})}}).is_ok());
  pool_.set_schedulable(2, false);
  NodePool copy = pool_;
  ASSERT_TRUE(copy.allocate({{part(1, {2})}}).is_ok());
  EXPECT_EQ(pool_.free_cores(1), 14);
  EXPECT_EQ(copy.free_cores(1), 13);
  NodePool idle = pool_.idle_copy();
  EXPECT_EQ(idle.free_cores(1), 16);
  EXPECT_EQ(idle.free_cores_in_numa(1, 0), 4);
  EXPECT_FALSE(idle.find(2)->schedulable());
}

}  // namespace
}  // namespace hpcq::resource

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

TEST_F(NodePoolTest, GresUnitsAreCountedPerNodeAndReleased) {
  ASSERT_TRUE(pool_.set_gres(1, {{"nvme", 2}, {"fpga", 1}}).is_ok());
  EXPECT_EQ(pool_.find(1)->free_gres("nvme"), 2);
  EXPECT_EQ(pool_.find(1)->free_gres("tape"), 0);
  EXPECT_EQ(pool_.find(2)->free_gres("nvme"), 0);
  NodeAllocation one = part(1, {0});
  one.gres = {{"nvme", 1}};
  ASSERT_TRUE(pool_.allocate({{one}}).is_ok());
  EXPECT_EQ(pool_.find(1)->free_gres("nvme"), 1);
  // Two parts on one node count together; all or nothing.
  NodeAllocation two = part(1, {1});
  two.gres = {{"nvme", 1}};
  NodeAllocation three = part(1, {2});
  three.gres = {{"nvme", 1}, {"fpga", 1}};
  EXPECT_EQ(pool_.allocate({{two, three}}).message(),
            "node n1 (rank 1): 2 of gres nvme asked, 1 free");
  EXPECT_EQ(pool_.find(1)->free_gres("fpga"), 1);
  NodeAllocation elsewhere = part(2, {0});
  elsewhere.gres = {{"nvme", 1}};
  EXPECT_EQ(pool_.allocate({{elsewhere}}).message(), "node n2 (rank 2): no gres nvme");
  // What could run if every job ended.
  EXPECT_EQ(pool_.idle_copy().find(1)->free_gres("nvme"), 2);
  // Not below what is in use; a copy keeps the counts apart.
  EXPECT_EQ(pool_.set_gres(1, {}).code(), Code::kFailedPrecondition);
  EXPECT_EQ(pool_.set_gres(1, {{"nvme", 0}}).code(), Code::kFailedPrecondition);
  NodePool copy = pool_;
  ASSERT_TRUE(copy.release({{one}}).is_ok());
  EXPECT_EQ(copy.find(1)->free_gres("nvme"), 2);
  EXPECT_EQ(pool_.find(1)->free_gres("nvme"), 1);
  ASSERT_TRUE(pool_.release({{one}}).is_ok());
  EXPECT_EQ(pool_.release({{one}}).message(), "node n1 (rank 1): core 0 is not in use");
  ASSERT_TRUE(pool_.set_gres(1, {{"nvme", 4}}).is_ok());
  EXPECT_EQ(pool_.find(1)->free_gres("nvme"), 4);
  EXPECT_EQ(pool_.find(1)->free_gres("fpga"), 0);
}

}  // namespace
}  // namespace hpcq::resource

namespace hpcq::resource {
namespace {

NodeTopology shape(const std::string& spec) {
  auto t = discover_topology(spec);
  EXPECT_TRUE(t.is_ok()) << t.status().to_string();
  return *t;
}

TEST(NodePoolReserved, SpecCoresAlternatePackagesFromTheTop) {
  // The paper's nodes: 2 x 18 cores, 4 reserved, 16 usable per socket.
  const NodeTopology topo = shape("package:2 numa:1 core:18 pu:1");
  EXPECT_EQ(spec_cores(topo, 4), (std::vector<int>{16, 17, 34, 35}));
  EXPECT_EQ(spec_cores(topo, 0), std::vector<int>{});
  EXPECT_EQ(spec_cores(topo, 99).size(), 36u);
  NodePool pool;
  ASSERT_TRUE(pool.add_node(1, "n1", topo).is_ok());
  ASSERT_TRUE(pool.reserve_cores(1, spec_cores(topo, 4)).is_ok());
  const NodeState& node = *pool.find(1);
  EXPECT_EQ(node.free_cores(), 32);
  EXPECT_EQ(node.free_cores_in_numa(0), 16);
  EXPECT_EQ(node.free_cores_in_numa(1), 16);
  EXPECT_EQ(node.reserved_cores(), 4);
  EXPECT_TRUE(node.core_reserved(35));
  EXPECT_FALSE(node.core_free(35));
  // A reserved core is never given, exclusive or shared.
  NodeAllocation part;
  part.rank = 1;
  part.cores = {17};
  EXPECT_EQ(pool.allocate({{part}}).code(), Code::kFailedPrecondition);
  Allocation shared{{part}};
  shared.shared = true;
  EXPECT_EQ(pool.allocate(shared).code(), Code::kFailedPrecondition);
  // The idle copy keeps the reservation; a reservation of a used core fails.
  EXPECT_EQ(pool.idle_copy().find(1)->free_cores(), 32);
  part.cores = {0};
  ASSERT_TRUE(pool.allocate({{part}}).is_ok());
  EXPECT_EQ(pool.reserve_cores(1, {0}).code(), Code::kFailedPrecondition);
  EXPECT_EQ(pool.reserve_cores(1, {36}).code(), Code::kInvalidArgument);
  EXPECT_EQ(pool.reserve_cores(2, {1}).code(), Code::kNotFound);
  ASSERT_TRUE(pool.reserve_cores(1, {}).is_ok());
  EXPECT_EQ(pool.find(1)->free_cores(), 35);
}

TEST(NodePoolShared, OversubscribedCoresCountSharers) {
  NodePool pool;
  ASSERT_TRUE(pool.add_node(1, "n1", shape("pack:1 numa:2 core:2 pu:1")).is_ok());
  NodeAllocation part;
  part.rank = 1;
  part.cores = {0, 1};
  Allocation shared{{part}};
  shared.shared = true;
  for (int i = 0; i < kMaxSharers; ++i) ASSERT_TRUE(pool.allocate(shared).is_ok()) << i;
  const NodeState& node = *pool.find(1);
  EXPECT_EQ(node.sharers(0), kMaxSharers);
  EXPECT_EQ(node.free_cores(), 2);
  EXPECT_EQ(node.shareable_cores(), 2);
  EXPECT_EQ(node.shareable_cores_in_numa(0), 0);
  EXPECT_EQ(pool.allocate(shared).code(), Code::kFailedPrecondition);    // a fifth sharer
  EXPECT_EQ(pool.allocate({{part}}).code(), Code::kFailedPrecondition);  // exclusive on shared
  // Exclusive cores cannot be shared.
  NodeAllocation excl = part;
  excl.cores = {2};
  ASSERT_TRUE(pool.allocate({{excl}}).is_ok());
  Allocation share_excl{{excl}};
  share_excl.shared = true;
  EXPECT_EQ(pool.allocate(share_excl).code(), Code::kFailedPrecondition);
  EXPECT_EQ(pool.release(share_excl).code(), Code::kFailedPrecondition);
  for (int i = 0; i < kMaxSharers; ++i) ASSERT_TRUE(pool.release(shared).is_ok()) << i;
  EXPECT_EQ(pool.release(shared).code(), Code::kFailedPrecondition);
  EXPECT_EQ(pool.find(1)->free_cores(), 3);
}

TEST(NodePoolGpus, GpusAreTakenOnceAndReleased) {
  NodeTopology topo = shape("pack:2 numa:1 core:2 pu:1");
  topo.gpus = {{0, 0, "cuda0", ""}, {1, 1, "cuda1", ""}};
  NodePool pool;
  ASSERT_TRUE(pool.add_node(1, "n1", topo).is_ok());
  NodeAllocation part;
  part.rank = 1;
  part.gpus = {1};
  ASSERT_TRUE(pool.allocate({{part}}).is_ok());
  EXPECT_EQ(pool.find(1)->free_gpus(), 1);
  EXPECT_EQ(pool.find(1)->free_gpus_in_numa(1), 0);
  EXPECT_EQ(pool.find(1)->free_gpus_in_numa(0), 1);
  EXPECT_EQ(pool.allocate({{part}}).code(), Code::kFailedPrecondition);
  part.gpus = {2};
  EXPECT_EQ(pool.allocate({{part}}).code(), Code::kInvalidArgument);
  part.gpus = {0, 0};
  EXPECT_EQ(pool.allocate({{part}}).code(), Code::kInvalidArgument);
  part.gpus = {1};
  ASSERT_TRUE(pool.release({{part}}).is_ok());
  EXPECT_EQ(pool.release({{part}}).code(), Code::kFailedPrecondition);
  topo.gpus[1].numa = 5;
  EXPECT_EQ(pool.add_node(2, "n2", topo).code(), Code::kInvalidArgument);
}

TEST_F(NodePoolTest, IdleMeansNothingInUse) {
  EXPECT_TRUE(pool_.find(1)->idle());
  ASSERT_TRUE(pool_.reserve_cores(1, {7}).is_ok());  // system cores are no use
  EXPECT_TRUE(pool_.find(1)->idle());
  ASSERT_TRUE(pool_.set_gres(1, {{"nvme", 1}}).is_ok());
  Allocation memory{{part(1, {}, 1)}};
  Allocation cores{{part(1, {0})}};
  Allocation shared{{part(1, {0})}, 1, /*shared=*/true};
  Allocation units{{part(1, {})}};
  units.nodes[0].gres = {{"nvme", 1}};
  for (const Allocation* use : {&memory, &cores, &shared, &units}) {
    ASSERT_TRUE(pool_.allocate(*use).is_ok());
    EXPECT_FALSE(pool_.find(1)->idle());
    EXPECT_TRUE(pool_.find(2)->idle());
    ASSERT_TRUE(pool_.release(*use).is_ok());
    EXPECT_TRUE(pool_.find(1)->idle());
  }
}

TEST(NodePoolWide, MoreThan64CoresUseSeveralWords) {
  NodePool pool;
  ASSERT_TRUE(pool.add_node(1, "n1", shape("pack:2 numa:4 core:16 pu:1")).is_ok());
  NodeAllocation part;
  part.rank = 1;
  part.cores = {63, 64, 127};
  ASSERT_TRUE(pool.allocate({{part}}).is_ok());
  const NodeState& node = *pool.find(1);
  EXPECT_EQ(node.free_cores(), 125);
  EXPECT_FALSE(node.core_free(64));
  EXPECT_TRUE(node.core_free(65));
  EXPECT_EQ(node.free_cores_in_numa(3), 15);
  EXPECT_EQ(node.free_cores_in_numa(7), 15);
  EXPECT_EQ(node.numa_mask(7).size(), 2u);
}

}  // namespace
}  // namespace hpcq::resource

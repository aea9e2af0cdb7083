#include "agent/launch_message.h"

#include <gtest/gtest.h>

#include "lib/overlay/messages.h"
#include "lib/resource/hwloc_import.h"

namespace hpcq::agent {
namespace {

resource::NodeTopology synthetic(const char* spec) {
  auto topo = resource::discover_topology(spec);
  EXPECT_TRUE(topo.is_ok()) << topo.status().message();
  return std::move(topo).value();
}

// Two nodes; rank 2 is the second, with two tasks of two cores each.
overlay::Launch two_node_launch() {
  overlay::Launch launch;
  launch.set_job_id(7);
  launch.set_cpus_per_task(2);
  launch.add_argv("hostname");
  (*launch.mutable_env())["HPCQ_JOB_ID"] = "7";
  overlay::NodeAlloc* a = launch.add_allocation();
  a->set_rank(1);
  a->set_node("n1");
  for (int c : {0, 1}) a->add_cores(c);
  a->add_numa(0);
  a->set_ntasks(1);
  overlay::NodeAlloc* b = launch.add_allocation();
  b->set_rank(2);
  b->set_node("n2");
  for (int c : {4, 5, 6, 7}) b->add_cores(c);
  b->add_numa(1);
  b->set_ntasks(2);
  b->set_first_task(1);
  return launch;
}

TEST(LaunchMessage, TasksGetTheirCoresAndEmulatedNodesFoldOntoTheHost) {
  const resource::NodeTopology topo = synthetic("pack:1 numa:2 core:4 pu:1");
  const HostMapping host{&topo, false, 2, 1};
  auto job = job_launch_from_message(two_node_launch(), 2, "n2", host);
  ASSERT_TRUE(job.is_ok()) << job.status().message();
  EXPECT_EQ(job.value().env.at("HPCQ_NODEID"), "1");
  EXPECT_EQ(job.value().env.at("HPCQ_NODENAME"), "n2");
  EXPECT_EQ(job.value().hostfile, "n1 slots=1\nn2 slots=2\n");
  ASSERT_EQ(job.value().tasks.size(), 2u);
  EXPECT_EQ(job.value().tasks[0].rank, 1);
  EXPECT_EQ(job.value().tasks[0].logical_cpus, "4-5");
  EXPECT_EQ(job.value().tasks[1].logical_cpus, "6-7");
  EXPECT_EQ(job.value().tasks[1].host_cpus, (std::vector<int>{0, 1}));  // 6, 7 mod 2
  EXPECT_EQ(job.value().host_mems, (std::vector<int>{0}));              // domain 1 mod 1
}

TEST(LaunchMessage, EachEmulatedNodeStartsItsFoldAtItsOwnHostCpu) {
  const resource::NodeTopology topo = synthetic("pack:1 numa:1 core:16 pu:1");
  overlay::Launch launch = two_node_launch();
  launch.set_cpus_per_task(1);
  launch.mutable_allocation(1)->clear_cores();
  launch.mutable_allocation(1)->add_cores(0);  // one core, the node's first
  launch.mutable_allocation(1)->set_ntasks(1);
  launch.mutable_allocation(1)->set_numa(0, 0);
  for (int fold_start : {0, 1, 2}) {
    const HostMapping host{&topo, false, 4, 1, fold_start};
    auto job = job_launch_from_message(launch, 2, "n2", host);
    ASSERT_TRUE(job.is_ok()) << job.status().message();
    EXPECT_EQ(job->tasks[0].host_cpus, (std::vector<int>{fold_start}));
    EXPECT_EQ(job->host_cpus, (std::vector<int>{fold_start}));
    EXPECT_EQ(host.cpus_of({3}), (std::vector<int>{(3 + fold_start) % 4}));
    const std::vector<int> firsts = host.first_cpu_of_each_core();
    ASSERT_EQ(firsts.size(), 16u);
    for (int core = 0; core < 16; ++core) {
      EXPECT_EQ(firsts[static_cast<std::size_t>(core)], (core + fold_start) % 4);
    }
  }
}

// On the host's own topology a core's CPUs are its PUs; a core without any
// (an XML topology can say so) leaves the leader to its fallback.
TEST(LaunchMessage, AHostCoreWithoutPusGivesNoCoreCpus) {
  resource::NodeTopology topo;
  topo.cores = {resource::Core{0, 0, 0, {0, 2}}, resource::Core{1, 0, 0, {1, 3}}};
  const HostMapping host{&topo, true, 4, 1};
  EXPECT_EQ(host.first_cpu_of_each_core(), (std::vector<int>{0, 1}));
  topo.cores[1].pus.clear();
  EXPECT_TRUE(host.first_cpu_of_each_core().empty());
}

TEST(LaunchMessage, APmiWorldSpansEveryNodeAndNamesWhereEachRankRuns) {
  const resource::NodeTopology topo = synthetic("pack:1 numa:2 core:4 pu:1");
  const HostMapping host{&topo, false, 2, 1};
  overlay::Launch launch = two_node_launch();
  launch.set_mpi("pmi1");
  launch.set_ntasks(3);
  auto job = job_launch_from_message(launch, 2, "n2", host);
  ASSERT_TRUE(job.is_ok()) << job.status().message();
  EXPECT_EQ(job->pmi.kvsname, "hpcq_7_0");
  EXPECT_EQ(job->pmi.size, 3);
  EXPECT_EQ(job->pmi.nodes, 2);
  EXPECT_EQ(job->pmi.process_mapping, "(vector,(0,1,1),(1,1,2))");
  EXPECT_EQ(job->pmi.api, "pmi1");
  EXPECT_EQ(job->pmi.node_names, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_EQ(job->pmi.node, 1);
  EXPECT_EQ(job->pmi.node_of_rank, (std::vector<int>{0, 1, 1}));
  EXPECT_EQ(job->pmi.node_ranks, (std::vector<std::uint32_t>{1, 2}));
  launch.set_mpi("pmix");
  EXPECT_EQ(job_launch_from_message(launch, 2, "n2", host)->pmi.api, "pmix");
  launch.set_mpi("pmi1,pmix");
  EXPECT_EQ(job_launch_from_message(launch, 2, "n2", host)->pmi.api, "pmi1,pmix");
  // A world of one task is offered PMI-1 alone by default (no PMIx server),
  // and what it asks for explicitly.
  launch.set_ntasks(1);
  EXPECT_EQ(job_launch_from_message(launch, 2, "n2", host)->pmi.api, "pmi1");
  launch.set_mpi("pmix");
  EXPECT_EQ(job_launch_from_message(launch, 2, "n2", host)->pmi.api, "pmix");
  launch.set_ntasks(3);
  // A task count beyond what the nodes list gives no mapping (and no
  // allocation of that size).
  launch.set_ntasks(2'000'000'000);
  job = job_launch_from_message(launch, 2, "n2", host);
  ASSERT_TRUE(job.is_ok()) << job.status().message();
  EXPECT_EQ(job->pmi.process_mapping, "");
  EXPECT_TRUE(job->pmi.node_of_rank.empty());
  launch.set_mpi("none");
  EXPECT_TRUE(job_launch_from_message(launch, 2, "n2", host)->pmi.kvsname.empty());
}

TEST(LaunchMessage, OnTheHostTopologyACoreIsItsOwnPus) {
  const resource::NodeTopology topo = synthetic("pack:1 numa:2 core:4 pu:2");
  const HostMapping host{&topo, true, 16, 2};
  auto job = job_launch_from_message(two_node_launch(), 2, "n2", host);
  ASSERT_TRUE(job.is_ok()) << job.status().message();
  EXPECT_EQ(job.value().tasks[0].host_cpus, (std::vector<int>{8, 9, 10, 11}));
  EXPECT_EQ(job.value().host_mems, (std::vector<int>{1}));
}

TEST(LaunchMessage, RefusesWhatDoesNotFitThisNode) {
  const resource::NodeTopology topo = synthetic("pack:1 numa:2 core:4 pu:1");
  const HostMapping host{&topo, false, 2, 1};
  EXPECT_FALSE(job_launch_from_message(two_node_launch(), 3, "n3", host).is_ok());

  overlay::Launch bad_core = two_node_launch();
  bad_core.mutable_allocation(1)->set_cores(0, 8);
  EXPECT_FALSE(job_launch_from_message(bad_core, 2, "n2", host).is_ok());
  bad_core.mutable_allocation(1)->set_cores(0, -1);
  EXPECT_FALSE(job_launch_from_message(bad_core, 2, "n2", host).is_ok());

  overlay::Launch bad_numa = two_node_launch();
  bad_numa.mutable_allocation(1)->set_numa(0, 2);
  EXPECT_FALSE(job_launch_from_message(bad_numa, 2, "n2", host).is_ok());

  overlay::Launch many_tasks = two_node_launch();
  many_tasks.mutable_allocation(1)->set_ntasks(2'000'000'000);
  EXPECT_FALSE(job_launch_from_message(many_tasks, 2, "n2", host).is_ok());
  many_tasks.mutable_allocation(1)->set_ntasks(0);
  EXPECT_FALSE(job_launch_from_message(many_tasks, 2, "n2", host).is_ok());
}

// One node of tests/unit/resource/gpu_node.xml (4 NUMA domains of 4 cores
// with 2 PUs, a GPU in each domain): two tasks of 4 cores and one GPU each.
overlay::Launch gpu_launch() {
  overlay::Launch launch;
  launch.set_job_id(9);
  launch.set_cpus_per_task(4);
  launch.set_gpus_per_task(1);
  launch.add_argv("true");
  overlay::NodeAlloc* a = launch.add_allocation();
  a->set_rank(1);
  a->set_node("g1");
  for (int c = 4; c < 12; ++c) a->add_cores(c);
  a->add_numa(1);
  a->add_numa(2);
  a->add_gpus(1);
  a->add_gpus(2);
  a->set_ntasks(2);
  return launch;
}

TEST(LaunchMessage, EachTaskSeesItsOwnGpu) {
  auto topo =
      resource::discover_topology(std::string("xml:") + HPCQ_RESOURCE_TEST_DIR + "/gpu_node.xml");
  ASSERT_TRUE(topo.is_ok()) << topo.status().message();
  const HostMapping host{&*topo, true, 32, 4};
  auto job = job_launch_from_message(gpu_launch(), 1, "g1", host);
  ASSERT_TRUE(job.is_ok()) << job.status().message();
  ASSERT_EQ(job->tasks.size(), 2u);
  EXPECT_EQ(job->tasks[0].env.at("CUDA_VISIBLE_DEVICES"), "1");
  EXPECT_EQ(job->tasks[1].env.at("CUDA_VISIBLE_DEVICES"), "2");
  EXPECT_EQ(job->tasks[0].env.at("CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
  EXPECT_EQ(job->tasks[0].logical_cpus, "4-7");
  EXPECT_EQ(job->tasks[0].host_cpus, (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}));

  // --cpu-bind=threads: one PU of each core; none: the job's whole cpuset.
  overlay::Launch threads = gpu_launch();
  threads.set_cpu_bind(overlay::CPU_BIND_THREADS);
  job = job_launch_from_message(threads, 1, "g1", host);
  ASSERT_TRUE(job.is_ok()) << job.status().message();
  EXPECT_EQ(job->tasks[1].host_cpus, (std::vector<int>{16, 18, 20, 22}));
  threads.set_cpu_bind(overlay::CPU_BIND_NONE);
  job = job_launch_from_message(threads, 1, "g1", host);
  ASSERT_TRUE(job.is_ok()) << job.status().message();
  EXPECT_TRUE(job->tasks[1].host_cpus.empty());
  EXPECT_EQ(job->host_cpus.size(), 16u);

  // Without --gpus-per-task every task sees all of the node's GPUs.
  overlay::Launch per_node = gpu_launch();
  per_node.set_gpus_per_task(0);
  job = job_launch_from_message(per_node, 1, "g1", host);
  ASSERT_TRUE(job.is_ok()) << job.status().message();
  EXPECT_EQ(job->tasks[1].env.at("CUDA_VISIBLE_DEVICES"), "1,2");

  overlay::Launch bad_gpu = gpu_launch();
  bad_gpu.mutable_allocation(0)->set_gpus(1, 4);
  EXPECT_FALSE(job_launch_from_message(bad_gpu, 1, "g1", host).is_ok());
  overlay::Launch bad_bind = gpu_launch();
  bad_bind.set_cpu_bind(static_cast<overlay::CpuBind>(7));  // a newer leader's
  EXPECT_FALSE(job_launch_from_message(bad_bind, 1, "g1", host).is_ok());
}

// hpcq batch: the script is one task on the first node, on all of its
// cores; the second node runs nothing and holds its part.
TEST(LaunchMessage, ABatchScriptRunsOnceOnTheFirstNode) {
  const resource::NodeTopology topo = synthetic("pack:1 numa:2 core:4 pu:1");
  const HostMapping host{&topo, false, 8, 1};
  overlay::Launch launch = two_node_launch();
  launch.set_batch(true);
  launch.set_script("#!/bin/sh\n");
  launch.set_forward_output(true);
  launch.mutable_allocation(0)->set_ntasks(2);
  launch.set_cpus_per_task(1);
  auto first = job_launch_from_message(launch, 1, "n1", host);
  ASSERT_TRUE(first.is_ok()) << first.status().message();
  EXPECT_TRUE(first->batch);
  EXPECT_TRUE(first->forward_output);
  ASSERT_EQ(first->tasks.size(), 1u);
  EXPECT_EQ(first->tasks[0].rank, 0);
  EXPECT_EQ(first->tasks[0].logical_cpus, "0-1");
  EXPECT_EQ(first->tasks[0].host_cpus, (std::vector<int>{0, 1}));
  auto second = job_launch_from_message(launch, 2, "n2", host);
  ASSERT_TRUE(second.is_ok()) << second.status().message();
  EXPECT_TRUE(second->tasks.empty());
  EXPECT_EQ(second->host_cpus, (std::vector<int>{4, 5, 6, 7}));  // its part, held
}

// hpcq alloc's job (batch, no script): no node runs a task; all hold.
TEST(LaunchMessage, AnAllocationRunsNothing) {
  const resource::NodeTopology topo = synthetic("pack:1 numa:2 core:4 pu:1");
  const HostMapping host{&topo, false, 8, 1};
  overlay::Launch launch = two_node_launch();
  launch.set_batch(true);
  for (Rank rank : {1u, 2u}) {
    auto part = job_launch_from_message(launch, rank, "n" + std::to_string(rank), host);
    ASSERT_TRUE(part.is_ok()) << part.status().message();
    EXPECT_TRUE(part->batch);
    EXPECT_TRUE(part->tasks.empty());
  }
}

// --distribution=cyclic over two nodes: ranks are dealt round-robin.
TEST(LaunchMessage, CyclicDistributionDealsRanks) {
  const resource::NodeTopology topo = synthetic("pack:1 numa:2 core:4 pu:1");
  const HostMapping host{&topo, false, 2, 1};
  overlay::Launch launch = two_node_launch();
  launch.set_cpus_per_task(1);
  launch.mutable_allocation(0)->set_ntasks(2);
  launch.set_distribution(overlay::DISTRIBUTION_CYCLIC);
  auto job = job_launch_from_message(launch, 2, "n2", host);
  ASSERT_TRUE(job.is_ok()) << job.status().message();
  ASSERT_EQ(job->tasks.size(), 2u);
  EXPECT_EQ(job->tasks[0].rank, 1);
  EXPECT_EQ(job->tasks[1].rank, 3);
}

TEST(TopologyMessage, RoundTripsWithGpus) {
  resource::NodeTopology topo = synthetic("pack:2 numa:2 core:2 pu:2");
  topo.gpus.push_back({0, 1, "cuda0", "0000:3b:00.0"});
  overlay::Topology message;
  overlay::topology_to_message(topo, &message);
  const resource::NodeTopology back = overlay::topology_from_message(message);
  EXPECT_EQ(back.packages, topo.packages);
  EXPECT_EQ(back.source, topo.source);
  EXPECT_EQ(back.memory_bytes, topo.memory_bytes);
  ASSERT_EQ(back.cores.size(), topo.cores.size());
  EXPECT_EQ(back.cores[3].numa, topo.cores[3].numa);
  EXPECT_EQ(back.cores[3].pus, topo.cores[3].pus);
  ASSERT_EQ(back.gpus.size(), 1u);
  EXPECT_EQ(back.gpus[0].numa, 1);
  EXPECT_EQ(back.gpus[0].pci_bus_id, "0000:3b:00.0");
}

}  // namespace
}  // namespace hpcq::agent

namespace hpcq::agent {
namespace {

// One node, four one-core tasks of an 8-rank job split into two workers of
// two ranks each on this node (round-robin ranks, papers/000 Algorithm 2).
overlay::Launch split_launch() {
  overlay::Launch launch;
  launch.set_job_id(9);
  launch.set_ntasks(8);
  launch.add_argv("true");
  overlay::NodeAlloc* a = launch.add_allocation();
  a->set_rank(1);
  a->set_node("n1");
  for (int c : {0, 1, 4, 5}) a->add_cores(c);
  for (int m : {0, 1}) a->add_numa(m);
  a->set_memory_bytes(4000);
  a->set_ntasks(4);
  overlay::Worker* w0 = a->add_workers();
  w0->set_id(0);
  for (int r : {0, 4}) w0->add_ranks(r);
  for (int c : {0, 1}) w0->add_cores(c);
  overlay::Worker* w2 = a->add_workers();
  w2->set_id(2);
  w2->set_group(1);
  for (int r : {2, 6}) w2->add_ranks(r);
  for (int c : {4, 5}) w2->add_cores(c);
  overlay::NodeAlloc* b = launch.add_allocation();
  b->set_rank(2);
  b->set_node("n2");
  for (int c : {0, 1, 2, 3}) b->add_cores(c);
  b->add_numa(0);
  b->set_ntasks(4);
  b->set_first_task(4);
  for (int id : {1, 3}) {
    overlay::Worker* w = b->add_workers();
    w->set_id(id);
    w->set_group(id);
    for (int r : {id, id + 4}) w->add_ranks(r);
    for (int c : {(id / 2) * 2, (id / 2) * 2 + 1}) w->add_cores(c);
  }
  return launch;
}

TEST(LaunchMessage, WorkersGetTheirTasksRanksCgroupLimitsAndHostfileLines) {
  const resource::NodeTopology topo = synthetic("pack:2 numa:1 core:4 pu:1");
  const HostMapping host{&topo, true, 8, 2};
  auto job = job_launch_from_message(split_launch(), 1, "n1", host);
  ASSERT_TRUE(job.is_ok()) << job.status().message();
  ASSERT_EQ(job->workers.size(), 2u);
  EXPECT_EQ(job->workers[0].id, 0);
  EXPECT_EQ(job->workers[0].host_cpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(job->workers[0].host_mems, (std::vector<int>{0}));
  EXPECT_EQ(job->workers[1].id, 2);
  EXPECT_EQ(job->workers[1].group, 1);
  EXPECT_EQ(job->workers[1].host_cpus, (std::vector<int>{4, 5}));
  EXPECT_EQ(job->workers[1].host_mems, (std::vector<int>{1}));
  EXPECT_EQ(job->workers[1].memory_limit_bytes, 2000u);  // half the node's cores
  ASSERT_EQ(job->tasks.size(), 4u);
  const std::vector<int> ranks = {job->tasks[0].rank, job->tasks[1].rank, job->tasks[2].rank,
                                  job->tasks[3].rank};
  EXPECT_EQ(ranks, (std::vector<int>{0, 4, 2, 6}));
  EXPECT_EQ(job->tasks[2].worker, 1);
  EXPECT_EQ(job->tasks[2].host_cpus, (std::vector<int>{4}));
  EXPECT_EQ(job->hostfile, "n1 slots=2\nn2 slots=2\nn1 slots=2\nn2 slots=2\n");
}

TEST(LaunchMessage, UnsplitJobIsOneWorkerWithTheJobsLimits) {
  const resource::NodeTopology topo = synthetic("pack:1 numa:2 core:4 pu:1");
  const HostMapping host{&topo, false, 2, 1};
  auto job = job_launch_from_message(two_node_launch(), 2, "n2", host);
  ASSERT_TRUE(job.is_ok()) << job.status().message();
  ASSERT_EQ(job->workers.size(), 1u);
  EXPECT_EQ(job->workers[0].id, 1);  // the node's index
  EXPECT_EQ(job->workers[0].host_cpus, job->host_cpus);
  for (const TaskSpec& t : job->tasks) EXPECT_EQ(t.worker, 0);
}

TEST(LaunchMessage, RefusesWorkersThatDoNotMatchTheNode) {
  const resource::NodeTopology topo = synthetic("pack:2 numa:1 core:4 pu:1");
  const HostMapping host{&topo, true, 8, 2};
  overlay::Launch outside = split_launch();
  outside.mutable_allocation(0)->mutable_workers(1)->set_cores(0, 6);
  EXPECT_FALSE(job_launch_from_message(outside, 1, "n1", host).is_ok());
  overlay::Launch bad_rank = split_launch();
  bad_rank.mutable_allocation(0)->mutable_workers(0)->set_ranks(1, 8);
  EXPECT_FALSE(job_launch_from_message(bad_rank, 1, "n1", host).is_ok());
  overlay::Launch short_slots = split_launch();
  short_slots.mutable_allocation(0)->mutable_workers(0)->mutable_ranks()->RemoveLast();
  EXPECT_FALSE(job_launch_from_message(short_slots, 1, "n1", host).is_ok());
  overlay::Launch empty = split_launch();
  empty.mutable_allocation(0)->mutable_workers(0)->clear_ranks();
  EXPECT_FALSE(job_launch_from_message(empty, 1, "n1", host).is_ok());
}

}  // namespace
}  // namespace hpcq::agent

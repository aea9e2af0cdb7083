#include "lib/job/job_env.h"

#include <gtest/gtest.h>

namespace hpcq::job {
namespace {

Job two_node_job() {
  Job job;
  job.id = 42;
  job.spec.name = "sim";
  job.spec.cwd = "/home/u/run";
  job.spec.request.ntasks = 3;
  job.spec.request.cpus_per_task = 2;
  job.spec.env = {{"PATH", "/usr/bin"}, {"HPCQ_HOSTFILE", "/old/job/hostfile"}};
  for (const char* node : {"n1", "n2"}) {
    resource::NodeAllocation part;
    part.node = node;
    part.ntasks = 2;
    job.allocation.nodes.push_back(part);
  }
  return job;
}

TEST(JobEnv, LaunchEnvironmentIsTheSubmittersPlusTheJobsFacts) {
  const Environment env = launch_environment(two_node_job());
  EXPECT_EQ(env.at("PATH"), "/usr/bin");
  EXPECT_EQ(env.at("HPCQ_JOB_ID"), "42");
  EXPECT_EQ(env.at("HPCQ_JOB_NAME"), "sim");
  EXPECT_EQ(env.at("HPCQ_NODELIST"), "n[1-2]");  // hostlist form, in allocation order
  EXPECT_EQ(env.at("HPCQ_NNODES"), "2");
  EXPECT_EQ(env.at("HPCQ_NTASKS"), "4") << "the allocation's tasks, not the request's minimum";
  EXPECT_EQ(env.at("HPCQ_CPUS_PER_TASK"), "2");
  EXPECT_EQ(env.at("HPCQ_SUBMIT_DIR"), "/home/u/run");
  // The node names its hostfile; the submitter's own job's must not hide it.
  EXPECT_EQ(env.count("HPCQ_HOSTFILE"), 0u);
  // Set only when there is something to say.
  for (const char* absent : {"HPCQ_QUEUE", "HPCQ_ACCOUNT", "HPCQ_ARRAY_JOB_ID"}) {
    EXPECT_EQ(env.count(absent), 0u) << absent;
  }
}

TEST(JobEnv, QueueAccountAndArrayWhenTheJobHasThem) {
  Job job = two_node_job();
  job.spec.queue = "long";
  job.spec.account = "physics";
  job.spec.array_job_id = 40;
  job.spec.array_task_id = 2;
  const Environment env = launch_environment(job);
  EXPECT_EQ(env.at("HPCQ_QUEUE"), "long");
  EXPECT_EQ(env.at("HPCQ_ACCOUNT"), "physics");
  EXPECT_EQ(env.at("HPCQ_ARRAY_JOB_ID"), "40");
  EXPECT_EQ(env.at("HPCQ_ARRAY_TASK_ID"), "2");
}

TEST(JobEnv, NodeElasticGpuShellAndTaskLayers) {
  Environment env;
  add_node_environment(env, 1, "n2");
  EXPECT_EQ(env.at("HPCQ_NODEID"), "1");
  EXPECT_EQ(env.at("HPCQ_NODENAME"), "n2");
  add_shell_environment(env, "/jobs/42/hostfile", "/jobs/42/hostfile.mpich");
  EXPECT_EQ(env.at("HPCQ_HOSTFILE"), "/jobs/42/hostfile");
  EXPECT_EQ(env.at("HPCQ_HOSTFILE_MPICH"), "/jobs/42/hostfile.mpich");
  Environment elastic;
  add_elastic_environment(elastic, "/e/nodes", "/e/hostfile", "/e/hostfile.mpich", "/e/socket");
  add_shell_environment(elastic, "/jobs/42/hostfile", "/jobs/42/hostfile.mpich");
  EXPECT_EQ(elastic.at("HPCQ_HOSTFILE"), "/e/hostfile") << "the agent's wins";
  EXPECT_EQ(elastic.at("HPCQ_HOSTFILE_MPICH"), "/e/hostfile.mpich") << "the agent's wins";
  EXPECT_EQ(elastic.at("HPCQ_NODELIST_FILE"), "/e/nodes");
  EXPECT_EQ(elastic.at("HPCQ_RESIZE_SOCKET"), "/e/socket");
  Environment task;
  add_gpu_environment(task, {});
  EXPECT_TRUE(task.empty());
  add_gpu_environment(task, {0, 2});
  EXPECT_EQ(task.at("CUDA_VISIBLE_DEVICES"), "0,2");
  EXPECT_EQ(task.at("HPCQ_GPUS"), "0,2");
  EXPECT_EQ(task.at("CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
  add_task_environment(task, 5, 1, "2-3");
  EXPECT_EQ(task.at("HPCQ_TASK_RANK"), "5");
  EXPECT_EQ(task.at("HPCQ_LOCAL_TASK"), "1");
  EXPECT_EQ(task.at("HPCQ_CPUS"), "2-3");
}

// Emulated nodes (issue 45 item 16): Open MPI's settings for a shared host,
// where the job set none; a job's own choice stays.
TEST(JobEnv, SharedHostGivesOpenMpiItsSettingsUnlessTheJobHasItsOwn) {
  Environment env{{"OMPI_MCA_btl", "self,vader,tcp"}};
  add_shared_host_environment(env);
  EXPECT_EQ(env.at("OMPI_MCA_btl"), "self,vader,tcp");
  EXPECT_EQ(env.at("OMPI_MCA_pml"), "ob1");
  EXPECT_EQ(env.at("OMPI_MCA_mpi_yield_when_idle"), "1");
}

}  // namespace
}  // namespace hpcq::job

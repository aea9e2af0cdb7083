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
  add_node_environment(env, 1, "n2", 4);
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
  add_gpu_environment(task, {}, false);
  EXPECT_TRUE(task.empty());
  add_gpu_environment(task, {0, 2}, false);
  EXPECT_EQ(task.at("CUDA_VISIBLE_DEVICES"), "0,2");
  EXPECT_EQ(task.at("HPCQ_GPUS"), "0,2");
  EXPECT_EQ(task.at("CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
  add_task_environment(task, 5, 1, "2-3");
  EXPECT_EQ(task.at("HPCQ_TASK_RANK"), "5");
  EXPECT_EQ(task.at("HPCQ_LOCAL_TASK"), "1");
  EXPECT_EQ(task.at("HPCQ_CPUS"), "2-3");
  for (const char* slurm : {"SLURM_NODEID", "SLURM_PROCID", "SLURM_JOB_GPUS"}) {
    EXPECT_EQ(env.count(slurm) + task.count(slurm), 0u) << slurm << ": not a Slurm job";
  }
}

Job slurm_job() {
  Job job = two_node_job();
  job.spec.slurm_environment = true;
  job.user = "alice";
  job.uid = 1001;
  job.gid = 100;
  job.allocation.nodes[0].cores = {0, 1, 2, 3};
  job.allocation.nodes[1].cores = {0, 1};
  job.allocation.nodes[1].ntasks = 1;
  resource::NodeAllocation third;
  third.node = "n3";
  third.ntasks = 1;
  third.cores = {4, 5};
  job.allocation.nodes.push_back(third);
  job.spec.batch = true;
  return job;
}

TEST(JobEnv, ASlurmJobGetsSlurmsVariablesInSlurmsForms) {
  Job job = slurm_job();
  job.spec.queue = "debug";
  job.spec.request.mem_per_node_bytes = 2048ULL << 20;
  job.spec.array_job_id = 40;
  job.spec.array_task_id = 3;
  job.spec.array = "1-7:2%2";
  const Environment env = launch_environment(job);
  EXPECT_EQ(env.at("SLURM_JOB_ID"), "42");
  EXPECT_EQ(env.at("SLURM_JOBID"), "42");
  EXPECT_EQ(env.at("SLURM_JOB_NAME"), "sim");
  EXPECT_EQ(env.at("SLURM_JOB_USER"), "alice");
  EXPECT_EQ(env.at("SLURM_JOB_UID"), "1001");
  EXPECT_EQ(env.at("SLURM_JOB_NODELIST"), "n[1-3]");
  EXPECT_EQ(env.at("SLURM_NODELIST"), "n[1-3]");
  EXPECT_EQ(env.at("SLURM_NNODES"), "3");
  EXPECT_EQ(env.at("SLURM_JOB_NUM_NODES"), "3");
  EXPECT_EQ(env.at("SLURM_NTASKS"), "4");
  EXPECT_EQ(env.at("SLURM_NPROCS"), "4");
  EXPECT_EQ(env.at("SLURM_TASKS_PER_NODE"), "2,1(x2)");
  EXPECT_EQ(env.at("SLURM_JOB_CPUS_PER_NODE"), "4,2(x2)");
  EXPECT_EQ(env.at("SLURM_CPUS_PER_TASK"), "2");
  EXPECT_EQ(env.at("SLURM_MEM_PER_NODE"), "2048");
  EXPECT_EQ(env.at("SLURM_JOB_PARTITION"), "debug");
  EXPECT_EQ(env.at("SLURM_ARRAY_JOB_ID"), "40");
  EXPECT_EQ(env.at("SLURM_ARRAY_TASK_ID"), "3");
  EXPECT_EQ(env.at("SLURM_ARRAY_TASK_COUNT"), "4");
  EXPECT_EQ(env.at("SLURM_ARRAY_TASK_MIN"), "1");
  EXPECT_EQ(env.at("SLURM_ARRAY_TASK_MAX"), "7");
  EXPECT_EQ(env.at("SLURM_ARRAY_TASK_STEP"), "2");
  // A batch script is no step; what the job did not ask for is not set.
  for (const char* absent : {"SLURM_STEP_ID", "SLURM_NTASKS_PER_NODE", "SLURM_MEM_PER_CPU",
                             "SLURM_JOB_ACCOUNT", "SLURM_RESTART_COUNT", "SLURM_PROCID"}) {
    EXPECT_EQ(env.count(absent), 0u) << absent;
  }
  EXPECT_EQ(launch_environment(two_node_job()).count("SLURM_JOB_ID"), 0u) << "not a Slurm job";
}

TEST(JobEnv, ASlurmJobThatIsNoBatchScriptIsStepZero) {
  Job job = slurm_job();
  job.spec.batch = false;
  const Environment env = launch_environment(job);
  EXPECT_EQ(env.at("SLURM_STEP_ID"), "0");
  EXPECT_EQ(env.at("SLURM_STEP_NUM_TASKS"), "4");
  EXPECT_EQ(env.at("SLURM_STEP_NODELIST"), "n[1-3]");
  EXPECT_EQ(env.at("SLURM_STEP_TASKS_PER_NODE"), "2,1(x2)");
}

TEST(JobEnv, ASlurmStepSeesItsOwnNodesAndTasksAndNotItsCallersTask) {
  const Job job = slurm_job();
  StepRecord step;
  step.id = 3;
  step.env = launch_environment(job);
  add_node_environment(step.env, 0, "n1", 4);
  add_task_environment(step.env, 0, 0, "0-3");
  resource::NodeAllocation part;
  part.node = "n2";
  part.ntasks = 2;
  step.allocation.nodes.push_back(part);
  const Environment env = step_environment(job, step);
  EXPECT_EQ(env.at("SLURM_STEP_ID"), "2") << "Slurm's steps count from 0, hpcq's from 1";
  EXPECT_EQ(env.at("SLURM_STEP_NODELIST"), "n2");
  EXPECT_EQ(env.at("SLURM_NODELIST"), "n[1-3]") << "the job's, as srun leaves it";
  EXPECT_EQ(env.at("SLURM_JOB_NODELIST"), "n[1-3]") << "the job's stays";
  EXPECT_EQ(env.at("SLURM_NTASKS"), "2");
  EXPECT_EQ(env.at("SLURM_STEP_NUM_NODES"), "1");
  for (const char* callers :
       {"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURMD_NODENAME", "SLURM_CPUS_ON_NODE"}) {
    EXPECT_EQ(env.count(callers), 0u) << callers;
  }
}

TEST(JobEnv, ASlurmJobsNodeGpuAndTaskLayers) {
  Environment env = launch_environment(slurm_job());
  add_node_environment(env, 1, "n2", 2);
  EXPECT_EQ(env.at("SLURM_NODEID"), "1");
  EXPECT_EQ(env.at("SLURMD_NODENAME"), "n2");
  EXPECT_EQ(env.at("SLURM_CPUS_ON_NODE"), "2");
  Environment task;
  add_gpu_environment(task, {1, 3}, /*slurm=*/true);
  EXPECT_EQ(task.at("SLURM_JOB_GPUS"), "1,3");
  EXPECT_EQ(task.at("SLURM_GPUS_ON_NODE"), "2");
  add_task_environment(env, 5, 1, "2-3");
  EXPECT_EQ(env.at("SLURM_PROCID"), "5");
  EXPECT_EQ(env.at("SLURM_LOCALID"), "1");
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

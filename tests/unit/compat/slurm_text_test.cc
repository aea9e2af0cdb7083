// Slurm's forms of hpcq's facts (compat/slurm/slurm_text.h), as scripts
// and portals parse them.
#include "compat/slurm/slurm_text.h"

#include <gtest/gtest.h>

namespace hpcq::compat {
namespace {

TEST(SlurmText, StatesAndTheirCompactForms) {
  EXPECT_EQ(state_name(v1::PENDING), "PENDING");
  EXPECT_EQ(state_name(v1::NODE_FAIL), "NODE_FAIL");
  EXPECT_EQ(state_name(v1::FAILED, "out of memory: the kernel killed 1 process(es)"),
            "OUT_OF_MEMORY");
  EXPECT_EQ(state_name(v1::FAILED, "node1: task 0: exited with code 3"), "FAILED");
  EXPECT_EQ(state_name(v1::CANCELLED, "deadline: it can no longer end by its --deadline"),
            "DEADLINE");
  EXPECT_EQ(compact_state("PENDING"), "PD");
  EXPECT_EQ(compact_state("RUNNING"), "R");
  EXPECT_EQ(compact_state("TIMEOUT"), "TO");
  EXPECT_EQ(compact_state("OUT_OF_MEMORY"), "OOM");
}

TEST(SlurmText, IdsOfArraysAndSteps) {
  v1::Job job;
  job.set_id(12);
  EXPECT_EQ(job_id_text(job), "12");
  job.set_array_job_id(10);
  job.set_array_task_id(2);
  EXPECT_EQ(job_id_text(job), "10_2");
  EXPECT_EQ(slurm_step_of(1), 0u) << "hpcq's first step is Slurm's step 0";
  EXPECT_EQ(hpcq_step_of(0), 1u);
}

TEST(SlurmText, ExitCodesAsCodeColonSignal) {
  EXPECT_EQ(exit_code_text(0, v1::COMPLETED), "0:0");
  EXPECT_EQ(exit_code_text(3, v1::FAILED), "3:0");
  EXPECT_EQ(exit_code_text(137, v1::CANCELLED), "0:9");
  EXPECT_EQ(exit_code_text(143, v1::TIMEOUT), "0:0") << "as Slurm shows a job out of time";
}

TEST(SlurmText, DurationsAndTimes) {
  EXPECT_EQ(elapsed_text(5), "00:00:05");
  EXPECT_EQ(elapsed_text(3 * 86400 + 3661), "3-01:01:01");
  EXPECT_EQ(squeue_duration(5), "0:05");
  EXPECT_EQ(squeue_duration(3600), "1:00:00");
  EXPECT_EQ(squeue_duration(86400 + 59), "1-00:00:59");
  EXPECT_EQ(limit_text(0, true), "UNLIMITED");
  EXPECT_EQ(limit_text(1800, true), "30:00");
  EXPECT_EQ(limit_text(1800, false), "00:30:00");
  EXPECT_EQ(time_text(0), "Unknown");
  EXPECT_EQ(cpu_time_text(4'500), "00:00.004");
  EXPECT_EQ(cpu_time_text(61'250'000), "01:01.250");
  EXPECT_EQ(size_text(1000, 'K'), "1K");
  EXPECT_EQ(size_text(2048ULL << 20, 'M'), "2048M");
}

TEST(SlurmText, PercentFormats) {
  auto fields = parse_percent_format("%.18i %-9P|%j%%");
  ASSERT_TRUE(fields.is_ok()) << fields.status().message();
  ASSERT_EQ(fields->size(), 4u);
  EXPECT_EQ((*fields)[0].name, "i");
  EXPECT_TRUE((*fields)[0].right);
  EXPECT_EQ((*fields)[0].width, 18);
  EXPECT_EQ((*fields)[1].literal, " ");
  EXPECT_EQ((*fields)[2].literal, "|");
  EXPECT_EQ((*fields)[3].name, "") << "the trailing text";
  EXPECT_EQ((*fields)[3].literal, "%");
  EXPECT_FALSE(parse_percent_format("%.18").is_ok());
  EXPECT_EQ(pad("12", (*fields)[0]), std::string(16, ' ') + "12");
  Field narrow{"", "j", 5, false, true};
  EXPECT_EQ(pad("longname", narrow), "longn") << "squeue cuts";
  EXPECT_EQ(pad("longname", narrow, '+'), "long+") << "sacct marks the cut";
  EXPECT_EQ(pad("ab", narrow), "ab   ");
}

TEST(SlurmText, NamedFormats) {
  auto sacct = parse_named_format("JobID,State%20,ExitCode", '%');
  ASSERT_TRUE(sacct.is_ok());
  ASSERT_EQ(sacct->size(), 3u);
  EXPECT_EQ((*sacct)[1].name, "State");
  EXPECT_EQ((*sacct)[1].width, 20);
  EXPECT_FALSE((*sacct)[0].width_given);
  auto squeue = parse_named_format("JobID:.10,Name", ':');
  ASSERT_TRUE(squeue.is_ok());
  EXPECT_TRUE((*squeue)[0].right);
  EXPECT_EQ((*squeue)[0].width, 10);
  EXPECT_FALSE(parse_named_format("State%x", '%').is_ok());
  EXPECT_FALSE(parse_named_format("State%9999999", '%').is_ok());
  EXPECT_FALSE(parse_named_format(",", '%').is_ok());
}

TEST(SlurmText, Partitions) {
  EXPECT_EQ(partition_of(""), "default");
  EXPECT_EQ(partition_of("long"), "long");
}

}  // namespace
}  // namespace hpcq::compat

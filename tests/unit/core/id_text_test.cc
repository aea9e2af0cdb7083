#include "lib/core/id_text.h"

#include <gtest/gtest.h>

namespace hpcq {
namespace {

std::string error_of(const Status& s) {
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  return s.message();
}

TEST(JobIdText, DigitsOnly) {
  EXPECT_EQ(*parse_job_id("17"), 17u);
  EXPECT_EQ(*parse_job_id("017"), 17u);
  EXPECT_EQ(*parse_job_id("18446744073709551615"), 18446744073709551615ULL);
  for (const char* bad : {"", "0", "+1", "-1", " 1", "1 ", "1x", "0x10", "18446744073709551616",
                          "99999999999999999999999", "1.5", "1e3"}) {
    EXPECT_FALSE(parse_job_id(bad).is_ok()) << bad;
  }
  EXPECT_EQ(error_of(parse_job_id("+1").status()), "'+1' is not a job id (want N: digits)");
}

TEST(JobIdText, StepsAreDigitsFromOne) {
  auto plain = split_job_step("17");
  ASSERT_TRUE(plain.is_ok());
  EXPECT_EQ(plain->job, "17");
  EXPECT_EQ(plain->step, 0u);
  auto step = split_job_step("17.2");
  ASSERT_TRUE(step.is_ok());
  EXPECT_EQ(step->job, "17");
  EXPECT_EQ(step->step, 2u);
  auto element = split_job_step("18_3.1");  // the job part is the caller's to read
  ASSERT_TRUE(element.is_ok());
  EXPECT_EQ(element->job, "18_3");
  EXPECT_EQ(split_job_step("17.4294967295")->step, 4294967295u);
  for (const char* bad : {"17.", "17.0", "17.+1", "17. 1", "17.-1", "17.1.2", "17.4294967296", ".1",
                          "17.1 ", "17.x"}) {
    EXPECT_FALSE(split_job_step(bad).is_ok()) << bad;
  }
  EXPECT_EQ(error_of(split_job_step("17.+1").status()),
            "'17.+1' is not a job or step id (want JOB or JOB.STEP: digits, steps from 1)");
}

}  // namespace
}  // namespace hpcq

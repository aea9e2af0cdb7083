#include "lib/job/submission_keys.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

namespace hpcq::job {
namespace {

using Made = SubmissionKeys::Made;
using Claim = SubmissionKeys::Claim;

// Records what each answer got.
struct Answers {
  std::vector<Result<Made>> got;
  SubmissionKeys::Answer next() {
    return [this](const Result<Made>& r) { got.push_back(r); };
  }
};

TEST(SubmissionKeys, AFirstSubmissionIsNewAndARepeatGetsItsJobs) {
  SubmissionKeys keys;
  Answers answers;
  EXPECT_EQ(keys.claim(1000, "k1", answers.next()), Claim::kNew);
  EXPECT_EQ(keys.find(1000, "k1"), std::nullopt);  // in flight
  keys.made(1000, "k1", Made{17, 1});
  EXPECT_TRUE(answers.got.empty());  // the first's answer is the caller's own
  EXPECT_EQ(keys.claim(1000, "k1", answers.next()), Claim::kAnswered);
  ASSERT_EQ(answers.got.size(), 1u);
  ASSERT_TRUE(answers.got[0].is_ok());
  EXPECT_EQ(*answers.got[0], (Made{17, 1}));
  EXPECT_EQ(keys.find(1000, "k1"), (Made{17, 1}));
}

TEST(SubmissionKeys, ARepeatWhileInFlightWaitsForItsOutcome) {
  SubmissionKeys keys;
  Answers answers;
  ASSERT_EQ(keys.claim(1000, "k", answers.next()), Claim::kNew);
  EXPECT_EQ(keys.claim(1000, "k", answers.next()), Claim::kWaiting);
  EXPECT_EQ(keys.claim(1000, "k", answers.next()), Claim::kWaiting);
  EXPECT_TRUE(answers.got.empty());
  keys.made(1000, "k", Made{40, 10});  // an array of 10
  ASSERT_EQ(answers.got.size(), 2u);
  for (const auto& r : answers.got) {
    ASSERT_TRUE(r.is_ok());
    EXPECT_EQ(*r, (Made{40, 10}));
  }
}

TEST(SubmissionKeys, AFailedSubmissionIsForgottenAndItsWaitersToldWhy) {
  SubmissionKeys keys;
  Answers answers;
  ASSERT_EQ(keys.claim(1000, "k", answers.next()), Claim::kNew);
  ASSERT_EQ(keys.claim(1000, "k", answers.next()), Claim::kWaiting);
  keys.failed(1000, "k", unavailable("the job could not be stored: etcd is gone"));
  ASSERT_EQ(answers.got.size(), 1u);
  EXPECT_EQ(answers.got[0].status().code(), Code::kUnavailable);
  EXPECT_EQ(keys.size(), 0u);
  // The next repeat makes the jobs.
  EXPECT_EQ(keys.claim(1000, "k", answers.next()), Claim::kNew);
}

TEST(SubmissionKeys, KeysAreEachUsersOwn) {
  SubmissionKeys keys;
  Answers answers;
  ASSERT_EQ(keys.claim(1000, "same", answers.next()), Claim::kNew);
  keys.made(1000, "same", Made{5, 1});
  // Another user with the same key text makes a job of its own and learns
  // nothing of the first's.
  EXPECT_EQ(keys.claim(1001, "same", answers.next()), Claim::kNew);
  EXPECT_TRUE(answers.got.empty());
  EXPECT_EQ(keys.find(1001, "same"), std::nullopt);
  keys.made(1001, "same", Made{6, 1});
  EXPECT_EQ(keys.find(1000, "same"), (Made{5, 1}));
  EXPECT_EQ(keys.find(1001, "same"), (Made{6, 1}));
}

TEST(SubmissionKeys, LoadedJobsRestoreTheirKeysAnArrayAsOneEntry) {
  // A leader after a failover loads jobs in any order.
  SubmissionKeys keys;
  keys.loaded(1000, "array", 12);
  keys.loaded(1000, "array", 10);
  keys.loaded(1000, "array", 11);
  keys.loaded(1000, "one", 13);
  EXPECT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys.find(1000, "array"), (Made{10, 3}));
  Answers answers;
  EXPECT_EQ(keys.claim(1000, "one", answers.next()), Claim::kAnswered);
  ASSERT_EQ(answers.got.size(), 1u);
  EXPECT_EQ(*answers.got[0], (Made{13, 1}));
  EXPECT_EQ(keys.claim(0, "one", answers.next()), Claim::kNew);  // root's is another
}

TEST(SubmissionKeys, KeysArePlainAndShort) {
  EXPECT_TRUE(check_submission_key("").is_ok());
  EXPECT_TRUE(check_submission_key("0123456789abcdef0123456789ABCDEF").is_ok());
  EXPECT_TRUE(check_submission_key("a_b-c").is_ok());
  EXPECT_TRUE(check_submission_key(std::string(kMaxSubmissionKeyChars, 'a')).is_ok());
  EXPECT_EQ(check_submission_key(std::string(kMaxSubmissionKeyChars + 1, 'a')).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(check_submission_key("a b").code(), Code::kInvalidArgument);
  EXPECT_EQ(check_submission_key("k\n").code(), Code::kInvalidArgument);
  EXPECT_NE(check_submission_key("a/b").message().find("submission_key"), std::string::npos);
}

}  // namespace
}  // namespace hpcq::job

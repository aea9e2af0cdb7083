// Unacknowledged job ends survive a restart of the agent, in order, and go
// away when acknowledged.
#include "agent/end_journal.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace hpcq::agent {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/hpcq-journal-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string dir() const { return path_ + "/ends"; }

 private:
  std::string path_;
};

overlay::JobUpdate end(JobId job, std::uint32_t attempt, int exit_code) {
  overlay::JobUpdate u;
  u.set_job_id(job);
  u.set_attempt(attempt);
  u.set_kind(overlay::JobUpdate::COMPLETED);
  u.set_exit_code(exit_code);
  return u;
}

std::vector<JobId> jobs_of(const EndJournal& j) {
  std::vector<JobId> out;
  for (const auto& u : j.entries()) out.push_back(u.job_id());
  return out;
}

TEST(EndJournal, SurvivesRestartInOrderUntilAcknowledged) {
  TempDir tmp;
  {
    auto j = EndJournal::open(tmp.dir());
    ASSERT_TRUE(j.is_ok()) << j.status().message();
    ASSERT_TRUE((*j)->add(end(9, 0, 1)).is_ok());
    ASSERT_TRUE((*j)->add(end(3, 0, 0)).is_ok());
    ASSERT_TRUE((*j)->add(end(5, 1, 0)).is_ok());
    (*j)->ack(3, 0);
    (*j)->ack(5, 0);  // another attempt: kept
    EXPECT_EQ(jobs_of(**j), (std::vector<JobId>{9, 5}));
  }
  auto j = EndJournal::open(tmp.dir());
  ASSERT_TRUE(j.is_ok());
  EXPECT_EQ(jobs_of(**j), (std::vector<JobId>{9, 5}));
  EXPECT_EQ((*j)->entries()[0].exit_code(), 1);
  // New ends go after the old ones, and a job's later end replaces its earlier one.
  ASSERT_TRUE((*j)->add(end(1, 0, 0)).is_ok());
  ASSERT_TRUE((*j)->add(end(9, 1, 7)).is_ok());
  EXPECT_EQ(jobs_of(**j), (std::vector<JobId>{5, 1, 9}));
  (*j)->ack(5, 1);
  (*j)->ack(1, 0);
  (*j)->ack(9, 1);
  EXPECT_EQ((*j)->size(), 0u);
  auto again = EndJournal::open(tmp.dir());
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ((*again)->size(), 0u);
  EXPECT_TRUE(fs::is_empty(tmp.dir()));
}

TEST(EndJournal, DropsTornAndForeignFiles) {
  TempDir tmp;
  {
    auto j = EndJournal::open(tmp.dir());
    ASSERT_TRUE(j.is_ok());
    ASSERT_TRUE((*j)->add(end(4, 0, 0)).is_ok());
  }
  std::ofstream(tmp.dir() + "/7-2.pb.tmp") << "half";
  std::ofstream(tmp.dir() + "/8-3.pb") << "\xff\xff\xff not a protobuf";
  auto j = EndJournal::open(tmp.dir());
  ASSERT_TRUE(j.is_ok());
  EXPECT_EQ(jobs_of(**j), (std::vector<JobId>{4}));
  EXPECT_FALSE(fs::exists(tmp.dir() + "/7-2.pb.tmp"));
}

}  // namespace
}  // namespace hpcq::agent

// Unacknowledged job ends survive a restart of the agent, in order, and go
// away when acknowledged; so do the launches of the parts a node runs.
#include "agent/run_journal.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>

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
    auto j = EndJournal::open(tmp.dir(), "end journal", true);
    ASSERT_TRUE(j.is_ok()) << j.status().message();
    ASSERT_TRUE((*j)->add(end(9, 0, 1)).is_ok());
    ASSERT_TRUE((*j)->add(end(3, 0, 0)).is_ok());
    ASSERT_TRUE((*j)->add(end(5, 1, 0)).is_ok());
    (*j)->ack(3, 0);
    (*j)->ack(5, 0);  // another attempt: kept
    EXPECT_EQ(jobs_of(**j), (std::vector<JobId>{9, 5}));
  }
  auto j = EndJournal::open(tmp.dir(), "end journal", true);
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
  auto again = EndJournal::open(tmp.dir(), "end journal", true);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ((*again)->size(), 0u);
}

// A crash in the middle of an append leaves part of a record: it is cut off,
// and what is appended after the restart is read back after the next.
TEST(EndJournal, CutsOffATornTail) {
  for (int cut : {1, 7, 9, 20}) {
    TempDir tmp;
    {
      auto j = EndJournal::open(tmp.dir(), "end journal", true);
      ASSERT_TRUE(j.is_ok());
      ASSERT_TRUE((*j)->add(end(4, 0, 0)).is_ok());
      ASSERT_TRUE((*j)->add(end(6, 0, 3)).is_ok());
    }
    const std::string file = tmp.dir() + "/journal";
    fs::resize_file(file, fs::file_size(file) - static_cast<std::uintmax_t>(cut));
    {
      auto j = EndJournal::open(tmp.dir(), "end journal", true);
      ASSERT_TRUE(j.is_ok());
      EXPECT_EQ(jobs_of(**j), (std::vector<JobId>{4})) << "cut " << cut;
      ASSERT_TRUE((*j)->add(end(8, 0, 0)).is_ok());
    }
    auto j = EndJournal::open(tmp.dir(), "end journal", true);
    ASSERT_TRUE(j.is_ok());
    EXPECT_EQ(jobs_of(**j), (std::vector<JobId>{4, 8})) << "cut " << cut;
  }
}

TEST(EndJournal, CutsOffGarbageAfterTheLastRecord) {
  TempDir tmp;
  {
    auto j = EndJournal::open(tmp.dir(), "end journal", true);
    ASSERT_TRUE(j.is_ok());
    ASSERT_TRUE((*j)->add(end(4, 0, 0)).is_ok());
  }
  std::ofstream(tmp.dir() + "/journal", std::ios::app) << std::string(64, '\xff');
  auto j = EndJournal::open(tmp.dir(), "end journal", true);
  ASSERT_TRUE(j.is_ok());
  EXPECT_EQ(jobs_of(**j), (std::vector<JobId>{4}));
}

// Damage in the middle (a byte the disk changed) loses only the record it
// hits; the file is rewritten without it.
TEST(EndJournal, SkipsDamageInTheMiddleAndKeepsTheRecordsAfterIt) {
  for (std::uintmax_t at : {0u, 3u, 9u, 14u}) {
    TempDir tmp;
    {
      auto j = EndJournal::open(tmp.dir(), "end journal", true);
      ASSERT_TRUE(j.is_ok());
      ASSERT_TRUE((*j)->add(end(4, 0, 1)).is_ok());
      ASSERT_TRUE((*j)->add(end(6, 0, 2)).is_ok());
      ASSERT_TRUE((*j)->add(end(8, 0, 3)).is_ok());
      (*j)->ack(6, 0);
    }
    const std::string file = tmp.dir() + "/journal";
    {
      std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(static_cast<std::streamoff>(at));
      char c = 0;
      f.get(c);
      f.seekp(static_cast<std::streamoff>(at));
      f.put(static_cast<char>(c ^ 0x5a));
    }
    const std::uintmax_t damaged_size = fs::file_size(file);
    {
      auto j = EndJournal::open(tmp.dir(), "end journal", true);
      ASSERT_TRUE(j.is_ok());
      EXPECT_EQ(jobs_of(**j), (std::vector<JobId>{8})) << "byte " << at;
      EXPECT_LT(fs::file_size(file), damaged_size) << "rewritten without the damage";
      ASSERT_TRUE((*j)->add(end(9, 0, 0)).is_ok());
    }
    auto j = EndJournal::open(tmp.dir(), "end journal", true);
    ASSERT_TRUE(j.is_ok());
    EXPECT_EQ(jobs_of(**j), (std::vector<JobId>{8, 9})) << "byte " << at;
    EXPECT_EQ((*j)->entries()[0].exit_code(), 3);
  }
}

// An older agent kept one file per end: they are taken into the journal, in
// their order; a temporary or damaged one is removed.
TEST(EndJournal, TakesInAnOlderAgentsFiles) {
  TempDir tmp;
  fs::create_directories(tmp.dir());
  end(7, 0, 2).SerializeToOstream(
      std::make_unique<std::ofstream>(tmp.dir() + "/12-7.pb", std::ios::binary).get());
  end(3, 1, 0).SerializeToOstream(
      std::make_unique<std::ofstream>(tmp.dir() + "/5-3.pb", std::ios::binary).get());
  std::ofstream(tmp.dir() + "/13-2.pb.tmp") << "half";
  std::ofstream(tmp.dir() + "/14-3.pb") << "\xff\xff\xff not a protobuf";
  {
    auto j = EndJournal::open(tmp.dir(), "end journal", true);
    ASSERT_TRUE(j.is_ok());
    EXPECT_EQ(jobs_of(**j), (std::vector<JobId>{3, 7}));
    ASSERT_TRUE((*j)->add(end(9, 0, 0)).is_ok());
  }
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(tmp.dir())) names.push_back(e.path().filename());
  EXPECT_EQ(names, (std::vector<std::string>{"journal"}));
  auto j = EndJournal::open(tmp.dir(), "end journal", true);
  ASSERT_TRUE(j.is_ok());
  EXPECT_EQ(jobs_of(**j), (std::vector<JobId>{3, 7, 9}));
  EXPECT_EQ((*j)->entries()[1].exit_code(), 2);
}

// Ends acknowledged as they come do not grow the file without bound, and one
// never acknowledged outlives every compaction.
TEST(EndJournal, StaysSmallWhileEndsAreAcknowledged) {
  TempDir tmp;
  {
    constexpr std::uint64_t kCompactBytes = 4096;
    auto j = EndJournal::open(tmp.dir(), "end journal", true, kCompactBytes);
    ASSERT_TRUE(j.is_ok());
    ASSERT_TRUE((*j)->add(end(1, 0, 5)).is_ok());
    for (JobId job = 2; job < 1000; ++job) {
      ASSERT_TRUE((*j)->add(end(job, 0, 0)).is_ok());
      (*j)->ack(job, 0);
      ASSERT_LE(fs::file_size(tmp.dir() + "/journal"), kCompactBytes + 100) << job;
    }
  }
  {
    auto j = EndJournal::open(tmp.dir(), "end journal", true, 4096);
    ASSERT_TRUE(j.is_ok());
    EXPECT_EQ(jobs_of(**j), (std::vector<JobId>{1}));
    EXPECT_EQ((*j)->entries()[0].exit_code(), 5);
    (*j)->ack(1, 0);
    for (JobId job = 1000; job < 1200; ++job) {  // emptied when none is left
      ASSERT_TRUE((*j)->add(end(job, 0, 0)).is_ok());
      (*j)->ack(job, 0);
    }
    EXPECT_LT(fs::file_size(tmp.dir() + "/journal"), 4096u);
  }
  auto j = EndJournal::open(tmp.dir(), "end journal", true);
  ASSERT_TRUE(j.is_ok());
  EXPECT_EQ((*j)->size(), 0u);
}

overlay::Launch launch(JobId job, std::uint32_t attempt, std::uint32_t step) {
  overlay::Launch l;
  l.set_job_id(job);
  l.set_attempt(attempt);
  l.set_step(step);
  l.add_argv("sleep");
  return l;
}

TEST(PartJournal, KeepsEachRunningPartAndStepUntilItsEndIsJournaled) {
  TempDir tmp;
  {
    auto j = PartJournal::open(tmp.dir(), "part journal", /*sync=*/false);
    ASSERT_TRUE(j.is_ok());
    ASSERT_TRUE((*j)->add(launch(7, 0, 0)).is_ok());
    ASSERT_TRUE((*j)->add(launch(7, 0, 2)).is_ok());
    ASSERT_TRUE((*j)->add(launch(8, 0, 0)).is_ok());
    ASSERT_TRUE((*j)->add(launch(8, 1, 0)).is_ok());  // requeued here: replaces attempt 0
    (*j)->ack(7, 0, 2);                               // the step ended
    (*j)->ack(8, 0);                                  // an older attempt's end: kept
  }
  auto j = PartJournal::open(tmp.dir(), "part journal", false);
  ASSERT_TRUE(j.is_ok());
  const std::vector<overlay::Launch> parts = (*j)->entries();
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].job_id(), 7u);
  EXPECT_EQ(parts[0].step(), 0u);
  EXPECT_EQ(parts[1].job_id(), 8u);
  EXPECT_EQ(parts[1].attempt(), 1u);
  EXPECT_EQ(parts[1].argv(0), "sleep");
}

}  // namespace
}  // namespace hpcq::agent

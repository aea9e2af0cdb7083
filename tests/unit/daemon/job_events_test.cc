// The WatchJobs feed: resuming by sequence number, falling behind the ring,
// and numbers from an earlier run of the daemon.
#include "daemon/job_events.h"

#include <gtest/gtest.h>

namespace hpcq::daemon {
namespace {

using std::chrono::milliseconds;

v1::JobEvent event(std::uint64_t job) {
  v1::JobEvent e;
  e.set_id(job);
  return e;
}

TEST(JobEvents, ResumeAfterASequenceNumber) {
  JobEvents events(10, 1000);
  EXPECT_EQ(events.last_seq(), 999u);
  for (std::uint64_t j = 1; j <= 5; ++j) events.append(event(j), 7);
  auto all = events.read(0, 7, false, 0, milliseconds(0));
  ASSERT_EQ(all.events.size(), 5u);
  EXPECT_EQ(all.events[0].seq(), 1000u);
  auto rest = events.read(1002, 7, false, 0, milliseconds(0));
  ASSERT_EQ(rest.events.size(), 2u);
  EXPECT_EQ(rest.events[0].id(), 4u);
  EXPECT_FALSE(rest.fell_behind);
  EXPECT_TRUE(events.read(1004, 8, false, 0, milliseconds(0)).events.empty());  // not theirs
  EXPECT_EQ(events.read(1002, 8, true, 0, milliseconds(0)).events.size(), 2u);  // admin
}

TEST(JobEvents, FallingBehindTheRingIsReported) {
  JobEvents events(3, 1);
  for (std::uint64_t j = 1; j <= 6; ++j) events.append(event(j), 7);  // keeps seq 4..6
  auto behind = events.read(2, 7, false, 0, milliseconds(0));
  EXPECT_TRUE(behind.fell_behind);
  EXPECT_EQ(behind.oldest, 4u);
  EXPECT_FALSE(events.read(3, 7, false, 0, milliseconds(0)).fell_behind);
}

TEST(JobEvents, NumbersOfAnEarlierRunAreGone) {
  JobEvents earlier(100, 5'000);
  for (std::uint64_t j = 1; j <= 3; ++j) earlier.append(event(j), 7);
  const std::uint64_t resume = earlier.last_seq();
  JobEvents restarted(100, 9'000);  // a later start time
  auto empty = restarted.read(resume, 7, false, 0, milliseconds(0));
  EXPECT_TRUE(empty.fell_behind);  // even before anything new happened
  restarted.append(event(4), 7);
  auto after = restarted.read(resume, 7, false, 0, milliseconds(0));
  EXPECT_TRUE(after.fell_behind);
  EXPECT_EQ(after.oldest, 9'000u);
}

}  // namespace
}  // namespace hpcq::daemon

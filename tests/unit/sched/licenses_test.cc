// Plugin "licenses": cluster-wide license counts ([licenses], -L).
#include <gtest/gtest.h>

#include <vector>

#include "lib/sched/scheduler.h"
#include "tests/unit/sched/fixtures.h"

namespace hpcq::sched {
namespace {

using namespace fixture;  // make_pool, pending, running, started, run

PendingJob with_licenses(PendingJob job, std::map<std::string, int> licenses) {
  job.licenses = std::move(licenses);
  return job;
}

TEST(LicensesTest, RunningAndThisCyclesJobsHoldTheirLicenses) {
  resource::NodePool pool = make_pool(4);
  SitePolicy site;
  site.licenses = {{"matlab", 3}, {"fluent", 1}};
  Snapshot snap;
  snap.pool = &pool;
  snap.site = &site;
  RunningJob holder = running(pool, 100, {1}, {0}, "", 0);
  holder.licenses = {{"matlab", 1}};
  snap.running.push_back(holder);
  snap.queue.push_back(with_licenses(pending(1, 1), {{"matlab", 1}}));
  snap.queue.push_back(with_licenses(pending(2, 1), {{"matlab", 1}, {"fluent", 1}}));
  snap.queue.push_back(with_licenses(pending(3, 1), {{"matlab", 1}}));  // the 4th: none left
  snap.queue.push_back(with_licenses(pending(4, 1), {{"fluent", 1}}));  // taken by job 2
  // Without the plugin every job starts; with it, 3 and 4 wait (and, with
  // fcfs, so does everything behind them).
  EXPECT_EQ(started(run(snap, {"allocate"}, {"fcfs"})), (std::vector<JobId>{1, 2, 3, 4}));
  EXPECT_EQ(started(run(snap, {"allocate"}, {"licenses"})), (std::vector<JobId>{1, 2}));
}

TEST(LicensesTest, AJobWithoutLicensesIsNotHeldBack) {
  resource::NodePool pool = make_pool(2);
  SitePolicy site;
  site.licenses = {{"matlab", 1}};
  Snapshot snap;
  snap.pool = &pool;
  snap.site = &site;
  snap.queue.push_back(with_licenses(pending(1, 1), {{"matlab", 2}}));  // more than there are
  snap.queue.push_back(pending(2, 1));
  snap.queue.push_back(with_licenses(pending(3, 1), {{"other", 1}}));  // not configured
  EXPECT_EQ(started(run(snap, {"allocate"}, {"licenses"})), (std::vector<JobId>{2}));
}

TEST(LicensesTest, BackfillCountsThemToo) {
  resource::NodePool pool = make_pool(2);
  SitePolicy site;
  site.licenses = {{"matlab", 1}};
  Snapshot snap;
  snap.pool = &pool;
  snap.site = &site;
  snap.queue.push_back(with_licenses(pending(1, 1), {{"matlab", 1}}));
  snap.queue.push_back(with_licenses(pending(2, 1), {{"matlab", 1}}));
  snap.queue.push_back(pending(3, 1));
  EXPECT_EQ(started(run(snap, {"allocate", "backfill"}, {"fcfs", "licenses"})),
            (std::vector<JobId>{1, 3}));
}

}  // namespace
}  // namespace hpcq::sched

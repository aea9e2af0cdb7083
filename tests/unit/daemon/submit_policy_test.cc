// The site's policy applied to submissions: queues, time limits, accounts,
// QOS and who may raise a priority.
#include "daemon/submit_policy.h"

#include <gtest/gtest.h>

namespace hpcq::daemon {
namespace {

ClusterConfig site_config() {
  ClusterConfig c;
  c.default_time_limit_s = 3600;
  QueueConfig batch;
  batch.name = "batch";
  batch.limits.max_time_limit_s = 7200;
  QueueConfig debug;
  debug.name = "debug";
  debug.default_time_limit_s = 600;
  debug.limits.max_time_limit_s = 1800;
  c.site.queues = {batch, debug};
  c.site.default_queue = "batch";
  c.site.accounts = {{"physics", "", 1.0}, {"chem", "", 1.0}};
  c.site.users = {{1000, "physics", 1.0}, {1000, "chem", 1.0}};
  c.site.qos = {{"high", 10, {}}};
  return c;
}

job::JobSpec spec() {
  job::JobSpec s;
  s.argv = {"true"};
  return s;
}

TEST(SubmitPolicy, DefaultQueueAccountAndTimeLimit) {
  job::JobSpec s = spec();
  ASSERT_TRUE(apply_submit_policy(site_config(), 1000, false, s).is_ok());
  EXPECT_EQ(s.queue, "batch");
  EXPECT_EQ(s.account, "physics");  // the first association
  EXPECT_EQ(s.time_limit_s, 3600);

  job::JobSpec d = spec();
  d.queue = "debug";
  ASSERT_TRUE(apply_submit_policy(site_config(), 1000, false, d).is_ok());
  EXPECT_EQ(d.time_limit_s, 600);  // the queue's default

  job::JobSpec u = spec();
  u.queue = "debug";
  u.time_limit_s = job::JobSpec::kUnlimited;
  ASSERT_TRUE(apply_submit_policy(site_config(), 1000, false, u).is_ok());
  EXPECT_EQ(u.time_limit_s, 1800);  // UNLIMITED is the queue's maximum
}

TEST(SubmitPolicy, RefusalsNameTheOption) {
  struct Case {
    void (*change)(job::JobSpec&);
    std::uint32_t uid;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {[](job::JobSpec& s) { s.queue = "gpu"; }, 1000,
       "--queue: unknown queue 'gpu' (known: batch, debug)"},
      {[](job::JobSpec& s) { s.time_limit_s = 7201; }, 1000,
       "--time: 7201 s exceeds the limit of 7200 s of queue 'batch'"},
      {[](job::JobSpec& s) { s.account = "bio"; }, 1000, "--account: unknown account 'bio'"},
      {[](job::JobSpec& s) { s.account = "chem"; }, 0, ""},  // no associations: any account
      {[](job::JobSpec& s) { s.qos = "low"; }, 1000, "--qos: unknown qos 'low' (known: high)"},
      {[](job::JobSpec& s) { s.priority = 5; }, 1000, "--priority: only an admin"},
      {[](job::JobSpec& s) { s.priority = -5; }, 1000, ""},
  };
  for (const Case& c : cases) {
    job::JobSpec s = spec();
    c.change(s);
    Status st = apply_submit_policy(site_config(), c.uid, false, s);
    if (c.expected.empty()) {
      EXPECT_TRUE(st.is_ok()) << st.message();
    } else {
      ASSERT_FALSE(st.is_ok()) << c.expected;
      EXPECT_EQ(st.message().rfind(c.expected, 0), 0u) << st.message();
    }
  }
  ClusterConfig other = site_config();
  other.site.users = {{2000, "chem", 1.0}};
  job::JobSpec s = spec();
  s.account = "physics";
  Status st = apply_submit_policy(other, 2000, false, s);
  EXPECT_EQ(st.message(), "--account: user 2000 is not associated with account 'physics'");
  job::JobSpec admin = spec();
  admin.priority = 100;
  EXPECT_TRUE(apply_submit_policy(site_config(), 0, true, admin).is_ok());
}

TEST(SubmitPolicy, NoQueuesConfigured) {
  ClusterConfig c;
  c.default_time_limit_s = 60;
  c.max_time_limit_s = 120;
  job::JobSpec s = spec();
  ASSERT_TRUE(apply_submit_policy(c, 5, false, s).is_ok());
  EXPECT_EQ(s.queue, "");
  EXPECT_EQ(s.time_limit_s, 60);
  s.queue = "batch";
  EXPECT_EQ(apply_submit_policy(c, 5, false, s).message(),
            "--queue: unknown queue 'batch' (this cluster has no queues configured)");
  job::JobSpec t = spec();
  t.time_limit_s = 121;
  EXPECT_EQ(apply_submit_policy(c, 5, false, t).message(),
            "--time: 121 s exceeds the limit of 120 s");
}

}  // namespace
}  // namespace hpcq::daemon

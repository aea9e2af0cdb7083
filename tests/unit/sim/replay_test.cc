#include "lib/sim/replay.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace hpcq::sim {
namespace {

// One node of 4 cores in one NUMA domain.
const char* const kConfig =
    R"({"t":0,"type":"config","actions":["allocate","backfill"],"plugins":["fcfs"],)"
    R"("options":{"backfill.reservation_depth":"1"},"queue_depth":1000})";
const char* const kNode =
    R"({"t":1,"type":"node","rank":1,"name":"n1","schedulable":true,"topology":{"packages":1,)"
    R"("memory_bytes":0,"numa":[{"id":0,"package":0,"memory_bytes":0}],"cores":[)"
    R"({"id":0,"package":0,"numa":0,"pus":[0]},{"id":1,"package":0,"numa":0,"pus":[1]},)"
    R"({"id":2,"package":0,"numa":0,"pus":[2]},{"id":3,"package":0,"numa":0,"pus":[3]}]}})";

std::string queue(int id, std::int64_t submit, int ntasks, int limit_s) {
  return R"({"t":)" + std::to_string(submit) + R"(,"type":"queue","job":)" + std::to_string(id) +
         R"(,"uid":1000,"submit_time":)" + std::to_string(submit) +
         R"(,"request":{"nodes":0,"ntasks":)" + std::to_string(ntasks) +
         R"(,"cpus_per_task":1,"mem_per_node_bytes":0,"gpus_per_node":0,"gpus_per_task":0},)"
         R"("time_limit_s":)" +
         std::to_string(limit_s) + R"(,"queue":"","account":"","qos":"","priority":0})";
}

std::string start(int id, std::int64_t t, std::int64_t end, const std::string& cores, int ntasks) {
  return R"({"t":)" + std::to_string(t) + R"(,"type":"start","job":)" + std::to_string(id) +
         R"(,"end_estimate":)" + std::to_string(end) + R"(,"allocation":[{"rank":1,"cores":[)" +
         cores + R"(],"numa":[0],"memory_bytes":0,"gpus":[],"ntasks":)" + std::to_string(ntasks) +
         R"(,"first_task":0}],"cpus_per_task":1})";
}

std::string cycle(std::int64_t t) { return R"({"t":)" + std::to_string(t) + R"(,"type":"cycle"})"; }

std::string end(int id, std::int64_t t) {
  return R"({"t":)" + std::to_string(t) + R"(,"type":"end","job":)" + std::to_string(id) + "}";
}

constexpr std::int64_t kS = 1'000'000;

// Jobs 1 and 2 (2 cores each) start at once; job 3 (4 cores) waits for both.
std::vector<std::string> good_log() {
  return {
      kConfig,                                    // 1
      kNode,                                      // 2
      queue(1, 10 * kS, 2, 60),                   // 3
      queue(2, 11 * kS, 2, 60),                   // 4
      queue(3, 12 * kS, 4, 60),                   // 5
      cycle(20 * kS),                             // 6
      start(1, 20 * kS, 80 * kS, "0,1", 2),       // 7
      start(2, 20 * kS, 80 * kS, "2,3", 2),       // 8
      end(1, 30 * kS),                            // 9
      cycle(30 * kS),                             // 10: job 3 still does not fit
      end(2, 40 * kS),                            // 11
      cycle(40 * kS),                             // 12
      start(3, 40 * kS, 100 * kS, "0,1,2,3", 4),  // 13
      end(3, 50 * kS),                            // 14
  };
}

Result<ReplayResult> run(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& l : lines) text += l + "\n";
  std::istringstream in(text);
  return replay(in, "log");
}

TEST(Replay, HandWrittenLogIsIdentical) {
  auto r = run(good_log());
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_TRUE(r->identical) << format_replay(*r);
  EXPECT_EQ(r->cycles, 3u);
  EXPECT_EQ(r->starts, 3u);
  EXPECT_EQ(format_replay(*r), "replayed 3 cycles, 3 starts: identical");
}

TEST(Replay, OtherCoresAreADifferenceAtTheirLine) {
  std::vector<std::string> log = good_log();
  log[7] = start(2, 20 * kS, 80 * kS, "1,2", 2);  // line 8
  log[6] = start(1, 20 * kS, 80 * kS, "0,3", 2);  // line 7: the first difference
  auto r = run(log);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_FALSE(r->identical);
  EXPECT_EQ(r->difference_line, 7);
  EXPECT_NE(r->difference.find("cores [0,3]"), std::string::npos) << r->difference;
  EXPECT_NE(r->difference.find("cores [0,1]"), std::string::npos) << r->difference;
  EXPECT_EQ(r->starts, 0u);
}

TEST(Replay, AnotherJobIsADifference) {
  std::vector<std::string> log = good_log();
  log[6] = start(2, 20 * kS, 80 * kS, "0,1", 2);
  log[7] = start(1, 20 * kS, 80 * kS, "2,3", 2);
  auto r = run(log);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_FALSE(r->identical);
  EXPECT_EQ(r->difference_line, 7);
  EXPECT_EQ(format_replay(*r),
            "replayed 1 cycles, 0 starts: line 7: the log starts job 2, the replay job 1");
}

TEST(Replay, AStartTheLogLacksIsReportedAtItsCycle) {
  std::vector<std::string> log = good_log();
  log.erase(log.begin() + 12);  // job 3's start (line 13)
  auto r = run(log);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_FALSE(r->identical);
  EXPECT_EQ(r->difference_line, 12);
  EXPECT_NE(r->difference.find("also starts job 3"), std::string::npos) << r->difference;
  EXPECT_EQ(r->starts, 2u);
}

TEST(Replay, AnExtraStartIsADifference) {
  std::vector<std::string> log = good_log();
  // At line 10 job 3 cannot fit (2 free cores); a log that says it started
  // there differs (the start line itself is well-formed).
  log.insert(log.begin() + 10, start(3, 30 * kS, 90 * kS, "0,1", 2));
  auto r = run(log);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_FALSE(r->identical);
  EXPECT_EQ(r->difference_line, 11);
  EXPECT_NE(r->difference.find("started 0 jobs, not more"), std::string::npos) << r->difference;
}

TEST(Replay, TheCycleQueueListIsWhatTheCycleSees) {
  std::vector<std::string> log = {
      kConfig, kNode, queue(1, 10 * kS, 2, 60), queue(2, 11 * kS, 2, 60),
      // The daemon showed only job 2 (say job 1 is an array task beyond its throttle).
      R"({"t":20000000,"type":"cycle","queue":[2]})", start(2, 20 * kS, 80 * kS, "0,1", 2)};
  auto r = run(log);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_TRUE(r->identical) << format_replay(*r);
  // Without the list the replay would start job 1 first.
  log[4] = cycle(20 * kS);
  r = run(log);
  ASSERT_TRUE(r.is_ok());
  EXPECT_FALSE(r->identical);
}

// What hpcqd resolved from -w/-x/-C and the queue's nodes (nodelist),
// -L against [licenses] and --gres against the nodes' gres: the replay
// honours each as the daemon's scheduler did.
TEST(Replay, NodelistLicensesAndGresAreHonoured) {
  const std::string config =
      R"({"t":0,"type":"config","actions":["allocate"],"plugins":["fcfs","licenses"],)"
      R"("options":{},"queue_depth":1000,"licenses":{"matlab":1}})";
  std::string n1 = kNode;
  n1.insert(n1.size() - 1, R"(,"gres":{"nvme":1})");
  std::string n2 = kNode;
  n2.replace(n2.find(R"("rank":1,"name":"n1")"), 20, R"("rank":2,"name":"n2")");
  auto with = [](std::string line, const std::string& fields) {
    return line.insert(line.size() - 1, "," + fields);
  };
  auto on = [](int id, int rank, const std::string& core) {
    return R"({"t":20000000,"type":"start","job":)" + std::to_string(id) +
           R"(,"end_estimate":80000000,"allocation":[{"rank":)" + std::to_string(rank) +
           R"(,"cores":[)" + core +
           R"(],"numa":[0],"memory_bytes":0,"gpus":[],"ntasks":1,"first_task":0}],)"
           R"("cpus_per_task":1})";
  };
  std::string gres_job = queue(2, 11 * kS, 1, 60);
  gres_job.replace(gres_job.find(R"("gpus_per_task":0})"), 18,
                   R"("gpus_per_task":0,"gres":{"nvme":1}})");
  const std::vector<std::string> log = {
      config,
      n1,
      n2,
      with(queue(1, 10 * kS, 1, 60), R"("nodelist":[2])"),  // -C: only n2
      gres_job,                                             // nvme: only n1
      with(queue(3, 12 * kS, 1, 60), R"("licenses":{"matlab":1})"),
      with(queue(4, 13 * kS, 1, 60), R"("licenses":{"matlab":1})"),  // the one license is held
      cycle(20 * kS),
      on(1, 2, "0"),
      on(2, 1, "0"),
      on(3, 1, "1")};
  auto r = run(log);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_TRUE(r->identical) << format_replay(*r);
  EXPECT_EQ(r->starts, 3u);
  // Without job 1's nodelist the replay puts it on n1 first.
  std::vector<std::string> without = log;
  without[3] = queue(1, 10 * kS, 1, 60);
  r = run(without);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_FALSE(r->identical);
  // Without the config's licenses nothing is counted: job 4 starts too.
  without = log;
  without[0] = R"({"t":0,"type":"config","actions":["allocate"],"plugins":["fcfs","licenses"],)"
               R"("options":{},"queue_depth":1000})";
  r = run(without);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_FALSE(r->identical);
  EXPECT_EQ(r->difference_line, 8) << format_replay(*r);
  EXPECT_NE(r->difference.find("also starts job 4"), std::string::npos) << r->difference;
}

TEST(Replay, StopsAtARestart) {
  std::vector<std::string> log = good_log();
  log.insert(log.begin() + 9, kConfig);               // line 10: the daemon restarted
  log.push_back(start(3, 60 * kS, 90 * kS, "9", 1));  // nonsense after it is not read
  auto r = run(log);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_TRUE(r->identical);
  EXPECT_EQ(r->restart_line, 10);
  EXPECT_EQ(format_replay(*r),
            "replayed 1 cycles, 2 starts: identical (replayed up to the restart at line 10)");
}

TEST(Replay, DrainedAndGoneNodesAreFollowed) {
  std::vector<std::string> log = {
      kConfig,
      kNode,
      queue(1, 10 * kS, 2, 60),
      R"({"t":15,"type":"node_state","rank":1,"schedulable":false})",
      cycle(20 * kS),  // nothing: the node is drained
      R"({"t":25,"type":"node_state","rank":1,"schedulable":true})",
      cycle(30 * kS),
      start(1, 30 * kS, 90 * kS, "0,1", 2),
      R"({"t":35,"type":"node_gone","rank":1})",
      end(1, 40 * kS),  // its part went with the node: nothing to release
      queue(2, 41 * kS, 1, 60),
      R"({"t":42,"type":"dequeue","job":2})"};
  auto r = run(log);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_TRUE(r->identical) << format_replay(*r);
  EXPECT_EQ(r->cycles, 2u);
  EXPECT_EQ(r->starts, 1u);
}

// A malformed line fails the replay with "log:LINE: field ...".
void expect_malformed(std::vector<std::string> log, std::size_t index, const std::string& line,
                      const std::string& what) {
  if (index < log.size()) {
    log[index] = line;
  } else {
    log.push_back(line);
  }
  auto r = run(log);
  ASSERT_FALSE(r.is_ok()) << line;
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  const std::string prefix = "log:" + std::to_string(index + 1) + ": ";
  EXPECT_EQ(r.status().message().rfind(prefix, 0), 0u) << r.status().message();
  EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().message();
  EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
}

TEST(Replay, MalformedLinesAreRejected) {
  const std::vector<std::string> log = good_log();
  expect_malformed(log, 2, "{not json", "not a JSON object");
  expect_malformed(log, 2, "[1,2]", "not a JSON object");
  expect_malformed(log, 2, R"({"t":1,"type":"submit","job":1})", "unknown line type 'submit'");
  expect_malformed(log, 2, R"({"type":"dequeue","job":1})", "field 't'");
  expect_malformed(log, 2, R"({"t":"soon","type":"dequeue","job":1})", "field 't'");
  std::string bad = queue(1, 10 * kS, 2, 60);
  bad.replace(bad.find("\"ntasks\":2"), 10, "\"ntasks\":\"2\"");
  expect_malformed(log, 2, bad, "field 'request.ntasks'");
  bad = kNode;
  bad.replace(bad.find("\"pus\":[0]"), 9, "\"pus\":0");
  expect_malformed(log, 1, bad, "field 'topology.cores[].pus'");
  expect_malformed(log, 4, queue(1, 10 * kS, 2, 60), "job 1 queued twice");
  expect_malformed(log, 8, end(7, 30 * kS), "job 7 is not running");
  expect_malformed(log, 8, R"({"t":1,"type":"node_gone","rank":9})", "rank 9 is not in the pool");
  expect_malformed(log, 5, R"({"t":1,"type":"cycle","queue":[7]})", "job 7 is not pending");
  // A start must follow a cycle line (line 9 is an end).
  std::vector<std::string> no_cycle = log;
  no_cycle.insert(no_cycle.begin() + 9, start(3, 30 * kS, 90 * kS, "0,1", 2));
  expect_malformed(no_cycle, 9, no_cycle[9], "no 'cycle' line before it");
  // Nothing before the config line.
  expect_malformed(log, 0, kNode, "before the config line");
  std::string config = kConfig;
  config.replace(config.find("\"fcfs\""), 6, "\"nope\"");
  expect_malformed(log, 0, config, "unknown scheduler plugin 'nope'");
}

TEST(Replay, EmptyAndMissingLogs) {
  auto empty = run({});
  ASSERT_FALSE(empty.is_ok());
  EXPECT_NE(empty.status().message().find("empty"), std::string::npos);
  auto missing = replay_file("/nonexistent/decision.log");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace hpcq::sim

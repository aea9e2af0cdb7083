#include "lib/job/job.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace hpcq::job {
namespace {

TEST(JobState, NamesRoundTrip) {
  const JobState all[] = {JobState::kPending, JobState::kRunning,   JobState::kCompleted,
                          JobState::kFailed,  JobState::kCancelled, JobState::kTimeout,
                          JobState::kNodeFail};
  for (JobState s : all) {
    auto back = parse_state(state_name(s));
    ASSERT_TRUE(back.has_value()) << state_name(s);
    EXPECT_EQ(*back, s);
  }
  EXPECT_STREQ(state_name(JobState::kNodeFail), "NODE_FAIL");
  EXPECT_STREQ(state_name(JobState::kCancelled), "CANCELLED");
  EXPECT_FALSE(parse_state("pending").has_value());  // the names are exact
  EXPECT_FALSE(parse_state("").has_value());
  EXPECT_FALSE(parse_state("UNKNOWN").has_value());
}

TEST(JobState, Terminal) {
  EXPECT_FALSE(is_terminal(JobState::kPending));
  EXPECT_FALSE(is_terminal(JobState::kRunning));
  EXPECT_TRUE(is_terminal(JobState::kCompleted));
  EXPECT_TRUE(is_terminal(JobState::kFailed));
  EXPECT_TRUE(is_terminal(JobState::kCancelled));
  EXPECT_TRUE(is_terminal(JobState::kTimeout));
  EXPECT_TRUE(is_terminal(JobState::kNodeFail));
}

JobSpec good_spec() {
  JobSpec spec;
  spec.name = "hello";
  spec.argv = {"hostname"};
  spec.output = "hpcq-%j.out";
  spec.cwd = "/home/u";
  spec.env = {{"PATH", "/usr/bin"}, {"BASH_FUNC_module%%", "() { :; }"}};
  spec.request.nodes = 2;
  spec.request.ntasks = 4;
  spec.request.cpus_per_task = 2;
  spec.time_limit_s = 300;
  return spec;
}

TEST(Validate, AcceptsAGoodSpec) {
  Status s = validate(good_spec());
  EXPECT_TRUE(s.is_ok()) << s.message();
  JobSpec minimal;
  minimal.argv = {"true"};
  s = validate(minimal);
  EXPECT_TRUE(s.is_ok()) << s.message();
  JobSpec whole = good_spec();
  whole.request.exclusive = true;  // whole nodes, cores not shared
  s = validate(whole);
  EXPECT_TRUE(s.is_ok()) << s.message();
}

// hpcqd holds one copy of each environment its queued jobs use (issue 20,
// item 17): equal environments share, different ones do not, and one no
// job uses is forgotten.
TEST(EnvironmentPool, EqualEnvironmentsShareOneCopy) {
  EnvironmentPool pool;
  SharedEnvironment a = pool.intern(SharedEnvironment{{"PATH", "/usr/bin"}, {"HOME", "/h"}});
  SharedEnvironment b = pool.intern(SharedEnvironment{{"HOME", "/h"}, {"PATH", "/usr/bin"}});
  SharedEnvironment c = pool.intern(SharedEnvironment{{"PATH", "/bin"}});
  EXPECT_TRUE(a.shares_with(b));
  EXPECT_FALSE(a.shares_with(c));
  EXPECT_EQ(a, b);
  EXPECT_EQ(pool.distinct(), 2u);
  c = SharedEnvironment{};
  EXPECT_EQ(pool.distinct(), 1u);
  SharedEnvironment copy = a;  // a job's copies (array tasks) share too
  EXPECT_TRUE(copy.shares_with(a));
  EXPECT_TRUE(pool.intern(SharedEnvironment{}).empty());
}

// Bytes where Unix has bytes; names are text (issue 20, item 12).
TEST(Validate, CommandsAndPathsAreBytesNamesAreText) {
  JobSpec bytes = good_spec();
  bytes.argv = {"/bin/echo", "caf\xe9"};
  bytes.script = "# \xff\n";
  bytes.cwd = "/home/\xe9";
  bytes.env.set("LATIN1", "caf\xe9");
  Status s = validate(bytes);
  EXPECT_TRUE(s.is_ok()) << s.message();

  JobSpec name = good_spec();
  name.name = "x\xff";
  EXPECT_EQ(validate(name).message(), "-J/--job-name: not valid UTF-8");
  JobSpec env = good_spec();
  env.env.set("caf\xe9", "1");
  EXPECT_EQ(validate(env).message(), "the environment: a variable's name is not valid UTF-8");
  JobSpec image = good_spec();
  image.image = "/images/busybox";
  image.argv = {"echo", "\xff"};
  EXPECT_EQ(validate(image).message(), "--image: a container's command must be valid UTF-8");
}

TEST(Validate, AcceptsTheBounds) {
  JobSpec spec = good_spec();
  spec.request.nodes = 0;
  spec.request.ntasks = 1'000'000;
  spec.request.cpus_per_task = 4096;
  spec.time_limit_s = 0;
  EXPECT_TRUE(validate(spec).is_ok());
  spec.request.nodes = 4;
  spec.request.ntasks = 4;
  EXPECT_TRUE(validate(spec).is_ok());
}

struct BadCase {
  const char* what;
  std::function<void(JobSpec&)> spoil;
  const char* needle;  // the option the message must name
};

class ValidateBad : public ::testing::TestWithParam<BadCase> {};

TEST_P(ValidateBad, NamesTheOption) {
  JobSpec spec = good_spec();
  GetParam().spoil(spec);
  Status s = validate(spec);
  ASSERT_FALSE(s.is_ok()) << GetParam().what;
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find(GetParam().needle), std::string::npos)
      << GetParam().what << ": " << s.message();
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
}

INSTANTIATE_TEST_SUITE_P(
    Job, ValidateBad,
    ::testing::Values(
        BadCase{"zero tasks", [](JobSpec& s) { s.request.ntasks = 0; }, "--ntasks"},
        BadCase{"negative tasks", [](JobSpec& s) { s.request.ntasks = -3; }, "--ntasks"},
        BadCase{"too many tasks", [](JobSpec& s) { s.request.ntasks = 1'000'001; }, "--ntasks"},
        BadCase{"negative nodes", [](JobSpec& s) { s.request.nodes = -1; }, "--nodes"},
        BadCase{"more nodes than tasks", [](JobSpec& s) { s.request.nodes = 5; }, "--nodes"},
        BadCase{"too many nodes",
                [](JobSpec& s) {
                  s.request.nodes = 100'001;
                  s.request.ntasks = 200'000;
                },
                "--nodes"},
        BadCase{"zero cpus", [](JobSpec& s) { s.request.cpus_per_task = 0; }, "--cpus-per-task"},
        BadCase{"too many cpus", [](JobSpec& s) { s.request.cpus_per_task = 4097; },
                "--cpus-per-task"},
        BadCase{"absurd memory",
                [](JobSpec& s) { s.request.mem_per_node_bytes = (std::uint64_t{1} << 60) + 1; },
                "--mem"},
        BadCase{"negative time", [](JobSpec& s) { s.time_limit_s = -2; },
                "--time"},  // -1 is kUnlimited
        BadCase{"time beyond ten years",
                [](JobSpec& s) { s.time_limit_s = std::int64_t{366} * 24 * 3600 * 10 + 1; },
                "--time"},
        BadCase{"no argv", [](JobSpec& s) { s.argv.clear(); }, "no command"},
        BadCase{"empty argv[0]", [](JobSpec& s) { s.argv = {""}; }, "no command"},
        BadCase{"NUL in an argument", [](JobSpec& s) { s.argv.push_back(std::string("a\0b", 3)); },
                "command"},
        BadCase{"newline in the name", [](JobSpec& s) { s.name = "a\nb"; }, "--job-name"},
        BadCase{"escape in the name", [](JobSpec& s) { s.name = "a\x1b[2J"; }, "--job-name"},
        BadCase{"long name", [](JobSpec& s) { s.name = std::string(257, 'n'); }, "--job-name"},
        BadCase{"control in output", [](JobSpec& s) { s.output = "out\r"; }, "--output"},
        BadCase{"control in error", [](JobSpec& s) { s.error = "e\x7f"; }, "--error"},
        BadCase{"control in queue", [](JobSpec& s) { s.queue = "q\t"; }, "--queue"},
        BadCase{"relative cwd", [](JobSpec& s) { s.cwd = "home/u"; }, "--chdir"},
        BadCase{"control in cwd", [](JobSpec& s) { s.cwd = "/a\nb"; }, "--chdir"},
        BadCase{"empty env name", [](JobSpec& s) { s.env.set("", "x"); }, "--export"},
        BadCase{"'=' in env name", [](JobSpec& s) { s.env.set("A=B", "x"); }, "--export"},
        BadCase{"NUL in env value", [](JobSpec& s) { s.env.set("A", std::string("x\0y", 3)); },
                "--export"},
        BadCase{"run with an output file", [](JobSpec& s) { s.forward_output = true; }, "--output"},
        BadCase{"run --image checkpointed periodically",
                [](JobSpec& s) {
                  s.forward_output = true;
                  s.output.clear();
                  s.image = "/srv/img";
                  s.checkpoint_interval_s = 600;
                },
                "--checkpoint-interval"},
        BadCase{"a bad constraint", [](JobSpec& s) { s.constraint = "a|"; }, "-C/--constraint"},
        BadCase{"more tasks than per node",
                [](JobSpec& s) { s.ntasks_per_node = 1; },  // 4 tasks on 2 nodes
                "--ntasks-per-node"},
        BadCase{"a bad license",
                [](JobSpec& s) {
                  s.licenses = {{"a b", 1}};
                },
                "-L/--licenses"},
        BadCase{"whole nodes shared",
                [](JobSpec& s) {
                  s.request.exclusive = true;
                  s.request.oversubscribe = true;
                },
                "--exclusive and --oversubscribe"}));

TEST(Validate, RunMayBeCheckpointedPeriodically) {
  JobSpec spec = good_spec();
  spec.forward_output = true;
  spec.output.clear();
  spec.checkpoint_interval_s = 600;
  Status s = validate(spec);
  EXPECT_TRUE(s.is_ok()) << s.message();
}

struct PathCase {
  const char* pattern;
  JobId id;
  const char* cwd;
  const char* path;
};

OutputNames names(JobId id, JobId array_job_id = 0, int array_task_id = -1) {
  OutputNames n;
  n.id = id;
  n.array_job_id = array_job_id;
  n.array_task_id = array_task_id;
  return n;
}

class ExpandOutputPath : public ::testing::TestWithParam<PathCase> {};

TEST_P(ExpandOutputPath, Expands) {
  const auto& c = GetParam();
  EXPECT_EQ(expand_output_path(c.pattern, names(c.id), c.cwd), c.path) << c.pattern;
}

INSTANTIATE_TEST_SUITE_P(
    Job, ExpandOutputPath,
    ::testing::Values(PathCase{"hpcq-%j.out", 42, "/home/u", "/home/u/hpcq-42.out"},
                      PathCase{"/tmp/%j/%j.log", 7, "/home/u", "/tmp/7/7.log"},
                      PathCase{"100%%-%j", 3, "/w", "/w/100%-3"},
                      PathCase{"%%j", 3, "/w", "/w/%j"},     // an escaped %, then a plain j
                      PathCase{"a%y%", 3, "/w", "/w/a%y%"},  // unknown and trailing % stay
                      PathCase{"out", 1, "/", "/out"}, PathCase{"out", 1, "/w/", "/w/out"},
                      PathCase{"out-%j", 18446744073709551615ULL, "", "out-18446744073709551615"},
                      PathCase{"sub/dir/%j.out", 9, "/w", "/w/sub/dir/9.out"}));

struct DependencyCase {
  const char* text;
  std::vector<Dependency> want;
  const char* formatted;  // what the API and the store carry back
};

class DependencyText : public ::testing::TestWithParam<DependencyCase> {};

TEST_P(DependencyText, ParsesFormatsAndReadsBack) {
  const DependencyCase& c = GetParam();
  auto deps = parse_dependencies(c.text);
  ASSERT_TRUE(deps.is_ok()) << c.text << ": " << deps.status().message();
  EXPECT_EQ(*deps, c.want) << c.text;
  EXPECT_EQ(format_dependencies(*deps), c.formatted);
  auto again = parse_dependencies(format_dependencies(*deps));
  ASSERT_TRUE(again.is_ok()) << again.status().message();
  EXPECT_EQ(*again, *deps) << c.formatted;
  JobSpec spec = good_spec();
  spec.dependencies = *deps;
  EXPECT_TRUE(validate(spec).is_ok()) << validate(spec).message();
}

constexpr auto kAfter = DependencyType::kAfter;
constexpr auto kAny = DependencyType::kAfterAny;
constexpr auto kOk = DependencyType::kAfterOk;
constexpr auto kNotOk = DependencyType::kAfterNotOk;
constexpr auto kSingleton = DependencyType::kSingleton;

INSTANTIATE_TEST_SUITE_P(
    Dependencies, DependencyText,
    ::testing::Values(
        DependencyCase{"afterok:12:13,afterany:14,after:1,afternotok:2",
                       {{kOk, 12}, {kOk, 13}, {kAny, 14}, {kAfter, 1}, {kNotOk, 2}},
                       "afterok:12:13,afterany:14,after:1,afternotok:2"},
        DependencyCase{"singleton", {{kSingleton, 0}}, "singleton"},
        DependencyCase{"afterok:5,singleton", {{kOk, 5}, {kSingleton, 0}}, "afterok:5,singleton"},
        DependencyCase{
            "singleton,singleton", {{kSingleton, 0}, {kSingleton, 0}}, "singleton,singleton"},
        DependencyCase{
            "afterok:1?afterok:2", {{kOk, 1, true}, {kOk, 2, true}}, "afterok:1?afterok:2"},
        // Slurm's reading: in a '?' list every id of an item is one choice.
        DependencyCase{"afterok:1:2?afterany:3",
                       {{kOk, 1, true}, {kOk, 2, true}, {kAny, 3, true}},
                       "afterok:1?afterok:2?afterany:3"},
        DependencyCase{"singleton?afternotok:4",
                       {{kSingleton, 0, true}, {kNotOk, 4, true}},
                       "singleton?afternotok:4"}));

TEST(Dependencies, BadInputNamesTheOption) {
  for (const char* bad :
       {"", "afterok", "afterok:", "afterok:x", "afterok:0", "before:3", "afterok:1,", "afterok:-4",
        "afterok:99999999999999999999999", "singleton:3", "afterok:1?", "?afterok:1",
        "afterok:1??afterok:2", "afterok:1,afterok:2?afterok:3", "afterok:1?singleton,afterany:2",
        "Singleton"}) {
    auto deps = parse_dependencies(bad);
    ASSERT_FALSE(deps.is_ok()) << bad;
    EXPECT_EQ(deps.status().message().rfind("--dependency: ", 0), 0u) << deps.status().message();
    EXPECT_EQ(deps.status().message().find('\n'), std::string::npos);
  }
  // Slurm refuses a list joined by both: which binds tighter would be a guess.
  EXPECT_EQ(parse_dependencies("afterok:1,afterok:2?afterok:3").status().message(),
            "--dependency: 'afterok:1,afterok:2?afterok:3' joins items by both ',' (all must "
            "hold) and '?' (any one is enough): use one");
  EXPECT_EQ(parse_dependencies("singleton:3").status().message(),
            "--dependency: 'singleton:3': singleton names no job");
}

// What the API or a stored row could hold that no text parses to.
TEST(Dependencies, ValidateRefusesWhatNoTextMeans) {
  JobSpec spec = good_spec();
  spec.dependencies = {{kSingleton, 7}};
  EXPECT_EQ(validate(spec).message(), "--dependency: singleton names no job (job 7)");
  spec.dependencies = {{kOk, 0}};
  EXPECT_EQ(validate(spec).message(), "--dependency: job id 0");
  spec.dependencies = {{kOk, 1, true}, {kOk, 2, false}};
  EXPECT_EQ(validate(spec).message(), "--dependency: a list joined by both ',' and '?'");
}

TEST(Array, RangesStepsListsAndThrottle) {
  auto a = parse_array("0-3,7,10-20:5%2");
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  EXPECT_EQ(a->indices, (std::vector<int>{0, 1, 2, 3, 7, 10, 15, 20}));
  EXPECT_EQ(a->max_running, 2);
  auto b = parse_array("5,1,5,3");
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(b->indices, (std::vector<int>{1, 3, 5}));  // sorted, unique
  EXPECT_EQ(b->max_running, 0);
}

TEST(Array, BadInputIsRejected) {
  for (const char* bad : {"", "%3", "1-", "-3", "3-1", "a", "0-9%0", "0-9%x", "0-9:0", "0-2000000",
                          "0-20000", "1,,2"}) {
    auto a = parse_array(bad);
    ASSERT_FALSE(a.is_ok()) << bad;
    EXPECT_EQ(a.status().message().rfind("--array: ", 0), 0u) << a.status().message();
  }
}

TEST(OutputPath, ArrayPatterns) {
  EXPECT_EQ(expand_output_path("r-%A_%a.out", names(17, 15, 2), "/w"), "/w/r-15_2.out");
  EXPECT_EQ(expand_output_path("r-%A_%a.out", names(17), "/w"), "/w/r-17_0.out");
}

// Issue 47 item 5: %x, %u and %N as sbatch's; %N only once the job has nodes.
TEST(OutputPath, NameUserAndFirstNode) {
  Job job;
  job.id = 12;
  job.user = "alice";
  job.spec.name = "solver";
  job.spec.cwd = "/home/alice";
  EXPECT_EQ(expand_output_path("%x-%j.%u.%N.out", job), "/home/alice/solver-12.alice.%N.out");
  job.allocation.nodes.resize(2);
  job.allocation.nodes[0].node = "node3";
  job.allocation.nodes[1].node = "node4";
  EXPECT_EQ(expand_output_path("%x-%j.%u.%N.out", job), "/home/alice/solver-12.alice.node3.out");
  // %t and %n are per task and per node: no file of hpcq's is.
  EXPECT_EQ(expand_output_path("%%x%t%n%", job), "/home/alice/%x%t%n%");
  // A batch job's file is its script's, task 0 on node 0, as sbatch's.
  job.spec.batch = true;
  EXPECT_EQ(expand_output_path("out-%j-%t-%n.txt", job), "/home/alice/out-12-0-0.txt");
}

}  // namespace
}  // namespace hpcq::job

#include "agent/executor/test_executor.h"

#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "lib/core/clock.h"

namespace hpcq::agent {

Result<std::unique_ptr<TestExecutor>> TestExecutor::create() {
  int fd = timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK | TFD_CLOEXEC);
  if (fd < 0) return internal_error(std::string("timerfd_create: ") + std::strerror(errno));
  return std::unique_ptr<TestExecutor>(new TestExecutor(fd));
}

TestExecutor::~TestExecutor() { close(timer_fd_); }

Status TestExecutor::launch(const JobLaunch& launch, TimeUs now) {
  if (launch.step != 0) {
    return failed_precondition("the test executor runs no job steps (executor = \"process\")");
  }
  if (jobs_.count(launch.id)) {
    return failed_precondition("job " + std::to_string(launch.id) + " is already running here");
  }
  double seconds = 0;
  auto it = launch.env.find("HPCQ_TEST_DURATION");
  if (it != launch.env.end()) {
    try {
      seconds = std::stod(it->second);
    } catch (const std::exception&) {
      return invalid_argument("HPCQ_TEST_DURATION: not a number: '" + it->second + "'");
    }
    if (!(seconds >= 0)) return invalid_argument("HPCQ_TEST_DURATION must be >= 0");
  }
  Job job;
  job.end = now + static_cast<TimeUs>(seconds * kUsPerSecond);
  job.deadline = launch.time_limit_s > 0 ? now + launch.time_limit_s * kUsPerSecond : 0;
  job.launched = now;
  jobs_[launch.id] = job;
  started_.push_back({launch.id, 0});
  arm();
  return Status::ok();
}

Status TestExecutor::set_time_limit(JobId id, std::int64_t seconds) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return not_found("job " + std::to_string(id) + " is not running here");
  it->second.deadline = seconds > 0 ? it->second.launched + seconds * kUsPerSecond : 0;
  arm();
  return Status::ok();
}

Status TestExecutor::cancel(JobId id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return not_found("job " + std::to_string(id) + " is not running here");
  it->second.cancelled = true;
  arm();
  return Status::ok();
}

void TestExecutor::check_timeouts(TimeUs) {}  // reap() compares with the deadline

std::vector<JobExit> TestExecutor::reap() {
  std::uint64_t expirations;
  [[maybe_unused]] ssize_t n = read(timer_fd_, &expirations, sizeof expirations);
  const TimeUs now = wall_clock_now();
  std::vector<JobExit> ended;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    const Job& job = it->second;
    if (job.cancelled) {
      ended.push_back({it->first, ExitKind::kCancelled, 143, "cancelled"});
    } else if (job.deadline > 0 && job.deadline <= now && job.deadline < job.end) {
      ended.push_back({it->first, ExitKind::kTimeout, 143, "time limit reached"});
    } else if (job.end <= now) {
      ended.push_back({it->first, ExitKind::kCompleted, 0, ""});
    } else {
      ++it;
      continue;
    }
    it = jobs_.erase(it);
  }
  arm();
  return ended;
}

std::vector<JobId> TestExecutor::running() const {
  std::vector<JobId> ids;
  for (const auto& [id, job] : jobs_) ids.push_back(id);
  return ids;
}

Status TestExecutor::signal(JobId id, int /*signo*/) {
  if (!jobs_.count(id)) return not_found("job " + std::to_string(id) + " is not running here");
  return Status::ok();
}

void TestExecutor::arm() {
  TimeUs next = std::numeric_limits<TimeUs>::max();
  for (const auto& [id, job] : jobs_) {
    TimeUs t = job.cancelled ? 0 : job.deadline > 0 ? std::min(job.end, job.deadline) : job.end;
    next = std::min(next, t);
  }
  itimerspec spec{};
  if (next != std::numeric_limits<TimeUs>::max()) {
    next = std::max<TimeUs>(next, 1);  // 0 would disarm the timer
    spec.it_value.tv_sec = next / kUsPerSecond;
    spec.it_value.tv_nsec = (next % kUsPerSecond) * 1000;
  }
  timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &spec, nullptr);
}

Status TestExecutor::checkpoint_capability() {
  return failed_precondition("the test executor cannot checkpoint: it runs no processes");
}

Status TestExecutor::begin_checkpoint(JobId id, const std::string&, CheckpointThen) {
  if (!jobs_.count(id)) return not_found("job " + std::to_string(id) + " is not running here");
  return checkpoint_capability();
}

}  // namespace hpcq::agent

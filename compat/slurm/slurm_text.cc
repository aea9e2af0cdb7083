#include "compat/slurm/slurm_text.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "lib/core/hostlist.h"
#include "lib/core/units.h"

namespace hpcq::compat {

std::string state_name(v1::JobState state, const std::string& reason) {
  switch (state) {
    case v1::PENDING: return "PENDING";
    case v1::RUNNING: return "RUNNING";
    case v1::COMPLETED: return "COMPLETED";
    case v1::FAILED: return reason.starts_with("out of memory") ? "OUT_OF_MEMORY" : "FAILED";
    case v1::CANCELLED: return reason.starts_with("deadline") ? "DEADLINE" : "CANCELLED";
    case v1::TIMEOUT: return "TIMEOUT";
    case v1::NODE_FAIL: return "NODE_FAIL";
    default: return "UNKNOWN";
  }
}

std::string compact_state(const std::string& name) {
  static const std::map<std::string, std::string> kCompact = {
      {"PENDING", "PD"},   {"RUNNING", "R"},    {"COMPLETED", "CD"},  {"FAILED", "F"},
      {"CANCELLED", "CA"}, {"TIMEOUT", "TO"},   {"NODE_FAIL", "NF"},  {"OUT_OF_MEMORY", "OOM"},
      {"REQUEUED", "RQ"},  {"PREEMPTED", "PR"}, {"COMPLETING", "CG"}, {"DEADLINE", "DL"}};
  auto it = kCompact.find(name);
  return it == kCompact.end() ? name : it->second;
}

std::string job_id_text(const v1::Job& job) {
  if (job.array_job_id() == 0) return std::to_string(job.id());
  return std::to_string(job.array_job_id()) + "_" + std::to_string(job.array_task_id());
}

std::string exit_code_text(int exit_code, v1::JobState state) {
  // Slurm's job that ran out of time shows 0:0 (its steps the signal).
  if (state == v1::TIMEOUT) return "0:0";
  // A task killed by signal N ends 128+N in hpcq; Slurm says 0:N. A job
  // ended by hpcq itself (cancel, time limit) has the signal it sent.
  if (exit_code > 128 && exit_code < 128 + 65 && state != v1::COMPLETED) {
    return "0:" + std::to_string(exit_code - 128);
  }
  return std::to_string(exit_code) + ":0";
}

namespace {

std::string two(std::int64_t n) {
  char text[24];
  std::snprintf(text, sizeof text, "%02lld", static_cast<long long>(n));
  return text;
}

}  // namespace

std::string elapsed_text(std::int64_t seconds) {
  seconds = std::max<std::int64_t>(seconds, 0);
  const std::int64_t days = seconds / 86400;
  std::string out = days > 0 ? std::to_string(days) + "-" : "";
  return out + two(seconds % 86400 / 3600) + ":" + two(seconds % 3600 / 60) + ":" +
         two(seconds % 60);
}

std::string squeue_duration(std::int64_t seconds) {
  seconds = std::max<std::int64_t>(seconds, 0);
  const std::int64_t days = seconds / 86400, hours = seconds % 86400 / 3600;
  const std::int64_t minutes = seconds % 3600 / 60, secs = seconds % 60;
  if (days > 0)
    return std::to_string(days) + "-" + two(hours) + ":" + two(minutes) + ":" + two(secs);
  if (hours > 0) return std::to_string(hours) + ":" + two(minutes) + ":" + two(secs);
  return std::to_string(minutes) + ":" + two(secs);
}

std::string limit_text(std::int64_t seconds, bool squeue_form) {
  if (seconds <= 0) return "UNLIMITED";
  return squeue_form ? squeue_duration(seconds) : elapsed_text(seconds);
}

std::string time_text(std::int64_t us, const char* none) {
  if (us <= 0) return none;
  const std::time_t t = static_cast<std::time_t>(us / 1'000'000);
  std::tm local{};
  localtime_r(&t, &local);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &local);
  return text;
}

std::string cpu_time_text(std::int64_t us) {
  us = std::max<std::int64_t>(us, 0);
  const std::int64_t seconds = us / 1'000'000;
  char millis[8];
  std::snprintf(millis, sizeof millis, ".%03lld", static_cast<long long>(us % 1'000'000 / 1000));
  if (seconds >= 3600) return elapsed_text(seconds);
  return two(seconds / 60) + ":" + two(seconds % 60) + millis;
}

std::string size_text(std::uint64_t bytes, char unit) {
  const int shift = unit == 'K' ? 10 : unit == 'M' ? 20 : 30;
  return std::to_string((bytes + (std::uint64_t{1} << shift) - 1) >> shift) + unit;
}

std::int64_t run_seconds(const v1::Job& job, std::int64_t now_us) {
  if (job.start_time_us() == 0) return 0;
  const std::int64_t end = job.end_time_us() != 0 ? job.end_time_us() : now_us;
  return std::max<std::int64_t>(0, (end - job.start_time_us()) / 1'000'000);
}

int allocated_cpus(const v1::Job& job) {
  int cpus = 0;
  for (const auto& part : job.allocation()) cpus += part.cores_size();
  if (cpus > 0) return cpus;
  return std::max(1, job.spec().ntasks()) * std::max(1, job.spec().cpus_per_task());
}

int node_count(const v1::Job& job) {
  if (job.nodes_size() > 0) return job.nodes_size();
  return std::max(1, job.spec().nodes());
}

std::string node_list(const v1::Job& job) {
  return compress_hostlist(std::vector<std::string>(job.nodes().begin(), job.nodes().end()));
}

std::string partition_of(const std::string& queue) { return queue.empty() ? "default" : queue; }

std::string caller_user() {
  std::vector<char> buffer(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwuid_r(getuid(), &pw, buffer.data(), buffer.size(), &found) == 0 && found != nullptr) {
    return found->pw_name;
  }
  return std::to_string(getuid());
}

}  // namespace hpcq::compat

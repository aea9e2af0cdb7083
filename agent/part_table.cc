#include "agent/part_table.h"

#include <algorithm>

namespace hpcq::agent {
namespace {

bool started_or_running(const Part& part) {
  return part.state == PartState::kStarting || part.state == PartState::kRunning;
}

}  // namespace

const char* part_state_name(PartState state) {
  switch (state) {
    case PartState::kHeld: return "held";
    case PartState::kInProlog: return "in prolog";
    case PartState::kRestoring: return "restoring";
    case PartState::kStarting: return "starting";
    case PartState::kRunning: return "running";
  }
  return "?";
}

PartTable::Launch PartTable::launch(const overlay::Launch& launch) {
  if (const Part* part = find(launch.job_id())) {
    if (!started_or_running(*part)) return Launch::kIgnore;  // STARTED follows its start
    if (part->attempt != launch.attempt()) return Launch::kIgnore;
    // A new part (an expansion) while the part a node failure or shrink
    // took from here is still ending: refused, so that the leader undoes
    // the expansion rather than count on a part that does not run.
    if (part->part != launch.part()) return Launch::kRefuse;
    // The leader has not seen our STARTED yet, or it is to come.
    return part->state == PartState::kRunning ? Launch::kReportStarted : Launch::kIgnore;
  }
  if (remembers(launch.job_id(), launch.attempt(), launch.part())) return Launch::kIgnore;
  if (epilogs_running_ > 0) {
    enter(launch, PartState::kHeld, {});
    return Launch::kHold;
  }
  return Launch::kStart;
}

PartTable::Launch PartTable::step_launch(const overlay::Launch& launch) const {
  const Part* part = find(launch.job_id());
  if (part) {
    auto step = part->steps.find(launch.step());
    if (step != part->steps.end()) return step->second ? Launch::kIgnore : Launch::kReportStarted;
    if (part->ended_steps.count(launch.step())) return Launch::kIgnore;
  }
  return runs(launch.job_id(), launch.attempt()) ? Launch::kStart : Launch::kRefuse;
}

void PartTable::start_prolog(const overlay::Launch& launch, ScriptEnv env) {
  enter(launch, PartState::kInProlog, std::move(env));
}

std::optional<overlay::Launch> PartTable::prolog_ended(JobId job, std::uint32_t attempt, bool ok) {
  auto it = parts_.find(job);
  if (it == parts_.end() || it->second.state != PartState::kInProlog ||
      it->second.attempt != attempt) {
    return std::nullopt;  // cancelled meanwhile: its outcome is ignored
  }
  overlay::Launch launch = it->second.launch;
  if (!ok) {
    remember(job, attempt, launch.part());  // a repeated launch does not run it
    parts_.erase(it);
  }
  return launch;
}

void PartTable::starting(const overlay::Launch& launch, ScriptEnv env) {
  enter(launch, PartState::kStarting, std::move(env));
}

void PartTable::restoring(const overlay::Launch& launch, ScriptEnv env, std::string image_dir) {
  enter(launch, PartState::kRestoring, std::move(env)).image_dir = std::move(image_dir);
}

void PartTable::start_failed(JobId job) { parts_.erase(job); }

void PartTable::step_starting(JobId job, std::uint32_t step) {
  auto it = parts_.find(job);
  if (it != parts_.end()) it->second.steps[step] = true;
}

std::optional<Part> PartTable::started(JobId job, std::uint32_t step) {
  auto it = parts_.find(job);
  if (it == parts_.end()) return std::nullopt;
  Part& part = it->second;
  if (step == 0) {
    if (part.state != PartState::kStarting) return std::nullopt;
    part.state = PartState::kRunning;
    return part;
  }
  auto s = part.steps.find(step);
  if (s == part.steps.end() || !s->second) return std::nullopt;
  s->second = false;
  return part;
}

std::optional<Part> PartTable::restored(JobId job, bool ok) {
  auto it = parts_.find(job);
  if (it == parts_.end() || it->second.state != PartState::kRestoring) return std::nullopt;
  Part part = it->second;
  if (ok) {
    it->second.state = PartState::kRunning;
  } else {
    parts_.erase(it);
  }
  return part;
}

std::optional<Part> PartTable::ended(JobId job) {
  auto it = parts_.find(job);
  if (it == parts_.end()) return std::nullopt;
  Part part = std::move(it->second);
  parts_.erase(it);
  remember(job, part.attempt, part.part);
  return part;
}

std::uint32_t PartTable::step_ended(JobId job, std::uint32_t step) {
  auto it = parts_.find(job);
  if (it == parts_.end()) return 0;
  it->second.steps.erase(step);
  it->second.ended_steps.insert(step);
  return it->second.attempt;
}

PartTable::Kill PartTable::kill(const overlay::Kill& kill) {
  auto it = parts_.find(kill.job_id());
  if (it == parts_.end()) return {};
  Part& part = it->second;
  if (part.state == PartState::kHeld || part.state == PartState::kInProlog) {
    // Not started yet: gone (a prolog runs to its end; its outcome is ignored).
    if (kill.step() != 0 || kill.only_part() || part.attempt != kill.attempt()) return {};
    Kill cancelled{Kill::Kind::kCancelledBeforeStart, part.part};
    remember(part.job, part.attempt, part.part);
    parts_.erase(it);
    return cancelled;
  }
  if (!started_or_running(part)) return {};
  // A part a resize took away: not a newer part of the job on this node.
  if (kill.only_part() && (part.attempt != kill.attempt() || part.part != kill.part())) return {};
  if (kill.step() != 0) {
    if (part.attempt != kill.attempt()) return {};
    return {Kill::Kind::kCancelStep, part.part};
  }
  return {Kill::Kind::kCancelPart, part.part};
}

std::vector<overlay::Launch> PartTable::epilog_ended() {
  if (epilogs_running_ > 0) --epilogs_running_;
  std::vector<overlay::Launch> released;
  if (epilogs_running_ > 0) return released;
  for (auto it = parts_.begin(); it != parts_.end();) {
    if (it->second.state != PartState::kHeld) {
      ++it;
      continue;
    }
    released.push_back(std::move(it->second.launch));
    it = parts_.erase(it);
  }
  return released;
}

bool PartTable::adopt(const overlay::Launch& launch, ScriptEnv env) {
  if (launch.step() == 0) {
    enter(launch, PartState::kRunning, std::move(env));
    return true;
  }
  auto it = parts_.find(launch.job_id());
  if (it == parts_.end() || it->second.attempt != launch.attempt()) return false;
  it->second.steps[launch.step()] = false;
  return true;
}

bool PartTable::runs(JobId job, std::uint32_t attempt) const {
  const Part* part = running(job);
  return part && part->attempt == attempt;
}

bool PartTable::runs(JobId job, std::uint32_t attempt, std::uint32_t step) const {
  return runs(job, attempt) && (step == 0 || step_runs(job, step));
}

bool PartTable::step_runs(JobId job, std::uint32_t step) const {
  const Part* part = running(job);
  return part && part->steps.count(step);
}

const Part* PartTable::running(JobId job) const {
  const Part* part = find(job);
  return part && started_or_running(*part) ? part : nullptr;
}

bool PartTable::any_running() const {
  return std::any_of(parts_.begin(), parts_.end(),
                     [](const auto& p) { return started_or_running(p.second); });
}

std::vector<std::uint32_t> PartTable::steps_of(JobId job) const {
  std::vector<std::uint32_t> steps;
  if (const Part* part = running(job)) {
    for (const auto& [step, starting] : part->steps) steps.push_back(step);
  }
  return steps;
}

std::vector<overlay::RunningJob> PartTable::running_jobs() const {
  std::vector<overlay::RunningJob> jobs;
  for (const auto& [id, part] : parts_) {
    if (!started_or_running(part)) continue;
    overlay::RunningJob& r = jobs.emplace_back();
    r.set_job_id(id);
    r.set_attempt(part.attempt);
    if (part.signals_received != 0) r.set_signals(part.signals_received);
    for (const auto& [step, received] : part.input_received) {
      overlay::InputReceived* input = r.add_input();
      input->set_step(step);
      input->set_bytes(received.bytes);
      input->set_eof(received.eof);
    }
  }
  return jobs;
}

bool PartTable::take_signal(JobId job, std::uint32_t attempt, std::uint64_t seq) {
  if (!runs(job, attempt)) return false;  // stale
  if (seq == 0) return true;
  std::uint64_t& received = parts_[job].signals_received;
  if (seq <= received) return false;  // a copy sent again after the tree healed
  received = seq;
  return true;
}

std::optional<PartTable::InputToWrite> PartTable::take_input(const overlay::Input& input) {
  if (!runs(input.job_id(), input.attempt())) return std::nullopt;  // stale
  // A copy sent again after the tree healed: only what was not written yet.
  Part::Input& received = parts_[input.job_id()].input_received[input.step()];
  std::string_view data = input.data();
  if (input.offset() < received.bytes) {
    data.remove_prefix(std::min<std::uint64_t>(data.size(), received.bytes - input.offset()));
  }
  const bool eof = input.eof() && !received.eof;
  if (data.empty() && !eof && input.rows() == 0 && input.cols() == 0) return std::nullopt;
  received.bytes = std::max(received.bytes, input.offset() + input.data().size());
  received.eof = received.eof || input.eof();
  return InputToWrite{std::string(data), eof};
}

void PartTable::checkpoint_began(const overlay::Checkpoint& request) {
  dumps_[request.job_id()] = request;
}

std::optional<overlay::Checkpoint> PartTable::checkpoint_ended(JobId job) {
  auto node = dumps_.extract(job);
  if (node.empty()) return std::nullopt;
  return std::move(node.mapped());
}

void PartTable::checkpoint_answered(const overlay::CheckpointDone& done) {
  // Far more than a node answers while a leader restarts.
  constexpr std::size_t kAnswersKept = 256;
  answers_.push_back(done);
  if (answers_.size() > kAnswersKept) answers_.pop_front();
}

const Part* PartTable::find(JobId job) const {
  auto it = parts_.find(job);
  return it == parts_.end() ? nullptr : &it->second;
}

bool PartTable::remembers(JobId job, std::uint32_t attempt, std::uint32_t part) const {
  return ended_.count({job, (std::uint64_t{attempt} << 32) | part}) > 0;
}

Part& PartTable::enter(const overlay::Launch& launch, PartState state, ScriptEnv env) {
  Part& part = parts_[launch.job_id()];
  part = Part{};
  part.job = launch.job_id();
  part.attempt = launch.attempt();
  part.part = launch.part();
  part.state = state;
  if (state == PartState::kHeld || state == PartState::kInProlog) part.launch = launch;
  part.script_env = std::move(env);
  return part;
}

void PartTable::remember(JobId job, std::uint32_t attempt, std::uint32_t part) {
  constexpr std::size_t kRemembered = 100'000;
  const std::uint64_t key = (std::uint64_t{attempt} << 32) | part;
  if (!ended_.insert({job, key}).second) return;
  ended_order_.emplace_back(job, key);
  if (ended_order_.size() > kRemembered) {
    ended_.erase(ended_order_.front());
    ended_order_.pop_front();
  }
}

}  // namespace hpcq::agent

// ProcessExecutor, checkpoint and restore: CRIU (or runc) dumps on a thread
// of their own, finished on the caller's; restores likewise (see
// process_executor.h and checkpoint.h).
#include "agent/executor/process_executor.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/executor/freeze_and_pin.h"
#include "agent/executor/oci_bundle.h"
#include "agent/executor/posix.h"

namespace hpcq::agent {

namespace {

namespace fs = std::filesystem;

constexpr char kCheckpointMeta[] = "hpcq-checkpoint.json";
constexpr char kJobDirCopy[] = "job-dir";
// The meta's key for the files dumped as external mounts (live_hostfiles).
constexpr char kExternalMounts[] = "external_mounts";

// A path of /proc/PID/mountinfo, where ' ', '\t', '\n' and '\\' are \ooo.
std::string unescape_mount_path(std::string_view field) {
  const auto octal = [&](std::size_t at) { return field[at] >= '0' && field[at] <= '7'; };
  std::string path;
  for (std::size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() && octal(i + 1) && octal(i + 2) && octal(i + 3)) {
      path += static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 +
                                (field[i + 3] - '0'));
      i += 3;
    } else {
      path += field[i];
    }
  }
  return path;
}

// The mount points of the mount namespace of process `pid`.
std::set<std::string> mount_points_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/mountinfo");
  std::set<std::string> points;
  std::string line;
  while (std::getline(in, line)) {
    // "ID PARENT MAJ:MIN ROOT MOUNT_POINT ...": the fifth field.
    std::size_t start = 0;
    for (int field = 0; field < 4 && start != std::string::npos; ++field) {
      start = line.find(' ', start);
      if (start != std::string::npos) ++start;
    }
    if (start == std::string::npos) continue;
    points.insert(
        unescape_mount_path(std::string_view(line).substr(start, line.find(' ', start) - start)));
  }
  return points;
}

// Binds each of `paths` onto itself in the mount namespace of process `pid`,
// from a forked child (setns needs a caller that shares no file system
// state with other threads) that makes only system calls.
Status bind_onto_themselves(pid_t pid, const std::vector<std::string>& paths) {
  const std::string ns = "/proc/" + std::to_string(pid) + "/ns/mnt";
  const int ns_fd = open(ns.c_str(), O_RDONLY | O_CLOEXEC);
  if (ns_fd < 0) return internal_error("open " + ns + ": " + errno_text(errno));
  std::vector<const char*> c_paths;
  for (const std::string& path : paths) c_paths.push_back(path.c_str());
  const pid_t child = fork();
  if (child == 0) {
    // The exit code says which step failed, and its errno (below 128).
    if (setns(ns_fd, CLONE_NEWNS) != 0) _exit(errno & 0x7f);
    for (const char* path : c_paths) {
      if (mount(path, path, nullptr, MS_BIND, nullptr) != 0) _exit(0x80 | (errno & 0x7f));
    }
    _exit(0);
  }
  const int fork_errno = errno;
  close(ns_fd);
  if (child < 0) return internal_error("fork: " + errno_text(fork_errno));
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status)) return internal_error("the child binding its hostfiles died");
  const int code = WEXITSTATUS(status);
  if (code == 0) return Status::ok();
  return internal_error(std::string((code & 0x80) != 0 ? "binding its hostfiles onto themselves"
                                                       : "entering its mount namespace") +
                        " failed: " + errno_text(code & 0x7f));
}

// The job's hostfiles as mounts of their own in its mount namespace, to be
// dumped as external ones, so that its restore binds the new node's there:
// CRIU dumps the files of a tmpfs mounted in the namespace (hpcq start's run
// directory, a site's /run) and restores them as the job's private copy, in
// which the job would read the hostfiles of the node it left (issue 45 item
// 10). Everything else there stays as it was dumped (TMPDIR, the lease file
// of the node it left, which the shell then stops watching). None where
// the job directory is on the root's file system, whose files a restore
// (--root /) shows as the node has them. `shell`: the job's PID 1.
Result<std::vector<std::string>> live_hostfiles(pid_t shell, const JobFiles& files) {
  const std::set<std::string> points = mount_points_of(shell);
  const std::vector<std::string> hostfiles = {files.hostfile, files.hostfile_mpich};
  std::vector<std::string> unbound;
  for (const std::string& path : hostfiles) {
    // CRIU could not parse --external mnt[PATH]:PATH back.
    if (path.find_first_of(":[]") != std::string::npos) return std::vector<std::string>{};
    if (!points.count(path)) unbound.push_back(path);
  }
  const auto holds_dir = [&](const std::string& point) {
    return point != "/" && files.dir.compare(0, point.size(), point) == 0 &&
           (files.dir.size() == point.size() || files.dir[point.size()] == '/');
  };
  const bool on_root = std::none_of(points.begin(), points.end(), holds_dir);
  if (on_root && unbound.size() == hostfiles.size()) return std::vector<std::string>{};
  if (!unbound.empty()) HPCQ_RETURN_IF_ERROR(bind_onto_themselves(shell, unbound));
  return hostfiles;
}

// Makes `image_dir` (root's only) for a dump of `name`, whose directory
// `job_dir` is copied into it now: once CRIU has killed the tree (kStop)
// nothing may fail any more. The shell writes to its log only when a task
// cannot start and at its end, so the copy matches the dump.
Status prepare_image_dir(const std::string& image_dir, const std::string& job_dir,
                         const std::string& name) {
  if (image_dir.empty() || image_dir[0] != '/') {
    return invalid_argument(name + ": image dir '" + image_dir + "' is not an absolute path");
  }
  std::error_code ec;
  fs::create_directories(image_dir, ec);
  if (ec) return internal_error(name + ": create " + image_dir + ": " + ec.message());
  if (fs::exists(image_dir + "/" + kCheckpointMeta, ec) ||
      fs::exists(image_dir + "/inventory.img", ec)) {
    return Status(Code::kAlreadyExists, name + ": " + image_dir + " already holds a checkpoint");
  }
  // Images hold the job's memory: for root's eyes only.
  chmod(image_dir.c_str(), 0700);
  const std::string copy = image_dir + "/" + kJobDirCopy;
  fs::remove_all(copy, ec);
  Status s = copy_job_dir(job_dir, copy);
  if (!s.is_ok()) {
    fs::remove_all(copy, ec);
    return Status(s.code(), name + ": " + s.message());
  }
  return Status::ok();
}

// The meta of the checkpoint in `image_dir`, checked to be one of job `id`
// made by the executor the job needs (`containers`: runc's).
Result<nlohmann::json> checkpoint_meta(const std::string& image_dir, JobId id, bool containers) {
  const std::string name = "job " + std::to_string(id);
  const std::string meta_path = image_dir + "/" + kCheckpointMeta;
  const std::string meta_text = read_whole(meta_path);
  if (meta_text.empty()) {
    return not_found(name + " not restored: no checkpoint in " + image_dir + " (no " +
                     kCheckpointMeta + ")");
  }
  nlohmann::json meta = nlohmann::json::parse(meta_text, nullptr, /*allow_exceptions=*/false);
  if (meta.is_discarded() || !meta.is_object() || !meta.contains("job") ||
      !meta["job"].is_number_unsigned() || !meta.contains("job_dir") ||
      !meta["job_dir"].is_string()) {
    return invalid_argument(name + " not restored: " + meta_path + " is malformed");
  }
  if (meta["job"].get<JobId>() != id) {
    return invalid_argument(name + " not restored: " + image_dir + " holds job " +
                            std::to_string(meta["job"].get<JobId>()));
  }
  const bool dumped_containers = meta.value("executor", "process") == "oci";
  if (dumped_containers != containers) {
    return invalid_argument(name + " not restored: " + image_dir + " holds a " +
                            (dumped_containers ? "container" : "process") +
                            " checkpoint, the job " +
                            (containers ? "has an image" : "has no image"));
  }
  if (meta.contains(kExternalMounts) &&
      (!meta[kExternalMounts].is_array() ||
       !std::all_of(meta[kExternalMounts].begin(), meta[kExternalMounts].end(),
                    [](const nlohmann::json& path) { return path.is_string(); }))) {
    return invalid_argument(name + " not restored: " + meta_path + " is malformed");
  }
  return meta;
}

// Puts a restored tree where its tasks belong (pin_tasks), frozen meanwhile
// so that no process forks past it. Runs on the restore's thread, not the
// agent's loop: freezing a tree CRIU had just restored kept the loop busy
// for seconds in a loaded guest, past the node-down timeout.
Status pin_restored_tree(const JobCgroup& cgroup, pid_t root, const JobLaunch& l,
                         const std::string& name) {
  const auto started = std::chrono::steady_clock::now();
  const std::string freezer = freezer_dir(cgroup);
  Status s = freezer.empty() ? Status::ok() : set_frozen(freezer, true);
  const auto frozen = std::chrono::steady_clock::now();
  if (s.is_ok()) s = pin_tasks(cgroup, root, l);
  if (!freezer.empty()) {
    // Thawed whatever happened: a frozen tree would not die (v1).
    Status thawed = set_frozen(freezer, false);
    if (s.is_ok()) s = thawed;
  }
  const auto ms = [](auto d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  };
  if (const auto took = std::chrono::steady_clock::now() - started;
      took > std::chrono::seconds(1)) {
    spdlog::warn("{}: pinning the restored tree took {} ms (freezing it {} ms)", name, ms(took),
                 ms(frozen - started));
  }
  return s;
}

}  // namespace

Status ProcessExecutor::checkpoint_capability() {
  if (config_.private_tmp != "off") {
    // CRIU would have to be told of each job's binds (--external mnt[]).
    return failed_precondition(
        "this node cannot checkpoint: its jobs have a private /tmp "
        "([agent] private_tmp)");
  }
  if (!criu_probed_) {
    auto info = probe_criu(config_.criu_path);
    if (info.is_ok()) {
      Status works = criu_trial_dump(*info, std::chrono::seconds(15), 0, &hierarchy_);
      if (!works.is_ok()) info = works;
    }
    if (info.is_ok()) {
      criu_ = std::move(info).value();
      criu_status_ = Status::ok();
      spdlog::info("executor {}: checkpoint-capable (CRIU {} at {})", config_.instance,
                   criu_.version, criu_.binary);
    } else {
      criu_status_ = failed_precondition("this node cannot checkpoint: " + info.status().message());
      spdlog::warn("executor {}: {}", config_.instance, criu_status_.message());
    }
    criu_probed_ = true;
  }
  return criu_status_;
}

std::vector<CheckpointOutcome> ProcessExecutor::finished_checkpoints() {
  char buf[64];
  while (read(notify_read_.get(), buf, sizeof buf) > 0) {
  }
  std::vector<JobId> done;
  for (const auto& [id, dump] : dumps_) {
    if (dump->done.load()) done.push_back(id);
  }
  std::vector<CheckpointOutcome> outcomes;
  for (JobId id : done) outcomes.push_back(finish_dump(id));
  return outcomes;
}

// An image job's shell is stopped (SIGSTOP, which a namespace's init gets
// from its parent namespace) while `runc checkpoint` runs: runc runs in the
// job's PID namespace, and a dump that kills the container would otherwise
// end the shell's last worker, the shell, and with it the namespace -- runc
// included, before it has finished.
void ProcessExecutor::hold_shell(Job& job, bool hold) {
  if (job.pidfd < 0) return;
  signal_pidfd(job.pidfd, hold ? SIGSTOP : SIGCONT);
  if (!hold) return;
  const std::string stat = "/proc/" + std::to_string(job.pid) + "/stat";
  for (int attempt = 0; attempt < 500; ++attempt) {
    const std::string text = read_whole(stat);
    const std::size_t paren = text.rfind(')');
    if (paren == std::string::npos || paren + 2 >= text.size()) return;  // gone
    const char state = text[paren + 2];
    if (state == 'T' || state == 'Z') return;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  spdlog::warn("job {}: its shell did not stop within a second", job.id);
}

Status ProcessExecutor::checkpoint_of_other_users() {
  Status capable = checkpoint_capability();
  if (!capable.is_ok()) return capable;
  if (!other_users_status_) {
    // nobody's uid: a user with no rights of its own, as a job's user is.
    constexpr uid_t kUnprivileged = 65534;
    Status works = criu_trial_dump(criu_, std::chrono::seconds(15), kUnprivileged, &hierarchy_);
    other_users_status_ =
        works.is_ok()
            ? Status::ok()
            : failed_precondition("this node can checkpoint only root's jobs: " + works.message());
    if (!works.is_ok()) spdlog::warn("executor {}: {}", config_.instance, works.message());
  }
  return *other_users_status_;
}

Status ProcessExecutor::prepare_shell_for_dump(Job& job, const std::string& name) {
  const JobFiles files(job.dir);
  unlink(files.pmix_answer.c_str());
  if (signal_pidfd(job.pidfd, prepare_dump_signal()) != 0) {
    return failed_precondition(name + " is ending: nothing to checkpoint");
  }
  // The shell answers from its loop at once; the agent waits for it here.
  for (int waited_ms = 0; waited_ms < kPmixAnswerWaitMs; waited_ms += 5) {
    const std::string answer = read_whole(files.pmix_answer);
    if (answer == kPmixDropped) {
      job.pmix_server = false;
      return Status::ok();
    }
    if (answer == kPmixInUse) {
      // OpenPMIx's thread and the tasks' TCP connections to it.
      return failed_precondition(name +
                                 " hosts a PMIx server that its tasks use (Open MPI): it cannot "
                                 "be checkpointed");
    }
    poll(nullptr, 0, 5);
  }
  return failed_precondition(name + ": its shell did not answer within " +
                             std::to_string(kPmixAnswerWaitMs) + " ms before the dump");
}

Status ProcessExecutor::check_checkpointable(Job& job, const std::string& name) {
  const JobId id = job.id;
  if (job.checkpointing) return failed_precondition(name + " is being checkpointed already");
  if (poll_exit(job) || job.cancelled || job.timed_out) {
    return failed_precondition(name + " is ending: nothing to checkpoint");
  }
  if (!steps_of(id).empty()) {
    return failed_precondition(name + " has steps running: checkpoint it between steps");
  }
  if (job.channel.open && (job.channel.on_demand || job.channel.pmi_nodes > 1)) {
    // Its ranks on the other nodes, which it has talked to through us,
    // would not be in this dump (one whose ranks never used PMI can go).
    return failed_precondition(name +
                               " is an MPI world across nodes whose ranks have used PMI: it "
                               "cannot be checkpointed");
  }
  if (job.channel.open && job.image) {
    return failed_precondition(name +
                               " runs in containers and sends its output to its caller (hpcq run "
                               "--image): it cannot be checkpointed");
  }
  if (job.channel.open && (job.channel.fd < 0 || job.channel.inode == 0)) {
    return failed_precondition(name +
                               " lost its channel to this node's agent (the agent restarted): it "
                               "cannot be checkpointed");
  }
  Status capable = job.uid == 0 ? checkpoint_capability() : checkpoint_of_other_users();
  if (!capable.is_ok()) return Status(capable.code(), name + ": " + capable.message());
  return Status::ok();
}

Status ProcessExecutor::plan_container_dumps(const Job& job, const std::string& image_dir,
                                             CheckpointThen then, const std::string& name,
                                             Dump& dump) const {
  const std::string runc = find_program(config_.runc_path);
  if (runc.empty()) return failed_precondition(name + ": no '" + config_.runc_path + "' in PATH");
  for (int worker : job.worker_ids) {
    RuncDump c;
    c.runc = runc;
    c.state_root = JobFiles(job.dir).oci_dir + "/state";
    c.container = container_id(job.id, worker);
    c.namespace_of = job.pid;
    c.image_dir = image_dir + "/worker-" + std::to_string(worker);
    // Several containers are all dumped before any stops: a failure
    // half-way must leave the job running.
    c.leave_running = then == CheckpointThen::kContinue || job.worker_ids.size() > 1;
    c.timeout = dump.criu.timeout;
    std::error_code ec;
    fs::create_directories(c.image_dir, ec);
    if (ec) return internal_error(name + ": create " + c.image_dir + ": " + ec.message());
    dump.containers.push_back(std::move(c));
  }
  return Status::ok();
}

void ProcessExecutor::start_dump(Job& job, std::unique_ptr<Dump> dump) {
  dump->start = std::chrono::steady_clock::now();
  // The thread touches only its Dump (and the notify pipe): everything else
  // stays with the loop thread, which finishes the dump (finish_dump).
  Dump* d = dump.get();
  const int notify = notify_write_.get();
  dump->thread = std::thread([d, notify, criu = criu_] {
    if (d->containers.empty()) {
      d->status = criu_dump(criu, d->criu);
    } else {
      for (const RuncDump& container : d->containers) {
        d->status = runc_dump(criu, container);
        if (!d->status.is_ok()) break;
      }
    }
    d->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - d->start).count();
    d->done.store(true);
    const char byte = 'd';
    ssize_t ignored = write(notify, &byte, 1);
    (void)ignored;
  });
  if (job.image) hold_shell(job, true);
  job.checkpointing = true;
  dumps_.emplace(job.id, std::move(dump));
}

Status ProcessExecutor::begin_checkpoint(JobId id, const std::string& image_dir,
                                         CheckpointThen then) {
  const std::string name = "job " + std::to_string(id);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return not_found(name + " is not running here");
  Job& job = it->second;
  HPCQ_RETURN_IF_ERROR(check_checkpointable(job, name));
  if (job.pmix_server || job.channel.open) HPCQ_RETURN_IF_ERROR(prepare_shell_for_dump(job, name));
  // runc's containers see the job directory through a bind of their own.
  auto live = job.image ? std::vector<std::string>{} : live_hostfiles(job.pid, JobFiles(job.dir));
  if (!live.is_ok()) return Status(live.status().code(), name + ": " + live.status().message());
  HPCQ_RETURN_IF_ERROR(prepare_image_dir(image_dir, job.dir, name));
  std::error_code ec;
  const std::string meta = image_dir + "/" + kCheckpointMeta;
  const std::string copy = image_dir + "/" + kJobDirCopy;
  nlohmann::json m = {{"job", id},
                      {"job_dir", job.dir},
                      {"then", then == CheckpointThen::kStop ? "stop" : "continue"},
                      {"criu_version", criu_.version},
                      {"executor", job.image ? "oci" : "process"},
                      {"workers", job.worker_ids},
                      {"channel_inode", job.channel.open ? job.channel.inode : 0},
                      {kExternalMounts, *live}};
  const std::string meta_tmp = meta + ".tmp";
  if (!write_text(meta_tmp, m.dump(2) + "\n")) {
    fs::remove_all(copy, ec);
    return internal_error(name + ": write " + meta_tmp + ": " + errno_text(errno));
  }

  auto dump = std::make_unique<Dump>();
  dump->then = then;
  dump->meta = meta;
  dump->criu.root = job.pid;
  dump->criu.image_dir = image_dir;
  dump->criu.leave_running = then == CheckpointThen::kContinue;
  dump->criu.freeze_cgroup = job.image ? "" : freezer_dir(job.cgroup);
  // hpcq run's output: the shell's socket to us goes as an external one.
  if (job.channel.open) dump->criu.external_sockets = {job.channel.inode};
  dump->criu.external_mounts = *live;
  dump->criu.timeout = std::chrono::seconds(config_.criu_timeout_s);
  if (job.image) {
    if (Status planned = plan_container_dumps(job, image_dir, then, name, *dump);
        !planned.is_ok()) {
      fs::remove_all(copy, ec);
      fs::remove(meta_tmp, ec);
      return planned;
    }
  }
  start_dump(job, std::move(dump));
  return Status::ok();
}

CheckpointOutcome ProcessExecutor::finish_dump(JobId id) {
  auto node = dumps_.extract(id);
  std::unique_ptr<Dump> dump = std::move(node.mapped());
  dump->thread.join();
  const std::string name = "job " + std::to_string(id);
  CheckpointOutcome outcome;
  outcome.id = id;
  auto it = jobs_.find(id);
  if (it != jobs_.end()) {
    it->second.checkpointing = false;
    // Released unless it is to go (a good dump of kStop): discard() kills it.
    if (it->second.image && !(dump->status.is_ok() && dump->then == CheckpointThen::kStop)) {
      hold_shell(it->second, false);
    }
  }
  std::error_code ec;
  const std::string meta_tmp = dump->meta + ".tmp";
  if (!dump->status.is_ok()) {
    // CRIU resumes the tree when it fails, but not when it was killed.
    if (!dump->criu.freeze_cgroup.empty() && !set_frozen(dump->criu.freeze_cgroup, false).is_ok()) {
      spdlog::warn("{}: could not thaw {} after a failed dump", name, dump->criu.freeze_cgroup);
    }
    fs::remove(meta_tmp, ec);
    outcome.status = Status(dump->status.code(),
                            name + " not checkpointed (it runs on): " + dump->status.message());
    return outcome;
  }
  fs::rename(meta_tmp, dump->meta, ec);
  if (ec) spdlog::warn("{}: rename {}: {}", name, meta_tmp, ec.message());
  outcome.result.image_dir = dump->criu.image_dir;
  outcome.result.dump_seconds = dump->seconds;
  outcome.result.image_bytes = tree_bytes(dump->criu.image_dir);
  if (dump->then == CheckpointThen::kStop && it != jobs_.end()) {
    // CRIU has killed the tree; the job is the restorer's now.
    discard(it->second);
    jobs_.erase(it);
    outcome.result.stopped = true;
  }
  return outcome;
}

Status ProcessExecutor::prepare_restore(const JobLaunch& l, const std::string& image_dir,
                                        Job& job) {
  std::error_code ec;
  if (fs::exists(job.dir, ec)) {
    // Not a job of ours (restore() checked): what a lost run left behind
    // (a dead node's directory where nodes share the path, a crashed
    // agent's). The leader restores a job only once its last run is gone.
    const std::string stale = job.dir + ".stale";
    fs::remove_all(stale, ec);
    fs::rename(job.dir, stale, ec);
    if (ec)
      return internal_error("moving the stale job directory " + job.dir +
                            " aside: " + ec.message());
    spdlog::warn("job {}: a stale job directory was in the way of the restore: removed", job.id);
    fs::remove_all(stale, ec);
  }
  HPCQ_RETURN_IF_ERROR(copy_job_dir(image_dir + "/" + kJobDirCopy, job.dir));
  // The shell read launch.json at its start and no longer holds it: it now
  // records the new allocation. Tasks may re-read the hostfiles.
  const JobFiles files(job.dir);
  unlink(files.launch.c_str());
  HPCQ_RETURN_IF_ERROR(write_new_file(files.launch, encode_launch(l), 0600, 0, 0));
  HPCQ_RETURN_IF_ERROR(write_hostfiles(files, l.hostfile, 0, l.gid));
  auto cgroup = hierarchy_.create_job(config_.instance, l.id, job_limits(l));
  if (!cgroup.is_ok()) return cgroup.status();
  job.cgroup = std::move(cgroup).value();
  job.shell_cgroup = job.cgroup;
  return Status::ok();
}

std::vector<RestoreOutcome> ProcessExecutor::finished_restores() {
  char buf[64];
  while (read(notify_read_.get(), buf, sizeof buf) > 0) {
  }
  std::vector<JobId> done;
  for (const auto& [id, r] : restores_) {
    if (r->done.load()) done.push_back(id);
  }
  std::vector<RestoreOutcome> outcomes;
  for (JobId id : done) outcomes.push_back({id, finish_restore(id)});
  return outcomes;
}

Status ProcessExecutor::begin_restore(const JobLaunch& given, const std::string& image_dir,
                                      TimeUs now) {
  JobLaunch l = given;
  ensure_workers(l);
  const std::string name = "job " + std::to_string(l.id);
  HPCQ_RETURN_IF_ERROR(validate(l));
  if (restores_.count(l.id)) {
    return Status(Code::kAlreadyExists, name + " is being restored here already");
  }
  Status capable = checkpoint_capability();
  if (!capable.is_ok()) return Status(capable.code(), name + ": " + capable.message());
  const bool containers = !l.image.empty();
  auto read_meta = checkpoint_meta(image_dir, l.id, containers);
  if (!read_meta.is_ok()) return read_meta.status();
  const nlohmann::json meta = std::move(read_meta).value();

  Job j;
  j.id = l.id;
  j.dir = meta["job_dir"].get<std::string>();
  j.time_limit_s = l.time_limit_s;
  j.uid = l.uid;
  j.channel.open = l.has_channel();
  j.launched = now;
  set_limit(j, l.time_limit_s);
  j.image = containers;
  auto r = std::make_unique<Restore>();
  Status prepared = prepare_restore(l, image_dir, j);
  if (prepared.is_ok() && containers) prepared = prepare_container_restore(l, image_dir, j, *r);
  // A split job's workers get their cgroups before CRIU runs, and on v2 the
  // tree is restored into the job's shell leaf (as it was launched): a
  // cgroup that holds processes can take no children there.
  if (prepared.is_ok() && !containers) prepared = prepare_workers(l, j);
  if (!prepared.is_ok()) {
    discard(j);  // nothing of it may be left
    return Status(prepared.code(), name + " not restored: " + prepared.message());
  }
  if (j.channel.open) {
    prepared = reconnect_channel(meta.value("channel_inode", std::uint64_t{0}), image_dir, j, *r);
    if (!prepared.is_ok()) {
      discard(j);
      return Status(prepared.code(), name + " not restored: " + prepared.message());
    }
  }
  r->criu.image_dir = image_dir;
  // The hostfiles prepare_restore has written, where the job reads them.
  r->criu.external_mounts = meta.value(kExternalMounts, std::vector<std::string>{});
  r->criu.cgroup_dirs = j.shell_cgroup.dirs();
  r->criu.timeout = std::chrono::seconds(config_.criu_timeout_s);
  r->launch = std::move(l);
  r->job = std::move(j);
  start_restore(std::move(r));
  return Status::ok();
}

Status ProcessExecutor::reconnect_channel(std::uint64_t dumped, const std::string& image_dir,
                                          Job& j, Restore& r) {
  if (dumped == 0) {
    return failed_precondition("its checkpoint in " + image_dir +
                               " holds no channel to an agent, which the job has");
  }
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    return internal_error("socketpair: " + errno_text(errno));
  }
  j.channel.fd = pair[0];
  fcntl(j.channel.fd, F_SETFL, O_NONBLOCK);
  r.channel_theirs.adopt(pair[1]);
  struct stat theirs {};
  if (fstat(pair[1], &theirs) == 0) j.channel.inode = theirs.st_ino;
  r.criu.inherit = {{pair[1], dumped}};
  return Status::ok();
}

void ProcessExecutor::start_restore(std::unique_ptr<Restore> r) {
  // As for dumps: the thread touches only its Restore record.
  Restore* d = r.get();
  const int notify = notify_write_.get();
  r->thread = std::thread([this, d, notify, criu = criu_] {
    if (!d->pid_files.empty()) {
      run_container_restore(*d);
    } else if (auto root = criu_restore(criu, d->criu); root.is_ok()) {
      d->root = *root;
      d->status = pin_restored_tree(d->job.cgroup, d->root, d->launch,
                                    "job " + std::to_string(d->launch.id));
    } else {
      d->status = root.status();
    }
    d->done.store(true);
    const char byte = 'r';
    ssize_t ignored = write(notify, &byte, 1);
    (void)ignored;
  });
  const JobId id = r->launch.id;
  restores_.emplace(id, std::move(r));
}

Status ProcessExecutor::finish_restore(JobId id) {
  auto node = restores_.extract(id);
  std::unique_ptr<Restore> r = std::move(node.mapped());
  r->thread.join();
  JobLaunch& l = r->launch;
  Job& j = r->job;
  r->channel_theirs.reset();  // the restored shell holds it, or nobody does
  const std::string name = "job " + std::to_string(id);
  auto fail = [&](const Status& s) {
    // Nothing of the job may run on: kill what is in its new cgroups.
    discard(j);
    return Status(s.code(), name + " not restored: " + s.message());
  };
  if (!r->status.is_ok()) return fail(r->status);
  if (j.image) {
    // The new shell runs the restored containers; runc made their cgroups.
    Status pinned = pin_container_tasks(j.cgroup, l);
    if (!pinned.is_ok()) return fail(pinned);
    record_shell(j);
    jobs_.emplace(id, std::move(j));
    return Status::ok();
  }
  // The restore's thread has put the tasks in place (pin_restored_tree).
  j.pid = r->root;
  j.pidfd = open_pidfd(j.pid);
  if (j.pidfd < 0) {
    Status s = internal_error("pidfd_open of the restored shell " + std::to_string(j.pid) + ": " +
                              errno_text(errno));
    kill(j.pid, SIGKILL);
    return fail(s);
  }
  record_shell(j);
  jobs_.emplace(id, std::move(j));
  return Status::ok();
}

Status ProcessExecutor::prepare_container_restore(JobLaunch& l, const std::string& image_dir,
                                                  Job& j, Restore& r) const {
  const JobFiles files(j.dir);
  // runc's state of the dumped containers came with the copy: not ours.
  std::error_code ec;
  fs::remove_all(files.oci_dir + "/state", ec);
  j.shell_cgroup = j.cgroup;
  if (hierarchy_.version() == CgroupVersion::kV2) {
    auto shell = j.cgroup.create_child("shell", {});
    if (!shell.is_ok()) return shell.status();
    j.shell_cgroup = std::move(shell).value();
  }
  for (std::size_t w = 0; w < l.workers.size(); ++w) {
    const int id = l.workers[w].id;
    const std::string images = image_dir + "/worker-" + std::to_string(id);
    if (!fs::exists(images + "/inventory.img", ec)) {
      return not_found("no container images for worker " + std::to_string(id) + " in " + images);
    }
    const std::string work = restore_work_dir(files, id);
    fs::remove_all(work, ec);
    HPCQ_RETURN_IF_ERROR(prepare_container(l, w, j, images));
    r.pid_files.push_back(work + "/pid");
    r.restore_logs.push_back(work + "/restore.log");
    j.worker_ids.push_back(id);
  }
  unlink(files.launch.c_str());
  return write_new_file(files.launch, encode_launch(l), 0600, 0, 0);
}

void ProcessExecutor::run_container_restore(Restore& r) {
  const HostCriuLock one_at_a_time;  // runc's CRIU, as ours
  Status started = start_shell(r.job);
  if (!started.is_ok()) {
    r.status = started;
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + r.criu.timeout;
  for (;;) {
    bool all = true;
    for (const std::string& pid_file : r.pid_files) all = all && !read_whole(pid_file).empty();
    if (all) {
      r.root = r.job.pid;
      return;
    }
    pollfd p{r.job.pidfd, POLLIN, 0};
    if (poll(&p, 1, 20) > 0) {
      // The shell ended: a runc restore failed (and the shell reaped it).
      std::string reason;
      for (const std::string& log : r.restore_logs) {
        if (reason.empty() && fs::exists(log)) reason = criu_failure_reason(log, "");
      }
      if (reason.empty()) reason = last_line(JobFiles(r.job.dir).shell_log);
      r.status = internal_error("runc restore failed: " +
                                (reason.empty() ? std::string("no reason given") : reason));
      return;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      r.status =
          unavailable("runc restore ran past " + std::to_string(r.criu.timeout.count()) + " s");
      return;
    }
  }
}

}  // namespace hpcq::agent

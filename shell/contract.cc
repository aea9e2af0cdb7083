#include "shell/contract.h"

#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "agent/executor/posix.h"
#include "lib/core/bytes.h"
#include "lib/core/json_bytes.h"

namespace hpcq::agent {

using nlohmann::json;

JobFiles::JobFiles(std::string d)
    : dir(std::move(d)),
      launch(dir + "/launch.json"),
      script(dir + "/script"),
      hostfile(dir + "/hostfile"),
      hostfile_mpich(dir + "/hostfile.mpich"),
      tmpdir(dir + "/tmp"),
      private_dir(dir + "/private"),
      pmi_socket(dir + "/pmi.sock"),
      pmix_answer(dir + "/pmix-answer"),
      results(dir + "/results.json"),
      shell_log(dir + "/shell.log"),
      shell_record(dir + "/shell.json"),
      oci_dir(dir + "/oci") {}

std::string mpich_hostfile(std::string_view hostfile) {
  std::string text;
  while (!hostfile.empty()) {
    const std::size_t end = std::min(hostfile.find('\n'), hostfile.size());
    std::string_view line = hostfile.substr(0, end);
    hostfile.remove_prefix(std::min(end + 1, hostfile.size()));
    const std::size_t slots = line.find(" slots=");
    if (line.empty()) continue;
    text += slots == std::string_view::npos
                ? std::string(line)
                : std::string(line.substr(0, slots)) + ":" + std::string(line.substr(slots + 7));
    text += "\n";
  }
  return text;
}

Status write_hostfiles(const JobFiles& files, const std::string& hostfile, uid_t uid, gid_t gid) {
  unlink(files.hostfile.c_str());
  unlink(files.hostfile_mpich.c_str());
  // The job's (its group's) to read, no other user's (issue 45).
  HPCQ_RETURN_IF_ERROR(write_new_file(files.hostfile, hostfile, 0640, uid, gid));
  return write_new_file(files.hostfile_mpich, mpich_hostfile(hostfile), 0640, uid, gid);
}

void ensure_workers(JobLaunch& l) {
  if (!l.workers.empty()) return;
  WorkerSpec whole;
  whole.host_cpus = l.host_cpus;
  whole.host_mems = l.host_mems;
  whole.memory_limit_bytes = l.memory_limit_bytes;
  l.workers.push_back(std::move(whole));
  for (TaskSpec& t : l.tasks) t.worker = 0;
}

std::string encode_launch(const JobLaunch& l) {
  json tasks = json::array();
  for (const TaskSpec& t : l.tasks) {
    tasks.push_back({{"rank", t.rank},
                     {"worker", t.worker},
                     {"host_cpus", t.host_cpus},
                     {"logical_cpus", t.logical_cpus}});
    if (!t.env.empty()) tasks.back()["env"] = bytes_to_json(t.env);
    if (!t.gpus.empty()) tasks.back()["gpus"] = t.gpus;
    if (!t.device_cgroup.empty()) tasks.back()["device_cgroup"] = t.device_cgroup;
  }
  json workers = json::array();
  for (const WorkerSpec& w : l.workers) {
    workers.push_back({{"id", w.id},
                       {"group", w.group},
                       {"host_cpus", w.host_cpus},
                       {"host_mems", w.host_mems},
                       {"memory_limit_bytes", w.memory_limit_bytes},
                       {"cgroup_dirs", w.cgroup_dirs},
                       {"command", w.command},
                       {"results", w.results}});
  }
  json j = {{"id", l.id},
            {"uid", l.uid},
            {"gid", l.gid},
            {"user", l.user},
            {"home", bytes_to_json(l.home)},
            {"groups", l.groups},
            {"argv", bytes_to_json(l.argv)},
            {"script", bytes_to_json(l.script)},
            {"env", bytes_to_json(l.env)},
            {"cwd", bytes_to_json(l.cwd)},
            {"stdout_path", bytes_to_json(l.stdout_path)},
            {"stderr_path", bytes_to_json(l.stderr_path)},
            {"hostfile", l.hostfile},
            {"tmpdir", l.tmpdir},
            {"tasks", tasks},
            {"workers", workers},
            {"image", l.image},
            {"host_cpus", l.host_cpus},
            {"host_mems", l.host_mems},
            {"memory_limit_bytes", l.memory_limit_bytes},
            {"time_limit_s", l.time_limit_s},
            {"batch", l.batch},
            {"step", l.step},
            {"forward_output", l.forward_output},
            {"pty", l.pty}};
  if (!l.leader_lease.empty()) j["leader_lease"] = l.leader_lease;
  if (!l.pmi.kvsname.empty()) {
    j["pmi"] = {{"api", l.pmi.api},
                {"kvsname", l.pmi.kvsname},
                {"size", l.pmi.size},
                {"nodes", l.pmi.nodes},
                {"process_mapping", l.pmi.process_mapping},
                {"max_kvs_bytes", l.pmi.max_kvs_bytes},
                {"node_names", l.pmi.node_names},
                {"node", l.pmi.node},
                {"node_of_rank", l.pmi.node_of_rank},
                {"node_ranks", l.pmi.node_ranks}};
  }
  // User bytes went in as bytes_to_json; replace, not throw, on the rest.
  return j.dump(1, ' ', false, json::error_handler_t::replace);
}

namespace {

// launch.json's tasks and workers; nlohmann's type errors are thrown.
Status decode_tasks_and_workers(const json& j, JobLaunch& l) {
  for (const json& t : j.at("tasks")) {
    TaskSpec task;
    task.rank = t.at("rank").get<int>();
    task.worker = t.at("worker").get<int>();
    task.host_cpus = t.at("host_cpus").get<std::vector<int>>();
    task.logical_cpus = t.at("logical_cpus").get<std::string>();
    task.gpus = t.value("gpus", std::vector<int>{});
    task.device_cgroup = t.value("device_cgroup", std::string());
    if (t.contains("env") && !bytes_from_json(t.at("env"), task.env)) {
      return invalid_argument("launch.json: a task's environment is malformed");
    }
    l.tasks.push_back(std::move(task));
  }
  for (const json& w : j.at("workers")) {
    WorkerSpec worker;
    worker.id = w.at("id").get<int>();
    worker.group = w.at("group").get<int>();
    worker.host_cpus = w.at("host_cpus").get<std::vector<int>>();
    worker.host_mems = w.at("host_mems").get<std::vector<int>>();
    worker.memory_limit_bytes = w.at("memory_limit_bytes").get<std::uint64_t>();
    worker.cgroup_dirs = w.at("cgroup_dirs").get<std::vector<std::string>>();
    worker.command = w.at("command").get<std::vector<std::string>>();
    worker.results = w.at("results").get<std::string>();
    l.workers.push_back(std::move(worker));
  }
  for (const TaskSpec& task : l.tasks) {
    if (task.worker < 0 || static_cast<std::size_t>(task.worker) >= l.workers.size()) {
      return invalid_argument("launch.json: task " + std::to_string(task.rank) + " names worker " +
                              std::to_string(task.worker) + " of " +
                              std::to_string(l.workers.size()));
    }
  }
  return Status::ok();
}

// launch.json's "pmi": the job's MPI world, whose ranks and node must be
// among its nodes.
Status decode_pmi_world(const json& p, JobLaunch::PmiWorld& pmi) {
  pmi.kvsname = p.at("kvsname").get<std::string>();
  pmi.size = p.at("size").get<int>();
  pmi.nodes = p.at("nodes").get<int>();
  pmi.process_mapping = p.at("process_mapping").get<std::string>();
  pmi.api = p.value("api", std::string("pmi1"));
  pmi.max_kvs_bytes = p.value("max_kvs_bytes", pmi.max_kvs_bytes);
  pmi.node_names = p.value("node_names", std::vector<std::string>{});
  pmi.node = p.value("node", 0);
  pmi.node_of_rank = p.value("node_of_rank", std::vector<int>{});
  pmi.node_ranks = p.value("node_ranks", std::vector<std::uint32_t>{});
  if (pmi.kvsname.empty() || pmi.size < 1 || pmi.nodes < 1) {
    return invalid_argument("launch.json: a PMI world without name, size or nodes");
  }
  if (pmi.max_kvs_bytes < 1) {
    return invalid_argument("launch.json: a PMI world without room for a key");
  }
  if (!pmi.offers_pmi1() && !pmi.offers_pmix()) {
    return invalid_argument("launch.json: unknown MPI interface '" + pmi.api + "'");
  }
  const int node_count = static_cast<int>(pmi.node_names.size());
  const bool mapped =
      pmi.node_of_rank.empty() || (pmi.node_of_rank.size() == static_cast<std::size_t>(pmi.size) &&
                                   std::all_of(pmi.node_of_rank.begin(), pmi.node_of_rank.end(),
                                               [&](int n) { return n >= 0 && n < node_count; }));
  if (!mapped || pmi.node < 0 ||
      (!pmi.node_ranks.empty() && pmi.node_ranks.size() != pmi.node_names.size()) ||
      (!pmi.node_names.empty() && pmi.node >= node_count)) {
    return invalid_argument("launch.json: a PMI world whose ranks or node are off its nodes");
  }
  return Status::ok();
}

}  // namespace

Result<JobLaunch> decode_launch(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return invalid_argument("launch.json: not a JSON object");
  // nlohmann reports type errors by exception: catch them here, at the edge.
  try {
    JobLaunch l;
    l.id = j.at("id").get<JobId>();
    l.uid = j.at("uid").get<std::uint32_t>();
    l.gid = j.at("gid").get<std::uint32_t>();
    l.user = j.at("user").get<std::string>();
    l.groups = j.value("groups", std::vector<std::uint32_t>());
    if ((j.contains("home") && !bytes_from_json(j.at("home"), l.home)) ||
        !bytes_from_json(j.at("argv"), l.argv) || !bytes_from_json(j.at("script"), l.script) ||
        !bytes_from_json(j.at("env"), l.env) || !bytes_from_json(j.at("cwd"), l.cwd) ||
        !bytes_from_json(j.at("stdout_path"), l.stdout_path) ||
        !bytes_from_json(j.at("stderr_path"), l.stderr_path)) {
      return invalid_argument("launch.json: a command, path or environment is malformed");
    }
    l.hostfile = j.at("hostfile").get<std::string>();
    l.tmpdir = j.value("tmpdir", std::string());
    HPCQ_RETURN_IF_ERROR(decode_tasks_and_workers(j, l));
    l.image = j.at("image").get<std::string>();
    l.host_cpus = j.at("host_cpus").get<std::vector<int>>();
    l.host_mems = j.at("host_mems").get<std::vector<int>>();
    l.memory_limit_bytes = j.at("memory_limit_bytes").get<std::uint64_t>();
    l.time_limit_s = j.at("time_limit_s").get<std::int64_t>();
    l.batch = j.value("batch", false);
    l.step = j.value("step", std::uint32_t{0});
    l.forward_output = j.value("forward_output", false);
    l.pty = j.value("pty", false);
    l.leader_lease = j.value("leader_lease", std::string());
    if (j.contains("pmi")) HPCQ_RETURN_IF_ERROR(decode_pmi_world(j.at("pmi"), l.pmi));
    return l;
  } catch (const json::exception& e) {
    return invalid_argument(std::string("launch.json: ") + e.what());
  }
}

std::string encode_results(const ShellResults& r) {
  json tasks = json::array();
  for (const TaskResult& t : r.tasks) {
    tasks.push_back({{"rank", t.rank},
                     {"local", t.local},
                     {"exit_code", t.exit_code},
                     {"signal", t.signal},
                     {"error", t.error},
                     {"ended_by_shell", t.ended_by_shell}});
  }
  json j = {{"exit_code", r.exit_code}, {"tasks", tasks}, {"cpu_time_us", r.cpu_time_us}};
  return j.dump(1, ' ', false, json::error_handler_t::replace);
}

Result<ShellResults> decode_results(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return invalid_argument("results.json: not a JSON object");
  try {
    ShellResults r;
    r.exit_code = j.at("exit_code").get<int>();
    r.cpu_time_us = j.value("cpu_time_us", std::int64_t{0});
    for (const json& t : j.at("tasks")) {
      TaskResult task;
      task.rank = t.at("rank").get<int>();
      task.local = t.at("local").get<int>();
      task.exit_code = t.at("exit_code").get<int>();
      task.signal = t.at("signal").get<int>();
      task.error = t.at("error").get<std::string>();
      task.ended_by_shell = t.value("ended_by_shell", false);
      r.tasks.push_back(std::move(task));
    }
    return r;
  } catch (const json::exception& e) {
    return invalid_argument(std::string("results.json: ") + e.what());
  }
}

int job_exit_code(const std::vector<TaskResult>& tasks) {
  int code = 0;
  for (const TaskResult& t : tasks) {
    if (!t.ended_by_shell) code = std::max(code, t.exit_code);
  }
  return code;
}

std::string describe_results(const ShellResults& r) {
  // A start failure explains more than the exit codes that follow from it, so
  // it wins; otherwise the task with the job's (highest) code, lowest rank first.
  const TaskResult* worst = nullptr;
  for (const TaskResult& t : r.tasks) {
    if (t.ended_by_shell) continue;
    if (!t.error.empty()) {
      worst = &t;
      break;
    }
    if (t.exit_code != 0 && (!worst || t.exit_code > worst->exit_code)) worst = &t;
  }
  return worst ? describe_task(*worst) : "";
}

std::string describe_task(const TaskResult& task) {
  std::string prefix = "task " + std::to_string(task.rank) + ": ";
  if (!task.error.empty()) return prefix + task.error;
  if (task.signal != 0) {
    const char* name = sigabbrev_np(task.signal);
    return prefix + "killed by signal " + std::to_string(task.signal) +
           (name ? std::string(" (SIG") + name + ")" : std::string());
  }
  return prefix + "exited with code " + std::to_string(task.exit_code);
}

namespace {

// `data` in pieces of at most kOutputFrameData bytes (no data: one empty
// piece), for a fence's or a modex answer's frames.
std::vector<std::string_view> frame_pieces(std::string_view data) {
  std::vector<std::string_view> pieces;
  do {
    pieces.push_back(data.substr(0, kOutputFrameData));
    data.remove_prefix(pieces.back().size());
  } while (!data.empty());
  return pieces;
}

}  // namespace

std::string encode_output_frame(int rank, bool is_stderr, std::string_view data) {
  std::string frame;
  put_u32(frame, static_cast<std::uint32_t>(rank));
  frame += is_stderr ? '\2' : '\1';
  frame.append(data);
  return frame;
}

std::vector<FenceFrame> split_fence(std::uint32_t seq, std::string_view data) {
  const std::vector<std::string_view> pieces = frame_pieces(data);
  std::vector<FenceFrame> frames;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    frames.push_back({seq, i + 1 == pieces.size(), std::string(pieces[i])});
  }
  return frames;
}

namespace {

constexpr char kFenceStream = 3;
constexpr char kFailureStream = 4;
constexpr char kModexStream = 5;
constexpr char kFenceLast = 1;  // the flag of a fence frame from the shell
constexpr char kInputEof = 1, kInputFence = 4, kInputFenceLast = 8, kInputModex = 16,
               kInputFenceFailed = 32;
constexpr std::size_t kModexHeader = 22;  // kind, flags, tag, rank, node, status

std::string encode_modex(const ModexFrame& m) {
  std::string body;
  body += static_cast<char>(m.kind);
  body += static_cast<char>(m.last ? 1 : 0);
  put_u64(body, m.tag);
  put_u32(body, m.rank);
  put_u32(body, m.node);
  put_u32(body, static_cast<std::uint32_t>(m.status));
  body.append(m.data);
  return body;
}

Result<ModexFrame> decode_modex(std::string_view body) {
  if (body.size() < kModexHeader ||
      (body[0] != static_cast<char>(ModexFrame::Kind::kRequest) &&
       body[0] != static_cast<char>(ModexFrame::Kind::kData)) ||
      (body[1] & ~1) != 0) {
    return invalid_argument("modex frame: malformed header");
  }
  ModexFrame m;
  m.kind = static_cast<ModexFrame::Kind>(body[0]);
  m.last = body[1] == 1;
  m.tag = get_u64(body.substr(2));
  m.rank = get_u32(body.substr(10));
  m.node = get_u32(body.substr(14));
  m.status = static_cast<std::int32_t>(get_u32(body.substr(18)));
  m.data = body.substr(kModexHeader);
  return m;
}

}  // namespace

std::vector<ModexFrame> split_modex(std::uint64_t tag, std::int32_t status, std::string_view data) {
  const std::vector<std::string_view> pieces = frame_pieces(data);
  std::vector<ModexFrame> frames;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    ModexFrame& f = frames.emplace_back();
    f.kind = ModexFrame::Kind::kData;
    f.last = i + 1 == pieces.size();
    f.tag = tag;
    f.status = status;
    f.data = pieces[i];
  }
  return frames;
}

std::string encode_output_frame(const ModexFrame& modex) {
  std::string frame = encode_output_frame(0, false, "");
  frame[4] = kModexStream;
  return frame + encode_modex(modex);
}

std::string encode_output_frame(const FenceFrame& fence) {
  std::string frame = encode_output_frame(static_cast<int>(fence.seq), false, "");
  frame[4] = kFenceStream;
  frame += static_cast<char>(fence.last ? kFenceLast : 0);
  frame.append(fence.data);
  return frame;
}

std::string encode_failure_frame(int code, TimeUs seen_at, std::string_view why) {
  std::string frame =
      encode_output_frame(0, false, std::to_string(code) + " " + std::to_string(seen_at) + "\n");
  frame[4] = kFailureStream;
  frame.append(why);
  return frame;
}

Result<OutputFrame> decode_output_frame(std::string_view frame) {
  if (frame.size() > 5 && frame[4] == kFailureStream) {
    const std::string_view rest = frame.substr(5);
    const std::size_t newline = rest.find('\n');
    // "CODE SEEN_AT\n"; a shell from before SEEN_AT sent "CODE\n".
    const std::string_view head = rest.substr(0, newline);
    const std::size_t space = head.find(' ');
    const std::string text(head.substr(0, space));
    const std::string seen_at(space == std::string_view::npos ? "0" : head.substr(space + 1));
    if (newline == std::string_view::npos || text.empty() || text.size() > 11 ||
        text.find_first_not_of("-0123456789") != std::string::npos || seen_at.empty() ||
        seen_at.size() > 18 || seen_at.find_first_not_of("0123456789") != std::string::npos) {
      return invalid_argument("failure frame: bad code");
    }
    OutputFrame out;
    try {
      out.failure_code = std::stoi(text);
      out.failure_seen_at = std::stoll(seen_at);
    } catch (const std::exception&) {
      return invalid_argument("failure frame: bad code");
    }
    out.data = rest.substr(newline + 1);
    return out;
  }
  if (frame.size() >= 5 && frame[4] == kModexStream) {
    auto modex = decode_modex(frame.substr(5));
    if (!modex.is_ok()) return modex.status();
    OutputFrame out;
    out.modex = std::move(*modex);
    return out;
  }
  if (frame.size() >= 6 && frame[4] == kFenceStream) {
    OutputFrame out;
    FenceFrame& fence = out.fence.emplace();
    fence.seq = get_u32(frame);
    fence.last = (frame[5] & kFenceLast) != 0;
    fence.data = frame.substr(6);
    return out;
  }
  if (frame.size() < 5 || (frame[4] != 1 && frame[4] != 2)) {
    return invalid_argument("output frame: malformed header");
  }
  OutputFrame out;
  out.rank = static_cast<int>(get_u32(frame));
  out.is_stderr = frame[4] == 2;
  out.data = frame.substr(5);
  return out;
}

std::string encode_input_frame(const ModexFrame& modex) {
  return std::string(1, kInputModex) + encode_modex(modex);
}

std::string encode_input_frame(const FenceFrame& fence) {
  std::string frame(1, static_cast<char>(kInputFence | (fence.last ? kInputFenceLast : 0) |
                                         (fence.failed ? kInputFenceFailed : 0)));
  put_u32(frame, fence.seq);
  put_u32(frame, 0);
  frame.append(fence.data);
  return frame;
}

std::string encode_input_frame(const TaskInput& input) {
  std::string frame(1, input.eof ? kInputEof : '\0');
  put_u32(frame, input.rows);
  put_u32(frame, input.cols);
  frame.append(input.data);
  return frame;
}

Result<TaskInput> decode_input_frame(std::string_view frame) {
  if (!frame.empty() && frame[0] == kInputModex) {
    auto modex = decode_modex(frame.substr(1));
    if (!modex.is_ok()) return modex.status();
    TaskInput input;
    input.modex = std::move(*modex);
    return input;
  }
  if (frame.size() >= 9 && (frame[0] & kInputFence) != 0) {
    TaskInput input;
    FenceFrame& fence = input.fence.emplace();
    fence.seq = get_u32(frame.substr(1));
    fence.last = (frame[0] & kInputFenceLast) != 0;
    fence.failed = (frame[0] & kInputFenceFailed) != 0;
    fence.data = frame.substr(9);
    return input;
  }
  if (frame.size() < 9 || (frame[0] != 0 && frame[0] != kInputEof)) {
    return invalid_argument("input frame: malformed header");
  }
  TaskInput input;
  input.eof = frame[0] == 1;
  input.rows = get_u32(frame.substr(1));
  input.cols = get_u32(frame.substr(5));
  input.data = frame.substr(9);
  return input;
}

}  // namespace hpcq::agent

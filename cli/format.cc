#include "cli/format.h"

#include <locale.h>
#include <wchar.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <cwchar>
#include <iomanip>
#include <sstream>

#include "lib/api/job_proto.h"
#include "lib/core/hostlist.h"
#include "lib/resource/placement_names.h"

namespace hpcq::cli {
namespace {

nlohmann::json time_json(std::int64_t us) {
  if (us == 0) return nullptr;
  return static_cast<double>(us) / 1e6;
}

template <typename Items>
std::string join(const Items& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ",") + s;
  return out.empty() ? "-" : out;
}

// Counts by name, sorted: "matlab:2,nvme:1" (-L, --gres); with `free`, each
// as free/total ("nvme:1/2"), as the GPUS column. "-" when there are none.
template <typename Counts>
std::string counts_text(const Counts& counts, const Counts* free = nullptr) {
  const std::map<std::string, int> sorted(counts.begin(), counts.end());
  std::string out;
  for (const auto& [name, count] : sorted) {
    out += (out.empty() ? "" : ",") + name + ":";
    if (free != nullptr) {
      const auto f = free->find(name);
      out += std::to_string(f != free->end() ? f->second : 0) + "/";
    }
    out += std::to_string(count);
  }
  return out.empty() ? "-" : out;
}

// Node names in hostlist form, as squeue shows them: node[1-3,5].
template <typename Items>
std::string node_list(const Items& items) {
  const std::string out = compress_hostlist(std::vector<std::string>(items.begin(), items.end()));
  return out.empty() ? "-" : out;
}

std::string elapsed(const v1::Job& job) {
  if (job.start_time_us() == 0) return "0:00";
  std::int64_t end = job.end_time_us();
  if (end == 0) {
    end = static_cast<std::int64_t>(std::time(nullptr)) * 1000000;
  }
  std::int64_t s = std::max<std::int64_t>(0, (end - job.start_time_us()) / 1000000);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  }
  return buf;
}

// The columns `text` takes on a terminal: UTF-8 decoded, each character as
// wide as wcwidth says (CJK: 2); a byte that is not UTF-8 counts 1.
size_t display_width(const std::string& text) {
  static const locale_t utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(0));
  const locale_t previous = utf8 ? uselocale(utf8) : static_cast<locale_t>(0);
  size_t width = 0;
  std::mbstate_t state{};
  const char* p = text.data();
  const char* end = p + text.size();
  while (p < end) {
    wchar_t c = 0;
    const size_t n =
        utf8 ? std::mbrtowc(&c, p, static_cast<size_t>(end - p), &state) : static_cast<size_t>(-1);
    if (n == static_cast<size_t>(-1) || n == static_cast<size_t>(-2) || n == 0) {
      state = std::mbstate_t{};
      ++width;
      ++p;
      continue;
    }
    const int w = wcwidth(c);
    width += w < 0 ? 1 : static_cast<size_t>(w);
    p += n;
  }
  if (utf8) uselocale(previous);
  return width;
}

std::string table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], display_width(row[i]));
  }
  std::ostringstream out;
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) {
      out << row[i];
      if (i + 1 < row.size()) out << std::string(width[i] - display_width(row[i]) + 2, ' ');
    }
    out << '\n';
  }
  return out.str();
}

// 12.34 (seconds, from microseconds).
std::string seconds_text(std::int64_t us) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", static_cast<double>(us) / 1e6);
  return text;
}

// 512K, 3.2M, 1.5G (binary units, as sacct prints MaxRSS).
std::string format_bytes(std::uint64_t bytes) {
  const char* units[] = {"", "K", "M", "G", "T"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f%s" : "%.1f%s", value, units[unit]);
  return text;
}

}  // namespace

std::string time_text(std::int64_t us) {
  if (us == 0) return "-";
  std::time_t t = static_cast<std::time_t>(us / 1000000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

std::string checkpoint_then_word(const v1::CheckpointRecord& r) {
  auto then = api::checkpoint_then_of(r.action(), r.then());
  return then.is_ok() ? job::checkpoint_then_name(*then) : "";
}

std::string resize_kind_word(const v1::ResizeRecord& r) {
  auto kind = api::resize_kind_of(r.resize_kind(), r.kind());
  return kind.is_ok() ? job::resize_kind_name(*kind) : "";
}

nlohmann::json checkpoint_json(const v1::CheckpointRecord& r) {
  return {{"time", r.time_us() / 1e6},
          {"then", checkpoint_then_word(r)},
          {"nodes", std::vector<std::string>(r.nodes().begin(), r.nodes().end())},
          {"image", r.image()},
          {"image_bytes", r.image_bytes()},
          {"dump_seconds", r.dump_seconds()},
          {"outcome", r.outcome()},
          {"restored", r.restored()},
          {"restore_pending", r.restore_pending()},
          {"periodic", r.periodic()},
          {"pruned", r.pruned()},
          {"to", std::vector<std::string>(r.to().begin(), r.to().end())},
          {"preempted", r.preempted()},
          {"preempted_for", r.preempted_for()}};
}

nlohmann::json resize_json(const v1::ResizeRecord& r) {
  return {{"time", r.time_us() / 1e6},
          {"kind", resize_kind_word(r)},
          {"from", r.from()},
          {"to", r.to()},
          {"outcome", r.outcome()},
          {"reason", r.reason()},
          {"by", r.by()},
          {"answered", r.answered_us() / 1e6},
          {"answer_seconds", r.answer_seconds()},
          {"nodes", std::vector<std::string>(r.nodes().begin(), r.nodes().end())}};
}

std::string json_text(const nlohmann::json& value, int indent) {
  return value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json step_json(const v1::Step& s) {
  std::vector<std::string> argv(s.spec().argv().begin(), s.spec().argv().end());
  return {{"id", s.id()},
          {"command", argv},
          {"nodes", std::vector<std::string>(s.nodes().begin(), s.nodes().end())},
          {"ntasks", s.ntasks()},
          {"cpus_per_task", s.cpus_per_task()},
          {"overlap", s.spec().overlap()},
          {"submit", time_json(s.submit_time_us())},
          {"start", time_json(s.start_time_us())},
          {"end", time_json(s.end_time_us())},
          {"state", api::state_name(s.state())},
          {"exit_code", s.exit_code()},
          {"reason", s.reason()},
          {"total_cpu_s", s.cpu_time_us() / 1e6},
          {"max_memory_bytes", s.max_memory_bytes()}};
}

nlohmann::json job_json(const v1::Job& job) {
  nlohmann::json j;
  j["id"] = job.id();
  j["user"] = job.user();
  j["uid"] = job.uid();
  j["name"] = job.name();
  j["state"] = api::state_name(job.state());
  j["exit_code"] = job.exit_code();
  j["reason"] = job.reason();
  j["nodes"] = nlohmann::json::array();
  for (const auto& n : job.nodes()) j["nodes"].push_back(n);
  j["allocation"] = nlohmann::json::array();
  j["workers"] = nlohmann::json::array();  // every node's, each with its node
  for (const auto& a : job.allocation()) {
    j["allocation"].push_back({
        {"node", a.node()},
        {"rank", a.rank()},
        {"cores", std::vector<int>(a.cores().begin(), a.cores().end())},
        {"numa", std::vector<int>(a.numa().begin(), a.numa().end())},
        {"memory_bytes", a.memory_bytes()},
        {"ntasks", a.ntasks()},
        {"first_task", a.first_task()},
        {"host_cpus", std::vector<int>(a.host_cpus().begin(), a.host_cpus().end())},
        {"gpus", std::vector<int>(a.gpus().begin(), a.gpus().end())},
    });
    nlohmann::json workers = nlohmann::json::array();
    for (const auto& w : a.workers()) {
      workers.push_back({{"id", w.id()},
                         {"group", w.group()},
                         {"ranks", std::vector<int>(w.ranks().begin(), w.ranks().end())},
                         {"cores", std::vector<int>(w.cores().begin(), w.cores().end())},
                         {"numa", std::vector<int>(w.numa().begin(), w.numa().end())},
                         {"executor", w.executor()}});
      j["workers"].push_back(workers.back());
      j["workers"].back()["node"] = a.node();
    }
    j["allocation"].back()["workers"] = std::move(workers);
  }
  j["ntasks"] = job.spec().ntasks();
  j["cpus_per_task"] = job.spec().cpus_per_task();
  j["gpus_per_node"] = job.spec().gpus_per_node();
  j["gpus_per_task"] = job.spec().gpus_per_task();
  resource::ResourceRequest layout;
  (void)api::read_layout(job.spec(), layout);  // hpcqd's answer: valid, else the defaults
  j["distribution"] =
      resource::distribution_text(layout.node_distribution, layout.core_distribution);
  j["cpu_bind"] = resource::cpu_bind_name(layout.cpu_bind);
  j["numa_policy"] = job.spec().numa_policy().empty() ? "best-effort" : job.spec().numa_policy();
  j["oversubscribe"] = job.spec().oversubscribe();
  j["profile"] = job.spec().profile();
  j["requested_workers"] = job.spec().workers();
  j["image"] = job.spec().image();
  j["nodelist"] =
      std::vector<std::string>(job.spec().nodelist().begin(), job.spec().nodelist().end());
  j["exclude"] = std::vector<std::string>(job.spec().exclude().begin(), job.spec().exclude().end());
  j["constraint"] = job.spec().constraint();
  j["ntasks_per_node"] = job.spec().ntasks_per_node();
  j["licenses"] =
      std::map<std::string, int>(job.spec().licenses().begin(), job.spec().licenses().end());
  j["gres"] = std::map<std::string, int>(job.spec().gres().begin(), job.spec().gres().end());
  j["time_limit_s"] = job.spec().time_limit_s();
  j["queue"] = job.queue();
  j["cwd"] = api::cwd_of(job.spec());
  j["command"] = api::argv_of(job.spec());
  j["stdout"] = job.stdout_bytes().empty() ? job.stdout() : job.stdout_bytes();
  j["stderr"] = job.stderr_bytes().empty() ? job.stderr() : job.stderr_bytes();
  j["submit_time"] = time_json(job.submit_time_us());
  j["begin_time"] = time_json(job.spec().begin_time_us());
  j["start_time"] = time_json(job.start_time_us());
  j["end_time"] = time_json(job.end_time_us());
  j["requeue_count"] = job.requeue_count();
  j["checkpoints"] = nlohmann::json::array();
  for (const auto& r : job.checkpoints()) j["checkpoints"].push_back(checkpoint_json(r));
  j["placements"] = nlohmann::json::array();
  for (const auto& p : job.placements()) {
    j["placements"].push_back(
        {{"nodes", std::vector<std::string>(p.nodes().begin(), p.nodes().end())},
         {"start", time_json(p.start_us())},
         {"end", time_json(p.end_us())},
         {"restored_from", p.restored_from()},
         {"outcome", p.outcome()}});
  }
  j["checkpoint_interval_s"] = job.spec().checkpoint_interval_s();
  if (!job.restore_from().empty()) j["restore_from"] = job.restore_from();
  // A node range (hpcq issue 7): min_nodes..max_nodes; 0: none.
  j["min_nodes"] = job.spec().max_nodes() > 0 ? job.spec().nodes() : 0;
  j["max_nodes"] = job.spec().max_nodes();
  j["elastic"] = job.spec().elastic();
  j["resizes"] = nlohmann::json::array();
  for (const auto& r : job.resizes()) j["resizes"].push_back(resize_json(r));
  j["batch"] = job.spec().batch();
  j["steps"] = nlohmann::json::array();
  for (const auto& s : job.steps()) j["steps"].push_back(step_json(s));
  j["held"] = job.held();
  j["account"] = job.spec().account();
  j["qos"] = job.spec().qos();
  j["priority"] = job.spec().priority();
  j["dependency"] = job.spec().dependency();
  if (job.array_job_id() != 0) {
    j["array_job_id"] = job.array_job_id();
    j["array_task_id"] = job.array_task_id();
  }
  int cores = 0;
  for (const auto& a : job.allocation()) cores += a.cores_size();
  j["cores"] = cores;
  // Accounting: cores held x time held, as sacct's CPUTime.
  std::int64_t held_s = job.start_time_us() && job.end_time_us()
                            ? (job.end_time_us() - job.start_time_us()) / 1000000
                            : 0;
  j["cpu_time_s"] = held_s * cores;
  // Measured on the nodes (sacct's TotalCPU and MaxRSS): user + system time of
  // its processes and steps, and its cgroup's peak memory on its largest node.
  j["total_cpu_s"] = job.cpu_time_us() / 1e6;
  j["max_memory_bytes"] = job.max_memory_bytes();
  return j;
}

nlohmann::json node_json(const v1::Node& node) {
  return {
      {"name", node.name()},
      {"rank", node.rank()},
      {"state", node.state()},
      {"cores", node.cores()},
      {"numa", node.numa()},
      {"free_cores", node.free_cores()},
      {"packages", node.packages()},
      {"memory_bytes", node.memory_bytes()},
      {"gpus", node.gpus()},
      {"free_gpus", node.free_gpus()},
      {"topology", node.topology()},
      {"features", std::vector<std::string>(node.features().begin(), node.features().end())},
      {"gres", std::map<std::string, int>(node.gres().begin(), node.gres().end())},
      {"free_gres", std::map<std::string, int>(node.free_gres().begin(), node.free_gres().end())},
      {"host_cpus", node.host_cpus()},
      {"running_jobs", node.running_jobs()},
      {"reason", node.reason()},
      {"checkpoint", node.checkpoint_capable()},
      {"checkpoint_reason", node.checkpoint_reason()},
      {"checkpoint_other_users", node.checkpoint_other_users()},
      {"checkpoint_other_users_reason", node.checkpoint_other_users_reason()},
      {"agent_version", node.agent_version()},
      {"protocol_version", node.protocol_version()}};
}

std::string queue_table(const v1::ListJobsResponse& jobs) {
  std::vector<std::vector<std::string>> rows = {
      {"JOBID", "QUEUE", "USER", "NAME", "STATE", "TIME", "NODES", "TASKS", "NODELIST(REASON)"}};
  for (const auto& job : jobs.jobs()) {
    std::string where =
        job.nodes_size()
            ? node_list(job.nodes())
            : "(" + (job.reason().empty() ? std::string("Priority") : job.reason()) + ")";
    // An array task shows as ARRAYID_INDEX, as squeue does, after its own id.
    std::string id = std::to_string(job.id());
    if (job.array_job_id() != 0) {
      id += " (" + std::to_string(job.array_job_id()) + "_" + std::to_string(job.array_task_id()) +
            ")";
    }
    rows.push_back({id, job.queue().empty() ? "-" : job.queue(), job.user(), job.name(),
                    api::state_name(job.state()), elapsed(job),
                    std::to_string(job.nodes_size() ? job.nodes_size() : job.spec().nodes()),
                    std::to_string(job.spec().ntasks()), where});
  }
  return table(rows);
}

std::string step_status_text(const v1::Job& job, const v1::Step& s) {
  std::ostringstream out;
  out << "StepId=" << job.id() << "." << s.id() << " JobName=" << job.name() << "\n"
      << "   User=" << job.user() << "(" << job.uid() << ") State=" << api::state_name(s.state())
      << " ExitCode=" << s.exit_code();
  if (!s.reason().empty()) out << " Reason=\"" << s.reason() << "\"";
  out << "\n   SubmitTime=" << time_text(s.submit_time_us())
      << " StartTime=" << time_text(s.start_time_us()) << " EndTime=" << time_text(s.end_time_us())
      << "\n"
      << "   NumNodes=" << s.nodes_size() << " NumTasks=" << s.ntasks()
      << " CPUs/Task=" << s.cpus_per_task() << " NodeList=" << node_list(s.nodes())
      << " Overlap=" << (s.spec().overlap() ? "yes" : "no") << "\n";
  if (s.start_time_us() != 0) {
    out << "   TotalCPU=" << std::fixed << std::setprecision(2) << s.cpu_time_us() / 1e6
        << "s MaxMem=" << format_bytes(s.max_memory_bytes()) << "\n";
  }
  out << "   Command="
      << join(std::vector<std::string>(s.spec().argv().begin(), s.spec().argv().end())) << "\n";
  return out.str();
}

nlohmann::json step_status_json(const v1::Job& job, const v1::Step& s) {
  nlohmann::json j = step_json(s);
  j["id"] = job.id();
  j["step"] = s.id();
  return j;
}

std::string status_text(const v1::Job& job) {
  std::ostringstream out;
  out << "JobId=" << job.id() << " JobName=" << job.name() << "\n"
      << "   User=" << job.user() << "(" << job.uid() << ") State=" << api::state_name(job.state())
      << " ExitCode=" << job.exit_code();
  if (!job.reason().empty()) out << " Reason=\"" << job.reason() << "\"";
  out << "\n   SubmitTime=" << time_text(job.submit_time_us())
      << " BeginTime=" << time_text(job.spec().begin_time_us())
      << " StartTime=" << time_text(job.start_time_us())
      << " EndTime=" << time_text(job.end_time_us()) << " RunTime=" << elapsed(job) << "\n"
      << "   NumNodes=" << job.nodes_size() << " NumTasks=" << job.spec().ntasks()
      << " CPUs/Task=" << job.spec().cpus_per_task() << " TimeLimit=" << job.spec().time_limit_s()
      << "s NodeList=" << node_list(job.nodes());
  // What -w and -x asked for, as scontrol's ReqNodeList and ExcNodeList.
  if (job.spec().nodelist_size() > 0) out << " ReqNodeList=" << node_list(job.spec().nodelist());
  if (job.spec().exclude_size() > 0) out << " ExcNodeList=" << node_list(job.spec().exclude());
  if (!job.spec().constraint().empty()) out << " Features=" << job.spec().constraint();
  if (job.spec().ntasks_per_node() > 0) out << " NtasksPerN=" << job.spec().ntasks_per_node();
  if (job.spec().licenses_size() > 0) out << " Licenses=" << counts_text(job.spec().licenses());
  // As scontrol's TresPerNode=gres/nvme:2, per node.
  if (job.spec().gres_size() > 0) out << " Gres=" << counts_text(job.spec().gres());
  out << "\n";
  out << "   Queue=" << (job.queue().empty() ? "-" : job.queue())
      << " Account=" << (job.spec().account().empty() ? "-" : job.spec().account())
      << " QOS=" << (job.spec().qos().empty() ? "-" : job.spec().qos())
      << " Priority=" << job.spec().priority();
  if (!job.spec().dependency().empty()) out << " Dependency=" << job.spec().dependency();
  if (job.spec().max_nodes() > 0) {
    out << " NodeRange=" << job.spec().nodes() << "-" << job.spec().max_nodes()
        << (job.spec().elastic() ? " Elastic Resizes=" + std::to_string(job.resizes_size()) : "");
  }
  if (job.array_job_id() != 0) {
    out << " ArrayJobId=" << job.array_job_id() << " ArrayTaskId=" << job.array_task_id();
  }
  out << "\n";
  for (const auto& a : job.allocation()) {
    out << "   Node=" << a.node() << " Tasks=" << a.ntasks() << " Cores=";
    for (int i = 0; i < a.cores_size(); ++i) out << (i ? "," : "") << a.cores(i);
    out << " NUMA=";
    for (int i = 0; i < a.numa_size(); ++i) out << (i ? "," : "") << a.numa(i);
    if (a.gpus_size() > 0) {
      out << " GPUs=";
      for (int i = 0; i < a.gpus_size(); ++i) out << (i ? "," : "") << a.gpus(i);
    }
    out << "\n";
  }
  if (job.start_time_us() != 0) {
    out << "   TotalCPU=" << std::fixed << std::setprecision(2) << job.cpu_time_us() / 1e6
        << "s MaxMem=" << format_bytes(job.max_memory_bytes()) << "\n";
  }
  out << "   Command=" << join(api::argv_of(job.spec())) << "\n"
      << "   WorkDir=" << api::cwd_of(job.spec()) << "\n"
      << "   StdOut=" << (job.stdout_bytes().empty() ? job.stdout() : job.stdout_bytes()) << "\n"
      << "   StdErr=" << (job.stderr_bytes().empty() ? job.stderr() : job.stderr_bytes()) << "\n";
  for (const auto& s : job.steps()) {
    out << "   Step=" << job.id() << "." << s.id() << " State=" << api::state_name(s.state())
        << " ExitCode=" << s.exit_code() << " NumTasks=" << s.ntasks()
        << " NodeList=" << node_list(s.nodes()) << " Command="
        << join(std::vector<std::string>(s.spec().argv().begin(), s.spec().argv().end()));
    if (!s.reason().empty()) out << " Reason=\"" << s.reason() << "\"";
    out << "\n";
  }
  return out.str();
}

// Like sstat: a row per node for the job (or the asked step), then a row
// per node for each running step; totals of the first rows.
std::string stat_table(const v1::StatResponse& stat) {
  const std::string what = stat.step() == 0
                               ? std::to_string(stat.id())
                               : std::to_string(stat.id()) + "." + std::to_string(stat.step());
  std::vector<std::vector<std::string>> rows = {{"ID", "NODE", "CPU(s)", "MEM", "MAXMEM"}};
  std::vector<std::pair<std::uint32_t, std::vector<std::string>>> step_rows;
  std::int64_t cpu = 0;
  std::uint64_t mem = 0, max_mem = 0;
  for (const auto& n : stat.nodes()) {
    if (!n.answered()) {
      rows.push_back({what, n.node(), "(no answer)", "-", "-"});
      continue;
    }
    rows.push_back({what, n.node(), seconds_text(n.cpu_time_us()), format_bytes(n.memory_bytes()),
                    format_bytes(n.max_memory_bytes())});
    cpu += n.cpu_time_us();
    mem += n.memory_bytes();
    max_mem = std::max(max_mem, n.max_memory_bytes());
    for (const auto& s : n.steps()) {
      step_rows.push_back({s.step(),
                           {std::to_string(stat.id()) + "." + std::to_string(s.step()), n.node(),
                            seconds_text(s.cpu_time_us()), format_bytes(s.memory_bytes()),
                            format_bytes(s.max_memory_bytes())}});
    }
  }
  std::stable_sort(step_rows.begin(), step_rows.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [step, row] : step_rows) rows.push_back(std::move(row));
  rows.push_back({what, "(all)", seconds_text(cpu), format_bytes(mem), format_bytes(max_mem)});
  return table(rows);
}

namespace {

nlohmann::json steps_usage_json(const v1::NodeUsage& node) {
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& s : node.steps()) {
    steps.push_back({{"step", s.step()},
                     {"total_cpu_s", s.cpu_time_us() / 1e6},
                     {"memory_bytes", s.memory_bytes()},
                     {"max_memory_bytes", s.max_memory_bytes()}});
  }
  return steps;
}

}  // namespace

nlohmann::json stat_json(const v1::StatResponse& stat) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& n : stat.nodes()) {
    nodes.push_back({{"node", n.node()},
                     {"rank", n.rank()},
                     {"answered", n.answered()},
                     {"total_cpu_s", n.cpu_time_us() / 1e6},
                     {"memory_bytes", n.memory_bytes()},
                     {"max_memory_bytes", n.max_memory_bytes()},
                     {"steps", steps_usage_json(n)}});
  }
  nlohmann::json out = {{"id", stat.id()}, {"nodes", nodes}};
  if (stat.step() != 0) out["step"] = stat.step();
  return out;
}

std::string nodes_table(const v1::ListNodesResponse& nodes) {
  std::vector<std::vector<std::string>> rows = {{"NODE", "RANK", "STATE", "CORES", "FREE", "NUMA",
                                                 "GPUS", "JOBS", "CHECKPOINT", "FEATURES", "GRES",
                                                 "VERSION", "PROTOCOL", "TOPOLOGY", "REASON"}};
  for (const auto& n : nodes.nodes()) {
    // Whose jobs CRIU can dump there (--json has the reasons).
    const char* checkpoint = !n.checkpoint_capable()      ? "no"
                             : n.checkpoint_other_users() ? "all"
                                                          : "root-only";
    // VERSION: "-" for an agent before protocol 2, which does not say it.
    const std::string version = n.agent_version().empty() ? "-" : n.agent_version();
    const std::string protocol =
        n.protocol_version() == 0 ? "-" : std::to_string(n.protocol_version());
    rows.push_back({n.name(), std::to_string(n.rank()), n.state(), std::to_string(n.cores()),
                    std::to_string(n.free_cores()), std::to_string(n.numa()),
                    std::to_string(n.free_gpus()) + "/" + std::to_string(n.gpus()),
                    std::to_string(n.running_jobs()), checkpoint, join(n.features()),
                    counts_text(n.gres(), &n.free_gres()), version, protocol,
                    n.topology().empty() ? "-" : n.topology(),
                    n.reason().empty() ? "-" : n.reason()});
  }
  return table(rows);
}

std::string queues_table(const v1::ListQueuesResponse& queues) {
  std::vector<std::vector<std::string>> rows = {
      {"QUEUE", "NODES(A/I/O/T)", "CORES(A/I/T)", "RUNNING", "PENDING", "TIMELIMIT", "NODELIST"}};
  for (const auto& q : queues.queues()) {
    const auto slash = [](auto... n) {
      std::string out;
      ((out += (out.empty() ? "" : "/") + std::to_string(n)), ...);
      return out;
    };
    rows.push_back(
        {(q.name().empty() ? "-" : q.name()) + (q.is_default() ? "*" : ""),
         slash(q.nodes_allocated(), q.nodes_idle(), q.nodes_other(), q.nodes_size()),
         slash(q.cores_allocated(), q.cores_idle(), q.cores_total()),
         std::to_string(q.jobs_running()), std::to_string(q.jobs_pending()),
         q.max_time_limit_s() > 0 ? std::to_string(q.max_time_limit_s()) + "s" : std::string("-"),
         node_list(q.nodes())});
  }
  return table(rows);
}

std::string leaders_table(const v1::ListLeadersResponse& leaders, const std::string& this_host) {
  std::vector<std::vector<std::string>> rows = {{"NAME", "STATE", "HOST", "PID", "ENDPOINT"}};
  for (const auto& c : leaders.candidates()) {
    rows.push_back({c.name(), c.state(), c.host(),
                    c.host() == this_host ? std::to_string(c.pid()) : std::string("-"),
                    c.endpoint()});
  }
  return table(rows);
}

nlohmann::json queue_summary_json(const v1::QueueSummary& q) {
  return {{"name", q.name()},
          {"default", q.is_default()},
          {"nodes", std::vector<std::string>(q.nodes().begin(), q.nodes().end())},
          {"nodes_allocated", q.nodes_allocated()},
          {"nodes_idle", q.nodes_idle()},
          {"nodes_other", q.nodes_other()},
          {"cores_allocated", q.cores_allocated()},
          {"cores_idle", q.cores_idle()},
          {"cores_total", q.cores_total()},
          {"jobs_running", q.jobs_running()},
          {"jobs_pending", q.jobs_pending()},
          {"max_time_limit_s", q.max_time_limit_s()}};
}

std::string history_table(const v1::ListJobsResponse& jobs, bool with_steps) {
  std::vector<std::vector<std::string>> rows = {{"JOBID", "USER", "NAME", "QUEUE", "NODES", "CORES",
                                                 "SUBMIT", "START", "END", "STATE", "EXITCODE",
                                                 "CPUTIME(s)", "TOTALCPU(s)", "MAXMEM"}};
  for (const auto& job : jobs.jobs()) {
    nlohmann::json j = job_json(job);
    // A job that moved (migrate, requeue from a checkpoint): each node set
    // it ran on, in order, "n1>n2".
    std::string nodes = node_list(job.nodes());
    if (job.placements_size() > 1) {
      nodes.clear();
      for (const auto& p : job.placements())
        nodes += (nodes.empty() ? "" : ">") + node_list(p.nodes());
    }
    rows.push_back({std::to_string(job.id()), job.user(), job.name(),
                    job.spec().queue().empty() ? "-" : job.spec().queue(), nodes,
                    std::to_string(j["cores"].get<int>()), time_text(job.submit_time_us()),
                    time_text(job.start_time_us()), time_text(job.end_time_us()),
                    api::state_name(job.state()), std::to_string(job.exit_code()),
                    std::to_string(j["cpu_time_s"].get<std::int64_t>()),
                    seconds_text(job.cpu_time_us()), format_bytes(job.max_memory_bytes())});
    for (const auto& s : with_steps ? job.steps() : decltype(job.steps()){}) {
      int cores = 0;
      for (const auto& a : s.allocation()) cores += a.cores_size();
      const std::int64_t held_s = s.start_time_us() && s.end_time_us()
                                      ? (s.end_time_us() - s.start_time_us()) / 1000000
                                      : 0;
      rows.push_back({std::to_string(job.id()) + "." + std::to_string(s.id()), job.user(),
                      s.spec().argv_size() ? s.spec().argv(0) : "-", "-", node_list(s.nodes()),
                      std::to_string(cores), time_text(s.submit_time_us()),
                      time_text(s.start_time_us()), time_text(s.end_time_us()),
                      api::state_name(s.state()), std::to_string(s.exit_code()),
                      std::to_string(held_s * cores), seconds_text(s.cpu_time_us()),
                      format_bytes(s.max_memory_bytes())});
    }
  }
  return table(rows);
}

nlohmann::json reservation_json(const v1::Reservation& r) {
  return {{"name", r.name()},
          {"nodes", std::vector<std::string>(r.nodes().begin(), r.nodes().end())},
          {"start", time_json(r.start_us())},
          {"end", time_json(r.end_us())},
          {"users", std::vector<std::string>(r.users().begin(), r.users().end())},
          {"accounts", std::vector<std::string>(r.accounts().begin(), r.accounts().end())}};
}

std::string reservations_table(const v1::ListReservationsResponse& reservations) {
  std::vector<std::vector<std::string>> rows = {
      {"NAME", "START", "END", "NODES", "USERS", "ACCOUNTS"}};
  for (const auto& r : reservations.reservations()) {
    rows.push_back({r.name(), time_text(r.start_us()), time_text(r.end_us()), node_list(r.nodes()),
                    join(r.users()), join(r.accounts())});
  }
  return table(rows);
}

}  // namespace hpcq::cli

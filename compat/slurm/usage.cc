// sstat and sattach: a running job's use of its nodes now (Stat) and its
// step's live output (hpcq attach), in Slurm's forms.
//
// hpcq measures a part of a job or step per node (its cgroup), not per
// task: sstat's Max*/Min*/Ave* are over the step's nodes, and the *Task
// fields are not given (docs/slurm.md).
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <iostream>
#include <map>

#include "cli/client.h"
#include "cli/job_commands.h"
#include "compat/slurm/commands.h"
#include "compat/slurm/slurm_text.h"
#include "lib/core/hostlist.h"
#include "lib/core/id_text.h"
#include "lib/core/units.h"

namespace hpcq::compat {
namespace {

using cli::Client;
using cli::fail;

// What sstat shows of one step: its use on each node it runs on.
struct StepUse {
  std::string id;  // Slurm's: N.batch, N.0, N.S
  std::uint32_t hpcq_step = 0;
  int ntasks = 0;
  struct OnNode {
    std::string node;
    std::int64_t cpu_time_us = 0;
    std::uint64_t max_memory_bytes = 0;
  };
  std::vector<OnNode> nodes;
};

constexpr char kDefaultFormat[] = "JobID,MaxRSS,MaxRSSNode,AveRSS,MinCPU,MinCPUNode,AveCPU,NTasks";

int sstat_width(const std::string& name) {
  const std::string n = lower(name);
  if (n == "jobid") return 12;
  if (n == "ntasks") return 8;
  if (n == "nodelist") return 20;
  return 10;
}

bool known_sstat_field(const std::string& name) {
  static const char* const kFields[] = {"jobid",      "maxrss", "maxrssnode", "averss",  "mincpu",
                                        "mincpunode", "avecpu", "ntasks",     "nodelist"};
  const std::string n = lower(name);
  return std::any_of(std::begin(kFields), std::end(kFields), [&](const char* f) { return n == f; });
}

std::string sstat_field(const StepUse& use, const std::string& name) {
  const std::string n = lower(name);
  if (n == "jobid") return use.id;
  if (n == "ntasks") return std::to_string(use.ntasks);
  if (use.nodes.empty()) return "";
  const auto by_memory = [](const auto& a, const auto& b) {
    return a.max_memory_bytes < b.max_memory_bytes;
  };
  const auto by_cpu = [](const auto& a, const auto& b) { return a.cpu_time_us < b.cpu_time_us; };
  const auto most = std::max_element(use.nodes.begin(), use.nodes.end(), by_memory);
  const auto least_cpu = std::min_element(use.nodes.begin(), use.nodes.end(), by_cpu);
  std::uint64_t memory = 0;
  std::int64_t cpu = 0;
  for (const StepUse::OnNode& on : use.nodes) {
    memory += on.max_memory_bytes;
    cpu += on.cpu_time_us;
  }
  const auto count = static_cast<std::int64_t>(use.nodes.size());
  if (n == "maxrss") return size_text(most->max_memory_bytes, 'K');
  if (n == "maxrssnode") return most->node;
  if (n == "averss") return size_text(memory / use.nodes.size(), 'K');
  if (n == "mincpu") return elapsed_text(least_cpu->cpu_time_us / 1'000'000);
  if (n == "mincpunode") return least_cpu->node;
  if (n == "avecpu") return elapsed_text(cpu / count / 1'000'000);
  if (n == "nodelist") {
    std::vector<std::string> names;
    for (const StepUse::OnNode& on : use.nodes) names.push_back(on.node);
    return compress_hostlist(names);
  }
  return "";
}

// The job's part (N.batch for a batch job, N.0 for one that is its own
// step) and each running step, as Stat measured them.
std::vector<StepUse> uses_of(const v1::Job& job, const v1::StatResponse& stat) {
  std::map<std::uint32_t, StepUse> uses;
  StepUse& whole = uses[0];
  whole.id = std::to_string(job.id()) + (job.spec().batch() ? ".batch" : ".0");
  whole.ntasks = job.spec().batch() ? 1 : std::max(1, job.spec().ntasks());
  for (const v1::Step& step : job.steps()) {
    if (step.state() != v1::RUNNING) continue;
    StepUse& use = uses[step.id()];
    use.id = std::to_string(job.id()) + "." + std::to_string(slurm_step_of(step.id()));
    use.hpcq_step = step.id();
    use.ntasks = step.ntasks();
  }
  for (const v1::NodeUsage& node : stat.nodes()) {
    if (!node.answered()) continue;
    whole.nodes.push_back({node.node(), node.cpu_time_us(), node.max_memory_bytes()});
    for (const v1::StepUsage& step : node.steps()) {
      auto use = uses.find(step.step());
      if (use == uses.end()) continue;
      use->second.nodes.push_back({node.node(), step.cpu_time_us(), step.max_memory_bytes()});
    }
  }
  std::vector<StepUse> out;
  for (auto& [step, use] : uses) out.push_back(std::move(use));
  return out;
}

// The rows -j's "N[.S]" asks for, with -a (`all`): a step given, that one;
// none, the lowest numbered step running (a batch job's script is not
// one), or all of them with -a.
Result<std::vector<StepUse>> rows_for(const Client& client, const std::string& text, bool all) {
  const std::size_t dot = text.find('.');
  auto id = parse_job_id(text.substr(0, dot));
  if (!id.is_ok()) return invalid_argument("Invalid job id " + quote(text));
  v1::GetJobRequest get;
  get.set_id(*id);
  v1::Job job;
  HPCQ_RETURN_IF_ERROR(client.call("GetJob", get, &job));
  if (job.state() != v1::RUNNING) {
    return failed_precondition("no steps running for job " + std::to_string(*id));
  }
  v1::StatRequest request;
  request.set_id(*id);
  v1::StatResponse stat;
  HPCQ_RETURN_IF_ERROR(client.call("Stat", request, &stat));
  std::vector<StepUse> uses = uses_of(job, stat);
  if (dot != std::string::npos) {
    const std::string wanted = std::to_string(*id) + text.substr(dot);
    std::erase_if(uses, [&](const StepUse& u) { return u.id != wanted; });
    if (uses.empty()) return not_found("couldn't get steps for job " + text);
    return uses;
  }
  if (all) return uses;
  if (!job.spec().batch())
    uses.resize(1);  // N.0: the job itself
  else if (uses.size() > 1)
    uses = {uses[1]};
  else
    uses.clear();
  return uses;
}

}  // namespace

int sstat(const std::vector<std::string>& args) {
  auto read = read_options(args, {{'j', "jobs", true},
                                  {'a', "allsteps", false},
                                  {'n', "noheader", false},
                                  {'p', "parsable", false},
                                  {'P', "parsable2", false},
                                  {'o', "format", true},
                                  {0, "fields", true},
                                  {'e', "helpformat", false}});
  if (!read.is_ok()) return fail(read.status());
  const ReadOptions& o = *read;
  if (printed_usage(o, "sstat")) return 0;
  if (o.has("helpformat")) {
    std::cout << "AveCPU      AveRSS      JobID       MaxRSS      MaxRSSNode  MinCPU\n"
                 "MinCPUNode  NTasks      Nodelist\n";
    return 0;
  }
  std::vector<std::string> ids = o.list("jobs");
  for (const std::string& operand : o.operands) ids.push_back(operand);
  if (ids.empty()) return fail(invalid_argument("You didn't give me any jobs to stat."));
  std::string format = kDefaultFormat;
  if (o.has("format")) format = o.last("format");
  if (o.has("fields")) format = o.last("fields");
  auto fields = parse_named_format(format, '%');
  if (!fields.is_ok()) return fail(fields.status());
  for (Field& f : *fields) {
    if (!known_sstat_field(f.name)) {
      return fail(invalid_argument("Invalid field requested: " + quote(f.name) +
                                   " (hpcq measures per node: sstat -e lists what it has)"));
    }
    if (!f.width_given) f.width = sstat_width(f.name);
  }
  Client client(cli::socket_path());
  std::vector<StepUse> rows;
  int status = 0;
  for (const std::string& id : ids) {
    auto found = rows_for(client, id, o.has("allsteps"));
    if (!found.is_ok()) {
      std::cerr << "sstat: error: " << found.status().message() << "\n";
      status = 1;
      continue;
    }
    rows.insert(rows.end(), found->begin(), found->end());
  }
  TableStyle style;
  style.header = !o.has("noheader");
  style.parsable = o.has("parsable") || o.has("parsable2");
  style.trailing = o.has("parsable");
  print_table(*fields, style, rows.size(),
              [&](std::size_t row, const Field& f) { return sstat_field(rows[row], f.name); });
  return status;
}

int sattach(const std::vector<std::string>& args) {
  auto read = read_options(args, {{'l', "label", false},
                                  {'Q', "quiet", false},
                                  {0, "input-filter", true},
                                  {0, "output-filter", true},
                                  {0, "error-filter", true},
                                  {0, "layout", false},
                                  {0, "pty", false}});
  if (!read.is_ok()) return fail(read.status());
  const ReadOptions& o = *read;
  if (printed_usage(o, "sattach", "JOB.STEP")) return 0;
  for (const char* refused : {"output-filter", "error-filter", "layout", "pty"}) {
    if (o.has(refused)) {
      return fail(invalid_argument(std::string("--") + refused + ": not honoured by hpcq"));
    }
  }
  if (o.has("input-filter") && o.last("input-filter") != "0") {
    return fail(invalid_argument("--input-filter: hpcq sends input to task 0 only"));
  }
  if (o.operands.size() != 1) return fail(invalid_argument("Invalid job step id (want JOB.STEP)"));
  const std::string& text = o.operands.front();
  const std::size_t dot = text.find('.');
  if (dot == std::string::npos || text.substr(dot + 1) == "batch") {
    return fail(invalid_argument("Invalid job step id " + quote(text) + " (want JOB.STEP)"));
  }
  std::uint32_t step = 0;
  const std::string_view step_text = std::string_view(text).substr(dot + 1);
  if (auto [end, ec] = std::from_chars(step_text.begin(), step_text.end(), step);
      ec != std::errc() || end != step_text.end() || step_text.empty()) {
    return fail(invalid_argument("Invalid job step id " + quote(text)));
  }
  Client client(cli::socket_path());
  auto id = parse_job_id(text.substr(0, dot));
  if (!id.is_ok()) return fail(invalid_argument("Invalid job step id " + quote(text)));
  v1::GetJobRequest get;
  get.set_id(*id);
  v1::Job job;
  if (Status s = client.call("GetJob", get, &job); !s.is_ok()) return fail(s);
  // J.0 of a job that is its own step (srun outside an allocation) is the job.
  const bool whole = !job.spec().batch() && step == 0;
  const std::string given =
      std::to_string(*id) + (whole ? "" : "." + std::to_string(hpcq_step_of(step)));
  cli::FollowOptions follow;
  follow.label = o.has("label");
  follow.from_start = false;  // as Slurm's: what the tasks write from now on
  follow.input = true;
  cli::block_interrupts();
  return cli::cmd_attach(given, follow);
}

}  // namespace hpcq::compat

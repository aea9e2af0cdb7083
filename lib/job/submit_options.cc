// The one file that includes CLI11 (a slow header): everything that knows
// about option spelling is here.
#include "lib/job/submit_options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <optional>
#include <string_view>
#include <utility>

#include "lib/core/hostlist.h"
#include "lib/core/split.h"
#include "lib/core/units.h"
#include "lib/job/constraint.h"
#include "lib/resource/placement_names.h"

namespace hpcq::job {
namespace {

constexpr std::string_view kDirective = "#HPCQ";
constexpr std::string_view kSlurmDirective = "#SBATCH";
constexpr const char* kDefaultOutput = "hpcq-%j.out";
constexpr const char* kSlurmOutput = "slurm-%j.out";  // sbatch's defaults
constexpr const char* kSlurmArrayOutput = "slurm-%A_%a.out";
constexpr std::int32_t kMaxPriority = 1'000'000;
constexpr const char* kUsage =
    "submit: usage: hpcq submit [-N NODES|MIN-MAX] [--elastic] [-n NTASKS] [-c CPUS] "
    "[--mem SIZE] [-t TIME] "
    "[-J NAME] [-o FILE] [-e FILE] [-q QUEUE] [-A ACCOUNT] [--qos QOS] [--priority N] "
    "[-d TYPE:ID[,...]] [-a INDICES[%MAX]] [-D DIR] [--export VARS] [--requeue] "
    "[--gpus-per-node N] [--gpus-per-task N] [--mem-per-cpu SIZE] [-m DIST[:DIST]] "
    "[--cpu-bind cores|threads|none] [--numa-policy POLICY] [--oversubscribe] [--exclusive] "
    "[--profile cpu|memory|network] [--workers N] [--image DIR] [--checkpoint-interval TIME] "
    "[--deadline WHEN] [--signal [B:]SIG[@SECONDS]] [--mpi pmi1|pmix|pmi1,pmix|none] [-w NODELIST] "
    "[-x NODELIST] "
    "[-C FEATURES] [--ntasks-per-node N] [-L NAME[:N],...] [--gres NAME[:N],...] [--json] "
    "[--wait] [--] COMMAND|SCRIPT [ARGS...]";

// ---- words of a directive line ----

// Shell-like splitting of one line (no expansion: sbatch does none either).
Result<std::vector<std::string>> split_words(std::string_view line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  size_t i = 0;
  while (i < line.size()) {
    const char c = line[i];
    if (c == ' ' || c == '\t') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      ++i;
      continue;
    }
    // As in sh, '#' starts a comment only at the start of a word, so that
    // "#HPCQ -N 2  # two nodes" works and "-J a#b" keeps its '#'.
    if (c == '#' && !in_word) break;
    in_word = true;
    if (c == '\'') {
      const size_t end = line.find('\'', i + 1);
      if (end == std::string_view::npos) return invalid_argument("unterminated ' quote");
      word.append(line.substr(i + 1, end - i - 1));
      i = end + 1;
    } else if (c == '"') {
      ++i;
      bool closed = false;
      while (i < line.size()) {
        const char d = line[i];
        if (d == '"') {
          closed = true;
          ++i;
          break;
        }
        // Inside double quotes a backslash escapes only these, as in sh.
        if (d == '\\' && i + 1 < line.size() &&
            std::string_view("\"\\$`").find(line[i + 1]) != std::string_view::npos) {
          word += line[i + 1];
          i += 2;
          continue;
        }
        word += d;
        ++i;
      }
      if (!closed) return invalid_argument("unterminated \" quote");
    } else if (c == '\\') {
      // No line continuation: each directive line stands alone, as in sbatch.
      if (i + 1 >= line.size()) return invalid_argument("backslash at the end of the line");
      word += line[i + 1];
      i += 2;
    } else {
      word += c;
      ++i;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

struct DirectiveLine {
  int line = 0;
  std::vector<std::string> words;
};

Status at_line(const std::string& script_name, int line, const Status& s) {
  // A file name may hold a newline; the message must stay one line.
  bool plain = true;
  for (char c : script_name) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) plain = false;
  }
  return invalid_argument((plain ? script_name : quote(script_name)) + ":" + std::to_string(line) +
                          ": " + s.message());
}

Result<std::vector<DirectiveLine>> directive_lines(const std::string& text,
                                                   const std::string& script_name,
                                                   Dialect dialect) {
  const std::string_view prefix = dialect == Dialect::kSlurm ? kSlurmDirective : kDirective;
  std::vector<DirectiveLine> lines;
  const std::string_view all(text);
  size_t pos = 0;
  int line_no = 0;
  int first_sbatch_line = 0;
  while (pos < all.size()) {
    const size_t nl = all.find('\n', pos);
    std::string_view line = all.substr(pos, nl == std::string_view::npos ? all.npos : nl - pos);
    pos = nl == std::string_view::npos ? all.size() : nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line_no == 1 && line.starts_with("#!")) continue;
    if (line.starts_with(prefix) && (line.size() == prefix.size() || line[prefix.size()] == ' ' ||
                                     line[prefix.size()] == '\t')) {
      auto words = split_words(line.substr(prefix.size()));
      if (!words.is_ok()) return at_line(script_name, line_no, words.status());
      lines.push_back({line_no, std::move(words).value()});
      continue;
    }
    if (line.starts_with(kSlurmDirective) && first_sbatch_line == 0) first_sbatch_line = line_no;
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string_view::npos || line[first] == '#') continue;
    break;  // the first command: later "#HPCQ" lines are plain comments
  }
  // A Slurm script run as it stands would get none of what it asks for
  // (-p, -q and others differ in meaning): say so rather than run it so.
  // Beside #HPCQ lines, #SBATCH ones are the script's Slurm side, left alone.
  if (dialect == Dialect::kHpcq && lines.empty() && first_sbatch_line != 0) {
    return at_line(script_name, first_sbatch_line,
                   invalid_argument("#SBATCH lines are not read by hpcq: write its options as "
                                    "#HPCQ lines (docs/user-guide.md)"));
  }
  return lines;
}

// ---- option values ----

struct Export {
  bool all = true;  // start from the whole submitter environment
  std::vector<std::pair<std::string, std::optional<std::string>>> vars;  // VAR or VAR=value
};

Result<Export> parse_export(const std::string& text) {
  Export e;
  if (text == "ALL") return e;
  e.all = false;
  if (text == "NONE") return e;
  size_t pos = 0;
  while (true) {
    const size_t comma = text.find(',', pos);
    const std::string item = text.substr(pos, comma == std::string::npos ? comma : comma - pos);
    if (item == "ALL") {
      e.all = true;
    } else if (item.empty() || item == "NONE") {
      return invalid_argument("--export: bad list " + quote(text) +
                              " (ALL, NONE, or [ALL,]VAR[=value],...)");
    } else {
      const size_t eq = item.find('=');
      std::string name = item.substr(0, eq);
      if (name.empty() || name.find('\0') != std::string::npos) {
        return invalid_argument("--export: bad variable name in " + quote(text));
      }
      std::optional<std::string> value;
      if (eq != std::string::npos) value = item.substr(eq + 1);
      e.vars.emplace_back(std::move(name), std::move(value));
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return e;
}

Result<int> parse_count(const char* option, const std::string& text) {
  long long value = 0;
  bool ok = !text.empty();
  for (char c : text) {
    if (c < '0' || c > '9' || value > INT_MAX) {
      ok = false;
      break;
    }
    value = value * 10 + (c - '0');
  }
  if (!ok || value > INT_MAX) {
    return invalid_argument(std::string(option) + ": bad count " + quote(text));
  }
  return static_cast<int>(value);
}

// -N: "N", or a range "MIN-MAX" (hpcq issue 7). A range MIN-MIN is no
// range (max 0); MIN > MAX and a 0 anywhere in a range are errors.
struct NodeCount {
  int nodes = 0;
  int max_nodes = 0;  // 0: no range
};
Result<NodeCount> parse_node_count(const std::string& text) {
  const size_t dash = text.find('-');
  if (dash == std::string::npos) {
    auto n = parse_count("--nodes", text);
    if (!n.is_ok()) return n.status();
    // 0 inside means "as few as the tasks fit on": said, it is a mistake.
    if (*n < 1) return invalid_argument("--nodes: must be at least 1, got " + quote(text));
    return NodeCount{*n, 0};
  }
  auto low = parse_count("--nodes", text.substr(0, dash));
  auto high = parse_count("--nodes", text.substr(dash + 1));
  if (!low.is_ok() || !high.is_ok()) {
    return invalid_argument("--nodes: bad range " + quote(text) + " (want MIN-MAX)");
  }
  if (*low < 1 || *high < 1) {
    return invalid_argument("--nodes: range " + quote(text) + " must have MIN and MAX >= 1");
  }
  if (*low > *high) {
    return invalid_argument("--nodes: range " + quote(text) + " has MIN > MAX");
  }
  return NodeCount{*low, *high == *low ? 0 : *high};
}

// What one list of words sets; what it leaves unset keeps earlier values.
struct Given {
  std::optional<int> nodes;
  std::optional<int> max_nodes;  // set with nodes: 0 when -N gave no range
  std::optional<bool> elastic;
  std::optional<int> ntasks;
  std::optional<int> cpus_per_task;
  std::optional<std::uint64_t> mem;
  std::optional<std::int64_t> time;
  std::optional<std::string> name;
  std::optional<std::string> output;
  std::optional<std::string> error;
  std::optional<std::string> queue;
  std::optional<std::string> chdir;
  std::optional<Export> export_vars;
  std::optional<bool> requeue;
  std::optional<std::string> account;
  std::optional<std::string> qos;
  std::optional<std::int32_t> priority;
  std::optional<std::vector<Dependency>> dependencies;
  std::optional<std::string> array;
  std::optional<int> gpus_per_node;
  std::optional<int> gpus_per_task;
  std::optional<std::uint64_t> mem_per_cpu;
  std::optional<std::pair<resource::Distribution, resource::Distribution>> distribution;
  std::optional<resource::CpuBind> cpu_bind;
  std::optional<resource::NumaPolicy> numa_policy;
  std::optional<bool> oversubscribe;
  std::optional<bool> exclusive;  // whole nodes
  std::optional<std::string> profile;
  std::optional<int> workers;
  std::optional<std::string> image;
  std::optional<std::int64_t> checkpoint_interval;
  std::optional<When> begin;                // a relative one is resolved when the job is made
  std::optional<When> deadline;             // as begin
  std::optional<std::pair<int, int>> warn;  // --signal: signal, seconds before the limit
  std::optional<WarnTarget> warn_target;    // --signal's B: (the script only)
  std::optional<std::vector<std::string>> nodelist;
  std::optional<std::vector<std::string>> exclude;
  std::optional<std::string> constraint;
  std::optional<int> ntasks_per_node;
  std::optional<std::map<std::string, int>> licenses;
  std::optional<std::map<std::string, int>> gres;
  std::optional<std::string> mpi;
  std::optional<bool> hold;                // Slurm's -H
  std::optional<std::string> export_text;  // --export as given (SLURM_EXPORT_ENV)
  std::optional<std::int32_t> nice;        // Slurm's --nice
  std::optional<int> gpus;                 // Slurm's -G/--gpus: the job's in all
  std::optional<std::string> wrap;         // Slurm's --wrap
  std::vector<std::string> warnings;       // Slurm's downgraded options
  bool parsable = false;
  bool json = false;
  bool wait = false;
  bool label = false;
  bool overlap = false;
  bool immediate = false;
  bool pty = false;

  // Take-last: what `later` sets wins.
  void merge(const Given& later) {
    auto take = [](auto& mine, const auto& theirs) {
      if (theirs) mine = theirs;
    };
    take(nodes, later.nodes);
    take(max_nodes, later.max_nodes);
    take(elastic, later.elastic);
    take(ntasks, later.ntasks);
    take(cpus_per_task, later.cpus_per_task);
    take(mem, later.mem);
    take(time, later.time);
    take(name, later.name);
    take(output, later.output);
    take(error, later.error);
    take(queue, later.queue);
    take(chdir, later.chdir);
    take(export_vars, later.export_vars);
    take(requeue, later.requeue);
    take(account, later.account);
    take(qos, later.qos);
    take(priority, later.priority);
    take(dependencies, later.dependencies);
    take(array, later.array);
    take(gpus_per_node, later.gpus_per_node);
    take(gpus_per_task, later.gpus_per_task);
    take(mem_per_cpu, later.mem_per_cpu);
    take(distribution, later.distribution);
    take(cpu_bind, later.cpu_bind);
    take(numa_policy, later.numa_policy);
    take(oversubscribe, later.oversubscribe);
    take(exclusive, later.exclusive);
    // The later layer's choice of the two wins (the command line over a
    // script's directives): they cannot both hold.
    if (later.exclusive.value_or(false) && !later.oversubscribe) oversubscribe = false;
    if (later.oversubscribe.value_or(false) && !later.exclusive) exclusive = false;
    take(profile, later.profile);
    take(workers, later.workers);
    take(image, later.image);
    take(checkpoint_interval, later.checkpoint_interval);
    take(begin, later.begin);
    take(deadline, later.deadline);
    take(warn, later.warn);
    take(warn_target, later.warn_target);
    take(nodelist, later.nodelist);
    take(exclude, later.exclude);
    take(constraint, later.constraint);
    take(ntasks_per_node, later.ntasks_per_node);
    take(licenses, later.licenses);
    take(gres, later.gres);
    take(mpi, later.mpi);
    take(hold, later.hold);
    take(export_text, later.export_text);
    take(nice, later.nice);
    take(gpus, later.gpus);
    take(wrap, later.wrap);
    warnings.insert(warnings.end(), later.warnings.begin(), later.warnings.end());
    parsable = parsable || later.parsable;
    json = json || later.json;
    wait = wait || later.wait;
    label = label || later.label;
    overlap = overlap || later.overlap;
    immediate = immediate || later.immediate;
    pty = pty || later.pty;
  }
};

struct Parsed {
  Given given;
  std::vector<std::string> command;  // empty for a directive line
};

// The long name and whether the option takes a value, for the checks that
// run before CLI11 (see reject_empty_equals).
struct OptionName {
  char short_name;  // 0: none
  const char* long_name;
};
constexpr OptionName kValueOptions[] = {
    {'N', "--nodes"},
    {'n', "--ntasks"},
    {'c', "--cpus-per-task"},
    {0, "--mem"},
    {'t', "--time"},
    {'J', "--job-name"},
    {'o', "--output"},
    {'e', "--error"},
    {'q', "--queue"},
    {'D', "--chdir"},
    {0, "--export"},
    {'A', "--account"},
    {0, "--qos"},
    {0, "--priority"},
    {'d', "--dependency"},
    {'a', "--array"},
    {0, "--gpus-per-node"},
    {0, "--gpus-per-task"},
    {0, "--mem-per-cpu"},
    {'m', "--distribution"},
    {0, "--cpu-bind"},
    {0, "--numa-policy"},
    {0, "--profile"},
    {0, "--workers"},
    {0, "--image"},
    {0, "--checkpoint-interval"},
    {'w', "--nodelist"},
    {'x', "--exclude"},
    {'C', "--constraint"},
    {0, "--ntasks-per-node"},
    {'L', "--licenses"},
    {0, "--gres"},
    {0, "--mpi"},
    {0, "--begin"},
    {0, "--signal"},
    // Slurm's (Dialect::kSlurm)
    {'p', "--partition"},
    {0, "--wrap"},
    {0, "--nice"},
    {'G', "--gpus"},
    {'i', "--input"},
    {0, "--mail-type"},
    {0, "--mail-user"},
    {0, "--comment"},
    {0, "--time-min"},
    {0, "--deadline"},
    {0, "--mem-per-gpu"},
    {0, "--cpus-per-gpu"},
    {0, "--open-mode"},
};

const OptionName* find_value_option(std::string_view word) {
  for (const auto& o : kValueOptions) {
    if (word == o.long_name) return &o;
    if (o.short_name != 0 && word.size() == 2 && word[0] == '-' && word[1] == o.short_name) {
      return &o;
    }
  }
  return nullptr;
}

// CLI11 reads "--mem= cmd" as "--mem cmd" (an empty value after '=' makes it
// take the next word), which would swallow the command. Walk the options the
// way the parser will and refuse "--opt=" up front.
Status reject_empty_equals(const std::vector<std::string>& words) {
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w == "--" || w.size() < 2 || w[0] != '-') break;  // the command starts here
    const size_t eq = w.find('=');
    if (w.starts_with("--") && eq != std::string::npos) {
      if (eq + 1 == w.size() && find_value_option(w.substr(0, eq)) != nullptr) {
        return invalid_argument(w.substr(0, eq) + ": empty value");
      }
      continue;
    }
    if (find_value_option(w) != nullptr) ++i;  // skip its value
  }
  return Status::ok();
}

// CLI11's messages, reworded as ours: "--nodes: 1 required TEXT missing" ->
// "--nodes: missing value"; "Could not convert: --requeue = x" -> "--requeue:
// bad value 'x'".
Status from_cli11(const CLI::ParseError& e) {
  const std::string what = e.what();
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr && what.starts_with("-")) {
    const size_t colon = what.find(':');
    if (colon != std::string::npos) {
      return invalid_argument(what.substr(0, colon) + ": missing value");
    }
  }
  constexpr std::string_view kConvert = "Could not convert: ";
  if (dynamic_cast<const CLI::ConversionError*>(&e) != nullptr && what.starts_with(kConvert)) {
    const size_t eq = what.find(" = ", kConvert.size());
    if (eq != std::string::npos) {
      return invalid_argument(what.substr(kConvert.size(), eq - kConvert.size()) + ": bad value " +
                              quote(what.substr(eq + 3)));
    }
  }
  std::string line = what;
  for (char& c : line) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';  // keep it one line
  }
  return invalid_argument("submit: " + line);
}

// CLI11's parser of the submit options, built once per thread and reused:
// building ~40 options costs more than a parse, and a script parses one list
// of words per directive line. Each option's text is bound to a Value (a
// flag's to a Flag); parse() clears them all first.
class WordParser {
 public:
  struct Value {
    std::string text;
    CLI::Option* option = nullptr;
    // An option of the other dialect has none.
    bool given() const { return option != nullptr && option->count() > 0; }
  };
  struct Flag {
    bool on = false;
    CLI::Option* option = nullptr;
    bool given() const { return option != nullptr && option->count() > 0; }
  };

  explicit WordParser(Dialect dialect) {
    app_.set_help_flag();   // no help option: CLI11 would print and want to exit
    app_.prefix_command();  // the first non-option word and all after it are the command
    if (dialect == Dialect::kSlurm) {
      add("-p,--partition", queue);
      add("-q,--qos", qos);
      add("-s,--oversubscribe", oversubscribe);
      add("-W,--wait", wait);
      add("-H,--hold", hold);
      add("--parsable", parsable);
      add("--wrap", wrap);
      add("--nice", nice);
      add("-G,--gpus", gpus);
      add("-i,--input", input);
      add("-Q,--quiet", quiet);
      // srun's: a step gets only the cores it asks for, as hpcq's steps do.
      add("--exact", exact);
      unhonoured.resize(std::size(kSlurmUnhonoured));
      for (std::size_t i = 0; i < unhonoured.size(); ++i) {
        const std::string name = kSlurmUnhonoured[i];
        if (name == "--test-only") {
          unhonoured[i].option = app_.add_flag(name);
        } else {
          add(kSlurmUnhonoured[i], unhonoured[i]);
        }
      }
    } else {
      add("-q,--queue", queue);
      add("--qos", qos);
      add("--oversubscribe", oversubscribe);
      add("--wait", wait);
    }
    add("-N,--nodes", nodes);
    add("-n,--ntasks", ntasks);
    add("-c,--cpus-per-task", cpus);
    add("--mem", mem);
    add("-t,--time", time);
    add("-J,--job-name", name);
    add("-o,--output", output);
    add("-e,--error", error);
    add("-D,--chdir", chdir);
    add("--export", export_text);
    add("-A,--account", account);
    add("--priority", priority);
    add("-d,--dependency", dependency);
    add("-a,--array", array);
    add("--gpus-per-node", gpus_per_node);
    add("--gpus-per-task", gpus_per_task);
    add("--mem-per-cpu", mem_per_cpu);
    add("-m,--distribution", distribution);
    add("--cpu-bind", cpu_bind);
    add("--numa-policy", numa_policy);
    add("--profile", profile);
    add("--workers", workers);
    add("--image", image);
    add("--checkpoint-interval", checkpoint_interval);
    add("--begin", begin);
    add("--deadline", deadline);
    add("--signal", warn);
    add("-w,--nodelist", nodelist);
    add("-x,--exclude", exclude);
    add("-C,--constraint", constraint);
    add("--ntasks-per-node", ntasks_per_node);
    add("-L,--licenses", licenses);
    add("--gres", gres);
    add("--mpi", mpi);
    add("--exclusive", exclusive);
    add("--elastic,!--no-elastic", elastic);
    add("--requeue,!--no-requeue", requeue);
    add("--json", json);
    add("-l,--label", label);
    add("--overlap", overlap);
    add("--immediate", immediate);
    add("--pty", pty);
  }
  WordParser(const WordParser&) = delete;
  WordParser& operator=(const WordParser&) = delete;

  // The words after the options (the command, if any).
  Result<std::vector<std::string>> parse(const std::vector<std::string>& words) {
    for (Value* v : values_) v->text.clear();
    for (Value& v : unhonoured) v.text.clear();
    for (Flag* f : flags_) f->on = false;
    app_.clear();
    try {
      std::vector<std::string> reversed(words.rbegin(), words.rend());  // CLI11 pops from the back
      app_.parse(reversed);
      return app_.remaining();
    } catch (const CLI::ParseError& e) {
      return from_cli11(e);
    } catch (const std::exception& e) {
      return invalid_argument(std::string("submit: ") + e.what());
    }
  }

  Value nodes, ntasks, cpus, mem, time, name, output, error, queue, chdir, export_text;
  Value account, qos, priority, dependency, array;
  Value gpus_per_node, gpus_per_task, mem_per_cpu, distribution, cpu_bind, numa_policy;
  Value profile, workers, image, checkpoint_interval, begin, deadline, warn, nodelist, exclude, mpi;
  Value constraint, ntasks_per_node, licenses, gres;
  Flag oversubscribe, exclusive, elastic, requeue, json, wait, label, overlap, immediate, pty;
  // Slurm's dialect only (never given in hpcq's).
  Value wrap, nice, gpus, input;
  Flag hold, parsable, quiet, exact;
  std::vector<Value> unhonoured;  // kSlurmUnhonoured's, in its order

 private:
  void add(const char* names, Value& v) {
    v.option =
        app_.add_option(names, v.text)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    values_.push_back(&v);
  }
  void add(const char* names, Flag& f) {
    f.option = app_.add_flag(names, f.on)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    flags_.push_back(&f);
  }

  CLI::App app_{"hpcq submit"};
  std::vector<Value*> values_;
  std::vector<Flag*> flags_;
};

// The words after the options: a command line's command; a directive line
// has none.
Status take_command(const std::vector<std::string>& rest, bool command_line,
                    std::vector<std::string>& command) {
  if (rest.empty()) return Status::ok();
  const std::string& first = rest.front();
  if (first == "-h" || first == "--help") return invalid_argument(kUsage);
  if (first.size() > 1 && first[0] == '-' && first != "--") {
    return invalid_argument("unknown option " + quote(first.substr(0, first.find('='))));
  }
  if (!command_line) {
    return invalid_argument("unexpected argument " + quote(first) +
                            " (directives take options only)");
  }
  command.assign(rest.begin() + (first == "--" ? 1 : 0), rest.end());
  return Status::ok();
}

Status count_of(const char* option, const WordParser::Value& v, std::optional<int>& into) {
  if (!v.given()) return Status::ok();
  auto n = parse_count(option, v.text);
  if (!n.is_ok()) return n.status();
  into = *n;
  return Status::ok();
}

// 0 is a valid GPU count (no GPUs), unlike --nodes.
Status gpu_count_of(const char* option, const WordParser::Value& v, std::optional<int>& into) {
  if (!v.given()) return Status::ok();
  if (v.text == "0") {
    into = 0;
    return Status::ok();
  }
  return count_of(option, v, into);
}

Status memory_of(const char* option, const WordParser::Value& v,
                 std::optional<std::uint64_t>& into) {
  if (!v.given()) return Status::ok();
  auto bytes = parse_memory_bytes(v.text);
  if (!bytes.is_ok())
    return invalid_argument(std::string(option) + ": " + bytes.status().message());
  into = *bytes;
  return Status::ok();
}

// What the job asks for: nodes, tasks, cores, memory, GPUs, time, workers.
Status take_sizes(const WordParser& p, Given& g) {
  if (p.nodes.given()) {
    auto n = parse_node_count(p.nodes.text);
    if (!n.is_ok()) return n.status();
    g.nodes = n->nodes;
    g.max_nodes = n->max_nodes;
  }
  if (p.ntasks.given() && p.ntasks.text.find('-', 1) != std::string::npos) {
    // Tasks follow the node count (ntasks / MIN per node), so a task range
    // would say nothing that -N MIN-MAX does not.
    return invalid_argument("--ntasks: a task range " + quote(p.ntasks.text) +
                            " is not supported; give -N MIN-MAX (each node runs ntasks/MIN tasks)");
  }
  HPCQ_RETURN_IF_ERROR(count_of("--ntasks", p.ntasks, g.ntasks));
  HPCQ_RETURN_IF_ERROR(count_of("--cpus-per-task", p.cpus, g.cpus_per_task));
  HPCQ_RETURN_IF_ERROR(memory_of("--mem", p.mem, g.mem));
  HPCQ_RETURN_IF_ERROR(memory_of("--mem-per-cpu", p.mem_per_cpu, g.mem_per_cpu));
  HPCQ_RETURN_IF_ERROR(gpu_count_of("--gpus-per-node", p.gpus_per_node, g.gpus_per_node));
  HPCQ_RETURN_IF_ERROR(gpu_count_of("--gpus-per-task", p.gpus_per_task, g.gpus_per_task));
  HPCQ_RETURN_IF_ERROR(count_of("--workers", p.workers, g.workers));
  HPCQ_RETURN_IF_ERROR(count_of("--ntasks-per-node", p.ntasks_per_node, g.ntasks_per_node));
  if (g.ntasks_per_node && *g.ntasks_per_node < 1) {
    return invalid_argument("--ntasks-per-node: must be at least 1, got " +
                            quote(p.ntasks_per_node.text));
  }
  if (p.time.given()) {
    auto v = parse_duration_s(p.time.text);
    if (!v.is_ok()) return invalid_argument("--time: " + v.status().message());
    // parse_duration_s says 0 for UNLIMITED; in a spec 0 means "not given".
    g.time = *v == 0 ? JobSpec::kUnlimited : *v;
  }
  if (p.checkpoint_interval.given()) {
    auto v = parse_duration_s(p.checkpoint_interval.text);
    if (!v.is_ok()) return invalid_argument("--checkpoint-interval: " + v.status().message());
    if (*v <= 0) return invalid_argument("--checkpoint-interval: want a positive time");
    g.checkpoint_interval = *v;
  }
  return Status::ok();
}

Result<std::int32_t> priority_of(const std::string& text) {
  std::int32_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || text.empty() ||
      value < -kMaxPriority || value > kMaxPriority) {
    return invalid_argument("--priority: bad value " + quote(text) + " (want an integer " +
                            std::to_string(-kMaxPriority) + ".." + std::to_string(kMaxPriority) +
                            ")");
  }
  return value;
}

// [B:]SIG[@SECONDS], as sbatch's --signal (without its R:, which is about
// reservations hpcq does not have).
Result<std::pair<int, int>> warning_of(std::string text) {
  if (text.starts_with("B:")) text.erase(0, 2);
  if (text.starts_with("R:") || text.starts_with("RB:") || text.starts_with("BR:")) {
    return invalid_argument("--signal: R: (a reservation's overlap) is not honoured by hpcq");
  }
  const std::size_t at = text.find('@');
  auto signo = parse_signal(text.substr(0, at));
  if (!signo.is_ok()) return invalid_argument("--signal: " + signo.status().message());
  int seconds = 60;
  if (at != std::string::npos) {
    const std::string after = text.substr(at + 1);
    auto [end, ec] = std::from_chars(after.data(), after.data() + after.size(), seconds);
    if (ec != std::errc{} || end != after.data() + after.size() || seconds < 1 || seconds > 65535) {
      return invalid_argument("--signal: want SIG[@SECONDS] with 1..65535 seconds, got " +
                              quote(text));
    }
  }
  return std::make_pair(*signo, seconds);
}

Result<std::vector<std::string>> node_names_of(const char* option, const std::string& text) {
  auto names = expand_hostlist(text);
  if (!names.is_ok()) {
    return invalid_argument(std::string(option) + ": " + names.status().message() +
                            " (want NAME[,NAME...], or a hostlist: node[1-4,7])");
  }
  return names;
}

// Slurm's spellings of --mpi's values: its pmi2 is hpcq's pmi1 socket (which
// speaks PMI-2 too), its pmix_vN hpcq's PMIx.
std::string hpcq_mpi_of(const std::string& slurm) {
  if (slurm == "pmi2") return "pmi1";
  if (slurm.starts_with("pmix_v")) return "pmix";
  return slurm;
}

// Who runs it and where its files go: names, paths, queue, account, QOS,
// priority, dependencies, array, image, environment, signal.
Status take_names(const WordParser& p, Dialect dialect, Given& g) {
  if (p.name.given()) g.name = p.name.text;
  if (p.output.given()) {
    if (p.output.text.empty()) return invalid_argument("--output: empty file name");
    g.output = p.output.text;
  }
  if (p.error.given()) g.error = p.error.text;
  if (p.queue.given()) g.queue = p.queue.text;
  if (p.chdir.given()) {
    if (p.chdir.text.empty()) return invalid_argument("--chdir: empty directory");
    g.chdir = p.chdir.text;
  }
  if (p.export_text.given()) {
    auto e = parse_export(p.export_text.text);
    if (!e.is_ok()) return e.status();
    g.export_vars = std::move(e).value();
  }
  if (p.account.given()) g.account = p.account.text;
  if (p.qos.given()) g.qos = p.qos.text;
  if (p.priority.given()) {
    auto v = priority_of(p.priority.text);
    if (!v.is_ok()) return v.status();
    g.priority = *v;
  }
  if (p.dependency.given()) {
    auto deps = parse_dependencies(p.dependency.text);
    if (!deps.is_ok()) return deps.status();
    g.dependencies = std::move(deps).value();
  }
  if (p.array.given()) {
    HPCQ_RETURN_IF_ERROR(parse_array(p.array.text).status());
    g.array = p.array.text;
  }
  if (p.image.given()) {
    if (p.image.text.empty()) return invalid_argument("--image: want a directory, got ''");
    g.image = p.image.text;
  }
  if (p.mpi.given()) {
    const std::string mpi = dialect == Dialect::kSlurm ? hpcq_mpi_of(p.mpi.text) : p.mpi.text;
    HPCQ_RETURN_IF_ERROR(check_mpi(mpi, "--mpi"));
    g.mpi = mpi;
  }
  if (p.begin.given()) {
    auto when = parse_when(p.begin.text, "--begin");
    if (!when.is_ok()) return when.status();
    g.begin = *when;
  }
  if (p.deadline.given()) {
    auto when = parse_when(p.deadline.text, "--deadline");
    if (!when.is_ok()) return when.status();
    g.deadline = *when;
  }
  if (p.warn.given()) {
    auto w = warning_of(p.warn.text);
    if (!w.is_ok()) return w.status();
    g.warn = *w;
    if (p.warn.text.starts_with("B:")) g.warn_target = WarnTarget::kScript;
  }
  return Status::ok();
}

// Slurm's --gres may name GPUs ("gpu:2", per node): takes that item out of
// `text` and returns its count. A typed one ("gpu:a100:2") is refused: hpcq's
// nodes declare no GPU types.
Result<std::optional<int>> take_slurm_gpus(std::string& text) {
  std::optional<int> gpus;
  std::string rest;
  for (const std::string_view gres : split(text, ',')) {
    const std::string item(gres);
    if (item != "gpu" && !item.starts_with("gpu:")) {
      rest += (rest.empty() ? "" : ",") + item;
      continue;
    }
    const std::string count = item == "gpu" ? "1" : item.substr(4);
    if (count.find(':') != std::string::npos) {
      return invalid_argument("--gres: typed GPUs " + quote(item) +
                              " are not known to hpcq (its nodes declare no GPU types): "
                              "give gpu:N");
    }
    auto n = parse_count("--gres", count);
    if (!n.is_ok()) return n.status();
    gpus = *n;
  }
  text = rest;
  return gpus;
}

// How it is placed: distribution, binding, NUMA, nodes, sharing, profile.
Status take_placement(const WordParser& p, Dialect dialect, Given& g) {
  if (p.distribution.given()) {
    resource::Distribution nodes_d{}, cores_d{};
    HPCQ_RETURN_IF_ERROR(resource::parse_distribution(p.distribution.text, nodes_d, cores_d));
    g.distribution = std::make_pair(nodes_d, cores_d);
  }
  if (p.cpu_bind.given()) {
    auto v = resource::parse_cpu_bind(p.cpu_bind.text);
    if (!v.is_ok()) return v.status();
    g.cpu_bind = *v;
  }
  if (p.numa_policy.given()) {
    auto v = resource::parse_numa_policy(p.numa_policy.text);
    if (!v.is_ok()) return v.status();
    g.numa_policy = *v;
  }
  if (p.nodelist.given()) {
    auto names = node_names_of("--nodelist", p.nodelist.text);
    if (!names.is_ok()) return names.status();
    g.nodelist = std::move(names).value();
  }
  if (p.exclude.given()) {
    auto names = node_names_of("--exclude", p.exclude.text);
    if (!names.is_ok()) return names.status();
    g.exclude = std::move(names).value();
  }
  if (p.licenses.given()) {
    auto licenses = parse_licenses(p.licenses.text);
    if (!licenses.is_ok()) return licenses.status();
    g.licenses = std::move(licenses).value();
  }
  std::string gres_text = p.gres.text;
  if (p.gres.given() && dialect == Dialect::kSlurm) {
    auto gpus = take_slurm_gpus(gres_text);
    if (!gpus.is_ok()) return gpus.status();
    if (*gpus) g.gpus_per_node = **gpus;
  }
  if (p.gres.given() && !gres_text.empty()) {
    auto gres = parse_gres(gres_text);
    if (!gres.is_ok()) return gres.status();
    g.gres = std::move(gres).value();
  }
  if (p.constraint.given()) {
    HPCQ_RETURN_IF_ERROR(parse_constraint(p.constraint.text).status());
    g.constraint = p.constraint.text;
  }
  if (p.profile.given()) g.profile = p.profile.text;
  if (p.oversubscribe.given()) g.oversubscribe = p.oversubscribe.on;
  if (p.exclusive.given()) g.exclusive = p.exclusive.on;
  if (p.elastic.given()) g.elastic = p.elastic.on;
  if (p.requeue.given()) g.requeue = p.requeue.on;
  return Status::ok();
}

// What only Slurm's dialect reads: hold, nice, GPUs in all, --wrap, and the
// options hpcq cannot honour (refused, or warned about where downgraded).
Status take_slurm(const WordParser& p, const SubmitContext& ctx, Given& g) {
  for (std::size_t i = 0; i < p.unhonoured.size(); ++i) {
    if (!p.unhonoured[i].given()) continue;
    const std::string name = kSlurmUnhonoured[i];
    if (std::find(ctx.downgraded.begin(), ctx.downgraded.end(), name) != ctx.downgraded.end()) {
      g.warnings.push_back(name + " ignored: hpcq does not honour it (the site lets it through)");
      continue;
    }
    return invalid_argument(name + ": not honoured by hpcq (docs/slurm.md)");
  }
  if (p.hold.given()) g.hold = p.hold.on;
  if (p.export_text.given()) g.export_text = p.export_text.text;
  g.parsable = p.parsable.on;
  if (p.nice.given()) {
    auto v = priority_of(p.nice.text);
    if (!v.is_ok()) return invalid_argument("--nice: bad value " + quote(p.nice.text));
    g.nice = *v;
  }
  HPCQ_RETURN_IF_ERROR(count_of("--gpus", p.gpus, g.gpus));
  if (p.wrap.given()) {
    if (p.wrap.text.empty()) return invalid_argument("--wrap: empty command");
    g.wrap = p.wrap.text;
  }
  // sbatch's batch script reads /dev/null; nothing else can be honoured.
  if (p.input.given() && p.input.text != "/dev/null" && p.input.text != "none") {
    return invalid_argument("--input: not honoured by hpcq (only /dev/null)");
  }
  return Status::ok();
}

WordParser& parser_of(Dialect dialect) {
  // Each built on first use: hpcq submit never pays for Slurm's.
  if (dialect == Dialect::kSlurm) {
    thread_local WordParser slurm(Dialect::kSlurm);
    return slurm;
  }
  thread_local WordParser hpcq(Dialect::kHpcq);
  return hpcq;
}

// Parses one list of words: the command line (the command may follow) or one
// directive line (options only).
Result<Parsed> parse_words(const std::vector<std::string>& words, bool command_line,
                           const SubmitContext& ctx) {
  HPCQ_RETURN_IF_ERROR(reject_empty_equals(words));
  WordParser& parser = parser_of(ctx.dialect);
  auto rest = parser.parse(words);
  if (!rest.is_ok()) return rest.status();
  Parsed parsed;
  HPCQ_RETURN_IF_ERROR(take_command(*rest, command_line, parsed.command));
  Given& g = parsed.given;
  HPCQ_RETURN_IF_ERROR(take_sizes(parser, g));
  HPCQ_RETURN_IF_ERROR(take_names(parser, ctx.dialect, g));
  HPCQ_RETURN_IF_ERROR(take_placement(parser, ctx.dialect, g));
  if (ctx.dialect == Dialect::kSlurm) HPCQ_RETURN_IF_ERROR(take_slurm(parser, ctx, g));
  g.json = parser.json.on;
  g.wait = parser.wait.on;
  g.label = parser.label.on;
  g.overlap = parser.overlap.on;
  g.immediate = parser.immediate.on;
  g.pty = parser.pty.on;
  return parsed;
}

std::string basename_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash + 1 == path.size()) return path;
  return path.substr(slash + 1);
}

std::string resolve_dir(const std::string& cwd, const std::string& dir) {
  std::filesystem::path p(dir);
  if (p.is_relative() && !cwd.empty()) p = std::filesystem::path(cwd) / p;
  std::string out = p.lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

std::map<std::string, std::string> job_environment(const std::optional<Export>& given,
                                                   const SubmitContext& ctx) {
  const Export e = given.value_or(Export{});
  std::map<std::string, std::string> env;
  if (e.all) env = ctx.environment;
  for (const auto& [name, value] : e.vars) {
    if (value) {
      env[name] = *value;
    } else if (auto it = ctx.environment.find(name); it != ctx.environment.end()) {
      env[name] = it->second;
    }
    // A named variable the submitter does not have is simply not set, as in Slurm.
  }
  // Whatever --export says: steps inside the job (hpcq run, srun) reach
  // hpcqd where the submitter did.
  if (auto socket = ctx.environment.find("HPCQ_SOCKET"); socket != ctx.environment.end()) {
    env["HPCQ_SOCKET"] = socket->second;
  }
  // Whatever --export says, as Slurm's SLURM_UMASK: the tasks create files
  // with the submitter's umask (the job shell applies it).
  if (ctx.umask) {
    char text[8];
    std::snprintf(text, sizeof text, "%04o", *ctx.umask & 0777U);
    env["HPCQ_UMASK"] = text;
  }
  return env;
}

// What Slurm's dialect adds to the job: its hold, nice and GPUs in all,
// Slurm's variables, and sbatch's SLURM_SUBMIT_DIR and _HOST (set whatever
// --export says, as sbatch does).
Status apply_slurm(const Given& given, const SubmitContext& ctx, SubmitOptions& out) {
  JobSpec& spec = out.spec;
  spec.slurm_environment = true;
  spec.hold = given.hold.value_or(false);
  if (given.nice && !given.priority) spec.priority = -*given.nice;
  if (given.gpus) {
    const int nodes = std::max(1, spec.request.nodes);
    if (*given.gpus % nodes != 0) {
      return invalid_argument("--gpus: " + std::to_string(*given.gpus) + " GPUs over " +
                              std::to_string(nodes) +
                              " nodes: hpcq gives GPUs per node (use --gpus-per-node)");
    }
    spec.request.gpus_per_node = *given.gpus / nodes;
  }
  std::map<std::string, std::string> env = spec.env.vars();
  env["SLURM_SUBMIT_DIR"] = ctx.cwd;
  // What srun inside the job exports (Slurm's commands read it).
  if (given.export_text) env["SLURM_EXPORT_ENV"] = *given.export_text;
  if (!ctx.host.empty()) env["SLURM_SUBMIT_HOST"] = ctx.host;
  spec.env = std::move(env);
  out.parsable = given.parsable;
  out.warnings = given.warnings;
  return Status::ok();
}

}  // namespace

Result<std::vector<std::string>> parse_directives(const std::string& script_text,
                                                  const std::string& script_name, Dialect dialect) {
  auto lines = directive_lines(script_text, script_name, dialect);
  if (!lines.is_ok()) return lines.status();
  std::vector<std::string> words;
  for (auto& line : *lines) {
    for (auto& w : line.words) words.push_back(std::move(w));
  }
  return words;
}

bool asks_for_help(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& w = args[i];
    if (w == "--" || w.size() < 2 || w[0] != '-') return false;  // the command starts here
    if (w == "-h" || w == "--help") return true;
    if (w.starts_with("--") && w.find('=') != std::string::npos) continue;
    if (find_value_option(w) != nullptr) ++i;  // skip its value
  }
  return false;
}

bool names_command(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& w = args[i];
    if (w == "--wrap" || w.starts_with("--wrap=")) return true;
    if (w == "--") return i + 1 < args.size();
    if (w.size() < 2 || w[0] != '-') return true;  // the command starts here
    if (w.starts_with("--") && w.find('=') != std::string::npos) continue;
    if (find_value_option(w) != nullptr) ++i;  // skip its value
  }
  return false;
}

std::string submit_help(SubmitKind kind) {
  std::string out;
  switch (kind) {
    case SubmitKind::kSubmit:
      out =
          "usage: hpcq submit [options] [--] COMMAND [ARGS...]\n"
          "       hpcq submit [options] SCRIPT [ARGS...]\n\n"
          "Submit a job whose every task runs COMMAND, and print its id. A file that\n"
          "starts with #! is a script: its #HPCQ lines give options, as #SBATCH lines do,\n"
          "and the command line's override them.\n";
      break;
    case SubmitKind::kBatch:
      out =
          "usage: hpcq batch [options] SCRIPT [ARGS...]\n\n"
          "Submit a batch script (a regular file starting with #!, at most 4 MiB) that\n"
          "runs once, on the job's first node; its #HPCQ lines give options. Steps on\n"
          "the other nodes are launched from it with hpcq run. Prints the job id.\n";
      break;
    case SubmitKind::kRun:
      out =
          "usage: hpcq run [options] [-l] [--pty] [--overlap] [--immediate] [--] COMMAND "
          "[ARGS...]\n\n"
          "Run COMMAND in every task and show its output as it comes; exit with the\n"
          "tasks' status. Inside a job (HPCQ_JOB_ID set) it runs a step of that job.\n";
      break;
    case SubmitKind::kAlloc:
      out =
          "usage: hpcq alloc [options] [-- COMMAND [ARGS...]]\n\n"
          "Wait for an allocation, then run COMMAND (default: $SHELL) here with it;\n"
          "hpcq run inside launches steps of it. Leaving COMMAND releases it.\n";
      break;
  }
  out +=
      "\nResources:\n"
      "  -N, --nodes N|MIN-MAX        nodes (a range: the scheduler picks the size)\n"
      "      --elastic, --no-elastic  with a range: the running job may be resized\n"
      "  -n, --ntasks N               tasks (default: one per node)\n"
      "  -c, --cpus-per-task N        cores per task\n"
      "      --ntasks-per-node N      tasks on each node\n"
      "      --mem SIZE               memory per node (MiB, or K, M, G, T)\n"
      "      --mem-per-cpu SIZE       memory per core, instead of --mem\n"
      "      --gpus-per-node N        GPUs per node\n"
      "      --gpus-per-task N        GPUs per task\n"
      "      --gres NAME[:N][,...]    generic resources per node\n"
      "  -L, --licenses NAME[:N][,...] cluster-wide licenses\n"
      "  -t, --time LIMIT             MM, MM:SS, HH:MM:SS, D-HH[:MM[:SS]], 30s, 10m, 2h, 1d\n"
      "  -w, --nodelist NODELIST      only these nodes (node[1-4,7])\n"
      "  -x, --exclude NODELIST       never these nodes\n"
      "  -C, --constraint FEATURES    nodes with these features (a100&ib, a100|v100)\n"
      "      --oversubscribe          share cores with other such jobs\n"
      "      --exclusive              whole nodes: no other job runs there with it\n"
      "  -m, --distribution N[:C]     block or cyclic, over nodes then NUMA domains\n"
      "      --cpu-bind cores|threads|none\n"
      "      --numa-policy best-effort|single-numa-node|none\n"
      "      --profile cpu|memory|network, --workers N  (the granularity plugin)\n"
      "\nJob:\n"
      "  -J, --job-name NAME          name (default: the command's)\n"
      "  -q, --queue NAME             queue (default: the site's)\n"
      "  -A, --account NAME           account\n"
      "      --qos NAME               quality of service\n"
      "      --priority N             added to the priority (-1000000..1000000; > 0: root)\n"
      "  -d, --dependency TYPE:ID[:ID][,...]  after, afterany, afterok, afternotok;\n"
      "                               '?' between items: any one; singleton\n"
      "      --begin WHEN             not before: now, now+COUNT[seconds|minutes|hours|\n"
      "                               days|weeks] (seconds by default), now+DURATION as -t,\n"
      "                               or YYYY-MM-DD[THH:MM[:SS]]; at most 365 days ahead\n"
      "      --deadline WHEN          end CANCELLED if it cannot end by then (as --begin)\n"
      "      --signal [B:]SIG[@SECONDS]  SIG that long before the time limit (default\n"
      "                               60); B: to a batch script only, not its steps\n"
      "      --requeue, --no-requeue  requeue rather than fail when a node fails\n"
      "      --checkpoint-interval TIME  checkpoint the running job this often\n"
      "      --image DIR              run in an OCI container of this root or bundle\n"
      "      --mpi pmi1|pmix|pmi1,pmix|none  the PMI the tasks get\n"
      "  -D, --chdir DIR              working directory\n"
      "      --export ALL|NONE|[ALL,]VAR[=VALUE][,...]  the tasks' environment\n";
  if (kind != SubmitKind::kRun && kind != SubmitKind::kAlloc) {
    out +=
        "  -o, --output PATTERN         output file (%j job id, %A array id, %a index,\n"
        "                               %x name, %u user, %N first node; default\n"
        "                               hpcq-%j.out)\n"
        "  -e, --error PATTERN          error file (default: the output file)\n"
        "  -a, --array INDICES[%MAX]    a job per index: N, N-M, N-M:STEP, ...\n"
        "      --wait                   wait for the job to end (exit 0 if COMPLETED)\n";
  }
  if (kind == SubmitKind::kRun) {
    out +=
        "\nRun:\n"
        "  -l, --label                  prefix each output line with its task rank\n"
        "      --pty                    task 0 on a terminal (hpcq run --pty -- bash)\n"
        "      --overlap                a step may use cores other steps hold\n"
        "      --immediate              a step that does not fit fails at once\n";
  }
  out +=
      "\nOutput:\n"
      "      --json                   print JSON\n"
      "  -h, --help                   print this help\n"
      "\nSee hpcq(1).\n";
  return out;
}

Result<SubmitOptions> parse_submit_args(const std::vector<std::string>& args,
                                        const SubmitContext& ctx, SubmitKind kind) {
  auto command_line = parse_words(args, /*command_line=*/true, ctx);
  if (!command_line.is_ok()) return command_line.status();
  const std::optional<std::string>& wrap = command_line->given.wrap;
  if (wrap && !command_line->command.empty()) {
    return invalid_argument("--wrap: give a command to wrap or a script, not both");
  }
  // sbatch --wrap: the command becomes a script of its own, named "wrap".
  const std::vector<std::string> command =
      wrap ? std::vector<std::string>{"wrap"} : command_line->command;
  std::vector<std::string> alloc_command;
  if (kind == SubmitKind::kAlloc && command.empty()) {
    const auto shell = ctx.environment.find("SHELL");
    alloc_command = {shell != ctx.environment.end() && !shell->second.empty() ? shell->second
                                                                              : "/bin/sh"};
  }
  if (command.empty() && alloc_command.empty()) {
    return invalid_argument(kind == SubmitKind::kBatch ? "batch: no script given"
                            : kind == SubmitKind::kRun ? "run: no command given"
                                                       : "submit: no command or script given");
  }
  if (kind != SubmitKind::kRun) {
    const Given& g = command_line->given;
    if (g.label) return invalid_argument("--label: only hpcq run labels output lines");
    if (g.overlap || g.immediate || g.pty) {
      return invalid_argument(std::string(g.overlap ? "--overlap"
                                          : g.pty   ? "--pty"
                                                    : "--immediate") +
                              ": only for hpcq run");
    }
  }

  if (kind == SubmitKind::kAlloc) {
    // Its command runs once, here, on the caller's terminal, for as long as
    // the caller waits for it: none of these can apply.
    const Given& g = command_line->given;
    if (g.array) return invalid_argument("--array: hpcq alloc makes one allocation");
    if (g.output || g.error) {
      return invalid_argument(std::string(g.output ? "-o/--output" : "-e/--error") +
                              ": hpcq alloc's command runs here and writes where you are");
    }
    if (g.wait) return invalid_argument("--wait: hpcq alloc waits for its command already");
    if (g.requeue.value_or(false)) {
      return invalid_argument("--requeue: hpcq alloc's command runs here, once");
    }
  }

  SubmitOptions out;
  JobSpec& spec = out.spec;
  Given given;
  Result<std::string> text = not_found("");
  if (wrap) {
    text = "#!/bin/sh\n# This script was created by sbatch --wrap.\n\n" + *wrap + "\n";
  } else if (ctx.read_file && (kind == SubmitKind::kSubmit || kind == SubmitKind::kBatch)) {
    text = ctx.read_file(command.front());
  }
  // kNotFound: the word is a command (submit); anything else is a file that
  // cannot be a script (too large), which the user must hear about.
  if (!text.is_ok() && text.status().code() != Code::kNotFound) {
    return invalid_argument(std::string(kind == SubmitKind::kBatch ? "batch: " : "submit: ") +
                            text.status().message());
  }
  const bool is_script = text.is_ok() && text->starts_with("#!");
  if (kind == SubmitKind::kBatch && !is_script) {
    return invalid_argument("batch: " + quote(command.front()) +
                            " is not a script (want a readable file starting with #!)");
  }
  if (is_script) {
    auto lines = directive_lines(*text, command.front(), ctx.dialect);
    if (!lines.is_ok()) return lines.status();
    // Each line alone, so that an error names its line.
    for (const auto& line : *lines) {
      auto parsed = parse_words(line.words, /*command_line=*/false, ctx);
      if (!parsed.is_ok()) return at_line(command.front(), line.line, parsed.status());
      given.merge(parsed->given);
    }
    spec.script = std::move(text).value();
  }
  given.merge(command_line->given);

  spec.argv = alloc_command.empty() ? command : alloc_command;
  spec.name = given.name && !given.name->empty() ? *given.name : basename_of(spec.argv.front());
  auto& request = spec.request;
  request.nodes = given.nodes.value_or(0);
  // sbatch: -N alone runs one task per node; with --ntasks-per-node K, K per
  // node; -n with K and no -N takes as many nodes as the tasks need at K each.
  const int per_node = given.ntasks_per_node.value_or(0);
  request.ntasks =
      given.ntasks ? *given.ntasks : std::max(1, request.nodes) * std::max(1, per_node);
  if (per_node > 0 && !given.nodes) request.nodes = (request.ntasks + per_node - 1) / per_node;
  request.cpus_per_task = given.cpus_per_task.value_or(1);
  request.mem_per_node_bytes = given.mem.value_or(0);
  request.mem_per_cpu_bytes = given.mem_per_cpu.value_or(0);
  request.gpus_per_node = given.gpus_per_node.value_or(0);
  request.gpus_per_task = given.gpus_per_task.value_or(0);
  if (given.distribution) {
    request.node_distribution = given.distribution->first;
    request.core_distribution = given.distribution->second;
  }
  request.cpu_bind = given.cpu_bind.value_or(resource::CpuBind::kCores);
  request.numa_policy = given.numa_policy.value_or(resource::NumaPolicy::kBestEffort);
  request.oversubscribe = given.oversubscribe.value_or(false);
  request.exclusive = given.exclusive.value_or(false);
  request.gres = given.gres.value_or(std::map<std::string, int>{});
  spec.profile = given.profile.value_or("");
  spec.workers = given.workers.value_or(0);
  if (given.image) spec.image = resolve_dir(ctx.cwd, *given.image);
  spec.checkpoint_interval_s = given.checkpoint_interval.value_or(0);
  if (given.begin) {
    auto begin = resolve_when(*given.begin, ctx.now_us, "--begin");
    if (!begin.is_ok()) return begin.status();
    spec.begin_time_us = *begin;
  }
  if (given.deadline) {
    auto deadline = resolve_when(*given.deadline, ctx.now_us, "--deadline");
    if (!deadline.is_ok()) return deadline.status();
    if (*deadline <= std::max(ctx.now_us, spec.begin_time_us)) {
      return invalid_argument("--deadline: it has passed (or comes before --begin)");
    }
    spec.deadline_us = *deadline;
  }
  if (given.warn) std::tie(spec.warn_signal, spec.warn_seconds) = *given.warn;
  // sbatch's --signal spares the batch script unless B: says it alone.
  spec.warn_target = given.warn_target.value_or(
      ctx.dialect == Dialect::kSlurm ? WarnTarget::kSteps : WarnTarget::kScriptAndSteps);
  spec.nodelist = given.nodelist.value_or(std::vector<std::string>{});
  spec.exclude = given.exclude.value_or(std::vector<std::string>{});
  spec.constraint = given.constraint.value_or("");
  spec.ntasks_per_node = per_node;
  spec.licenses = given.licenses.value_or(std::map<std::string, int>{});
  spec.mpi = given.mpi.value_or("");
  spec.max_nodes = given.max_nodes.value_or(0);
  spec.elastic = given.elastic.value_or(false);
  spec.time_limit_s = given.time.value_or(0);
  spec.batch = kind == SubmitKind::kBatch || kind == SubmitKind::kAlloc;
  spec.forward_output = kind == SubmitKind::kRun;
  spec.pty = given.pty;
  // hpcq alloc's job runs nothing of its own: no output file.
  spec.output = given.output.value_or(kind == SubmitKind::kRun || kind == SubmitKind::kAlloc ? ""
                                      : ctx.dialect == Dialect::kHpcq ? kDefaultOutput
                                      : given.array                   ? kSlurmArrayOutput
                                                                      : kSlurmOutput);
  spec.error = given.error.value_or("");
  spec.queue = given.queue.value_or("");
  spec.cwd = given.chdir ? resolve_dir(ctx.cwd, *given.chdir) : ctx.cwd;
  spec.env = job_environment(given.export_vars, ctx);
  spec.requeue = given.requeue.value_or(false);
  spec.account = given.account.value_or("");
  spec.qos = given.qos.value_or("");
  spec.priority = given.priority.value_or(0);
  spec.dependencies = given.dependencies.value_or(std::vector<Dependency>{});
  spec.array = given.array.value_or("");
  out.json = given.json;
  out.wait = given.wait;
  out.label = given.label;
  out.step.nodes = given.nodes.value_or(0);
  out.step.ntasks = given.ntasks.value_or(0);
  if (per_node > 0 && out.step.ntasks == 0)
    out.step.ntasks = std::max(1, out.step.nodes) * per_node;
  if (per_node > 0 && out.step.nodes == 0)
    out.step.nodes = (out.step.ntasks + per_node - 1) / per_node;
  out.step.cpus_per_task = given.cpus_per_task.value_or(0);
  out.step.overlap = given.overlap;
  out.immediate = given.immediate;
  out.pty = given.pty;
  if (ctx.dialect == Dialect::kSlurm) HPCQ_RETURN_IF_ERROR(apply_slurm(given, ctx, out));
  HPCQ_RETURN_IF_ERROR(validate(spec));
  return out;
}

}  // namespace hpcq::job

// What Slurm's commands read from their users, apart from the submit
// options (lib/job/submit_options.h): their command-line options, as
// getopt_long reads them, and the fields of their --format options. Pure;
// errors are one line, kInvalidArgument.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "lib/core/status.h"

namespace hpcq::compat {

// The options of the query commands, as getopt_long reads them: "-x",
// "-xVALUE", "-x VALUE", "--name", "--name=VALUE", "--name VALUE"; words
// that are not options are operands.
struct OptionSpec {
  char short_name;  // 0: none
  const char* long_name;
  bool takes_value;
};
struct ReadOptions {
  std::map<std::string, std::vector<std::string>> given;  // by long name
  std::vector<std::string> operands;
  bool has(const std::string& name) const { return given.count(name) > 0; }
  // The last value given, or `otherwise`.
  std::string last(const std::string& name, const std::string& otherwise = "") const;
  // Every value given, each split at commas.
  std::vector<std::string> list(const std::string& name) const;
  // Set when --help or --usage was given: the options the command takes,
  // one per line (the command prints it and exits 0, as Slurm's do).
  std::string usage;
};
Result<ReadOptions> read_options(const std::vector<std::string>& args,
                                 const std::vector<OptionSpec>& specs);

// One field of a --format: "%.18i" (squeue, -o), "JobID%12" (sacct -o),
// "JobID:.10" (squeue -O). `right`: right-justified; width 0: as long as
// the value.
struct Field {
  std::string literal;  // text printed before the field (-o's text between fields)
  std::string name;     // the field: a letter (-o) or a name (sacct -o, squeue -O)
  int width = 0;
  bool right = false;
  bool width_given = false;
};
// squeue -o / sinfo -o: "%[.][WIDTH]LETTER" with literal text between;
// "%%" is a '%'. The trailing text is a Field with an empty name.
Result<std::vector<Field>> parse_percent_format(const std::string& text);
// sacct -o / squeue -O: "Name[%WIDTH]" (sacct) or "Name[:[.]WIDTH]"
// (squeue -O) separated by commas.
Result<std::vector<Field>> parse_named_format(const std::string& text, char width_mark);
// `value` padded to the field's width (truncated to it, as Slurm's commands
// truncate; sacct marks a cut with '+': `cut_mark`).
std::string pad(const std::string& value, const Field& field, char cut_mark = 0);

// One output line of a %-format (squeue -o, sinfo -o): each field's literal
// text, then value_of(its letter) padded to it; ends in a newline.
std::string format_line(const std::vector<Field>& fields,
                        const std::function<std::string(char)>& value_of);
// `text` in ASCII lower case (the commands' field names are any case).
std::string lower(std::string text);

}  // namespace hpcq::compat

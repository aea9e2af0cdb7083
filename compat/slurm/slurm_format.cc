#include "compat/slurm/slurm_format.h"

#include <algorithm>

#include "lib/core/split.h"
#include "lib/core/units.h"

namespace hpcq::compat {

std::string ReadOptions::last(const std::string& name, const std::string& otherwise) const {
  auto it = given.find(name);
  return it == given.end() || it->second.empty() ? otherwise : it->second.back();
}

std::vector<std::string> ReadOptions::list(const std::string& name) const {
  std::vector<std::string> out;
  auto it = given.find(name);
  if (it == given.end()) return out;
  for (const std::string& value : it->second) {
    for (std::string& item : split_nonempty(value, ',')) out.push_back(std::move(item));
  }
  return out;
}

Result<ReadOptions> read_options(const std::vector<std::string>& args,
                                 const std::vector<OptionSpec>& specs) {
  ReadOptions out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& w = args[i];
    if (w == "--") {
      out.operands.insert(out.operands.end(), args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    }
    if (w.size() < 2 || w[0] != '-') {
      out.operands.push_back(w);
      continue;
    }
    if (w == "--help" || w == "--usage") {
      out.usage.clear();
      for (const OptionSpec& s : specs) {
        out.usage += "  ";
        out.usage += s.short_name != 0 ? std::string("-") + s.short_name + ", " : "    ";
        out.usage += "--" + std::string(s.long_name) + (s.takes_value ? "=VALUE" : "") + "\n";
      }
      return out;
    }
    const OptionSpec* spec = nullptr;
    std::string value;
    bool has_value = false;
    if (w.starts_with("--")) {
      const std::size_t eq = w.find('=');
      const std::string name = w.substr(2, eq == std::string::npos ? eq : eq - 2);
      for (const OptionSpec& s : specs) {
        if (name == s.long_name) spec = &s;
      }
      if (spec == nullptr) return invalid_argument("unrecognized option " + quote(w.substr(0, eq)));
      if (eq != std::string::npos) {
        value = w.substr(eq + 1);
        has_value = true;
      }
    } else {
      for (const OptionSpec& s : specs) {
        if (s.short_name == w[1]) spec = &s;
      }
      if (spec == nullptr) return invalid_argument("invalid option -- " + quote(w.substr(1, 1)));
      if (w.size() > 2) {
        if (!spec->takes_value) return invalid_argument("invalid option in " + quote(w));
        value = w.substr(2);
        has_value = true;
      }
    }
    if (spec->takes_value && !has_value) {
      if (i + 1 >= args.size()) {
        return invalid_argument("option '--" + std::string(spec->long_name) +
                                "' requires an argument");
      }
      value = args[++i];
    } else if (!spec->takes_value && has_value) {
      return invalid_argument("option '--" + std::string(spec->long_name) + "' takes no argument");
    }
    out.given[spec->long_name].push_back(value);
  }
  return out;
}

Result<std::vector<Field>> parse_percent_format(const std::string& text) {
  std::vector<Field> fields;
  Field field;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      field.literal += text[i];
      continue;
    }
    if (i + 1 < text.size() && text[i + 1] == '%') {
      field.literal += '%';
      ++i;
      continue;
    }
    std::size_t j = i + 1;
    if (j < text.size() && (text[j] == '.' || text[j] == '-')) {
      field.right = text[j] == '.';  // '-': left, the default (printf's habit)
      ++j;
    }
    while (j < text.size() && text[j] >= '0' && text[j] <= '9' && field.width < 100000) {
      field.width = field.width * 10 + (text[j] - '0');
      field.width_given = true;
      ++j;
    }
    if (j >= text.size())
      return invalid_argument("bad format " + quote(text) + ": no field after %");
    field.name = std::string(1, text[j]);
    fields.push_back(std::move(field));
    field = Field{};
    i = j;
  }
  if (!field.literal.empty()) fields.push_back(std::move(field));
  return fields;
}

Result<std::vector<Field>> parse_named_format(const std::string& text, char width_mark) {
  std::vector<Field> fields;
  for (const std::string& item : split_nonempty(text, ',')) {
    Field field;
    const std::size_t mark = item.find(width_mark);
    field.name = item.substr(0, mark);
    if (mark != std::string::npos) {
      std::string width = item.substr(mark + 1);
      if (!width.empty() && width[0] == '.') {
        field.right = true;
        width.erase(0, 1);
      }
      if (width.empty() || width.size() > 5 ||
          !std::all_of(width.begin(), width.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return invalid_argument("bad field width in " + quote(item));
      }
      field.width = std::stoi(width);
      field.width_given = true;
    }
    if (field.name.empty()) return invalid_argument("bad format " + quote(text));
    fields.push_back(std::move(field));
  }
  if (fields.empty()) return invalid_argument("bad format " + quote(text));
  return fields;
}

std::string pad(const std::string& value, const Field& field, char cut_mark) {
  if (field.width <= 0) return value;
  const std::size_t width = static_cast<std::size_t>(field.width);
  if (value.size() > width) {
    if (cut_mark == 0) return value.substr(0, width);
    return value.substr(0, width - 1) + cut_mark;
  }
  const std::string fill(width - value.size(), ' ');
  return field.right ? fill + value : value + fill;
}

std::string format_line(const std::vector<Field>& fields,
                        const std::function<std::string(char)>& value_of) {
  std::string out;
  for (const Field& f : fields) {
    out += f.literal;
    if (!f.name.empty()) out += pad(value_of(f.name[0]), f);
  }
  return out + "\n";
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return text;
}

}  // namespace hpcq::compat

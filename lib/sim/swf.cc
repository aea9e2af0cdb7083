#include "lib/sim/swf.h"

#include <zlib.h>

#include <array>
#include <charconv>
#include <cmath>
#include <limits>

#include "lib/core/units.h"

namespace hpcq::sim {
namespace {

constexpr int kFields = 18;

constexpr std::array<std::string_view, kFields> kFieldNames = {"job number",
                                                               "submit time",
                                                               "wait time",
                                                               "run time",
                                                               "allocated processors",
                                                               "average CPU time",
                                                               "used memory",
                                                               "requested processors",
                                                               "requested time",
                                                               "requested memory",
                                                               "status",
                                                               "user id",
                                                               "group id",
                                                               "executable number",
                                                               "queue number",
                                                               "partition number",
                                                               "preceding job number",
                                                               "think time after preceding job"};

// Fields the standard defines as averages (seconds of CPU, kilobytes): these
// may carry a fraction ("142.00" in CTC-SP2); every other field is a count,
// an id or a time in whole seconds.
constexpr bool may_be_fractional(int field) { return field == 6 || field == 7 || field == 10; }

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

// Parses one field; nullopt-like failure is signalled by returning false.
bool parse_value(std::string_view token, int field, double* out) {
  const char* first = token.data();
  const char* last = token.data() + token.size();
  std::int64_t integer = 0;
  auto [end, ec] = std::from_chars(first, last, integer);
  double value = 0;
  if (ec == std::errc() && end == last) {
    value = static_cast<double>(integer);
  } else {
    auto [dend, dec] = std::from_chars(first, last, value, std::chars_format::fixed);
    if (dec != std::errc() || dend != last || !std::isfinite(value)) return false;
    if (!may_be_fractional(field) && value != std::floor(value)) return false;
  }
  // -1 is SWF's "unknown"; no other negative value has a meaning.
  if (value < 0 && value != -1) return false;
  // Integral fields become int64 seconds/ids: keep them representable.
  if (std::fabs(value) > 9.0e15) return false;
  *out = value;
  return true;
}

std::string where(std::string_view name, int line) {
  return std::string(name) + ":" + std::to_string(line) + ": ";
}

}  // namespace

std::string_view swf_field_name(int n) {
  if (n < 1 || n > kFields) return "?";
  return kFieldNames[static_cast<std::size_t>(n - 1)];
}

std::string swf_queue_name(const SwfJob& job) {
  std::string name;
  if (job.queue >= 0) name = "q" + std::to_string(job.queue);
  if (job.partition >= 0) name += (name.empty() ? "p" : ".p") + std::to_string(job.partition);
  return name;
}

Result<SwfTrace> parse_swf(std::string_view text, std::string_view name) {
  SwfTrace trace;
  int line_no = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;

    std::size_t i = 0;
    while (i < line.size() && is_space(line[i])) ++i;
    if (i == line.size()) continue;  // blank lines carry nothing
    if (line[i] == ';') {
      std::string_view comment = line.substr(i + 1);
      if (!comment.empty() && comment.back() == '\r') comment.remove_suffix(1);
      trace.header.emplace_back(comment);
      continue;
    }

    std::array<double, kFields> v{};
    int count = 0;
    while (i < line.size()) {
      std::size_t j = i;
      while (j < line.size() && !is_space(line[j])) ++j;
      std::string_view token = line.substr(i, j - i);
      ++count;
      if (count <= kFields && !parse_value(token, count, &v[static_cast<std::size_t>(count - 1)])) {
        return invalid_argument(where(name, line_no) + "field " + std::to_string(count) + " (" +
                                std::string(swf_field_name(count)) + "): bad value " +
                                quote(token));
      }
      i = j;
      while (i < line.size() && is_space(line[i])) ++i;
    }
    if (count != kFields) {
      return invalid_argument(where(name, line_no) + std::to_string(count) + " fields, SWF has " +
                              std::to_string(kFields));
    }
    ++trace.rows;

    const auto field = [&](int n) {
      return static_cast<std::int64_t>(v[static_cast<std::size_t>(n - 1)]);
    };
    if (field(1) == -1 || field(2) == -1 || field(4) == -1 || field(5) == -1) {
      ++trace.dropped;
      continue;
    }
    SwfJob job;
    job.id = field(1);
    job.submit_s = field(2);
    job.runtime_s = field(4);
    const std::int64_t size = field(8) > 0 ? field(8) : field(5);
    if (size <= 0 || size > std::numeric_limits<int>::max()) {
      ++trace.dropped;
      continue;
    }
    job.size = static_cast<int>(size);
    job.requested_s = field(9) > 0 ? field(9) : job.runtime_s;
    job.user = field(12);
    job.queue = field(15);
    job.partition = field(16);
    job.line = line_no;
    trace.jobs.push_back(job);
  }
  return trace;
}

Result<SwfTrace> read_swf(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) return not_found("cannot open " + path);
  std::string text;
  std::array<char, 1 << 16> buffer{};
  while (true) {
    const int n = gzread(file, buffer.data(), static_cast<unsigned>(buffer.size()));
    if (n < 0) {
      int errnum = 0;
      std::string message = gzerror(file, &errnum);
      gzclose(file);
      return not_found("cannot read " + path + ": " + message);
    }
    if (n == 0) break;
    text.append(buffer.data(), static_cast<std::size_t>(n));
  }
  gzclose(file);
  return parse_swf(text, path);
}

}  // namespace hpcq::sim

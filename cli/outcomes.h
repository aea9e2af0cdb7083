// What a command that acts on several things (cancel, hold, release,
// requeue, signal: jobs; drain, resume: nodes) did to each: with --json a
// JSON array of {KEY: what, "ok": true} or {KEY: what, "ok": false,
// "error": the one-line reason}, in the order given. Each failure's reason
// also goes to stderr, as every error of hpcq does; the exit status is the
// worst (client.h's exit_code_of). Not thread-safe: one command's.
#pragma once

#include <algorithm>
#include <iostream>
#include <string>
#include <utility>

#include "cli/client.h"
#include "cli/format.h"

namespace hpcq::cli {

class Outcomes {
 public:
  explicit Outcomes(std::string key) : key_(std::move(key)) {}

  // `what` is the id (a number) or name; `extra` fields are added (a step).
  void ok(nlohmann::json what, nlohmann::json extra = nlohmann::json::object()) {
    nlohmann::json row = {{key_, std::move(what)}, {"ok", true}};
    row.update(extra);
    rows_.push_back(std::move(row));
  }
  void failed(nlohmann::json what, const Status& status,
              nlohmann::json extra = nlohmann::json::object()) {
    code_ = std::max(code_, fail(status));
    nlohmann::json row = {{key_, std::move(what)}, {"ok", false}, {"error", status.message()}};
    row.update(extra);
    rows_.push_back(std::move(row));
  }
  // Prints the array with `json`; returns the exit status.
  int finish(bool json) const {
    if (json) std::cout << json_text(rows_) << "\n";
    return code_;
  }

 private:
  std::string key_;
  nlohmann::json rows_ = nlohmann::json::array();
  int code_ = 0;
};

}  // namespace hpcq::cli

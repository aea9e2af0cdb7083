// Plugin "fcfs": first come, first served. Job order is submit time, then
// job id (the project-wide tie-break, stated here explicitly so that a
// priority plugin listed after fcfs only breaks ties within one submit time).
#pragma once

#include <string_view>

#include "lib/sched/plugin.h"

namespace hpcq::sched {

class FcfsPlugin final : public Plugin {
 public:
  static constexpr std::string_view kName = "fcfs";
  std::string_view name() const override { return kName; }
  void on_session_open(Session& session) override;
};

}  // namespace hpcq::sched

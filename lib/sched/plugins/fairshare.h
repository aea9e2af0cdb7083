// Plugin "fairshare": job order by the classic fair-share factor of the
// job's association alone (fairshare.h), higher first, for sites that want
// nothing else from priority/multifactor. Equal factors give no opinion (the
// Session then orders by submit time, then job id). Takes no options.
//
// Cost: on_session_open computes the fair-share tree once and each queued
// job's factor once (O(queue * log associations + accounts + ledger
// entries)); a comparison is two array reads. Per-cycle state lives in the
// hook and dies with the Session.
#pragma once

#include <string_view>

#include "lib/sched/plugin.h"

namespace hpcq::sched {

class FairSharePlugin final : public Plugin {
 public:
  static constexpr std::string_view kName = "fairshare";
  std::string_view name() const override { return kName; }
  void on_session_open(Session& session) override;
};

}  // namespace hpcq::sched

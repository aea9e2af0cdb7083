// Plugin "licenses": the cluster-wide licenses of the SitePolicy ([licenses]
// in hpcq.toml(5), Slurm's Licenses=). A job asking for some (-L) starts
// only while that many are free: the site's count less what the running
// jobs and the jobs started earlier in this cycle hold.
//
// Hooks:
//   job ready    false while a license the job asks for has fewer free than
//                it asks (or is not configured: the daemon refuses those at
//                submit);
//   on-allocate / on-deallocate  take and give back the job's licenses
//                (a discarded Statement gives them back);
//   enqueueable  as job ready, also counting the jobs "enqueue" admitted.
// hpcq.toml's [licenses] turns it on (the daemon adds it to the plugins);
// with no licenses configured it registers nothing.
//
// State: this cycle's counts, reset by on_session_open. Cost: O(R·L) at
// session open (R running jobs, L licenses each), O(L log N) per hook.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "lib/sched/plugin.h"

namespace hpcq::sched {

class LicensesPlugin final : public Plugin {
 public:
  static constexpr std::string_view kName = "licenses";
  std::string_view name() const override { return kName; }
  void on_session_open(Session& session) override;

 private:
  using Counts = std::map<std::string, int>;
  bool fits(const PendingJob& job, const Counts* extra) const;
  static void add(Counts& counts, const std::map<std::string, int>& licenses, int sign);

  const std::map<std::string, int>* total_ = nullptr;
  Counts held_;      // by the running jobs and those allocated this cycle
  Counts admitted_;  // by the jobs "enqueue" admitted this cycle
};

}  // namespace hpcq::sched

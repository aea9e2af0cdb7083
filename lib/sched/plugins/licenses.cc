#include "lib/sched/plugins/licenses.h"

#include "lib/sched/session.h"

namespace hpcq::sched {

void LicensesPlugin::add(Counts& counts, const std::map<std::string, int>& licenses, int sign) {
  for (const auto& [name, count] : licenses) counts[name] += sign * count;
}

bool LicensesPlugin::fits(const PendingJob& job, const Counts* extra) const {
  for (const auto& [name, count] : job.licenses) {
    const auto total = total_->find(name);
    if (total == total_->end()) return false;
    int held = 0;
    for (const Counts* c : {&held_, extra}) {
      if (c == nullptr) continue;
      if (const auto it = c->find(name); it != c->end()) held += it->second;
    }
    if (held + count > total->second) return false;
  }
  return true;
}

void LicensesPlugin::on_session_open(Session& session) {
  const SitePolicy* site = session.snapshot().site;
  total_ = site != nullptr ? &site->licenses : nullptr;
  held_ = {};
  admitted_ = {};
  if (total_ == nullptr || total_->empty()) return;
  for (const RunningJob& job : session.snapshot().running) add(held_, job.licenses, +1);
  const std::string plugin(kName);
  session.add_job_ready(plugin, [this](const PendingJob& job) { return fits(job, nullptr); });
  session.add_on_allocate(plugin, [this](const PendingJob& job, const resource::Allocation&) {
    add(held_, job.licenses, +1);
  });
  session.add_on_deallocate(plugin, [this](const PendingJob& job, const resource::Allocation&) {
    add(held_, job.licenses, -1);
  });
  session.add_job_enqueueable(plugin,
                              [this](const PendingJob& job) { return fits(job, &admitted_); });
  session.add_on_enqueue(plugin,
                         [this](const PendingJob& job) { add(admitted_, job.licenses, +1); });
}

}  // namespace hpcq::sched

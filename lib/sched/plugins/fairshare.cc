#include "lib/sched/plugins/fairshare.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lib/sched/fairshare.h"

namespace hpcq::sched {
namespace {

struct CycleState {
  FairShareTree tree;
  const PendingJob* first = nullptr;  // snapshot.queue's storage
  std::vector<double> factor;         // by index in snapshot.queue

  double of(const PendingJob& job) const {
    const std::less<const PendingJob*> less;
    if (first != nullptr && !less(&job, first) && less(&job, first + factor.size())) {
      return factor[static_cast<std::size_t>(&job - first)];
    }
    return tree.factor(job);
  }
};

}  // namespace

void FairSharePlugin::on_session_open(Session& session) {
  const Snapshot& snapshot = session.snapshot();
  auto state = std::make_shared<CycleState>();
  state->tree = FairShareTree::compute(snapshot);
  state->first = snapshot.queue.data();
  state->factor.reserve(snapshot.queue.size());
  for (const PendingJob& job : snapshot.queue) state->factor.push_back(state->tree.factor(job));
  session.add_job_order(std::string(kName),
                        [state = std::shared_ptr<const CycleState>(std::move(state))](
                            const PendingJob& a, const PendingJob& b) {
                          const double fa = state->of(a);
                          const double fb = state->of(b);
                          if (fa != fb) return fa > fb ? -1 : 1;
                          return 0;
                        });
}

}  // namespace hpcq::sched

#include "lib/sched/actions/allocate.h"

namespace hpcq::sched {

void AllocateAction::execute(Session& session) {
  for (const PendingJob* job : session.ordered_queue()) {
    // Held by enqueue or over a queue's limits or share: it cannot start
    // this cycle whatever frees up, so it must not block the jobs behind it.
    if (!session.job_ready(*job)) continue;
    std::optional<resource::Allocation> allocation = session.place(*job);
    if (!allocation) {
      if (session.fits_when_idle(*job)) return;  // strict: nobody passes a job that can run
      continue;
    }
    Statement statement = session.statement();
    // The placement came from the same working copy, so this only fails on
    // a bug; stop rather than risk handing out cores twice.
    if (!statement.allocate(*job, std::move(*allocation)).is_ok()) return;
    statement.commit();
  }
}

}  // namespace hpcq::sched

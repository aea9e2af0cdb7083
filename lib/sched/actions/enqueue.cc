#include "lib/sched/actions/enqueue.h"

namespace hpcq::sched {

void EnqueueAction::execute(Session& session) {
  for (const PendingJob* job : session.ordered_queue()) {
    if (session.held(job->id)) continue;
    if (session.job_enqueueable(*job)) {
      session.job_enqueued(*job);
    } else {
      session.hold(job->id);
    }
  }
}

}  // namespace hpcq::sched

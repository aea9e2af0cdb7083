#include "lib/sched/plugins/fcfs.h"

#include <string>

namespace hpcq::sched {

void FcfsPlugin::on_session_open(Session& session) {
  session.add_job_order(std::string(kName), [](const PendingJob& a, const PendingJob& b) {
    if (a.submit_time != b.submit_time) return a.submit_time < b.submit_time ? -1 : 1;
    if (a.id != b.id) return a.id < b.id ? -1 : 1;
    return 0;
  });
}

}  // namespace hpcq::sched

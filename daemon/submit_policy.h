// What the site's policy does to a submission before it is stored: resolve
// the queue (the default one for none), fill in and check the time limit
// against the queue's and the leader's, resolve and check the account
// (the user's association) and QOS, and refuse a raised --priority from
// anyone but an admin. Slurm does the same at sbatch time (partition,
// account association, QOS, PartitionTimeLimit); refusing here, with a
// one-line reason, beats a job that pends forever.
//
// Pure: reads only its arguments. Errors: kInvalidArgument naming the option
// (--queue, --time, --account, --qos), kPermissionDenied for --priority.
#pragma once

#include <cstdint>

#include "lib/core/config.h"
#include "lib/core/status.h"
#include "lib/job/job.h"

namespace hpcq::daemon {

// `is_admin`: the caller may raise priorities. Changes `spec` in place:
// queue and account resolved, time limit filled in.
Status apply_submit_policy(const ClusterConfig& config, std::uint32_t uid, bool is_admin,
                           job::JobSpec& spec);

}  // namespace hpcq::daemon

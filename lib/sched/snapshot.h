// What one scheduling cycle sees: the time, the free resources, the running
// jobs and the queue.
//
// The daemon (or the simulator) builds a Snapshot for every cycle, hands it
// to Scheduler::cycle() and applies the Decisions it gets back. Building it
// must stay cheap for thousands of queued jobs: the pool is borrowed, not
// copied, and a PendingJob carries only what policies read.
//
// Ownership: `pool` is borrowed and must outlive the cycle() call and not
// change during it. Everything else is owned by value. Not thread-safe (a
// plain value used by one thread at a time).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/core/ids.h"
#include "lib/resource/allocation.h"
#include "lib/resource/node_pool.h"

namespace hpcq::sched {

struct PendingJob {
  JobId id = 0;
  std::uint32_t uid = 0;
  TimeUs submit_time = 0;
  resource::ResourceRequest request;
  std::int64_t time_limit_s = 0;
  std::string queue;  // empty: the default queue
};

struct RunningJob {
  JobId id = 0;
  resource::Allocation allocation;
  TimeUs end_estimate = 0;  // start + time limit: when backfill may count on its cores
};

struct Snapshot {
  TimeUs now = 0;
  // Free/used state of every node; nullptr schedules nothing.
  const resource::NodePool* pool = nullptr;
  std::vector<RunningJob> running;
  // Any order; cheapest when already in (submit_time, id) order, as the
  // daemon keeps its pending set.
  std::vector<PendingJob> queue;
};

}  // namespace hpcq::sched

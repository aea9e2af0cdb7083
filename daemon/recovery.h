// A leader's start: what the store holds is loaded into the context before
// any message is handled. Jobs that were running keep running on their
// agents: they stay RUNNING and are adopted node by node as each agent says
// Hello (NodeMonitor); a node that ran jobs is awaited, and declared down
// if it does not come back. Checkpoints in flight are waited for again;
// pending jobs are readied against their dependencies.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "daemon/context.h"
#include "lib/store/store.h"

namespace hpcq::daemon {

struct Recovered {
  std::unique_ptr<store::Store> store;  // for the context's GroupCommitter
  JobId next_job_id = 1;
  // Readying the pending jobs: carried out once the store's writer runs.
  job::Effects ready;
};

// With leader.store = "etcd": the election key this hpcqd won and its create
// revision, which every write requires (leadership.h). Empty: unguarded.
struct StoreGuard {
  std::string key;
  std::int64_t revision = 0;
};

// Fills ctx.nodes (from the configuration, with each node's stored drain
// and incarnation), ctx.table, ctx.usage and ctx.reservations.
Result<Recovered> recover(Context& ctx, const StoreGuard& guard);

}  // namespace hpcq::daemon

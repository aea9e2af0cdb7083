// PMIx for a job's MPI world (--mpi pmix): the job shell hosts an OpenPMIx
// server (libpmix's server library) for the tasks of its node, as Slurm's
// mpi/pmix plugin and PRRTE's daemons do, so that Open MPI's direct launch
// forms one world. The shell registers the world's namespace (sizes, the
// node and process maps, each local rank's ranks on the node) and each
// task, and gives each task the environment that leads it to the server.
//
// OpenPMIx runs its own progress thread, from which it calls the host (the
// upcalls: a client connected, finalized, aborted, or its node's part of a
// fence is complete). They are queued and the shell's single-threaded loop
// takes them through an eventfd (poll_fds), so that the world's state is
// only ever touched by the loop. A fence whose world spans other nodes
// leaves as the node's contribution on the channel (MpiWorld), the same
// path as PMI-1's: the leader concatenates every node's, which is what a
// PMIx server expects back. Only fences over the whole namespace are served
// (MPI_Init's, MPI_Finalize's, MPI_Barrier's through PMIx); a fence over
// part of it is answered "not supported", as is PMIx_Spawn (MPI_Comm_spawn:
// the world then ends after a grace, MpiWorld::spawn_refused). A key of
// another node's rank that no fence carried (a fence without data, or none:
// Open MPI's async modex) is asked of that node (direct modex): the request leaves on the channel
// with the overlay rank of the node, whose agent hands it to its shell; that
// shell asks its OpenPMIx for the rank's data (PMIx_server_dmodex_request,
// answered once the rank has committed it) and the answer comes back the
// same way. So a world's shells open their channel when their first task
// connects (the executor holds requests that come before); a job whose
// tasks never use PMIx holds none, and drops its unused server before a
// checkpoint (prepare_dump_signal), so that it can be checkpointed.
//
// Only in hpcq-job-shell (not the static container shell).
#pragma once

#include <memory>
#include <string>

#include "shell/contract.h"
#include "shell/shell_io.h"

namespace hpcq::agent {

// Starts the PMIx server of `l`'s world in this process; null with `error`
// set if it cannot start. Call once per process, before any task is forked.
std::unique_ptr<MpiWorld> start_pmix_world(const JobLaunch& l, const JobFiles& files,
                                           std::shared_ptr<WorldChannel> channel,
                                           std::string& error);

}  // namespace hpcq::agent

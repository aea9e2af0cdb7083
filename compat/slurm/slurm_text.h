// Slurm's forms of what hpcq knows about jobs and nodes, as its commands
// print them (squeue, sacct, sinfo, scontrol): state names, job and step
// ids, times, durations, exit codes. Pure functions of their arguments,
// apart from local time (times are printed in the caller's zone, as
// Slurm's are) and the caller's user name.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "compat/slurm/slurm_format.h"
#include "lib/core/status.h"
#include "proto/hpcq.pb.h"

namespace hpcq::compat {

// Slurm's state name: PENDING, RUNNING, COMPLETED, FAILED, CANCELLED,
// TIMEOUT, NODE_FAIL, OUT_OF_MEMORY (a job killed by its memory limit),
// DEADLINE (cancelled by its --deadline).
std::string state_name(v1::JobState state, const std::string& reason = "");
// squeue's %t: PD, R, CD, F, CA, TO, NF, OOM.
std::string compact_state(const std::string& state_name);

// A job's id as Slurm shows it: "ARRAY_INDEX" for an array's element, else N.
std::string job_id_text(const v1::Job& job);
// Slurm numbers a job's steps from 0; hpcq from 1 (0 is the job itself).
inline std::uint32_t slurm_step_of(std::uint32_t hpcq_step) { return hpcq_step - 1; }
inline std::uint32_t hpcq_step_of(std::uint32_t slurm_step) { return slurm_step + 1; }

// sacct's ExitCode "CODE:SIGNAL" of hpcq's exit code (128+N for signal N).
std::string exit_code_text(int exit_code, v1::JobState state);
// sacct's Elapsed and Timelimit: [D-]HH:MM:SS.
std::string elapsed_text(std::int64_t seconds);
// squeue's %M and %l: [D-][H:]M:SS, as short as it goes.
std::string squeue_duration(std::int64_t seconds);
// A time limit: UNLIMITED (0: none) or elapsed_text.
std::string limit_text(std::int64_t seconds, bool squeue_form);
// YYYY-MM-DDTHH:MM:SS, local; `none` when 0.
std::string time_text(std::int64_t us, const char* none = "Unknown");
// sacct's TotalCPU: [D-][HH:]MM:SS.mmm.
std::string cpu_time_text(std::int64_t us);
// sacct's MaxRSS and ReqMem forms: 1234K, 2000M, 3G.
std::string size_text(std::uint64_t bytes, char unit);

// The job's whole run time so far (or to its end), in seconds.
std::int64_t run_seconds(const v1::Job& job, std::int64_t now_us);
int allocated_cpus(const v1::Job& job);
int node_count(const v1::Job& job);
std::string node_list(const v1::Job& job);  // hostlist form; "" before it runs
// The partition a job is in (its queue; the unnamed one is "default").
std::string partition_of(const std::string& queue);

// The caller's user name (squeue --me, sacct's default).
std::string caller_user();
}  // namespace hpcq::compat

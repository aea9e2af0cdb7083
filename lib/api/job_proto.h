// Conversions between hpcq's value types (lib/job, lib/resource) and the
// public API messages of proto/hpcq.proto. Used by hpcqd (answers) and the
// hpcq CLI (requests). Pure functions.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lib/job/job.h"
#include "lib/job/records.h"
#include "lib/job/steps.h"
#include "proto/hpcq.pb.h"

namespace hpcq::api {

v1::JobSpec to_proto(const job::JobSpec& spec);
// kInvalidArgument for a field that does not parse (--dependency); the
// spec is validated by the caller (job::validate).
Result<job::JobSpec> from_proto(const v1::JobSpec& spec);
// A spec's command and working directory, from their *_bytes twins where
// set (hpcq.proto, JobSpec).
std::vector<std::string> argv_of(const v1::JobSpec& spec);
std::string cwd_of(const v1::JobSpec& spec);
v1::JobState to_proto(job::JobState state);

// host_cpus_of(rank, core) maps a logical core of a node to the host CPU it
// is pinned to (emulated nodes); may be empty when unknown.
v1::Job to_proto(const job::Job& job, const std::function<int(Rank, int)>& host_cpu_of);

// A job's step, as GetJob shows it and the store keeps it (a "step" record).
v1::Step to_proto(const job::StepRecord& step);
// kInvalidArgument for a record that does not make sense (an unknown state).
Result<job::StepRecord> from_proto(const v1::Step& step);

// A job's records, as GetJob shows them and the store keeps them
// ("checkpoint", "placement" and "resize" records, as protobuf JSON).
// kInvalidArgument for a word the typed record has no value for.
v1::CheckpointRecord to_proto(const job::CheckpointRecord& record);
Result<job::CheckpointRecord> from_proto(const v1::CheckpointRecord& record);
v1::Placement to_proto(const job::Placement& placement);
job::Placement from_proto(const v1::Placement& placement);
v1::ResizeRecord to_proto(const job::ResizeRecord& record);
Result<job::ResizeRecord> from_proto(const v1::ResizeRecord& record);

// The API's enums, typed. A request or record from an older client names
// its choice by the word beside the enum (`then`, `kind`): read when the
// enum is unspecified. kInvalidArgument for an unknown value or word.
v1::CheckpointThen to_proto(job::CheckpointThen then);
// A spec's layout (distribution, cpu-bind): its typed fields, or the words.
Status read_layout(const v1::JobSpec& spec, resource::ResourceRequest& request);
Result<job::CheckpointThen> checkpoint_then_of(v1::CheckpointThen action, const std::string& word);
v1::ResizeKind to_proto(job::ResizeKind kind);
Result<job::ResizeKind> resize_kind_of(v1::ResizeKind kind, const std::string& word);

// "PENDING", ... for a proto state.
const char* state_name(v1::JobState state);

}  // namespace hpcq::api

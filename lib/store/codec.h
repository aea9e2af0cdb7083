// Text encodings of job values for the store's columns (and anyone else who
// needs them): job states as their upper-case names, JobSpec and Allocation
// as JSON objects.
//
// The JSON is the durable format of the `spec` and `allocation` columns, so
// decoding is lenient where that keeps old rows readable and strict where a
// guess would be wrong: a field that is absent takes the struct's default (a
// row written before the field existed); a field of the wrong type, a
// non-object, or text that is not JSON is an error. Unknown fields are
// ignored (a row written by a newer version that was rolled back).
//
// Free functions on plain values; safe from any thread. Errors: decoding
// returns kInvalidArgument whose message names the field ("spec.argv[2]: must
// be a string"); nothing throws.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "lib/core/status.h"
#include "lib/job/job.h"
#include "lib/resource/allocation.h"

namespace hpcq::store {

// "PENDING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT",
// "NODE_FAIL" (the same names as job::state_name(), kept here so that the
// store does not depend on lib/job's implementation).
std::string encode_state(job::JobState state);
Result<job::JobState> decode_state(std::string_view name);

std::string encode_spec(const job::JobSpec& spec);
Result<job::JobSpec> decode_spec(std::string_view json);

std::string encode_allocation(const resource::Allocation& allocation);
Result<resource::Allocation> decode_allocation(std::string_view json);

// What the `nodes` table keeps of a node besides its state: the incarnation
// of its agent (a process's start, so that a restarted leader tells the same
// agent from a new one), as {"incarnation": N}. Absent (or empty text):
// 0, unknown.
struct NodeDetail {
  std::uint64_t incarnation = 0;
};
std::string encode_node_detail(const NodeDetail& detail);
Result<NodeDetail> decode_node_detail(std::string_view json);

}  // namespace hpcq::store

// How the hpcq command prints jobs and nodes: aligned tables for people,
// JSON (--json) for programs. The JSON field names are an interface that
// tests, benchmarks and users rely on (hpcq(1)); extend, never rename.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "proto/hpcq.pb.h"

namespace hpcq::cli {

// A checkpoint of a job (hpcq checkpoint, status --json "checkpoints").
nlohmann::json checkpoint_json(const v1::CheckpointRecord& record);
// The word of a record's typed choice (an unknown value shows as "").
std::string checkpoint_then_word(const v1::CheckpointRecord& record);
std::string resize_kind_word(const v1::ResizeRecord& record);
// A resize of an elastic job (hpcq resize, status --json "resizes").
nlohmann::json resize_json(const v1::ResizeRecord& record);
nlohmann::json job_json(const v1::Job& job);
// --json output: bytes that are not UTF-8 (a job's command, its paths)
// shown as U+FFFD rather than failing the command.
std::string json_text(const nlohmann::json& value, int indent = -1);
nlohmann::json node_json(const v1::Node& node);

std::string queue_table(const v1::ListJobsResponse& jobs);
std::string status_text(const v1::Job& job);
// hpcq status JOB.STEP: one step of `job`. The JSON is the step's object of
// status --json "steps" with "id" the job's and "step" the step's, as stat's.
std::string step_status_text(const v1::Job& job, const v1::Step& step);
nlohmann::json step_status_json(const v1::Job& job, const v1::Step& step);
// A local time, YYYY-MM-DDTHH:MM:SS, of microseconds since the epoch; "-" for 0.
std::string time_text(std::int64_t us);
std::string nodes_table(const v1::ListNodesResponse& nodes);
// hpcq queues, as sinfo's summary: one row per queue ("*" marks the default).
std::string queues_table(const v1::ListQueuesResponse& queues);
// NAME STATE HOST PID ENDPOINT; the pid of candidates on `this_host` only.
std::string leaders_table(const v1::ListLeadersResponse& leaders, const std::string& this_host);
nlohmann::json queue_summary_json(const v1::QueueSummary& queue);
// hpcq stat: a running job's use of each node now, and the total.
std::string stat_table(const v1::StatResponse& stat);
nlohmann::json stat_json(const v1::StatResponse& stat);
// with_steps: a row per step of each job too, "JOB.STEP" (sacct's steps).
std::string history_table(const v1::ListJobsResponse& jobs, bool with_steps = false);
nlohmann::json reservation_json(const v1::Reservation& reservation);
std::string reservations_table(const v1::ListReservationsResponse& reservations);

}  // namespace hpcq::cli

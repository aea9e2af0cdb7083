#include "daemon/api_service.h"

#include <utility>

#include "lib/api/job_proto.h"
#include "lib/job/job.h"

namespace hpcq::daemon {

grpc::Status to_grpc(const Status& status) {
  grpc::StatusCode code = grpc::StatusCode::INTERNAL;
  switch (status.code()) {
    case Code::kOk: return grpc::Status::OK;
    case Code::kInvalidArgument: code = grpc::StatusCode::INVALID_ARGUMENT; break;
    case Code::kNotFound: code = grpc::StatusCode::NOT_FOUND; break;
    case Code::kAlreadyExists: code = grpc::StatusCode::ALREADY_EXISTS; break;
    case Code::kPermissionDenied: code = grpc::StatusCode::PERMISSION_DENIED; break;
    case Code::kFailedPrecondition: code = grpc::StatusCode::FAILED_PRECONDITION; break;
    case Code::kUnavailable: code = grpc::StatusCode::UNAVAILABLE; break;
    case Code::kResourceExhausted: code = grpc::StatusCode::RESOURCE_EXHAUSTED; break;
    case Code::kUnauthenticated: code = grpc::StatusCode::UNAUTHENTICATED; break;
    case Code::kInternal: code = grpc::StatusCode::INTERNAL; break;
  }
  return {code, status.message()};
}

namespace {

// One metadata value of the call, if present.
std::optional<std::string_view> metadata(const grpc::ServerContext* context, const char* key) {
  const auto& all = context->client_metadata();
  auto it = all.find(key);
  if (it == all.end()) return std::nullopt;
  return std::string_view(it->second.data(), it->second.size());
}

}  // namespace

Result<Caller> ApiService::authenticate(const grpc::ServerContext* context) {
  return authenticator_.authenticate(context->peer(), metadata(context, "authorization"),
                                     metadata(context, "x-hpcq-user"));
}

grpc::Status ApiService::Submit(grpc::ServerContext* context, const v1::SubmitRequest* request,
                                v1::SubmitResponse* response) {
  auto caller_found = authenticate(context);
  if (!caller_found.is_ok()) return to_grpc(caller_found.status());
  const Caller& caller = *caller_found;
  auto spec = api::from_proto(request->spec());
  if (!spec.is_ok()) return to_grpc(spec.status());
  Result<SubmitResult> made = leader_.submit(caller, std::move(spec).value()).get();
  if (!made.is_ok()) return to_grpc(made.status());
  response->set_id(made->first);
  response->set_count(made->count);
  return grpc::Status::OK;
}

grpc::Status ApiService::Cancel(grpc::ServerContext* context, const v1::CancelRequest* request,
                                v1::CancelResponse*) {
  auto caller_found = authenticate(context);
  if (!caller_found.is_ok()) return to_grpc(caller_found.status());
  const Caller& caller = *caller_found;
  return to_grpc(leader_.cancel(caller, request->id(), request->step()).get());
}

grpc::Status ApiService::GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                                v1::Job* response) {
  auto caller_found = authenticate(context);
  if (!caller_found.is_ok()) return to_grpc(caller_found.status());
  const Caller& caller = *caller_found;
  Result<v1::Job> job = leader_.get_job(caller, request->id()).get();
  if (!job.is_ok()) return to_grpc(job.status());
  *response = std::move(job).value();
  return grpc::Status::OK;
}

grpc::Status ApiService::ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                                  v1::ListJobsResponse* response) {
  auto caller_found = authenticate(context);
  if (!caller_found.is_ok()) return to_grpc(caller_found.status());
  const Caller& caller = *caller_found;
  *response = leader_.list_jobs(caller, *request).get();
  return grpc::Status::OK;
}

grpc::Status ApiService::ListNodes(grpc::ServerContext* context, const v1::ListNodesRequest*,
                                   v1::ListNodesResponse* response) {
  if (auto caller = authenticate(context); !caller.is_ok()) return to_grpc(caller.status());
  *response = leader_.list_nodes().get();
  return grpc::Status::OK;
}

grpc::Status ApiService::Hold(grpc::ServerContext* context, const v1::HoldRequest* request,
                              v1::HoldResponse*) {
  auto caller = authenticate(context);
  if (!caller.is_ok()) return to_grpc(caller.status());
  return to_grpc(leader_.hold(*caller, request->id(), /*held=*/true).get());
}

grpc::Status ApiService::Checkpoint(grpc::ServerContext* context,
                                    const v1::CheckpointRequest* request,
                                    v1::CheckpointRecord* response) {
  auto caller = authenticate(context);
  if (!caller.is_ok()) return to_grpc(caller.status());
  // The API's word, typed at the edge; none means "continue".
  const auto then = request->then().empty() ? std::optional(job::CheckpointThen::kContinue)
                                            : job::parse_checkpoint_then(request->then());
  if (!then) {
    return to_grpc(
        invalid_argument("--then: '" + request->then() + "' is not continue, requeue or stop"));
  }
  auto record = leader_
                    .checkpoint(*caller, request->id(), *then,
                                {request->to().begin(), request->to().end()}, request->elsewhere())
                    .get();
  if (!record.is_ok()) return to_grpc(record.status());
  *response = std::move(record).value();
  return grpc::Status::OK;
}

grpc::Status ApiService::Resize(grpc::ServerContext* context, const v1::ResizeRequest* request,
                                v1::ResizeRecord* response) {
  auto caller = authenticate(context);
  if (!caller.is_ok()) return to_grpc(caller.status());
  auto record = leader_.resize(*caller, request->id(), request->nodes()).get();
  if (!record.is_ok()) return to_grpc(record.status());
  *response = std::move(record).value();
  return grpc::Status::OK;
}

grpc::Status ApiService::Release(grpc::ServerContext* context, const v1::ReleaseRequest* request,
                                 v1::ReleaseResponse*) {
  auto caller = authenticate(context);
  if (!caller.is_ok()) return to_grpc(caller.status());
  return to_grpc(leader_.hold(*caller, request->id(), /*held=*/false).get());
}

grpc::Status ApiService::Drain(grpc::ServerContext* context, const v1::DrainRequest* request,
                               v1::DrainResponse*) {
  auto caller = authenticate(context);
  if (!caller.is_ok()) return to_grpc(caller.status());
  return to_grpc(
      leader_.drain(*caller, request->node(), /*drained=*/true, request->reason()).get());
}

grpc::Status ApiService::Resume(grpc::ServerContext* context, const v1::ResumeRequest* request,
                                v1::ResumeResponse*) {
  auto caller = authenticate(context);
  if (!caller.is_ok()) return to_grpc(caller.status());
  return to_grpc(leader_.drain(*caller, request->node(), /*drained=*/false, "").get());
}

grpc::Status ApiService::CreateReservation(grpc::ServerContext* context,
                                           const v1::CreateReservationRequest* request,
                                           v1::Reservation* response) {
  auto caller = authenticate(context);
  if (!caller.is_ok()) return to_grpc(caller.status());
  auto made = leader_.create_reservation(*caller, request->reservation()).get();
  if (!made.is_ok()) return to_grpc(made.status());
  *response = std::move(made).value();
  return grpc::Status::OK;
}

grpc::Status ApiService::DeleteReservation(grpc::ServerContext* context,
                                           const v1::DeleteReservationRequest* request,
                                           v1::DeleteReservationResponse*) {
  auto caller = authenticate(context);
  if (!caller.is_ok()) return to_grpc(caller.status());
  return to_grpc(leader_.delete_reservation(*caller, request->name()).get());
}

grpc::Status ApiService::ListReservations(grpc::ServerContext* context,
                                          const v1::ListReservationsRequest*,
                                          v1::ListReservationsResponse* response) {
  if (auto caller = authenticate(context); !caller.is_ok()) return to_grpc(caller.status());
  *response = leader_.list_reservations().get();
  return grpc::Status::OK;
}

grpc::Status ApiService::WatchJobs(grpc::ServerContext* context,
                                   const v1::WatchJobsRequest* request,
                                   grpc::ServerWriter<v1::JobEvent>* writer) {
  auto caller_found = authenticate(context);
  if (!caller_found.is_ok()) return to_grpc(caller_found.status());
  const Caller& caller = *caller_found;
  std::uint64_t after = request->after_seq();
  if (request->id() != 0) {
    // Start from the job's current state, so that a watcher of a job that
    // already ended is answered at once; later changes follow by seq.
    after = std::max(after, leader_.events().last_seq());
    Result<v1::Job> job = leader_.get_job(caller, request->id()).get();
    if (!job.is_ok()) return to_grpc(job.status());
    v1::JobEvent now;
    now.set_seq(after);
    now.set_id(job->id());
    now.set_state(job->state());
    now.set_exit_code(job->exit_code());
    now.set_reason(job->reason());
    now.set_time_us(job->end_time_us() ? job->end_time_us() : job->submit_time_us());
    if (!writer->Write(now)) return grpc::Status::OK;
    if (now.state() >= v1::COMPLETED) return grpc::Status::OK;
  }
  while (!context->IsCancelled()) {
    JobEvents::Batch batch = leader_.events().read(after, caller.uid, caller.is_admin(),
                                                   request->id(), std::chrono::milliseconds(500));
    if (batch.fell_behind) {
      return {grpc::StatusCode::OUT_OF_RANGE,
              "events after seq " + std::to_string(after) +
                  " are gone (the reader fell behind, or hpcqd restarted); re-read the jobs and "
                  "resume with after_seq " +
                  std::to_string(batch.oldest - 1)};
    }
    for (const auto& event : batch.events) {
      if (!writer->Write(event)) return grpc::Status::OK;
      if (request->id() != 0 && event.state() >= v1::COMPLETED) return grpc::Status::OK;
    }
    after = std::max(after, batch.scanned_to);
    if (batch.closed) return {grpc::StatusCode::UNAVAILABLE, "hpcqd is shutting down"};
  }
  return grpc::Status::OK;
}

grpc::Status ApiService::Signal(grpc::ServerContext* context, const v1::SignalRequest* request,
                                v1::SignalResponse*) {
  auto caller_found = authenticate(context);
  if (!caller_found.is_ok()) return to_grpc(caller_found.status());
  auto signo = job::parse_signal(std::to_string(request->signal()));
  if (!signo.is_ok()) return to_grpc(signo.status());
  return to_grpc(leader_.signal(*caller_found, request->id(), request->step(), *signo).get());
}

grpc::Status ApiService::Requeue(grpc::ServerContext* context, const v1::RequeueRequest* request,
                                 v1::RequeueResponse*) {
  auto caller_found = authenticate(context);
  if (!caller_found.is_ok()) return to_grpc(caller_found.status());
  return to_grpc(leader_.requeue(*caller_found, request->id()).get());
}

grpc::Status ApiService::Update(grpc::ServerContext* context, const v1::UpdateRequest* request,
                                v1::Job* response) {
  auto caller_found = authenticate(context);
  if (!caller_found.is_ok()) return to_grpc(caller_found.status());
  auto updated =
      leader_
          .update(*caller_found, request->id(), request->time_limit_s(), request->begin_time_us())
          .get();
  if (!updated.is_ok()) return to_grpc(updated.status());
  *response = std::move(updated).value();
  return grpc::Status::OK;
}

grpc::Status ApiService::Stat(grpc::ServerContext* context, const v1::StatRequest* request,
                              v1::StatResponse* response) {
  auto caller_found = authenticate(context);
  if (!caller_found.is_ok()) return to_grpc(caller_found.status());
  auto answer = leader_.stat(*caller_found, request->id()).get();
  if (!answer.is_ok()) return to_grpc(answer.status());
  *response = std::move(answer).value();
  return grpc::Status::OK;
}

grpc::Status ApiService::SendInput(grpc::ServerContext* context, const v1::InputRequest* request,
                                   v1::InputResponse*) {
  auto caller_found = authenticate(context);
  if (!caller_found.is_ok()) return to_grpc(caller_found.status());
  overlay::Input input;
  input.set_data(request->data());
  input.set_eof(request->eof());
  input.set_rows(request->rows());
  input.set_cols(request->cols());
  return to_grpc(
      leader_.send_input(*caller_found, request->id(), request->step(), std::move(input)).get());
}

grpc::Status ApiService::LaunchStep(grpc::ServerContext* context,
                                    const v1::LaunchStepRequest* request, v1::Step* response) {
  auto caller_found = authenticate(context);
  if (!caller_found.is_ok()) return to_grpc(caller_found.status());
  const v1::StepSpec& spec = request->spec();
  job::StepRecord step;
  step.argv.assign(spec.argv().begin(), spec.argv().end());
  for (const auto& [k, v] : spec.env()) step.env[k] = v;
  step.cwd = spec.cwd();
  step.request = {spec.nodes(),
                  spec.ntasks(),
                  spec.cpus_per_task(),
                  spec.overlap(),
                  {spec.nodelist().begin(), spec.nodelist().end()},
                  spec.whole()};
  step.pty = spec.pty();
  step.mpi = spec.mpi();
  if (step.argv.empty() || step.argv[0].empty()) {
    return to_grpc(invalid_argument("run: no command given"));
  }
  if (!step.mpi.empty()) {
    if (Status s = job::check_mpi(step.mpi, "--mpi"); !s.is_ok()) return to_grpc(s);
  }
  for (const std::string& a : step.argv) {
    if (a.find('\0') != std::string::npos) {
      return to_grpc(invalid_argument("command: NUL byte in an argument"));
    }
  }
  if (!step.cwd.empty() && step.cwd[0] != '/') {
    return to_grpc(invalid_argument("run: the working directory must be absolute"));
  }
  auto launched =
      leader_.launch_step(*caller_found, request->id(), std::move(step), spec.immediate()).get();
  if (!launched.is_ok()) return to_grpc(launched.status());
  *response = std::move(launched).value();
  return grpc::Status::OK;
}

namespace {

// Writes a batch of output; false once the reader has gone.
bool write_output(const JobOutput::Batch& batch, grpc::ServerWriter<v1::OutputChunk>* writer) {
  std::uint64_t dropped = batch.dropped;
  if (dropped > 0 && batch.chunks.empty()) {
    v1::OutputChunk gap;
    gap.set_dropped_bytes(dropped);
    return writer->Write(gap);
  }
  for (const JobOutput::Chunk& c : batch.chunks) {
    v1::OutputChunk chunk;
    chunk.set_rank(static_cast<std::uint32_t>(c.rank));
    chunk.set_stream(c.is_stderr ? v1::OutputChunk::STDERR : v1::OutputChunk::STDOUT);
    chunk.set_data(c.data);
    chunk.set_dropped_bytes(std::exchange(dropped, 0));
    if (!writer->Write(chunk)) return false;
  }
  return true;
}

}  // namespace

grpc::Status ApiService::WatchOutput(grpc::ServerContext* context,
                                     const v1::WatchOutputRequest* request,
                                     grpc::ServerWriter<v1::OutputChunk>* writer) {
  auto caller_found = authenticate(context);
  if (!caller_found.is_ok()) return to_grpc(caller_found.status());
  const Caller& caller = *caller_found;
  const JobId id = request->id();
  Result<v1::Job> job = leader_.get_job(caller, id).get();
  if (!job.is_ok()) return to_grpc(job.status());
  const std::uint32_t step = request->step();
  // The state of what is watched: the job, or one of its steps.
  auto ended = [step](const v1::Job& j) {
    return step == 0 ? j.state() >= v1::COMPLETED
                     : j.steps(static_cast<int>(step) - 1).state() >= v1::COMPLETED;
  };
  if (step != 0 && static_cast<int>(step) > job->steps_size()) {
    return to_grpc(not_found("job " + std::to_string(id) + " has no step " + std::to_string(step)));
  }
  if (step == 0 && !job->spec().forward_output()) {
    return to_grpc(failed_precondition("job " + std::to_string(id) +
                                       " writes its output to files (hpcq submit or batch); only "
                                       "the output of hpcq run and of steps is streamed"));
  }
  std::uint64_t from = 0;
  bool from_now = !request->from_start();
  bool ended_before = ended(*job);
  while (!context->IsCancelled()) {
    // The output of a job that ended long ago may be gone: one look, then done.
    const auto wait = ended_before ? std::chrono::milliseconds(0) : std::chrono::milliseconds(500);
    JobOutput::Batch batch = leader_.output().read(id, step, from, from_now, wait);
    from_now = false;
    if (!write_output(batch, writer)) return grpc::Status::OK;
    from = batch.next;
    if (batch.ended || ended_before) return grpc::Status::OK;
    if (batch.shut_down) return {grpc::StatusCode::UNAVAILABLE, "hpcqd is shutting down"};
    if (batch.chunks.empty()) {
      // Quiet: did the job end without its output being marked (a restarted hpcqd)?
      job = leader_.get_job(caller, id).get();
      if (!job.is_ok()) return to_grpc(job.status());
      ended_before = ended(*job);
    }
  }
  return grpc::Status::OK;
}

}  // namespace hpcq::daemon

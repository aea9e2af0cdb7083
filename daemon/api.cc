#include "daemon/api.h"

#include <chrono>

#include <utility>

#include "lib/api/job_proto.h"
#include "lib/job/job.h"

namespace hpcq::daemon {

Status Api::submit(const Caller& caller, const v1::SubmitRequest& request,
                   v1::SubmitResponse* response) {
  auto spec = api::from_proto(request.spec());
  if (!spec.is_ok()) return spec.status();
  spec->submission_key = request.submission_key();
  const auto start = std::chrono::steady_clock::now();
  Result<SubmitResult> made = leader_.submit(caller, std::move(spec).value()).get();
  if (!made.is_ok()) return made.status();
  leader_.metrics().submitted(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  response->set_id(made->first);
  response->set_count(made->count);
  return Status::ok();
}

Status Api::cancel(const Caller& caller, const v1::CancelRequest& request, v1::CancelResponse*) {
  return leader_.cancel(caller, request.id(), request.step()).get();
}

Status Api::get_job(const Caller& caller, const v1::GetJobRequest& request, v1::Job* response) {
  Result<v1::Job> job = leader_.get_job(caller, request.id()).get();
  if (!job.is_ok()) return job.status();
  *response = std::move(job).value();
  return Status::ok();
}

Status Api::list_jobs(const Caller& caller, const v1::ListJobsRequest& request,
                      v1::ListJobsResponse* response) {
  *response = leader_.list_jobs(caller, request).get();
  return Status::ok();
}

Status Api::list_nodes(const Caller&, const v1::ListNodesRequest&,
                       v1::ListNodesResponse* response) {
  *response = leader_.list_nodes().get();
  return Status::ok();
}

Status Api::list_queues(const Caller&, const v1::ListQueuesRequest&,
                        v1::ListQueuesResponse* response) {
  *response = leader_.list_queues().get();
  return Status::ok();
}

Status Api::list_leaders(const Caller&, const v1::ListLeadersRequest&,
                         v1::ListLeadersResponse* response) {
  if (!candidates_) return failed_precondition("hpcqd: no list of leader candidates");
  return candidates_(response);
}

Status Api::hold(const Caller& caller, const v1::HoldRequest& request, v1::HoldResponse*) {
  return leader_.hold(caller, request.id(), /*held=*/true).get();
}

Status Api::release(const Caller& caller, const v1::ReleaseRequest& request, v1::ReleaseResponse*) {
  return leader_.hold(caller, request.id(), /*held=*/false).get();
}

Status Api::checkpoint(const Caller& caller, const v1::CheckpointRequest& request,
                       v1::CheckpointRecord* response) {
  auto then = api::checkpoint_then_of(request.action(), request.then());
  if (!then.is_ok()) return then.status();
  auto record = leader_
                    .checkpoint(caller, request.id(), *then,
                                {request.to().begin(), request.to().end()}, request.elsewhere())
                    .get();
  if (!record.is_ok()) return record.status();
  *response = api::to_proto(*record);
  return Status::ok();
}

Status Api::resize(const Caller& caller, const v1::ResizeRequest& request,
                   v1::ResizeRecord* response) {
  auto record = leader_.resize(caller, request.id(), request.nodes()).get();
  if (!record.is_ok()) return record.status();
  *response = api::to_proto(*record);
  return Status::ok();
}

Status Api::drain(const Caller& caller, const v1::DrainRequest& request, v1::DrainResponse*) {
  return leader_.drain(caller, request.node(), /*drained=*/true, request.reason()).get();
}

Status Api::resume(const Caller& caller, const v1::ResumeRequest& request, v1::ResumeResponse*) {
  return leader_.drain(caller, request.node(), /*drained=*/false, "").get();
}

Status Api::create_reservation(const Caller& caller, const v1::CreateReservationRequest& request,
                               v1::Reservation* response) {
  auto made = leader_.create_reservation(caller, request.reservation()).get();
  if (!made.is_ok()) return made.status();
  *response = std::move(made).value();
  return Status::ok();
}

Status Api::delete_reservation(const Caller& caller, const v1::DeleteReservationRequest& request,
                               v1::DeleteReservationResponse*) {
  return leader_.delete_reservation(caller, request.name()).get();
}

Status Api::list_reservations(const Caller&, const v1::ListReservationsRequest&,
                              v1::ListReservationsResponse* response) {
  *response = leader_.list_reservations().get();
  return Status::ok();
}

Status Api::signal(const Caller& caller, const v1::SignalRequest& request, v1::SignalResponse*) {
  auto signo = job::parse_signal(std::to_string(request.signal()));
  if (!signo.is_ok()) return signo.status();
  return leader_.signal(caller, request.id(), request.step(), *signo).get();
}

Status Api::requeue(const Caller& caller, const v1::RequeueRequest& request, v1::RequeueResponse*) {
  return leader_.requeue(caller, request.id()).get();
}

Status Api::end_allocation(const Caller& caller, const v1::EndAllocationRequest& request,
                           v1::EndAllocationResponse*) {
  return leader_.end_allocation(caller, request.id(), request.exit_code()).get();
}

Status Api::update(const Caller& caller, const v1::UpdateRequest& request, v1::Job* response) {
  auto updated =
      leader_.update(caller, request.id(), request.time_limit_s(), request.begin_time_us()).get();
  if (!updated.is_ok()) return updated.status();
  *response = std::move(updated).value();
  return Status::ok();
}

Status Api::stat(const Caller& caller, const v1::StatRequest& request, v1::StatResponse* response) {
  auto answer = leader_.stat(caller, request.id(), request.step()).get();
  if (!answer.is_ok()) return answer.status();
  *response = std::move(answer).value();
  return Status::ok();
}

Status Api::send_input(const Caller& caller, const v1::InputRequest& request, v1::InputResponse*) {
  overlay::Input input;
  input.set_data(request.data());
  input.set_eof(request.eof());
  input.set_rows(request.rows());
  input.set_cols(request.cols());
  return leader_.send_input(caller, request.id(), request.step(), std::move(input)).get();
}

Status Api::launch_step(const Caller& caller, const v1::LaunchStepRequest& request,
                        v1::Step* response) {
  const v1::StepSpec& spec = request.spec();
  job::StepRecord step;
  step.argv.assign(spec.argv().begin(), spec.argv().end());
  for (const auto& [k, v] : spec.env()) step.env[k] = v;
  step.cwd = spec.cwd();
  step.request = {.nodes = spec.nodes(),
                  .ntasks = spec.ntasks(),
                  .cpus_per_task = spec.cpus_per_task(),
                  .overlap = spec.overlap(),
                  .nodelist = {spec.nodelist().begin(), spec.nodelist().end()},
                  .exclude = {spec.exclude().begin(), spec.exclude().end()},
                  .whole = spec.whole()};
  step.pty = spec.pty();
  step.mpi = spec.mpi();
  if (step.argv.empty() || step.argv[0].empty()) return invalid_argument("run: no command given");
  if (!step.mpi.empty()) {
    if (Status s = job::check_mpi(step.mpi, "--mpi"); !s.is_ok()) return s;
  }
  for (const std::string& a : step.argv) {
    if (a.find('\0') != std::string::npos) {
      return invalid_argument("command: NUL byte in an argument");
    }
  }
  if (!step.cwd.empty() && step.cwd[0] != '/') {
    return invalid_argument("run: the working directory must be absolute");
  }
  auto launched =
      leader_.launch_step(caller, request.id(), std::move(step), spec.immediate()).get();
  if (!launched.is_ok()) return launched.status();
  *response = std::move(launched).value();
  return Status::ok();
}

Status Api::watch_jobs(const Caller& caller, const v1::WatchJobsRequest& request,
                       Sink<v1::JobEvent>& sink) {
  std::uint64_t after = request.after_seq();
  if (request.id() != 0) {
    // Start from the job's current state, so that a watcher of a job that
    // already ended is answered at once; later changes follow by seq.
    after = std::max(after, leader_.events().last_seq());
    Result<v1::Job> job = leader_.get_job(caller, request.id()).get();
    if (!job.is_ok()) return job.status();
    v1::JobEvent now;
    now.set_seq(after);
    now.set_id(job->id());
    now.set_state(job->state());
    now.set_exit_code(job->exit_code());
    now.set_reason(job->reason());
    now.set_time_us(job->end_time_us() ? job->end_time_us() : job->submit_time_us());
    if (!sink.write(now)) return Status::ok();
    if (now.state() >= v1::COMPLETED) return Status::ok();
  }
  while (!sink.cancelled()) {
    JobEvents::Batch batch = leader_.events().read(after, caller.uid, caller.is_admin(),
                                                   request.id(), std::chrono::milliseconds(500));
    if (batch.fell_behind) {
      return {Code::kOutOfRange,
              "events after seq " + std::to_string(after) +
                  " are gone (the reader fell behind, or hpcqd restarted); re-read the jobs and "
                  "resume with after_seq " +
                  std::to_string(batch.oldest - 1)};
    }
    for (const auto& event : batch.events) {
      if (!sink.write(event)) return Status::ok();
      if (request.id() != 0 && event.state() >= v1::COMPLETED) return Status::ok();
    }
    after = std::max(after, batch.scanned_to);
    if (batch.closed) return unavailable("hpcqd is shutting down");
  }
  return Status::ok();
}

namespace {

// Writes a batch of output; false once the reader has gone.
bool write_output(const JobOutput::Batch& batch, Sink<v1::OutputChunk>& sink) {
  std::uint64_t dropped = batch.dropped;
  if (dropped > 0 && batch.chunks.empty()) {
    v1::OutputChunk gap;
    gap.set_dropped_bytes(dropped);
    return sink.write(gap);
  }
  for (const JobOutput::Chunk& c : batch.chunks) {
    v1::OutputChunk chunk;
    chunk.set_rank(static_cast<std::uint32_t>(c.rank));
    chunk.set_stream(c.is_stderr ? v1::OutputChunk::STDERR : v1::OutputChunk::STDOUT);
    chunk.set_data(c.data);
    chunk.set_dropped_bytes(std::exchange(dropped, 0));
    chunk.set_attempt(c.attempt);
    chunk.set_stream_offset(c.stream_offset);
    if (!sink.write(chunk)) return false;
  }
  return true;
}

}  // namespace

Status Api::watch_output(const Caller& caller, const v1::WatchOutputRequest& request,
                         Sink<v1::OutputChunk>& sink) {
  const JobId id = request.id();
  Result<v1::Job> job = leader_.get_job(caller, id).get();
  if (!job.is_ok()) return job.status();
  const std::uint32_t step = request.step();
  // The state of what is watched: the job, or one of its steps.
  auto ended = [step](const v1::Job& j) {
    return step == 0 ? j.state() >= v1::COMPLETED
                     : j.steps(static_cast<int>(step) - 1).state() >= v1::COMPLETED;
  };
  if (step != 0 && static_cast<int>(step) > job->steps_size()) {
    return not_found("job " + std::to_string(id) + " has no step " + std::to_string(step));
  }
  if (step == 0 && !job->spec().forward_output()) {
    return failed_precondition("job " + std::to_string(id) +
                               " writes its output to files (hpcq submit or batch); only the "
                               "output of hpcq run and of steps is streamed");
  }
  std::uint64_t from = 0;
  bool from_now = !request.from_start();
  bool ended_before = ended(*job);
  // This reader's pace is the job's: what it has not written yet holds the
  // tasks back (JobOutput's credit), until it goes.
  JobOutput& output = leader_.output();
  const std::uint64_t reader = output.add_reader(id, step);
  struct Gone {
    JobOutput& output;
    JobId id;
    std::uint32_t step;
    std::uint64_t reader;
    ~Gone() { output.remove_reader(id, step, reader); }
  } gone{output, id, step, reader};
  while (!sink.cancelled()) {
    // The output of a job that ended long ago may be gone: one look, then done.
    const auto wait = ended_before ? std::chrono::milliseconds(0) : std::chrono::milliseconds(500);
    JobOutput::Batch batch = output.read(id, step, from, from_now, wait, reader);
    from_now = false;
    if (!write_output(batch, sink)) return Status::ok();
    from = batch.next;
    if (batch.ended || (ended_before && batch.chunks.empty())) return Status::ok();
    if (batch.shut_down) return unavailable("hpcqd is shutting down");
    if (batch.chunks.empty()) {
      // Quiet: did the job end without its output being marked (a restarted hpcqd)?
      job = leader_.get_job(caller, id).get();
      if (!job.is_ok()) return job.status();
      ended_before = ended(*job);
    }
  }
  return Status::ok();
}

}  // namespace hpcq::daemon

#include "daemon/api_service.h"

#include <utility>

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
    case Code::kOutOfRange: code = grpc::StatusCode::OUT_OF_RANGE; break;
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

template <class Request, class Response>
grpc::Status ApiService::unary(grpc::ServerContext* context, const Request* request,
                               Response* response,
                               Status (Api::*call)(const Caller&, const Request&, Response*)) {
  auto caller = authenticate(context);
  if (!caller.is_ok()) return to_grpc(caller.status());
  return to_grpc((api_.*call)(*caller, *request, response));
}

namespace {

template <class Message>
class WriterSink final : public Sink<Message> {
 public:
  WriterSink(grpc::ServerContext* context, grpc::ServerWriter<Message>* writer)
      : context_(context), writer_(writer) {}
  bool write(const Message& message) override { return writer_->Write(message); }
  bool cancelled() override { return context_->IsCancelled(); }

 private:
  grpc::ServerContext* context_;
  grpc::ServerWriter<Message>* writer_;
};

}  // namespace

template <class Request, class Message>
grpc::Status ApiService::stream(grpc::ServerContext* context, const Request* request,
                                grpc::ServerWriter<Message>* writer,
                                Status (Api::*call)(const Caller&, const Request&,
                                                    Sink<Message>&)) {
  auto caller = authenticate(context);
  if (!caller.is_ok()) return to_grpc(caller.status());
  WriterSink<Message> sink(context, writer);
  return to_grpc((api_.*call)(*caller, *request, sink));
}

grpc::Status ApiService::Submit(grpc::ServerContext* context, const v1::SubmitRequest* request,
                                v1::SubmitResponse* response) {
  return unary(context, request, response, &Api::submit);
}

grpc::Status ApiService::Cancel(grpc::ServerContext* context, const v1::CancelRequest* request,
                                v1::CancelResponse* response) {
  return unary(context, request, response, &Api::cancel);
}

grpc::Status ApiService::GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                                v1::Job* response) {
  return unary(context, request, response, &Api::get_job);
}

grpc::Status ApiService::ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                                  v1::ListJobsResponse* response) {
  return unary(context, request, response, &Api::list_jobs);
}

grpc::Status ApiService::ListNodes(grpc::ServerContext* context,
                                   const v1::ListNodesRequest* request,
                                   v1::ListNodesResponse* response) {
  return unary(context, request, response, &Api::list_nodes);
}

grpc::Status ApiService::ListQueues(grpc::ServerContext* context,
                                    const v1::ListQueuesRequest* request,
                                    v1::ListQueuesResponse* response) {
  return unary(context, request, response, &Api::list_queues);
}

grpc::Status ApiService::ListLeaders(grpc::ServerContext* context,
                                     const v1::ListLeadersRequest* request,
                                     v1::ListLeadersResponse* response) {
  return unary(context, request, response, &Api::list_leaders);
}

grpc::Status ApiService::Hold(grpc::ServerContext* context, const v1::HoldRequest* request,
                              v1::HoldResponse* response) {
  return unary(context, request, response, &Api::hold);
}

grpc::Status ApiService::Checkpoint(grpc::ServerContext* context,
                                    const v1::CheckpointRequest* request,
                                    v1::CheckpointRecord* response) {
  return unary(context, request, response, &Api::checkpoint);
}

grpc::Status ApiService::Resize(grpc::ServerContext* context, const v1::ResizeRequest* request,
                                v1::ResizeRecord* response) {
  return unary(context, request, response, &Api::resize);
}

grpc::Status ApiService::Release(grpc::ServerContext* context, const v1::ReleaseRequest* request,
                                 v1::ReleaseResponse* response) {
  return unary(context, request, response, &Api::release);
}

grpc::Status ApiService::Drain(grpc::ServerContext* context, const v1::DrainRequest* request,
                               v1::DrainResponse* response) {
  return unary(context, request, response, &Api::drain);
}

grpc::Status ApiService::Resume(grpc::ServerContext* context, const v1::ResumeRequest* request,
                                v1::ResumeResponse* response) {
  return unary(context, request, response, &Api::resume);
}

grpc::Status ApiService::CreateReservation(grpc::ServerContext* context,
                                           const v1::CreateReservationRequest* request,
                                           v1::Reservation* response) {
  return unary(context, request, response, &Api::create_reservation);
}

grpc::Status ApiService::DeleteReservation(grpc::ServerContext* context,
                                           const v1::DeleteReservationRequest* request,
                                           v1::DeleteReservationResponse* response) {
  return unary(context, request, response, &Api::delete_reservation);
}

grpc::Status ApiService::ListReservations(grpc::ServerContext* context,
                                          const v1::ListReservationsRequest* request,
                                          v1::ListReservationsResponse* response) {
  return unary(context, request, response, &Api::list_reservations);
}

grpc::Status ApiService::WatchJobs(grpc::ServerContext* context,
                                   const v1::WatchJobsRequest* request,
                                   grpc::ServerWriter<v1::JobEvent>* writer) {
  return stream(context, request, writer, &Api::watch_jobs);
}

grpc::Status ApiService::Signal(grpc::ServerContext* context, const v1::SignalRequest* request,
                                v1::SignalResponse* response) {
  return unary(context, request, response, &Api::signal);
}

grpc::Status ApiService::Requeue(grpc::ServerContext* context, const v1::RequeueRequest* request,
                                 v1::RequeueResponse* response) {
  return unary(context, request, response, &Api::requeue);
}

grpc::Status ApiService::EndAllocation(grpc::ServerContext* context,
                                       const v1::EndAllocationRequest* request,
                                       v1::EndAllocationResponse* response) {
  return unary(context, request, response, &Api::end_allocation);
}

grpc::Status ApiService::Update(grpc::ServerContext* context, const v1::UpdateRequest* request,
                                v1::Job* response) {
  return unary(context, request, response, &Api::update);
}

grpc::Status ApiService::Stat(grpc::ServerContext* context, const v1::StatRequest* request,
                              v1::StatResponse* response) {
  return unary(context, request, response, &Api::stat);
}

grpc::Status ApiService::SendInput(grpc::ServerContext* context, const v1::InputRequest* request,
                                   v1::InputResponse* response) {
  return unary(context, request, response, &Api::send_input);
}

grpc::Status ApiService::LaunchStep(grpc::ServerContext* context,
                                    const v1::LaunchStepRequest* request, v1::Step* response) {
  return unary(context, request, response, &Api::launch_step);
}

grpc::Status ApiService::WatchOutput(grpc::ServerContext* context,
                                     const v1::WatchOutputRequest* request,
                                     grpc::ServerWriter<v1::OutputChunk>* writer) {
  return stream(context, request, writer, &Api::watch_output);
}

}  // namespace hpcq::daemon

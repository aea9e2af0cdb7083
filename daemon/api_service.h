// The gRPC face of hpcqd's API (daemon/api.h), on the local unix socket and,
// for portals, on TCP + TLS. Every call identifies its caller
// (Authenticator: the connection's credentials, or a portal's token and the
// user it acts for), hands the request to Api and turns its Status into a
// gRPC status with the same one-line message.
//
// Threads: gRPC's sync-server threads.
#pragma once

#include <grpcpp/grpcpp.h>

#include "daemon/api.h"
#include "daemon/authenticator.h"
#include "proto/hpcq.grpc.pb.h"

namespace hpcq::daemon {

class ApiService final : public v1::Hpcq::Service {
 public:
  ApiService(Api& api, Authenticator& authenticator) : api_(api), authenticator_(authenticator) {}

  grpc::Status Submit(grpc::ServerContext* context, const v1::SubmitRequest* request,
                      v1::SubmitResponse* response) override;
  grpc::Status Cancel(grpc::ServerContext* context, const v1::CancelRequest* request,
                      v1::CancelResponse* response) override;
  grpc::Status GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                      v1::Job* response) override;
  grpc::Status ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override;
  grpc::Status ListNodes(grpc::ServerContext* context, const v1::ListNodesRequest* request,
                         v1::ListNodesResponse* response) override;
  grpc::Status ListQueues(grpc::ServerContext* context, const v1::ListQueuesRequest* request,
                          v1::ListQueuesResponse* response) override;
  grpc::Status ListLeaders(grpc::ServerContext* context, const v1::ListLeadersRequest* request,
                           v1::ListLeadersResponse* response) override;
  grpc::Status Hold(grpc::ServerContext* context, const v1::HoldRequest* request,
                    v1::HoldResponse* response) override;
  grpc::Status Checkpoint(grpc::ServerContext* context, const v1::CheckpointRequest* request,
                          v1::CheckpointRecord* response) override;
  grpc::Status Resize(grpc::ServerContext* context, const v1::ResizeRequest* request,
                      v1::ResizeRecord* response) override;
  grpc::Status Release(grpc::ServerContext* context, const v1::ReleaseRequest* request,
                       v1::ReleaseResponse* response) override;
  grpc::Status Drain(grpc::ServerContext* context, const v1::DrainRequest* request,
                     v1::DrainResponse* response) override;
  grpc::Status Resume(grpc::ServerContext* context, const v1::ResumeRequest* request,
                      v1::ResumeResponse* response) override;
  grpc::Status CreateReservation(grpc::ServerContext* context,
                                 const v1::CreateReservationRequest* request,
                                 v1::Reservation* response) override;
  grpc::Status DeleteReservation(grpc::ServerContext* context,
                                 const v1::DeleteReservationRequest* request,
                                 v1::DeleteReservationResponse* response) override;
  grpc::Status ListReservations(grpc::ServerContext* context,
                                const v1::ListReservationsRequest* request,
                                v1::ListReservationsResponse* response) override;
  grpc::Status WatchJobs(grpc::ServerContext* context, const v1::WatchJobsRequest* request,
                         grpc::ServerWriter<v1::JobEvent>* writer) override;
  grpc::Status Signal(grpc::ServerContext* context, const v1::SignalRequest* request,
                      v1::SignalResponse* response) override;
  grpc::Status Requeue(grpc::ServerContext* context, const v1::RequeueRequest* request,
                       v1::RequeueResponse* response) override;
  grpc::Status EndAllocation(grpc::ServerContext* context, const v1::EndAllocationRequest* request,
                             v1::EndAllocationResponse* response) override;
  grpc::Status Update(grpc::ServerContext* context, const v1::UpdateRequest* request,
                      v1::Job* response) override;
  grpc::Status Stat(grpc::ServerContext* context, const v1::StatRequest* request,
                    v1::StatResponse* response) override;
  grpc::Status SendInput(grpc::ServerContext* context, const v1::InputRequest* request,
                         v1::InputResponse* response) override;
  grpc::Status LaunchStep(grpc::ServerContext* context, const v1::LaunchStepRequest* request,
                          v1::Step* response) override;
  grpc::Status WatchOutput(grpc::ServerContext* context, const v1::WatchOutputRequest* request,
                           grpc::ServerWriter<v1::OutputChunk>* writer) override;

 private:
  Result<Caller> authenticate(const grpc::ServerContext* context);
  template <class Request, class Response>
  grpc::Status unary(grpc::ServerContext* context, const Request* request, Response* response,
                     Status (Api::*call)(const Caller&, const Request&, Response*));
  template <class Request, class Message>
  grpc::Status stream(grpc::ServerContext* context, const Request* request,
                      grpc::ServerWriter<Message>* writer,
                      Status (Api::*call)(const Caller&, const Request&, Sink<Message>&));

  Api& api_;
  Authenticator& authenticator_;
};

grpc::Status to_grpc(const Status& status);

}  // namespace hpcq::daemon

// hpcqd's API (proto/hpcq.proto service Hpcq) for a caller already known:
// each call turns its request into a Leader call and the Leader's answer
// into a response or a one-line Status. Two transports serve it: gRPC
// (ApiService: the unix socket and portals' TLS) and the local wire
// (LocalApi: the hpcq command on the unix socket). Who the caller is, is
// the transport's job (Authenticator); this class never sees a connection.
//
// Threads: any transport thread; the Leader does the work on its loop.
#pragma once

#include <functional>

#include "daemon/leader.h"
#include "daemon/peer_credentials.h"
#include "proto/hpcq.pb.h"

namespace hpcq::daemon {

// Where a stream's messages go. write() is false once the reader has gone.
template <class Message>
class Sink {
 public:
  virtual ~Sink() = default;
  virtual bool write(const Message& message) = 0;
  virtual bool cancelled() = 0;  // the reader has gone or the server is stopping
};

class Api {
 public:
  explicit Api(Leader& leader) : leader_(leader) {}

  Status submit(const Caller& caller, const v1::SubmitRequest& request,
                v1::SubmitResponse* response);
  Status cancel(const Caller& caller, const v1::CancelRequest& request, v1::CancelResponse*);
  Status get_job(const Caller& caller, const v1::GetJobRequest& request, v1::Job* response);
  Status list_jobs(const Caller& caller, const v1::ListJobsRequest& request,
                   v1::ListJobsResponse* response);
  Status list_nodes(const Caller& caller, const v1::ListNodesRequest& request,
                    v1::ListNodesResponse* response);
  Status list_queues(const Caller& caller, const v1::ListQueuesRequest& request,
                     v1::ListQueuesResponse* response);
  Status list_leaders(const Caller& caller, const v1::ListLeadersRequest& request,
                      v1::ListLeadersResponse* response);
  // Where list_leaders() reads the candidates from (main.cc: the etcd
  // store's election, leadership.h, or this hpcqd alone on SQLite).
  void set_candidates(std::function<Status(v1::ListLeadersResponse*)> candidates) {
    candidates_ = std::move(candidates);
  }
  Status hold(const Caller& caller, const v1::HoldRequest& request, v1::HoldResponse*);
  Status release(const Caller& caller, const v1::ReleaseRequest& request, v1::ReleaseResponse*);
  Status checkpoint(const Caller& caller, const v1::CheckpointRequest& request,
                    v1::CheckpointRecord* response);
  Status resize(const Caller& caller, const v1::ResizeRequest& request, v1::ResizeRecord* response);
  Status drain(const Caller& caller, const v1::DrainRequest& request, v1::DrainResponse*);
  Status resume(const Caller& caller, const v1::ResumeRequest& request, v1::ResumeResponse*);
  Status create_reservation(const Caller& caller, const v1::CreateReservationRequest& request,
                            v1::Reservation* response);
  Status delete_reservation(const Caller& caller, const v1::DeleteReservationRequest& request,
                            v1::DeleteReservationResponse*);
  Status list_reservations(const Caller& caller, const v1::ListReservationsRequest& request,
                           v1::ListReservationsResponse* response);
  Status signal(const Caller& caller, const v1::SignalRequest& request, v1::SignalResponse*);
  Status requeue(const Caller& caller, const v1::RequeueRequest& request, v1::RequeueResponse*);
  Status end_allocation(const Caller& caller, const v1::EndAllocationRequest& request,
                        v1::EndAllocationResponse*);
  Status update(const Caller& caller, const v1::UpdateRequest& request, v1::Job* response);
  Status stat(const Caller& caller, const v1::StatRequest& request, v1::StatResponse* response);
  Status send_input(const Caller& caller, const v1::InputRequest& request, v1::InputResponse*);
  Status launch_step(const Caller& caller, const v1::LaunchStepRequest& request,
                     v1::Step* response);

  Status watch_jobs(const Caller& caller, const v1::WatchJobsRequest& request,
                    Sink<v1::JobEvent>& sink);
  Status watch_output(const Caller& caller, const v1::WatchOutputRequest& request,
                      Sink<v1::OutputChunk>& sink);

 private:
  Leader& leader_;
  std::function<Status(v1::ListLeadersResponse*)> candidates_;
};

}  // namespace hpcq::daemon

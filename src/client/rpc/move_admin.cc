// gRPC implementation of MoveAdmin.
#include "client/rpc/move_admin.h"

#include <grpcpp/grpcpp.h>

#include "meta.grpc.pb.h"
#include "common/rpc/rpc_auth.h"

namespace aquifer::client {
namespace {

namespace pb = ::aquifer::rpc;

// `resp` is read only after the call returned.
Status FromRpc(const grpc::Status& transport, const pb::RpcStatus& status,
               const std::string& address) {
  if (!transport.ok()) {
    return Unavailable("aquifer-meta " + address + ": " + transport.error_message());
  }
  if (status.code() == 0) return OkStatus();
  return Status(CodeFromInt(status.code()), status.message());
}

class GrpcMoveAdmin final : public MoveAdmin {
 public:
  GrpcMoveAdmin(const std::string& address, std::chrono::milliseconds timeout)
      : address_(address), timeout_(timeout) {
    stub_ = pb::MetaService::NewStub(
        NewAuthChannel(address));
  }

  Result<MovesStatus> GetMoves() override {
    pb::GetMovesRequest req;
    pb::GetMovesResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout_);
    grpc::Status t = stub_->GetMoves(&ctx, req, &resp);
    AQ_RETURN_IF_ERROR(FromRpc(t, resp.status(), address_));
    MovesStatus out;
    for (const pb::MoveInfo& info : resp.moves()) {
      MoveEntry e;
      e.id = info.task().id();
      e.kind = info.task().kind();
      e.state = info.state();
      e.pg_width = info.task().pg_width();
      e.pg_index = info.task().pg_index();
      e.position = info.task().position();
      e.from = ServerId(info.task().from_server());
      e.to = ServerId(info.task().to_server());
      e.chunks_done = info.progress().chunks_done();
      e.chunks_total = info.progress().chunks_total();
      e.bytes_done = info.progress().bytes_done();
      e.bytes_total = info.progress().bytes_total();
      e.done = info.progress().done();
      e.error = info.progress().error();
      e.rate_bytes_per_s = info.rate_bytes_per_s();
      out.moves.push_back(std::move(e));
    }
    const pb::MoveSummary& s = resp.summary();
    out.running = s.moves_running();
    out.queued = s.moves_queued();
    out.degraded_pgs = s.degraded_pgs();
    out.waiting_for_server = s.waiting_for_server();
    out.bytes_left = s.bytes_left();
    out.moves_completed = s.moves_completed();
    out.lost_stripes = s.lost_stripes();
    out.lost_files = s.lost_files();
    out.degraded_stripes = s.degraded_stripes();
    out.message = s.message();
    return out;
  }

  Result<ServerAdminReply> DrainServer(ServerId id) override {
    return Admin(&pb::MetaService::Stub::DrainServer, id, false);
  }
  Result<ServerAdminReply> RemoveServer(ServerId id, bool force) override {
    return Admin(&pb::MetaService::Stub::RemoveServer, id, force);
  }

  Status SetRebalancePaused(bool paused) override {
    pb::SetRebalanceRequest req;
    req.set_set_paused(true);
    req.set_paused(paused);
    pb::StatusResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout_);
    grpc::Status t = stub_->SetRebalance(&ctx, req, &resp);
    return FromRpc(t, resp.status(), address_);
  }

 private:
  Result<ServerAdminReply> Admin(
      grpc::Status (pb::MetaService::Stub::*method)(grpc::ClientContext*,
                                                    const pb::ServerAdminRequest&,
                                                    pb::ServerAdminResponse*),
      ServerId id, bool force) {
    pb::ServerAdminRequest req;
    req.set_server_id(id.value());
    req.set_force(force);
    pb::ServerAdminResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout_);
    grpc::Status t = (stub_.get()->*method)(&ctx, req, &resp);
    AQ_RETURN_IF_ERROR(FromRpc(t, resp.status(), address_));
    return ServerAdminReply{resp.positions_held(), resp.moves_scheduled()};
  }

  std::string address_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<pb::MetaService::Stub> stub_;
};

}  // namespace

std::unique_ptr<MoveAdmin> NewGrpcMoveAdmin(const std::string& address,
                                            std::chrono::milliseconds timeout) {
  return std::make_unique<GrpcMoveAdmin>(address, timeout);
}

}  // namespace aquifer::client

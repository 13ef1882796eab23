#include "cli/rpc/meta_admin.h"

#include <grpcpp/grpcpp.h>

#include "meta.grpc.pb.h"

namespace aquifer::cli {

namespace {

Status FromRpc(const grpc::Status& transport, const aquifer::rpc::RpcStatus& app,
               const std::string& what, const std::string& address) {
  if (!transport.ok()) {
    return Unavailable(what + " to metadata server " + address + " failed: " +
                       transport.error_message());
  }
  if (app.code() != 0) {
    return Status(CodeFromInt(app.code()), what + ": " + app.message());
  }
  return OkStatus();
}

}  // namespace

Result<ClusterView> FetchClusterView(const std::string& address,
                                     std::chrono::milliseconds timeout) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto stub = aquifer::rpc::MetaService::NewStub(channel);
  ClusterView view;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout);
    aquifer::rpc::ClusterMapRequest req;
    aquifer::rpc::ClusterMapResponse resp;
    grpc::Status st = stub->GetClusterMap(&ctx, req, &resp);
    AQ_RETURN_IF_ERROR(FromRpc(st, resp.status(), "GetClusterMap", address));
    view.map_version = resp.version();
    for (const auto& s : resp.servers()) {
      ServerView v;
      v.id = ServerId(s.id());
      v.address = s.address();
      v.failure_domain = s.failure_domain();
      v.up = s.up();
      v.capacity_bytes = s.capacity_bytes();
      v.used_bytes = s.used_bytes();
      v.chunk_count = s.chunk_count();
      v.last_heartbeat_ms_ago = s.last_heartbeat_ms_ago();
      view.servers.push_back(std::move(v));
    }
    for (const auto& t : resp.pg_tables()) {
      view.pg_count_by_width[t.width()] += static_cast<uint32_t>(t.pgs_size());
    }
    view.default_k = static_cast<uint32_t>(resp.default_k());
    view.default_m = static_cast<uint32_t>(resp.default_m());
    view.default_unit_bytes = resp.default_unit_bytes();
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout);
    aquifer::rpc::StatFsRequest req;
    aquifer::rpc::StatFsResponse resp;
    grpc::Status st = stub->StatFs(&ctx, req, &resp);
    AQ_RETURN_IF_ERROR(FromRpc(st, resp.status(), "StatFs", address));
    view.total_bytes = resp.total_bytes();
    view.free_bytes = resp.free_bytes();
    view.usable_total_bytes = resp.usable_total_bytes();
    view.usable_free_bytes = resp.usable_free_bytes();
    view.files = resp.files();
  }
  return view;
}

}  // namespace aquifer::cli

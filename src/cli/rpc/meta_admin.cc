#include "cli/rpc/meta_admin.h"

#include <grpcpp/grpcpp.h>

#include "meta.grpc.pb.h"
#include "common/rpc/rpc_auth.h"

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
  auto channel = NewAuthChannel(address);
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
      v.state = s.state();
      v.pg_positions = s.pg_positions();
      v.chunks_scrubbed = s.chunks_scrubbed();
      v.corrupt_found = s.corrupt_found();
      v.corrupt_repaired = s.corrupt_repaired();
      view.servers.push_back(std::move(v));
    }
    for (const auto& t : resp.pg_tables()) {
      view.pg_count_by_width[t.width()] += static_cast<uint32_t>(t.pgs_size());
      for (const auto& pg : t.pgs()) {
        for (uint32_t p : pg.pending()) view.pending_positions += p != 0 ? 1 : 0;
        view.pgs.push_back(PgView{t.width(), {pg.targets().begin(), pg.targets().end()}});
      }
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

Result<MovesView> FetchMoves(const std::string& address, std::chrono::milliseconds timeout) {
  auto stub = aquifer::rpc::MetaService::NewStub(
      NewAuthChannel(address));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  aquifer::rpc::GetMovesRequest req;
  aquifer::rpc::GetMovesResponse resp;
  grpc::Status st = stub->GetMoves(&ctx, req, &resp);
  AQ_RETURN_IF_ERROR(FromRpc(st, resp.status(), "GetMoves", address));
  MovesView v;
  for (const auto& m : resp.moves()) {
    MoveView mv;
    mv.id = m.task().id();
    mv.kind = m.task().kind();
    mv.state = m.state();
    mv.pg_width = m.task().pg_width();
    mv.pg_index = m.task().pg_index();
    mv.position = m.task().position();
    mv.from = ServerId(m.task().from_server());
    mv.to = ServerId(m.task().to_server());
    mv.chunks_done = m.progress().chunks_done();
    mv.chunks_total = m.progress().chunks_total();
    mv.bytes_done = m.progress().bytes_done();
    mv.bytes_total = m.progress().bytes_total();
    mv.done = m.progress().done();
    mv.error = m.progress().error();
    mv.rate_bytes_per_s = m.rate_bytes_per_s();
    mv.eta_ms = m.eta_ms();
    mv.age_ms = m.age_ms();
    v.moves.push_back(std::move(mv));
  }
  for (const auto& d : resp.degraded()) {
    DegradedPgView dv;
    dv.pg_width = d.pg_width();
    dv.pg_index = d.pg_index();
    dv.positions.assign(d.positions().begin(), d.positions().end());
    dv.reason = d.reason();
    v.degraded.push_back(std::move(dv));
  }
  const auto& s = resp.summary();
  v.running = s.moves_running();
  v.queued = s.moves_queued();
  v.degraded_pgs = s.degraded_pgs();
  v.waiting_for_server = s.waiting_for_server();
  v.bytes_left = s.bytes_left();
  v.eta_ms = s.eta_ms();
  v.message = s.message();
  v.max_concurrent_moves = s.max_concurrent_moves();
  v.move_rate_bytes_per_s = s.move_rate_bytes_per_s();
  v.rebalance_paused = s.rebalance_paused();
  v.moves_completed = s.moves_completed();
  static const char* const kKinds[] = {"repair", "drain", "rebalance"};  // MoveKind order
  for (int i = 0; i < s.completed_bytes_size() && i < 3; ++i) {
    v.completed_bytes[kKinds[i]] = s.completed_bytes(i);
  }
  for (int i = 0; i < s.completed_chunks_size() && i < 3; ++i) {
    v.completed_chunks[kKinds[i]] = s.completed_chunks(i);
  }
  v.lost_stripes = s.lost_stripes();
  v.lost_files = s.lost_files();
  v.degraded_stripes = s.degraded_stripes();
  return v;
}

Result<ActivityView> FetchActivity(const std::string& address, uint32_t max_events,
                                   std::chrono::milliseconds timeout) {
  auto stub = aquifer::rpc::MetaService::NewStub(
      NewAuthChannel(address));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  aquifer::rpc::GetActivityRequest req;
  req.set_max_events(max_events);
  aquifer::rpc::GetActivityResponse resp;
  grpc::Status st = stub->GetActivity(&ctx, req, &resp);
  AQ_RETURN_IF_ERROR(FromRpc(st, resp.status(), "GetActivity", address));
  ActivityView v;
  for (const auto& s : resp.sessions()) {
    v.sessions.push_back(
        SessionView{s.id(), s.client_name(), s.idle_ms(), s.inodes(), s.caches()});
  }
  for (const auto& e : resp.events()) {
    v.events.push_back(EventView{e.seq(), e.unix_ms(), e.severity(), e.text()});
  }
  v.http_address = resp.http_address();
  v.started_unix_ms = resp.started_unix_ms();
  return v;
}

namespace {

enum class AdminCall { kDrain, kUndrain, kRemove };

Result<ServerAdminResult> ServerAdmin(const std::string& address, ServerId id, AdminCall call,
                                      bool force, std::chrono::milliseconds timeout) {
  auto stub = aquifer::rpc::MetaService::NewStub(
      NewAuthChannel(address));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  aquifer::rpc::ServerAdminRequest req;
  req.set_server_id(id.value());
  req.set_force(force);
  aquifer::rpc::ServerAdminResponse resp;
  grpc::Status st = call == AdminCall::kRemove    ? stub->RemoveServer(&ctx, req, &resp)
                    : call == AdminCall::kUndrain ? stub->UndrainServer(&ctx, req, &resp)
                                                  : stub->DrainServer(&ctx, req, &resp);
  AQ_RETURN_IF_ERROR(FromRpc(st, resp.status(),
                             call == AdminCall::kRemove    ? "RemoveServer"
                             : call == AdminCall::kUndrain ? "UndrainServer"
                                                           : "DrainServer",
                             address));
  return ServerAdminResult{resp.positions_held(), resp.moves_scheduled(), resp.moves_cancelled()};
}

}  // namespace

Result<ServerAdminResult> DrainServer(const std::string& address, ServerId id,
                                      std::chrono::milliseconds timeout) {
  return ServerAdmin(address, id, AdminCall::kDrain, /*force=*/false, timeout);
}

Result<ServerAdminResult> UndrainServer(const std::string& address, ServerId id,
                                        std::chrono::milliseconds timeout) {
  return ServerAdmin(address, id, AdminCall::kUndrain, /*force=*/false, timeout);
}

Result<ServerAdminResult> RemoveServer(const std::string& address, ServerId id, bool force,
                                       std::chrono::milliseconds timeout) {
  return ServerAdmin(address, id, AdminCall::kRemove, force, timeout);
}

Result<MetaBackupView> BackupMeta(const std::string& address, const std::string& dest_dir,
                                  std::chrono::milliseconds timeout) {
  auto stub = aquifer::rpc::MetaService::NewStub(
      NewAuthChannel(address));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  aquifer::rpc::BackupRequest req;
  req.set_dest_dir(dest_dir);
  aquifer::rpc::BackupResponse resp;
  grpc::Status st = stub->Backup(&ctx, req, &resp);
  AQ_RETURN_IF_ERROR(FromRpc(st, resp.status(), "Backup", address));
  MetaBackupView v;
  v.dir = resp.dest_dir();
  v.files = resp.files();
  v.bytes = resp.bytes();
  v.created_unix_ms = resp.created_unix_ms();
  v.inodes = resp.inodes();
  v.took_ms = resp.took_ms();
  v.same_file_system = resp.same_file_system();
  return v;
}

}  // namespace aquifer::cli

#include "cli/rpc/fsck_rpc.h"

#include <algorithm>
#include <map>
#include <mutex>

#include <grpcpp/grpcpp.h>

#include "data.grpc.pb.h"
#include "meta.grpc.pb.h"
#include "common/rpc/rpc_auth.h"

namespace aquifer::cli {

namespace {

Status FromRpc(const grpc::Status& transport, const aquifer::rpc::RpcStatus& app,
               const std::string& what, const std::string& address) {
  if (!transport.ok()) {
    return Unavailable(what + " to " + address + " failed: " + transport.error_message());
  }
  if (app.code() != 0) return Status(CodeFromInt(app.code()), what + ": " + app.message());
  return OkStatus();
}

FsckAttr FromAttr(const aquifer::rpc::Attr& a) {
  FsckAttr r;
  r.ino = InodeId(a.ino());
  r.mode = a.mode();
  r.size = a.size();
  r.data_version = a.data_version();
  r.k = a.layout().k();
  r.m = a.layout().m();
  r.unit_bytes = a.layout().unit_bytes();
  r.stripes_known = a.stripe_map_known() && a.stripe_map_size() % 3 == 0;
  for (int i = 0; r.stripes_known && i + 2 < a.stripe_map_size(); i += 3) {
    r.stripes.push_back({a.stripe_map(i), a.stripe_map(i + 1), a.stripe_map(i + 2)});
  }
  for (int i = 0; i + 1 < a.abandoned_versions_size(); i += 2) {
    r.abandoned.emplace_back(a.abandoned_versions(i), a.abandoned_versions(i + 1));
  }
  return r;
}

class GrpcFsckRpc final : public FsckRpc {
 public:
  GrpcFsckRpc(const std::string& meta, std::chrono::milliseconds timeout)
      : meta_address_(meta),
        timeout_(timeout),
        meta_(aquifer::rpc::MetaService::NewStub(
            NewAuthChannel(meta))) {}

  Result<std::vector<FsckServer>> Servers() override {
    aquifer::rpc::ClusterMapResponse resp;
    AQ_RETURN_IF_ERROR(GetClusterMap(&resp));
    std::vector<FsckServer> out;
    for (const auto& s : resp.servers()) {
      out.push_back(FsckServer{ServerId(s.id()), s.address(), s.up(), s.state(),
                               s.pg_positions(), s.chunk_count(), s.used_bytes()});
    }
    return out;
  }

  Result<FsckDirPage> ReadDir(InodeId dir, uint64_t cookie) override {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    aquifer::rpc::ReadDirRequest req;
    req.set_ino(dir.value());
    req.set_cookie(cookie);
    req.set_max_entries(1000);
    req.set_plus(true);
    req.mutable_caller()->set_uid(0);  // fsck runs as root: every directory is readable
    aquifer::rpc::ReadDirResponse resp;
    grpc::Status st = meta_->ReadDir(&ctx, req, &resp);
    AQ_RETURN_IF_ERROR(FromRpc(st, resp.status(), "ReadDir", meta_address_));
    FsckDirPage page;
    page.eof = resp.eof();
    for (const auto& e : resp.entries()) {
      FsckDirEntry d;
      d.name = e.name();
      d.cookie = e.cookie();
      d.attr = FromAttr(e.attr());
      d.attr.ino = InodeId(e.ino());
      if (d.attr.mode == 0) d.attr.mode = e.mode();
      page.entries.push_back(std::move(d));
    }
    return page;
  }

  Result<std::optional<FsckAttr>> GetAttr(InodeId ino) override {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    aquifer::rpc::GetAttrRequest req;
    req.set_ino(ino.value());
    aquifer::rpc::AttrResponse resp;
    grpc::Status st = meta_->GetAttr(&ctx, req, &resp);
    Status s = FromRpc(st, resp.status(), "GetAttr", meta_address_);
    if (s.code() == Code::kNotFound) return std::optional<FsckAttr>();
    AQ_RETURN_IF_ERROR(s);
    return std::optional<FsckAttr>(FromAttr(resp.attr()));
  }

  Result<std::vector<FsckGcTask>> PendingGc() override {
    std::vector<FsckGcTask> out;
    uint64_t after = 0;
    while (true) {
      grpc::ClientContext ctx;
      SetDeadline(&ctx);
      aquifer::rpc::ListGcTasksRequest req;
      req.set_after_id(after);
      aquifer::rpc::ListGcTasksResponse resp;
      grpc::Status st = meta_->ListGcTasks(&ctx, req, &resp);
      // A metadata server from before the call: it cannot say, so nothing counts as collected.
      if (st.error_code() == grpc::StatusCode::UNIMPLEMENTED) return out;
      AQ_RETURN_IF_ERROR(FromRpc(st, resp.status(), "ListGcTasks", meta_address_));
      for (const auto& t : resp.tasks()) {
        out.push_back(FsckGcTask{InodeId(t.ino()), t.from_stripe(), t.max_version()});
        after = std::max(after, t.id());
      }
      if (resp.eof() || resp.tasks_size() == 0) return out;
    }
  }

  Status ReportLost(InodeId ino, const std::vector<uint64_t>& stripes) override {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    aquifer::rpc::ReportLostRequest req;
    req.set_ino(ino.value());
    for (uint64_t s : stripes) req.add_stripes(s);
    aquifer::rpc::ReportLostResponse resp;
    grpc::Status st = meta_->ReportLost(&ctx, req, &resp);
    return FromRpc(st, resp.status(), "ReportLost", meta_address_);
  }

  Result<FsckChunkPage> ListChunks(const std::string& address, InodeId after_ino,
                                   uint64_t after_stripe, uint32_t after_position,
                                   uint32_t limit) override {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    aquifer::rpc::ListChunksRequest req;
    req.mutable_after()->set_ino(after_ino.value());
    req.mutable_after()->set_stripe(after_stripe);
    req.mutable_after()->set_position(after_position);
    req.set_limit(limit);
    aquifer::rpc::ListChunksResponse resp;
    grpc::Status st = Data(address)->ListChunks(&ctx, req, &resp);
    AQ_RETURN_IF_ERROR(FromRpc(st, resp.status(), "ListChunks", address));
    FsckChunkPage page;
    page.eof = resp.eof();
    page.chunks.reserve(static_cast<size_t>(resp.chunks_size()));
    for (const auto& c : resp.chunks()) {
      FsckChunk f;
      f.ino = InodeId(c.key().ino());
      f.stripe = c.key().stripe();
      f.position = c.key().position();
      f.version = c.version();
      f.length = c.length();
      f.has_placement = c.has_placement() && c.placement().pg_width() > 0;
      f.pg_width = c.placement().pg_width();
      f.pg_index = c.placement().pg_index();
      f.k = c.placement().k();
      f.m = c.placement().m();
      f.unit_bytes = c.placement().unit_bytes();
      f.stripe_bytes = c.placement().stripe_bytes();
      f.replicated = c.placement().replicated();
      page.chunks.push_back(f);
    }
    return page;
  }

  Result<uint64_t> InodesInUse() override {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    aquifer::rpc::StatFsRequest req;
    aquifer::rpc::StatFsResponse resp;
    grpc::Status st = meta_->StatFs(&ctx, req, &resp);
    AQ_RETURN_IF_ERROR(FromRpc(st, resp.status(), "StatFs", meta_address_));
    return resp.files();
  }

  Result<FsckRestoreFloors> RestoreFloors() override {
    aquifer::rpc::ClusterMapResponse resp;
    AQ_RETURN_IF_ERROR(GetClusterMap(&resp));
    return FsckRestoreFloors{resp.restore_version_floor(), resp.restore_ino_floor()};
  }

  Result<bool> DeletesVersionRanges(const std::string& address) override {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    aquifer::rpc::DataServerInfoRequest req;
    aquifer::rpc::DataServerInfoResponse resp;
    grpc::Status st = Data(address)->Info(&ctx, req, &resp);
    AQ_RETURN_IF_ERROR(FromRpc(st, resp.status(), "Info", address));
    return resp.deletes_version_ranges();
  }

  Result<uint64_t> DeleteChunks(const std::string& address, InodeId ino, uint64_t from_stripe,
                                uint64_t max_version, uint64_t min_version) override {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    aquifer::rpc::DeleteChunksRequest req;
    auto* r = req.add_ranges();
    r->set_ino(ino.value());
    r->set_from_stripe(from_stripe);
    r->set_max_version(max_version);
    r->set_min_version(min_version);
    aquifer::rpc::DeleteChunksResponse resp;
    grpc::Status st = Data(address)->DeleteChunks(&ctx, req, &resp);
    AQ_RETURN_IF_ERROR(FromRpc(st, resp.status(), "DeleteChunks", address));
    return resp.deleted();
  }

 private:
  void SetDeadline(grpc::ClientContext* ctx) const {
    ctx->set_deadline(std::chrono::system_clock::now() + timeout_);
  }
  // The cluster map (servers and restore floors), one GetClusterMap call.
  Status GetClusterMap(aquifer::rpc::ClusterMapResponse* resp) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    aquifer::rpc::ClusterMapRequest req;
    grpc::Status st = meta_->GetClusterMap(&ctx, req, resp);
    return FromRpc(st, resp->status(), "GetClusterMap", meta_address_);
  }
  aquifer::rpc::DataService::Stub* Data(const std::string& address) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& stub = data_[address];
    if (!stub) {
      grpc::ChannelArguments args;
      args.SetMaxReceiveMessageSize(64 << 20);
      stub = aquifer::rpc::DataService::NewStub(NewAuthChannel(address, args));
    }
    return stub.get();
  }

  const std::string meta_address_;
  const std::chrono::milliseconds timeout_;
  std::unique_ptr<aquifer::rpc::MetaService::Stub> meta_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<aquifer::rpc::DataService::Stub>> data_;
};

}  // namespace

std::unique_ptr<FsckRpc> MakeGrpcFsckRpc(const std::string& meta_address,
                                         std::chrono::milliseconds timeout) {
  return std::make_unique<GrpcFsckRpc>(meta_address, timeout);
}

}  // namespace aquifer::cli

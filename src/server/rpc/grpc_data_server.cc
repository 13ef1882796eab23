// gRPC adapter for aquifer-data: DataService handlers and the MetaLink to aquifer-meta.
// Converts between protobuf messages and the core's types; holds no logic of its own.
#include "server/rpc/grpc_data_server.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <grpcpp/grpcpp.h>

#include "aquifer/units.h"
#include "common/logging.h"
#include "data.grpc.pb.h"
#include "meta.grpc.pb.h"

namespace aquifer::server {
namespace {

constexpr uint32_t kMaxListLimit = 10000;
constexpr uint32_t kDefaultListLimit = 1000;
constexpr uint64_t kStreamPieceBytes = 1 * kMiB;

void ToRpc(const Status& s, rpc::RpcStatus* out) {
  out->set_code(static_cast<int32_t>(s.code()));
  if (!s.ok()) out->set_message(s.message());
}

Result<ChunkId> FromRpc(const rpc::ChunkKey& k) {
  if (k.ino() == 0) return InvalidArgument("inode 0 is never valid");
  return ChunkId{InodeId(k.ino()), k.stripe(), k.position()};
}

void ToRpc(const ChunkId& id, rpc::ChunkKey* k) {
  k->set_ino(id.inode.value());
  k->set_stripe(id.stripe);
  k->set_position(id.position);
}

class DataServiceImpl final : public rpc::DataService::Service {
 public:
  explicit DataServiceImpl(DataServer* core) : core_(core) {}

  grpc::Status WriteChunk(grpc::ServerContext*, const rpc::WriteChunkRequest* req,
                          rpc::WriteChunkResponse* resp) override {
    Result<ChunkId> id = FromRpc(req->key());
    if (!id.ok()) return Reply(id.status(), resp);
    return Reply(core_->store().Write(*id, req->version(), req->committed_version(), req->data(),
                                      req->sync()),
                 resp);
  }

  grpc::Status ReadChunk(grpc::ServerContext*, const rpc::ReadChunkRequest* req,
                         rpc::ReadChunkResponse* resp) override {
    Result<ChunkId> id = FromRpc(req->key());
    if (!id.ok()) return Reply(id.status(), resp);
    Result<ChunkReadInfo> r = core_->store().Read(*id, req->max_version(), req->offset(),
                                                  req->length(), resp->mutable_data());
    if (!r.ok()) {
      resp->clear_data();
      return Reply(r.status(), resp);
    }
    resp->set_version(r->version);
    resp->set_chunk_length(r->chunk_length_bytes);
    return Reply(OkStatus(), resp);
  }

  grpc::Status ReadChunkStream(grpc::ServerContext* ctx, const rpc::ReadChunkRequest* req,
                               grpc::ServerWriter<rpc::ReadChunkResponse>* writer) override {
    rpc::ReadChunkResponse resp;
    auto fail = [&](const Status& s) {
      resp.Clear();
      ToRpc(s, resp.mutable_status());
      writer->Write(resp);
      return grpc::Status::OK;
    };
    Result<ChunkId> id = FromRpc(req->key());
    if (!id.ok()) return fail(id.status());
    Result<ChunkReader> reader = core_->store().OpenReader(*id, req->max_version());
    if (!reader.ok()) return fail(reader.status());
    const uint64_t chunk_length = reader->length_bytes();
    const uint64_t offset = req->offset();
    if (offset > chunk_length) return fail(InvalidArgument("offset past chunk end"));
    if (req->length() > UINT64_MAX - offset) return fail(InvalidArgument("offset + length overflows"));
    const uint64_t end =
        req->length() == 0 ? chunk_length : std::min(chunk_length, offset + req->length());
    uint64_t at = offset;
    do {
      const uint64_t n = std::min(kStreamPieceBytes, end - at);
      resp.Clear();
      Status s = reader->Read(at, n, resp.mutable_data());
      if (!s.ok()) return fail(s);
      ToRpc(OkStatus(), resp.mutable_status());
      resp.set_version(reader->version());
      resp.set_chunk_length(chunk_length);
      if (!writer->Write(resp)) return grpc::Status(grpc::StatusCode::CANCELLED, "client gone");
      at += n;
    } while (at < end && !ctx->IsCancelled());
    return grpc::Status::OK;
  }

  grpc::Status DeleteChunks(grpc::ServerContext*, const rpc::DeleteChunksRequest* req,
                            rpc::DeleteChunksResponse* resp) override {
    uint64_t deleted = 0;
    for (const rpc::DeleteRange& r : req->ranges()) {
      if (r.ino() == 0) return Reply(InvalidArgument("inode 0 is never valid"), resp);
    }
    for (const rpc::DeleteRange& r : req->ranges()) {
      Result<uint64_t> n =
          core_->store().DeleteRange(InodeId(r.ino()), r.from_stripe(), r.max_version(), true);
      if (!n.ok()) return Reply(n.status(), resp);
      deleted += *n;
    }
    resp->set_deleted(deleted);
    return Reply(OkStatus(), resp);
  }

  grpc::Status ListChunks(grpc::ServerContext*, const rpc::ListChunksRequest* req,
                          rpc::ListChunksResponse* resp) override {
    const uint32_t limit =
        req->limit() == 0 ? kDefaultListLimit : std::min(req->limit(), kMaxListLimit);
    const ChunkId after{InodeId(req->after().ino()), req->after().stripe(),
                        req->after().position()};
    bool eof = false;
    for (const ChunkListEntry& e : core_->store().List(after, limit, &eof)) {
      rpc::ChunkEntry* out = resp->add_chunks();
      ToRpc(e.id, out->mutable_key());
      out->set_version(e.version);
      out->set_length(e.length_bytes);
    }
    resp->set_eof(eof);
    return Reply(OkStatus(), resp);
  }

  grpc::Status Info(grpc::ServerContext*, const rpc::DataServerInfoRequest*,
                    rpc::DataServerInfoResponse* resp) override {
    const ChunkStoreStats s = core_->store().Stats();
    resp->set_server_id(core_->server_id().value());
    resp->set_capacity_bytes(s.capacity_bytes);
    resp->set_used_bytes(s.used_bytes);
    resp->set_chunk_count(s.chunk_count);
    resp->set_corruptions_found(s.corruptions_found);
    return Reply(OkStatus(), resp);
  }

 private:
  template <class Resp>
  static grpc::Status Reply(const Status& s, Resp* resp) {
    ToRpc(s, resp->mutable_status());
    return grpc::Status::OK;
  }
  DataServer* core_;
};

Status FromRpc(const grpc::Status& g, const rpc::RpcStatus& s, const char* what) {
  if (!g.ok()) return Unavailable(std::string(what) + ": " + g.error_message());
  if (s.code() != 0) return Status(CodeFromInt(s.code()), s.message());
  return OkStatus();
}

class GrpcMetaLink final : public MetaLink {
 public:
  GrpcMetaLink(const std::string& address, uint32_t timeout_ms)
      : stub_(rpc::MetaService::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))),
        timeout_(timeout_ms) {}

  Result<Registration> Register(const RegisterInfo& info) override {
    rpc::RegisterServerRequest req;
    req.set_address(info.address);
    req.set_failure_domain(info.failure_domain);
    req.set_capacity_bytes(info.capacity_bytes);
    req.set_used_bytes(info.used_bytes);
    req.set_server_uuid(info.server_uuid);
    rpc::RegisterServerResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout_);
    const grpc::Status g = stub_->RegisterServer(&ctx, req, &resp);
    AQ_RETURN_IF_ERROR(FromRpc(g, resp.status(), "RegisterServer"));
    if (resp.server_id() == 0) return Internal("meta assigned server id 0");
    return Registration{ServerId(resp.server_id()),
                        std::chrono::milliseconds(resp.heartbeat_interval_ms())};
  }

  Result<std::vector<GcTask>> Heartbeat(const HeartbeatInfo& info) override {
    rpc::HeartbeatRequest req;
    req.set_server_id(info.server_id.value());
    req.set_capacity_bytes(info.capacity_bytes);
    req.set_used_bytes(info.used_bytes);
    req.set_chunk_count(info.chunk_count);
    for (uint64_t id : info.gc_done) req.add_gc_done(id);
    rpc::HeartbeatResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout_);
    const grpc::Status g = stub_->Heartbeat(&ctx, req, &resp);  // before reading resp.status()
    AQ_RETURN_IF_ERROR(FromRpc(g, resp.status(), "Heartbeat"));
    std::vector<GcTask> tasks;
    for (const rpc::GcTask& t : resp.gc()) {
      tasks.push_back({t.id(), InodeId(t.ino()), t.from_stripe(), t.max_version()});
    }
    return tasks;
  }

 private:
  std::unique_ptr<rpc::MetaService::Stub> stub_;
  std::chrono::milliseconds timeout_;
};

Status WritePortFile(const std::string& path, const std::string& address) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Internal("create " + tmp + ": " + std::strerror(errno));
  const std::string line = address + "\n";
  const bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    return Internal("write port file " + path + ": " + std::strerror(errno));
  }
  return OkStatus();
}

}  // namespace

struct GrpcDataServer::Impl {
  std::unique_ptr<DataServer> core;
  std::unique_ptr<DataServiceImpl> service;
  std::unique_ptr<grpc::Server> server;
  std::string address;
  bool shut_down = false;
};

GrpcDataServer::GrpcDataServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GrpcDataServer::~GrpcDataServer() { Shutdown(); }
const std::string& GrpcDataServer::address() const { return impl_->address; }
DataServer& GrpcDataServer::core() { return *impl_->core; }

Result<std::unique_ptr<GrpcDataServer>> GrpcDataServer::Start(const DataServerOptions& options,
                                                              std::unique_ptr<MetaLink> link) {
  auto impl = std::make_unique<Impl>();
  auto core = DataServer::Open(options);
  if (!core.ok()) return core.status();
  impl->core = std::move(*core);
  impl->service = std::make_unique<DataServiceImpl>(impl->core.get());

  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(static_cast<int>(kMaxRpcMessageBytes));
  builder.SetMaxSendMessageSize(static_cast<int>(kMaxRpcMessageBytes));
  builder.RegisterService(impl->service.get());
  impl->server = builder.BuildAndStart();
  if (!impl->server || port == 0) return Unavailable("cannot listen on " + options.listen);
  impl->address = options.listen.substr(0, options.listen.rfind(':')) + ":" + std::to_string(port);
  Logger("data")->info("serving address={} dir={} uuid={}", impl->address, options.dir,
                       impl->core->server_uuid());
  if (!options.port_file.empty()) {
    Status s = WritePortFile(options.port_file, impl->address);
    if (!s.ok()) {
      impl->server->Shutdown();
      return s;
    }
  }
  if (!link) link = NewGrpcMetaLink(options.meta, options.meta_rpc_timeout_ms);
  impl->core->StartMembership(impl->address, std::move(link));
  return std::unique_ptr<GrpcDataServer>(new GrpcDataServer(std::move(impl)));
}

void GrpcDataServer::Shutdown() {
  if (impl_->shut_down) return;
  impl_->shut_down = true;
  impl_->core->StopMembership();
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  impl_->server->Wait();
  Logger("data")->info("stopped address={}", impl_->address);
}

std::unique_ptr<MetaLink> NewGrpcMetaLink(const std::string& address, uint32_t timeout_ms) {
  return std::make_unique<GrpcMetaLink>(address, timeout_ms);
}

}  // namespace aquifer::server

// gRPC adapter for aquifer-data: DataService handlers and the MetaLink to aquifer-meta.
// Converts between protobuf messages and the core's types; holds no logic of its own.
#include "server/rpc/grpc_data_server.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <random>

#include <grpcpp/grpcpp.h>

#include "aquifer/units.h"
#include "common/capability.h"
#include "common/logging.h"
#include "common/port_file.h"
#include "common/rpc/rpc_auth.h"
#include "common/rpc/rpc_metrics.h"
#include "data.grpc.pb.h"
#include "server/data_metrics.h"
#include "server/wire_server.h"
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

// The chunk capability check (docs/design.md "Chunk capabilities"): a call that proved a client
// credential must carry a capability the metadata server signed for this inode, a mode that
// allows `want`, and this credential's id, not yet expired. Cluster-key holders (other servers,
// repair, admin tools, mounts with the cluster key) pass: they hold the key capabilities are
// signed with. Each refusal is counted and logged at most once per 10 s.
std::atomic<uint64_t> capability_refusals{0};

Status CheckCapability(grpc::ServerContext* ctx, const std::string& capability, uint64_t ino,
                       CapabilityMode want) {
  const std::optional<ClientIdentity> who = CallClient(ctx);
  if (!who) return OkStatus();
  const std::optional<ClusterKey> key = ProcessClusterKey();
  // CallClient names a client only when the call's token was checked with the key.
  if (!key) return OkStatus();
  Status s = VerifyCapability(DeriveCapabilityKey(*key), capability, InodeId(ino), want,
                              who->id_hex, std::chrono::system_clock::now());
  if (s.ok()) return s;
  CountChunkOp(want == CapabilityMode::kWrite ? ChunkOp::kWrite : ChunkOp::kRead, ChunkWire::kGrpc,
               s, 0, 0.0);  // aquifer_data_chunk_requests_total{code="permission_denied"}
  const uint64_t total = capability_refusals.fetch_add(1) + 1;
  static LogLimiter limiter;
  if (uint64_t held = 0; limiter.Allow(&held)) {
    Logger("data")->warn(
        "refused chunk {} client={} ino={} peer={} reason={} refused_total={} ({} more since "
        "the last line)",
        want == CapabilityMode::kWrite ? "write" : "read", who->name, ino, ctx->peer(),
        s.message(), total, held);
  }
  return Status(Code::kPermissionDenied,
                "client " + who->name + ": chunk " +
                    (want == CapabilityMode::kWrite ? "write" : "read") + " of inode " +
                    std::to_string(ino) + " refused: " + s.message());
}

// An unset message (pg_width 0) means "no placement" (an older client).
Result<ChunkPlacement> FromRpc(const rpc::ChunkPlacement& p) {
  if (p.pg_width() == 0) return ChunkPlacement{};
  if (p.pg_width() > UINT16_MAX || p.k() > UINT8_MAX || p.m() > UINT8_MAX) {
    return InvalidArgument("placement out of range: pg_width " + std::to_string(p.pg_width()) +
                           ", k " + std::to_string(p.k()) + ", m " + std::to_string(p.m()));
  }
  return ChunkPlacement{static_cast<uint16_t>(p.pg_width()), static_cast<uint8_t>(p.k()),
                        static_cast<uint8_t>(p.m()),         p.pg_index(),
                        p.unit_bytes(),                      p.replicated(),
                        p.stripe_bytes()};
}

void ToRpc(const ChunkPlacement& p, rpc::ChunkPlacement* out) {
  if (!p.known()) return;
  out->set_pg_width(p.pg_width);
  out->set_pg_index(p.pg_index);
  out->set_k(p.k);
  out->set_m(p.m);
  out->set_unit_bytes(p.unit_bytes);
  out->set_stripe_bytes(p.stripe_bytes);
  out->set_replicated(p.replicated);
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

class DataServiceImpl final : public rpc::DataService::Service {
 public:
  explicit DataServiceImpl(DataServer* core) : core_(core) {}

  // The chunk wire's listener, reported by Info (null: not served). Set before serving.
  void SetWire(const WireServer* wire) { wire_ = wire; }

  grpc::Status WriteChunk(grpc::ServerContext* ctx, const rpc::WriteChunkRequest* req,
                          rpc::WriteChunkResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    // A client credential's access is bound into its key (client_credential.h), so a read-only
    // client cannot write a chunk here even though the data server holds no registry.
    if (const std::optional<ClientIdentity> who = CallClient(ctx); who && who->read_only) {
      return Reply(Status(Code::kPermissionDenied,
                          "client " + who->name + " has a read-only credential"),
                   resp);
    }
    if (Status refused = CheckCapability(ctx, req->capability(), req->key().ino(),
                                         CapabilityMode::kWrite);
        !refused.ok()) {
      return Reply(refused, resp);
    }
    const auto start = std::chrono::steady_clock::now();
    Status outcome = [&] {
      Result<ChunkId> id = FromRpc(req->key());
      if (!id.ok()) return id.status();
      Result<ChunkPlacement> placement = FromRpc(req->placement());
      if (!placement.ok()) return placement.status();
      return core_->store().Write(*id, req->version(), req->committed_version(), req->data(),
                                  req->sync(), *placement);
    }();
    CountChunkOp(ChunkOp::kWrite, ChunkWire::kGrpc, outcome,
                 outcome.ok() ? req->data().size() : 0, SecondsSince(start));
    return Reply(outcome, resp);
  }

  grpc::Status ReadChunk(grpc::ServerContext* ctx, const rpc::ReadChunkRequest* req,
                         rpc::ReadChunkResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    if (Status refused = CheckCapability(ctx, req->capability(), req->key().ino(),
                                         CapabilityMode::kRead);
        !refused.ok()) {
      return Reply(refused, resp);
    }
    const auto start = std::chrono::steady_clock::now();
    Result<ChunkId> id = FromRpc(req->key());
    if (!id.ok()) {
      CountChunkOp(ChunkOp::kRead, ChunkWire::kGrpc, id.status(), 0, SecondsSince(start));
      return Reply(id.status(), resp);
    }
    Result<ChunkReadInfo> r = core_->store().Read(*id, req->max_version(), req->offset(),
                                                  req->length(), resp->mutable_data());
    CountChunkOp(ChunkOp::kRead, ChunkWire::kGrpc, r.status(), r.ok() ? resp->data().size() : 0,
                 SecondsSince(start));
    if (!r.ok()) {
      resp->clear_data();
      return Reply(r.status(), resp);
    }
    resp->set_version(r->version);
    resp->set_chunk_length(r->chunk_length_bytes);
    ToRpc(r->placement, resp->mutable_placement());
    return Reply(OkStatus(), resp);
  }

  grpc::Status ReadChunkStream(grpc::ServerContext* ctx, const rpc::ReadChunkRequest* req,
                               grpc::ServerWriter<rpc::ReadChunkResponse>* writer) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    rpc::ReadChunkResponse resp;
    auto fail = [&](const Status& s) {
      resp.Clear();
      ToRpc(s, resp.mutable_status());
      writer->Write(resp);
      return grpc::Status::OK;
    };
    if (Status refused = CheckCapability(ctx, req->capability(), req->key().ino(),
                                         CapabilityMode::kRead);
        !refused.ok()) {
      return fail(refused);
    }
    Result<ChunkId> id = FromRpc(req->key());
    if (!id.ok()) return fail(id.status());
    Result<ChunkReader> reader = core_->store().OpenReader(*id, req->max_version());
    if (!reader.ok()) return fail(reader.status());
    const uint64_t chunk_length = reader->length_bytes();
    if (req->length() > UINT64_MAX - req->offset()) {
      return fail(InvalidArgument("offset + length overflows"));
    }
    // Past the end reads nothing, as ReadChunk (and pread) do.
    const uint64_t offset = std::min<uint64_t>(req->offset(), chunk_length);
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
      ToRpc(reader->placement(), resp.mutable_placement());
      if (!writer->Write(resp)) return grpc::Status(grpc::StatusCode::CANCELLED, "client gone");
      at += n;
    } while (at < end && !ctx->IsCancelled());
    return grpc::Status::OK;
  }

  grpc::Status DeleteChunks(grpc::ServerContext* ctx, const rpc::DeleteChunksRequest* req,
                            rpc::DeleteChunksResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    if (const std::optional<ClientIdentity> who = CallClient(ctx); who) {
      return Reply(Status(Code::kPermissionDenied,
                          "client " + who->name + ": DeleteChunks needs the cluster key"),
                   resp);
    }
    uint64_t deleted = 0;
    for (const rpc::DeleteRange& r : req->ranges()) {
      if (r.ino() == 0) return Reply(InvalidArgument("inode 0 is never valid"), resp);
    }
    for (const rpc::DeleteRange& r : req->ranges()) {
      Result<uint64_t> n = core_->store().DeleteRange(InodeId(r.ino()), r.from_stripe(),
                                                      r.max_version(), true, r.min_version());
      if (!n.ok()) return Reply(n.status(), resp);
      deleted += *n;
    }
    for (const rpc::PgPosition& p : req->pg_positions()) {
      Result<uint64_t> n =
          core_->store().DeletePgPosition(p.pg_width(), p.pg_index(), p.position(), true);
      if (!n.ok()) return Reply(n.status(), resp);
      deleted += *n;
    }
    resp->set_deleted(deleted);
    return Reply(OkStatus(), resp);
  }

  grpc::Status ListChunks(grpc::ServerContext* ctx, const rpc::ListChunksRequest* req,
                          rpc::ListChunksResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    if (const std::optional<ClientIdentity> who = CallClient(ctx); who) {
      return Reply(Status(Code::kPermissionDenied,
                          "client " + who->name + ": ListChunks needs the cluster key"),
                   resp);
    }
    const uint32_t limit =
        req->limit() == 0 ? kDefaultListLimit : std::min(req->limit(), kMaxListLimit);
    const ChunkId after{InodeId(req->after().ino()), req->after().stripe(),
                        req->after().position()};
    bool eof = false;
    const PgFilter pg{req->pg_width(), req->pg_index()};
    for (const ChunkListEntry& e :
         core_->store().List(after, limit, &eof, req->by_pg() ? &pg : nullptr)) {
      rpc::ChunkEntry* out = resp->add_chunks();
      ToRpc(e.id, out->mutable_key());
      out->set_version(e.version);
      out->set_length(e.length_bytes);
      ToRpc(e.placement, out->mutable_placement());
    }
    resp->set_eof(eof);
    return Reply(OkStatus(), resp);
  }

  grpc::Status Info(grpc::ServerContext* ctx, const rpc::DataServerInfoRequest*,
                    rpc::DataServerInfoResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    const ChunkStoreStats s = core_->store().Stats();
    resp->set_server_id(core_->server_id().value());
    resp->set_capacity_bytes(s.capacity_bytes);
    resp->set_used_bytes(s.used_bytes);
    resp->set_chunk_count(s.chunk_count);
    resp->set_corruptions_found(s.corruptions_found);
    const ScrubCounters scrub = core_->scrub_counters();
    resp->set_chunks_scrubbed(scrub.chunks_scrubbed);
    resp->set_corrupt_found(scrub.corrupt_found);
    resp->set_corrupt_repaired(scrub.corrupt_repaired);
    resp->set_chunks_backfilled(scrub.chunks_backfilled);
    resp->set_bytes_backfilled(scrub.bytes_backfilled);
    resp->set_deletes_version_ranges(true);
    if (wire_ != nullptr) {
      resp->set_wire_port(wire_->port());
      resp->set_wire_instance(wire_->instance());
      resp->set_wire_requests(wire_->requests_served());
    }
    return Reply(OkStatus(), resp);
  }

 private:
  template <class Resp>
  static grpc::Status Reply(const Status& s, Resp* resp) {
    ToRpc(s, resp->mutable_status());
    return grpc::Status::OK;
  }
  DataServer* core_;
  const WireServer* wire_ = nullptr;
};

Status FromRpc(const grpc::Status& g, const rpc::RpcStatus& s, const char* what) {
  if (!g.ok()) return Unavailable(std::string(what) + ": " + g.error_message());
  if (s.code() != 0) return Status(CodeFromInt(s.code()), s.message());
  return OkStatus();
}

class GrpcMetaLink final : public MetaLink {
 public:
  GrpcMetaLink(const std::string& address, uint32_t timeout_ms)
      : stub_(rpc::MetaService::NewStub(NewAuthChannel(address, ChannelArgs()))),
        timeout_(timeout_ms) {}

  // Reconnect within a second of aquifer-meta coming back. gRPC's default backoff grows to 120 s
  // while it is down: after a 20-30 s outage the heartbeats resumed ~8 s late, past the restarted
  // server's grace of one heartbeat timeout, so it marked every data server down and writes
  // failed (a tester's finding).
  static grpc::ChannelArguments ChannelArgs() {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, kRpcConnectTimeoutMs);  // connect timeout
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    return args;
  }

  Result<Registration> Register(const RegisterInfo& info) override {
    rpc::RegisterServerRequest req;
    req.set_address(info.address);
    req.set_failure_domain(info.failure_domain);
    req.set_capacity_bytes(info.capacity_bytes);
    req.set_used_bytes(info.used_bytes);
    req.set_server_uuid(info.server_uuid);
    req.set_fs_id(info.fs_id);
    req.set_fs_free_bytes(info.fs_free_bytes);
    rpc::RegisterServerResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout_);
    const grpc::Status g = stub_->RegisterServer(&ctx, req, &resp);
    AQ_RETURN_IF_ERROR(FromRpc(g, resp.status(), "RegisterServer"));
    if (resp.server_id() == 0) return Internal("meta assigned server id 0");
    return Registration{ServerId(resp.server_id()),
                        std::chrono::milliseconds(resp.heartbeat_interval_ms())};
  }

  Result<HeartbeatReply> Heartbeat(const HeartbeatInfo& info) override {
    rpc::HeartbeatRequest req;
    req.set_server_id(info.server_id.value());
    req.set_capacity_bytes(info.capacity_bytes);
    req.set_used_bytes(info.used_bytes);
    req.set_chunk_count(info.chunk_count);
    req.set_fs_id(info.fs_id);
    req.set_fs_free_bytes(info.fs_free_bytes);
    for (uint64_t id : info.gc_done) req.add_gc_done(id);
    for (const MoveProgress& p : info.moves) {
      rpc::MoveProgress* out = req.add_moves();
      out->set_task_id(p.task_id);
      out->set_chunks_done(p.chunks_done);
      out->set_chunks_total(p.chunks_total);
      out->set_bytes_done(p.bytes_done);
      out->set_bytes_total(p.bytes_total);
      out->set_done(p.done);
      out->set_error(p.error);
    }
    for (uint64_t id : info.pg_gc_done) req.add_pg_gc_done(id);
    req.set_chunks_scrubbed(info.scrub.chunks_scrubbed);
    req.set_corrupt_found(info.scrub.corrupt_found);
    req.set_corrupt_repaired(info.scrub.corrupt_repaired);
    req.set_backfills_complete(info.scrub.backfills_complete);
    rpc::HeartbeatResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout_);
    const grpc::Status g = stub_->Heartbeat(&ctx, req, &resp);  // before reading resp.status()
    AQ_RETURN_IF_ERROR(FromRpc(g, resp.status(), "Heartbeat"));
    HeartbeatReply reply;
    for (const rpc::GcTask& t : resp.gc()) {
      reply.gc.push_back({t.id(), InodeId(t.ino()), t.from_stripe(), t.max_version()});
    }
    for (const rpc::MoveTask& t : resp.moves()) {
      reply.moves.push_back({t.id(), t.pg_width(), t.pg_index(), t.position(),
                             ServerId(t.from_server()), ServerId(t.to_server()), t.kind(),
                             t.rate_limit_bytes_per_s(), t.map_version()});
    }
    for (const rpc::PgGcTask& t : resp.pg_gc()) {
      reply.pg_gc.push_back({t.id(), t.pg_width(), t.pg_index(), t.position()});
    }
    reply.state = resp.state();
    reply.map_version = resp.map_version();
    reply.backfill = resp.backfill();
    return reply;
  }

  Result<InodeFacts> GetInode(InodeId ino) override {
    rpc::GetAttrRequest req;
    req.set_ino(ino.value());
    rpc::AttrResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout_);
    const grpc::Status g = stub_->GetAttr(&ctx, req, &resp);
    AQ_RETURN_IF_ERROR(FromRpc(g, resp.status(), "GetAttr"));
    return InodeFacts{resp.attr().size(), resp.attr().layout().k(),
                      resp.attr().layout().unit_bytes()};
  }

  Result<ClusterView> GetClusterMap() override {
    rpc::ClusterMapRequest req;
    rpc::ClusterMapResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout_);
    const grpc::Status g = stub_->GetClusterMap(&ctx, req, &resp);
    AQ_RETURN_IF_ERROR(FromRpc(g, resp.status(), "GetClusterMap"));
    ClusterView view;
    view.version = resp.version();
    for (const rpc::ServerInfo& s : resp.servers()) {
      view.servers[s.id()] =
          PeerInfo{ServerId(s.id()), s.address(), s.up(), s.state(), s.failure_domain()};
    }
    for (const rpc::PgTable& t : resp.pg_tables()) {
      std::vector<PgTargets>& pgs = view.tables[t.width()];
      for (const rpc::PlacementGroup& pg : t.pgs()) {
        PgTargets out;
        for (uint32_t id : pg.targets()) out.targets.push_back(ServerId(id));
        for (uint32_t id : pg.pending()) out.pending.push_back(ServerId(id));
        pgs.push_back(std::move(out));
      }
    }
    return view;
  }

 private:
  std::unique_ptr<rpc::MetaService::Stub> stub_;
  std::chrono::milliseconds timeout_;
};

// Other data servers over gRPC: one channel per address, made on first use.
class GrpcPeerLink final : public PeerLink {
 public:
  explicit GrpcPeerLink(uint32_t timeout_ms) : timeout_(timeout_ms) {}

  Result<std::vector<ChunkListEntry>> ListPg(const std::string& address, uint32_t pg_width,
                                             uint32_t pg_index, const ChunkId& after,
                                             uint32_t limit, bool* eof) override {
    rpc::ListChunksRequest req;
    ToRpc(after, req.mutable_after());
    req.set_limit(limit);
    req.set_by_pg(true);
    req.set_pg_width(pg_width);
    req.set_pg_index(pg_index);
    rpc::ListChunksResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout_);
    const grpc::Status g = Stub(address)->ListChunks(&ctx, req, &resp);
    AQ_RETURN_IF_ERROR(FromRpc(g, resp.status(), "ListChunks"));
    std::vector<ChunkListEntry> out;
    for (const rpc::ChunkEntry& e : resp.chunks()) {
      Result<ChunkPlacement> p = FromRpc(e.placement());
      out.push_back({ChunkId{InodeId(e.key().ino()), e.key().stripe(), e.key().position()},
                     e.version(), e.length(), p.ok() ? *p : ChunkPlacement{}});
    }
    *eof = resp.eof();
    return out;
  }

  Result<PeerChunk> Read(const std::string& address, const ChunkId& id,
                         uint64_t max_version) override {
    rpc::ReadChunkRequest req;
    ToRpc(id, req.mutable_key());
    req.set_max_version(max_version);
    rpc::ReadChunkResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout_);
    const grpc::Status g = Stub(address)->ReadChunk(&ctx, req, &resp);
    AQ_RETURN_IF_ERROR(FromRpc(g, resp.status(), "ReadChunk"));
    Result<ChunkPlacement> p = FromRpc(resp.placement());
    return PeerChunk{resp.version(), std::move(*resp.mutable_data()),
                     p.ok() ? *p : ChunkPlacement{}};
  }

 private:
  rpc::DataService::Stub* Stub(const std::string& address) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& stub = stubs_[address];
    if (!stub) {
      grpc::ChannelArguments args;
      args.SetMaxReceiveMessageSize(static_cast<int>(kMaxRpcMessageBytes));
      args.SetMaxSendMessageSize(static_cast<int>(kMaxRpcMessageBytes));
      stub = rpc::DataService::NewStub(
          NewAuthChannel(address, args));
    }
    return stub.get();
  }
  std::chrono::milliseconds timeout_;
  std::mutex mu_;  // guards stubs_
  std::map<std::string, std::unique_ptr<rpc::DataService::Stub>> stubs_;
};


}  // namespace

struct GrpcDataServer::Impl {
  std::unique_ptr<DataServer> core;
  std::unique_ptr<DataServiceImpl> service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<WireServer> wire;  // null when options.wire is off
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
  if (options.wire) {
    // On the gRPC address's host; the client learns the port from Info.
    std::string host = options.listen.substr(0, options.listen.rfind(':'));
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    std::random_device random;
    const uint64_t instance = (static_cast<uint64_t>(random()) << 32) ^ random();
    Result<std::unique_ptr<WireServer>> wire = WireServer::Start(
        host, static_cast<uint16_t>(options.wire_port), &impl->core->store(), instance,
        options.wire_max_connections);
    if (!wire.ok()) return wire.status();
    impl->wire = std::move(*wire);
    impl->service->SetWire(impl->wire.get());
  }

  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.listen, NewServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(static_cast<int>(kMaxRpcMessageBytes));
  builder.SetMaxSendMessageSize(static_cast<int>(kMaxRpcMessageBytes));
  builder.RegisterService(impl->service.get());
  // The token check first: its verdict is what each handler's CheckCallAuth reads.
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(NewAuthInterceptorFactory("aquifer-data gRPC"));
  for (auto& c : RpcMetricsInterceptors("aquifer_data")) creators.push_back(std::move(c));
  builder.experimental().SetInterceptorCreators(std::move(creators));
  // As in aquifer-meta: with the default MAX_POLLERS (2) the sync server creates and destroys a
  // thread for every request that arrives while two handlers run, which is the common case here
  // (a client writes k+m chunks and reads ahead whole stripes in parallel).
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 2);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 8);
  impl->server = builder.BuildAndStart();
  if (!impl->server || port == 0) return Unavailable("cannot listen on " + options.listen);
  impl->address = options.listen.substr(0, options.listen.rfind(':')) + ":" + std::to_string(port);
  Logger("data")->info("serving address={} wire_port={} dir={} uuid={}", impl->address,
                       impl->wire ? impl->wire->port() : 0, options.dir,
                       impl->core->server_uuid());
  if (!options.port_file.empty()) {
    Status s = WritePortFile(options.port_file, impl->address);
    if (!s.ok()) {
      if (impl->wire) impl->wire->Shutdown();
      impl->server->Shutdown();
      return s;
    }
  }
  if (!link) link = NewGrpcMetaLink(options.meta, options.meta_rpc_timeout_ms);
  // Peer calls move whole chunks (<= 16 MiB): give them a generous deadline.
  impl->core->StartMembership(impl->address, std::move(link),
                              std::make_unique<GrpcPeerLink>(
                                  std::max<uint32_t>(options.meta_rpc_timeout_ms, 30000)));
  return std::unique_ptr<GrpcDataServer>(new GrpcDataServer(std::move(impl)));
}

void GrpcDataServer::Shutdown() {
  if (impl_->shut_down) return;
  impl_->shut_down = true;
  impl_->core->StopMembership();
  if (impl_->wire) impl_->wire->Shutdown();
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  impl_->server->Wait();
  Logger("data")->info("stopped address={}", impl_->address);
}

std::unique_ptr<MetaLink> NewGrpcMetaLink(const std::string& address, uint32_t timeout_ms) {
  return std::make_unique<GrpcMetaLink>(address, timeout_ms);
}

}  // namespace aquifer::server

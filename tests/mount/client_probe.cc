// aquifer_client_probe: one raw gRPC call made with a key file (cluster key or client
// credential), for tests/mount/clients_test.sh to try what a mount never sends: an inode number
// guessed from outside an export, a ".." lookup from an export's root, a chunk write straight to
// a data server, with or without a chunk capability (docs/design.md "Chunk capabilities").
// Prints "code=N message=..." (N: aquifer::Code, or 100 + the gRPC status code when the call
// itself failed) and exits 0 when the call succeeded, 1 when it was refused, 2 on bad usage.
//
//   aquifer_client_probe KEYFILE META_ADDR getattr INO
//   aquifer_client_probe KEYFILE META_ADDR lookup PARENT NAME
//   aquifer_client_probe KEYFILE META_ADDR capability INO r|w
//   aquifer_client_probe KEYFILE DATA_ADDR writechunk INO [META_ADDR CAP_INO r|w]
//   aquifer_client_probe KEYFILE DATA_ADDR readchunk INO [META_ADDR CAP_INO r|w]
//   aquifer_client_probe KEYFILE DATA_ADDR wirehandshake
// wirehandshake connects to the data server's chunk wire (its port from Info) and runs the
// cluster-key handshake with this key: the chunk wire checks no capabilities because only
// cluster-key holders get past it.
// With META_ADDR CAP_INO MODE the chunk call carries the capability GetCapability(CAP_INO,
// MODE) returned; when that call is refused the probe prints "capability code=N ..." and exits
// 1 without calling the data server.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/client_credential.h"
#include "common/rpc/rpc_auth.h"
#include "common/tls.h"
#include "data.grpc.pb.h"
#include "meta.grpc.pb.h"
#include "wire/connection.h"

namespace {

namespace pb = aquifer::rpc;

int Report(const grpc::Status& rpc, const pb::RpcStatus& status) {
  if (!rpc.ok()) {
    std::printf("code=%d message=%s\n", 100 + static_cast<int>(rpc.error_code()),
                rpc.error_message().c_str());
    return 1;
  }
  std::printf("code=%d message=%s\n", status.code(), status.message().c_str());
  return status.code() == 0 ? 0 : 1;
}

std::unique_ptr<grpc::ClientContext> Context() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  return ctx;
}

// The capability the metadata server at `meta` gives this key for `ino`, or the exit code.
int FetchCapability(const std::string& meta, const char* ino, const char* mode,
                    std::string* out) {
  auto stub = pb::MetaService::NewStub(aquifer::NewAuthChannel(meta));
  pb::CapabilityRequest req;
  req.set_ino(std::strtoull(ino, nullptr, 10));
  req.set_write(std::string(mode) == "w");
  pb::CapabilityResponse resp;
  const grpc::Status rpc = stub->GetCapability(Context().get(), req, &resp);
  if (!rpc.ok() || resp.status().code() != 0) {
    std::printf("capability ");
    return Report(rpc, resp.status());
  }
  *out = resp.capability();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5 && !(argc == 4 && std::string(argv[3]) == "wirehandshake")) {
    std::fprintf(stderr, "usage: %s KEYFILE ADDR getattr INO | lookup PARENT NAME | "
                         "capability INO r|w | readchunk|writechunk INO [META_ADDR CAP_INO r|w] | "
                         "wirehandshake\n", argv[0]);
    return 2;
  }
  bool is_client = false;
  if (aquifer::Status st = aquifer::LoadKeyOrCredentialForProcess(argv[1], &is_client);
      !st.ok()) {
    std::fprintf(stderr, "key: %s\n", st.ToString().c_str());
    return 2;
  }
  // TLS as a mount takes it: from $AQUIFER_TLS_CA (tests/mount/lib.sh AQ_TLS=1).
  if (auto tls = aquifer::LoadTlsForProcess(false, {}, /*server=*/false); !tls.ok()) {
    std::fprintf(stderr, "TLS: %s\n", tls.status().ToString().c_str());
    return 2;
  }
  const std::string op = argv[3];
  auto channel = aquifer::NewAuthChannel(argv[2]);
  if (op == "getattr") {
    auto stub = pb::MetaService::NewStub(channel);
    pb::GetAttrRequest req;
    req.set_ino(std::strtoull(argv[4], nullptr, 10));
    pb::AttrResponse resp;
    const grpc::Status rpc = stub->GetAttr(Context().get(), req, &resp);
    const int rc = Report(rpc, resp.status());  // after the call: status() may be replaced
    if (rc == 0) std::printf("ino=%llu\n", static_cast<unsigned long long>(resp.attr().ino()));
    return rc;
  }
  if (op == "lookup" && argc == 6) {
    auto stub = pb::MetaService::NewStub(channel);
    pb::LookupRequest req;
    req.set_parent(std::strtoull(argv[4], nullptr, 10));
    req.set_name(argv[5]);
    pb::AttrResponse resp;
    const grpc::Status rpc = stub->Lookup(Context().get(), req, &resp);
    const int rc = Report(rpc, resp.status());
    if (rc == 0) std::printf("ino=%llu\n", static_cast<unsigned long long>(resp.attr().ino()));
    return rc;
  }
  std::string capability;
  if ((op == "writechunk" || op == "readchunk") && argc == 8) {
    if (const int rc = FetchCapability(argv[5], argv[6], argv[7], &capability); rc != 0) {
      return rc;
    }
    std::printf("capability bytes=%zu\n", capability.size());
  } else if ((op == "writechunk" || op == "readchunk") && argc != 5) {
    std::fprintf(stderr, "usage: %s KEYFILE DATA_ADDR %s INO [META_ADDR CAP_INO r|w]\n",
                 argv[0], op.c_str());
    return 2;
  }
  if (op == "wirehandshake") {
    auto stub = pb::DataService::NewStub(channel);
    pb::DataServerInfoResponse info;
    const grpc::Status rpc = stub->Info(Context().get(), pb::DataServerInfoRequest(), &info);
    if (!rpc.ok() || info.status().code() != 0 || info.wire_port() == 0) {
      std::printf("info ");
      Report(rpc, info.status());
      return 2;  // no wire to try
    }
    const std::string addr = argv[2];
    aquifer::wire::ConnectionPool pool(addr.substr(0, addr.rfind(':')),
                                       static_cast<uint16_t>(info.wire_port()),
                                       info.wire_instance());
    bool reused = false;
    aquifer::Result<aquifer::wire::Conn> fd =
        pool.Acquire(std::chrono::steady_clock::now() + std::chrono::seconds(20), &reused);
    if (!fd.ok()) {
      std::printf("code=%d message=%s\n", static_cast<int>(fd.status().code()),
                  fd.status().message().c_str());
      return 1;
    }
    pool.Release(std::move(*fd));
    std::printf("code=0 message=handshake passed\n");
    return 0;
  }
  if (op == "capability" && argc == 6) {
    std::string cap;
    const int rc = FetchCapability(argv[2], argv[4], argv[5], &cap);
    if (rc == 0) std::printf("code=0 message= bytes=%zu\n", cap.size());
    return rc;
  }
  if (op == "readchunk") {
    auto stub = pb::DataService::NewStub(channel);
    pb::ReadChunkRequest req;
    req.mutable_key()->set_ino(std::strtoull(argv[4], nullptr, 10));
    req.mutable_key()->set_stripe(0);
    req.mutable_key()->set_position(0);
    req.set_capability(capability);
    pb::ReadChunkResponse resp;
    const grpc::Status rpc = stub->ReadChunk(Context().get(), req, &resp);
    return Report(rpc, resp.status());
  }
  if (op == "writechunk") {
    auto stub = pb::DataService::NewStub(channel);
    pb::WriteChunkRequest req;
    req.set_capability(capability);
    req.mutable_key()->set_ino(std::strtoull(argv[4], nullptr, 10));
    req.mutable_key()->set_stripe(0);
    req.mutable_key()->set_position(0);
    req.set_version(1ULL << 40);  // far above any version the test's files reached
    req.set_data(std::string(4096, 'X'));
    pb::ChunkPlacement* p = req.mutable_placement();
    p->set_pg_width(6);
    p->set_k(4);
    p->set_m(2);
    p->set_unit_bytes(1048576);
    p->set_stripe_bytes(4096);
    p->set_replicated(true);
    pb::WriteChunkResponse resp;
    const grpc::Status rpc = stub->WriteChunk(Context().get(), req, &resp);
    return Report(rpc, resp.status());
  }
  std::fprintf(stderr, "unknown operation %s\n", op.c_str());
  return 2;
}

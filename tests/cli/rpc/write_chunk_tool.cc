// Test helper: writes one chunk to a data server through its gRPC WriteChunk, as a client would
// (with a placement), so tests can plant a chunk for an inode that does not exist (an orphan).
//   write_chunk_tool ADDRESS INO STRIPE POSITION VERSION BYTES [PG_WIDTH PG_INDEX K M]
// Exit 0 when the server accepted it; 1 with the error otherwise; 2 on bad usage. The cluster key
// comes from $AQUIFER_KEY_FILE (none when unset).
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/cluster_key.h"
#include "common/rpc/rpc_auth.h"
#include "data.grpc.pb.h"

int main(int argc, char** argv) {
  if (argc != 7 && argc != 11) {
    std::fprintf(stderr,
                 "usage: %s ADDRESS INO STRIPE POSITION VERSION BYTES [PG_WIDTH PG_INDEX K M]\n",
                 argv[0]);
    return 2;
  }
  auto num = [&](int i) { return std::strtoull(argv[i], nullptr, 10); };
  aquifer::rpc::WriteChunkRequest req;
  req.mutable_key()->set_ino(num(2));
  req.mutable_key()->set_stripe(num(3));
  req.mutable_key()->set_position(static_cast<uint32_t>(num(4)));
  req.set_version(num(5));
  req.set_committed_version(num(5));
  const size_t bytes = num(6);
  std::string data(bytes, '\0');
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<char>(i * 31 + 7);
  req.set_data(data);
  req.set_sync(true);
  auto* p = req.mutable_placement();
  p->set_pg_width(argc == 11 ? static_cast<uint32_t>(num(7)) : 6);
  p->set_pg_index(argc == 11 ? static_cast<uint32_t>(num(8)) : 0);
  p->set_k(argc == 11 ? static_cast<uint32_t>(num(9)) : 4);
  p->set_m(argc == 11 ? static_cast<uint32_t>(num(10)) : 2);
  p->set_unit_bytes(1048576);
  p->set_stripe_bytes(bytes);
  p->set_replicated(bytes < 1048576);
  if (aquifer::Status key = aquifer::LoadKeyForProcess(aquifer::KeyFilePath("")); !key.ok()) {
    std::fprintf(stderr, "cluster key: %s\n", key.ToString().c_str());
    return 2;
  }
  auto stub = aquifer::rpc::DataService::NewStub(aquifer::NewAuthChannel(argv[1]));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  aquifer::rpc::WriteChunkResponse resp;
  grpc::Status st = stub->WriteChunk(&ctx, req, &resp);
  if (!st.ok()) {
    std::fprintf(stderr, "WriteChunk to %s failed: %s\n", argv[1], st.error_message().c_str());
    return 1;
  }
  if (resp.status().code() != 0) {
    std::fprintf(stderr, "WriteChunk: code %d: %s\n", resp.status().code(),
                 resp.status().message().c_str());
    return 1;
  }
  std::printf("wrote chunk ino %s stripe %s position %s version %s (%zu bytes) to %s\n", argv[2],
              argv[3], argv[4], argv[5], bytes, argv[1]);
  return 0;
}

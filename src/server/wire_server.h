// WireServer: aquifer-data's chunk wire listener (src/wire/chunk_wire.h; docs/design.md "The
// chunk wire"). Serves ReadChunk and WriteChunk from a ChunkStore over plain TCP, one thread per
// connection, beside the gRPC service that serves everything else.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "aquifer/status.h"
#include "server/chunk_store/chunk_store.h"

namespace aquifer::server {

class WireServer {
 public:
  // Listens on `host`:`port` (port 0 = the kernel chooses) and serves `store`, which must outlive
  // this object. `instance` is the token sent in every hello (DataServerInfoResponse
  // .wire_instance). At most `max_connections` connections are served at once; one more is
  // closed at accept. Errors: kUnavailable when the address cannot be bound;
  // kInvalidArgument for an unparsable host.
  static Result<std::unique_ptr<WireServer>> Start(const std::string& host, uint16_t port,
                                                   ChunkStore* store, uint64_t instance,
                                                   uint32_t max_connections = 1024);

  // Stops accepting, closes every connection (a request in progress finishes its store call;
  // its reply may be lost) and joins the threads. Idempotent.
  void Shutdown();
  ~WireServer();

  uint16_t port() const;      // the bound port
  uint64_t instance() const;  // the hello token

  // Counters since Start, for tests and logs.
  uint64_t connections_accepted() const;
  uint64_t requests_served() const;
  uint64_t frames_rejected() const;  // connections ended by a frame that failed to decode

  struct Impl;

 private:
  explicit WireServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace aquifer::server

// aquifer-data over gRPC: serves proto/data.proto's DataService on the DataServer core and
// registers with aquifer-meta through proto/meta.proto. This header exposes no gRPC type.
#pragma once

#include <memory>
#include <string>

#include "aquifer/status.h"
#include "server/data_server.h"
#include "server/options.h"

namespace aquifer::server {

class GrpcDataServer {
 public:
  // Opens the store, binds options.listen (max message size kMaxRpcMessageBytes), starts
  // serving, writes options.port_file (atomically) when set, then starts membership with
  // aquifer-meta at options.meta (or through `meta_link` when given, e.g. a test fake).
  // Errors: those of DataServer::Open; kUnavailable when the address cannot be bound; kInternal.
  static Result<std::unique_ptr<GrpcDataServer>> Start(
      const DataServerOptions& options, std::unique_ptr<MetaLink> meta_link = nullptr);
  ~GrpcDataServer();  // Shutdown()

  // The bound HOST:PORT (the port the kernel chose when listen had port 0).
  const std::string& address() const;
  DataServer& core();
  // Stops membership, then stops serving (in-flight calls get up to 5 s). Idempotent.
  void Shutdown();

 private:
  struct Impl;
  explicit GrpcDataServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A MetaLink over gRPC to aquifer-meta at `address` (HOST:PORT); each call has `timeout_ms`.
std::unique_ptr<MetaLink> NewGrpcMetaLink(const std::string& address, uint32_t timeout_ms);

}  // namespace aquifer::server

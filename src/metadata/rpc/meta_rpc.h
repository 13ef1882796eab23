// The gRPC edge of aquifer-meta: serves proto/meta.proto's MetaService over a MetadataService.
// The only place in src/metadata that includes generated code.
#pragma once

#include <memory>
#include <string>

#include "aquifer/status.h"
#include "metadata/metadata_service.h"

namespace aquifer::meta {

class MetaRpcServer {
 public:
  // Starts serving `service` (not owned; must outlive the server) at `listen` ("HOST:PORT", port
  // 0 = kernel chooses) with at most `threads` request threads. Errors: kUnavailable when the
  // address cannot be bound.
  static Result<std::unique_ptr<MetaRpcServer>> Start(MetadataService* service,
                                                      const std::string& listen,
                                                      uint32_t threads);
  ~MetaRpcServer();

  // The bound "HOST:PORT".
  const std::string& address() const { return address_; }
  // Stops accepting calls and waits (bounded) for running ones. Idempotent.
  void Shutdown();

 private:
  struct Impl;
  MetaRpcServer() = default;
  std::unique_ptr<Impl> impl_;
  std::string address_;
};

}  // namespace aquifer::meta

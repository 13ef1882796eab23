// The gRPC edge of aquifer-meta: serves proto/meta.proto's MetaService over a MetadataService.
// The only place in src/metadata that includes generated code.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "aquifer/status.h"
#include "metadata/metadata_service.h"

namespace aquifer::meta {

class MetaRpcServer {
 public:
  // Starts serving `service` (not owned; must outlive the server) at `listen` ("HOST:PORT", port
  // 0 = kernel chooses) with at most `threads` gRPC request threads, and, with `wire`, the
  // metadata wire (src/wire/meta_wire.h; one thread per connection) on listen's host at
  // `wire_port` (0 = kernel chooses; OpenSession tells clients the port). `client_registry` is
  // the file of client credentials and exports (rpc/client_gate.h; "" = no client credential
  // is accepted, cluster-key holders only). Chunk capabilities signed for client credentials
  // stay good for `capability_lifetime` (at most common/capability.h kCapabilityLifetime).
  // Errors: kUnavailable when an address cannot be bound.
  static Result<std::unique_ptr<MetaRpcServer>> Start(MetadataService* service,
                                                      const std::string& listen,
                                                      uint32_t threads, bool wire = true,
                                                      uint16_t wire_port = 0,
                                                      const std::string& client_registry = "",
                                                      std::chrono::seconds capability_lifetime =
                                                          std::chrono::seconds(600));
  ~MetaRpcServer();

  // The bound "HOST:PORT".
  const std::string& address() const { return address_; }
  // The metadata wire's bound port (0: not served).
  uint16_t wire_port() const;
  // Calls the metadata wire has answered since Start (the reply may still be in flight).
  uint64_t wire_calls() const;
  // Of those, answers whose write to the connection failed (the peer went, or a shutdown cut
  // the connection before the answer went out).
  uint64_t wire_replies_lost() const;
  // Stops accepting calls and waits (bounded) for running ones. Idempotent.
  void Shutdown();

 private:
  struct Impl;
  MetaRpcServer() = default;
  std::unique_ptr<Impl> impl_;
  std::string address_;
};

}  // namespace aquifer::meta

// gRPC helpers for tests and benchmarks (the only test helpers that see gRPC and generated
// code): a host that serves a test's fake service on loopback, and a DataService stub sized for
// whole chunks.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "data.grpc.pb.h"

namespace aquifer::testing {

// Serves `service` (not owned; it must outlive the host) on 127.0.0.1 with a kernel-chosen port
// from construction until destruction, which shuts the server down without waiting for calls
// in flight (deadline now). ok() is false when the server did not start (then port() is 0).
// address() and port() may be read from any thread.
class ServiceHost {
 public:
  explicit ServiceHost(grpc::Service* service);
  ~ServiceHost();
  ServiceHost(const ServiceHost&) = delete;
  ServiceHost& operator=(const ServiceHost&) = delete;

  bool ok() const { return server_ != nullptr && port_ > 0; }
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

// A DataService stub on its own channel to `address` (HOST:PORT, plaintext) whose send and
// receive message limits are kMaxRpcMessageBytes, so one call can carry a whole chunk.
// Never fails here: a bad or unreachable address shows as an error status on the first call.
std::unique_ptr<rpc::DataService::Stub> NewDataStub(const std::string& address);

}  // namespace aquifer::testing

// Counts every gRPC call a daemon serves, for /metrics (docs/metrics.md):
//   <prefix>_rpc_requests_total{method, code}   counter; code is the reply's RpcStatus code
//                                               ("ok", "not_found", ...; CodeName) or
//                                               "transport" when gRPC itself failed the call
//   <prefix>_rpc_seconds{method}                histogram of handler time, seconds
// `method` is the RPC's name without its service ("Heartbeat"). Installed on a ServerBuilder
// as a gRPC server interceptor (grpcpp/support/server_interceptor.h, an experimental gRPC API
// stable since 1.31); the reply's code is read by protobuf reflection from its `status` field
// (proto/common.proto RpcStatus), so every handler is counted without code of its own.
// Thread-safe: interceptors run on gRPC's threads.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "aquifer/status.h"
#include "common/metrics.h"

namespace aquifer {

// `prefix` e.g. "aquifer_meta", "aquifer_data".
std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
RpcMetricsInterceptors(const std::string& prefix);

// The same counts for calls of one method served another way (the metadata wire). Made once per
// method; Count is two atomic operations and a histogram observation (no map lookup, no
// allocation after a code's first use). Thread-safe.
class RpcMethodMetrics {
 public:
  RpcMethodMetrics(const std::string& prefix, std::string method);
  // One call that took `seconds` and replied `code`.
  void Count(Code code, double seconds);
  // One call gRPC itself failed (code "transport").
  void CountTransportFailure(double seconds);
  // One request that could not be parsed (code "bad_request"; no latency observed).
  void CountBadRequest();

 private:
  static constexpr size_t kCodes = static_cast<size_t>(Code::kDataLoss) + 1;
  prometheus::Family<prometheus::Counter>& requests_;
  std::string method_;
  prometheus::Histogram& latency_;
  std::array<metrics::LazyCounter, kCodes> by_code_;
  metrics::LazyCounter bad_request_, transport_;
};

}  // namespace aquifer

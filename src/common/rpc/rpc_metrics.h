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

#include <memory>
#include <string>
#include <vector>

namespace aquifer {

// `prefix` e.g. "aquifer_meta", "aquifer_data".
std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
RpcMetricsInterceptors(const std::string& prefix);

// The same counts for a call served another way (the metadata wire): one call of `method`
// that took `seconds` and replied `code_name`.
void CountRpc(const std::string& prefix, const std::string& method, const char* code_name,
              double seconds);

}  // namespace aquifer

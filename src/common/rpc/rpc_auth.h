// The cluster key on gRPC (docs/design.md "Cluster identity"): every call carries a fresh token
// (common/cluster_key.h MintToken: HMAC-SHA256 over the method, the time and a nonce, RFC 2104)
// in its metadata, added by a client interceptor; a server interceptor checks it when the call's
// metadata arrives, before the handler is invoked, and each handler's first statement is
// CheckCallAuth, which answers UNAUTHENTICATED unless that check passed. gRPC 1.51 (Debian 12)
// offers no AuthMetadataProcessor on insecure server credentials, and a server interceptor
// cannot end a call itself, hence the two halves.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>

#include <memory>
#include <optional>
#include <string>

#include "common/client_credential.h"
#include "common/cluster_key.h"
#include "common/tls.h"

namespace aquifer {

// A channel to `address` whose calls carry tokens made with `key`; no token when `key` is
// nullopt. With `tls` the transport is TLS (gRPC's SSL credentials with tls->ca_pem() as the
// only roots, and tls->server_name() as the name the server's certificate must carry, whatever
// address is dialled); without, plain TCP. Thread-safe, as any channel.
std::shared_ptr<grpc::Channel> NewAuthChannel(const std::string& address,
                                              const grpc::ChannelArguments& args = {},
                                              std::optional<ClusterKey> key = ProcessClusterKey(),
                                              std::shared_ptr<const Tls> tls = ProcessTls());

// A gRPC server's port credentials: TLS with tls's certificate and key (no client
// certificates: callers prove the cluster key or a credential per call), or insecure without
// `tls`. `tls` must be a server's (Tls::is_server()).
std::shared_ptr<grpc::ServerCredentials> NewServerCredentials(
    std::shared_ptr<const Tls> tls = ProcessTls());

// The server interceptor that checks tokens with `key` (nullopt: every call passes, the open
// mode, warned about once by the caller). A call whose token is missing, malformed, expired or
// made with another key or for another method is marked unauthenticated and counted, with at
// most one warn line per 10 s per server ("<name> refused unauthenticated call peer=...
// method=... reason=... refused_total=N"). Put it first in the server's interceptor list.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> NewAuthInterceptorFactory(
    const std::string& name, std::optional<ClusterKey> key = ProcessClusterKey());

// OK when the auth interceptor passed this call, or when `ctx` is bound to no gRPC call (the
// metadata wire runs the same handlers with a local context, on a connection that passed the
// wire handshake); else UNAUTHENTICATED, which the handler returns at once. Thread-safe.
grpc::Status CheckCallAuth(grpc::ServerContext* ctx);

// A client credential's identity rides under this header beside its token (which is then made
// with the derived key, client_credential.h); a cluster-key holder sends none.
inline constexpr std::string_view kClientHeader = "aq-client";

// Who made a call that CheckCallAuth passed: the client identity its token proved, or nullopt
// for a cluster-key holder (and for the wires' local contexts, and servers without a key).
// Thread-safe.
std::optional<ClientIdentity> CallClient(grpc::ServerContext* ctx);

}  // namespace aquifer

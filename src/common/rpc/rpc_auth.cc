// Call tokens on gRPC channels and their check on servers (rpc_auth.h).
#include "common/rpc/rpc_auth.h"

#include <grpcpp/support/client_interceptor.h>

#include <chrono>
#include <mutex>

#include "common/logging.h"

namespace aquifer {
namespace {

// Set by the server interceptor on a call that passed; a client's own copy is erased first.
// Its value is "1" for a cluster-key holder, else "c" and the client's identity.
constexpr char kVerifiedHeader[] = "aq-auth-verified";

class TokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  TokenInterceptor(const ClusterKey& key, const std::string& client, const char* method)
      : key_(key), client_(client), method_(method == nullptr ? "" : method) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      Result<std::string> token = MintToken(key_, method_, std::chrono::system_clock::now());
      // Without a token (no random bytes) the server refuses the call: UNAUTHENTICATED.
      if (token.ok()) {
        methods->GetSendInitialMetadata()->emplace(std::string(kTokenHeader), *token);
        if (!client_.empty()) {
          methods->GetSendInitialMetadata()->emplace(std::string(kClientHeader), client_);
        }
      }
    }
    methods->Proceed();
  }

 private:
  const ClusterKey key_;  // a copy: a call may outlive its channel
  const std::string client_;  // FormatClientIdentity, or "" for a cluster-key holder
  std::string method_;
};

class TokenInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  TokenInterceptorFactory(const ClusterKey& key, std::string client)
      : key_(key), client_(std::move(client)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override {
    return new TokenInterceptor(key_, client_, info->method());
  }

 private:
  const ClusterKey key_;  // the interceptors of this channel refer to it
  const std::string client_;
};

struct RefusalLog {
  std::string name;
  std::mutex mu;  // guards next_log
  std::chrono::steady_clock::time_point next_log;
  std::atomic<uint64_t> refused{0};
};

class VerifyInterceptor final : public grpc::experimental::Interceptor {
 public:
  VerifyInterceptor(const std::optional<ClusterKey>& key, RefusalLog& log,
                    grpc::experimental::ServerRpcInfo* info)
      : key_(key), log_(log), info_(info) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      auto* metadata = methods->GetRecvInitialMetadata();
      metadata->erase(grpc::string_ref(kVerifiedHeader));
      Status verdict = OkStatus();
      if (key_) {
        const auto it = metadata->find(grpc::string_ref(kTokenHeader.data(), kTokenHeader.size()));
        const char* method = info_->method() == nullptr ? "" : info_->method();
        // A client credential's token is checked with the key derived from the identity it
        // names (client_credential.h), so a forged identity fails the MAC.
        const auto client =
            metadata->find(grpc::string_ref(kClientHeader.data(), kClientHeader.size()));
        ClusterKey key = *key_;
        if (client != metadata->end()) {
          Result<ClientIdentity> who = ParseClientIdentity(
              std::string_view(client->second.data(), client->second.size()));
          if (who.ok()) {
            key = DeriveClientKey(*key_, *who);
            verified_ = "c" + FormatClientIdentity(*who);
          } else {
            verdict = Status(Code::kPermissionDenied, "malformed client identity");
          }
        }
        if (verdict.ok()) {
          verdict = it == metadata->end()
                        ? Status(Code::kPermissionDenied, "no token")
                        : VerifyToken(key, method,
                                      std::string_view(it->second.data(), it->second.size()),
                                      std::chrono::system_clock::now());
        }
        if (!verdict.ok()) LogRefusal(method, verdict.message());
      }
      if (verdict.ok()) {
        metadata->emplace(grpc::string_ref(kVerifiedHeader),
                          grpc::string_ref(verified_.data(), verified_.size()));
      }
    }
    methods->Proceed();
  }

 private:
  void LogRefusal(const char* method, std::string_view reason) {
    const uint64_t count = log_.refused.fetch_add(1) + 1;
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard lock(log_.mu);
    if (now < log_.next_log) return;
    log_.next_log = now + std::chrono::seconds(10);
    const std::string peer =
        info_->server_context() == nullptr ? "?" : info_->server_context()->peer();
    Logger("rpc")->warn("{} refused unauthenticated call peer={} method={} reason={} "
                        "refused_total={}",
                        log_.name, peer, method, reason, count);
  }

  const std::optional<ClusterKey>& key_;
  RefusalLog& log_;
  grpc::experimental::ServerRpcInfo* info_;
  std::string verified_ = "1";  // the verified header's value; lives as long as the call
};

class VerifyInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  VerifyInterceptorFactory(std::string name, std::optional<ClusterKey> key) : key_(key) {
    log_.name = std::move(name);
    if (!key_) {
      Logger("rpc")->warn("{} serves without a cluster key: any process that reaches it is "
                          "served (docs/operations.md \"The cluster key\")",
                          log_.name);
    }
  }
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new VerifyInterceptor(key_, log_, info);
  }

 private:
  const std::optional<ClusterKey> key_;
  RefusalLog log_;
};

}  // namespace

std::shared_ptr<grpc::Channel> NewAuthChannel(const std::string& address,
                                              const grpc::ChannelArguments& given_args,
                                              std::optional<ClusterKey> key,
                                              std::shared_ptr<const Tls> tls) {
  grpc::ChannelArguments args = given_args;
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (tls != nullptr) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = tls->ca_pem();
    credentials = grpc::SslCredentials(ssl);
    args.SetSslTargetNameOverride(tls->server_name());
  }
  if (!key) return grpc::CreateCustomChannel(address, credentials, args);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> creators;
  const std::optional<ClientIdentity> who = ProcessClientIdentity();
  creators.push_back(
      std::make_unique<TokenInterceptorFactory>(*key, who ? FormatClientIdentity(*who) : ""));
  return grpc::experimental::CreateCustomChannelWithInterceptors(address, credentials, args,
                                                                 std::move(creators));
}

std::shared_ptr<grpc::ServerCredentials> NewServerCredentials(std::shared_ptr<const Tls> tls) {
  if (tls == nullptr) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  ssl.pem_key_cert_pairs.push_back({tls->key_pem(), tls->cert_pem()});
  return grpc::SslServerCredentials(ssl);
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> NewAuthInterceptorFactory(
    const std::string& name, std::optional<ClusterKey> key) {
  return std::make_unique<VerifyInterceptorFactory>(name, key);
}

grpc::Status CheckCallAuth(grpc::ServerContext* ctx) {
  // A context bound to no call is the metadata wire's dispatch, whose connection passed the
  // cluster-key handshake (connection.h) before it could send a request.
  if (ctx->c_call() == nullptr) return grpc::Status::OK;
  const auto& metadata = ctx->client_metadata();
  if (metadata.find(grpc::string_ref(kVerifiedHeader)) != metadata.end()) {
    return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "aquifer: no valid cluster-key token on this call");
}

std::optional<ClientIdentity> CallClient(grpc::ServerContext* ctx) {
  if (ctx->c_call() == nullptr) return std::nullopt;
  const auto& metadata = ctx->client_metadata();
  const auto it = metadata.find(grpc::string_ref(kVerifiedHeader));
  if (it == metadata.end() || it->second.size() < 1 || it->second.data()[0] != 'c') {
    return std::nullopt;
  }
  Result<ClientIdentity> who =
      ParseClientIdentity(std::string_view(it->second.data() + 1, it->second.size() - 1));
  if (!who.ok()) return std::nullopt;  // cannot happen: the interceptor wrote a valid one
  return *who;
}

}  // namespace aquifer

#include "common/rpc/rpc_metrics.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <chrono>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <string_view>

#include "aquifer/status.h"
#include "common/metrics.h"

namespace aquifer {
namespace {

struct Families {
  prometheus::Family<prometheus::Counter>* requests;
  prometheus::Family<prometheus::Histogram>* seconds;
};

// One pair of families per prefix, made on first use.
Families& FamiliesOf(const std::string& prefix) {
  static std::mutex mu;
  static auto* all = new std::map<std::string, Families>();
  std::lock_guard lock(mu);
  auto it = all->find(prefix);
  if (it == all->end()) {
    Families f{&metrics::CounterFamily(prefix + "_rpc_requests_total",
                                       "RPCs served, by method and reply code"),
               &metrics::HistogramFamily(prefix + "_rpc_seconds",
                                         "time to serve an RPC, by method, seconds")};
    it = all->emplace(prefix, f).first;
  }
  return it->second;
}

// The reply's RpcStatus code, or -1 when it has none.
int ReplyCode(const void* message) {
  if (message == nullptr) return -1;
  const auto* m = static_cast<const google::protobuf::Message*>(message);
  const auto* field = m->GetDescriptor()->FindFieldByName("status");
  if (field == nullptr || field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
    return -1;
  }
  const google::protobuf::Message& status = m->GetReflection()->GetMessage(*m, field);
  const auto* code = status.GetDescriptor()->FindFieldByName("code");
  if (code == nullptr || code->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_INT32) {
    return -1;
  }
  return status.GetReflection()->GetInt32(status, code);
}

// The RpcMethodMetrics of (prefix, method), made on first use and kept for the process's life.
RpcMethodMetrics& MethodMetrics(const std::string& prefix, std::string_view method) {
  static std::shared_mutex mu;
  static auto* all = new std::map<std::string, std::unique_ptr<RpcMethodMetrics>, std::less<>>();
  std::string key = prefix + "/" + std::string(method);
  {
    std::shared_lock lock(mu);
    auto it = all->find(key);
    if (it != all->end()) return *it->second;
  }
  std::unique_lock lock(mu);
  auto& slot = (*all)[key];
  if (!slot) slot = std::make_unique<RpcMethodMetrics>(prefix, std::string(method));
  return *slot;
}

class MetricsInterceptor : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(const std::string& prefix, const char* full_method)
      : metrics_([&]() -> RpcMethodMetrics& {
          std::string_view m = full_method == nullptr ? "unknown" : full_method;
          const size_t slash = m.rfind('/');
          return MethodMetrics(prefix, slash == std::string_view::npos ? m : m.substr(slash + 1));
        }()),
        start_(std::chrono::steady_clock::now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using H = grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(H::PRE_SEND_MESSAGE)) {
      code_ = ReplyCode(methods->GetSendMessage());
    }
    if (methods->QueryInterceptionHookPoint(H::PRE_SEND_STATUS)) {
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      if (!methods->GetSendStatus().ok()) {
        metrics_.CountTransportFailure(seconds);
      } else {
        metrics_.Count(code_ < 0 ? Code::kOk : CodeFromInt(code_), seconds);
      }
    }
    methods->Proceed();
  }

 private:
  RpcMethodMetrics& metrics_;
  std::chrono::steady_clock::time_point start_;
  int code_ = -1;
};

class MetricsInterceptorFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit MetricsInterceptorFactory(std::string prefix) : prefix_(std::move(prefix)) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new MetricsInterceptor(prefix_, info->method());
  }

 private:
  std::string prefix_;
};

}  // namespace

std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
RpcMetricsInterceptors(const std::string& prefix) {
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> out;
  out.push_back(std::make_unique<MetricsInterceptorFactory>(prefix));
  return out;
}

RpcMethodMetrics::RpcMethodMetrics(const std::string& prefix, std::string method)
    : requests_(*FamiliesOf(prefix).requests),
      method_(std::move(method)),
      latency_(FamiliesOf(prefix).seconds->Add({{"method", method_}}, metrics::LatencyBuckets())) {
}

void RpcMethodMetrics::Count(Code code, double seconds) {
  by_code_[std::min(static_cast<size_t>(code), kCodes - 1)]
      .Get(requests_, [&] { return metrics::Labels{{"method", method_}, {"code", CodeName(code)}}; })
      .Increment();
  latency_.Observe(seconds);
}

void RpcMethodMetrics::CountTransportFailure(double seconds) {
  transport_.Get(requests_, [&] { return metrics::Labels{{"method", method_}, {"code", "transport"}}; })
      .Increment();
  latency_.Observe(seconds);
}

void RpcMethodMetrics::CountBadRequest() {
  bad_request_
      .Get(requests_, [&] { return metrics::Labels{{"method", method_}, {"code", "bad_request"}}; })
      .Increment();
}

}  // namespace aquifer

#include "common/rpc/rpc_metrics.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <chrono>
#include <map>
#include <mutex>

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

class MetricsInterceptor : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(const std::string& prefix, const char* full_method)
      : families_(FamiliesOf(prefix)), start_(std::chrono::steady_clock::now()) {
    std::string_view m = full_method == nullptr ? "unknown" : full_method;
    const size_t slash = m.rfind('/');
    method_ = std::string(slash == std::string_view::npos ? m : m.substr(slash + 1));
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using H = grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(H::PRE_SEND_MESSAGE)) {
      code_ = ReplyCode(methods->GetSendMessage());
    }
    if (methods->QueryInterceptionHookPoint(H::PRE_SEND_STATUS)) {
      const bool transport_ok = methods->GetSendStatus().ok();
      const char* name = !transport_ok ? "transport"
                         : code_ < 0   ? "ok"
                                       : CodeName(CodeFromInt(code_));
      families_.requests->Add({{"method", method_}, {"code", name}}).Increment();
      families_.seconds->Add({{"method", method_}}, metrics::LatencyBuckets())
          .Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start_)
                       .count());
    }
    methods->Proceed();
  }

 private:
  Families& families_;
  std::string method_;
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

void CountRpc(const std::string& prefix, const std::string& method, const char* code_name,
              double seconds) {
  Families& f = FamiliesOf(prefix);
  f.requests->Add({{"method", method}, {"code", code_name}}).Increment();
  f.seconds->Add({{"method", method}}, metrics::LatencyBuckets()).Observe(seconds);
}

}  // namespace aquifer

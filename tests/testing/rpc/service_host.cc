#include "testing/rpc/service_host.h"

#include <chrono>

#include "aquifer/units.h"

namespace aquifer::testing {

ServiceHost::ServiceHost(grpc::Service* service) {
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
  b.RegisterService(service);
  server_ = b.BuildAndStart();
}

ServiceHost::~ServiceHost() {
  if (server_) server_->Shutdown(std::chrono::system_clock::now());
}

std::unique_ptr<rpc::DataService::Stub> NewDataStub(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(kMaxRpcMessageBytes));
  args.SetMaxSendMessageSize(static_cast<int>(kMaxRpcMessageBytes));
  return rpc::DataService::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

}  // namespace aquifer::testing

// The cluster key against real aquifer-meta and aquifer-data processes (ProcessCluster makes a
// key and gives it to both): every gRPC method of both services refuses a call with no token or
// a token made with another key (UNAUTHENTICATED, before its handler runs), and the metadata wire
// and the chunk wire refuse a handshake with a wrong key or none, while the right key works on
// all three.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <fstream>
#include <future>
#include <regex>

#include <httplib.h>

#include <gtest/gtest.h>

#include "common/cluster_key.h"
#include "common/rpc/rpc_auth.h"
#include "common/tls.h"
#include "data.grpc.pb.h"
#include "meta.grpc.pb.h"
#include "testing/cluster_fixture.h"
#include "wire/connection.h"

namespace aquifer::testing {
namespace {

namespace pb = ::aquifer::rpc;

ClusterKey WrongKey() {
  ClusterKey k;
  k.bytes.fill(std::byte{7});
  return k;
}

// Calls `method` ("/aquifer.rpc.MetaService/Lookup") with an empty request; its status.
// `forge`: also sends the header the server's auth interceptor sets on a call that passed
// ("aq-auth-verified"), as a client trying to skip the check would.
grpc::Status CallEmpty(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                       bool forge = false) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  if (forge) ctx.AddMetadata("aq-auth-verified", "1");
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Slice empty("");  // an empty message: a default ByteBuffer is no message at all
  grpc::ByteBuffer request(&empty, 1), response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  return done.get_future().get();
}

std::vector<std::string> MethodsOf(const std::string& service) {
  const auto* d =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service);
  std::vector<std::string> out;
  for (int i = 0; d != nullptr && i < d->method_count(); ++i) {
    out.push_back("/" + service + "/" + d->method(i)->name());
  }
  return out;
}

class AuthClusterTest : public ProcessClusterTest {};

TEST_F(AuthClusterTest, EveryMethodAndBothWiresRefuseAWrongKeyOrNone) {
  StartCluster({.data_servers = 2, .k = 1, .m = 1});
  ASSERT_FALSE(cluster_->key_file().empty());
  const std::string meta = cluster_->meta_address();
  const std::string data = cluster_->data_address(0);
  struct Endpoint {
    std::string address;
    std::string service;
    size_t methods;  // at least
  } endpoints[] = {{meta, "aquifer.rpc.MetaService", 40}, {data, "aquifer.rpc.DataService", 6}};
  struct Caller {
    const char* name;
    std::optional<ClusterKey> key;
    bool forge = false;
  } refused[] = {{"no key", std::nullopt},
                 {"wrong key", WrongKey()},
                 {"no key, forged 'verified' header", std::nullopt, true},
                 {"wrong key, forged 'verified' header", WrongKey(), true}};
  for (const Endpoint& e : endpoints) {
    const std::vector<std::string> methods = MethodsOf(e.service);
    ASSERT_GE(methods.size(), e.methods) << e.service;
    for (const Caller& c : refused) {
      auto channel = NewAuthChannel(e.address, {}, c.key);
      for (const std::string& m : methods) {
        const grpc::Status s = CallEmpty(channel, m, c.forge);
        EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED)
            << c.name << " " << m << ": " << s.error_code() << " " << s.error_message();
      }
    }
  }

  // The right key: the cluster's own calls and the wires work.
  const std::optional<ClusterKey> key = ProcessClusterKey();
  ASSERT_TRUE(key.has_value());
  auto data_stub = pb::DataService::NewStub(NewAuthChannel(data, {}, key));
  grpc::ClientContext info_ctx;
  pb::DataServerInfoResponse info;
  ASSERT_TRUE(data_stub->Info(&info_ctx, pb::DataServerInfoRequest(), &info).ok());
  ASSERT_GT(info.wire_port(), 0u);
  auto meta_stub = pb::MetaService::NewStub(NewAuthChannel(meta, {}, key));
  grpc::ClientContext session_ctx;
  pb::OpenSessionRequest open;
  open.set_client_name("auth-test");
  pb::OpenSessionResponse session;
  ASSERT_TRUE(meta_stub->OpenSession(&session_ctx, open, &session).ok());
  ASSERT_GT(session.wire_port(), 0u);

  struct Wire {
    const char* name;
    uint16_t port;
    uint64_t instance;
  } wires[] = {{"chunk wire", static_cast<uint16_t>(info.wire_port()), info.wire_instance()},
               {"metadata wire", static_cast<uint16_t>(session.wire_port()),
                session.wire_instance()}};
  const auto soon = [] { return std::chrono::steady_clock::now() + std::chrono::seconds(10); };
  for (const Wire& w : wires) {
    bool reused = false;
    for (const Caller& c : refused) {
      wire::ConnectionPool pool("127.0.0.1", w.port, w.instance, 1, c.key);
      Result<wire::Conn> fd = pool.Acquire(soon(), &reused);
      EXPECT_FALSE(fd.ok()) << w.name << " " << c.name;
    }
    wire::ConnectionPool pool("127.0.0.1", w.port, w.instance, 1, key);
    Result<wire::Conn> fd = pool.Acquire(soon(), &reused);
    ASSERT_TRUE(fd.ok()) << w.name << ": " << fd.status().ToString();
    pool.Release(std::move(*fd));
  }

  // And the client library end to end, with the process's key.
  Result<std::unique_ptr<Client>> client = cluster_->NewClient();
  ASSERT_TRUE(client.ok()) << client.status().ToString();
}

// TLS (common/tls.h) on every port of real daemons: the client library's metadata calls and
// chunk I/O work over TLS on the wires and on gRPC alone; a client without TLS, or trusting
// another CA, gets nothing from any port; the cluster key is still checked inside TLS.
class TlsClusterTest : public ProcessClusterTest {};

TEST_F(TlsClusterTest, EveryPortServesOnlyOverTlsAndDataCrossesItWhole) {
  ScratchDir scratch("aq-tls-cluster");
  ASSERT_TRUE(scratch.ok());
  // Every data server serves /metrics and writes its port to the same file: the last one's
  // stays, and each server holds a chunk of every stripe (k + m = 3 servers), so any one's
  // counters show which wire the chunks crossed.
  const std::string http_port_file = scratch.path() + "/data.http";
  StartCluster({.data_servers = 3,
                .k = 2,
                .m = 1,
                .data_flags = {"--http-listen", "127.0.0.1:0", "--http-port-file",
                               http_port_file},
                .tls = true});
  const std::shared_ptr<const Tls> tls = ProcessTls();
  ASSERT_NE(tls, nullptr);
  for (const bool wires : {true, false}) {
    SCOPED_TRACE(wires ? "wires" : "gRPC only");
    ClientOptions options;
    options.data_wire = wires;
    options.meta_wire = wires;
    std::unique_ptr<Client> client = NewClient(options);
    ASSERT_TRUE(client);
    const std::string big = RandomBytes(5 * kMiB + 123, wires ? 1 : 2);
    const std::string name = wires ? "/over-wires" : "/over-grpc";
    ASSERT_TRUE(client->WriteFile(name, big, Caller{}).ok());
    ASSERT_TRUE(client->WriteFile(name + ".small", "tiny", Caller{}).ok());
    Result<std::string> back = client->ReadFile(name, Caller{});
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_TRUE(*back == big);
    EXPECT_EQ(*client->ReadFile(name + ".small", Caller{}), "tiny");
  }
  // The chunks of the first round crossed the chunk wire (inside TLS), not a gRPC fallback.
  std::string http_address;
  std::ifstream(http_port_file) >> http_address;
  httplib::Client http("http://" + http_address);
  httplib::Result metrics = http.Get("/metrics");
  ASSERT_TRUE(metrics && metrics->status == 200) << http_address;
  std::regex wire_writes(
      R"re(aquifer_data_chunk_requests_total\{code="ok",op="write",wire="chunk_wire"\} ([0-9.e+]+))re");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(metrics->body, m, wire_writes)) << metrics->body;
  EXPECT_GT(std::stod(m[1]), 0) << m[0];

  // The data server's Info names its wire port; both wires and both gRPC ports refuse a plain
  // client and a client of another CA, and take the right one.
  auto data_stub = pb::DataService::NewStub(NewAuthChannel(cluster_->data_address(0)));
  grpc::ClientContext info_ctx;
  info_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  pb::DataServerInfoResponse info;
  ASSERT_TRUE(data_stub->Info(&info_ctx, pb::DataServerInfoRequest(), &info).ok());
  ASSERT_GT(info.wire_port(), 0u);
  ScratchDir other("aq-tls-other");
  ASSERT_TRUE(WriteNewTlsFiles(other.path() + "/ca", kDefaultTlsServerName).ok());
  Result<std::shared_ptr<const Tls>> other_ca =
      Tls::Load({.ca_file = other.path() + "/ca/ca.pem"}, false);
  ASSERT_TRUE(other_ca.ok());
  const std::optional<ClusterKey> key = ProcessClusterKey();
  for (const std::string& address : {cluster_->meta_address(), cluster_->data_address(0)}) {
    for (const std::shared_ptr<const Tls>& wrong : {std::shared_ptr<const Tls>(), *other_ca}) {
      auto channel = NewAuthChannel(address, {}, key, wrong);
      const grpc::Status s = CallEmpty(channel, "/aquifer.rpc.DataService/Info");
      EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE)
          << address << (wrong ? " other CA" : " plain") << ": " << s.error_message();
    }
  }
  const auto soon = [] { return std::chrono::steady_clock::now() + std::chrono::seconds(3); };
  bool reused = false;
  wire::ConnectionPool plain("127.0.0.1", static_cast<uint16_t>(info.wire_port()),
                             info.wire_instance(), 1, key, nullptr);
  EXPECT_FALSE(plain.Acquire(soon(), &reused).ok());
  wire::ConnectionPool untrusting("127.0.0.1", static_cast<uint16_t>(info.wire_port()),
                                  info.wire_instance(), 1, key, *other_ca);
  EXPECT_FALSE(untrusting.Acquire(soon(), &reused).ok());
  wire::ConnectionPool wrong_key("127.0.0.1", static_cast<uint16_t>(info.wire_port()),
                                 info.wire_instance(), 1, WrongKey(), tls);
  EXPECT_FALSE(wrong_key.Acquire(soon(), &reused).ok());
  wire::ConnectionPool right("127.0.0.1", static_cast<uint16_t>(info.wire_port()),
                             info.wire_instance(), 1, key, tls);
  Result<wire::Conn> conn = right.Acquire(soon(), &reused);
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  EXPECT_NE(conn->ssl(), nullptr);
}

}  // namespace
}  // namespace aquifer::testing

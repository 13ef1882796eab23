// The gRPC MetaClient across a metadata server outage (docs/design.md "Metadata server
// restarts"): calls made while aquifer-meta is down complete once a server listens again on its
// address, within the client's outage budget; past the budget they fail with kUnavailable
// instead of hanging; and requests that change something carry a RequestTag (the session, an id
// never used twice, retry set on every re-send of the same request) so that the server can
// answer a re-send from what the first attempt did.
#include <fcntl.h>
#include <sys/stat.h>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "client/rpc/meta_client.h"
#include "meta.grpc.pb.h"
#include "metadata/metadata_service.h"
#include "metadata/namespace_store.h"
#include "metadata/rpc/meta_rpc.h"

namespace aquifer::client {
namespace {

namespace pb = ::aquifer::rpc;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

const Caller kRoot{};

std::string PortOf(const std::string& address) { return address.substr(address.rfind(':') + 1); }

// --- against the real metadata service, restarted on the same address ------------------------

class MetaOutageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<meta::MetadataService>> svc =
        meta::MetadataService::Open(meta::NewMemoryStore(), {});
    ASSERT_TRUE(svc.ok()) << svc.status().ToString();
    service_ = std::move(*svc);
    StartServer("127.0.0.1:0");
    address_ = server_->address();
  }
  // Serves the same service (so the same namespace and sessions: what a restart that persists
  // its state brings back) at `listen`.
  void StartServer(const std::string& listen) {
    Result<std::unique_ptr<meta::MetaRpcServer>> s =
        meta::MetaRpcServer::Start(service_.get(), listen, 8, /*wire=*/true);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
  }
  void StopServer() {
    server_->Shutdown();
    server_.reset();
  }

  std::unique_ptr<meta::MetadataService> service_;
  std::unique_ptr<meta::MetaRpcServer> server_;
  std::string address_;
};

// A restart longer than one RPC timeout (here 300 ms against a 1.5 s outage) is a pause: a
// namespace change (tagged, not otherwise safe to repeat) and a lookup made while the server is
// down both complete once it listens again on its address, over gRPC and with the metadata wire
// (whose old port is gone after the restart). Before the outage budget, each would have failed
// with kUnavailable after 300 ms.
TEST_F(MetaOutageTest, CallsMadeWhileTheServerIsDownCompleteOnceItIsBack) {
  const milliseconds outage(1500);
  for (const bool wire : {false, true}) {
    SCOPED_TRACE(wire ? "metadata wire" : "gRPC");
    auto c = NewGrpcMetaClient(address_, milliseconds(300), milliseconds(0), wire,
                               /*outage_wait=*/milliseconds(20000));
    ASSERT_TRUE(c->OpenSession("outage").ok());
    const std::string dir = wire ? "w" : "g";
    ASSERT_TRUE(c->Mkdir(kRootInode, dir, 0755, kRoot).ok());

    StopServer();
    const auto stopped = Clock::now();
    // The server stays down for `outage` (the scenario, not a wait for a condition), then comes
    // back on the same port.
    std::thread restarter([&] {
      std::this_thread::sleep_for(outage);
      StartServer("127.0.0.1:" + PortOf(address_));
    });
    auto mkdir = std::async(std::launch::async, [&] {
      return c->Mkdir(kRootInode, dir + "-during", 0755, kRoot);
    });
    Result<Attributes> looked = c->Lookup(kRootInode, dir, kRoot);
    Result<Attributes> made = mkdir.get();
    const auto took = Clock::now() - stopped;
    restarter.join();
    ASSERT_TRUE(server_);
    ASSERT_TRUE(looked.ok()) << looked.status().ToString();
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    EXPECT_GE(took, outage);  // they did wait for the server
    EXPECT_LT(took, outage + milliseconds(5000));
    // The change was made once: it is there, and making it again is refused.
    Result<Attributes> during = c->Lookup(kRootInode, dir + "-during", kRoot);
    ASSERT_TRUE(during.ok()) << during.status().ToString();
    EXPECT_EQ(during->inode, made->inode);
    EXPECT_EQ(c->Mkdir(kRootInode, dir + "-during", 0755, kRoot).status().code(),
              Code::kAlreadyExists);
  }
}

// With no server at all, a call gives up when the outage budget (1 s) is spent, with
// kUnavailable, though the RPC timeout (15 s) is longer: each attempt's deadline is what is
// left of the budget.
TEST_F(MetaOutageTest, CallsFailWithUnavailableWhenTheBudgetIsSpent) {
  auto c = NewGrpcMetaClient(address_, milliseconds(15000), milliseconds(0), /*use_wire=*/true,
                             /*outage_wait=*/milliseconds(1000));
  ASSERT_TRUE(c->OpenSession("budget").ok());
  StopServer();
  for (const bool change : {false, true}) {
    SCOPED_TRACE(change ? "mkdir (tagged)" : "lookup (safe to repeat)");
    const auto start = Clock::now();
    Status s = change ? c->Mkdir(kRootInode, "x", 0755, kRoot).status()
                      : c->Lookup(kRootInode, "x", kRoot).status();
    const auto took = Clock::now() - start;
    EXPECT_EQ(s.code(), Code::kUnavailable) << s.ToString();
    EXPECT_GE(took, milliseconds(900));
    EXPECT_LT(took, milliseconds(4000));
  }
}

// Before any session (what Client::Connect does first: a mount pointed at a dead server), a
// call has one RPC timeout (300 ms), not the outage budget (20 s).
TEST_F(MetaOutageTest, ACallBeforeTheFirstSessionHasOneTimeout) {
  StopServer();
  auto c = NewGrpcMetaClient(address_, milliseconds(300), milliseconds(0), false,
                             /*outage_wait=*/milliseconds(20000));
  const auto start = Clock::now();
  Result<SessionInfo> session = c->OpenSession("no-server");
  EXPECT_EQ(session.status().code(), Code::kUnavailable) << session.status().ToString();
  EXPECT_LT(Clock::now() - start, milliseconds(3000));
}

// --- tags, seen by a stub metadata service that drops first attempts -------------------------

// One request as the stub received it.
struct Seen {
  std::string method;
  bool has_tag = false;
  uint64_t session = 0, id = 0;
  bool retry = false;
};

// Answers OpenSession with sessions 77, 78, ...; every tagged request is refused with UNAVAILABLE
// (as a connection broken by a dying server is reported) the first time its id is seen, then
// answered OK; an untagged request is always refused so. Records every request it receives.
class DroppingMetaService final : public pb::MetaService::Service {
 public:
  grpc::Status OpenSession(grpc::ServerContext*, const pb::OpenSessionRequest*,
                           pb::OpenSessionResponse* resp) override {
    std::lock_guard lock(mu_);
    resp->set_session(next_session_++);
    resp->set_lease_ttl_ms(30000);
    return grpc::Status::OK;
  }
  grpc::Status CloseSession(grpc::ServerContext*, const pb::SessionRequest*,
                            pb::StatusResponse*) override {
    return grpc::Status::OK;
  }
  grpc::Status Mkdir(grpc::ServerContext*, const pb::MkdirRequest* req,
                     pb::AttrResponse* resp) override {
    resp->mutable_attr()->set_ino(2);
    resp->mutable_attr()->set_mode(S_IFDIR | 0755);
    return Note("Mkdir", *req);
  }
  grpc::Status Unlink(grpc::ServerContext*, const pb::RemoveRequest* req,
                      pb::RemoveResponse*) override {
    return Note("Unlink", *req);
  }
  grpc::Status Commit(grpc::ServerContext*, const pb::CommitRequest* req,
                      pb::CommitResponse*) override {
    return Note("Commit", *req);
  }
  grpc::Status ReleaseBatch(grpc::ServerContext*, const pb::ReleaseBatchRequest* req,
                            pb::ReleaseBatchResponse* resp) override {
    for (int i = 0; i < req->items_size(); ++i) resp->add_results();
    return Note("ReleaseBatch", *req);
  }
  grpc::Status SetLock(grpc::ServerContext*, const pb::LockRequest* req,
                       pb::LockResponse*) override {
    return Note("SetLock", *req);
  }
  grpc::Status Open(grpc::ServerContext*, const pb::OpenRequest* req,
                    pb::OpenResponse*) override {
    return Note("Open", *req);
  }

  std::vector<Seen> seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }
  void clear() {
    std::lock_guard lock(mu_);
    seen_.clear();
  }

 private:
  template <class Req>
  grpc::Status Note(const std::string& method, const Req& req) {
    std::lock_guard lock(mu_);
    seen_.push_back({method, req.has_tag(), req.tag().session(), req.tag().id(), req.tag().retry()});
    // The second attempt of an id is answered.
    if (req.has_tag() && !seen_ids_.insert(req.tag().id()).second) return grpc::Status::OK;
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "dropped by the test");
  }

  std::mutex mu_;  // guards everything below
  uint64_t next_session_ = 77;
  std::vector<Seen> seen_;
  std::set<uint64_t> seen_ids_;  // tag ids received at least once
};

class MetaTagTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_TRUE(server_);
    ASSERT_NE(port, 0);
    client_ = NewGrpcMetaClient("127.0.0.1:" + std::to_string(port), milliseconds(5000),
                                milliseconds(0), false, /*outage_wait=*/milliseconds(10000));
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }

  DroppingMetaService service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetaClient> client_;
};

// Every kind of change carries the client's session and a fresh id, rising from call to call
// (a ReleaseBatch of n items takes n ids: the server names item i's change id + i); the re-send
// after the dropped first attempt is the same request (same id) with retry set, and the call
// then succeeds. The session is the client's latest (78 after a second OpenSession), not the
// request's own session field.
TEST_F(MetaTagTest, ChangesCarryTheSessionAndRisingIdsAndReSendsSetRetry) {
  Result<SessionInfo> first = client_->OpenSession("tags");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(first->id.value(), 77u);
  Result<SessionInfo> second = client_->OpenSession("tags");
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  ASSERT_EQ(second->id.value(), 78u);

  ASSERT_TRUE(client_->Mkdir(kRootInode, "d", 0755, kRoot).ok());
  ASSERT_TRUE(client_->Unlink(kRootInode, "f", kRoot).ok());
  ASSERT_TRUE(client_->Commit(InodeId(5), first->id, 10, Timestamp{1, 0}, 3, false).ok());
  const MetaClient::ReleaseItem items[] = {{InodeId(5), true}, {InodeId(6), false}};
  Result<std::vector<Status>> released = client_->ReleaseBatch(first->id, items);
  ASSERT_TRUE(released.ok()) << released.status().ToString();
  EXPECT_EQ(released->size(), 2u);
  ASSERT_TRUE(client_->SetLock(InodeId(5), first->id, 1, LockRange{F_WRLCK, 0, 9, 1}, false).ok());
  ASSERT_TRUE(client_->Open(InodeId(5), O_RDWR, first->id, kRoot).ok());

  const std::vector<Seen> seen = service_.seen();
  const std::vector<std::string> methods = {"Mkdir", "Unlink", "Commit", "ReleaseBatch",
                                            "SetLock", "Open"};
  ASSERT_EQ(seen.size(), 2 * methods.size());
  uint64_t last_id = 0;
  uint64_t next_free = 1;  // the first id not taken by an earlier call
  for (size_t i = 0; i < methods.size(); ++i) {
    SCOPED_TRACE(methods[i]);
    const Seen& sent = seen[2 * i];
    const Seen& resent = seen[2 * i + 1];
    EXPECT_EQ(sent.method, methods[i]);
    EXPECT_EQ(resent.method, methods[i]);
    EXPECT_TRUE(sent.has_tag);
    EXPECT_EQ(sent.session, 78u);
    EXPECT_FALSE(sent.retry);
    EXPECT_GT(sent.id, last_id);
    EXPECT_GE(sent.id, next_free);
    next_free = sent.id + (methods[i] == "ReleaseBatch" ? 2 : 1);
    EXPECT_TRUE(resent.has_tag);
    EXPECT_EQ(resent.session, 78u);
    EXPECT_EQ(resent.id, sent.id);
    EXPECT_TRUE(resent.retry);
    last_id = sent.id;
  }
}

// Without a session (none opened yet, or closed) a change carries no tag and is sent once: a
// lost reply is kUnavailable, as before tags, since the server could not tell a re-send.
TEST_F(MetaTagTest, ChangesWithoutASessionAreUntaggedAndSentOnce) {
  EXPECT_EQ(client_->Mkdir(kRootInode, "d", 0755, kRoot).status().code(), Code::kUnavailable);
  Result<SessionInfo> session = client_->OpenSession("tags");
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  ASSERT_TRUE(client_->CloseSession(session->id).ok());
  EXPECT_EQ(client_->Unlink(kRootInode, "f", kRoot).code(), Code::kUnavailable);
  const std::vector<Seen> seen = service_.seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].method, "Mkdir");
  EXPECT_FALSE(seen[0].has_tag);
  EXPECT_EQ(seen[1].method, "Unlink");
  EXPECT_FALSE(seen[1].has_tag);
}

}  // namespace
}  // namespace aquifer::client

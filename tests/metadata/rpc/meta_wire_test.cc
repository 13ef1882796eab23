// The metadata wire (src/wire/meta_wire.h) between the client library's MetaClient and an
// in-process MetaRpcServer: calls go over it once a session named its port, gRPC takes over when
// it is off or gone, a restarted server's new port is followed, and bad frames end only their
// connection.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "aquifer/units.h"
#include "client/rpc/meta_client.h"
#include "common/failpoint.h"
#include "metadata/metadata_service.h"
#include "metadata/namespace_store.h"
#include "metadata/rpc/meta_rpc.h"
#include "wire/chunk_wire.h"
#include "wire/connection.h"
#include "wire/meta_wire.h"

namespace aquifer::meta {
namespace {

using std::chrono::milliseconds;

const aquifer::Caller kRoot{};

class MetaWireTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<MetadataService>> svc = MetadataService::Open(NewMemoryStore(), {});
    ASSERT_TRUE(svc.ok()) << svc.status().ToString();
    service_ = std::move(*svc);
  }
  void StartServer(bool wire, const std::string& listen = "127.0.0.1:0") {
    Result<std::unique_ptr<MetaRpcServer>> s = MetaRpcServer::Start(service_.get(), listen, 8, wire);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
  }
  // Six data servers in distinct failure domains: a PG table for the files' layout (4 + 2).
  void RegisterServers() {
    for (int i = 0; i < 6; ++i) {
      ASSERT_TRUE(service_
                      ->RegisterServer({"127.0.0.1:" + std::to_string(7000 + i),
                                        "fd" + std::to_string(i), uint64_t{1} << 40, 0,
                                        "uuid-" + std::to_string(i)})
                      .ok());
    }
  }
  std::unique_ptr<client::MetaClient> NewClient(bool wire) {
    return client::NewGrpcMetaClient(server_->address(), milliseconds(5000), milliseconds(0), wire);
  }
  // A small namespace workout through `c`: every call checked.
  void Workout(client::MetaClient& c, const std::string& dir) {
    Result<client::SessionInfo> session = c.OpenSession("wire-test");
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    Result<Attributes> d = c.Mkdir(kRootInode, dir, 0755, kRoot);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    Result<Attributes> looked = c.Lookup(kRootInode, dir, kRoot);
    ASSERT_TRUE(looked.ok()) << looked.status().ToString();
    EXPECT_EQ(looked->inode, d->inode);
    EXPECT_EQ(c.Lookup(kRootInode, dir + "-missing", kRoot).status().code(), Code::kNotFound);
    EXPECT_EQ(c.Mkdir(kRootInode, dir, 0755, kRoot).status().code(), Code::kAlreadyExists);
    EXPECT_EQ(c.Mkdir(kRootInode, std::string(256, 'n'), 0755, kRoot).status().code(),
              Code::kNameTooLong);
  }

  std::unique_ptr<MetadataService> service_;
  std::unique_ptr<MetaRpcServer> server_;
};

TEST_F(MetaWireTest, CallsGoOverTheWireOnceASessionNamedItAndAnswerAsOverGrpc) {
  StartServer(/*wire=*/true);
  ASSERT_NE(server_->wire_port(), 0);
  auto wired = NewClient(true);
  Workout(*wired, "a");
  // Lookup, Lookup (missing), Mkdir twice (refused) and Mkdir: every call after OpenSession.
  EXPECT_EQ(server_->wire_calls(), 5u);
  auto plain = NewClient(false);
  Workout(*plain, "b");
  EXPECT_EQ(server_->wire_calls(), 5u);  // a client without the wire never uses it
}

// Regression (found by a tester): names are bytes; one that is not UTF-8 failed with EIO on
// both transports (proto3 refused it in a `string` field).
TEST_F(MetaWireTest, NamesThatAreNotUtf8WorkOverBothTransports) {
  StartServer(true);
  for (const bool wire : {true, false}) {
    auto c = NewClient(wire);
    ASSERT_TRUE(c->OpenSession("utf8").ok());
    const std::string name = std::string("\xe9\xe8\x80-") + (wire ? "w" : "g") + "\xff";
    Result<Attributes> d = c->Mkdir(kRootInode, name, 0755, kRoot);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    Result<Attributes> looked = c->Lookup(kRootInode, name, kRoot);
    ASSERT_TRUE(looked.ok()) << looked.status().ToString();
    EXPECT_EQ(looked->inode, d->inode);
    Status again = c->Mkdir(kRootInode, name, 0755, kRoot).status();
    EXPECT_EQ(again.code(), Code::kAlreadyExists) << again.ToString();
  }
  EXPECT_EQ(server_->wire_calls(), 3u);
}

// Regression (issue 16): a size of 2^63 or more was taken by SetAttr and Commit. Both transports
// share the handlers, and both refuse sizes past kMaxFileBytes with kFileTooLarge and lock ranges
// past it with kInvalidArgument; kMaxFileBytes itself and "to end of file" locks still work.
TEST_F(MetaWireTest, SizesAndLockRangesPastTheLargestFileSizeAreRefusedOverBothTransports) {
  StartServer(true);
  RegisterServers();
  for (const bool wire : {true, false}) {
    SCOPED_TRACE(wire ? "metadata wire" : "gRPC");
    auto c = NewClient(wire);
    Result<client::SessionInfo> session = c->OpenSession("bounds");
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    const std::string name = wire ? "w" : "g";
    Result<client::OpenReply> f = c->Create(kRootInode, name, S_IFREG | 0644, 0, true, kRoot,
                                            session->id, /*open_for_write=*/true);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    const InodeId ino = f->attr.inode;
    AttrChanges size;
    size.size_bytes = kMaxFileBytes + 1;
    EXPECT_EQ(c->SetAttr(ino, size, kRoot, session->id).status().code(), Code::kFileTooLarge);
    EXPECT_EQ(c->Commit(ino, session->id, UINT64_MAX, Timestamp{1, 1}, f->write_version, false)
                  .status()
                  .code(),
              Code::kFileTooLarge);
    EXPECT_EQ(c->SetLock(ino, session->id, 1, LockRange{F_WRLCK, kMaxFileBytes + 1, UINT64_MAX, 1},
                         false)
                  .code(),
              Code::kInvalidArgument);
    EXPECT_EQ(c->GetLock(ino, session->id, 1, LockRange{F_WRLCK, 0, kMaxFileBytes + 1, 1})
                  .status()
                  .code(),
              Code::kInvalidArgument);
    EXPECT_TRUE(c->SetLock(ino, session->id, 1, LockRange{F_WRLCK, 0, UINT64_MAX, 1}, false).ok());
    size.size_bytes = kMaxFileBytes;
    Result<Attributes> set = c->SetAttr(ino, size, kRoot, session->id);
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    EXPECT_EQ(set->size_bytes, kMaxFileBytes);
    EXPECT_TRUE(c->Unlink(kRootInode, name, kRoot).ok());
    EXPECT_TRUE(c->Release(ino, session->id, true).ok());
  }
  EXPECT_GE(server_->wire_calls(), 8u);
}

// Write-lease recall over both transports: WaitRecall waits for a recall on the wire (a
// thread per connection there) and answers at once over gRPC (a waiting call would hold one of
// its few threads); AcquireLease and ReturnLease answer alike on both.
TEST_F(MetaWireTest, WaitRecallWaitsOnTheWireAndAnswersAtOnceOverGrpc) {
  StartServer(true);
  RegisterServers();
  for (const bool wire : {true, false}) {
    SCOPED_TRACE(wire ? "wire" : "grpc");
    auto holder = NewClient(wire);
    auto other = NewClient(wire);
    Result<client::SessionInfo> hs = holder->OpenSession("holder");
    Result<client::SessionInfo> os = other->OpenSession("other");
    ASSERT_TRUE(hs.ok() && os.ok());
    const std::string name = wire ? "w" : "g";
    Result<client::OpenReply> made =
        holder->Create(kRootInode, name, S_IFREG | 0644, 0, true, kRoot, hs->id, true);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    const InodeId ino = made->attr.inode;
    const auto t0 = std::chrono::steady_clock::now();
    Result<std::vector<InodeId>> none = holder->WaitRecall(hs->id, milliseconds(600));
    ASSERT_TRUE(none.ok()) << none.status().ToString();
    EXPECT_TRUE(none->empty());
    const auto waited = std::chrono::steady_clock::now() - t0;
    if (wire) {
      EXPECT_GE(waited, milliseconds(500));
    } else {
      EXPECT_LT(waited, milliseconds(400));
    }
    EXPECT_EQ(other->Open(ino, O_RDWR, os->id, kRoot).status().code(), Code::kWouldBlock);
    Result<std::vector<InodeId>> recalled = holder->WaitRecall(hs->id, milliseconds(600));
    ASSERT_TRUE(recalled.ok());
    EXPECT_EQ(*recalled, std::vector<InodeId>{ino});
    ASSERT_TRUE(holder->ReturnLease(ino, hs->id).ok());
    Result<client::OpenReply> taken = other->Open(ino, O_RDWR, os->id, kRoot);
    ASSERT_TRUE(taken.ok()) << taken.status().ToString();
    EXPECT_EQ(holder->AcquireLease(ino, hs->id).status().code(), Code::kWouldBlock);
    ASSERT_TRUE(other->ReturnLease(ino, os->id).ok());
    Result<client::OpenReply> back = holder->AcquireLease(ino, hs->id);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_GT(back->write_version, taken->write_version);
    EXPECT_EQ(holder->WaitRecall(SessionId(777), milliseconds(0)).status().code(), Code::kStale);
  }
}

// A server shutting down ends a recall wait at once rather than after its wait.
TEST_F(MetaWireTest, AServerShutdownEndsARecallWaitOnTheWire) {
  StartServer(true);
  auto c = NewClient(true);
  Result<client::SessionInfo> s = c->OpenSession("waiter");
  ASSERT_TRUE(s.ok());
  // A first short wait opens the wire connection, so the long one below reaches the server
  // well before the shutdown (a call that found the wire gone would wait out gRPC's deadline).
  ASSERT_TRUE(c->WaitRecall(s->id, milliseconds(10)).ok());
  const auto t0 = std::chrono::steady_clock::now();
  std::thread waiter([&] { (void)c->WaitRecall(s->id, milliseconds(8000)); });
  std::this_thread::sleep_for(milliseconds(300));
  server_->Shutdown();
  waiter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(4000));
}

// Regression (CI, 2026-12-06: the test above took 5.0 s): the shutdown ended the recall wait,
// but cut the connection both ways before the handler's answer went out; the client sent the
// call again over gRPC, shutting down too, and waited out its 5 s deadline. The listener now
// shuts the read side first and lets a reply being made go out. The fail point makes the reply
// 300 ms late, so the cut always comes first without the grace.
TEST_F(MetaWireTest, AServerShutdownStillSendsARecallWaitsLateAnswer) {
  StartServer(true);
  auto c = NewClient(true);
  Result<client::SessionInfo> s = c->OpenSession("waiter");
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(c->WaitRecall(s->id, milliseconds(10)).ok());  // opens the wire connection
  failpoint::ScopedFailPoint late("meta.wire.before_reply:delay=300");
  const auto t0 = std::chrono::steady_clock::now();
  Status answered;
  std::thread waiter([&] { answered = c->WaitRecall(s->id, milliseconds(8000)).status(); });
  std::this_thread::sleep_for(milliseconds(300));
  server_->Shutdown();
  waiter.join();
  // The answer (the stopping server's "unavailable") went out on the wire, not lost there and
  // asked again over gRPC.
  EXPECT_EQ(server_->wire_replies_lost(), 0u) << answered.ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(2000));
}

TEST_F(MetaWireTest, ClientUsesGrpcWhenTheServerServesNoWire) {
  StartServer(/*wire=*/false);
  EXPECT_EQ(server_->wire_port(), 0);
  auto wired = NewClient(true);
  Workout(*wired, "a");
  EXPECT_EQ(server_->wire_calls(), 0u);
}

TEST_F(MetaWireTest, ClientFollowsAServerRestartedOnTheSameAddressWithANewWirePort) {
  StartServer(true);
  const std::string address = server_->address();
  const uint16_t old_port = server_->wire_port();
  auto c = NewClient(true);
  Workout(*c, "a");
  Result<client::SessionInfo> kept = c->OpenSession("kept");
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  server_.reset();
  StartServer(true, address);
  ASSERT_NE(server_->wire_port(), old_port);
  // The old port refuses: the call goes over gRPC, and answers.
  Result<Attributes> a = c->Lookup(kRootInode, "a", kRoot);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(server_->wire_calls(), 0u);
  // The session outlived the restart: its next keep-alive names the new port and token.
  ASSERT_TRUE(c->KeepAlive(kept->id).ok());
  a = c->Lookup(kRootInode, "a", kRoot);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(server_->wire_calls(), 1u);
  // So does a new session (a client whose session the restarted server does not know).
  ASSERT_TRUE(c->OpenSession("again").ok());
  a = c->Lookup(kRootInode, "a", kRoot);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(server_->wire_calls(), 2u);
}

TEST_F(MetaWireTest, BadFramesEndOnlyTheirConnectionAndBadPayloadsAreAnswered) {
  StartServer(true);
  const auto soon = [] { return std::chrono::steady_clock::now() + std::chrono::seconds(10); };
  auto connect = [&]() {
    Result<int> fd = wire::Connect("127.0.0.1", server_->wire_port(), soon());
    EXPECT_TRUE(fd.ok()) << fd.status().ToString();
    std::array<std::byte, wire::kHelloBytes> hello;
    EXPECT_TRUE(wire::RecvAll(*fd, hello, soon()).ok());
    return *fd;
  };
  const int bad = connect(), good = connect();
  std::string junk(wire::kCallHeaderBytes, 'j');
  iovec iov{junk.data(), junk.size()};
  ASSERT_TRUE(wire::SendAll(bad, &iov, 1, soon()).ok());
  std::array<std::byte, 1> one;
  EXPECT_NE(wire::RecvAll(bad, one, soon()).message().find("connection closed"), std::string::npos);
  // A well-framed call whose payload is not a LookupRequest: answered kBadRequest, and the
  // connection goes on to answer a good call.
  const std::string garbage = "\xff\xff\xff\xff";
  auto head = wire::EncodeCall({wire::MetaMethod::kLookup, static_cast<uint32_t>(garbage.size())});
  iovec call[2] = {{head.data(), head.size()}, {const_cast<char*>(garbage.data()), garbage.size()}};
  ASSERT_TRUE(wire::SendAll(good, call, 2, soon()).ok());
  std::array<std::byte, wire::kCallHeaderBytes> reply;
  ASSERT_TRUE(wire::RecvAll(good, reply, soon()).ok());
  Result<wire::CallReplyHeader> r = wire::DecodeCallReply(reply);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->outcome, wire::CallOutcome::kBadRequest);
  head = wire::EncodeCall({wire::MetaMethod::kStatFs, 0});  // an empty StatFsRequest parses
  iovec again{head.data(), head.size()};
  ASSERT_TRUE(wire::SendAll(good, &again, 1, soon()).ok());
  ASSERT_TRUE(wire::RecvAll(good, reply, soon()).ok());
  r = wire::DecodeCallReply(reply);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->outcome, wire::CallOutcome::kOk);
  EXPECT_GT(r->payload_bytes, 0u);
  ::close(bad);
  ::close(good);
  // The server still serves clients.
  auto c = NewClient(true);
  Workout(*c, "after");
}

}  // namespace
}  // namespace aquifer::meta

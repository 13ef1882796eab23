// Integration: the real aquifer-meta binary on 127.0.0.1 port 0, driven through gRPC.
#include <fcntl.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "aquifer/status.h"
#include "aquifer/units.h"
#include "meta_process.h"

namespace aquifer::meta::testing {
namespace {

class MetaRpcTest : public ::testing::Test {
 protected:
  void TearDown() override {
    proc_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  void StartMeta(std::vector<std::string> extra = {}) {
    if (dir_.empty()) dir_ = NewScratchDir("rpc");
    proc_ = std::make_unique<MetaProcess>(AQUIFER_META_BIN, dir_, std::move(extra));
    ASSERT_TRUE(proc_->Start()) << "aquifer-meta did not start";
  }
  pb::MetaService::Stub& stub() { return proc_->stub(); }

  pb::AttrResponse Mkdir(uint64_t parent, const std::string& name) {
    pb::MkdirRequest req;
    req.set_parent(parent);
    req.set_name(name);
    req.set_mode(0755);
    pb::AttrResponse resp;
    EXPECT_TRUE(stub().Mkdir(Ctx().get(), req, &resp).ok());
    return resp;
  }
  pb::CreateResponse Create(uint64_t parent, const std::string& name, uint64_t session = 0,
                            bool write = false) {
    pb::CreateRequest req;
    req.set_parent(parent);
    req.set_name(name);
    req.set_mode(S_IFREG | 0644);
    req.set_exclusive(true);
    req.set_session(session);
    req.set_open_for_write(write);
    pb::CreateResponse resp;
    EXPECT_TRUE(stub().Create(Ctx().get(), req, &resp).ok());
    return resp;
  }
  pb::AttrResponse Lookup(uint64_t parent, const std::string& name) {
    pb::LookupRequest req;
    req.set_parent(parent);
    req.set_name(name);
    pb::AttrResponse resp;
    EXPECT_TRUE(stub().Lookup(Ctx().get(), req, &resp).ok());
    return resp;
  }
  uint64_t OpenSession() {
    pb::OpenSessionRequest req;
    req.set_client_name("test");
    pb::OpenSessionResponse resp;
    EXPECT_TRUE(stub().OpenSession(Ctx().get(), req, &resp).ok());
    EXPECT_EQ(resp.status().code(), 0);
    return resp.session();
  }
  int OpenForWrite(uint64_t ino, uint64_t session) {
    pb::OpenRequest req;
    req.set_ino(ino);
    req.set_flags(O_WRONLY);
    req.set_session(session);
    pb::OpenResponse resp;
    EXPECT_TRUE(stub().Open(Ctx().get(), req, &resp).ok());
    return resp.status().code();
  }

  std::string dir_;
  std::unique_ptr<MetaProcess> proc_;
};

TEST_F(MetaRpcTest, AcknowledgedOperationsSurviveKill9AndRestart) {
  StartMeta();
  ASSERT_TRUE(RegisterServers(stub(), 6));
  auto d = Mkdir(1, "data");
  ASSERT_EQ(d.status().code(), 0) << d.status().message();
  uint64_t session = OpenSession();
  auto f = Create(d.attr().ino(), "f", session, true);
  ASSERT_EQ(f.status().code(), 0) << f.status().message();
  EXPECT_GT(f.write_version(), 0u);
  EXPECT_EQ(f.attr().layout().k(), 4u);
  pb::CommitRequest commit;
  commit.set_ino(f.attr().ino());
  commit.set_session(session);
  commit.set_size(5000000);
  commit.mutable_mtime()->set_sec(1234);
  commit.mutable_mtime()->set_nsec(5678);
  commit.set_write_version(f.write_version());
  commit.set_sync(true);
  pb::CommitResponse committed;
  ASSERT_TRUE(stub().Commit(Ctx().get(), commit, &committed).ok());
  ASSERT_EQ(committed.status().code(), 0) << committed.status().message();
  pb::XattrRequest x;
  x.set_ino(f.attr().ino());
  x.set_name("user.tag");
  x.set_value("v1");
  pb::XattrResponse xr;
  ASSERT_TRUE(stub().SetXattr(Ctx().get(), x, &xr).ok());
  ASSERT_EQ(xr.status().code(), 0);
  auto unsynced = Mkdir(1, "after-sync");  // acknowledged without sync: survives kill -9 too
  ASSERT_EQ(unsynced.status().code(), 0);

  int status = proc_->Kill(SIGKILL);
  EXPECT_TRUE(WIFSIGNALED(status));
  StartMeta();

  auto d2 = Lookup(1, "data");
  ASSERT_EQ(d2.status().code(), 0);
  auto f2 = Lookup(d2.attr().ino(), "f");
  ASSERT_EQ(f2.status().code(), 0);
  EXPECT_EQ(f2.attr().size(), 5000000u);
  EXPECT_EQ(f2.attr().mtime().nsec(), 5678u);
  EXPECT_EQ(f2.attr().data_version(), f.write_version());
  EXPECT_EQ(f2.attr().blocks(), (5000000u + 511) / 512);
  EXPECT_EQ(Lookup(1, "after-sync").status().code(), 0);
  ASSERT_TRUE(stub().GetXattr(Ctx().get(), x, &xr).ok());
  EXPECT_EQ(xr.value(), "v1");
  // Inode numbers and write versions keep growing after the restart.
  uint64_t s2 = OpenSession();
  EXPECT_NE(s2, session);
  auto g = Create(1, "g", s2, true);
  ASSERT_EQ(g.status().code(), 0) << g.status().message();
  EXPECT_GT(g.attr().ino(), unsynced.attr().ino());
  EXPECT_GT(g.write_version(), committed.next_write_version());
  pb::StatFsResponse fs;
  ASSERT_TRUE(stub().StatFs(Ctx().get(), pb::StatFsRequest(), &fs).ok());
  EXPECT_EQ(fs.files(), 5u);  // root, data, f, after-sync, g
  EXPECT_EQ(fs.total_bytes(), 6ull << 40);
  pb::StatusResponse synced;
  ASSERT_TRUE(stub().Sync(Ctx().get(), pb::SyncRequest(), &synced).ok());
  EXPECT_EQ(synced.status().code(), 0);
}

// A kill -9 of aquifer-meta loses nothing a client holds or did: its session, write lease and
// fcntl lock are still there after the restart (another session is refused both), and a change
// whose reply was lost, sent again with the same tag and retry set, is answered as the first
// attempt's success instead of EEXIST / ENOENT (the same call untagged gets those errors).
TEST_F(MetaRpcTest, SessionsLocksAndRetriedChangesSurviveKill9) {
  StartMeta();
  ASSERT_TRUE(RegisterServers(stub(), 6));
  const uint64_t s1 = OpenSession();
  auto tag = [&](auto* req, uint64_t id, bool retry) {
    req->mutable_tag()->set_session(s1);
    req->mutable_tag()->set_id(id);
    req->mutable_tag()->set_retry(retry);
  };
  pb::CreateRequest create;
  create.set_parent(1);
  create.set_name("f");
  create.set_mode(S_IFREG | 0644);
  create.set_exclusive(true);
  create.set_session(s1);
  create.set_open_for_write(true);
  tag(&create, 1, false);
  pb::CreateResponse created;
  ASSERT_TRUE(stub().Create(Ctx().get(), create, &created).ok());
  ASSERT_EQ(created.status().code(), 0) << created.status().message();
  pb::LockRequest lock;
  lock.set_ino(created.attr().ino());
  lock.set_session(s1);
  lock.set_owner(5);
  lock.set_type(1);  // F_WRLCK
  lock.set_start(0);
  lock.set_end(UINT64_MAX);
  lock.set_pid(77);
  tag(&lock, 2, false);
  pb::LockResponse locked;
  ASSERT_TRUE(stub().SetLock(Ctx().get(), lock, &locked).ok());
  ASSERT_EQ(locked.status().code(), 0);
  pb::RemoveRequest unlink;
  auto g = Create(1, "g");
  ASSERT_EQ(g.status().code(), 0);
  unlink.set_parent(1);
  unlink.set_name("g");
  tag(&unlink, 3, false);
  pb::RemoveResponse removed;
  ASSERT_TRUE(stub().Unlink(Ctx().get(), unlink, &removed).ok());
  ASSERT_EQ(removed.status().code(), 0);

  pb::SessionRequest ka;
  ka.set_session(s1);
  pb::KeepAliveResponse before;
  ASSERT_TRUE(stub().KeepAlive(Ctx().get(), ka, &before).ok());
  EXPECT_NE(before.wire_port(), 0u);

  EXPECT_TRUE(WIFSIGNALED(proc_->Kill(SIGKILL)));
  StartMeta();

  pb::KeepAliveResponse alive;
  ASSERT_TRUE(stub().KeepAlive(Ctx().get(), ka, &alive).ok());
  EXPECT_EQ(alive.status().code(), 0) << "the session did not survive: " << alive.status().message();
  // The restarted server's wire (a new token), so the client can follow it without a new session.
  EXPECT_NE(alive.wire_port(), 0u);
  EXPECT_NE(alive.wire_instance(), before.wire_instance());
  const uint64_t s2 = OpenSession();
  EXPECT_EQ(OpenForWrite(created.attr().ino(), s2), static_cast<int>(Code::kWouldBlock));
  pb::LockRequest other = lock;
  other.set_session(s2);
  other.clear_tag();
  pb::LockResponse refused;
  ASSERT_TRUE(stub().SetLock(Ctx().get(), other, &refused).ok());
  EXPECT_EQ(refused.status().code(), static_cast<int>(Code::kWouldBlock));
  ASSERT_TRUE(stub().GetLock(Ctx().get(), other, &refused).ok());
  EXPECT_EQ(refused.pid(), 77u);

  // The retries: answered from what the first attempts did.
  tag(&create, 1, true);
  pb::CreateResponse again;
  ASSERT_TRUE(stub().Create(Ctx().get(), create, &again).ok());
  EXPECT_EQ(again.status().code(), 0) << again.status().message();
  EXPECT_EQ(again.attr().ino(), created.attr().ino());
  EXPECT_EQ(again.write_version(), created.write_version());
  tag(&unlink, 3, true);
  ASSERT_TRUE(stub().Unlink(Ctx().get(), unlink, &removed).ok());
  EXPECT_EQ(removed.status().code(), 0) << removed.status().message();
  // A new change (another id, or no retry flag) runs as usual.
  tag(&create, 4, true);
  ASSERT_TRUE(stub().Create(Ctx().get(), create, &again).ok());
  EXPECT_EQ(again.status().code(), static_cast<int>(Code::kAlreadyExists));
  tag(&unlink, 3, false);
  ASSERT_TRUE(stub().Unlink(Ctx().get(), unlink, &removed).ok());
  EXPECT_EQ(removed.status().code(), static_cast<int>(Code::kNotFound));

  // The holder still commits under its lease, then unlocks; the other session gets the lock.
  pb::CommitRequest commit;
  commit.set_ino(created.attr().ino());
  commit.set_session(s1);
  commit.set_size(10);
  commit.set_write_version(created.write_version());
  tag(&commit, 5, false);
  pb::CommitResponse committed;
  ASSERT_TRUE(stub().Commit(Ctx().get(), commit, &committed).ok());
  EXPECT_EQ(committed.status().code(), 0) << committed.status().message();
  lock.set_type(2);  // F_UNLCK
  tag(&lock, 6, false);
  ASSERT_TRUE(stub().SetLock(Ctx().get(), lock, &locked).ok());
  ASSERT_EQ(locked.status().code(), 0);
  ASSERT_TRUE(stub().SetLock(Ctx().get(), other, &refused).ok());
  EXPECT_EQ(refused.status().code(), 0);
}

TEST_F(MetaRpcTest, ErrorsTravelAsRpcStatusCodes) {
  StartMeta();
  auto none = Lookup(1, "missing");
  EXPECT_EQ(none.status().code(), static_cast<int>(Code::kNotFound));
  auto bad = Mkdir(1, std::string(256, 'x'));
  EXPECT_EQ(bad.status().code(), static_cast<int>(Code::kNameTooLong));
  auto f = Create(1, "f");  // no data servers registered
  EXPECT_EQ(f.status().code(), static_cast<int>(Code::kUnavailable));
  EXPECT_EQ(f.status().message(), "need 6 data servers in distinct failure domains, 0 are up");
  pb::GetAttrRequest ga;
  ga.set_ino(1);
  pb::AttrResponse root;
  ASSERT_TRUE(stub().GetAttr(Ctx().get(), ga, &root).ok());
  EXPECT_EQ(root.attr().mode(), static_cast<uint32_t>(S_IFDIR | 0755));
}

TEST_F(MetaRpcTest, SilentDataServerIsMarkedDown) {
  StartMeta({"--heartbeat-timeout-ms", "300"});
  ASSERT_TRUE(RegisterServers(stub(), 1));
  pb::ClusterMapResponse map;
  ASSERT_TRUE(stub().GetClusterMap(Ctx().get(), pb::ClusterMapRequest(), &map).ok());
  ASSERT_EQ(map.servers_size(), 1);
  EXPECT_TRUE(map.servers(0).up());
  uint64_t v0 = map.version();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool down = false;
  while (!down && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(stub().GetClusterMap(Ctx().get(), pb::ClusterMapRequest(), &map).ok());
    down = !map.servers(0).up();
    if (!down) std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling
  }
  ASSERT_TRUE(down);
  EXPECT_GT(map.version(), v0);
  // A heartbeat brings it back.
  pb::HeartbeatRequest hb;
  hb.set_server_id(map.servers(0).id());
  pb::HeartbeatResponse hr;
  ASSERT_TRUE(stub().Heartbeat(Ctx().get(), hb, &hr).ok());
  EXPECT_GT(hr.map_version(), map.version());
}

// Regression (found by a tester): a metadata server stopped longer than the heartbeat timeout
// marked every data server down when it resumed (their heartbeats looked silent), and clients'
// writes failed until the next heartbeats.
TEST_F(MetaRpcTest, APauseOfTheMetadataServerIsNotCountedAsSilenceOfDataServers) {
  StartMeta({"--heartbeat-timeout-ms", "1500"});
  ASSERT_TRUE(RegisterServers(stub(), 1));
  proc_->Signal(SIGSTOP);
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));
  proc_->Signal(SIGCONT);
  // Long enough for several ticks (every 150 ms), short enough that the server, silent only
  // since just before the pause, is not due yet when the pause is discounted.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  pb::ClusterMapResponse map;
  ASSERT_TRUE(stub().GetClusterMap(Ctx().get(), pb::ClusterMapRequest(), &map).ok());
  ASSERT_EQ(map.servers_size(), 1);
  EXPECT_TRUE(map.servers(0).up()) << "a data server was marked down for the metadata server's "
                                      "own pause";
}

TEST_F(MetaRpcTest, ExpiredSessionLosesItsWriteLease) {
  StartMeta({"--session-ttl-ms", "300"});
  ASSERT_TRUE(RegisterServers(stub(), 6));
  uint64_t s1 = OpenSession();
  auto f = Create(1, "f", s1, true);
  ASSERT_EQ(f.status().code(), 0);
  uint64_t s2 = OpenSession();
  EXPECT_EQ(OpenForWrite(f.attr().ino(), s2), static_cast<int>(Code::kWouldBlock));
  // s2 keeps itself alive; s1 goes silent and its lease goes with it.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int code = -1;
  while (std::chrono::steady_clock::now() < deadline) {
    pb::SessionRequest ka;
    ka.set_session(s2);
    pb::KeepAliveResponse kr;
    ASSERT_TRUE(stub().KeepAlive(Ctx().get(), ka, &kr).ok());
    ASSERT_EQ(kr.status().code(), 0);
    code = OpenForWrite(f.attr().ino(), s2);
    if (code == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling
  }
  EXPECT_EQ(code, 0);
}

// ReleaseBatch applies each close as Release would, in order: the writer's lease is freed only
// when its last write open is released, and an oversized batch is refused whole.
TEST_F(MetaRpcTest, ReleaseBatchAppliesEachCloseInOrderAndRefusesOversizedBatches) {
  StartMeta();
  ASSERT_TRUE(RegisterServers(stub(), 6));
  const uint64_t s1 = OpenSession();
  auto f = Create(1, "f", s1, true);
  ASSERT_EQ(f.status().code(), 0);
  const uint64_t ino = f.attr().ino();
  ASSERT_EQ(OpenForWrite(ino, s1), 0);  // s1 now has two write opens
  const uint64_t s2 = OpenSession();
  ASSERT_EQ(OpenForWrite(ino, s2), static_cast<int>(Code::kWouldBlock));

  auto release = [&](uint64_t session, int count, uint64_t item_ino) {
    pb::ReleaseBatchRequest req;
    req.set_session(session);
    for (int i = 0; i < count; ++i) {
      pb::ReleaseItem* item = req.add_items();
      item->set_ino(item_ino);
      item->set_was_write(true);
    }
    pb::ReleaseBatchResponse resp;
    EXPECT_TRUE(stub().ReleaseBatch(Ctx().get(), req, &resp).ok());
    return resp;
  };

  // More than kMaxReleaseBatchItems: refused, and nothing applied (s1 still holds the lease).
  pb::ReleaseBatchResponse big = release(s1, static_cast<int>(kMaxReleaseBatchItems) + 1, ino);
  EXPECT_EQ(big.status().code(), static_cast<int>(Code::kInvalidArgument));
  EXPECT_EQ(big.results_size(), 0);
  EXPECT_EQ(OpenForWrite(ino, s2), static_cast<int>(Code::kWouldBlock));

  // One of two write opens released: the lease stays with s1.
  pb::ReleaseBatchResponse one = release(s1, 1, ino);
  ASSERT_EQ(one.status().code(), 0);
  ASSERT_EQ(one.results_size(), 1);
  EXPECT_EQ(one.results(0).code(), 0);
  EXPECT_EQ(OpenForWrite(ino, s2), static_cast<int>(Code::kWouldBlock));

  // The last one, batched with a release of an inode that does not exist (a no-op, as in
  // Release): one result per item, and the lease is free for s2.
  pb::ReleaseBatchRequest req;
  req.set_session(s1);
  req.add_items()->set_ino(ino);
  req.mutable_items(0)->set_was_write(true);
  req.add_items()->set_ino(987654321);
  pb::ReleaseBatchResponse resp;
  ASSERT_TRUE(stub().ReleaseBatch(Ctx().get(), req, &resp).ok());
  ASSERT_EQ(resp.status().code(), 0);
  ASSERT_EQ(resp.results_size(), 2);
  EXPECT_EQ(resp.results(0).code(), 0);
  EXPECT_EQ(resp.results(1).code(), 0);
  EXPECT_EQ(OpenForWrite(ino, s2), 0);
}

TEST_F(MetaRpcTest, ConfigFileFillsOptionsAndFlagsWin) {
  dir_ = NewScratchDir("cfg");
  {
    std::ofstream cfg(dir_ + "/meta.toml");
    cfg << "k = 3\nm = 1\nunit-bytes = 65536\npgs-per-table = 8\n";
  }
  StartMeta({"--config", dir_ + "/meta.toml", "--k", "2"});
  pb::ClusterMapResponse map;
  ASSERT_TRUE(stub().GetClusterMap(Ctx().get(), pb::ClusterMapRequest(), &map).ok());
  EXPECT_EQ(map.default_k(), 2u);
  EXPECT_EQ(map.default_m(), 1u);
  EXPECT_EQ(map.default_unit_bytes(), 65536u);
  ASSERT_TRUE(RegisterServers(stub(), 3));
  auto f = Create(1, "f");
  ASSERT_EQ(f.status().code(), 0) << f.status().message();
  EXPECT_EQ(f.attr().layout().pg_count(), 8u);
  // SIGTERM: a clean exit.
  int status = proc_->Kill(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST_F(MetaRpcTest, ManyClientsCreatingInOneDirectoryAllSucceed) {
  StartMeta();
  ASSERT_TRUE(RegisterServers(stub(), 6));
  auto d = Mkdir(1, "shared");
  constexpr int kThreads = 4, kFiles = 200;
  std::atomic<int> failures{0};
  std::mutex first_failure_mu;
  std::string first_failure;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      grpc::ChannelArguments args;
      args.SetInt("aquifer.test.channel", t);  // a channel (connection) of its own
      auto ch = grpc::CreateCustomChannel(proc_->address(), grpc::InsecureChannelCredentials(),
                                          args);
      auto st = pb::MetaService::NewStub(ch);
      for (int i = 0; i < kFiles; ++i) {
        pb::CreateRequest req;
        req.set_parent(d.attr().ino());
        req.set_name("t" + std::to_string(t) + "-" + std::to_string(i));
        req.set_mode(S_IFREG | 0644);
        req.set_exclusive(true);
        pb::CreateResponse resp;
        // As the real client does: wait for a channel that is still connecting (a call
        // without wait_for_ready fails at once while its new channel's first connect is
        // pending or backing off; CI saw one thread's 200 calls all fail that way), and send
        // again a call the server refused unrun for want of a thread.
        grpc::Status s;
        for (int attempt = 0; attempt < 50; ++attempt) {
          auto ctx = Ctx();
          ctx->set_wait_for_ready(true);
          s = st->Create(ctx.get(), req, &resp);
          if (!(s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
                s.error_message() == "Server Threadpool Exhausted")) {
            break;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        if (!s.ok() || resp.status().code() != 0) {
          std::lock_guard lock(first_failure_mu);
          if (first_failure.empty()) {
            first_failure = s.ok() ? resp.status().message()
                                   : std::to_string(s.error_code()) + " " + s.error_message();
          }
          failures++;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0) << "first failure: " << first_failure;
  uint64_t cookie = 0, count = 0;
  bool eof = false;
  while (!eof) {
    pb::ReadDirRequest req;
    req.set_ino(d.attr().ino());
    req.set_cookie(cookie);
    req.set_max_entries(100);
    req.set_plus(true);
    pb::ReadDirResponse resp;
    ASSERT_TRUE(stub().ReadDir(Ctx().get(), req, &resp).ok());
    ASSERT_EQ(resp.status().code(), 0);
    for (const auto& e : resp.entries()) {
      cookie = e.cookie();
      EXPECT_EQ(e.attr().ino(), e.ino());
      ++count;
    }
    eof = resp.eof();
  }
  EXPECT_EQ(count, uint64_t{kThreads * kFiles});
  auto dir = Lookup(1, "shared");
  EXPECT_EQ(dir.attr().nlink(), 2u);
}

}  // namespace
}  // namespace aquifer::meta::testing

namespace aquifer::meta::testing {
namespace {

// The repair contract over the wire: admin RPCs, move tasks and progress in heartbeats, pending
// targets and server state in the cluster map.
TEST_F(MetaRpcTest, ForcedRemoveRepairsThroughHeartbeatsAndTheMapShowsIt) {
  StartMeta({"--heartbeat-timeout-ms", "60000", "--move-rate-mib", "50",
             "--max-concurrent-moves", "1", "--pg-gc-delay-ms", "0"});
  ASSERT_TRUE(RegisterServers(stub(), 7));
  ASSERT_EQ(Create(1, "f").status().code(), 0);
  pb::ServerAdminRequest remove;
  remove.set_server_id(1);
  pb::ServerAdminResponse refused;
  ASSERT_TRUE(stub().RemoveServer(Ctx().get(), remove, &refused).ok());
  EXPECT_EQ(refused.status().code(), static_cast<int>(Code::kNotEmpty));
  EXPECT_NE(refused.status().message().find("drain it first"), std::string::npos);
  remove.set_force(true);
  pb::ServerAdminResponse forced;
  ASSERT_TRUE(stub().RemoveServer(Ctx().get(), remove, &forced).ok());
  ASSERT_EQ(forced.status().code(), 0) << forced.status().message();
  EXPECT_GT(forced.positions_held(), 0u);
  EXPECT_EQ(forced.moves_scheduled(), forced.positions_held());

  pb::GetMovesResponse moves;
  ASSERT_TRUE(stub().GetMoves(Ctx().get(), pb::GetMovesRequest(), &moves).ok());
  ASSERT_EQ(moves.moves_size(), static_cast<int>(forced.moves_scheduled()));
  EXPECT_EQ(moves.moves(0).task().kind(), "repair");
  EXPECT_EQ(moves.moves(0).task().from_server(), 1u);
  EXPECT_EQ(moves.summary().degraded_pgs(), forced.positions_held());
  EXPECT_NE(moves.summary().message().find("running"), std::string::npos);

  pb::ClusterMapResponse map;
  ASSERT_TRUE(stub().GetClusterMap(Ctx().get(), pb::ClusterMapRequest(), &map).ok());
  EXPECT_EQ(map.servers(0).state(), "removed");
  EXPECT_FALSE(map.servers(0).up());
  const pb::MoveTask& task = moves.moves(0).task();
  const pb::PlacementGroup& pg = map.pg_tables(0).pgs(task.pg_index());
  ASSERT_EQ(pg.pending_size(), pg.targets_size());
  EXPECT_EQ(pg.pending(task.position()), task.to_server());

  // The destination gets at most one task (--max-concurrent-moves 1) at 50 MiB/s and finishes it.
  pb::HeartbeatRequest hb;
  hb.set_server_id(task.to_server());
  pb::HeartbeatResponse hr;
  ASSERT_TRUE(stub().Heartbeat(Ctx().get(), hb, &hr).ok());
  ASSERT_EQ(hr.moves_size(), 1);
  EXPECT_EQ(hr.state(), "in");
  EXPECT_EQ(hr.moves(0).rate_limit_bytes_per_s(), 50ull << 20);
  const pb::MoveTask given = hr.moves(0);
  pb::MoveProgress* p = hb.add_moves();
  p->set_task_id(given.id());
  p->set_done(true);
  ASSERT_TRUE(stub().Heartbeat(Ctx().get(), hb, &hr).ok());
  pb::ClusterMapResponse after;
  ASSERT_TRUE(stub().GetClusterMap(Ctx().get(), pb::ClusterMapRequest(), &after).ok());
  EXPECT_GT(after.version(), map.version());
  EXPECT_EQ(after.pg_tables(0).pgs(given.pg_index()).targets(given.position()),
            given.to_server());
  // The removed server, heartbeating, is told to drop that position and stays removed.
  pb::HeartbeatRequest old;
  old.set_server_id(1);
  ASSERT_TRUE(stub().Heartbeat(Ctx().get(), old, &hr).ok());
  EXPECT_EQ(hr.state(), "removed");
  ASSERT_EQ(hr.pg_gc_size(), 1);
  EXPECT_EQ(hr.pg_gc(0).pg_index(), given.pg_index());
  EXPECT_EQ(hr.pg_gc(0).position(), given.position());
}

// Cache leases through the real server (docs/design.md "Cache leases"): a Lookup that names its
// session makes it a holder; another session's rename over gRPC is recalled to it by WaitRecall
// and its reply waits until the holder acknowledges with acked_seq.
TEST_F(MetaRpcTest, ARenameRecallsACachedNameAndAnswersAfterTheAcknowledgement) {
  StartMeta({"--cache-lease-ms", "20000"});
  const uint64_t a = OpenSession();
  const uint64_t b = OpenSession();
  Mkdir(1, "x");
  pb::LookupRequest look;
  look.set_parent(1);
  look.set_name("x");
  look.set_session(b);
  pb::AttrResponse found;
  ASSERT_TRUE(stub().Lookup(Ctx().get(), look, &found).ok());
  ASSERT_EQ(found.status().code(), 0);

  std::atomic<bool> renamed{false};
  pb::StatusResponse rename_resp;
  grpc::Status rename_rpc;
  std::thread renamer([&] {
    pb::RenameRequest req;
    req.set_parent(1);
    req.set_name("x");
    req.set_new_parent(1);
    req.set_new_name("y");
    req.mutable_tag()->set_session(a);
    req.mutable_tag()->set_id(1);
    rename_rpc = stub().Rename(Ctx().get(), req, &rename_resp);
    renamed = true;
  });
  pb::WaitRecallRequest wait;
  wait.set_session(b);
  pb::WaitRecallResponse got;
  for (int i = 0; i < 100 && got.cache_recalls_size() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_TRUE(stub().WaitRecall(Ctx().get(), wait, &got).ok());
  }
  ASSERT_EQ(got.cache_recalls_size(), 1);
  const pb::CacheRecall& r = got.cache_recalls(0);
  bool names_x = false;
  for (const auto& e : r.entries()) names_x |= e.parent() == 1 && e.name() == "x";
  EXPECT_TRUE(names_x);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(renamed.load());  // held for b's acknowledgement
  EXPECT_NE(got.recall_epoch(), 0u);
  wait.set_acked_seq(r.seq());  // an ack counts only in the epoch it names
  pb::WaitRecallResponse after;
  ASSERT_TRUE(stub().WaitRecall(Ctx().get(), wait, &after).ok());
  EXPECT_EQ(after.cache_recalls_size(), 1);
  EXPECT_FALSE(renamed.load());
  wait.set_recall_epoch(got.recall_epoch());
  ASSERT_TRUE(stub().WaitRecall(Ctx().get(), wait, &after).ok());
  EXPECT_EQ(after.cache_recalls_size(), 0);
  renamer.join();
  ASSERT_TRUE(rename_rpc.ok());
  EXPECT_EQ(rename_resp.status().code(), 0);
  EXPECT_EQ(Lookup(1, "y").status().code(), 0);
}

}  // namespace
}  // namespace aquifer::meta::testing

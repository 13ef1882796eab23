// NamespaceStore: the same behaviours on the RocksDB and the in-memory engine.
#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "metadata/namespace_store.h"

namespace aquifer::meta {
namespace {

std::string ScratchDir(const std::string& tag) {
  std::random_device rd;
  auto dir = std::filesystem::temp_directory_path() /
             ("aquifer-meta-store-" + tag + "-" + std::to_string(rd()));
  std::filesystem::create_directories(dir);
  return dir.string();
}

class StoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "rocksdb") {
      dir_ = ScratchDir("t");
      auto s = OpenRocksStore(dir_ + "/db");
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      store_ = std::move(*s);
    } else {
      store_ = NewMemoryStore();
    }
  }
  void TearDown() override {
    store_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string dir_;
  std::unique_ptr<NamespaceStore> store_;
};

Inode SampleInode(uint64_t ino) {
  Inode n;
  n.ino = InodeId(ino);
  n.generation = 3;
  n.mode = S_IFREG | 0644;
  n.nlink = 1;
  n.uid = 1000;
  n.gid = 100;
  n.size = 123456789;
  n.mtime = {1700000000, 123456789};
  n.layout = {4, 2, 1 << 20, 7, 64};
  n.data_version = 42;
  n.symlink_target = "x";
  return n;
}

TEST_P(StoreTest, InodeRoundTripsEveryField) {
  StoreBatch b;
  b.PutInode(SampleInode(5));
  ASSERT_TRUE(store_->Write(b, false).ok());
  auto got = store_->GetInode(InodeId(5));
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE(got->has_value());
  const Inode& n = **got;
  EXPECT_EQ(n.mode, S_IFREG | 0644u);
  EXPECT_EQ(n.size, 123456789u);
  EXPECT_EQ(n.mtime.nsec, 123456789u);
  EXPECT_EQ(n.layout, (FileLayout{4, 2, 1 << 20, 7, 64}));
  EXPECT_EQ(n.data_version, 42u);
  EXPECT_EQ(n.symlink_target, "x");
  auto missing = store_->GetInode(InodeId(6));
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
}

TEST_P(StoreTest, ListDirReturnsEntriesInSeqOrderFromCookie) {
  StoreBatch b;
  for (uint64_t i = 1; i <= 10; ++i) {
    b.PutDentry(InodeId(1), "f" + std::to_string(i), Dentry{InodeId(100 + i), S_IFREG, i});
  }
  b.PutDentry(InodeId(2), "other", Dentry{InodeId(999), S_IFREG, 1});
  ASSERT_TRUE(store_->Write(b, false).ok());
  auto all = store_->ListDir(InodeId(1), 0, 100);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 10u);
  EXPECT_EQ((*all)[0].name, "f1");
  EXPECT_EQ((*all)[9].cookie, 10u);
  auto rest = store_->ListDir(InodeId(1), 7, 2);
  ASSERT_TRUE(rest.ok());
  ASSERT_EQ(rest->size(), 2u);
  EXPECT_EQ((*rest)[0].name, "f8");
  EXPECT_EQ((*rest)[1].ino, InodeId(109));

  StoreBatch del;
  del.DeleteDentry(InodeId(1), "f8", 8);
  ASSERT_TRUE(store_->Write(del, false).ok());
  auto after = store_->ListDir(InodeId(1), 7, 10);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), 2u);
  EXPECT_EQ((*after)[0].name, "f9");
  auto d = store_->GetDentry(InodeId(1), "f8");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->has_value());
  auto d9 = store_->GetDentry(InodeId(1), "f9");
  ASSERT_TRUE(d9.ok() && d9->has_value());
  EXPECT_EQ((*d9)->seq, 9u);
}

TEST_P(StoreTest, DeleteAllXattrsRemovesOnlyThatInodes) {
  StoreBatch b;
  b.PutXattr(InodeId(7), "user.a", "1");
  b.PutXattr(InodeId(7), "user.b", std::string("\0\1", 2));
  b.PutXattr(InodeId(8), "user.a", "keep");
  ASSERT_TRUE(store_->Write(b, false).ok());
  auto names = store_->ListXattrNames(InodeId(7));
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, (std::vector<std::string>{"user.a", "user.b"}));
  auto v = store_->GetXattr(InodeId(7), "user.b");
  ASSERT_TRUE(v.ok() && v->has_value());
  EXPECT_EQ(**v, std::string("\0\1", 2));
  StoreBatch del;
  del.DeleteAllXattrs(InodeId(7));
  ASSERT_TRUE(store_->Write(del, false).ok());
  EXPECT_TRUE(store_->ListXattrNames(InodeId(7))->empty());
  EXPECT_EQ(store_->ListXattrNames(InodeId(8))->size(), 1u);
}

TEST_P(StoreTest, CountersGcTasksServersAndPgTablesRoundTrip) {
  StoreBatch b;
  b.PutCounter("next_ino", 77);
  b.PutGcTask(GcTask{3, InodeId(9), 2, 41, {1, 2}});
  b.PutServer(ServerRecord{ServerId(4), "uuid-4", "127.0.0.1:9", "rack-a", 1000, 10});
  PgTable table{6, {{ServerId(1), ServerId(2)}, {ServerId(3), ServerId(4)}}};
  table.pending = {{}, {ServerId(5), ServerId(0)}};
  table.sized_for = 7;
  b.PutPgTable(table);
  b.PutOrphan(InodeId(12));
  ASSERT_TRUE(store_->Write(b, true).ok());
  EXPECT_EQ(*store_->GetCounter("next_ino"), 77u);
  EXPECT_EQ(*store_->GetCounter("never"), 0u);
  auto tasks = store_->LoadGcTasks();
  ASSERT_TRUE(tasks.ok());
  ASSERT_EQ(tasks->size(), 1u);
  EXPECT_EQ((*tasks)[0].max_version, 41u);
  EXPECT_EQ((*tasks)[0].acked, (std::vector<uint32_t>{1, 2}));
  auto servers = store_->LoadServers();
  ASSERT_EQ(servers->size(), 1u);
  EXPECT_EQ((*servers)[0].failure_domain, "rack-a");
  auto tables = store_->LoadPgTables();
  ASSERT_EQ(tables->size(), 1u);
  EXPECT_EQ((*tables)[0].pgs[1][1], ServerId(4));
  EXPECT_EQ((*tables)[0].pending[1][0], ServerId(5));
  EXPECT_EQ((*tables)[0].sized_for, 7u);
  EXPECT_EQ(*store_->LoadOrphans(), (std::vector<InodeId>{InodeId(12)}));
  StoreBatch del;
  del.DeleteGcTask(3);
  del.DeleteOrphan(InodeId(12));
  ASSERT_TRUE(store_->Write(del, false).ok());
  EXPECT_TRUE(store_->LoadGcTasks()->empty());
  EXPECT_TRUE(store_->LoadOrphans()->empty());
  EXPECT_TRUE(store_->Sync().ok());
}

// Session state (docs/design.md "Metadata server restarts") round-trips: sessions, inode states
// with opens, lease and locks, replay records by slot, degraded writes; deleting a session
// deletes its replay records, an empty state deletes its record, DeleteSessionState clears all.
TEST_P(StoreTest, SessionStateRoundTripsAndGoesWithItsSession) {
  StoreBatch b;
  b.PutSession(SessionRecord{(uint64_t{5} << 32) | 1, "host-a"});
  b.PutSession(SessionRecord{(uint64_t{5} << 32) | 2, ""});
  InodeState st;
  st.opens[(uint64_t{5} << 32) | 1] = OpenCount{3, 1};
  st.opens[(uint64_t{5} << 32) | 2] = OpenCount{1, 0};
  st.lease_holder = (uint64_t{5} << 32) | 1;
  st.lease_version = 99;
  st.locks.push_back(LockRecord{(uint64_t{5} << 32) | 2, 17, LockType::kWrite, 10, UINT64_MAX, 4242,
                                false});
  st.locks.push_back(LockRecord{(uint64_t{5} << 32) | 1, 18, LockType::kRead, 0, UINT64_MAX, 1, true});
  b.PutInodeState(InodeId(40), st);
  b.PutReplay((uint64_t{5} << 32) | 1, 7);
  b.PutReplay((uint64_t{5} << 32) | 2, 7);
  b.PutDegradedWrite(DegradedWriteRecord{9, 4, {2, 3}});
  b.PutDegradedWrite(DegradedWriteRecord{3, 1, {6}});
  ASSERT_TRUE(store_->Write(b, false).ok());

  auto sessions = store_->LoadSessions();
  ASSERT_TRUE(sessions.ok());
  ASSERT_EQ(sessions->size(), 2u);
  EXPECT_EQ((*sessions)[0].client_name, "host-a");
  auto states = store_->LoadInodeStates();
  ASSERT_TRUE(states.ok()) << states.status().ToString();
  ASSERT_EQ(states->size(), 1u);
  const InodeState& got = (*states)[0].second;
  EXPECT_EQ((*states)[0].first, InodeId(40));
  EXPECT_EQ(got.opens.at((uint64_t{5} << 32) | 1).total, 3u);
  EXPECT_EQ(got.opens.at((uint64_t{5} << 32) | 1).write, 1u);
  EXPECT_EQ(got.lease_holder, (uint64_t{5} << 32) | 1);
  EXPECT_EQ(got.lease_version, 99u);
  ASSERT_EQ(got.locks.size(), 2u);
  EXPECT_EQ(got.locks[0].type, LockType::kWrite);
  EXPECT_EQ(got.locks[0].end, UINT64_MAX);
  EXPECT_EQ(got.locks[0].pid, 4242u);
  EXPECT_TRUE(got.locks[1].flock);
  EXPECT_TRUE(*store_->ReplayApplied((uint64_t{5} << 32) | 1, 7));
  EXPECT_FALSE(*store_->ReplayApplied((uint64_t{5} << 32) | 1, 8));
  // A later id in the same slot takes it.
  StoreBatch later;
  later.PutReplay((uint64_t{5} << 32) | 1, 7 + kReplaySlots);
  ASSERT_TRUE(store_->Write(later, false).ok());
  EXPECT_FALSE(*store_->ReplayApplied((uint64_t{5} << 32) | 1, 7));
  EXPECT_TRUE(*store_->ReplayApplied((uint64_t{5} << 32) | 1, 7 + kReplaySlots));
  auto degraded = store_->LoadDegradedWrites();
  ASSERT_TRUE(degraded.ok());
  ASSERT_EQ(degraded->size(), 2u);
  EXPECT_EQ((*degraded)[0].epoch, 3u);  // in epoch order
  EXPECT_EQ((*degraded)[1].servers, (std::vector<uint32_t>{2, 3}));

  StoreBatch end;
  end.DeleteSession((uint64_t{5} << 32) | 1);
  end.PutInodeState(InodeId(40), InodeState{});
  end.DeleteDegradedWrite(3);
  ASSERT_TRUE(store_->Write(end, false).ok());
  EXPECT_EQ(store_->LoadSessions()->size(), 1u);
  EXPECT_TRUE(store_->LoadInodeStates()->empty());
  EXPECT_FALSE(*store_->ReplayApplied((uint64_t{5} << 32) | 1, 7 + kReplaySlots));
  EXPECT_TRUE(*store_->ReplayApplied((uint64_t{5} << 32) | 2, 7));
  EXPECT_EQ(store_->LoadDegradedWrites()->size(), 1u);
  StoreBatch all;
  all.DeleteSessionState();
  ASSERT_TRUE(store_->Write(all, false).ok());
  EXPECT_TRUE(store_->LoadSessions()->empty());
  EXPECT_FALSE(*store_->ReplayApplied((uint64_t{5} << 32) | 2, 7));
  EXPECT_EQ(store_->LoadDegradedWrites()->size(), 1u) << "degraded writes are not session state";
}

INSTANTIATE_TEST_SUITE_P(Engines, StoreTest, ::testing::Values("rocksdb", "memory"));

// A store over a plain map that lets a test write raw values, to feed the decoders bad records.
class RawMapStore : public NamespaceStore {
 public:
  void Put(std::string key, std::string value) { kv_[std::move(key)] = std::move(value); }
  Status Sync() override { return OkStatus(); }

 protected:
  Result<std::optional<std::string>> GetRaw(std::string_view key) override {
    auto it = kv_.find(std::string(key));
    if (it == kv_.end()) return std::optional<std::string>();
    return std::optional<std::string>(it->second);
  }
  Status ScanRaw(std::string_view prefix, std::string_view start,
                 const std::function<bool(std::string_view, std::string_view)>& fn) override {
    for (auto it = kv_.lower_bound(std::string(start)); it != kv_.end(); ++it) {
      if (it->first.compare(0, prefix.size(), prefix) != 0) break;
      if (!fn(it->first, it->second)) break;
    }
    return OkStatus();
  }
  Status WriteRaw(const std::vector<StoreOp>&, bool) override {
    return Status(Code::kNotSupported, "raw map store: use Put");
  }

 private:
  std::map<std::string, std::string> kv_;
};

// Bad session-state records give kCorruption, never a half-read state: each row is a value too
// short for its fields, or one with bytes past its end, or a lock type that does not exist.
TEST(SessionStateDecodeTest, TruncatedOrBadRecordsAreCorruption) {
  std::string key_o = std::string("O") + std::string(8, '\0');
  std::string key_s = std::string("S") + std::string(8, '\0');
  std::string key_d = std::string("D") + std::string(8, '\0');
  std::string key_r = std::string("R") + std::string(8, '\0') + std::string(3, '\0') + "\x05";
  auto u64 = [](uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); };
  auto u32 = [](uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); };
  const std::string lock = u64(1) + u64(2) + u32(1) + u64(0) + u64(9) + u32(7) + std::string(1, '\0');
  const std::string good_state = u64(40) + u64(0) + u64(0) + u32(0) + u32(1) + lock;
  struct Row {
    const char* what;
    std::string key, value;
  };
  const std::vector<Row> rows = {
      {"state cut in its header", key_o, u64(40) + u64(1)},
      {"state claiming an open it lacks", key_o, u64(40) + u64(0) + u64(0) + u32(1)},
      {"state cut inside a lock", key_o, good_state.substr(0, good_state.size() - 3)},
      {"state with bytes past its end", key_o, good_state + "x"},
      {"state with lock type 2 (unlock)", key_o,
       u64(40) + u64(0) + u64(0) + u32(0) + u32(1) + u64(1) + u64(2) + u32(2) + u64(0) + u64(9) +
           u32(7) + std::string(1, '\0')},
      {"session with no id", key_s, u64(0) + u32(0)},
      {"session cut in its name", key_s, u64(5) + u32(10) + "abc"},
      {"degraded write cut in its servers", key_d, u64(1) + u64(1) + u32(3) + u32(1)},
      {"replay record cut", key_r, "abc"},
  };
  {
    RawMapStore store;
    store.Put(key_o, good_state);
    auto ok = store.LoadInodeStates();
    ASSERT_TRUE(ok.ok()) << "the well-formed record must decode: " << ok.status().ToString();
    ASSERT_EQ(ok->size(), 1u);
    EXPECT_EQ((*ok)[0].second.locks.at(0).pid, 7u);
  }
  for (const Row& row : rows) {
    RawMapStore store;
    store.Put(row.key, row.value);
    Status st;
    if (row.key[0] == 'O') st = store.LoadInodeStates().status();
    if (row.key[0] == 'S') st = store.LoadSessions().status();
    if (row.key[0] == 'D') st = store.LoadDegradedWrites().status();
    if (row.key[0] == 'R') st = store.ReplayApplied(0, 5).status();
    EXPECT_EQ(st.code(), Code::kCorruption) << row.what << ": " << st.ToString();
  }
}

TEST(RocksStoreTest, WritesSurviveReopen) {
  std::string dir = ScratchDir("reopen");
  {
    auto s = OpenRocksStore(dir + "/db");
    ASSERT_TRUE(s.ok());
    StoreBatch b;
    b.PutInode(SampleInode(33));
    ASSERT_TRUE((*s)->Write(b, false).ok());
  }
  auto s = OpenRocksStore(dir + "/db");
  ASSERT_TRUE(s.ok());
  auto n = (*s)->GetInode(InodeId(33));
  ASSERT_TRUE(n.ok() && n->has_value());
  EXPECT_EQ((*n)->size, 123456789u);
  s->reset();
  std::filesystem::remove_all(dir);
}

TEST(RocksStoreTest, SecondOpenOfLockedDirFails) {
  std::string dir = ScratchDir("lock");
  auto a = OpenRocksStore(dir + "/db");
  ASSERT_TRUE(a.ok());
  auto b = OpenRocksStore(dir + "/db");
  EXPECT_FALSE(b.ok());
  a->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace aquifer::meta

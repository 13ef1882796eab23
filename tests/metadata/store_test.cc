// NamespaceStore: the same behaviours on the RocksDB and the in-memory engine.
#include <sys/stat.h>

#include <filesystem>
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
  b.PutPgTable(PgTable{6, {{ServerId(1), ServerId(2)}, {ServerId(3), ServerId(4)}}});
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
  EXPECT_EQ(*store_->LoadOrphans(), (std::vector<InodeId>{InodeId(12)}));
  StoreBatch del;
  del.DeleteGcTask(3);
  del.DeleteOrphan(InodeId(12));
  ASSERT_TRUE(store_->Write(del, false).ok());
  EXPECT_TRUE(store_->LoadGcTasks()->empty());
  EXPECT_TRUE(store_->LoadOrphans()->empty());
  EXPECT_TRUE(store_->Sync().ok());
}

INSTANTIATE_TEST_SUITE_P(Engines, StoreTest, ::testing::Values("rocksdb", "memory"));

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

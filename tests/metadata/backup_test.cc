// Backups (MetadataService::Backup) and restores (RestoreBackup) of the namespace on a real
// RocksDB store in a scratch directory; test clocks as in the service tests.
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "aquifer/units.h"
#include "metadata/backup.h"
#include "service_test_util.h"

namespace aquifer::meta {
namespace {

namespace fs = std::filesystem;
using testing::Root;

class BackupTest : public testing::ServiceFixture {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/aquifer-backup-test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    scratch_ = tmpl;
    SetupLogging("warn");
    OpenDb(scratch_ + "/db");
  }
  void TearDown() override {
    svc_.reset();
    std::error_code ec;
    fs::remove_all(scratch_, ec);
  }
  void OpenDb(const std::string& dir) {
    svc_.reset();
    opts_.db = dir;
    auto store = OpenRocksStore(dir);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    Restart(std::move(*store));
    if (svc_->GetClusterMap().servers.empty()) AddServers(6);
  }
  // A file committed with `size` bytes; returns its attributes after the commit.
  Inode Written(InodeId parent, const std::string& name, uint64_t size, SessionId session) {
    CreateArgs a{parent, name, S_IFREG | 0644, 0, true, session, true};
    auto c = svc_->Create(a, Root());
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    if (!c.ok()) return Inode{};
    CommitArgs commit{c->attr.ino, session, size, {7, 0}, c->write_version, false};
    commit.records_stripes = true;
    commit.written_stripes = {{0, 1}};
    auto done = svc_->Commit(commit);
    EXPECT_TRUE(done.ok()) << done.status().ToString();
    EXPECT_TRUE(svc_->Release(c->attr.ino, session, true).ok());
    return done.ok() ? done->attr : Inode{};
  }

  std::string scratch_;
};

TEST_F(BackupTest, BadDestinationsAreRefusedWithTheirOwnErrorAndLeaveNothing) {
  fs::create_directories(scratch_ + "/full");
  std::ofstream(scratch_ + "/full/x") << "x";
  std::ofstream(scratch_ + "/file") << "x";
  const std::string long_path = "/" + std::string(5000, 'a');
  const std::string nul("/tmp/a\0b", 8);
  const std::string long_part = scratch_ + "/" + std::string(300, 'b');
  const struct {
    std::string dest;
    Code code;
    std::string says;
  } cases[] = {
      {"", Code::kInvalidArgument, "empty"},
      {"backups/b1", Code::kInvalidArgument, "not an absolute path"},
      {nul, Code::kInvalidArgument, "NUL"},
      {long_path, Code::kNameTooLong, "over 4095"},
      {long_part, Code::kNameTooLong, "over 255"},
      {scratch_ + "/../b1", Code::kInvalidArgument, "'..' component"},
      {scratch_ + "/./b1", Code::kInvalidArgument, "'.' component"},
      {"/", Code::kInvalidArgument, "names no directory"},
      {scratch_ + "/missing/b1", Code::kNotFound, "does not exist"},
      {scratch_ + "/file/b1", Code::kNotDirectory, "not a directory"},
      {scratch_ + "/file", Code::kNotDirectory, "exists and is not a directory"},
      {scratch_ + "/full", Code::kAlreadyExists, "not empty"},
      {scratch_ + "/db", Code::kInvalidArgument, "overlaps"},
      {scratch_ + "/db/inside", Code::kInvalidArgument, "overlaps"},
  };
  for (const auto& c : cases) {
    auto r = svc_->Backup(c.dest);
    ASSERT_FALSE(r.ok()) << c.dest.substr(0, 80);
    EXPECT_EQ(r.status().code(), c.code) << c.dest.substr(0, 80) << ": " << r.status().ToString();
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << r.status().ToString();
  }
  // Nothing was written beside the destinations (no partial directories left).
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(scratch_)) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 3u);  // db, full, file, nothing else
  EXPECT_EQ(std::distance(fs::directory_iterator(scratch_ + "/full"), fs::directory_iterator()), 1);

  // Under --backup-root only.
  fs::create_directories(scratch_ + "/root");
  svc_.reset();
  opts_.backup_root = scratch_ + "/root";
  OpenDb(scratch_ + "/db");
  auto outside = svc_->Backup(scratch_ + "/b1");
  EXPECT_EQ(outside.status().code(), Code::kPermissionDenied) << outside.status().ToString();
  EXPECT_EQ(svc_->Backup(scratch_ + "/root").status().code(), Code::kPermissionDenied);
  auto inside = svc_->Backup(scratch_ + "/root/b1");
  EXPECT_TRUE(inside.ok()) << inside.status().ToString();
}

TEST_F(BackupTest, TheInMemoryStoreCannotBeBackedUp) {
  svc_.reset();
  opts_.db = scratch_ + "/db";  // exists, so only the engine can refuse
  Restart(NewMemoryStore());
  auto r = svc_->Backup(scratch_ + "/b1");
  EXPECT_EQ(r.status().code(), Code::kNotSupported) << r.status().ToString();
  EXPECT_FALSE(fs::exists(scratch_ + "/b1"));
}

// The whole round trip: a backup taken while a thread keeps creating files is a consistent
// namespace; restored, it has what existed at the backup and not what came after; the restored
// server hands out inode numbers, write versions, server ids and session ids above everything
// the old one handed out after the backup; a file from the backup opened for write gets the
// versions written after the backup as abandoned.
TEST_F(BackupTest, ARestoredBackupHasItsNamespaceAndHandsOutNothingTheLostServerUsed) {
  auto session = svc_->OpenSession("writer");
  ASSERT_TRUE(session.ok());
  Inode dir = Dir(kRootInode, "data");
  Inode before = Written(dir.ino, "before", 3 * kMiB, session->session);
  ASSERT_TRUE(svc_->SetXattr(before.ino, "user.tag", "v1", 0, Root()).ok());

  std::atomic<bool> stop{false};
  std::atomic<int> made{0};
  std::thread creator([&] {
    for (int i = 0; !stop.load(); ++i) {
      CreateArgs a{dir.ino, "busy" + std::to_string(i), S_IFREG | 0644, 0, true, SessionId(),
                   false};
      if (svc_->Create(a, Root()).ok()) made.fetch_add(1);
      if (i % 7 == 0) (void)svc_->Mkdir(dir.ino, "d" + std::to_string(i), 0755, Root());
    }
  });
  while (made.load() < 50) std::this_thread::yield();
  auto backup = svc_->Backup(scratch_ + "/b1/");  // a trailing '/' is fine
  while (made.load() < 150) std::this_thread::yield();  // more after the backup
  stop = true;
  creator.join();
  ASSERT_TRUE(backup.ok()) << backup.status().ToString();
  EXPECT_EQ(backup->dir, scratch_ + "/b1");
  EXPECT_GT(backup->files, 2u);
  EXPECT_TRUE(fs::exists(scratch_ + "/b1/CURRENT"));
  EXPECT_TRUE(fs::exists(scratch_ + "/b1/" + kBackupManifest));
  EXPECT_TRUE(backup->same_file_system);
  // A second backup into an existing empty directory.
  fs::create_directories(scratch_ + "/b2");
  ASSERT_TRUE(svc_->Backup(scratch_ + "/b2").ok());
  EXPECT_EQ(svc_->Backup(scratch_ + "/b2").status().code(), Code::kAlreadyExists);

  // After the backup the old server goes on: a file, a rewrite of `before`, a new server.
  Inode after = Written(kRootInode, "after", 100, session->session);
  auto reopened = svc_->Open(before.ino, O_RDWR, session->session, Root());
  ASSERT_TRUE(reopened.ok());
  const uint64_t post_backup_version = reopened->write_version;
  ASSERT_TRUE(svc_->Commit(CommitArgs{before.ino, session->session, 3 * kMiB, {9, 0},
                                      post_backup_version, false})
                  .ok());
  auto late_server =
      svc_->RegisterServer(ServerRegistration{"127.0.0.1:7999", "late", 1000000, 0, "late-uuid"});
  ASSERT_TRUE(late_server.ok());
  const uint64_t old_session = session->session.value();
  const uint64_t old_max_ino = after.ino.value();
  const uint64_t old_inodes = svc_->InodeCount();
  svc_.reset();  // the metadata disk is lost

  // A restore refuses what is not a backup, and a directory that is not empty.
  RestoreOptions o;
  o.from = scratch_ + "/db";
  o.meta_dir = scratch_ + "/restored";
  EXPECT_EQ(RestoreBackup(o).status().code(), Code::kNotFound);
  o.from = scratch_ + "/b1";
  o.meta_dir = scratch_ + "/db";
  auto refused = RestoreBackup(o);
  EXPECT_EQ(refused.status().code(), Code::kAlreadyExists) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("--force"), std::string::npos);
  o.meta_dir = scratch_ + "/b1/inner";
  EXPECT_EQ(RestoreBackup(o).status().code(), Code::kInvalidArgument);

  o.meta_dir = scratch_ + "/restored";
  o.now_unix_ms = [&] { return backup->manifest.created_unix_ms + 10 * 1000; };  // 10 s later
  auto restored = RestoreBackup(o);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(restored->ino_margin, kRestoreMinInoMargin);  // 11 s x 100,000 is below 2^24
  EXPECT_EQ(restored->restores, 1u);
  EXPECT_TRUE(restored->moved_aside.empty());
  EXPECT_GT(restored->ino_floor, old_max_ino);

  OpenDb(scratch_ + "/restored");
  CheckInvariants();  // consistent although creates ran during the checkpoint
  EXPECT_LT(svc_->InodeCount(), old_inodes);
  auto got = svc_->Lookup(dir.ino, "before", Root());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->size, 3 * kMiB);
  EXPECT_EQ(got->data_version, before.data_version) << "the backup's version, not the rewrite's";
  EXPECT_EQ(*svc_->GetXattr(before.ino, "user.tag", Root()), "v1");
  EXPECT_EQ(svc_->Lookup(kRootInode, "after", Root()).status().code(), Code::kNotFound);
  ClusterMap map = svc_->GetClusterMap();
  EXPECT_EQ(map.restore_version_floor, restored->version_floor);
  EXPECT_EQ(map.restore_ino_floor, restored->ino_floor);
  EXPECT_GT(map.restore_version_floor, post_backup_version);

  // Above everything the lost server handed out after the backup.
  auto fresh_session = svc_->OpenSession("new");
  ASSERT_TRUE(fresh_session.ok());
  EXPECT_GT(fresh_session->session.value() >> 32, old_session >> 32);
  Inode fresh = File(kRootInode, "fresh");
  EXPECT_EQ(fresh.ino.value(), restored->ino_floor);
  auto rewrite = svc_->Open(before.ino, O_RDWR, fresh_session->session, Root());
  ASSERT_TRUE(rewrite.ok());
  EXPECT_GE(rewrite->write_version, restored->version_floor);
  // The lost server's post-backup version of `before` is never its data again.
  ASSERT_FALSE(rewrite->attr.abandoned_versions.empty());
  const auto range = rewrite->attr.abandoned_versions.back();
  EXPECT_EQ(range.first, before.data_version + 1);
  EXPECT_EQ(range.second, restored->version_floor - 1);
  EXPECT_TRUE(range.first <= post_backup_version && post_backup_version <= range.second);
  // The server that registered after the backup comes back under a new id, past the old ones.
  auto again =
      svc_->RegisterServer(ServerRegistration{"127.0.0.1:7999", "late", 1000000, 0, "late-uuid"});
  ASSERT_TRUE(again.ok());
  EXPECT_GT(again->first.value(), late_server->first.value() + kRestoreServerIdMargin - 1);

  // Restoring again with --force moves the current directory aside.
  svc_.reset();
  o.force = true;
  auto forced = RestoreBackup(o);
  ASSERT_TRUE(forced.ok()) << forced.status().ToString();
  EXPECT_FALSE(forced->moved_aside.empty());
  EXPECT_TRUE(fs::exists(forced->moved_aside + "/CURRENT"));
  EXPECT_EQ(forced->restores, 1u) << "counted from the backup's own count";
}

TEST_F(BackupTest, TheInodeMarginGrowsWithTheBackupsAgeAndCanBeGiven) {
  ASSERT_TRUE(svc_->Backup(scratch_ + "/b1").ok());
  auto manifest = ReadBackupManifest(scratch_ + "/b1");
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  EXPECT_EQ(manifest->source_db, scratch_ + "/db");
  RestoreOptions o;
  o.from = scratch_ + "/b1";
  o.meta_dir = scratch_ + "/r1";
  o.now_unix_ms = [&] { return manifest->created_unix_ms + 3600 * 1000 - 1; };  // an hour
  auto hour = RestoreBackup(o);
  ASSERT_TRUE(hour.ok()) << hour.status().ToString();
  EXPECT_EQ(hour->ino_margin, 3600 * kRestoreCreatesPerSecond);
  o.meta_dir = scratch_ + "/r2";
  o.ino_margin = 12345;
  auto given = RestoreBackup(o);
  ASSERT_TRUE(given.ok()) << given.status().ToString();
  EXPECT_EQ(given->ino_margin, 12345u);
  EXPECT_EQ(given->ino_floor + 3600 * kRestoreCreatesPerSecond - 12345, hour->ino_floor);
  o.meta_dir = scratch_ + "/r3";
  o.ino_margin = uint64_t{1} << 62;
  EXPECT_EQ(RestoreBackup(o).status().code(), Code::kInvalidArgument);

  // A manifest that does not parse is not taken for a backup.
  std::ofstream(scratch_ + "/b1/" + kBackupManifest, std::ios::trunc) << "format x\n";
  o.meta_dir = scratch_ + "/r4";
  o.ino_margin = 0;
  EXPECT_EQ(RestoreBackup(o).status().code(), Code::kCorruption);
  EXPECT_FALSE(fs::exists(scratch_ + "/r4"));
}

}  // namespace
}  // namespace aquifer::meta

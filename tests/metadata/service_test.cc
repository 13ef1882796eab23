// MetadataService behaviours, on the in-memory store with test clocks.
#include <linux/fs.h>
#include <sys/xattr.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <future>
#include <random>
#include <set>
#include <thread>

#include "aquifer/units.h"
#include "service_test_util.h"

namespace aquifer::meta {
namespace {

using testing::Root;
using testing::User;

class MetadataServiceTest : public testing::ServiceFixture {
 protected:
  void SetUp() override {
    ServiceFixture::SetUp();
    AddServers(6);
  }
};

TEST_F(MetadataServiceTest, CreatesRootOnFirstStart) {
  auto root = svc_->GetAttr(kRootInode);
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root->mode, S_IFDIR | 0755u);
  EXPECT_EQ(root->uid, 0u);
  EXPECT_EQ(root->gid, 0u);
  EXPECT_EQ(root->nlink, 2u);
  CheckInvariants();
}

TEST_F(MetadataServiceTest, NewFileGetsClusterDefaultLayoutAndUpdatesParent) {
  auto before = *svc_->GetAttr(kRootInode);
  Inode f = File(kRootInode, "a", 0640);
  EXPECT_EQ(f.layout.k, 4u);
  EXPECT_EQ(f.layout.m, 2u);
  EXPECT_EQ(f.layout.unit_bytes, 1u << 20);
  EXPECT_EQ(f.layout.pg_count, 64u);
  EXPECT_EQ(f.nlink, 1u);
  EXPECT_EQ(f.mode, S_IFREG | 0640u);
  auto after = *svc_->GetAttr(kRootInode);
  EXPECT_GT(after.mtime, before.mtime);
  EXPECT_GT(after.ctime, before.ctime);
  auto looked = svc_->Lookup(kRootInode, "a", User());
  ASSERT_TRUE(looked.ok());
  EXPECT_EQ(looked->ino, f.ino);
  CheckInvariants();
}

TEST_F(MetadataServiceTest, MkdirLinkUnlinkRmdirKeepCounts) {
  Inode d = Dir(kRootInode, "d");
  EXPECT_EQ(svc_->GetAttr(kRootInode)->nlink, 3u);
  Inode f = File(d.ino, "f");
  auto l = svc_->Link(f.ino, kRootInode, "hard", Root());
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->nlink, 2u);
  CheckInvariants();
  ASSERT_TRUE(svc_->Unlink(d.ino, "f", Root()).ok());
  EXPECT_EQ(svc_->GetAttr(f.ino)->nlink, 1u);
  EXPECT_TRUE(svc_->PendingGcTasks().empty());
  ASSERT_TRUE(svc_->Rmdir(kRootInode, "d", Root()).ok());
  EXPECT_EQ(svc_->GetAttr(kRootInode)->nlink, 2u);
  ASSERT_TRUE(svc_->Unlink(kRootInode, "hard", Root()).ok());
  EXPECT_EQ(svc_->GetAttr(f.ino).status().code(), Code::kNotFound);
  auto gc = svc_->PendingGcTasks();
  ASSERT_EQ(gc.size(), 1u);
  EXPECT_EQ(gc[0].ino, f.ino);
  EXPECT_EQ(gc[0].from_stripe, 0u);
  EXPECT_EQ(gc[0].max_version, UINT64_MAX);
  CheckInvariants();
}

// ListGcTasks' pages (fsck): id order after `after_id`, at most `limit`, eof only at the end.
TEST_F(MetadataServiceTest, GcTasksAfterPagesInIdOrder) {
  std::vector<InodeId> inos;
  for (int i = 0; i < 3; ++i) {
    inos.push_back(File(kRootInode, "g" + std::to_string(i)).ino);
    ASSERT_TRUE(svc_->Unlink(kRootInode, "g" + std::to_string(i), Root()).ok());
  }
  bool eof = true;
  std::vector<GcTask> first = svc_->GcTasksAfter(0, 2, &eof);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_FALSE(eof);
  EXPECT_LT(first[0].id, first[1].id);
  std::vector<GcTask> rest = svc_->GcTasksAfter(first[1].id, 2, &eof);
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_TRUE(eof);
  EXPECT_EQ(first[0].ino, inos[0]);
  EXPECT_EQ(first[1].ino, inos[1]);
  EXPECT_EQ(rest[0].ino, inos[2]);
  EXPECT_TRUE(svc_->GcTasksAfter(rest[0].id, 2, &eof).empty());
  EXPECT_TRUE(eof);
}

TEST_F(MetadataServiceTest, SymlinkAndMknodAndReadlink) {
  auto s = svc_->Symlink(kRootInode, "ln", "target/path", Root());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->size, 11u);
  EXPECT_EQ(*svc_->Readlink(s->ino), "target/path");
  CreateArgs a{kRootInode, "fifo", S_IFIFO | 0600, 0, true, SessionId(), false};
  auto fifo = svc_->Create(a, Root());
  ASSERT_TRUE(fifo.ok());
  EXPECT_TRUE(S_ISFIFO(fifo->attr.mode));
  EXPECT_TRUE(fifo->attr.layout.empty());
  CheckInvariants();
}

TEST_F(MetadataServiceTest, RenameReplacesTargetAndMovesDirectories) {
  Inode a = Dir(kRootInode, "a");
  Inode b = Dir(kRootInode, "b");
  Inode f = File(a.ino, "f");
  Inode g = File(b.ino, "g");
  ASSERT_TRUE(svc_->Rename(a.ino, "f", b.ino, "g", 0, Root()).ok());
  EXPECT_EQ(svc_->Lookup(b.ino, "g", Root())->ino, f.ino);
  EXPECT_EQ(svc_->GetAttr(g.ino).status().code(), Code::kNotFound);
  Inode sub = Dir(a.ino, "sub");
  ASSERT_TRUE(svc_->Rename(a.ino, "sub", b.ino, "sub2", 0, Root()).ok());
  EXPECT_EQ(svc_->GetAttr(a.ino)->nlink, 2u);
  EXPECT_EQ(svc_->GetAttr(b.ino)->nlink, 3u);
  EXPECT_EQ(svc_->GetAttr(sub.ino)->parent, b.ino);
  EXPECT_EQ(svc_->Lookup(sub.ino, "..", Root())->ino, b.ino);
  // Same inode under both names: nothing happens.
  ASSERT_TRUE(svc_->Link(f.ino, b.ino, "f2", Root()).ok());
  ASSERT_TRUE(svc_->Rename(b.ino, "g", b.ino, "f2", 0, Root()).ok());
  EXPECT_EQ(svc_->GetAttr(f.ino)->nlink, 2u);
  CheckInvariants();
}

TEST_F(MetadataServiceTest, RenameExchangeSwapsFileAndDirectory) {
  Inode a = Dir(kRootInode, "a");
  Inode f = File(kRootInode, "f");
  Inode d = Dir(a.ino, "d");
  ASSERT_TRUE(svc_->Rename(kRootInode, "f", a.ino, "d", RENAME_EXCHANGE, Root()).ok());
  EXPECT_EQ(svc_->Lookup(kRootInode, "f", Root())->ino, d.ino);
  EXPECT_EQ(svc_->Lookup(a.ino, "d", Root())->ino, f.ino);
  EXPECT_EQ(svc_->GetAttr(d.ino)->parent, kRootInode);
  EXPECT_EQ(svc_->GetAttr(a.ino)->nlink, 2u);
  EXPECT_EQ(svc_->GetAttr(kRootInode)->nlink, 4u);
  CheckInvariants();
}

TEST_F(MetadataServiceTest, RenameNoReplaceMovesWhenTargetIsAbsent) {
  File(kRootInode, "x");
  ASSERT_TRUE(svc_->Rename(kRootInode, "x", kRootInode, "y", RENAME_NOREPLACE, Root()).ok());
  EXPECT_TRUE(svc_->Lookup(kRootInode, "y", Root()).ok());
  CheckInvariants();
}

// Every bad input gives its code and changes nothing.
TEST_F(MetadataServiceTest, BadInputsGiveTheirErrorAndChangeNothing) {
  Inode d = Dir(kRootInode, "d");
  Inode sub = Dir(d.ino, "sub");
  File(sub.ino, "inner");
  Inode f = File(kRootInode, "f");
  Inode ne = Dir(kRootInode, "nonempty");
  File(ne.ino, "x");
  Inode priv = Dir(kRootInode, "priv", 0700);
  File(priv.ino, "secret");
  Inode lnk = *svc_->Symlink(kRootInode, "ln", "f", Root());
  Inode mine = Dir(kRootInode, "mine", 0755, Root());
  ASSERT_TRUE(svc_->SetAttr(mine.ino, SetAttrArgs{kSetUid | kSetGid, 0, 1000, 1000}, Root(),
                            SessionId())
                  .ok());
  const std::string long_name(256, 'n');
  auto mk = [&](InodeId p, std::string name) { return svc_->Mkdir(p, name, 0755, Root()).status(); };
  auto create = [&](InodeId p, std::string name, const Caller& c, SessionId s = SessionId()) {
    CreateArgs a{p, std::move(name), S_IFREG | 0644, 0, true, s, false};
    return svc_->Create(a, c).status();
  };
  auto setx = [&](InodeId ino, std::string name, std::string value, uint32_t flags) {
    return svc_->SetXattr(ino, name, value, flags, Root());
  };
  struct Row {
    const char* what;
    std::function<Status()> op;
    Code want;
  };
  const std::vector<Row> rows = {
      {"lookup missing", [&] { return svc_->Lookup(kRootInode, "nope", Root()).status(); },
       Code::kNotFound},
      {"getattr unknown inode", [&] { return svc_->GetAttr(InodeId(99999)).status(); },
       Code::kNotFound},
      {"create in missing parent", [&] { return create(InodeId(99999), "z", Root()); },
       Code::kNotFound},
      {"create existing exclusive", [&] { return create(kRootInode, "f", Root()); },
       Code::kAlreadyExists},
      {"mkdir existing", [&] { return mk(kRootInode, "d"); }, Code::kAlreadyExists},
      {"mkdir name over 255", [&] { return mk(kRootInode, long_name); }, Code::kNameTooLong},
      {"mkdir name with slash", [&] { return mk(kRootInode, "a/b"); }, Code::kInvalidArgument},
      {"mkdir name with NUL", [&] { return mk(kRootInode, std::string("a\0b", 3)); },
       Code::kInvalidArgument},
      {"mkdir dot", [&] { return mk(kRootInode, "."); }, Code::kInvalidArgument},
      {"mkdir dotdot", [&] { return mk(kRootInode, ".."); }, Code::kInvalidArgument},
      {"mkdir empty name", [&] { return mk(kRootInode, ""); }, Code::kInvalidArgument},
      {"mkdir under a file", [&] { return mk(f.ino, "x"); }, Code::kNotDirectory},
      {"lookup under a file", [&] { return svc_->Lookup(f.ino, "x", Root()).status(); },
       Code::kNotDirectory},
      {"unlink a directory", [&] { return svc_->Unlink(kRootInode, "d", Root()); },
       Code::kIsDirectory},
      {"unlink missing", [&] { return svc_->Unlink(kRootInode, "nope", Root()); },
       Code::kNotFound},
      {"rmdir a file", [&] { return svc_->Rmdir(kRootInode, "f", Root()); }, Code::kNotDirectory},
      {"rmdir non-empty", [&] { return svc_->Rmdir(kRootInode, "nonempty", Root()); },
       Code::kNotEmpty},
      {"rename dir into own subtree",
       [&] { return svc_->Rename(kRootInode, "d", sub.ino, "d2", 0, Root()); },
       Code::kInvalidArgument},
      {"rename dir onto itself below", [&] { return svc_->Rename(kRootInode, "d", d.ino, "x", 0, Root()); },
       Code::kInvalidArgument},
      {"rename noreplace onto existing",
       [&] { return svc_->Rename(kRootInode, "f", kRootInode, "ln", RENAME_NOREPLACE, Root()); },
       Code::kAlreadyExists},
      {"rename exchange with missing target",
       [&] { return svc_->Rename(kRootInode, "f", kRootInode, "nope", RENAME_EXCHANGE, Root()); },
       Code::kNotFound},
      {"rename both flags",
       [&] { return svc_->Rename(kRootInode, "f", kRootInode, "ln", 3, Root()); },
       Code::kInvalidArgument},
      {"rename unknown flag",
       [&] { return svc_->Rename(kRootInode, "f", kRootInode, "g", 8, Root()); },
       Code::kInvalidArgument},
      {"rename missing source",
       [&] { return svc_->Rename(kRootInode, "nope", kRootInode, "g", 0, Root()); },
       Code::kNotFound},
      {"rename dir over file",
       [&] { return svc_->Rename(kRootInode, "d", kRootInode, "f", 0, Root()); },
       Code::kNotDirectory},
      {"rename file over dir",
       [&] { return svc_->Rename(kRootInode, "f", kRootInode, "nonempty", 0, Root()); },
       Code::kIsDirectory},
      {"rename dir over non-empty dir",
       [&] { return svc_->Rename(kRootInode, "d", kRootInode, "nonempty", 0, Root()); },
       Code::kNotEmpty},
      {"rename to dot", [&] { return svc_->Rename(kRootInode, "f", kRootInode, ".", 0, Root()); },
       Code::kInvalidArgument},
      {"hard link to a directory",
       [&] { return svc_->Link(d.ino, kRootInode, "dl", Root()).status(); },
       Code::kNotPermitted},
      {"hard link onto existing name",
       [&] { return svc_->Link(f.ino, kRootInode, "d", Root()).status(); },
       Code::kAlreadyExists},
      {"user creates in root-owned 0755 dir", [&] { return create(kRootInode, "u", User()); },
       Code::kPermissionDenied},
      {"user looks up in 0700 dir",
       [&] { return svc_->Lookup(priv.ino, "secret", User()).status(); },
       Code::kPermissionDenied},
      {"user lists a 0700 dir",
       [&] {
         bool eof;
         return svc_->ReadDir(priv.ino, 0, 10, false, User(), &eof).status();
       },
       Code::kPermissionDenied},
      {"user unlinks in root-owned dir", [&] { return svc_->Unlink(kRootInode, "f", User()); },
       Code::kPermissionDenied},
      {"user chmods root's file",
       [&] { return svc_->SetAttr(f.ino, SetAttrArgs{kSetMode, 0777}, User(), SessionId()).status(); },
       Code::kNotPermitted},
      {"user chowns own dir to root",
       [&] {
         return svc_->SetAttr(mine.ino, SetAttrArgs{kSetUid, 0, 0}, User(), SessionId()).status();
       },
       Code::kNotPermitted},
      {"user chgrps own dir to a group it lacks",
       [&] {
         return svc_->SetAttr(mine.ino, SetAttrArgs{kSetGid, 0, 0, 5}, User(), SessionId())
             .status();
       },
       Code::kNotPermitted},
      {"user sets explicit times on root's file",
       [&] {
         SetAttrArgs a;
         a.valid = kSetMtime;
         a.mtime = {5, 5};
         return svc_->SetAttr(f.ino, a, User(), SessionId()).status();
       },
       Code::kNotPermitted},
      {"user truncates root's 0644 file",
       [&] {
         SetAttrArgs a;
         a.valid = kSetSize;
         return svc_->SetAttr(f.ino, a, User(), SessionId()).status();
       },
       Code::kPermissionDenied},
      {"user opens root's 0644 file for write",
       [&] { return svc_->Open(f.ino, O_WRONLY, SessionId(), User()).status(); },
       Code::kPermissionDenied},
      {"truncate a directory",
       [&] {
         SetAttrArgs a;
         a.valid = kSetSize;
         return svc_->SetAttr(d.ino, a, Root(), SessionId()).status();
       },
       Code::kIsDirectory},
      {"open a directory for write",
       [&] { return svc_->Open(d.ino, O_RDWR, SessionId(), Root()).status(); },
       Code::kIsDirectory},
      {"readlink of a file", [&] { return svc_->Readlink(f.ino).status(); },
       Code::kInvalidArgument},
      {"symlink with empty target",
       [&] { return svc_->Symlink(kRootInode, "s2", "", Root()).status(); }, Code::kNotFound},
      {"symlink over existing name",
       [&] { return svc_->Symlink(kRootInode, "f", "x", Root()).status(); },
       Code::kAlreadyExists},
      {"getxattr missing", [&] { return svc_->GetXattr(f.ino, "user.none", Root()).status(); },
       Code::kNoData},
      {"setxattr replace missing", [&] { return setx(f.ino, "user.none", "v", XATTR_REPLACE); },
       Code::kNoData},
      {"setxattr unknown namespace", [&] { return setx(f.ino, "weird.x", "v", 0); },
       Code::kNotSupported},
      {"setxattr of a bare namespace", [&] { return setx(f.ino, "user.", "v", 0); },
       Code::kInvalidArgument},
      {"getxattr of a bare namespace",
       [&] { return svc_->GetXattr(f.ino, "security.", Root()).status(); },
       Code::kInvalidArgument},
      {"setxattr user on symlink", [&] { return setx(lnk.ino, "user.a", "v", 0); },
       Code::kNotPermitted},
      {"removexattr missing", [&] { return svc_->RemoveXattr(f.ino, "user.none", Root()); },
       Code::kNoData},
      {"layout k=0", [&] { return setx(d.ino, kLayoutXattr, "k=0 m=2 unit=1048576", 0); },
       Code::kInvalidArgument},
      {"layout unit not 4K aligned", [&] { return setx(d.ino, kLayoutXattr, "unit=1000", 0); },
       Code::kInvalidArgument},
      {"layout garbage", [&] { return setx(d.ino, kLayoutXattr, "bogus", 0); },
       Code::kInvalidArgument},
      {"layout unknown key", [&] { return setx(d.ino, kLayoutXattr, "q=1", 0); },
       Code::kInvalidArgument},
      {"layout empty", [&] { return setx(d.ino, kLayoutXattr, "", 0); }, Code::kInvalidArgument},
      {"layout k past the codec's 16",
       [&] { return setx(d.ino, kLayoutXattr, "k=17 m=2 unit=1048576", 0); },
       Code::kInvalidArgument},
      {"layout m past the codec's 4",
       [&] { return setx(d.ino, kLayoutXattr, "k=1 m=5 unit=1048576", 0); },
       Code::kInvalidArgument},
      {"layout key given twice",
       [&] { return setx(d.ino, kLayoutXattr, "k=1 m=1 unit=4096 k=3", 0); },
       Code::kInvalidArgument},
      {"layout unit and unit_bytes both",
       [&] { return setx(d.ino, kLayoutXattr, "unit=4096 unit_bytes=8192", 0); },
       Code::kInvalidArgument},
      {"layout on a file of the wrong text", [&] { return setx(f.ino, kLayoutXattr, "k=x", 0); },
       Code::kInvalidArgument},
      {"create with an unknown session",
       [&] { return create(kRootInode, "s", Root(), SessionId(12345)); }, Code::kStale},
      {"create a directory type through Create",
       [&] {
         CreateArgs a{kRootInode, "dd", S_IFDIR | 0755, 0, true, SessionId(), false};
         return svc_->Create(a, Root()).status();
       },
       Code::kInvalidArgument},
  };
  for (const Row& row : rows) {
    std::string before = CheckInvariants();
    Status st = row.op();
    EXPECT_EQ(st.code(), row.want) << row.what << ": got " << st.ToString();
    EXPECT_EQ(CheckInvariants(), before) << row.what << " changed the namespace";
  }
}

TEST_F(MetadataServiceTest, RootBypassesPermissionsAndOwnersMaySetTimes) {
  Inode priv = Dir(kRootInode, "priv", 0000);
  EXPECT_TRUE(svc_->Mkdir(priv.ino, "x", 0755, Root()).ok());
  Inode home = Dir(kRootInode, "home", 0777);
  Inode f = File(home.ino, "mine", 0600, User());
  ASSERT_EQ(f.uid, 1000u);
  SetAttrArgs t;
  t.valid = kSetAtime | kSetMtime;
  t.atime = {100, 123456789};
  t.mtime = {200, 987654321};
  auto r = svc_->SetAttr(f.ino, t, User(), SessionId());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->mtime, (Timespec{200, 987654321}));
  EXPECT_EQ(r->atime, (Timespec{100, 123456789}));
  Caller member = User(1000, 1000);
  member.groups = {50};
  auto chgrp = svc_->SetAttr(f.ino, SetAttrArgs{kSetGid, 0, 0, 50}, member, SessionId());
  ASSERT_TRUE(chgrp.ok());
  EXPECT_EQ(chgrp->gid, 50u);
  auto chmod = svc_->SetAttr(f.ino, SetAttrArgs{kSetMode, 0640}, User(), SessionId());
  ASSERT_TRUE(chmod.ok());
  EXPECT_EQ(chmod->mode, S_IFREG | 0640u);
}

// A non-owner's write to a setuid file makes the kernel send a chmod that clears the set-id
// bits, from the writer (FUSE has no other way to say it): it must succeed for anyone who may
// write the file, and a non-owner must not change any other bit that way.
TEST_F(MetadataServiceTest, NonOwnerWhoMayWriteCanOnlyClearSetIdBits) {
  Inode suid = File(kRootInode, "suid", 04777);
  ASSERT_EQ(suid.mode, S_IFREG | 04777u);
  auto cleared = svc_->SetAttr(suid.ino, SetAttrArgs{kSetMode, 0777}, User(), SessionId());
  ASSERT_TRUE(cleared.ok()) << cleared.status().ToString();
  EXPECT_EQ(cleared->mode, S_IFREG | 0777u);
  EXPECT_EQ(cleared->uid, 0u);

  // Both bits at once (setgid with group exec), together with a truncate (open O_TRUNC).
  Inode both = File(kRootInode, "both", 06777);
  SetAttrArgs trunc{kSetMode | kSetSize, 0777};
  auto r = svc_->SetAttr(both.ino, trunc, User(), SessionId());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->mode, S_IFREG | 0777u);

  // Setgid without group exec stays (the kernel keeps it); a repeated request is a no-op, even
  // from a caller outside the file's group.
  Inode sgid = File(kRootInode, "sgid", 02767);
  auto same = svc_->SetAttr(sgid.ino, SetAttrArgs{kSetMode, 02767}, User(), SessionId());
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ(same->mode, S_IFREG | 02767u);

  Inode other = File(kRootInode, "other", 04777);
  Inode ro = File(kRootInode, "ro", 04755);
  struct Row {
    const char* what;
    InodeId ino;
    uint32_t mode;
  } rows[] = {
      {"clears another bit too", other.ino, 0776},
      {"sets setgid while clearing setuid", other.ino, 02777},
      {"keeps every bit but has no write right", ro.ino, 04755},
      {"clears setuid without write right", ro.ino, 0755},
  };
  for (const Row& row : rows) {
    const uint32_t mode_before = svc_->GetAttr(row.ino)->mode;
    auto st = svc_->SetAttr(row.ino, SetAttrArgs{kSetMode, row.mode}, User(), SessionId());
    EXPECT_EQ(st.status().code(), Code::kNotPermitted) << row.what;
    EXPECT_EQ(svc_->GetAttr(row.ino)->mode, mode_before) << row.what;
  }
}

TEST_F(MetadataServiceTest, StickyDirectoryProtectsOthersEntries) {
  Inode tmp = Dir(kRootInode, "tmp", 01777);
  File(tmp.ino, "alice", 0644, User(1001, 1001));
  EXPECT_EQ(svc_->Unlink(tmp.ino, "alice", User(1002, 1002)).code(), Code::kNotPermitted);
  EXPECT_TRUE(svc_->Unlink(tmp.ino, "alice", User(1001, 1001)).ok());
}

TEST_F(MetadataServiceTest, ReadDirCookiesResumeAcrossInsertsAndRemoves) {
  Inode d = Dir(kRootInode, "d");
  for (int i = 0; i < 20; ++i) File(d.ino, "f" + std::to_string(i));
  bool eof = false;
  auto first = svc_->ReadDir(d.ino, 0, 5, false, Root(), &eof);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 5u);
  EXPECT_FALSE(eof);
  // Between pages: remove an entry not yet seen and one already seen, add a new one.
  ASSERT_TRUE(svc_->Unlink(d.ino, "f2", Root()).ok());
  ASSERT_TRUE(svc_->Unlink(d.ino, "f10", Root()).ok());
  File(d.ino, "late");
  std::vector<std::string> seen;
  for (const auto& e : *first) seen.push_back(e.name);
  uint64_t cookie = first->back().cookie;
  while (!eof) {
    auto page = svc_->ReadDir(d.ino, cookie, 5, true, Root(), &eof);
    ASSERT_TRUE(page.ok());
    for (const auto& e : *page) {
      seen.push_back(e.name);
      EXPECT_TRUE(e.attr.has_value());
      EXPECT_EQ(e.attr->ino, e.ino);
      cookie = e.cookie;
    }
  }
  // Every entry present throughout shows once; the removed unseen one does not; the new one does.
  std::set<std::string> unique(seen.begin(), seen.end());
  EXPECT_EQ(unique.size(), seen.size());
  EXPECT_EQ(unique.count("f10"), 0u);
  EXPECT_EQ(unique.count("f2"), 1u);  // seen before it was removed
  EXPECT_EQ(unique.count("late"), 1u);
  EXPECT_EQ(seen.size(), 20u);
}

TEST_F(MetadataServiceTest, LayoutXattrSetsDirDefaultsInheritedByNewFilesAndSubdirs) {
  Inode d = Dir(kRootInode, "d");
  EXPECT_EQ(*svc_->GetXattr(d.ino, kLayoutXattr, Root()), "k=4 m=2 unit=1048576");
  AddServers(2, "extra");  // 8 domains now: width 8 can be placed
  ASSERT_TRUE(svc_->SetXattr(d.ino, kLayoutXattr, "k=6 m=2 unit=65536", 0, Root()).ok());
  EXPECT_EQ(*svc_->GetXattr(d.ino, kLayoutXattr, Root()), "k=6 m=2 unit=65536");
  Inode sub = Dir(d.ino, "sub");
  Inode f = File(sub.ino, "f");
  EXPECT_EQ(f.layout.k, 6u);
  EXPECT_EQ(f.layout.m, 2u);
  EXPECT_EQ(f.layout.unit_bytes, 65536u);
  EXPECT_EQ(*svc_->GetXattr(f.ino, kLayoutXattr, Root()), "k=6 m=2 unit=65536");
  auto listed = svc_->ListXattr(f.ino, Root());
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());  // never listed
  // A file's layout changes while empty; later only the same value is accepted.
  ASSERT_TRUE(svc_->SetXattr(f.ino, kLayoutXattr, "k=4 m=2 unit=1048576", 0, Root()).ok());
  EXPECT_EQ(svc_->GetAttr(f.ino)->layout.k, 4u);
  SetAttrArgs grow;
  grow.valid = kSetSize;
  grow.size = 10;
  ASSERT_TRUE(svc_->SetAttr(f.ino, grow, Root(), SessionId()).ok());
  EXPECT_TRUE(svc_->SetXattr(f.ino, kLayoutXattr, "k=4 m=2 unit=1048576", 0, Root()).ok());
  EXPECT_EQ(svc_->SetXattr(f.ino, kLayoutXattr, "k=6 m=2 unit=65536", 0, Root()).code(),
            Code::kInvalidArgument);
  // Removing a directory's default falls back to the cluster's.
  ASSERT_TRUE(svc_->RemoveXattr(d.ino, kLayoutXattr, Root()).ok());
  EXPECT_EQ(File(d.ino, "g").layout.k, 4u);
}

// A layout every later create would refuse is refused when set: m=0 (no redundancy) or a width
// k+m past the cluster's failure domains. Servers that are down still count.
TEST_F(MetadataServiceTest, LayoutXattrRefusesNoRedundancyAndWidthsPastTheFailureDomains) {
  Inode d = Dir(kRootInode, "d");
  Inode f = File(kRootInode, "f");
  const std::string dir_before = *svc_->GetXattr(d.ino, kLayoutXattr, Root());
  const std::string file_before = *svc_->GetXattr(f.ino, kLayoutXattr, Root());
  struct Row {
    const char* value;
    const char* message;
  } rows[] = {
      {"k=5 m=2", "layout: k+m=7 needs 7 data servers in distinct failure domains, the cluster "
                  "has 6"},
      {"k=4 m=0", "layout: m=0 leaves no parity or copy; m must be at least 1"},
      {"m=0", "layout: m=0 leaves no parity or copy; m must be at least 1"},
      {"k=16 m=4 unit=65536", "layout: k+m=20 needs 20 data servers in distinct failure "
                              "domains, the cluster has 6"},
  };
  for (const Row& row : rows) {
    for (const Inode& target : {d, f}) {
      Status st = svc_->SetXattr(target.ino, kLayoutXattr, row.value, 0, Root());
      EXPECT_EQ(st.code(), Code::kInvalidArgument) << row.value;
      EXPECT_EQ(st.message(), row.message) << row.value;
    }
  }
  EXPECT_EQ(*svc_->GetXattr(d.ino, kLayoutXattr, Root()), dir_before);
  EXPECT_EQ(*svc_->GetXattr(f.ino, kLayoutXattr, Root()), file_before);
  EXPECT_TRUE(svc_->SetXattr(d.ino, kLayoutXattr, "k=5 m=1", 0, Root()).ok());
  EXPECT_TRUE(svc_->SetXattr(f.ino, kLayoutXattr, "k=1 m=1", 0, Root()).ok());
  // Every server silent past the heartbeat timeout: down, still members, still counted.
  mono_ms_ += opts_.heartbeat_timeout_ms + 1;
  svc_->Tick();
  for (const auto& s : svc_->GetClusterMap().servers) EXPECT_FALSE(s.up);
  EXPECT_TRUE(svc_->SetXattr(d.ino, kLayoutXattr, "k=4 m=2", 0, Root()).ok());
  EXPECT_EQ(svc_->SetXattr(d.ino, kLayoutXattr, "k=6 m=1", 0, Root()).code(),
            Code::kInvalidArgument);
}

TEST_F(MetadataServiceTest, UserXattrsHonourCreateAndReplaceFlags) {
  Inode f = File(kRootInode, "f");
  ASSERT_TRUE(svc_->SetXattr(f.ino, "user.a", std::string("v\0x", 3), XATTR_CREATE, Root()).ok());
  EXPECT_EQ(svc_->SetXattr(f.ino, "user.a", "w", XATTR_CREATE, Root()).code(),
            Code::kAlreadyExists);
  ASSERT_TRUE(svc_->SetXattr(f.ino, "user.a", "w", XATTR_REPLACE, Root()).ok());
  EXPECT_EQ(*svc_->GetXattr(f.ino, "user.a", Root()), "w");
  EXPECT_EQ(*svc_->ListXattr(f.ino, Root()), (std::vector<std::string>{"user.a"}));
  ASSERT_TRUE(svc_->RemoveXattr(f.ino, "user.a", Root()).ok());
  EXPECT_TRUE(svc_->ListXattr(f.ino, Root())->empty());
}

TEST_F(MetadataServiceTest, CreateFailsClearlyWithoutEnoughFailureDomains) {
  opts_.k = 8;
  opts_.m = 2;
  Restart(NewMemoryStore());
  AddServers(4);
  CreateArgs a{kRootInode, "f", S_IFREG | 0644, 0, true, SessionId(), false};
  auto r = svc_->Create(a, Root());
  ASSERT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_EQ(r.status().message(), "need 10 data servers in distinct failure domains, 4 are up");
  EXPECT_FALSE(svc_->Lookup(kRootInode, "f", Root()).ok());
  CheckInvariants();
}

TEST_F(MetadataServiceTest, PgTableUsesDistinctDomainsAndSpreadsLoad) {
  AddServers(6, "more");  // 12 servers, 12 domains
  File(kRootInode, "f");
  ClusterMap map = svc_->GetClusterMap();
  ASSERT_EQ(map.pg_tables.size(), 1u);
  const PgTable& t = map.pg_tables[0];
  EXPECT_EQ(t.width, 6u);
  ASSERT_EQ(t.pgs.size(), 64u);
  std::map<uint32_t, std::string> domain;
  for (const auto& s : map.servers) domain[s.record.id.value()] = s.record.failure_domain;
  std::map<uint32_t, int> load;
  for (const auto& pg : t.pgs) {
    ASSERT_EQ(pg.size(), 6u);
    std::set<std::string> used;
    for (ServerId s : pg) {
      EXPECT_TRUE(used.insert(domain[s.value()]).second) << "two targets in one domain";
      load[s.value()]++;
    }
  }
  ASSERT_EQ(load.size(), 12u);
  for (const auto& [id, n] : load) EXPECT_EQ(n, 32) << "server " << id;  // 64*6/12
  // A new server never rewrites targets in place (only finished moves do, docs/repair.md): the
  // existing PGs keep their targets, so existing files' layouts stay valid; the table may grow.
  AddServers(1, "late");
  File(kRootInode, "g");
  const auto after = svc_->GetClusterMap().pg_tables[0].pgs;
  ASSERT_GE(after.size(), t.pgs.size());
  EXPECT_TRUE(std::equal(t.pgs.begin(), t.pgs.end(), after.begin()));
}

// Issue 17: the default PG table was built at the first create, so a new cluster that lost a
// data server before its first file could not create any (kUnavailable: 5 of 6 domains up).
// Now it is built one heartbeat interval after k + m failure domains registered, and a create
// after the loss is placed (degraded) on the table that includes the lost server.
TEST_F(MetadataServiceTest, DefaultPgTableIsBuiltWhenServersRegisterSoALossBeforeTheFirstFileStillCreates) {
  EXPECT_TRUE(svc_->GetClusterMap().pg_tables.empty()) << "not before the servers settle";
  mono_ms_ += opts_.heartbeat_timeout_ms / 3;  // one heartbeat interval after the 6th
  svc_->Tick();
  ClusterMap built = svc_->GetClusterMap();
  ASSERT_EQ(built.pg_tables.size(), 1u);
  EXPECT_EQ(built.pg_tables[0].width, 6u);
  EXPECT_EQ(built.pg_tables[0].pgs.size(), 64u);

  // Server 6 dies before any file exists; the others keep heartbeating.
  auto session = svc_->OpenSession("c");
  ASSERT_TRUE(session.ok());
  mono_ms_ += opts_.heartbeat_timeout_ms + 1;
  for (uint32_t id = 1; id <= 5; ++id) {
    ASSERT_TRUE(svc_->Heartbeat(HeartbeatArgs{ServerId(id), 1000000, 1000, 0, {}}).ok());
  }
  ASSERT_TRUE(svc_->KeepAlive(session->session).ok());
  svc_->Tick();
  for (const ServerStatus& s : svc_->GetClusterMap().servers) {
    EXPECT_EQ(s.up, s.record.id != ServerId(6)) << "server " << s.record.id.value();
  }

  CreateArgs a{kRootInode, "first", S_IFREG | 0644, 0, true, session->session, true};
  auto created = svc_->Create(a, Root());
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ(created->attr.layout.pg_count, 64u);
  ASSERT_GT(created->write_version, 0u);
  CommitArgs commit{created->attr.ino, session->session, 3 * kMiB, {5, 0}, created->write_version,
                    true};
  commit.records_stripes = true;
  commit.written_stripes = {{0, 1}};
  commit.backfill_servers = {ServerId(6)};  // the client wrote the stripe without server 6
  commit.degraded_stripes = 1;
  auto committed = svc_->Commit(commit);
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  EXPECT_EQ(svc_->GetAttr(created->attr.ino)->size, 3 * kMiB);
  EXPECT_EQ(svc_->GetAttr(created->attr.ino)->data_version, created->write_version);
  // The table was not rebuilt around the loss: the same targets, server 6 among them.
  ClusterMap after = svc_->GetClusterMap();
  ASSERT_EQ(after.pg_tables.size(), 1u);
  EXPECT_EQ(after.pg_tables[0].pgs, built.pg_tables[0].pgs);
  CheckInvariants();
}

// The build waits while servers are still registering; a create before it builds the table as
// before (lazily), and a layout of another width still gets its table at its first create.
TEST_F(MetadataServiceTest, ACreateBeforeTheDefaultTableIsDueBuildsItAndOtherWidthsStayLazy) {
  Inode f = File(kRootInode, "early");
  EXPECT_EQ(f.layout.pg_count, 64u);
  ASSERT_EQ(svc_->GetClusterMap().pg_tables.size(), 1u);
  mono_ms_ += opts_.heartbeat_timeout_ms / 3;
  svc_->Tick();  // due, but already there: nothing changes
  ASSERT_EQ(svc_->GetClusterMap().pg_tables.size(), 1u);
  Inode d = Dir(kRootInode, "narrow");
  ASSERT_TRUE(svc_->SetXattr(d.ino, kLayoutXattr, "k=2 m=1 unit=1048576", 0, Root()).ok());
  EXPECT_EQ(svc_->GetClusterMap().pg_tables.size(), 1u) << "a directory default builds nothing";
  Inode g = File(d.ino, "g");
  EXPECT_EQ(g.layout.k + g.layout.m, 3u);
  EXPECT_EQ(svc_->GetClusterMap().pg_tables.size(), 2u);
}

TEST_F(MetadataServiceTest, ServersKeepTheirIdAndGoDownWhenSilent) {
  ServerRegistration r{"127.0.0.1:9999", "rack-z", 500, 5, "stable-uuid"};
  auto first = svc_->RegisterServer(r);
  ASSERT_TRUE(first.ok());
  r.address = "127.0.0.1:9998";
  auto again = svc_->RegisterServer(r);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(first->first, again->first);
  uint64_t v0 = svc_->GetClusterMap().version;
  mono_ms_ += opts_.heartbeat_timeout_ms + 1;
  ASSERT_TRUE(svc_->Heartbeat(HeartbeatArgs{again->first, 500, 6, 1, {}}).ok());
  svc_->Tick();
  ClusterMap map = svc_->GetClusterMap();
  EXPECT_GT(map.version, v0);
  for (const auto& s : map.servers) EXPECT_EQ(s.up, s.record.id == again->first);
  auto fs = svc_->StatFs();
  ASSERT_TRUE(fs.ok());
  EXPECT_EQ(fs->total_bytes, 500u);
  EXPECT_EQ(fs->free_bytes, 494u);
  uint64_t v1 = map.version;
  ASSERT_TRUE(svc_->Heartbeat(HeartbeatArgs{ServerId(1), 1000000, 1000, 0, {}}).ok());
  EXPECT_GT(svc_->GetClusterMap().version, v1);
  EXPECT_EQ(svc_->Heartbeat(HeartbeatArgs{ServerId(777), 0, 0, 0, {}}).status().code(),
            Code::kNotFound);
}

// Issue 21: df counted a disk shared by six local data servers six times (1008G for a 252G
// disk), and as free each server's capacity minus its own chunks. Servers on one file system
// (same fs_id) now count it once, with its free bytes; a server with a configured capacity (no
// fs_id) counts as before.
TEST_F(MetadataServiceTest, StatFsCountsASharedFileSystemOnce) {
  constexpr uint64_t kDisk = 100ull << 30, kFree = 40ull << 30;
  for (uint32_t id = 1; id <= 6; ++id) {
    HeartbeatArgs hb{ServerId(id), kDisk, 1ull << 30, 10, {}};
    if (id <= 3) {
      hb.fs_id = "803:abc";
      hb.fs_free_bytes = kFree;
    } else {
      hb.capacity_bytes = 10ull << 30;  // configured: its own share
    }
    ASSERT_TRUE(svc_->Heartbeat(hb).ok());
  }
  auto fs = svc_->StatFs();
  ASSERT_TRUE(fs.ok());
  EXPECT_EQ(fs->total_bytes, kDisk + 3 * (10ull << 30));
  EXPECT_EQ(fs->free_bytes, kFree + 3 * (9ull << 30));
}

TEST_F(MetadataServiceTest, GcTasksGoToEveryServerAndDropAfterAllAcked) {
  Inode f = File(kRootInode, "f");
  ASSERT_TRUE(svc_->Unlink(kRootInode, "f", Root()).ok());
  ClusterMap map = svc_->GetClusterMap();
  ASSERT_EQ(map.servers.size(), 6u);
  uint64_t task = 0;
  for (size_t i = 0; i < map.servers.size(); ++i) {
    ServerId id = map.servers[i].record.id;
    auto hb = svc_->Heartbeat(HeartbeatArgs{id, 1, 0, 0, {}});
    ASSERT_TRUE(hb.ok());
    ASSERT_EQ(hb->gc.size(), 1u);
    EXPECT_EQ(hb->gc[0].ino, f.ino);
    task = hb->gc[0].id;
    auto acked = svc_->Heartbeat(HeartbeatArgs{id, 1, 0, 0, {task}});
    ASSERT_TRUE(acked.ok());
    EXPECT_TRUE(acked->gc.empty());  // not resent to a server that acked
    EXPECT_EQ(svc_->PendingGcTasks().size(), i + 1 < map.servers.size() ? 1u : 0u);
  }
}

// A commit naming data servers that missed chunks of its writes has each of them told, once, in
// its next heartbeat reply, to run a backfill pass; other servers are not told; unknown ids are
// ignored.
TEST_F(MetadataServiceTest, CommitNamingServersThatMissedChunksHasThemBackfill) {
  auto s = svc_->OpenSession("c");
  ASSERT_TRUE(s.ok());
  CreateArgs a{kRootInode, "f", S_IFREG | 0644, 0, true, s->session, true};
  auto c = svc_->Create(a, Root());
  ASSERT_TRUE(c.ok());
  ClusterMap map = svc_->GetClusterMap();
  ASSERT_EQ(map.servers.size(), 6u);
  const ServerId missed = map.servers[2].record.id;
  CommitArgs commit{c->attr.ino, s->session, 100, {1, 1}, c->write_version, false};
  commit.backfill_servers = {missed, ServerId(999)};
  ASSERT_TRUE(svc_->Commit(commit).ok());
  for (const auto& server : map.servers) {
    const ServerId id = server.record.id;
    auto hb = svc_->Heartbeat(HeartbeatArgs{id, 1, 0, 0, {}});
    ASSERT_TRUE(hb.ok());
    EXPECT_EQ(hb->backfill, id == missed) << "server " << id.value();
    auto again = svc_->Heartbeat(HeartbeatArgs{id, 1, 0, 0, {}});
    ASSERT_TRUE(again.ok());
    EXPECT_FALSE(again->backfill) << "told twice: server " << id.value();
  }
}

// O_CREAT without O_EXCL on a name another client made a symlink or FIFO meanwhile answers
// kStale (look it up again), not that inode: the kernel expects a regular file from a create
// and failed the open with EIO. A directory answers kIsDirectory; a regular file is opened.
TEST_F(MetadataServiceTest, NonExclusiveCreateOverASymlinkOrFifoAsksToLookAgain) {
  auto s = svc_->OpenSession("c");
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(svc_->Symlink(kRootInode, "ln", "target", Root()).ok());
  ASSERT_TRUE(svc_->Create(CreateArgs{kRootInode, "fifo", S_IFIFO | 0644, 0, true, {}, false},
                           Root()).ok());
  ASSERT_TRUE(svc_->Mkdir(kRootInode, "dir", S_IFDIR | 0755, Root()).ok());
  Inode f = File(kRootInode, "f");
  for (const char* name : {"ln", "fifo"}) {
    auto c = svc_->Create(CreateArgs{kRootInode, name, S_IFREG | 0644, 0, false, s->session, true},
                          Root());
    EXPECT_EQ(c.status().code(), Code::kStale) << name;
  }
  EXPECT_EQ(svc_->Create(CreateArgs{kRootInode, "dir", S_IFREG | 0644, 0, false, s->session, true},
                         Root()).status().code(),
            Code::kIsDirectory);
  auto opened = svc_->Create(CreateArgs{kRootInode, "f", S_IFREG | 0644, 0, false, s->session, true},
                             Root());
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(opened->attr.ino, f.ino);
  EXPECT_FALSE(opened->created);
}

TEST_F(MetadataServiceTest, TruncateRecordsGcTaskForStripesPastTheEnd) {
  auto s = svc_->OpenSession("c");
  ASSERT_TRUE(s.ok());
  CreateArgs a{kRootInode, "f", S_IFREG | 0644, 0, true, s->session, true};
  auto c = svc_->Create(a, Root());
  ASSERT_TRUE(c.ok());
  EXPECT_GT(c->write_version, 0u);
  const uint64_t stripe = 4ull << 20;
  auto commit = svc_->Commit(CommitArgs{c->attr.ino, s->session, 10 * stripe + 5, {9, 9},
                                        c->write_version, false});
  ASSERT_TRUE(commit.ok()) << commit.status().ToString();
  EXPECT_EQ(commit->attr.data_version, c->write_version);
  EXPECT_EQ(commit->attr.blocks(), (10 * stripe + 5 + 511) / 512);
  EXPECT_GT(commit->next_write_version, c->write_version);
  SetAttrArgs t;
  t.valid = kSetSize;
  t.size = 3 * stripe + 1;
  auto r = svc_->SetAttr(c->attr.ino, t, Root(), s->session);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->size, 3 * stripe + 1);
  auto gc = svc_->PendingGcTasks();
  ASSERT_EQ(gc.size(), 1u);
  EXPECT_EQ(gc[0].from_stripe, 4u);
  // Every version handed out so far, the writer's unused next one included.
  EXPECT_EQ(gc[0].max_version, commit->next_write_version);
  EXPECT_TRUE(gc[0].held);  // the file is open: GC waits for its last close
  // Later write versions are greater than the GC's bound.
  auto o = svc_->Open(c->attr.ino, O_RDWR, s->session, Root());
  ASSERT_TRUE(o.ok());
  EXPECT_GT(o->write_version, gc[0].max_version);
}

TEST_F(MetadataServiceTest, CommitRejectsStaleAndUnissuedVersions) {
  auto s = svc_->OpenSession("c");
  CreateArgs a{kRootInode, "f", S_IFREG | 0644, 0, true, s->session, true};
  auto c = svc_->Create(a, Root());
  ASSERT_TRUE(c.ok());
  auto c1 = svc_->Commit(CommitArgs{c->attr.ino, s->session, 100, {1, 1}, c->write_version, true});
  ASSERT_TRUE(c1.ok());
  auto c2 = svc_->Commit(
      CommitArgs{c->attr.ino, s->session, 200, {2, 2}, c1->next_write_version, false});
  ASSERT_TRUE(c2.ok());
  EXPECT_EQ(c2->attr.size, 200u);
  EXPECT_EQ(c2->attr.mtime, (Timespec{2, 2}));
  EXPECT_EQ(svc_->Commit(CommitArgs{c->attr.ino, s->session, 1, {}, c->write_version, false})
                .status()
                .code(),
            Code::kStale);
  EXPECT_EQ(svc_->Commit(CommitArgs{c->attr.ino, s->session, 1, {}, 1ull << 60, false})
                .status()
                .code(),
            Code::kInvalidArgument);
  EXPECT_EQ(svc_->GetAttr(c->attr.ino)->size, 200u);
}

// A commit may carry a SetAttr (tar's futimens, fchown and fchmod after writing a file): applied
// after the commit's size and mtime, in the same change, with the caller's rights checked as
// SetAttr checks them. A refused change refuses the commit: nothing of either is applied.
TEST_F(MetadataServiceTest, ACommitCarryingASetAttrAppliesBothOrNeither) {
  auto s = svc_->OpenSession("c");
  CreateArgs a{kRootInode, "f", S_IFREG | 0600, 0, true, s->session, true};
  auto c = svc_->Create(a, Root());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const InodeId ino = c->attr.ino;
  CommitArgs commit{ino, s->session, 300, {50, 5}, c->write_version, false};
  // Explicit times by another user: not the owner, kNotPermitted, and the size stays 0.
  SetAttrArgs times;
  times.valid = kSetMtime | kSetAtime;
  times.mtime = {1000, 7};
  times.atime = {900, 3};
  commit.attrs = times;
  commit.caller = User(2000);
  EXPECT_EQ(svc_->Commit(commit).status().code(), Code::kNotPermitted);
  EXPECT_EQ(svc_->GetAttr(ino)->size, 0u);
  EXPECT_EQ(svc_->GetAttr(ino)->data_version, 0u);
  // A size among the attributes is refused.
  SetAttrArgs sized = times;
  sized.valid |= kSetSize;
  commit.attrs = sized;
  commit.caller = Root();
  EXPECT_EQ(svc_->Commit(commit).status().code(), Code::kInvalidArgument);
  // By the owner (root here): the size of the commit, the times and the mode of the SetAttr.
  times.valid |= kSetMode;
  times.mode = 0644;
  commit.attrs = times;
  auto done = svc_->Commit(commit);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  for (const Inode& n : {done->attr, *svc_->GetAttr(ino)}) {
    EXPECT_EQ(n.size, 300u);
    EXPECT_EQ(n.mtime, (Timespec{1000, 7}));
    EXPECT_EQ(n.atime, (Timespec{900, 3}));
    EXPECT_EQ(n.mode, uint32_t{S_IFREG | 0644});
    EXPECT_EQ(n.data_version, c->write_version);
  }
  // Without times in it, the commit's own mtime stands; chown by root rides along.
  SetAttrArgs owner;
  owner.valid = kSetUid | kSetGid;
  owner.uid = 1000;
  owner.gid = 1000;
  CommitArgs next{ino, s->session, 400, {60, 6}, done->next_write_version, false};
  next.attrs = owner;
  next.caller = Root();
  auto again = svc_->Commit(next);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->attr.mtime, (Timespec{60, 6}));
  EXPECT_EQ(again->attr.uid, 1000u);
  EXPECT_EQ(again->attr.gid, 1000u);
  EXPECT_EQ(again->attr.size, 400u);
}

// Regression (issue 16, found by a tester): SetAttr took a size of 2^63, after which the file
// could be neither stat'ed nor removed through a mount. Sizes past kMaxFileBytes (2^63 - 1,
// what off_t holds) are refused on every call that carries one; kMaxFileBytes itself is taken.
TEST_F(MetadataServiceTest, SizesPastTheLargestFileSizeAreRefusedWithFileTooLarge) {
  auto s = svc_->OpenSession("c");
  ASSERT_TRUE(s.ok());
  CreateArgs a{kRootInode, "f", S_IFREG | 0644, 0, true, s->session, true};
  auto c = svc_->Create(a, Root());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const InodeId ino = c->attr.ino;
  SetAttrArgs t;
  t.valid = kSetSize;
  for (uint64_t size : {kMaxFileBytes + 1, uint64_t{1} << 63 | 4096, UINT64_MAX}) {
    SCOPED_TRACE(size);
    t.size = size;
    EXPECT_EQ(svc_->SetAttr(ino, t, Root(), s->session).status().code(), Code::kFileTooLarge);
    EXPECT_EQ(svc_->Commit(CommitArgs{ino, s->session, size, {1, 1}, c->write_version, false})
                  .status()
                  .code(),
              Code::kFileTooLarge);
  }
  EXPECT_EQ(svc_->GetAttr(ino)->size, 0u);
  EXPECT_EQ(svc_->GetAttr(ino)->data_version, 0u);  // the refused commit changed nothing
  t.size = kMaxFileBytes;
  auto r = svc_->SetAttr(ino, t, Root(), s->session);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->size, kMaxFileBytes);
  EXPECT_EQ(r->blocks(), 0u);  // a truncate that extends makes a hole: nothing allocated
  auto commit =
      svc_->Commit(CommitArgs{ino, s->session, kMaxFileBytes, {2, 2}, c->write_version, false});
  ASSERT_TRUE(commit.ok()) << commit.status().ToString();
  EXPECT_EQ(commit->attr.size, kMaxFileBytes);
  ASSERT_TRUE(svc_->Unlink(kRootInode, "f", Root()).ok());
  ASSERT_TRUE(svc_->Release(ino, s->session, true).ok());
  EXPECT_EQ(svc_->GetAttr(ino).status().code(), Code::kNotFound);
  CheckInvariants();
}

// fcntl ranges are offsets too: past kMaxFileBytes they are refused (kInvalidArgument), except
// end UINT64_MAX, "to end of file", which still covers the last byte a file may have.
TEST_F(MetadataServiceTest, LockRangesPastTheLargestFileSizeAreRefusedButToEndOfFileWorks) {
  auto s1 = svc_->OpenSession("one");
  auto s2 = svc_->OpenSession("two");
  Inode f = File(kRootInode, "f");
  auto lk = [&](SessionId s, LockType t, uint64_t b, uint64_t e) {
    return svc_->SetLock(LockArgs{f.ino, s, 1, t, b, e, 7, false});
  };
  EXPECT_EQ(lk(s1->session, LockType::kWrite, kMaxFileBytes + 1, UINT64_MAX).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(lk(s1->session, LockType::kWrite, 0, kMaxFileBytes + 1).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(lk(s1->session, LockType::kUnlock, UINT64_MAX - 1, UINT64_MAX).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(svc_->GetLock(LockArgs{f.ino, s2->session, 1, LockType::kWrite, kMaxFileBytes + 1,
                                   UINT64_MAX, 0, false})
                .status()
                .code(),
            Code::kInvalidArgument);
  ASSERT_TRUE(lk(s1->session, LockType::kWrite, 10, UINT64_MAX).ok());
  EXPECT_EQ(lk(s2->session, LockType::kRead, kMaxFileBytes, kMaxFileBytes).code(),
            Code::kWouldBlock);
  auto q = svc_->GetLock(
      LockArgs{f.ino, s2->session, 1, LockType::kRead, kMaxFileBytes, kMaxFileBytes, 0, false});
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->type, LockType::kWrite);
  EXPECT_EQ(q->end, UINT64_MAX);
  EXPECT_TRUE(lk(s2->session, LockType::kRead, 0, 9).ok());
}

// du: st_blocks counts the stripes committed writes stored, not holes. A file of 2 stripes and 5
// bytes extended by truncate to 100 stripes has the blocks of what was written; cut back to 1
// stripe and 1 byte, the blocks of that much; an unknown map (legacy records) follows the size.
TEST_F(MetadataServiceTest, BlocksCountWrittenStripesNotHoles) {
  auto s = svc_->OpenSession("c");
  ASSERT_TRUE(s.ok());
  CreateArgs a{kRootInode, "sparse", S_IFREG | 0644, 0, true, s->session, true};
  auto c = svc_->Create(a, Root());
  ASSERT_TRUE(c.ok());
  const uint64_t stripe = 4ull << 20;  // the default layout: k = 4, 1 MiB units
  CommitArgs ca{c->attr.ino, s->session, 2 * stripe + 5, {9, 9}, c->write_version, false};
  ca.written_stripes = {{0, 3}};
  ca.records_stripes = true;
  auto commit = svc_->Commit(ca);
  ASSERT_TRUE(commit.ok()) << commit.status().ToString();
  EXPECT_EQ(commit->attr.blocks(), (2 * stripe + 5 + 511) / 512);
  SetAttrArgs t;
  t.valid = kSetSize;
  t.size = 100 * stripe;
  auto grown = svc_->SetAttr(c->attr.ino, t, Root(), s->session);
  ASSERT_TRUE(grown.ok()) << grown.status().ToString();
  EXPECT_EQ(grown->size, 100 * stripe);
  // The whole third stripe counts once the size covers it (stripes are counted whole).
  EXPECT_EQ(grown->blocks(), 3 * stripe / 512);
  t.size = stripe + 1;
  auto cut = svc_->SetAttr(c->attr.ino, t, Root(), s->session);
  ASSERT_TRUE(cut.ok()) << cut.status().ToString();
  EXPECT_EQ(cut->blocks(), (stripe + 1 + 511) / 512);
  Inode legacy = *cut;
  legacy.stripes = StripeMap::Unknown();
  legacy.size = 100 * stripe;
  EXPECT_EQ(legacy.blocks(), 100 * stripe / 512);
}

// A store written before the bound may hold a file with a size past kMaxFileBytes: it still
// answers GetAttr (with a block count that did not wrap), truncates back down, and unlinks.
TEST_F(MetadataServiceTest, AFileWithASizePastTheLimitFromAnOlderStoreStatsTruncatesAndUnlinks) {
  auto dir = std::filesystem::temp_directory_path() /
             ("aquifer-meta-huge-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto store = OpenRocksStore(dir.string());
  ASSERT_TRUE(store.ok());
  Restart(std::move(*store));
  AddServers(6);
  Inode a = File(kRootInode, "a");
  Inode b = File(kRootInode, "b");
  svc_.reset();
  {  // what an older metadata server let SetAttr store
    auto raw = OpenRocksStore(dir.string());
    ASSERT_TRUE(raw.ok());
    StoreBatch batch;
    for (auto [ino, size] : {std::pair{a.ino, UINT64_MAX - 10}, std::pair{b.ino, uint64_t{1} << 63}}) {
      auto n = (*raw)->GetInode(ino);
      ASSERT_TRUE(n.ok() && n->has_value());
      Inode huge = **n;
      huge.stripes = StripeMap::Unknown();  // as before stripe maps: blocks follow the size
      huge.size = size;
      batch.PutInode(huge);
    }
    ASSERT_TRUE((*raw)->Write(batch, true).ok());
  }
  auto reopened = OpenRocksStore(dir.string());
  ASSERT_TRUE(reopened.ok());
  Restart(std::move(*reopened));
  auto attr = svc_->GetAttr(a.ino);
  ASSERT_TRUE(attr.ok()) << attr.status().ToString();
  EXPECT_EQ(attr->size, UINT64_MAX - 10);
  EXPECT_EQ(attr->blocks(), (UINT64_MAX - 10) / 512 + 1);
  SetAttrArgs t;
  t.valid = kSetSize;
  t.size = 0;
  auto r = svc_->SetAttr(a.ino, t, Root(), SessionId(0));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->size, 0u);
  ASSERT_TRUE(svc_->Unlink(kRootInode, "a", Root()).ok());
  ASSERT_TRUE(svc_->Unlink(kRootInode, "b", Root()).ok());
  EXPECT_EQ(svc_->GetAttr(a.ino).status().code(), Code::kNotFound);
  EXPECT_EQ(svc_->GetAttr(b.ino).status().code(), Code::kNotFound);
  CheckInvariants();
  svc_.reset();
  std::filesystem::remove_all(dir);
}

TEST_F(MetadataServiceTest, WriteLeaseIsExclusivePerSessionAndFreedByReleaseOrExpiry) {
  auto s1 = svc_->OpenSession("one");
  auto s2 = svc_->OpenSession("two");
  Inode f = File(kRootInode, "f");
  auto w1 = svc_->Open(f.ino, O_WRONLY, s1->session, Root());
  ASSERT_TRUE(w1.ok());
  auto w1b = svc_->Open(f.ino, O_RDWR, s1->session, Root());
  ASSERT_TRUE(w1b.ok());
  EXPECT_GT(w1b->write_version, w1->write_version);
  EXPECT_EQ(svc_->Open(f.ino, O_WRONLY, s2->session, Root()).status().code(), Code::kWouldBlock);
  EXPECT_TRUE(svc_->Open(f.ino, O_RDONLY, s2->session, Root()).ok());
  ASSERT_TRUE(svc_->Release(f.ino, s1->session, true).ok());
  EXPECT_EQ(svc_->Open(f.ino, O_WRONLY, s2->session, Root()).status().code(), Code::kWouldBlock);
  ASSERT_TRUE(svc_->Release(f.ino, s1->session, true).ok());
  auto w2 = svc_->Open(f.ino, O_WRONLY, s2->session, Root());
  ASSERT_TRUE(w2.ok());
  // s2 goes silent: its lease expires and s1 may write again.
  EXPECT_EQ(svc_->Open(f.ino, O_WRONLY, s1->session, Root()).status().code(), Code::kWouldBlock);
  mono_ms_ += opts_.session_ttl_ms / 2;
  ASSERT_TRUE(svc_->KeepAlive(s1->session).ok());
  mono_ms_ += opts_.session_ttl_ms / 2 + 10;
  svc_->Tick();
  EXPECT_EQ(svc_->KeepAlive(s2->session).code(), Code::kStale);
  EXPECT_TRUE(svc_->Open(f.ino, O_WRONLY, s1->session, Root()).ok());
}

// Write-lease recall (docs/design.md "Write-lease recall"): a conflicting open queues a recall
// for the holder; the holder commits and returns the lease; its next write takes it back.
TEST_F(MetadataServiceTest, AConflictingOpenRecallsTheLeaseAndTheHolderTakesItBack) {
  auto s1 = svc_->OpenSession("one");
  auto s2 = svc_->OpenSession("two");
  Inode f = File(kRootInode, "f");
  auto w1 = svc_->Open(f.ino, O_WRONLY, s1->session, Root());
  ASSERT_TRUE(w1.ok());
  EXPECT_TRUE(svc_->WaitRecall(s1->session, std::chrono::milliseconds(0))->empty());
  EXPECT_EQ(svc_->Open(f.ino, O_RDWR, s2->session, Root()).status().code(), Code::kWouldBlock);
  EXPECT_EQ(svc_->Open(f.ino, O_RDWR, s2->session, Root()).status().code(), Code::kWouldBlock);
  auto recalls = svc_->WaitRecall(s1->session, std::chrono::milliseconds(0));
  ASSERT_TRUE(recalls.ok());
  EXPECT_EQ(*recalls, std::vector<InodeId>{f.ino});  // asked twice, handed once
  EXPECT_TRUE(svc_->WaitRecall(s1->session, std::chrono::milliseconds(0))->empty());
  EXPECT_TRUE(svc_->WaitRecall(s2->session, std::chrono::milliseconds(0))->empty());

  auto c1 = svc_->Commit(CommitArgs{f.ino, s1->session, 100, {1, 1}, w1->write_version, false});
  ASSERT_TRUE(c1.ok());
  ASSERT_TRUE(svc_->ReturnLease(f.ino, s1->session).ok());
  ASSERT_TRUE(svc_->ReturnLease(f.ino, s1->session).ok());  // not held: nothing to do
  auto w2 = svc_->Open(f.ino, O_RDWR, s2->session, Root());
  ASSERT_TRUE(w2.ok()) << w2.status().ToString();
  EXPECT_EQ(w2->attr.size, 100u);
  EXPECT_GT(w2->write_version, c1->attr.data_version);
  // s1 still has it open for write: its next write asks for the lease, and s2 is recalled.
  EXPECT_EQ(svc_->AcquireLease(f.ino, s1->session).status().code(), Code::kWouldBlock);
  EXPECT_EQ(*svc_->WaitRecall(s2->session, std::chrono::milliseconds(0)),
            std::vector<InodeId>{f.ino});
  // A commit by s1 now, without the lease, is refused: s2 holds it.
  EXPECT_EQ(svc_->Commit(CommitArgs{f.ino, s1->session, 50, {1, 1}, c1->next_write_version, false})
                .status()
                .code(),
            Code::kStale);
  auto c2 = svc_->Commit(CommitArgs{f.ino, s2->session, 200, {2, 2}, w2->write_version, false});
  ASSERT_TRUE(c2.ok());
  ASSERT_TRUE(svc_->ReturnLease(f.ino, s2->session).ok());
  auto again = svc_->AcquireLease(f.ino, s1->session);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->attr.size, 200u);
  EXPECT_GT(again->write_version, c2->attr.data_version);
  EXPECT_TRUE(again->attr.abandoned_versions.empty());  // returned leases abandon nothing
  auto held = svc_->AcquireLease(f.ino, s1->session);  // held already: the same version
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(held->write_version, again->write_version);
  ASSERT_TRUE(
      svc_->Commit(CommitArgs{f.ino, s1->session, 300, {3, 3}, again->write_version, false}).ok());
  // A truncate by s2 while s1 holds the lease recalls it too.
  SetAttrArgs cut;
  cut.valid = kSetSize;
  cut.size = 10;
  EXPECT_EQ(svc_->SetAttr(f.ino, cut, Root(), s2->session).status().code(), Code::kWouldBlock);
  EXPECT_EQ(*svc_->WaitRecall(s1->session, std::chrono::milliseconds(0)),
            std::vector<InodeId>{f.ino});
  CheckInvariants();
}

TEST_F(MetadataServiceTest, AcquireLeaseAndWaitRecallRefuseWhatTheyCannotServe) {
  auto s1 = svc_->OpenSession("one");
  Inode f = File(kRootInode, "f");
  auto d = svc_->Mkdir(kRootInode, "d", 0755, Root());
  ASSERT_TRUE(d.ok());
  // Not open for write by the session (only read, or not at all).
  EXPECT_EQ(svc_->AcquireLease(f.ino, s1->session).status().code(), Code::kInvalidArgument);
  ASSERT_TRUE(svc_->Open(f.ino, O_RDONLY, s1->session, Root()).ok());
  EXPECT_EQ(svc_->AcquireLease(f.ino, s1->session).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(svc_->AcquireLease(d->ino, s1->session).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(svc_->AcquireLease(InodeId(999999), s1->session).status().code(), Code::kNotFound);
  EXPECT_EQ(svc_->AcquireLease(f.ino, SessionId(12345)).status().code(), Code::kStale);
  EXPECT_EQ(svc_->ReturnLease(f.ino, SessionId(12345)).code(), Code::kStale);
  EXPECT_EQ(svc_->WaitRecall(SessionId(12345), std::chrono::milliseconds(0)).status().code(),
            Code::kStale);
  // A recall for a session that ends is dropped with it.
  auto s2 = svc_->OpenSession("two");
  ASSERT_TRUE(svc_->Open(f.ino, O_WRONLY, s1->session, Root()).ok());
  EXPECT_EQ(svc_->Open(f.ino, O_WRONLY, s2->session, Root()).status().code(), Code::kWouldBlock);
  ASSERT_TRUE(svc_->CloseSession(s1->session).ok());
  EXPECT_EQ(svc_->WaitRecall(s1->session, std::chrono::milliseconds(0)).status().code(),
            Code::kStale);
  EXPECT_TRUE(svc_->Open(f.ino, O_WRONLY, s2->session, Root()).ok());
}

TEST_F(MetadataServiceTest, WaitRecallWakesAtARecallAndEndsAtShutdown) {
  auto s1 = svc_->OpenSession("one");
  auto s2 = svc_->OpenSession("two");
  Inode f = File(kRootInode, "f");
  ASSERT_TRUE(svc_->Open(f.ino, O_WRONLY, s1->session, Root()).ok());
  const auto t0 = std::chrono::steady_clock::now();
  auto waiting = std::async(std::launch::async, [&] {
    return svc_->WaitRecall(s1->session, std::chrono::milliseconds(8000));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(svc_->Open(f.ino, O_WRONLY, s2->session, Root()).status().code(), Code::kWouldBlock);
  Result<std::vector<InodeId>> got = waiting.get();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, std::vector<InodeId>{f.ino});
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(4000));
  auto stopped = std::async(std::launch::async, [&] {
    return svc_->WaitRecall(s1->session, std::chrono::milliseconds(8000));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  svc_->StopRecallWaits();
  EXPECT_EQ(stopped.get().status().code(), Code::kUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(4000));
}

TEST_F(MetadataServiceTest, AnOpenThatTakesADeadSessionsLeaseAbandonsItsVersion) {
  // s1 opens for write and dies (its ttl passes) before it commits; s2's open for write comes
  // before the reaper ran. Before, s2 took the lease over and the reaper then found no lease
  // to abandon: s1's chunks counted as data once s2 committed a higher version
  // (tests/mount/failpoint_test.sh, client.stripe.after_some_chunks, in place).
  auto s1 = svc_->OpenSession("one");
  Inode f = File(kRootInode, "f");
  auto w1 = svc_->Open(f.ino, O_WRONLY, s1->session, Root());
  ASSERT_TRUE(w1.ok());
  mono_ms_ += opts_.session_ttl_ms + 1;  // no Tick: s1 is dead but not reaped
  auto s2 = svc_->OpenSession("two");
  auto w2 = svc_->Open(f.ino, O_WRONLY, s2->session, Root());
  ASSERT_TRUE(w2.ok()) << w2.status().ToString();
  const VersionRanges want{{f.data_version + 1, w1->write_version}};
  EXPECT_EQ(w2->attr.abandoned_versions, want);
  svc_->Tick();  // reaps s1: nothing more to abandon
  EXPECT_EQ(svc_->GetAttr(f.ino)->abandoned_versions, want);
}

TEST_F(MetadataServiceTest, UnlinkedOpenFileStaysUntilLastRelease) {
  auto s = svc_->OpenSession("c");
  Inode f = File(kRootInode, "f");
  ASSERT_TRUE(svc_->Open(f.ino, O_RDONLY, s->session, Root()).ok());
  ASSERT_TRUE(svc_->Open(f.ino, O_RDONLY, s->session, Root()).ok());
  ASSERT_TRUE(svc_->Unlink(kRootInode, "f", Root()).ok());
  auto orphan = svc_->GetAttr(f.ino);
  ASSERT_TRUE(orphan.ok());
  EXPECT_EQ(orphan->nlink, 0u);
  EXPECT_TRUE(svc_->PendingGcTasks().empty());
  ASSERT_TRUE(svc_->Release(f.ino, s->session, false).ok());
  EXPECT_TRUE(svc_->GetAttr(f.ino).ok());
  ASSERT_TRUE(svc_->Release(f.ino, s->session, false).ok());
  EXPECT_EQ(svc_->GetAttr(f.ino).status().code(), Code::kNotFound);
  EXPECT_EQ(svc_->PendingGcTasks().size(), 1u);
  CheckInvariants();
}

TEST_F(MetadataServiceTest, OrphanGoesWhenItsSessionExpires) {
  auto s = svc_->OpenSession("c");
  CreateArgs a{kRootInode, "f", S_IFREG | 0644, 0, true, s->session, true};
  auto c = svc_->Create(a, Root());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(svc_->Rename(kRootInode, "f", kRootInode, "g", 0, Root()).ok());
  File(kRootInode, "h");
  ASSERT_TRUE(svc_->Rename(kRootInode, "h", kRootInode, "g", 0, Root()).ok());  // replaces f
  EXPECT_EQ(svc_->GetAttr(c->attr.ino)->nlink, 0u);
  mono_ms_ += opts_.session_ttl_ms + 1;
  svc_->Tick();
  EXPECT_EQ(svc_->GetAttr(c->attr.ino).status().code(), Code::kNotFound);
  CheckInvariants();
}

// An orphan (unlinked while open) outlives a crash of the server as long as the session that
// holds it open does: the session, its open and its write lease are persisted. When that session
// then stays silent past its ttl, the orphan is deleted and its chunks are queued for GC.
TEST_F(MetadataServiceTest, AnOrphanOpenByARecordedSessionOutlivesACrashThenGoesWithIt) {
  UseRocksStore("orphan");
  AddServers(6);
  auto s = svc_->OpenSession("c");
  CreateArgs a{kRootInode, "f", S_IFREG | 0644, 0, true, s->session, false};
  auto c = svc_->Create(a, Root());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(svc_->Unlink(kRootInode, "f", Root()).ok());
  ASSERT_TRUE(svc_->GetAttr(c->attr.ino).ok());
  ReopenRocksStore();  // "crash"
  EXPECT_TRUE(svc_->GetAttr(c->attr.ino).ok()) << "the orphan went although its session lives";
  EXPECT_TRUE(svc_->KeepAlive(s->session).ok()) << "the session was not restored";
  mono_ms_ += opts_.session_ttl_ms + 1;  // the client never calls again
  svc_->Tick();
  EXPECT_EQ(svc_->GetAttr(c->attr.ino).status().code(), Code::kNotFound);
  bool found = false;
  for (const auto& t : svc_->PendingGcTasks()) found |= t.ino == c->attr.ino;
  EXPECT_TRUE(found);
  EXPECT_EQ(svc_->KeepAlive(s->session).code(), Code::kStale);
  CheckInvariants();
}

// Sessions, write leases, opens and locks are in the store with the change that made them: after
// a crash the same session still holds its lease and its locks (others are refused), can commit
// and unlock, and a change the RPC edge tagged is remembered as applied (Replayed), so a retry
// of it is not run twice.
TEST_F(MetadataServiceTest, LeasesLocksAndTaggedChangesOutliveACrash) {
  UseRocksStore("sessions");
  AddServers(6);
  auto s1 = svc_->OpenSession("one");
  ASSERT_TRUE(s1.ok());
  Result<OpenResult> c = Status(Code::kInternal, "unset");
  {
    MetadataService::RequestScope scope(RequestTag{s1->session.value(), 7});
    c = svc_->Create(CreateArgs{kRootInode, "f", S_IFREG | 0644, 0, true, s1->session, true},
                     Root());
  }
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const InodeId ino = c->attr.ino;
  ASSERT_TRUE(svc_->SetLock(LockArgs{ino, s1->session, 11, LockType::kWrite, 0, 99, 42, false}).ok());
  ASSERT_TRUE(svc_->SetLock(LockArgs{ino, s1->session, 12, LockType::kWrite, 0, 0, 42, true}).ok());
  ReopenRocksStore();  // "crash"
  AddServers(6);

  EXPECT_TRUE(svc_->KeepAlive(s1->session).ok());
  auto s2 = svc_->OpenSession("two");
  ASSERT_TRUE(s2.ok());
  EXPECT_NE(s2->session, s1->session);
  EXPECT_EQ(svc_->Open(ino, O_WRONLY, s2->session, Root()).status().code(), Code::kWouldBlock);
  EXPECT_EQ(svc_->SetLock(LockArgs{ino, s2->session, 1, LockType::kRead, 50, 60, 9, false}).code(),
            Code::kWouldBlock);
  EXPECT_EQ(svc_->SetLock(LockArgs{ino, s2->session, 2, LockType::kWrite, 0, 0, 9, true}).code(),
            Code::kWouldBlock);
  auto held = svc_->GetLock(LockArgs{ino, s2->session, 1, LockType::kWrite, 0, 10, 0, false});
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(held->type, LockType::kWrite);
  EXPECT_EQ(held->pid, 42u);
  EXPECT_EQ(svc_->LeaseVersionFor(ino, s1->session), c->write_version);
  EXPECT_EQ(svc_->LeaseVersionFor(ino, s2->session), 0u);

  EXPECT_TRUE(*svc_->Replayed(RequestTag{s1->session.value(), 7}));
  EXPECT_FALSE(*svc_->Replayed(RequestTag{s1->session.value(), 8}));
  EXPECT_FALSE(*svc_->Replayed(RequestTag{s1->session.value(), 7 + kReplaySlots}));
  EXPECT_FALSE(*svc_->Replayed(RequestTag{s2->session.value(), 7}));

  auto committed = svc_->Commit(CommitArgs{ino, s1->session, 100, {1, 1}, c->write_version, false});
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  EXPECT_EQ(svc_->LeaseVersionFor(ino, s1->session), committed->next_write_version);
  ASSERT_TRUE(svc_->SetLock(LockArgs{ino, s1->session, 11, LockType::kUnlock, 0, 99, 42, false}).ok());
  EXPECT_TRUE(svc_->SetLock(LockArgs{ino, s2->session, 1, LockType::kRead, 50, 60, 9, false}).ok());
  ASSERT_TRUE(svc_->Release(ino, s1->session, true).ok());  // the last close frees flock too
  EXPECT_TRUE(svc_->SetLock(LockArgs{ino, s2->session, 2, LockType::kWrite, 0, 0, 9, true}).ok());
  EXPECT_TRUE(svc_->Open(ino, O_WRONLY, s2->session, Root()).ok());

  // A closed session's records go with it.
  ASSERT_TRUE(svc_->CloseSession(s1->session).ok());
  EXPECT_FALSE(*svc_->Replayed(RequestTag{s1->session.value(), 7}));
  ReopenRocksStore();
  EXPECT_EQ(svc_->KeepAlive(s1->session).code(), Code::kStale);
  EXPECT_TRUE(svc_->KeepAlive(s2->session).ok());
  CheckInvariants();
}

// Degraded writes (stripes a client wrote without some server's chunks) and the backfill request
// they make outlive a crash: the server is asked again after the restart and the count stays
// until a backfill it completes after that request.
TEST_F(MetadataServiceTest, DegradedWritesAndTheirBackfillRequestOutliveACrash) {
  UseRocksStore("degraded");
  AddServers(6);
  auto s = svc_->OpenSession("c");
  auto c = svc_->Create(CreateArgs{kRootInode, "f", S_IFREG | 0644, 0, true, s->session, true},
                        Root());
  ASSERT_TRUE(c.ok());
  CommitArgs commit{c->attr.ino, s->session, 100, {1, 1}, c->write_version, false};
  commit.backfill_servers = {ServerId(3)};
  commit.degraded_stripes = 2;
  ASSERT_TRUE(svc_->Commit(commit).ok());
  EXPECT_EQ(svc_->GetMoves().degraded_stripes, 2u);
  ReopenRocksStore();  // "crash" before server 3 heard of it
  EXPECT_EQ(svc_->GetMoves().degraded_stripes, 2u);
  HeartbeatArgs hb;
  hb.server = ServerId(3);
  hb.backfills_complete = 0;
  auto asked = svc_->Heartbeat(hb);
  ASSERT_TRUE(asked.ok());
  EXPECT_TRUE(asked->backfill) << "the backfill request was lost with the restart";
  hb.backfills_complete = 1;  // its pass completed
  ASSERT_TRUE(svc_->Heartbeat(hb).ok());
  EXPECT_EQ(svc_->GetMoves().degraded_stripes, 0u);
  ReopenRocksStore();
  EXPECT_EQ(svc_->GetMoves().degraded_stripes, 0u) << "a settled write came back";
}

// A commit whose missed chunks all went to spare failure domains (hand-off: degraded_stripes 0,
// backfill_servers set) still has the targets backfill, but counts nothing as degraded: the
// stripes have k + m chunks. Before hand-off, such a commit was counted as 1 degraded stripe.
TEST_F(MetadataServiceTest, AHandedOffCommitAsksForBackfillWithoutCountingDegradedStripes) {
  auto s = svc_->OpenSession("c");
  auto c = svc_->Create(CreateArgs{kRootInode, "f", S_IFREG | 0644, 0, true, s->session, true},
                        Root());
  ASSERT_TRUE(c.ok());
  CommitArgs commit{c->attr.ino, s->session, 100, {1, 1}, c->write_version, false};
  commit.backfill_servers = {ServerId(3)};
  commit.degraded_stripes = 0;
  ASSERT_TRUE(svc_->Commit(commit).ok());
  const auto moves = svc_->GetMoves();
  EXPECT_EQ(moves.degraded_stripes, 0u);
  EXPECT_EQ(moves.message.find("below k+m"), std::string::npos) << moves.message;
  HeartbeatArgs hb;
  hb.server = ServerId(3);
  auto asked = svc_->Heartbeat(hb);
  ASSERT_TRUE(asked.ok());
  EXPECT_TRUE(asked->backfill) << "the target that missed its chunk was not asked to backfill";
}

TEST_F(MetadataServiceTest, FcntlLocksConflictSplitAndGoWithTheSession) {
  auto s1 = svc_->OpenSession("one");
  auto s2 = svc_->OpenSession("two");
  Inode f = File(kRootInode, "f");
  auto lk = [&](SessionId s, uint64_t owner, LockType t, uint64_t a, uint64_t b, bool fl = false) {
    return svc_->SetLock(LockArgs{f.ino, s, owner, t, a, b, 7, fl});
  };
  ASSERT_TRUE(lk(s1->session, 1, LockType::kWrite, 0, 99).ok());
  EXPECT_EQ(lk(s2->session, 1, LockType::kRead, 50, 60).code(), Code::kWouldBlock);
  EXPECT_EQ(lk(s1->session, 2, LockType::kRead, 50, 60).code(), Code::kWouldBlock);
  ASSERT_TRUE(lk(s1->session, 1, LockType::kUnlock, 40, 69).ok());  // splits the lock
  EXPECT_TRUE(lk(s2->session, 1, LockType::kRead, 50, 60).ok());
  EXPECT_TRUE(lk(s2->session, 2, LockType::kRead, 50, 60).ok());  // read locks share
  auto q = svc_->GetLock(LockArgs{f.ino, s2->session, 9, LockType::kWrite, 30, 45, 0, false});
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->type, LockType::kWrite);
  EXPECT_EQ(q->start, 0u);
  EXPECT_EQ(q->end, 39u);
  // flock locks are separate from fcntl locks.
  EXPECT_TRUE(lk(s2->session, 5, LockType::kWrite, 0, 0, true).ok());
  EXPECT_EQ(lk(s1->session, 6, LockType::kRead, 0, 0, true).code(), Code::kWouldBlock);
  ASSERT_TRUE(svc_->CloseSession(s2->session).ok());
  EXPECT_TRUE(lk(s1->session, 6, LockType::kWrite, 0, 0, true).ok());
  EXPECT_TRUE(lk(s1->session, 3, LockType::kWrite, 0, UINT64_MAX).code() == Code::kWouldBlock);
  ASSERT_TRUE(lk(s1->session, 1, LockType::kUnlock, 0, UINT64_MAX).ok());
  EXPECT_TRUE(lk(s1->session, 3, LockType::kWrite, 0, UINT64_MAX).ok());
  EXPECT_EQ(svc_->SetLock(LockArgs{f.ino, SessionId(4242), 1, LockType::kRead, 0, 1, 0, false})
                .code(),
            Code::kStale);
}

TEST_F(MetadataServiceTest, InodeNumbersAreNeverReused) {
  Inode a = File(kRootInode, "a");
  ASSERT_TRUE(svc_->Unlink(kRootInode, "a", Root()).ok());
  Inode b = File(kRootInode, "a");
  EXPECT_GT(b.ino, a.ino);
}

// Many threads create, rename and unlink in one shared directory and a few private ones; the
// tree stays consistent.
TEST_F(MetadataServiceTest, ConcurrentCreateRenameUnlinkKeepInvariants) {
  Inode shared = Dir(kRootInode, "shared");
  constexpr int kThreads = 6, kOps = 300;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(1234 + t);  // seeds logged by their value: 1234 + thread index
      auto mine = svc_->Mkdir(kRootInode, "t" + std::to_string(t), 0755, Root());
      if (!mine.ok()) {
        failures++;
        return;
      }
      for (int i = 0; i < kOps; ++i) {
        std::string name = "n" + std::to_string(rng() % 40);
        std::string other = "n" + std::to_string(rng() % 40);
        InodeId from = (rng() % 2) ? shared.ino : mine->ino;
        InodeId to = (rng() % 2) ? shared.ino : mine->ino;
        Status st;
        switch (rng() % 6) {
          case 0:
          case 1: {
            CreateArgs a{from, name, S_IFREG | 0644, 0, true, SessionId(), false};
            st = svc_->Create(a, Root()).status();
            break;
          }
          case 2:
            st = svc_->Mkdir(from, name + "d", 0755, Root()).status();
            break;
          case 3:
            st = svc_->Rename(from, name, to, other, 0, Root());
            break;
          case 4:
            st = svc_->Unlink(from, name, Root());
            break;
          case 5:
            st = svc_->Rename(from, name + "d", to, other + "d", RENAME_NOREPLACE, Root());
            break;
        }
        Code c = st.code();
        if (c != Code::kOk && c != Code::kNotFound && c != Code::kAlreadyExists &&
            c != Code::kIsDirectory && c != Code::kNotDirectory) {
          failures++;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  CheckInvariants();
}

}  // namespace
}  // namespace aquifer::meta

namespace aquifer::meta {
namespace {

// Commits `ranges` as the stripes written at the session's version; returns the result.
Result<CommitResult> CommitStripes(MetadataService& svc, InodeId ino, SessionId session,
                                   uint64_t size, uint64_t version,
                                   std::vector<std::pair<uint64_t, uint64_t>> ranges) {
  CommitArgs a{ino, session, size, {9, 9}, version, false};
  a.written_stripes = std::move(ranges);
  a.records_stripes = true;
  return svc.Commit(a);
}

// A commit records the stripes its writer stored; a stripe it did not store is a recorded hole,
// and a commit from a client that does not say what it wrote makes the map unknown.
TEST_F(MetadataServiceTest, CommitsRecordWrittenStripesAndHoles) {
  auto s = svc_->OpenSession("c");
  ASSERT_TRUE(s.ok());
  CreateArgs a{kRootInode, "f", S_IFREG | 0644, 0, true, s->session, true};
  auto c = svc_->Create(a, Root());
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->attr.stripes.known());
  EXPECT_TRUE(c->attr.stripes.extents().empty());
  const uint64_t stripe = 4ull << 20;
  // Stripes 0-1 and 4 written; 2-3 are a hole (a seek past them); 9 is past the size: ignored.
  auto r = CommitStripes(*svc_, c->attr.ino, s->session, 5 * stripe, c->write_version,
                         {{0, 2}, {4, 5}, {9, 10}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->attr.stripes.extents(),
            (std::vector<StripeExtent>{{0, 2, 0}, {4, 5, 0}}));
  EXPECT_FALSE(r->attr.stripes.Find(2).written);
  // Survives a reload from the store.
  auto loaded = svc_->GetAttr(c->attr.ino);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->stripes, r->attr.stripes);
  // Bad ranges are refused and change nothing.
  EXPECT_EQ(CommitStripes(*svc_, c->attr.ino, s->session, 5 * stripe, r->next_write_version,
                          {{3, 3}}).status().code(),
            Code::kInvalidArgument);
  // An old client's commit (no records_stripes): unknown, holes inferred from then on.
  auto old = svc_->Commit(CommitArgs{c->attr.ino, s->session, 5 * stripe, {9, 9},
                                     r->next_write_version, false});
  ASSERT_TRUE(old.ok());
  EXPECT_FALSE(old->attr.stripes.known());
}

// A truncate that cuts stripes forgets them, moves the floor to every version handed out so far,
// and a stripe written again gets that floor; the O_TRUNC opener's version is above it, and the
// GC of the cut waits for the last close.
TEST_F(MetadataServiceTest, TruncateCutsTheMapAndRaisesTheFloorAboveEveryOldVersion) {
  auto s = svc_->OpenSession("c");
  ASSERT_TRUE(s.ok());
  CreateArgs a{kRootInode, "f", S_IFREG | 0644, 0, true, s->session, true};
  auto c = svc_->Create(a, Root());
  ASSERT_TRUE(c.ok());
  const uint64_t stripe = 4ull << 20;
  auto r = CommitStripes(*svc_, c->attr.ino, s->session, 3 * stripe, c->write_version, {{0, 3}});
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(svc_->Release(c->attr.ino, s->session, true).ok());
  // A reader on another session keeps the file open.
  auto reader = svc_->OpenSession("reader");
  ASSERT_TRUE(reader.ok());
  ASSERT_TRUE(svc_->Open(c->attr.ino, O_RDONLY, reader->session, Root()).ok());
  auto t = svc_->Open(c->attr.ino, O_WRONLY | O_TRUNC, s->session, Root());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->attr.size, 0u);
  EXPECT_TRUE(t->attr.stripes.extents().empty());
  EXPECT_GE(t->attr.truncate_floor, r->next_write_version);
  EXPECT_GT(t->write_version, t->attr.truncate_floor);
  ClusterMap map = svc_->GetClusterMap();
  ASSERT_FALSE(map.servers.empty());
  const ServerId server = map.servers[0].record.id;
  auto held = svc_->Heartbeat(HeartbeatArgs{server, 1, 0, 0, {}});
  ASSERT_TRUE(held.ok());
  EXPECT_TRUE(held->gc.empty()) << "a truncate's GC went out while a reader had the file open";
  // The rewrite: stripe 0 again, now with the truncate's floor.
  auto w = CommitStripes(*svc_, c->attr.ino, s->session, stripe, t->write_version, {{0, 1}});
  ASSERT_TRUE(w.ok());
  ASSERT_EQ(w->attr.stripes.extents().size(), 1u);
  EXPECT_EQ(w->attr.stripes.extents()[0].floor_version, t->attr.truncate_floor);
  ASSERT_TRUE(svc_->Release(c->attr.ino, s->session, true).ok());
  auto still = svc_->Heartbeat(HeartbeatArgs{server, 1, 0, 0, {}});
  ASSERT_TRUE(still.ok());
  EXPECT_TRUE(still->gc.empty()) << "the reader still has it open";
  ASSERT_TRUE(svc_->Release(c->attr.ino, reader->session, false).ok());
  auto sent = svc_->Heartbeat(HeartbeatArgs{server, 1, 0, 0, {}});
  ASSERT_TRUE(sent.ok());
  ASSERT_EQ(sent->gc.size(), 1u);
  EXPECT_EQ(sent->gc[0].ino, c->attr.ino);
  EXPECT_EQ(sent->gc[0].from_stripe, 0u);
  EXPECT_EQ(sent->gc[0].max_version, t->attr.truncate_floor);
}

// The floor a stripe gets is never at or above its writer's own version, even when a truncate
// since the writer's open moved the file's floor past it.
TEST_F(MetadataServiceTest, AWritersOwnStripesAreNeverBelowTheirFloor) {
  auto s = svc_->OpenSession("c");
  ASSERT_TRUE(s.ok());
  CreateArgs a{kRootInode, "f", S_IFREG | 0644, 0, true, s->session, true};
  auto c = svc_->Create(a, Root());
  ASSERT_TRUE(c.ok());
  const uint64_t stripe = 4ull << 20;
  auto r = CommitStripes(*svc_, c->attr.ino, s->session, 2 * stripe, c->write_version, {{0, 2}});
  ASSERT_TRUE(r.ok());
  SetAttrArgs t;
  t.valid = kSetSize;
  t.size = 0;
  auto cut = svc_->SetAttr(c->attr.ino, t, Root(), s->session);
  ASSERT_TRUE(cut.ok());
  EXPECT_GE(cut->truncate_floor, r->next_write_version);
  auto w = CommitStripes(*svc_, c->attr.ino, s->session, stripe, r->next_write_version, {{0, 1}});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_EQ(w->attr.stripes.extents().size(), 1u);
  EXPECT_LT(w->attr.stripes.extents()[0].floor_version, r->next_write_version);
}

// Cache leases (docs/design.md "Cache leases"): a session that asked with `cacher` holds a lease
// on what it was told; another session's change recalls it and that caller's reply waits for the
// holder's acknowledgement, its session's end, or cache_lease_ms.
class CacheLeaseTest : public MetadataServiceTest {
 protected:
  void SetUp() override {
    MetadataServiceTest::SetUp();
    opts_.cache_lease_ms = 3000;
    Restart(NewMemoryStore());
    AddServers(6);
  }
  // Runs `change` on another thread inside a RequestScope of `session`, as the RPC edge does.
  std::future<Status> ChangeAs(SessionId session, std::function<Status()> change) {
    return std::async(std::launch::async, [session, change = std::move(change)] {
      MetadataService::RequestScope scope(RequestTag{session.value(), 1});
      return change();
    });
  }
};

TEST_F(CacheLeaseTest, AChangeRecallsOtherHoldersAndWaitsForTheirAcknowledgement) {
  auto a = svc_->OpenSession("a");
  auto b = svc_->OpenSession("b");
  EXPECT_EQ(b->cache_lease_ms, 3000u);
  auto d = svc_->Mkdir(kRootInode, "d", 0755, Root());
  ASSERT_TRUE(d.ok());
  Inode f = File(d->ino, "f");
  // b caches d's names (incl. the absent "g") and f's attributes.
  ASSERT_TRUE(svc_->Lookup(d->ino, "f", Root(), b->session).ok());
  EXPECT_EQ(svc_->Lookup(d->ino, "g", Root(), b->session).status().code(), Code::kNotFound);
  EXPECT_EQ(svc_->CacheHolderCount(d->ino), 1u);
  EXPECT_EQ(svc_->CacheHolderCount(f.ino), 1u);
  // A lookup without a cacher (today's clients, tools) takes no lease.
  ASSERT_TRUE(svc_->Lookup(d->ino, "f", Root()).ok());
  EXPECT_EQ(svc_->CacheHolderCount(d->ino), 1u);

  const auto t0 = std::chrono::steady_clock::now();
  auto rename = ChangeAs(a->session, [&] {
    return svc_->Rename(d->ino, "f", d->ino, "g", 0, Root());
  });
  auto got = svc_->WaitRecalls(b->session, std::chrono::milliseconds(2000), 0);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->cache_recalls.size(), 1u);
  const MetadataService::CacheRecall& r = got->cache_recalls[0];
  EXPECT_GT(r.seq, 0u);
  std::set<InodeId> inodes(r.inodes.begin(), r.inodes.end());
  EXPECT_TRUE(inodes.count(d->ino));  // its names and its mtime changed
  std::set<std::pair<InodeId, std::string>> names(r.entries.begin(), r.entries.end());
  EXPECT_TRUE(names.count({d->ino, "f"}));
  EXPECT_TRUE(names.count({d->ino, "g"}));
  // Not acknowledged yet: a's call has not returned.
  EXPECT_EQ(rename.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  // The recall is handed again until it is acknowledged (a lost reply loses nothing).
  auto again = svc_->WaitRecalls(b->session, std::chrono::milliseconds(0), 0);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->cache_recalls.size(), 1u);
  EXPECT_EQ(again->cache_recalls[0].seq, r.seq);
  auto acked = svc_->WaitRecalls(b->session, std::chrono::milliseconds(0), r.seq, got->recall_epoch);
  ASSERT_TRUE(acked.ok());
  EXPECT_TRUE(acked->cache_recalls.empty());
  ASSERT_TRUE(rename.get().ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(2500));
  // b keeps its lease on d (it dropped only the names the recall gave): the next change in d
  // recalls it again.
  EXPECT_EQ(svc_->CacheHolderCount(d->ino), 1u);
  auto create = ChangeAs(a->session, [&] { return svc_->Mkdir(d->ino, "h", 0755, Root()).status(); });
  auto next = svc_->WaitRecalls(b->session, std::chrono::milliseconds(2000), r.seq, got->recall_epoch);
  ASSERT_TRUE(next.ok());
  ASSERT_EQ(next->cache_recalls.size(), 1u);
  EXPECT_GT(next->cache_recalls[0].seq, r.seq);
  ASSERT_TRUE(svc_->WaitRecalls(b->session, std::chrono::milliseconds(0),
                                next->cache_recalls[0].seq, got->recall_epoch).ok());
  ASSERT_TRUE(create.get().ok());
  CheckInvariants();
}

TEST_F(CacheLeaseTest, TheCallersOwnLeaseIsNotRecalledAndItKeepsCachingWhatItChanged) {
  auto a = svc_->OpenSession("a");
  auto d = svc_->Mkdir(kRootInode, "d", 0755, Root());
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(svc_->GetAttr(d->ino, a->session).ok());
  const auto t0 = std::chrono::steady_clock::now();
  auto mk = ChangeAs(a->session, [&] { return svc_->Mkdir(d->ino, "e", 0755, Root()).status(); });
  ASSERT_TRUE(mk.get().ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1000));
  auto got = svc_->WaitRecalls(a->session, std::chrono::milliseconds(0), 0);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->cache_recalls.empty());
  EXPECT_EQ(svc_->CacheHolderCount(d->ino), 1u);  // granted again: a's reply told it d's attrs
}

TEST_F(CacheLeaseTest, ASilentHolderDelaysAChangeByAtMostTheLeaseAndAnEndedOneNotAtAll) {
  auto a = svc_->OpenSession("a");
  auto b = svc_->OpenSession("b");
  Inode f = File(kRootInode, "f");
  ASSERT_TRUE(svc_->GetAttr(f.ino, b->session).ok());
  SetAttrArgs chmod;
  chmod.valid = kSetMode;
  chmod.mode = 0600;
  auto t0 = std::chrono::steady_clock::now();
  auto silent = ChangeAs(a->session, [&] {
    return svc_->SetAttr(f.ino, chmod, Root(), a->session).status();
  });
  ASSERT_TRUE(silent.get().ok());  // b never answered: the lease was broken after 3 s
  auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, std::chrono::milliseconds(2900));
  EXPECT_LT(waited, std::chrono::milliseconds(6000));

  // b caches again, then its session ends while a's change waits: the wait ends with it.
  ASSERT_TRUE(svc_->GetAttr(f.ino, b->session).ok());
  t0 = std::chrono::steady_clock::now();
  chmod.mode = 0640;
  auto released = ChangeAs(a->session, [&] {
    return svc_->SetAttr(f.ino, chmod, Root(), a->session).status();
  });
  EXPECT_EQ(released.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  ASSERT_TRUE(svc_->CloseSession(b->session).ok());
  ASSERT_TRUE(released.get().ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(2500));
  EXPECT_EQ(svc_->WaitRecalls(b->session, std::chrono::milliseconds(0), 0).status().code(),
            Code::kStale);
}

TEST_F(CacheLeaseTest, ReadDirPlusCoversTheEntriesAndAnUnlinkRecallsThem) {
  auto a = svc_->OpenSession("a");
  auto b = svc_->OpenSession("b");
  Inode f = File(kRootInode, "f");
  bool eof = false;
  ASSERT_TRUE(svc_->ReadDir(kRootInode, 0, 100, true, Root(), &eof, b->session).ok());
  EXPECT_EQ(svc_->CacheHolderCount(kRootInode), 1u);
  EXPECT_EQ(svc_->CacheHolderCount(f.ino), 1u);
  auto rm = ChangeAs(a->session, [&] { return svc_->Unlink(kRootInode, "f", Root()); });
  auto got = svc_->WaitRecalls(b->session, std::chrono::milliseconds(2000), 0);
  ASSERT_TRUE(got.ok());
  ASSERT_FALSE(got->cache_recalls.empty());
  std::set<InodeId> inodes;
  std::set<std::pair<InodeId, std::string>> names;
  uint64_t last = 0;
  for (const auto& r : got->cache_recalls) {
    inodes.insert(r.inodes.begin(), r.inodes.end());
    names.insert(r.entries.begin(), r.entries.end());
    last = r.seq;
  }
  EXPECT_TRUE(inodes.count(f.ino));  // gone
  EXPECT_TRUE(inodes.count(kRootInode));
  EXPECT_TRUE(names.count({kRootInode, "f"}));
  ASSERT_TRUE(svc_->WaitRecalls(b->session, std::chrono::milliseconds(0), last, got->recall_epoch).ok());
  ASSERT_TRUE(rm.get().ok());
  EXPECT_EQ(svc_->CacheHolderCount(f.ino), 0u);
}

// A restart forgets every lease, and the seqs start again at 1. Before this, a holder's old
// acked_seq acknowledged the new run's first recalls unseen; now an ack counts only in the epoch
// it names, and changes wait until each restored caching session has resynced.
TEST_F(CacheLeaseTest, ARestartStartsANewEpochAndChangesWaitForRestoredHoldersToResync) {
  UseRocksStore("cache-restart");
  AddServers(6);
  auto a = svc_->OpenSession("a", /*caches=*/true);
  auto b = svc_->OpenSession("b", /*caches=*/true);
  auto d = svc_->Mkdir(kRootInode, "d", 0755, Root());
  ASSERT_TRUE(d.ok());
  // b takes and acknowledges a few recalls, so its acked seq is past what a new run starts at.
  uint64_t acked = 0, epoch = 0;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(svc_->Lookup(d->ino, "n" + std::to_string(i), Root(), b->session).status().code(),
              Code::kNotFound);
    auto mk = ChangeAs(a->session, [&, i] {
      return svc_->Mkdir(d->ino, "n" + std::to_string(i), 0755, Root()).status();
    });
    auto got = svc_->WaitRecalls(b->session, std::chrono::milliseconds(2000), acked, epoch);
    ASSERT_TRUE(got.ok());
    ASSERT_FALSE(got->cache_recalls.empty());
    acked = got->cache_recalls.back().seq;
    epoch = got->recall_epoch;
    ASSERT_TRUE(svc_->WaitRecalls(b->session, std::chrono::milliseconds(0), acked, epoch).ok());
    ASSERT_TRUE(mk.get().ok());
  }
  ASSERT_GE(acked, 3u);

  ReopenRocksStore();  // "crash"; a and b come back with the store
  AddServers(6);
  // b has not called since the restart: a's change waits for it (b may trust d's old names).
  auto t0 = std::chrono::steady_clock::now();
  auto held = ChangeAs(a->session, [&] { return svc_->Mkdir(d->ino, "held", 0755, Root()).status(); });
  EXPECT_EQ(held.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  // b asks with its old epoch and seq: nothing is acknowledged, and it learns the new epoch.
  auto first = svc_->WaitRecalls(b->session, std::chrono::milliseconds(0), acked, epoch);
  ASSERT_TRUE(first.ok());
  EXPECT_NE(first->recall_epoch, epoch);
  EXPECT_EQ(held.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  // Its next ask names the new epoch: it dropped its caches; a's change goes on.
  ASSERT_TRUE(svc_->WaitRecalls(b->session, std::chrono::milliseconds(0), 0,
                                first->recall_epoch).ok());
  ASSERT_TRUE(held.get().ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(2500));

  // The new run's recall seq 1 is not acknowledged by b's old seq.
  EXPECT_EQ(svc_->Lookup(d->ino, "late", Root(), b->session).status().code(), Code::kNotFound);
  auto late = ChangeAs(a->session, [&] { return svc_->Mkdir(d->ino, "late", 0755, Root()).status(); });
  auto got = svc_->WaitRecalls(b->session, std::chrono::milliseconds(2000), acked, epoch);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->cache_recalls.size(), 1u);
  EXPECT_EQ(got->cache_recalls[0].seq, 1u);
  EXPECT_EQ(late.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  ASSERT_TRUE(svc_->WaitRecalls(b->session, std::chrono::milliseconds(0), 1,
                                got->recall_epoch).ok());
  ASSERT_TRUE(late.get().ok());

  // A restored session that never calls again holds changes for at most cache_lease_ms.
  ReopenRocksStore();
  AddServers(6);
  t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(ChangeAs(a->session, [&] {
                return svc_->Mkdir(d->ino, "silent", 0755, Root()).status();
              }).get().ok());
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, std::chrono::milliseconds(2000));
  EXPECT_LT(waited, std::chrono::milliseconds(6000));
  t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(ChangeAs(a->session, [&] {
                return svc_->Mkdir(d->ino, "after", 0755, Root()).status();
              }).get().ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1000));
  CheckInvariants();
}

TEST_F(CacheLeaseTest, OffMeansNoLeasesAndNoWaits) {
  opts_.cache_lease_ms = 0;
  Restart(NewMemoryStore());
  AddServers(6);
  auto a = svc_->OpenSession("a");
  auto b = svc_->OpenSession("b");
  EXPECT_EQ(b->cache_lease_ms, 0u);
  Inode f = File(kRootInode, "f");
  ASSERT_TRUE(svc_->GetAttr(f.ino, b->session).ok());
  EXPECT_EQ(svc_->CacheHolderCount(f.ino), 0u);
  const auto t0 = std::chrono::steady_clock::now();
  auto rm = ChangeAs(a->session, [&] { return svc_->Unlink(kRootInode, "f", Root()); });
  ASSERT_TRUE(rm.get().ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1000));
  EXPECT_TRUE(svc_->WaitRecalls(b->session, std::chrono::milliseconds(0), 0)->cache_recalls.empty());
}


// Exclusive directory leases (docs/design.md "Exclusive directory leases"): a session alone in
// a directory gets the lease and reserved inode numbers, sends its creates in one batch, and
// another session's call on the directory first recalls the lease and waits for its give-back.
class DirLeaseTest : public CacheLeaseTest {
 protected:
  // Makes directory "d" in the root (mode 0777, into *dir) and has `session` granted the
  // exclusive lease on it, with `inodes` numbers (and as many write versions) reserved; a
  // failure is reported and leaves granted false.
  DirLeaseGrant LeaseNewDir(SessionId session, uint32_t inodes, Inode* dir,
                            const Caller& caller = Root()) {
    auto d = svc_->Mkdir(kRootInode, "d", 0777, Root());
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    if (!d.ok()) return {};
    *dir = *d;
    auto g = svc_->AcquireDirLease(d->ino, session, inodes, caller);
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    return g.ok() ? *g : DirLeaseGrant{};
  }
  BatchChange Item(InodeId parent, const std::string& name, uint64_t ino) {
    BatchChange b;
    b.parent = parent;
    b.name = name;
    b.mode = S_IFREG | 0640;
    b.ino = InodeId(ino);
    b.caller = User(1000, 1000);
    b.time = Timespec{1800000000, 5};
    b.open_for_write = true;
    return b;
  }
};

TEST_F(DirLeaseTest, ASessionAloneInADirectoryGetsTheLeaseAndItsBatchAnswersEachCreate) {
  auto a = svc_->OpenSession("a", true);
  auto b = svc_->OpenSession("b", true);
  auto d = svc_->Mkdir(kRootInode, "d", 0777, Root());
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(svc_->GetAttr(d->ino, a->session).ok());  // a caches d: that is no conflict
  auto g = svc_->AcquireDirLease(d->ino, a->session, 16, User());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(g->granted);
  ASSERT_EQ(g->ino_count, 16u);
  EXPECT_EQ(svc_->DirLeaseHolder(d->ino), a->session.value());
  EXPECT_EQ(g->file_layout.k, 4u);
  // b is refused while a holds it, but gets numbers of its own.
  auto gb = svc_->AcquireDirLease(d->ino, b->session, 4, User());
  ASSERT_TRUE(gb.ok());
  EXPECT_FALSE(gb->granted);
  EXPECT_EQ(gb->ino_count, 4u);
  EXPECT_GE(gb->ino_first, g->ino_first + 16);

  std::vector<BatchChange> items;
  for (uint64_t i = 0; i < 10; ++i) {
    items.push_back(Item(d->ino, "f" + std::to_string(i), g->ino_first + i));
  }
  items.push_back(Item(d->ino, "f3", g->ino_first + 10));        // the name is taken (item 3)
  items.push_back(Item(d->ino, "x", g->ino_first + 2));          // the number is taken
  items.push_back(Item(d->ino, "y", gb->ino_first));             // b's number, not a's
  items.push_back(Item(d->ino, "bad/name", g->ino_first + 11));  // not a name
  items.push_back(Item(d->ino, "badtime", g->ino_first + 12));
  items.back().time.nsec = 1000000000;                           // not a time
  items.push_back(Item(d->ino, "badkind", g->ino_first + 13));
  items.back().kind = BatchChange::Kind::kUnknown;               // a kind from a newer client
  const auto before = svc_->GetAttr(d->ino);
  auto r = svc_->ChangeBatch(a->session, items, false);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), items.size());
  for (size_t i = 0; i < 10; ++i) {
    ASSERT_TRUE((*r)[i].ok()) << i << ": " << (*r)[i].status().ToString();
    EXPECT_EQ((*r)[i]->attr.ino.value(), g->ino_first + i);
    EXPECT_GT((*r)[i]->write_version, 0u);
    EXPECT_EQ((*r)[i]->attr.uid, 1000u);
    EXPECT_EQ((*r)[i]->attr.mode, S_IFREG | 0640u);
    EXPECT_EQ((*r)[i]->attr.mtime, (Timespec{1800000000, 5}));  // the client's clock
  }
  EXPECT_EQ((*r)[10].status().code(), Code::kAlreadyExists);
  EXPECT_EQ((*r)[11].status().code(), Code::kAlreadyExists);
  EXPECT_EQ((*r)[12].status().code(), Code::kInvalidArgument);
  EXPECT_EQ((*r)[13].status().code(), Code::kInvalidArgument);
  EXPECT_EQ((*r)[14].status().code(), Code::kInvalidArgument);
  EXPECT_EQ((*r)[15].status().code(), Code::kInvalidArgument);
  auto f3 = svc_->Lookup(d->ino, "f3", Root());
  ASSERT_TRUE(f3.ok());
  EXPECT_EQ(f3->ino.value(), g->ino_first + 3);
  auto after = svc_->GetAttr(d->ino);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->entry_count, before->entry_count + 10);
  // A number used once never names another inode, even after its inode is gone.
  ASSERT_TRUE(svc_->Release(InodeId(g->ino_first + 9), a->session, true).ok());
  BatchChange gone = Item(d->ino, "f9", 0);
  gone.kind = BatchChange::Kind::kUnlink;
  auto r1 = svc_->ChangeBatch(a->session, {gone}, false);
  ASSERT_TRUE(r1.ok() && (*r1)[0].ok());
  EXPECT_EQ(svc_->GetAttr(InodeId(g->ino_first + 9)).status().code(), Code::kNotFound);
  auto r2 = svc_->ChangeBatch(a->session, {Item(d->ino, "again", g->ino_first + 9),
                                           Item(d->ino, "older", g->ino_first + 7)},
                              false);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ((*r2)[0].status().code(), Code::kInvalidArgument);  // its inode is gone: still used
  EXPECT_EQ((*r2)[1].status().code(), Code::kInvalidArgument);
  EXPECT_EQ(svc_->Lookup(d->ino, "again", Root()).status().code(), Code::kNotFound);
  // Each file is open for write by a, with the lease: its release frees it as any open's.
  ASSERT_TRUE(svc_->Release(InodeId(g->ino_first), a->session, true).ok());
  CheckInvariants();
}

TEST_F(DirLeaseTest, AnotherSessionsCallRecallsTheLeaseAndWaitsForTheGiveBack) {
  auto a = svc_->OpenSession("a", true);
  auto b = svc_->OpenSession("b", true);
  Inode d;
  const DirLeaseGrant g = LeaseNewDir(a->session, 8, &d);
  ASSERT_TRUE(g.granted);
  // b's lookup in d recalls a's lease first; a gets it as a recall of d and gives it back
  // after its batch.
  auto look = std::async(std::launch::async, [&] {
    auto guard = svc_->BreakDirLeases({d.ino.value()}, b->session.value());
    return svc_->Lookup(d.ino, "made-by-a", Root(), b->session);
  });
  auto recalled = svc_->WaitRecalls(a->session, std::chrono::milliseconds(2000), 0);
  ASSERT_TRUE(recalled.ok());
  ASSERT_EQ(recalled->write_leases.size(), 1u);
  EXPECT_EQ(recalled->write_leases[0], d.ino);
  EXPECT_EQ(look.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  auto r = svc_->ChangeBatch(a->session, {Item(d.ino, "made-by-a", g.ino_first)}, false);
  ASSERT_TRUE(r.ok() && (*r)[0].ok());
  ASSERT_TRUE(svc_->ReturnLease(d.ino, a->session).ok());
  auto seen = look.get();
  ASSERT_TRUE(seen.ok()) << seen.status().ToString();  // b sees what a made under the lease
  EXPECT_EQ(seen->ino.value(), g.ino_first);
  EXPECT_EQ(svc_->DirLeaseHolder(d.ino), 0u);
  // b now caches d: a is refused the lease from now on (and creates with Create).
  auto again = svc_->AcquireDirLease(d.ino, a->session, 0, Root());
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->granted);
  // A create of a's in d after the give-back still applies (it is late, not wrong).
  auto late = svc_->ChangeBatch(a->session, {Item(d.ino, "late", g.ino_first + 1)}, false);
  ASSERT_TRUE(late.ok() && (*late)[0].ok());
  CheckInvariants();
}

TEST_F(DirLeaseTest, ASilentHolderLosesTheLeaseAfterTheBoundAndItsLaterCreatesThereFail) {
  auto a = svc_->OpenSession("a", true);
  auto b = svc_->OpenSession("b", true);
  Inode d;
  const DirLeaseGrant g = LeaseNewDir(a->session, 8, &d);
  ASSERT_TRUE(g.granted);
  const auto t0 = std::chrono::steady_clock::now();
  {
    auto guard = svc_->BreakDirLeases({d.ino.value()}, b->session.value());
  }
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, std::chrono::milliseconds(2900));  // cache_lease_ms
  EXPECT_LT(waited, std::chrono::milliseconds(6000));
  EXPECT_EQ(svc_->DirLeaseHolder(d.ino), 0u);
  auto r = svc_->ChangeBatch(a->session, {Item(d.ino, "late", g.ino_first)}, false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].status().code(), Code::kStale);
  EXPECT_EQ(svc_->Lookup(d.ino, "late", Root()).status().code(), Code::kNotFound);
  // An ended session's lease goes with it: nothing waits.
  auto g2 = svc_->AcquireDirLease(d.ino, a->session, 0, Root());
  ASSERT_TRUE(g2.ok());
  ASSERT_TRUE(svc_->CloseSession(a->session).ok());
  const auto t1 = std::chrono::steady_clock::now();
  { auto guard = svc_->BreakDirLeases({d.ino.value()}, b->session.value()); }
  EXPECT_LT(std::chrono::steady_clock::now() - t1, std::chrono::milliseconds(1000));
  CheckInvariants();
}

TEST_F(DirLeaseTest, ABatchMakesDirectoriesUnlinksAndRenamesInOrder) {
  using Kind = BatchChange::Kind;
  auto a = svc_->OpenSession("a", true);
  auto d = svc_->Mkdir(kRootInode, "d", 0777, Root());
  ASSERT_TRUE(d.ok());
  Inode old = File(d->ino, "old");  // made before the lease, by a plain Create
  auto g = svc_->AcquireDirLease(d->ino, a->session, 16, Root());
  ASSERT_TRUE(g.ok() && g->granted);
  auto change = [&](Kind kind, InodeId parent, const std::string& name, uint64_t ino = 0,
                    InodeId new_parent = InodeId(), const std::string& new_name = "") {
    BatchChange b = Item(parent, name, ino);
    b.kind = kind;
    b.mode = kind == Kind::kMkdir ? 0750 : b.mode;
    b.new_parent = new_parent;
    b.new_name = new_name;
    return b;
  };
  const InodeId sub(g->ino_first);
  std::vector<BatchChange> items = {
      change(Kind::kMkdir, d->ino, "sub", sub.value()),
      change(Kind::kCreate, sub, "f", g->ino_first + 1),            // inside the new directory
      change(Kind::kCreate, d->ino, "tmp", g->ino_first + 2),
      change(Kind::kRename, d->ino, "tmp", 0, sub, "g"),            // across, made this batch
      change(Kind::kRename, sub, "f", 0, d->ino, "old"),            // over a file made before
      change(Kind::kUnlink, sub, "g"),
      change(Kind::kUnlink, d->ino, "missing"),                     // fails alone
      change(Kind::kRename, d->ino, "sub", 0, d->ino, "sub2"),      // a directory, by name
      change(Kind::kCreate, InodeId(sub.value()), "h", g->ino_first + 3),
  };
  auto r = svc_->ChangeBatch(a->session, items, false);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (size_t i = 0; i < items.size(); ++i) {
    if (i == 6) continue;
    EXPECT_TRUE((*r)[i].ok()) << i << ": " << (*r)[i].status().ToString();
  }
  EXPECT_EQ((*r)[6].status().code(), Code::kNotFound);
  EXPECT_EQ((*r)[0]->attr.mode, S_IFDIR | 0750u);
  auto now_old = svc_->Lookup(d->ino, "old", Root());
  ASSERT_TRUE(now_old.ok());
  EXPECT_EQ(now_old->ino.value(), g->ino_first + 1);  // f moved over it
  EXPECT_EQ(svc_->GetAttr(old.ino).status().code(), Code::kNotFound);  // replaced and gone
  auto sub2 = svc_->Lookup(d->ino, "sub2", Root());
  ASSERT_TRUE(sub2.ok());
  EXPECT_EQ(sub2->ino, sub);
  EXPECT_EQ(sub2->nlink, 2u);
  EXPECT_EQ(sub2->entry_count, 1u);  // h; f and g left
  EXPECT_TRUE(svc_->Lookup(sub, "h", Root()).ok());
  EXPECT_EQ(svc_->Lookup(sub, "g", Root()).status().code(), Code::kNotFound);
  EXPECT_EQ(svc_->DirLeaseHolder(sub), a->session.value());  // made under the lease: a's too
  auto dir = svc_->GetAttr(d->ino);
  ASSERT_TRUE(dir.ok());
  EXPECT_EQ(dir->nlink, 3u);
  // g was unlinked while a had it open (its create opened it): an orphan until the release.
  auto g_orphan = svc_->GetAttr(InodeId(g->ino_first + 2));
  ASSERT_TRUE(g_orphan.ok());
  EXPECT_EQ(g_orphan->nlink, 0u);
  ASSERT_TRUE(svc_->Release(InodeId(g->ino_first + 2), a->session, true).ok());
  EXPECT_EQ(svc_->GetAttr(InodeId(g->ino_first + 2)).status().code(), Code::kNotFound);
  CheckInvariants();
}

TEST_F(DirLeaseTest, ReservedNumbersOutliveACrash) {
  UseRocksStore("dirlease");
  AddServers(6);
  auto a = svc_->OpenSession("a", true);
  Inode d;
  const DirLeaseGrant g = LeaseNewDir(a->session, 8, &d);
  ASSERT_TRUE(g.granted);
  ReopenRocksStore();  // kill -9 of aquifer-meta with a's creates not sent yet
  // The lease went with the run; the numbers did not, and no new inode takes them.
  EXPECT_EQ(svc_->DirLeaseHolder(d.ino), 0u);
  Inode other = File(kRootInode, "other");
  EXPECT_GE(other.ino.value(), g.ino_first + 8);
  BatchChange late = Item(d.ino, "after-restart", g.ino_first);
  late.generation = g.generation;  // as the client told its kernel
  auto r = svc_->ChangeBatch(a->session, {late}, true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE((*r)[0].ok()) << (*r)[0].status().ToString();
  ReopenRocksStore();
  auto f = svc_->Lookup(d.ino, "after-restart", Root());
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->ino.value(), g.ino_first);
  // The generation the number was reserved in, not this run's: the client's kernel has the
  // inode with it (another generation makes the kernel fail the open files of the old inode).
  EXPECT_EQ(f->generation, g.generation);
  EXPECT_NE(other.generation, g.generation);
  CheckInvariants();
}

// Issue 18 must 4: a file made in a batch commits in a batch too (the chunks are written; close
// does not wait for the commit). The batch's commit is Commit's: the holder's version is
// checked, the stripes join the map, the answer carries the next version, and one store write
// holds the create and the commit.
TEST_F(DirLeaseTest, ACommitInTheBatchBehindItsCreateIsTheFilesCommit) {
  auto a = svc_->OpenSession("a", true);
  auto b = svc_->OpenSession("b", true);
  Inode d;
  const DirLeaseGrant g = LeaseNewDir(a->session, 8, &d);
  ASSERT_TRUE(g.granted);
  auto made = svc_->ChangeBatch(a->session, {Item(d.ino, "f", g.ino_first)}, false);
  ASSERT_TRUE(made.ok() && (*made)[0].ok());
  const uint64_t version = (*made)[0]->write_version;
  ASSERT_GT(version, 0u);
  auto commit = [&](uint64_t ino, uint64_t size, uint64_t v) {
    BatchChange c;
    c.kind = BatchChange::Kind::kCommit;
    c.ino = InodeId(ino);
    c.size = size;
    c.write_version = v;
    c.time = Timespec{1800000001, 7};
    c.written_stripes = {{0, 1}};
    return c;
  };
  BatchChange malformed = commit(g.ino_first, 10, version);
  malformed.stripes_malformed = true;
  BatchChange empty_range = commit(g.ino_first, 10, version);
  empty_range.written_stripes = {{3, 3}};
  BatchChange unleased = Item(d.ino, "g", g.ino_first + 1);
  unleased.open_for_write = false;  // another session takes its write lease below
  auto r = svc_->ChangeBatch(a->session,
                             {commit(g.ino_first, 0, version + 1000000),  // never handed out
                              malformed, empty_range,
                              commit(g.ino_first + 1, 10, version),  // no such inode
                              unleased,
                              commit(g.ino_first, 5000, version),
                              commit(g.ino_first + 1, 0, 0)},  // version 0
                             false);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 7u);
  EXPECT_EQ((*r)[0].status().code(), Code::kInvalidArgument);
  EXPECT_EQ((*r)[1].status().code(), Code::kInvalidArgument);
  EXPECT_EQ((*r)[2].status().code(), Code::kInvalidArgument);
  EXPECT_EQ((*r)[3].status().code(), Code::kNotFound);
  ASSERT_TRUE((*r)[4].ok()) << (*r)[4].status().ToString();
  ASSERT_TRUE((*r)[5].ok()) << (*r)[5].status().ToString();
  EXPECT_EQ((*r)[6].status().code(), Code::kInvalidArgument);
  EXPECT_EQ((*r)[5]->attr.size, 5000u);
  EXPECT_EQ((*r)[5]->attr.data_version, version);
  EXPECT_EQ((*r)[5]->attr.mtime, (Timespec{1800000001, 7}));
  EXPECT_GT((*r)[5]->write_version, version);  // the next version, as Commit answers
  auto f = svc_->Lookup(d.ino, "f", Root());
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->size, 5000u);
  EXPECT_EQ(f->data_version, version);
  ASSERT_TRUE(f->stripes.Find(0).written);  // the stripe map has the written stripe
  // An older version than the committed one is refused as Commit refuses it; another session
  // holding the write lease refuses the holder's commit.
  auto old = svc_->ChangeBatch(a->session, {commit(g.ino_first, 1, version - 1)}, false);
  ASSERT_TRUE(old.ok());
  EXPECT_FALSE((*old)[0].ok());
  auto theirs = svc_->Open(InodeId(g.ino_first + 1), O_RDWR, b->session, Root());
  ASSERT_TRUE(theirs.ok()) << theirs.status().ToString();
  auto stolen = svc_->ChangeBatch(a->session, {commit(g.ino_first + 1, 1, version)}, false);
  ASSERT_TRUE(stolen.ok());
  EXPECT_EQ((*stolen)[0].status().code(), Code::kStale);
  CheckInvariants();
}

// A chmod, chown or utimes of a file made under the lease goes in the batch as SETATTR: applied
// with SetAttr's rules (the caller's rights, the set-id bits), ctime and *_NOW at the item's
// time; a size or ctime is refused there (a SetAttr call of its own).
TEST_F(DirLeaseTest, ASetattrInTheBatchFollowsSetattrsRules) {
  auto a = svc_->OpenSession("a", true);
  Inode d;
  const DirLeaseGrant g = LeaseNewDir(a->session, 8, &d, User(1000, 1000));
  ASSERT_TRUE(g.granted);
  auto set = [&](uint32_t valid, uint32_t mode, uint32_t uid, uint32_t gid, Caller caller) {
    BatchChange c;
    c.kind = BatchChange::Kind::kSetAttr;
    c.ino = InodeId(g.ino_first);
    c.caller = std::move(caller);
    c.time = Timespec{1800000002, 9};
    SetAttrArgs args;
    args.valid = valid;
    args.mode = mode;
    args.uid = uid;
    args.gid = gid;
    args.size = 0;
    args.mtime = Timespec{1500000000, 1};
    c.attrs = args;
    return c;
  };
  BatchChange no_attrs = set(kSetMode, 0, 0, 0, User(1000, 1000));
  no_attrs.attrs.reset();
  auto r = svc_->ChangeBatch(
      a->session,
      {Item(d.ino, "f", g.ino_first),
       set(kSetMode, 02755, 0, 0, User(1000, 1000)),              // the owner, in the group
       set(kSetUid, 0, 0, 0, User(1000, 1000)),                   // chown to root: not root
       set(kSetGid, 0, 0, 77, User(1000, 1000)),                  // not in group 77
       set(kSetSize, 0, 0, 0, User(1000, 1000)),                  // a size: its own call
       set(kSetMtime | kSetAtimeNow, 0, 0, 0, User(1000, 1000)),  // times, by the owner
       set(kSetMode, 0644, 0, 0, User(2000, 2000)),               // not the owner
       set(kSetUid | kSetGid, 0, 3000, 3000, Root()),             // root's chown
       no_attrs},
      false);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 9u);
  ASSERT_TRUE((*r)[0].ok());
  ASSERT_TRUE((*r)[1].ok()) << (*r)[1].status().ToString();
  EXPECT_EQ((*r)[1]->attr.mode, S_IFREG | 02755u);
  EXPECT_EQ((*r)[1]->attr.ctime, (Timespec{1800000002, 9}));
  EXPECT_EQ((*r)[2].status().code(), Code::kNotPermitted);
  EXPECT_EQ((*r)[3].status().code(), Code::kNotPermitted);
  EXPECT_EQ((*r)[4].status().code(), Code::kInvalidArgument);
  ASSERT_TRUE((*r)[5].ok());
  EXPECT_EQ((*r)[5]->attr.mtime, (Timespec{1500000000, 1}));
  EXPECT_EQ((*r)[5]->attr.atime, (Timespec{1800000002, 9}));  // now: the item's time
  EXPECT_EQ((*r)[6].status().code(), Code::kNotPermitted);
  ASSERT_TRUE((*r)[7].ok());
  // A chown without a mode change clears setuid, and setgid with group execute.
  EXPECT_EQ((*r)[7]->attr.mode, S_IFREG | 0755u);
  EXPECT_EQ((*r)[7]->attr.uid, 3000u);
  EXPECT_EQ((*r)[8].status().code(), Code::kInvalidArgument);
  auto f = svc_->Lookup(d.ino, "f", Root());
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->mode, S_IFREG | 0755u);
  EXPECT_EQ(f->gid, 3000u);
  CheckInvariants();
}

// A file created for write under the lease writes at a version its grant reserved, before its
// create is sent: the batched create takes that version (one never handed out is refused), a
// refused create's number is collected (its writer may have stored chunks), and so are the
// unused reserved numbers of a session that expires (its client died with creates unsent).
TEST_F(DirLeaseTest, CreatesTakeReservedVersionsAndUnusedNumbersAreCollected) {
  auto a = svc_->OpenSession("a", true);
  Inode d;
  const DirLeaseGrant g = LeaseNewDir(a->session, 8, &d);
  ASSERT_TRUE(g.granted);
  ASSERT_EQ(g.version_count, 8u);
  ASSERT_GT(g.version_first, 0u);
  BatchChange mine = Item(d.ino, "f", g.ino_first);
  mine.write_version = g.version_first + 3;
  BatchChange unknown = Item(d.ino, "g", g.ino_first + 1);
  unknown.write_version = g.version_first + 1000000;  // never handed out
  BatchChange taken = Item(d.ino, "f", g.ino_first + 2);  // the name is taken: refused
  taken.write_version = g.version_first + 4;
  const size_t gc_before = svc_->PendingGcTasks().size();
  auto r = svc_->ChangeBatch(a->session, {mine, unknown, taken}, false);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE((*r)[0].ok()) << (*r)[0].status().ToString();
  EXPECT_EQ((*r)[0]->write_version, g.version_first + 3);
  EXPECT_EQ((*r)[1].status().code(), Code::kInvalidArgument);
  EXPECT_EQ((*r)[2].status().code(), Code::kAlreadyExists);
  auto has_task = [&](uint64_t ino) {
    for (const GcTask& t : svc_->PendingGcTasks()) {
      if (t.ino.value() == ino && t.from_stripe == 0 && t.max_version == UINT64_MAX) return true;
    }
    return false;
  };
  EXPECT_TRUE(has_task(g.ino_first + 1));   // refused: its chunks (if any) go
  EXPECT_TRUE(has_task(g.ino_first + 2));
  EXPECT_FALSE(has_task(g.ino_first));      // the file that exists keeps its chunks
  EXPECT_EQ(svc_->PendingGcTasks().size(), gc_before + 2);
  // The client dies: its session expires, and every reserved number above the last it used
  // that no inode has is collected.
  mono_ms_ += opts_.session_ttl_ms + 10;
  svc_->Tick();
  for (uint64_t ino = g.ino_first + 3; ino < g.ino_first + 8; ++ino) {
    EXPECT_TRUE(has_task(ino)) << ino;
  }
  EXPECT_FALSE(has_task(g.ino_first));
  CheckInvariants();
}

}  // namespace
}  // namespace aquifer::meta

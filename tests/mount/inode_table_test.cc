#include "client_fuse/inode_table.h"

#include <gtest/gtest.h>

namespace aquifer::fuse {
namespace {

Attributes File(uint64_t ino, uint64_t size, int64_t mtime_sec, uint64_t version) {
  Attributes a;
  a.inode = InodeId(ino);
  a.size_bytes = size;
  a.mtime = Timestamp{mtime_sec, 5};
  a.data_version = version;
  return a;
}

TEST(InodeTableTest, CountsLookupsAndForgetsAtZero) {
  InodeTable t;
  t.AddLookup(InodeId(7), File(7, 0, 1, 1));
  t.AddLookup(InodeId(7), File(7, 0, 1, 1), 2);
  EXPECT_EQ(t.LookupCount(InodeId(7)), 3u);
  t.Forget(InodeId(7), 2);
  EXPECT_EQ(t.LookupCount(InodeId(7)), 1u);
  t.Forget(InodeId(7), 1);
  EXPECT_EQ(t.LookupCount(InodeId(7)), 0u);
  t.Forget(InodeId(7), 5);  // tolerated
  t.Forget(InodeId(99), 1);
  EXPECT_EQ(t.LookupCount(InodeId(99)), 0u);
}

TEST(InodeTableTest, KeepsCacheOnlyWhenUnchangedSinceThisMountsPreviousOpen) {
  InodeTable t;
  t.AddLookup(InodeId(3), File(3, 10, 100, 4));
  EXPECT_FALSE(t.RecordOpen(InodeId(3), File(3, 10, 100, 4)).keep_cache);  // first open
  EXPECT_TRUE(t.RecordOpen(InodeId(3), File(3, 10, 100, 4)).keep_cache);   // unchanged
  EXPECT_FALSE(t.RecordOpen(InodeId(3), File(3, 10, 100, 5)).keep_cache);  // new data version
  EXPECT_FALSE(t.RecordOpen(InodeId(3), File(3, 11, 100, 5)).keep_cache);  // size changed
  EXPECT_TRUE(t.RecordOpen(InodeId(3), File(3, 11, 100, 5)).keep_cache);
}

TEST(InodeTableTest, ForgettingAnInodeDropsItsOpenHistory) {
  InodeTable t;
  t.AddLookup(InodeId(3), File(3, 10, 100, 4));
  (void)t.RecordOpen(InodeId(3), File(3, 10, 100, 4));
  t.Forget(InodeId(3), 1);  // the kernel dropped the inode and its page cache
  t.AddLookup(InodeId(3), File(3, 10, 100, 4));
  EXPECT_FALSE(t.RecordOpen(InodeId(3), File(3, 10, 100, 4)).keep_cache);
}

TEST(InodeTableTest, ReportsAttributesChangedSinceTheKernelWasLastTold) {
  InodeTable t;
  t.AddLookup(InodeId(4), File(4, 10, 100, 1));
  EXPECT_FALSE(t.RecordOpen(InodeId(4), File(4, 10, 100, 1)).attrs_changed);
  EXPECT_TRUE(t.RecordOpen(InodeId(4), File(4, 20, 101, 2)).attrs_changed);  // written elsewhere
  t.NoteAttributes(File(4, 30, 102, 3));  // a GETATTR told the kernel the new size
  EXPECT_FALSE(t.RecordOpen(InodeId(4), File(4, 30, 102, 3)).attrs_changed);
}

TEST(InodeTableTest, RemembersPosixLocksUntilForgotten) {
  InodeTable t;
  t.AddLookup(InodeId(5), File(5, 0, 0, 0));
  EXPECT_FALSE(t.HasPosixLocks(InodeId(5)));
  t.NotePosixLocks(InodeId(5));
  EXPECT_TRUE(t.HasPosixLocks(InodeId(5)));
  t.Forget(InodeId(5), 1);
  EXPECT_FALSE(t.HasPosixLocks(InodeId(5)));
}

}  // namespace
}  // namespace aquifer::fuse

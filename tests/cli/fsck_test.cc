#include "cli/fsck.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

namespace aquifer::cli {
namespace {

constexpr uint32_t kUnit = 1048576;

// An in-memory cluster: a flat root directory and one chunk listing per server.
class FakeRpc : public FsckRpc {
 public:
  std::vector<FsckDirEntry> root;
  std::map<std::string, std::vector<FsckChunk>> chunks;  // address -> sorted chunks
  std::vector<FsckServer> servers;
  std::vector<std::tuple<std::string, uint64_t, uint64_t, uint64_t>> deletes;

  void AddFile(uint64_t ino, uint64_t size, uint64_t dv) {
    FsckDirEntry e;
    e.name = "f" + std::to_string(ino);
    e.cookie = root.size() + 1;
    e.attr = FsckAttr{InodeId(ino), S_IFREG | 0644, size, dv, 4, 2, kUnit};
    root.push_back(e);
  }
  void AddChunk(int server, uint64_t ino, uint64_t stripe, uint32_t pos, uint64_t version,
                uint64_t stripe_bytes) {
    const std::string addr = "s" + std::to_string(server) + ":1";
    if (chunks.find(addr) == chunks.end()) {
      servers.push_back(FsckServer{ServerId(static_cast<uint32_t>(server)), addr, true, "in", 1});
    }
    FsckChunk c;
    c.ino = InodeId(ino);
    c.stripe = stripe;
    c.position = pos;
    c.version = version;
    c.length = 100;
    c.has_placement = true;
    c.pg_width = 6;
    c.k = 4;
    c.m = 2;
    c.unit_bytes = kUnit;
    c.stripe_bytes = stripe_bytes;
    c.replicated = stripe_bytes < kUnit;
    auto& v = chunks[addr];
    v.push_back(c);
    std::sort(v.begin(), v.end(), [](const FsckChunk& a, const FsckChunk& b) {
      return std::tie(a.ino, a.stripe, a.position, a.version) <
             std::tie(b.ino, b.stripe, b.position, b.version);
    });
  }
  // One stripe's chunks, position p on server p+1.
  void AddStripe(uint64_t ino, uint64_t stripe, uint64_t version, uint64_t stripe_bytes,
                 std::vector<uint32_t> positions) {
    for (uint32_t p : positions) AddChunk(static_cast<int>(p) + 1, ino, stripe, p, version, stripe_bytes);
  }

  Result<std::vector<FsckServer>> Servers() override { return servers; }
  Result<FsckDirPage> ReadDir(InodeId dir, uint64_t cookie) override {
    FsckDirPage p;
    if (dir == kRootInode) {
      for (const auto& e : root) {
        if (e.cookie > cookie && p.entries.size() < 2) p.entries.push_back(e);  // pages of 2
      }
    }
    p.eof = p.entries.empty() || p.entries.back().cookie == root.size();
    return p;
  }
  Result<std::optional<FsckAttr>> GetAttr(InodeId ino) override {
    for (const auto& e : root) {
      if (e.attr.ino == ino) return std::optional<FsckAttr>(e.attr);
    }
    return std::optional<FsckAttr>();
  }
  Result<FsckChunkPage> ListChunks(const std::string& address, InodeId ino, uint64_t stripe,
                                   uint32_t pos, uint32_t limit) override {
    FsckChunkPage page;
    const auto after = std::make_tuple(ino.value(), stripe, pos);
    const auto& v = chunks[address];
    size_t i = 0;
    while (i < v.size() && std::make_tuple(v[i].ino.value(), v[i].stripe, v[i].position) <= after &&
           !(ino.value() == 0 && stripe == 0 && pos == 0)) {
      ++i;
    }
    uint32_t keys = 0;
    for (; i < v.size(); ++i) {
      if (page.chunks.empty() || page.chunks.back().ino != v[i].ino ||
          page.chunks.back().stripe != v[i].stripe || page.chunks.back().position != v[i].position) {
        if (keys == limit) return page;
        ++keys;
      }
      page.chunks.push_back(v[i]);
    }
    page.eof = true;
    return page;
  }
  Result<uint64_t> DeleteChunks(const std::string& address, InodeId ino, uint64_t from,
                                uint64_t max_version, uint64_t min_version) override {
    deletes.emplace_back(address, ino.value(), from, max_version);
    min_versions.push_back(min_version);
    return 1;
  }
  Result<bool> DeletesVersionRanges(const std::string& address) override {
    (void)address;
    return version_ranges;
  }
  Result<FsckRestoreFloors> RestoreFloors() override { return floors; }
  Result<uint64_t> InodesInUse() override { return inodes_in_use; }
  Result<std::vector<FsckGcTask>> PendingGc() override {
    ++pending_gc_calls;
    if (on_pending_gc) on_pending_gc();
    return gc;
  }

  std::vector<uint64_t> min_versions;  // of each delete, in order
  bool version_ranges = true;          // what every server's Info says
  FsckRestoreFloors floors;            // the metadata server's (0: never restored)
  uint64_t inodes_in_use = 0;          // StatFs's files
  std::vector<FsckGcTask> gc;          // the metadata server's pending GC tasks
  int pending_gc_calls = 0;
  std::function<void()> on_pending_gc;  // runs as the tasks are asked for

  // Drops every chunk of `ino` on every server (a GC task finishing).
  void Collect(uint64_t ino) {
    for (auto& [addr, v] : chunks) {
      std::erase_if(v, [ino](const FsckChunk& c) { return c.ino.value() == ino; });
    }
  }
};

// Gives file `ino` a stripe map (known) with `extents`.
void SetStripes(FakeRpc& rpc, uint64_t ino, std::vector<StripeExtent> extents) {
  for (auto& e : rpc.root) {
    if (e.attr.ino.value() != ino) continue;
    e.attr.stripes_known = true;
    e.attr.stripes = std::move(extents);
  }
}

FsckReport Check(FakeRpc& rpc, bool repair, std::string* text = nullptr) {
  std::ostringstream out;
  FsckOptions o;
  o.repair = repair;
  o.page_chunks = 1;  // exercise paging
  Result<FsckReport> r = RunFsck(rpc, o, out);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (text) *text = out.str();
  return r.ok() ? *r : FsckReport{};
}

TEST(FsckTest, WholeFilesAreCleanAndEmptyTailDataChunksAreNotMissing) {
  FakeRpc rpc;
  rpc.AddFile(10, 5 * kUnit, 7);  // stripe 0 full (4 units), stripe 1: 1 unit -> data 0 + parity
  rpc.AddStripe(10, 0, 7, 4 * kUnit, {0, 1, 2, 3, 4, 5});
  rpc.AddStripe(10, 1, 7, kUnit, {0, 4, 5});
  rpc.AddFile(11, 100, 3);  // replicated: positions 0..2
  rpc.AddStripe(11, 0, 3, 100, {0, 1, 2});
  std::string text;
  FsckReport r = Check(rpc, false, &text);
  EXPECT_TRUE(r.clean()) << text;
  EXPECT_EQ(r.files, 2u);
  EXPECT_EQ(r.stripes, 3u);
}

// A file name is untrusted text: fsck shows its control bytes escaped, so a name holding
// terminal escape sequences cannot forge lines or colours in the operator's terminal.
TEST(FsckTest, NamesArePrintedWithControlBytesEscaped) {
  FakeRpc rpc;
  rpc.AddFile(12, 4 * kUnit, 9);
  rpc.root.back().name = "evil\x1b[2J\nOK  all clean";
  rpc.AddStripe(12, 0, 9, 4 * kUnit, {0, 1, 5});  // lost, so the name is printed
  std::string text;
  Check(rpc, false, &text);
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_NE(text.find("/evil\\x1b[2J\\x0aOK  all clean"), std::string::npos) << text;
}

TEST(FsckTest, ReportsMissingRebuildableAndLostStripes) {
  FakeRpc rpc;
  rpc.AddFile(10, 4 * kUnit, 7);
  rpc.AddStripe(10, 0, 7, 4 * kUnit, {0, 1, 3, 4, 5});  // position 2 missing: rebuildable
  rpc.AddFile(11, 100, 3);
  rpc.AddStripe(11, 0, 3, 100, {1});  // replicated, 2 copies missing, one left: rebuildable
  rpc.AddFile(12, 4 * kUnit, 9);
  rpc.AddStripe(12, 0, 9, 4 * kUnit, {0, 1, 5});  // 3 of 6: lost
  std::string text;
  FsckReport r = Check(rpc, false, &text);
  EXPECT_FALSE(r.clean());
  EXPECT_EQ(r.missing_stripes, 2u) << text;
  EXPECT_EQ(r.missing_chunks, 3u) << text;
  EXPECT_EQ(r.lost_stripes, 1u) << text;
  EXPECT_NE(text.find("positions 0,2 absent"), std::string::npos) << text;
}

TEST(FsckTest, PartialNewerVersionOverAWholeOlderOneIsAWarningAndUncommittedIsIgnored) {
  FakeRpc rpc;
  rpc.AddFile(10, 4 * kUnit, 8);
  rpc.AddStripe(10, 0, 5, 4 * kUnit, {0, 1, 2, 3, 4, 5});
  rpc.AddStripe(10, 0, 8, 4 * kUnit, {0, 1});  // a crashed writer's, below a later commit
  rpc.AddStripe(10, 0, 9, 4 * kUnit, {3});     // uncommitted
  FsckReport r = Check(rpc, false);
  EXPECT_TRUE(r.clean());
  EXPECT_EQ(r.partial_versions, 1u);
  EXPECT_EQ(r.uncommitted_versions, 1u);
}

TEST(FsckTest, RepairDeletesChunksOfMissingInodesAndCommittedStripesPastTheEnd) {
  FakeRpc rpc;
  rpc.AddFile(10, 100, 7);
  rpc.AddStripe(10, 0, 7, 100, {0, 1, 2});
  rpc.AddStripe(10, 2, 6, 100, {0, 1, 2});  // past the end (1 stripe)
  rpc.AddStripe(10, 3, 8, 100, {0});        // past the end but uncommitted: a writer's, kept
  rpc.AddStripe(99, 0, 4, 100, {0, 1});     // inode 99 does not exist
  FsckReport before = Check(rpc, false);
  EXPECT_FALSE(before.clean());
  EXPECT_EQ(before.orphan_inodes, 1u);
  EXPECT_EQ(before.past_eof_files, 1u);
  EXPECT_EQ(before.orphan_chunks, 5u);
  EXPECT_TRUE(rpc.deletes.empty());
  FsckReport after = Check(rpc, true);
  EXPECT_TRUE(after.clean());
  // inode 99: everything on its 2 servers; inode 10: from stripe 1, versions <= 7, on 3 servers.
  int whole = 0, tail = 0;
  for (const auto& [addr, ino, from, maxv] : rpc.deletes) {
    if (ino == 99 && from == 0 && maxv == UINT64_MAX) ++whole;
    if (ino == 10 && from == 1 && maxv == 7) ++tail;
  }
  EXPECT_EQ(whole, 2);
  EXPECT_EQ(tail, 3);
  EXPECT_EQ(rpc.deletes.size(), 5u);
}

// Regression (issue 22, the 30-minute storm): fsck run right after a burst of deletes counted
// the chunks of deleted files still awaiting GC as orphans and exited 1; 30 s later it was
// clean. Chunks a pending GC task covers are being collected, not orphans, and --repair leaves
// them to the GC; a truncate's pending task covers the committed chunks past the new end.
TEST(FsckTest, ChunksAPendingGcTaskCoversAreBeingCollectedNotOrphans) {
  FakeRpc rpc;
  rpc.AddFile(10, 100, 7);
  rpc.AddStripe(10, 0, 7, 100, {0, 1, 2});
  rpc.AddStripe(10, 2, 6, 100, {0, 1, 2});  // past the end: a truncate whose GC is pending
  rpc.AddStripe(50, 0, 4, 100, {0, 1, 2});  // inode 50 deleted, its GC pending
  rpc.AddStripe(51, 0, 3, 4 * kUnit, {0, 1, 2, 3, 4, 5});
  rpc.gc.push_back(FsckGcTask{InodeId(50), 0, UINT64_MAX});
  rpc.gc.push_back(FsckGcTask{InodeId(51), 0, UINT64_MAX});
  rpc.gc.push_back(FsckGcTask{InodeId(10), 1, 7});
  std::string text;
  FsckReport r = Check(rpc, true, &text);
  EXPECT_TRUE(r.clean()) << text;
  EXPECT_EQ(r.orphan_inodes, 0u) << text;
  EXPECT_EQ(r.past_eof_files, 0u) << text;
  EXPECT_EQ(r.collecting_inodes, 3u) << text;
  EXPECT_EQ(r.collecting_chunks, 12u) << text;
  EXPECT_TRUE(rpc.deletes.empty()) << "fsck --repair deleted what GC is deleting";
  EXPECT_NE(text.find("being collected: 12 chunk versions"), std::string::npos) << text;
}

// A task covers only what it names: a truncate's task from stripe 3 does not cover a committed
// chunk past the end at stripe 2, a task that stops at version 5 does not cover version 6 of a
// deleted inode, and another inode's task covers nothing here. Those stay orphans.
TEST(FsckTest, ChunksNoPendingGcTaskCoversStayOrphans) {
  FakeRpc rpc;
  rpc.AddFile(10, 100, 7);
  rpc.AddStripe(10, 0, 7, 100, {0, 1, 2});
  rpc.AddStripe(10, 2, 6, 100, {0});
  rpc.AddStripe(60, 0, 6, 100, {0, 1});
  rpc.AddStripe(61, 0, 1, 100, {0});
  rpc.gc.push_back(FsckGcTask{InodeId(10), 3, 7});
  rpc.gc.push_back(FsckGcTask{InodeId(60), 0, 5});
  rpc.gc.push_back(FsckGcTask{InodeId(62), 0, UINT64_MAX});
  std::string text;
  FsckReport r = Check(rpc, false, &text);
  EXPECT_FALSE(r.clean()) << text;
  EXPECT_EQ(r.orphan_inodes, 2u) << text;
  EXPECT_EQ(r.past_eof_files, 1u) << text;
  EXPECT_EQ(r.collecting_chunks, 0u) << text;
}

// A deleted file's GC that finishes after the listing and before fsck asks for the pending
// tasks leaves no task to cover its chunks; the second listing finds them gone, so they are
// not orphans. Chunks of a missing inode still there at the second listing with no task are.
TEST(FsckTest, ChunksGcDeletedDuringTheCheckAreNotOrphans) {
  FakeRpc rpc;
  rpc.AddStripe(70, 0, 2, 100, {0, 1, 2});
  rpc.AddStripe(71, 0, 2, 100, {0, 1});
  rpc.on_pending_gc = [&rpc] { rpc.Collect(70); };  // GC of inode 70 done just now
  std::string text;
  FsckReport r = Check(rpc, false, &text);
  EXPECT_EQ(rpc.pending_gc_calls, 1);
  EXPECT_EQ(r.orphan_inodes, 1u) << text;
  EXPECT_EQ(r.orphan_chunks, 2u) << text;
  EXPECT_EQ(r.collected_during_check, 3u) << text;
  EXPECT_NE(text.find("inode 71 does not exist"), std::string::npos) << text;
  EXPECT_EQ(text.find("inode 70 does not exist"), std::string::npos) << text;
}

// Regression (issue 16, problem 2): a stripe with no chunk on any server was taken for a hole,
// so files whose every copy was lost passed fsck. With a stripe map, a recorded stripe with no
// chunk is LOST and the file named; a recorded hole with no chunk is fine; chunks of a stripe
// the map does not record, or at or below its floor, are a truncate's leftovers, not checked.
TEST(FsckTest, StripesRecordedAsWrittenWithNoChunkAreLostAndHolesAreNot) {
  FakeRpc rpc;
  // 3 stripes of 4 MiB: 0 and 2 written, 1 a hole; stripe 2 has nothing left anywhere.
  rpc.AddFile(20, 12 * kUnit, 9);
  SetStripes(rpc, 20, {{0, 1, 0}, {2, 3, 0}});
  rpc.AddStripe(20, 0, 9, 4 * kUnit, {0, 1, 2, 3, 4, 5});
  // A small file whose three copies are all gone: never listed by any server.
  rpc.AddFile(21, 100, 4);
  SetStripes(rpc, 21, {{0, 1, 0}});
  // A rewritten file: stripe 0 rewritten above the floor 5; stripe 1 cut (not recorded) but its
  // old chunks are still there, and stripe 0 has old chunks at version 5 on other positions.
  rpc.AddFile(22, 4 * kUnit, 8);
  SetStripes(rpc, 22, {{0, 1, 5}});
  rpc.AddStripe(22, 0, 8, 4 * kUnit, {0, 1, 2, 3, 4, 5});
  rpc.AddStripe(22, 0, 5, 2 * kUnit, {0, 1});
  rpc.AddStripe(22, 1, 5, 4 * kUnit, {0, 1, 2});
  // The same as 21 without a map (an inode from before maps): a hole, as before.
  rpc.AddFile(23, 100, 4);
  std::string text;
  FsckReport r = Check(rpc, false, &text);
  EXPECT_FALSE(r.clean()) << text;
  EXPECT_EQ(r.lost_stripes, 2u) << text;
  EXPECT_EQ(r.lost_files, 2u) << text;
  EXPECT_EQ(r.missing_stripes, 0u) << text;
  EXPECT_NE(text.find("LOST  /f20 (inode 20) stripe 2"), std::string::npos) << text;
  EXPECT_NE(text.find("LOST  /f21 (inode 21) stripe 0"), std::string::npos) << text;
  EXPECT_EQ(text.find("f22"), std::string::npos) << text;
  EXPECT_EQ(text.find("f23"), std::string::npos) << text;
}

// Issue 17: after a restore from a backup, the chunk versions of files from the backup that
// were written after it (above the restored data_version, below the restore's version floor)
// are orphans, removed by --repair through that version range only; files made after the
// restore, and their writers' uncommitted versions, are left alone.
TEST(FsckTest, AfterARestoreVersionsWrittenAfterTheBackupAreOrphansDeletedByTheirRangeOnly) {
  FakeRpc rpc;
  rpc.floors = FsckRestoreFloors{/*version=*/1000, /*ino=*/50};
  // From the backup, committed at 7; rewritten in place after it at 20 (stripe 0, whole) and 25
  // (stripe 1, a torn write).
  rpc.AddFile(10, 5 * kUnit, 7);
  SetStripes(rpc, 10, {{0, 2, 0}});
  rpc.AddStripe(10, 0, 7, 4 * kUnit, {0, 1, 2, 3, 4, 5});
  rpc.AddStripe(10, 1, 7, kUnit, {0, 4, 5});
  rpc.AddStripe(10, 0, 20, 4 * kUnit, {0, 1, 2, 3, 4, 5});
  rpc.AddStripe(10, 1, 25, kUnit, {0});
  // Created before the backup and written after it (a cp in flight): size 0 in the backup.
  rpc.AddFile(11, 0, 0);
  SetStripes(rpc, 11, {});
  rpc.AddStripe(11, 0, 5, 300, {0, 1, 2});
  // From the backup, opened for write after the restore (the metadata server abandoned 9..999)
  // and committed at 1100.
  rpc.AddFile(12, 200, 1100);
  SetStripes(rpc, 12, {{0, 1, 1099}});
  for (auto& e : rpc.root) {
    if (e.attr.ino.value() == 12) e.attr.abandoned = {{9, 999}};
  }
  rpc.AddStripe(12, 0, 9, 200, {0, 1, 2});
  rpc.AddStripe(12, 0, 1100, 200, {0, 1, 2});
  // Made after the restore, with a writer still at it: not orphans, an uncommitted version.
  rpc.AddFile(60, 100, 1200);
  SetStripes(rpc, 60, {{0, 1, 1199}});
  rpc.AddStripe(60, 0, 1200, 100, {0, 1, 2});
  rpc.AddStripe(60, 0, 1300, 100, {0, 1, 2});

  std::string text;
  FsckReport r = Check(rpc, false, &text);
  EXPECT_FALSE(r.clean()) << text;
  EXPECT_EQ(r.restored_leftover_files, 3u) << text;
  EXPECT_EQ(r.orphan_chunks, 6u + 1u + 3u + 3u) << text;
  EXPECT_EQ(r.missing_stripes, 0u) << text;
  EXPECT_EQ(r.lost_stripes, 0u) << text;
  EXPECT_EQ(r.uncommitted_versions, 3u) << text;  // inode 60's writer only
  EXPECT_NE(text.find("ORPHAN  /f10 (inode 10): 7 chunk versions written after the backup the "
                      "namespace was restored from (versions 8..999)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("ORPHAN  /f11 (inode 11): 3 chunk versions written after the backup"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("ORPHAN  /f12 (inode 12): 3 chunk versions written after the backup the "
                      "namespace was restored from (versions 9..999)"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("ORPHAN  /f60"), std::string::npos) << text;
  EXPECT_TRUE(rpc.deletes.empty());

  r = Check(rpc, true, &text);
  EXPECT_TRUE(r.clean()) << text;
  EXPECT_EQ(r.orphans_left, 0u) << text;
  // One delete per server holding them, each bounded below by the range's first version.
  std::map<uint64_t, std::set<uint64_t>> min_by_ino;
  ASSERT_EQ(rpc.deletes.size(), rpc.min_versions.size());
  for (size_t i = 0; i < rpc.deletes.size(); ++i) {
    const auto& [address, ino, from, max_version] = rpc.deletes[i];
    EXPECT_EQ(from, 0u);
    EXPECT_EQ(max_version, 999u) << "inode " << ino;
    min_by_ino[ino].insert(rpc.min_versions[i]);
  }
  EXPECT_EQ(min_by_ino[10], (std::set<uint64_t>{8}));
  EXPECT_EQ(min_by_ino[11], (std::set<uint64_t>{1}));
  EXPECT_EQ(min_by_ino[12], (std::set<uint64_t>{9}));
  EXPECT_EQ(min_by_ino.count(60), 0u);
  EXPECT_EQ(rpc.deletes.size(), 6u + 3u + 3u);  // inode 10 on 6 servers, 11 and 12 on 3
}

// A data server that would ignore the lower bound (and delete the committed versions too) is
// never sent such a delete: the orphans stay, fsck says why and is not clean.
TEST(FsckTest, RestoredLeftoversAreNotDeletedOnAServerThatIgnoresTheLowerBound) {
  FakeRpc rpc;
  rpc.floors = FsckRestoreFloors{1000, 50};
  rpc.version_ranges = false;
  rpc.AddFile(10, 100, 7);
  SetStripes(rpc, 10, {{0, 1, 0}});
  rpc.AddStripe(10, 0, 7, 100, {0, 1, 2});
  rpc.AddStripe(10, 0, 30, 100, {0, 1, 2});
  std::string text;
  FsckReport r = Check(rpc, true, &text);
  EXPECT_FALSE(r.clean()) << text;
  EXPECT_TRUE(rpc.deletes.empty()) << text;
  EXPECT_EQ(r.orphans_left, 3u) << text;
  EXPECT_NE(text.find("does not honour a lower version bound"), std::string::npos) << text;
}

// Without a restore, versions above data_version stay warnings (an open writer's) as before.
TEST(FsckTest, WithoutARestoreVersionsAboveTheCommittedOneAreOnlyWarnings) {
  FakeRpc rpc;
  rpc.AddFile(10, 100, 7);
  SetStripes(rpc, 10, {{0, 1, 0}});
  rpc.AddStripe(10, 0, 7, 100, {0, 1, 2});
  rpc.AddStripe(10, 0, 30, 100, {0, 1, 2});
  std::string text;
  FsckReport r = Check(rpc, true, &text);
  EXPECT_TRUE(r.clean()) << text;
  EXPECT_EQ(r.uncommitted_versions, 3u) << text;
  EXPECT_TRUE(rpc.deletes.empty()) << text;
  EXPECT_EQ(text.find("restored"), std::string::npos) << text;
}

// Progress lines give the walk's names against the inodes in use and the listing's chunk
// versions and bytes against what the servers reported, and end at the final figures.
TEST(FsckTest, ProgressLinesCountAgainstTheReportedTotals) {
  FakeRpc rpc;
  for (uint64_t ino = 10; ino < 14; ++ino) {
    rpc.AddFile(ino, 100, 1);
    rpc.AddStripe(ino, 0, 1, 100, {0, 1, 2});
  }
  rpc.inodes_in_use = 5;  // the root and 4 files
  for (FsckServer& s : rpc.servers) {
    s.chunk_count = 4;
    s.used_bytes = 400;
  }
  std::ostringstream out;
  FsckOptions o;
  o.page_chunks = 1;
  o.progress_interval_s = 1e-9;  // every chance to report
  Result<FsckReport> r = RunFsck(rpc, o, out);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::string text = out.str();
  EXPECT_TRUE(r->clean()) << text;
  EXPECT_NE(text.find("fsck: walking the namespace: 2/~5 names"), std::string::npos) << text;
  EXPECT_NE(text.find("fsck: walking the namespace: 4/~5 names"), std::string::npos) << text;
  EXPECT_NE(text.find("fsck: listing chunks: 12/~12 versions, 1.2 KiB/~1.2 KiB"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("\r"), std::string::npos) << "no bar unless asked";
}

// On a terminal the bar is redrawn in place; a finding printed after it first clears its line,
// so findings never start in the middle of a bar.
TEST(FsckTest, AFindingPrintedAfterTheProgressBarClearsItsLineFirst) {
  FakeRpc rpc;
  for (uint64_t ino = 10; ino < 10 + 300; ++ino) {
    rpc.AddFile(ino, 100, 1);
    // The last file misses two of its three copies: a finding after the bar at stripe 256.
    rpc.AddStripe(ino, 0, 1, 100, ino == 309 ? std::vector<uint32_t>{0} : std::vector<uint32_t>{0, 1, 2});
  }
  std::ostringstream out;
  FsckOptions o;
  o.progress_bar = true;
  o.progress_interval_s = 1e-9;
  Result<FsckReport> r = RunFsck(rpc, o, out);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::string text = out.str();
  EXPECT_EQ(r->missing_stripes, 1u) << text;
  const size_t finding = text.find("MISSING");
  ASSERT_NE(finding, std::string::npos) << text;
  const size_t clear = text.rfind("\r\033[K", finding);
  ASSERT_NE(clear, std::string::npos) << text;
  const std::string before = text.substr(clear + 4, finding - clear - 4);
  EXPECT_EQ(before.find_first_of("\n#%"), std::string::npos)
      << "the finding does not start its own line: " << before;
  const size_t line_start = text.rfind('\n', clear) + 1;
  EXPECT_NE(text.substr(line_start, clear - line_start).find("fsck [#"), std::string::npos)
      << "no bar was drawn before the finding";
  EXPECT_NE(text.find("fsck [##############################] 100% listing chunks"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace aquifer::cli

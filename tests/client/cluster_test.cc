// The client library against a real cluster of processes (ProcessCluster): striping, degraded
// reads, versions, truncate, leases and close-to-open. No kernel mount.
#include <fcntl.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <map>
#include <random>
#include <span>
#include <thread>
#include <tuple>

#include "aquifer/client.h"
#include "aquifer/units.h"
#include "client/rpc/data_client.h"
#include "client/striping.h"
#include "common/failpoint.h"
#include "testing/cluster_fixture.h"

namespace aquifer {
namespace {

using testing::ProcessClusterOptions;
using testing::RandomBytes;
using testing::WaitUntil;

const Caller kRoot{};

std::span<const std::byte> Bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

// Writes `data` at `offset` through `file`, asserting success.
void WriteAt(Client& client, OpenFile& file, uint64_t offset, const std::string& data) {
  Result<size_t> n = client.Write(file, offset, Bytes(data));
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  ASSERT_EQ(*n, data.size());
}

Result<std::string> ReadAt(Client& client, OpenFile& file, uint64_t offset, size_t length) {
  std::string out(length, '\0');
  Result<size_t> n = client.Read(
      file, offset, std::span<std::byte>(reinterpret_cast<std::byte*>(out.data()), length));
  if (!n.ok()) return n.status();
  out.resize(*n);
  return out;
}

class ClusterTest : public testing::ProcessClusterTest {};

TEST_F(ClusterTest, ReadSurvivesTwoDataServerCrashes) {
  StartCluster();
  auto client = NewClient();
  ASSERT_TRUE(client);
  const std::string blob = RandomBytes(8 * kMiB, /*seed=*/7);
  ASSERT_OK(client->WriteFile("/a", blob, kRoot));
  ASSERT_OK(cluster_->CrashDataServer(1));
  ASSERT_OK(cluster_->CrashDataServer(4));
  Result<std::string> read = client->ReadFile("/a", kRoot);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(*read == blob);
  // A fresh client, whose map may already show the servers down, reads it too.
  auto other = NewClient();
  ASSERT_TRUE(other);
  read = other->ReadFile("/a", kRoot);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(*read == blob);
}

// A data server that accepts connections and answers nothing (SIGSTOP: what a hung or very slow
// server looks like) costs a read one chunk timeout, then the stripe is decoded from the others;
// writes go on with the server's chunk missing. Both over the chunk wire (the default) and gRPC.
TEST_F(ClusterTest, ReadsAndWritesGoOnPastTwoDataServersThatStopAnswering) {
  StartCluster();
  for (const bool wire : {true, false}) {
    SCOPED_TRACE(wire ? "chunk wire" : "gRPC");
    ClientOptions options;
    options.data_wire = wire;
    options.chunk_timeout = std::chrono::milliseconds(500);
    options.rpc_timeout = std::chrono::milliseconds(2000);  // chunk writes too
    auto client = NewClient(options);
    ASSERT_TRUE(client);
    const std::string path = std::string("/paused-") + (wire ? "wire" : "grpc");
    const std::string blob = RandomBytes(6 * kMiB + 123, /*seed=*/wire ? 17 : 18);
    ASSERT_OK(client->WriteFile(path, blob, kRoot));
    ASSERT_OK(cluster_->PauseDataServer(2));
    ASSERT_OK(cluster_->PauseDataServer(5));
    const auto start = std::chrono::steady_clock::now();
    Result<std::string> read = client->ReadFile(path, kRoot);
    const auto took = std::chrono::steady_clock::now() - start;
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    EXPECT_TRUE(*read == blob);
    EXPECT_LT(took, std::chrono::seconds(10));
    const std::string more = RandomBytes(3 * kMiB, /*seed=*/wire ? 19 : 20);
    ASSERT_OK(client->WriteFile(path + ".2", more, kRoot));
    read = client->ReadFile(path + ".2", kRoot);
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    EXPECT_TRUE(*read == more);
    ASSERT_OK(cluster_->PauseDataServer(2, false));
    ASSERT_OK(cluster_->PauseDataServer(5, false));
    ASSERT_OK(cluster_->WaitForUpDataServers(6));
  }
}

// tar and cp -a set a file's times (futimens) right after writing it, before close. The
// buffered writes are committed with the change in one call; the close after it commits nothing
// more, so the times stay, and another client sees bytes, size and times at once. A time change
// the server refuses (not the owner) still leaves the writes committed.
TEST_F(ClusterTest, TimesSetOnAFileWithBufferedWritesStayAfterItsClose) {
  StartCluster();
  auto a = NewClient();
  auto b = NewClient();
  ASSERT_TRUE(a && b);
  Result<Client::Opened> f = a->Create(kRootInode, "t", 0644, O_RDWR, kRoot);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const InodeId ino = Client::InodeOf(*f->file);
  const std::string first = RandomBytes(10000, /*seed=*/31);
  WriteAt(*a, *f->file, 0, first);
  AttrChanges times;
  times.mtime = Timestamp{1234567890, 123};
  times.atime = Timestamp{1234567000, 9};
  Result<Attributes> set = a->SetAttr(ino, times, kRoot);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->mtime, (Timestamp{1234567890, 123}));
  EXPECT_EQ(set->size_bytes, first.size());
  Result<Attributes> seen = b->Resolve("/t", kRoot);
  ASSERT_TRUE(seen.ok()) << seen.status().ToString();
  EXPECT_EQ(seen->size_bytes, first.size());
  EXPECT_EQ(seen->mtime, (Timestamp{1234567890, 123}));
  EXPECT_EQ(seen->atime, (Timestamp{1234567000, 9}));
  ASSERT_OK(a->Release(std::move(f->file)));
  seen = b->Resolve("/t", kRoot);
  ASSERT_TRUE(seen.ok()) << seen.status().ToString();
  EXPECT_EQ(seen->mtime, (Timestamp{1234567890, 123})) << "the close set mtime again";
  Result<std::string> read = b->ReadFile("/t", kRoot);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(*read == first);

  Result<Client::Opened> again = a->Open(ino, O_RDWR, kRoot);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  const std::string more = RandomBytes(5000, /*seed=*/32);
  WriteAt(*a, *again->file, first.size(), more);
  const Caller other{2000, 2000, {}, 1};
  EXPECT_EQ(a->SetAttr(ino, times, other).status().code(), Code::kNotPermitted);
  seen = b->Resolve("/t", kRoot);
  ASSERT_TRUE(seen.ok()) << seen.status().ToString();
  EXPECT_EQ(seen->size_bytes, first.size() + more.size()) << "the writes were not committed";
  ASSERT_OK(a->Release(std::move(again->file)));
  read = b->ReadFile("/t", kRoot);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(*read == first + more);
}

// Counts the chunk files of `inode` under a data server's chunk directory.
int ChunkFilesOf(const std::string& data_dir, InodeId inode) {
  const std::string prefix = "c." + std::to_string(inode.value()) + ".";
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::recursive_directory_iterator(data_dir + "/chunks", ec)) {
    if (e.is_regular_file() && e.path().filename().string().starts_with(prefix)) ++n;
  }
  return n;
}

// A data server that stays up (in the map) but does not answer a stripe's chunk write gets the
// stripe accepted without its chunk. The commit names it, the metadata server has it backfill,
// and it rebuilds the chunk, so the file survives two other servers crashing afterwards. Before,
// nothing rebuilt the chunk until a move of that PG position (the stripe tolerated one loss).
TEST_F(ClusterTest, AChunkMissedByAServerThatStayedUpIsBackfilledAfterTheCommit) {
  ProcessClusterOptions cluster;
  cluster.heartbeat_timeout_ms = 10000;  // the pause below never marks the server down
  // No backfill after registration within the test: only the commit's request can start one.
  cluster.data_flags = {"--backfill-delay-ms=600000"};
  StartCluster(cluster);
  ClientOptions options;
  options.chunk_timeout = std::chrono::milliseconds(500);
  options.rpc_timeout = std::chrono::milliseconds(800);  // chunk writes too
  auto client = NewClient(options);
  ASSERT_TRUE(client);
  const std::string blob = RandomBytes(4 * kMiB, /*seed=*/41);  // one full stripe: 6 chunks
  ASSERT_OK(cluster_->PauseDataServer(3));
  ASSERT_OK(client->WriteFile("/missed", blob, kRoot));
  // Issue 16 problem 3: the cluster says so until the chunk is rebuilt (it said healthy).
  Result<client::MovesStatus> moves = cluster_->admin().GetMoves();
  ASSERT_TRUE(moves.ok()) << moves.status().ToString();
  EXPECT_EQ(moves->degraded_stripes, 1u) << moves->message;
  EXPECT_NE(moves->message.find("1 stripes written below k+m"), std::string::npos)
      << moves->message;
  ASSERT_OK(cluster_->PauseDataServer(3, false));
  Result<Attributes> attr = client->Resolve("/missed", kRoot);
  ASSERT_TRUE(attr.ok()) << attr.status().ToString();
  Result<client::ClusterMap> map = cluster_->GetClusterMap();
  ASSERT_TRUE(map.ok());
  for (const auto& [id, server] : map->servers) ASSERT_TRUE(server.up) << id.value();
  EXPECT_TRUE(WaitUntil([&] { return ChunkFilesOf(cluster_->data_dir(3), attr->inode) == 1; },
                        std::chrono::seconds(20)))
      << "the server that missed the chunk never rebuilt it";
  EXPECT_TRUE(WaitUntil(
      [&] {
        moves = cluster_->admin().GetMoves();
        return moves.ok() && moves->degraded_stripes == 0;
      },
      std::chrono::seconds(20)))
      << "still counted as degraded after the backfill: " << (moves.ok() ? moves->message : "");
  ASSERT_OK(cluster_->CrashDataServer(0));
  ASSERT_OK(cluster_->CrashDataServer(5));
  auto reader = NewClient();
  ASSERT_TRUE(reader);
  Result<std::string> read = reader->ReadFile("/missed", kRoot);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(*read == blob);
}

// Issue 16 problem 3: a chunk whose target is down when its stripe is written goes to a server
// of a spare failure domain (8 servers, PGs of 6), so the stripe keeps k + m chunks: it survives
// two more crashes of its PG's targets (before, that stripe had 5 chunks and two more crashes
// left 3 < k: EIO), status does not count it as degraded, and once the target is back and
// backfilled the spare server deletes its copy.
TEST_F(ClusterTest, AChunkWhoseTargetIsDownIsHandedOffToASpareFailureDomain) {
  ProcessClusterOptions cluster;
  cluster.data_servers = 8;
  cluster.repair_delay_ms = 600000;  // no repair moves: only the hand-off keeps redundancy
  cluster.data_flags = {"--handoff-sweep-ms=1000"};
  StartCluster(cluster);
  std::map<uint32_t, int> index_of;  // server id -> process index
  for (int i = 0; i < 8; ++i) {
    Result<ServerId> id = cluster_->DataServerId(i);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    index_of[id->value()] = i;
  }
  ASSERT_OK(cluster_->CrashDataServer(0));
  ASSERT_OK(cluster_->WaitForUpDataServers(7));
  auto client = NewClient();
  ASSERT_TRUE(client);
  const std::string blob = RandomBytes(16 * kMiB, /*seed=*/61);  // 4 full stripes, 24 chunks
  ASSERT_OK(client->WriteFile("/handed-off", blob, kRoot));
  std::vector<std::string> small;
  for (int i = 0; i < 12; ++i) {
    small.push_back(RandomBytes(3000 + i, /*seed=*/70 + i));
    ASSERT_OK(client->WriteFile("/small" + std::to_string(i), small.back(), kRoot));
  }
  Result<Attributes> attr = client->Resolve("/handed-off", kRoot);
  ASSERT_TRUE(attr.ok()) << attr.status().ToString();
  auto chunk_files = [&] {
    int n = 0;
    for (int i = 0; i < 8; ++i) n += ChunkFilesOf(cluster_->data_dir(i), attr->inode);
    return n;
  };
  EXPECT_EQ(chunk_files(), 24) << "a chunk whose target was down was not written anywhere";
  Result<client::MovesStatus> moves = cluster_->admin().GetMoves();
  ASSERT_TRUE(moves.ok()) << moves.status().ToString();
  EXPECT_EQ(moves->degraded_stripes, 0u) << moves->message;

  // Two more crashes, both targets of a stripe whose PG has server 0.
  Result<client::ClusterMap> map = cluster_->GetClusterMap();
  ASSERT_TRUE(map.ok());
  const ServerId down = *cluster_->DataServerId(0);
  std::vector<int> crash;
  uint64_t chosen = 0;
  std::vector<int> spare;  // servers outside the chosen stripe's PG
  for (uint64_t stripe = 0; stripe < 4 && crash.empty(); ++stripe) {
    Result<std::vector<ServerId>> targets = map->TargetsOf(attr->layout, stripe);
    ASSERT_TRUE(targets.ok()) << targets.status().ToString();
    if (std::find(targets->begin(), targets->end(), down) == targets->end()) continue;
    chosen = stripe;
    for (ServerId t : *targets) {
      if (t != down && crash.size() < 2) crash.push_back(index_of.at(t.value()));
    }
    for (const auto& [id, i] : index_of) {
      if (std::find(targets->begin(), targets->end(), ServerId(id)) == targets->end()) {
        spare.push_back(i);
      }
    }
  }
  ASSERT_EQ(crash.size(), 2u) << "no stripe of the file is placed on server 0";
  ASSERT_EQ(spare.size(), 2u);
  for (int i : crash) ASSERT_OK(cluster_->CrashDataServer(i));
  ASSERT_OK(cluster_->WaitForUpDataServers(5));
  auto reader = NewClient();
  ASSERT_TRUE(reader);
  Result<std::string> read = reader->ReadFile("/handed-off", kRoot);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(*read == blob);
  for (int i = 0; i < 12; ++i) {
    read = reader->ReadFile("/small" + std::to_string(i), kRoot);
    ASSERT_TRUE(read.ok()) << i << ": " << read.status().ToString();
    EXPECT_TRUE(*read == small[i]) << i;
  }

  // Server 0 comes back while the two others stay down: the chosen stripe's other targets keep
  // 3 < k chunks, so its backfill copies the chunk from the hand-off holder, which then deletes
  // its copy (before, the backfill could not rebuild it and the copy stayed the only one).
  ASSERT_OK(cluster_->RestartDataServer(0));
  const std::string prefix =
      "c." + std::to_string(attr->inode.value()) + "." + std::to_string(chosen) + ".";
  auto stripe_files = [&](int i) {
    int n = 0;
    std::error_code ec;
    for (const auto& e :
         std::filesystem::recursive_directory_iterator(cluster_->data_dir(i) + "/chunks", ec)) {
      if (e.is_regular_file() && e.path().filename().string().starts_with(prefix)) ++n;
    }
    return n;
  };
  EXPECT_TRUE(WaitUntil([&] { return stripe_files(0) == 1 && stripe_files(spare[0]) == 0 &&
                                     stripe_files(spare[1]) == 0; },
                        std::chrono::seconds(60)))
      << "stripe " << chosen << ": server 0 holds " << stripe_files(0) << " chunks, the spare "
      << "servers " << stripe_files(spare[0]) << " and " << stripe_files(spare[1]);
  // The rest: server 0 backfills every other stripe, and the spare servers drop their copies.
  for (int i : crash) ASSERT_OK(cluster_->RestartDataServer(i));
  ASSERT_OK(cluster_->WaitForUpDataServers(8));
  EXPECT_TRUE(WaitUntil([&] { return chunk_files() == 24 &&
                                     ChunkFilesOf(cluster_->data_dir(0), attr->inode) > 0; },
                        std::chrono::seconds(60)))
      << "chunk files of the file: " << chunk_files() << ", on server 0: "
      << ChunkFilesOf(cluster_->data_dir(0), attr->inode);
  for (int i : crash) ASSERT_OK(cluster_->CrashDataServer(i));
  ASSERT_OK(cluster_->WaitForUpDataServers(6));
  auto last = NewClient();
  ASSERT_TRUE(last);
  read = last->ReadFile("/handed-off", kRoot);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(*read == blob);
}

// Regression (storm, two mounts: EIO and a false "data lost" for small files written while
// data servers were down). A small file whose copies are only on hand-off holders (its 3
// targets were down at the write), read on another client after the targets came back empty
// while the holders are stopped (SIGSTOP): the read must wait for a holder rather than fail, and
// must never tell the metadata server the stripe is lost (no server said "not found" for the
// holders). Before, the reader counted the targets' "not found" alone as proof: EIO and a
// recorded loss.
TEST_F(ClusterTest, SmallFileOnlyOnStoppedHandoffHoldersIsWaitedForNeverReportedLost) {
  ProcessClusterOptions cluster;
  cluster.data_servers = 8;
  cluster.repair_delay_ms = 600000;  // no repair moves
  StartCluster(cluster);
  auto writer = NewClient();
  ASSERT_TRUE(writer);
  ClientOptions reader_options;
  reader_options.chunk_timeout = std::chrono::milliseconds(500);
  auto reader = NewClient(reader_options);
  ASSERT_TRUE(reader);
  ASSERT_OK(writer->WriteFile("/f", "", kRoot));
  Result<Attributes> attr = writer->Resolve("/f", kRoot);
  ASSERT_TRUE(attr.ok());
  Result<client::ClusterMap> map = cluster_->GetClusterMap();
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  Result<client::StripePlacement> where = map->PlacementOf(attr->layout, 0);
  ASSERT_TRUE(where.ok());
  std::vector<int> copy_targets, spares;  // process indices
  for (int i = 0; i < 8; ++i) {
    Result<ServerId> id = cluster_->DataServerId(i);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    auto at = std::find(where->targets.begin(), where->targets.end(), *id);
    if (at == where->targets.end()) {
      spares.push_back(i);
    } else if (at - where->targets.begin() < 3) {
      copy_targets.push_back(i);
    }
  }
  ASSERT_EQ(copy_targets.size(), 3u);
  ASSERT_EQ(spares.size(), 2u);
  // The three targets of the copies are down: the write hands two copies off to the spares.
  for (int i : copy_targets) ASSERT_OK(cluster_->CrashDataServer(i));
  ASSERT_OK(cluster_->WaitForUpDataServers(5));
  const std::string content = RandomBytes(3000, /*seed=*/211);
  ASSERT_OK(writer->WriteFile("/f", content, kRoot));
  for (int i : spares) EXPECT_EQ(ChunkFilesOf(cluster_->data_dir(i), attr->inode), 1) << i;
  // The holders stop answering; the targets come back without the file's chunks.
  for (int i : spares) ASSERT_OK(cluster_->PauseDataServer(i));
  for (int i : copy_targets) ASSERT_OK(cluster_->RestartDataServer(i));
  ASSERT_OK(cluster_->WaitForUpDataServers(6));
  // The holders resume 3 s into the read.
  auto resume = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    for (int i : spares) (void)cluster_->PauseDataServer(i, false);
  });
  Result<std::string> read = reader->ReadFile("/f", kRoot);
  resume.get();
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(*read == content);
  read = writer->ReadFile("/f", kRoot);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(*read == content);
  Result<client::MovesStatus> moves = cluster_->admin().GetMoves();
  ASSERT_TRUE(moves.ok()) << moves.status().ToString();
  EXPECT_EQ(moves->lost_files, 0u) << moves->message;
  EXPECT_EQ(moves->message.find("DATA LOST"), std::string::npos) << moves->message;
}

TEST_F(ClusterTest, SmallReplicatedFilesSurviveTwoDataServerCrashes) {
  StartCluster();
  auto client = NewClient();
  ASSERT_TRUE(client);
  std::vector<std::string> blobs;
  for (int i = 0; i < 12; ++i) {
    blobs.push_back(RandomBytes(1 + i * 17 * kKiB, /*seed=*/100 + i));  // 1 B .. ~187 KiB
    ASSERT_OK(client->WriteFile("/s" + std::to_string(i), blobs.back(), kRoot));
  }
  ASSERT_OK(cluster_->CrashDataServer(0));
  ASSERT_OK(cluster_->CrashDataServer(2));
  for (int i = 0; i < 12; ++i) {
    Result<std::string> read = client->ReadFile("/s" + std::to_string(i), kRoot);
    ASSERT_TRUE(read.ok()) << i << ": " << read.status().ToString();
    EXPECT_TRUE(*read == blobs[i]) << "file " << i;
  }
  // Writes still succeed with two servers down, and read back.
  const std::string late = RandomBytes(50 * kKiB, 99);
  ASSERT_OK(client->WriteFile("/late", late, kRoot));
  EXPECT_TRUE(*client->ReadFile("/late", kRoot) == late);
  const std::string big = RandomBytes(5 * kMiB + 3, 98);
  ASSERT_OK(client->WriteFile("/late-big", big, kRoot));
  EXPECT_TRUE(*client->ReadFile("/late-big", kRoot) == big);
}

TEST_F(ClusterTest, OverwriteInTheMiddleOfAStripeKeepsTheRest) {
  StartCluster();
  auto client = NewClient();
  ASSERT_TRUE(client);
  std::string model = RandomBytes(6 * kMiB, 3);
  ASSERT_OK(client->WriteFile("/f", model, kRoot));
  Result<Attributes> attr = client->Resolve("/f", kRoot);
  ASSERT_TRUE(attr.ok());
  Result<Client::Opened> opened = client->Open(attr->inode, O_RDWR, kRoot);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  const std::string patch = RandomBytes(100 * kKiB, 4);
  WriteAt(*client, *opened->file, kMiB + kMiB / 2, patch);
  model.replace(kMiB + kMiB / 2, patch.size(), patch);
  // The writer sees its own buffered bytes.
  Result<std::string> mid = ReadAt(*client, *opened->file, kMiB + kMiB / 2 - 10, patch.size() + 20);
  ASSERT_TRUE(mid.ok());
  EXPECT_TRUE(*mid == model.substr(kMiB + kMiB / 2 - 10, patch.size() + 20));
  ASSERT_OK(client->Release(std::move(opened->file)));
  auto other = NewClient();
  ASSERT_TRUE(other);
  Result<std::string> read = other->ReadFile("/f", kRoot);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(*read == model);
}

TEST_F(ClusterTest, TruncateDownThenUpReadsZeros) {
  StartCluster();
  auto client = NewClient();
  ASSERT_TRUE(client);
  std::string model = RandomBytes(9 * kMiB, 5);
  ASSERT_OK(client->WriteFile("/t", model, kRoot));
  Result<Attributes> attr = client->Resolve("/t", kRoot);
  ASSERT_TRUE(attr.ok());
  for (uint64_t down : {5 * kMiB + 123, 300 * kKiB, uint64_t{0}}) {
    SCOPED_TRACE(down);
    AttrChanges shrink;
    shrink.size_bytes = down;
    ASSERT_TRUE(client->SetAttr(attr->inode, shrink, kRoot).ok());
    model.resize(down);
    AttrChanges grow;
    grow.size_bytes = down + 6 * kMiB;
    Result<Attributes> grown = client->SetAttr(attr->inode, grow, kRoot);
    ASSERT_TRUE(grown.ok()) << grown.status().ToString();
    EXPECT_EQ(grown->size_bytes, down + 6 * kMiB);
    model.resize(down + 6 * kMiB, '\0');
    Result<std::string> read = client->ReadFile("/t", kRoot);
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    ASSERT_EQ(read->size(), model.size());
    EXPECT_TRUE(*read == model);
    // Restore some content for the next round.
    model = RandomBytes(9 * kMiB, 6 + down);
    ASSERT_OK(client->WriteFile("/t", model, kRoot));
  }
}

// Regression (issue 16, found by a tester): a truncate to 2^63 was taken, and posix_fallocate of
// 4 EiB succeeded on a 1.2 TiB cluster. Writes, fallocates and truncates that would end past
// kMaxFileBytes give kFileTooLarge before any I/O; a fallocate that needs more raw bytes than the
// data servers have free ((k + m) / k of what it adds) gives kNoSpace, from one StatFs call.
TEST_F(ClusterTest, SizesPastTheLargestFileSizeAreRefusedAndFallocatePastTheFreeSpaceIsNoSpace) {
  ProcessClusterOptions options;
  options.data_flags = {"--capacity-bytes", std::to_string(1 * kGiB)};  // 6 GiB raw, 4 GiB usable
  StartCluster(options);
  auto client = NewClient();
  ASSERT_TRUE(client);
  Result<Client::Opened> f = client->Create(kRootInode, "big", 0644, O_RDWR, kRoot);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  OpenFile& file = *f->file;
  const InodeId ino = Client::InodeOf(file);
  EXPECT_EQ(client->Write(file, kMaxFileBytes, Bytes("x")).status().code(), Code::kFileTooLarge);
  EXPECT_EQ(client->Write(file, kMaxFileBytes - 1, Bytes("xy")).status().code(),
            Code::kFileTooLarge);
  EXPECT_EQ(client->Fallocate(file, 0, kMaxFileBytes, 1).code(), Code::kFileTooLarge);
  EXPECT_EQ(client->Fallocate(file, 0, 1, kMaxFileBytes).code(), Code::kFileTooLarge);
  EXPECT_EQ(client->Fallocate(file, 0, 0, uint64_t{4} << 60).code(), Code::kNoSpace);  // 4 EiB
  // RS 4+2: 4 GiB + 1 MiB of file needs more than the 6 GiB raw; 3 GiB needs 4.5 GiB.
  EXPECT_EQ(client->Fallocate(file, 0, 0, 4 * kGiB + kMiB).code(), Code::kNoSpace);
  ASSERT_OK(client->Fallocate(file, 0, 0, 3 * kGiB));
  // Only the bytes past the end count: 1 GiB more on top of 3 GiB still fits.
  ASSERT_OK(client->Fallocate(file, 0, 2 * kGiB, 2 * kGiB - kMiB));
  ASSERT_OK(client->Flush(file));
  Result<Attributes> attr = client->GetAttr(ino);
  ASSERT_TRUE(attr.ok()) << attr.status().ToString();
  EXPECT_EQ(attr->size_bytes, 4 * kGiB - kMiB);
  AttrChanges size;
  size.size_bytes = kMaxFileBytes + 1;
  EXPECT_EQ(client->SetAttr(ino, size, kRoot).status().code(), Code::kFileTooLarge);
  size.size_bytes = UINT64_MAX;
  EXPECT_EQ(client->SetAttr(ino, size, kRoot).status().code(), Code::kFileTooLarge);
  attr = client->GetAttr(ino);
  ASSERT_TRUE(attr.ok()) << attr.status().ToString();
  EXPECT_EQ(attr->size_bytes, 4 * kGiB - kMiB);  // the refused truncates changed nothing
  size.size_bytes = kMaxFileBytes;  // the largest size is a size: a truncate up takes it
  attr = client->SetAttr(ino, size, kRoot);
  ASSERT_TRUE(attr.ok()) << attr.status().ToString();
  EXPECT_EQ(attr->size_bytes, kMaxFileBytes);
  ASSERT_OK(client->Release(std::move(f->file)));
  attr = client->Resolve("/big", kRoot);
  ASSERT_TRUE(attr.ok()) << attr.status().ToString();
  EXPECT_EQ(attr->size_bytes, kMaxFileBytes);
  ASSERT_OK(client->Unlink(kRootInode, "big", kRoot));
}

TEST_F(ClusterTest, UnalignedRandomWritesMatchALocalModel) {
  ProcessClusterOptions options;
  options.unit_bytes = 64 * kKiB;  // many stripes in a small file: both rules, many boundaries
  StartCluster(options);
  ClientOptions copts;
  copts.max_dirty_bytes_per_file = 512 * kKiB;  // forces early flushes of partial stripes
  auto client = NewClient(copts);
  ASSERT_TRUE(client);
  // AQUIFER_TEST_SEED replays a logged seed.
  const char* seed_env = std::getenv("AQUIFER_TEST_SEED");
  const uint64_t seed = seed_env ? std::strtoull(seed_env, nullptr, 10) : std::random_device{}();
  std::cout << "seed=" << seed << std::endl;
  SCOPED_TRACE(::testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  std::string model;
  Result<Attributes> root = client->GetAttr(kRootInode);
  ASSERT_TRUE(root.ok());
  Result<Client::Opened> opened = client->Create(root->inode, "r", 0644, O_RDWR | O_CREAT, kRoot);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  for (int op = 0; op < 150; ++op) {
    const uint64_t offset = rng() % (3 * kMiB);
    const uint64_t length = 1 + rng() % (rng() % 4 == 0 ? 600 * kKiB : 5 * kKiB);
    const std::string data = RandomBytes(length, rng());
    WriteAt(*client, *opened->file, offset, data);
    if (model.size() < offset + length) model.resize(offset + length, '\0');
    model.replace(offset, length, data);
    const int action = static_cast<int>(rng() % 10);
    if (action == 0) {
      ASSERT_OK(client->Flush(*opened->file));
    } else if (action == 1) {
      const uint64_t at = rng() % (model.size() + 1);
      const uint64_t n = rng() % (300 * kKiB);
      Result<std::string> got = ReadAt(*client, *opened->file, at, n);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ASSERT_TRUE(*got == model.substr(at, n)) << "op " << op << " read at " << at;
    } else if (action == 2 && model.size() > 10) {
      const uint64_t to = rng() % model.size();
      AttrChanges change;
      change.size_bytes = to;
      ASSERT_TRUE(client->SetAttr(Client::InodeOf(*opened->file), change, kRoot).ok());
      model.resize(to);
    }
  }
  ASSERT_OK(client->Release(std::move(opened->file)));
  auto other = NewClient();
  ASSERT_TRUE(other);
  Result<std::string> read = other->ReadFile("/r", kRoot);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ(read->size(), model.size());
  EXPECT_TRUE(*read == model);
}

TEST_F(ClusterTest, ConcurrentWritersToDifferentFiles) {
  StartCluster();
  auto client = NewClient();
  ASSERT_TRUE(client);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const std::string blob = RandomBytes(3 * kMiB + t * 1000, 40 + t);
      if (!client->WriteFile("/c" + std::to_string(t), blob, kRoot).ok()) ++failures;
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(failures.load(), 0);
  for (int t = 0; t < 4; ++t) {
    Result<std::string> read = client->ReadFile("/c" + std::to_string(t), kRoot);
    ASSERT_TRUE(read.ok());
    EXPECT_TRUE(*read == RandomBytes(3 * kMiB + t * 1000, 40 + t)) << t;
  }
}

TEST_F(ClusterTest, CloseToOpenBetweenTwoClients) {
  StartCluster();
  auto a = NewClient();
  auto b = NewClient();
  ASSERT_TRUE(a && b);
  const std::string v1 = RandomBytes(5 * kMiB, 11);
  ASSERT_OK(a->WriteFile("/x", v1, kRoot));
  EXPECT_TRUE(*b->ReadFile("/x", kRoot) == v1);
  Result<Attributes> attr = b->Resolve("/x", kRoot);
  ASSERT_TRUE(attr.ok());
  Result<Client::Opened> reader = b->Open(attr->inode, O_RDONLY, kRoot);
  ASSERT_TRUE(reader.ok());
  // A rewrites with a longer file and closes; B's GetAttr then its reads see the new content.
  const std::string v2 = RandomBytes(7 * kMiB + 5, 12);
  ASSERT_OK(a->WriteFile("/x", v2, kRoot));
  Result<Attributes> fresh = b->GetAttr(attr->inode);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->size_bytes, v2.size());
  Result<std::string> got = ReadAt(*b, *reader->file, 0, v2.size() + 10);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(*got == v2);
  ASSERT_OK(b->Release(std::move(reader->file)));
  EXPECT_TRUE(*b->ReadFile("/x", kRoot) == v2);
}

// The storm's ESTALE (issue 18 "never ESTALE for a name that exists"): B keeps a file's
// attributes under a cache lease; A renames another file over its name; B opens the old inode
// in the window before the recall reaches it (the rename has not returned: either file is a right
// answer) and finds it unlinked, so the mount answers ESTALE and the kernel looks the name up
// again once. That lookup must reach the server. It used to be answered from the kept copy, the
// old inode again, and the second ESTALE went to the application.
TEST_F(ClusterTest, AnOpenThatFindsItsKeptFileReplacedHasTheNextLookupAskTheServer) {
  StartCluster();
  ClientOptions caching;
  caching.cache_leases = true;
  auto a = NewClient(caching);
  // B's open must reach the server: from kept attributes it would succeed, lazily, on the old
  // file (a right answer while the rename has not returned: see the next test).
  caching.lazy_opens = false;
  auto b = NewClient(caching);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(b->CachesUnderLeases());
  ASSERT_OK(a->WriteFile("/t", "old bytes", kRoot));
  ASSERT_OK(a->WriteFile("/.tmp", "new bytes", kRoot));
  Result<Attributes> fresh = a->Resolve("/.tmp", kRoot);
  ASSERT_TRUE(fresh.ok());
  // A few misses make B list the directory (DirNames); the server's answer for "t" is then kept.
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(b->Lookup(kRootInode, "absent" + std::to_string(i), kRoot).status().code(),
              Code::kNotFound);
  }
  Result<Attributes> old = b->Lookup(kRootInode, "t", kRoot);
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  ASSERT_NE(old->inode, fresh->inode);

  // B takes the recall of the rename 2 s late; A's rename waits for B's acknowledgement.
  failpoint::ScopedFailPoint late("client.cache_recall.before_forget:delay=2000@1");
  std::future<Status> renamed = std::async(std::launch::async, [&] {
    return a->Rename(kRootInode, ".tmp", kRootInode, "t", 0, kRoot);
  });
  bool unlinked = false;
  ASSERT_TRUE(WaitUntil(
      [&] {
        Result<Client::Opened> o = b->Open(old->inode, O_RDONLY, kRoot);
        if (!o.ok()) {
          unlinked = true;  // gone already: as stale as unlinked
          return true;
        }
        unlinked = o->attr.nlink == 0;
        EXPECT_OK(b->Release(std::move(o->file)));
        return unlinked;
      },
      std::chrono::milliseconds(1500)))
      << "the server never showed the old inode unlinked";
  ASSERT_EQ(renamed.wait_for(std::chrono::seconds(0)), std::future_status::timeout)
      << "the rename returned before B took its recall: the test proves nothing";
  Result<Attributes> again = b->Lookup(kRootInode, "t", kRoot);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->inode, fresh->inode) << "the lookup after a stale open found the kept old inode";
  EXPECT_OK(renamed.get());
}

// Opens without a round trip (docs/design.md "Opens without a round trip"). B keeps the files'
// attributes under its cache lease, so its read-only opens ask the metadata server nothing.
// Another client then deletes, replaces or truncates them while B has them open, and B itself
// unlinks one: every handle still reads the bytes it opened, whole. The server held each inode
// (and the truncated stripes) until B's answer to the recall told it of the open.
TEST_F(ClusterTest, FilesOpenedFromKeptAttributesStayWholeWhenDeletedReplacedOrTruncated) {
  StartCluster();
  ClientOptions caching;
  caching.cache_leases = true;
  auto a = NewClient(caching);
  auto b = NewClient(caching);
  ASSERT_TRUE(a && b);
  const std::map<std::string, std::string> files = {
      {"unlinked", RandomBytes(3 * kMiB + 100, 61)}, {"replaced", RandomBytes(5000, 62)},
      {"truncated", RandomBytes(5 * kMiB, 63)},      {"own", RandomBytes(70000, 64)},
  };
  for (const auto& [name, bytes] : files) ASSERT_OK(a->WriteFile("/" + name, bytes, kRoot));
  ASSERT_OK(a->WriteFile("/.new", "the replacement", kRoot));
  for (int i = 0; i < 5; ++i) (void)b->Lookup(kRootInode, "absent" + std::to_string(i), kRoot);
  std::map<std::string, InodeId> inode;
  for (const auto& [name, bytes] : files) {
    Result<Attributes> attr = b->Lookup(kRootInode, name, kRoot);
    ASSERT_TRUE(attr.ok()) << attr.status().ToString();
    inode[name] = attr->inode;
  }

  // Twenty opens, reads and closes of a kept file: no Open and no Release call.
  const uint64_t calls_before = b->Counters().meta_calls;
  for (int i = 0; i < 20; ++i) {
    Result<Client::Opened> o = b->Open(inode["own"], O_RDONLY, kRoot);
    ASSERT_TRUE(o.ok()) << o.status().ToString();
    Result<std::string> got = ReadAt(*b, *o->file, 0, 100000);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_TRUE(*got == files.at("own"));
    ASSERT_OK(b->Release(std::move(o->file)));
  }
  EXPECT_LE(b->Counters().meta_calls - calls_before, 2u)
      << "opens of a file whose attributes are kept still went to the metadata server";

  std::map<std::string, std::unique_ptr<OpenFile>> open;
  for (const auto& [name, bytes] : files) {
    Result<Client::Opened> o = b->Open(inode[name], O_RDONLY, kRoot);
    ASSERT_TRUE(o.ok()) << name << ": " << o.status().ToString();
    open[name] = std::move(o->file);
  }
  ASSERT_OK(a->Unlink(kRootInode, "unlinked", kRoot));
  ASSERT_OK(a->Rename(kRootInode, ".new", kRootInode, "replaced", 0, kRoot));
  ASSERT_OK(a->SetAttr(inode["truncated"], AttrChanges{.size_bytes = 0}, kRoot).status());
  ASSERT_OK(b->Unlink(kRootInode, "own", kRoot));
  for (const auto& [name, bytes] : files) {
    Result<std::string> got = ReadAt(*b, *open[name], 0, bytes.size() + 10);
    ASSERT_TRUE(got.ok()) << name << ": " << got.status().ToString();
    EXPECT_EQ(got->size(), bytes.size()) << name;
    EXPECT_TRUE(*got == bytes) << name << ": the open handle lost its bytes";
  }
  for (auto& [name, file] : open) ASSERT_OK(b->Release(std::move(file)));
  // With the last handle closed, the unlinked and replaced inodes go.
  for (const char* name : {"unlinked", "replaced", "own"}) {
    EXPECT_TRUE(WaitUntil(
        [&] { return a->GetAttr(inode[name]).status().code() == Code::kNotFound; },
        std::chrono::seconds(10)))
        << name << " was not deleted after its last close";
  }
}

// Write-lease recall (docs/design.md "Write-lease recall"). Before it, B's open waited for A's
// close (lease_wait, then kWouldBlock): a log or results file shared by two hosts failed.
TEST_F(ClusterTest, ASecondWriterRecallsTheLeaseAndTheFirstTakesItBackAtItsNextWrite) {
  StartCluster();
  auto a = NewClient();
  ClientOptions impatient;
  impatient.lease_wait = std::chrono::milliseconds(2000);
  auto b = NewClient(impatient);
  ASSERT_TRUE(a && b);
  ASSERT_OK(a->WriteFile("/l", "one", kRoot));
  Result<Attributes> attr = a->Resolve("/l", kRoot);
  ASSERT_TRUE(attr.ok());
  Result<Client::Opened> held = a->Open(attr->inode, O_WRONLY, kRoot);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  WriteAt(*a, *held->file, 3, "+a");  // buffered in A, not committed

  const auto t0 = std::chrono::steady_clock::now();
  Result<Client::Opened> second = b->Open(attr->inode, O_RDWR, kRoot);
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_LT(took, std::chrono::milliseconds(1500));
  // The recall made A commit: B sees A's bytes, and its own write goes after them.
  Result<std::string> seen = ReadAt(*b, *second->file, 0, 100);
  ASSERT_TRUE(seen.ok()) << seen.status().ToString();
  EXPECT_EQ(*seen, "one+a");
  WriteAt(*b, *second->file, 0, "two");
  ASSERT_OK(b->Release(std::move(second->file)));
  // A's next write takes the lease back (B released it) and lands on B's file.
  WriteAt(*a, *held->file, 5, "!");
  ASSERT_OK(a->Release(std::move(held->file)));
  EXPECT_EQ(*a->ReadFile("/l", kRoot), "two+a!");
  EXPECT_EQ(*b->ReadFile("/l", kRoot), "two+a!");
  EXPECT_TRUE(a->GetAttr(attr->inode)->abandoned_versions.empty());
}

// Two clients keep one file open for append and take turns: every record lands whole, at the
// true end, in turn order; each turn recalls the lease from the other client.
TEST_F(ClusterTest, TwoClientsAppendingInTurnsToOneOpenFileKeepEveryRecord) {
  StartCluster();
  auto a = NewClient();
  auto b = NewClient();
  ASSERT_TRUE(a && b);
  ASSERT_OK(a->WriteFile("/log", "", kRoot));
  Result<Attributes> attr = a->Resolve("/log", kRoot);
  ASSERT_TRUE(attr.ok());
  Result<Client::Opened> fa = a->Open(attr->inode, O_WRONLY | O_APPEND, kRoot);
  ASSERT_TRUE(fa.ok()) << fa.status().ToString();
  Result<Client::Opened> fb = b->Open(attr->inode, O_WRONLY | O_APPEND, kRoot);
  ASSERT_TRUE(fb.ok()) << fb.status().ToString();
  constexpr int kTurns = 40;
  std::string want;
  for (int i = 0; i < kTurns; ++i) {
    for (auto [client, file, tag] : {std::tuple{a.get(), fa->file.get(), 'A'},
                                     std::tuple{b.get(), fb->file.get(), 'B'}}) {
      char record[32];
      const int n = std::snprintf(record, sizeof record, "%c %04d\n", tag, i);
      Result<size_t> w = client->Append(*file, std::as_bytes(std::span(record, n)));
      ASSERT_TRUE(w.ok()) << tag << i << ": " << w.status().ToString();
      want.append(record, n);
    }
  }
  ASSERT_OK(a->Release(std::move(fa->file)));
  ASSERT_OK(b->Release(std::move(fb->file)));
  EXPECT_EQ(*a->ReadFile("/log", kRoot), want);
  EXPECT_EQ(*b->ReadFile("/log", kRoot), want);
}

// Lock coherence: what one client wrote under a lock is what the next holder on another client
// reads, through handles both keep open (SQLite's pattern: page 1 read after the lock).
TEST_F(ClusterTest, ALockGrantShowsWhatThePreviousHolderWroteOnAnotherClient) {
  StartCluster();
  std::atomic<int> changed{0};
  ClientOptions watched;
  watched.on_changed_at_lock = [&](InodeId) { changed++; };
  auto a = NewClient();
  auto b = NewClient(watched);
  ASSERT_TRUE(a && b);
  ASSERT_OK(a->WriteFile("/db", std::string(8192, 'a'), kRoot));
  Result<Attributes> attr = a->Resolve("/db", kRoot);
  ASSERT_TRUE(attr.ok());
  Result<Client::Opened> fa = a->Open(attr->inode, O_RDWR, kRoot);
  ASSERT_TRUE(fa.ok());
  Result<Client::Opened> fb = b->Open(attr->inode, O_RDWR, kRoot);
  ASSERT_TRUE(fb.ok());
  EXPECT_EQ(*ReadAt(*b, *fb->file, 0, 4), "aaaa");  // B's view of the file before A's change
  const LockRange whole{.type = F_WRLCK, .start = 0, .end = UINT64_MAX, .pid = 1};
  const LockRange unlock{.type = F_UNLCK, .start = 0, .end = UINT64_MAX, .pid = 1};
  for (int round = 0; round < 5; ++round) {
    ASSERT_OK(a->SetLock(attr->inode, 1, whole, false, true));
    const std::string page(4096, static_cast<char>('0' + round));
    WriteAt(*a, *fa->file, 4096, page);  // takes the lease back from B after round 0
    ASSERT_OK(a->SetLock(attr->inode, 1, unlock, false, false));  // commits first
    const int before = changed.load();
    ASSERT_OK(b->SetLock(attr->inode, 2, whole, false, true));
    EXPECT_GT(changed.load(), before) << round;
    Result<std::string> got = ReadAt(*b, *fb->file, 4096, 4096);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, page) << round;
    WriteAt(*b, *fb->file, 0, std::string(1, static_cast<char>('k' + round)));
    ASSERT_OK(b->SetLock(attr->inode, 2, unlock, false, false));
    ASSERT_OK(a->SetLock(attr->inode, 1, whole, false, true));
    EXPECT_EQ(*ReadAt(*a, *fa->file, 0, 1), std::string(1, static_cast<char>('k' + round)));
    ASSERT_OK(a->SetLock(attr->inode, 1, unlock, false, false));
  }
  ASSERT_OK(a->Release(std::move(fa->file)));
  ASSERT_OK(b->Release(std::move(fb->file)));
  Result<std::string> end = a->ReadFile("/db", kRoot);
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(end->substr(0, 1), "o");
  EXPECT_EQ(end->substr(4096), std::string(4096, '4'));
}

// Client options whose opens for write wait `wait` for a lease held elsewhere.
ClientOptions LeaseWait(std::chrono::milliseconds wait) {
  ClientOptions o;
  o.lease_wait = wait;
  return o;
}

// The soak test's lock workload lost increments: a writer took the lease back (its session
// still held it) while a recall's give-back was between its commit and ReturnLease; the return
// then handed the lease to the other host with this writer's bytes uncommitted under it, the
// commit before the unlock failed (kStale, "held by another session"), the unlock went on, and
// the next holder read the old counter. A give-back now keeps every writer of the file out
// (their mutexes) until the lease is returned, and an unlock whose commit fails fails itself.
TEST_F(ClusterTest, AWriteUnderALockRacingAGiveBackIsSeenByTheNextHolder) {
  StartCluster();
  auto a = NewClient();
  auto recaller = NewClient(LeaseWait(std::chrono::milliseconds(1)));  // one recall, no retry
  auto b = NewClient(LeaseWait(std::chrono::milliseconds(20000)));
  ASSERT_TRUE(a && recaller && b);
  ASSERT_OK(a->WriteFile("/counter", "0", kRoot));
  Result<Attributes> attr = a->Resolve("/counter", kRoot);
  ASSERT_TRUE(attr.ok());
  const LockRange whole{.type = F_WRLCK, .start = 0, .end = UINT64_MAX, .pid = 1};
  const LockRange unlock{.type = F_UNLCK, .start = 0, .end = UINT64_MAX, .pid = 1};
  Result<Client::Opened> fa = a->Open(attr->inode, O_RDWR, kRoot);
  ASSERT_TRUE(fa.ok()) << fa.status().ToString();
  ASSERT_OK(a->SetLock(attr->inode, 1, whole, false, true));
  EXPECT_EQ(*ReadAt(*a, *fa->file, 0, 16), "0");
  Result<std::string> seen = InvalidArgument("unset");
  {
    // The give-back pauses just before its ReturnLease.
    failpoint::ScopedFailPoint slow_return("client.recall.before_return:delay=1000@1");
    // An open for write on another host (not under the lock, as each round of the workload
    // opens): refused, it recalls the lease.
    EXPECT_EQ(recaller->Open(attr->inode, O_RDWR, kRoot).status().code(), Code::kWouldBlock);
    ASSERT_TRUE(WaitUntil([&] { return slow_return.hits() >= 1; }, std::chrono::seconds(10)));
    // A, holding the lock, writes the next value during the give-back...
    WriteAt(*a, *fa->file, 0, "1");
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the give-back ended
    // ... B opens for write before A unlocks...
    Result<Client::Opened> fb = b->Open(attr->inode, O_RDWR, kRoot);
    ASSERT_TRUE(fb.ok()) << fb.status().ToString();
    // ... and A's unlock commits first, or fails: never an unlock over lost bytes.
    ASSERT_OK(a->SetLock(attr->inode, 1, unlock, false, false));
    ASSERT_OK(b->SetLock(attr->inode, 2, whole, false, true));
    seen = ReadAt(*b, *fb->file, 0, 16);
    ASSERT_OK(b->SetLock(attr->inode, 2, unlock, false, false));
    ASSERT_OK(b->Release(std::move(fb->file)));
  }
  ASSERT_TRUE(seen.ok()) << seen.status().ToString();
  EXPECT_EQ(*seen, "1") << "the next holder of the lock read the counter before A's write";
  EXPECT_OK(a->Release(std::move(fa->file)));
  EXPECT_EQ(*b->ReadFile("/counter", kRoot), "1");
}

// The same race through a second open of the file on A while the give-back of the first runs:
// the open is answered with the lease (A's session holds it), then the return takes it away.
TEST_F(ClusterTest, AnOpenForWriteRacingAGiveBackDoesNotWriteWithoutTheLease) {
  StartCluster();
  auto a = NewClient();
  auto recaller = NewClient(LeaseWait(std::chrono::milliseconds(1)));  // one recall, no retry
  auto b = NewClient(LeaseWait(std::chrono::milliseconds(20000)));
  ASSERT_TRUE(a && recaller && b);
  ASSERT_OK(a->WriteFile("/f", "a0", kRoot));
  Result<Attributes> attr = a->Resolve("/f", kRoot);
  ASSERT_TRUE(attr.ok());
  Result<Client::Opened> first = a->Open(attr->inode, O_RDWR, kRoot);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  failpoint::ScopedFailPoint slow_return("client.recall.before_return:delay=1000@1");
  EXPECT_EQ(recaller->Open(attr->inode, O_RDWR, kRoot).status().code(), Code::kWouldBlock);
  ASSERT_TRUE(WaitUntil([&] { return slow_return.hits() >= 1; }, std::chrono::seconds(10)));
  Result<Client::Opened> second = a->Open(attr->inode, O_RDWR, kRoot);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the give-back ended
  Result<Client::Opened> fb = b->Open(attr->inode, O_RDWR, kRoot);
  ASSERT_TRUE(fb.ok()) << fb.status().ToString();
  WriteAt(*a, *second->file, 0, "a1");
  EXPECT_OK(a->Release(std::move(second->file)));  // commits
  EXPECT_OK(a->Release(std::move(first->file)));
  ASSERT_OK(b->Release(std::move(fb->file)));
  EXPECT_EQ(*b->ReadFile("/f", kRoot), "a1");
}

// Regression (issue 22, the storm's lost locked increment, once per few metadata server kills):
// a give-back cleared its handles' lease flag only after ReturnLease answered, and that answer
// can be late by a whole metadata server restart. Meanwhile the other client took the lease,
// wrote under the lock and unlocked; this client's next lock trusted its handle (it "held the
// lease"), did not revalidate, and the kernel served the old page: the increment was lost.
TEST_F(ClusterTest, ALockTakenWhileTheGiveBackAwaitsItsReplySeesTheOtherClientsWrite) {
  StartCluster();
  std::atomic<int> changed{0};
  ClientOptions watched;
  watched.on_changed_at_lock = [&](InodeId) { changed++; };
  auto a = NewClient(watched);
  auto b = NewClient(LeaseWait(std::chrono::milliseconds(20000)));
  ASSERT_TRUE(a && b);
  ASSERT_OK(a->WriteFile("/counter", "0", kRoot));
  Result<Attributes> attr = a->Resolve("/counter", kRoot);
  ASSERT_TRUE(attr.ok());
  const LockRange whole{.type = F_WRLCK, .start = 0, .end = UINT64_MAX, .pid = 1};
  const LockRange unlock{.type = F_UNLCK, .start = 0, .end = UINT64_MAX, .pid = 1};
  Result<Client::Opened> fa = a->Open(attr->inode, O_RDWR, kRoot);
  ASSERT_TRUE(fa.ok()) << fa.status().ToString();
  ASSERT_OK(a->SetLock(attr->inode, 1, whole, false, true));
  EXPECT_EQ(*ReadAt(*a, *fa->file, 0, 16), "0");
  WriteAt(*a, *fa->file, 0, "1");  // A holds the lease from here
  ASSERT_OK(a->SetLock(attr->inode, 1, unlock, false, false));
  {
    // A's give-back gets its ReturnLease answer 3 s late (as across a metadata server restart).
    failpoint::ScopedFailPoint late_reply("client.recall.after_return:delay=3000@1");
    // B's open for write recalls the lease, and is answered once A has returned it.
    Result<Client::Opened> fb = b->Open(attr->inode, O_RDWR, kRoot);
    ASSERT_TRUE(fb.ok()) << fb.status().ToString();
    ASSERT_TRUE(WaitUntil([&] { return late_reply.hits() >= 1; }, std::chrono::seconds(2)));
    ASSERT_OK(b->SetLock(attr->inode, 2, whole, false, true));
    EXPECT_EQ(*ReadAt(*b, *fb->file, 0, 16), "1");
    WriteAt(*b, *fb->file, 0, "2");
    ASSERT_OK(b->SetLock(attr->inode, 2, unlock, false, false));  // commits first
    ASSERT_OK(b->Release(std::move(fb->file)));
    // A locks while its give-back still waits for the reply: the grant must tell the kernel
    // that the file changed, and A's handle must read B's bytes.
    const int before = changed.load();
    ASSERT_OK(a->SetLock(attr->inode, 1, whole, false, true));
    EXPECT_GT(changed.load(), before) << "the lock grant kept the kernel's cached pages";
    Result<std::string> got = ReadAt(*a, *fa->file, 0, 16);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, "2");
    ASSERT_OK(a->SetLock(attr->inode, 1, unlock, false, false));
  }
  EXPECT_OK(a->Release(std::move(fa->file)));
  EXPECT_EQ(*b->ReadFile("/counter", kRoot), "2");
}

// A commit before an unlock that fails fails the unlock, and the lock stays held: the next
// holder must not read the file without the bytes written under the lock.
TEST_F(ClusterTest, AnUnlockWhoseCommitFailsKeepsTheLock) {
  StartCluster();
  auto a = NewClient();
  auto b = NewClient();
  ASSERT_TRUE(a && b);
  ASSERT_OK(a->WriteFile("/c", "0", kRoot));
  Result<Attributes> attr = a->Resolve("/c", kRoot);
  ASSERT_TRUE(attr.ok());
  const LockRange whole{.type = F_WRLCK, .start = 0, .end = UINT64_MAX, .pid = 1};
  const LockRange unlock{.type = F_UNLCK, .start = 0, .end = UINT64_MAX, .pid = 1};
  Result<Client::Opened> fa = a->Open(attr->inode, O_RDWR, kRoot);
  ASSERT_TRUE(fa.ok()) << fa.status().ToString();
  ASSERT_OK(a->SetLock(attr->inode, 1, whole, false, true));
  WriteAt(*a, *fa->file, 0, "1");
  {
    failpoint::ScopedFailPoint failing_commit("client.commit.before:error@1");
    EXPECT_FALSE(a->SetLock(attr->inode, 1, unlock, false, false).ok());
  }
  EXPECT_EQ(b->SetLock(attr->inode, 2, whole, false, false).code(), Code::kWouldBlock);
  ASSERT_OK(a->SetLock(attr->inode, 1, unlock, false, false));  // the commit goes through now
  ASSERT_OK(b->SetLock(attr->inode, 2, whole, false, false));
  EXPECT_EQ(*b->ReadFile("/c", kRoot), "1");
  ASSERT_OK(b->SetLock(attr->inode, 2, unlock, false, false));
  EXPECT_OK(a->Release(std::move(fa->file)));
}

TEST_F(ClusterTest, WriteWithAServerDownThenReadAfterItReturnsGetsNewBytes) {
  StartCluster();
  auto client = NewClient();
  ASSERT_TRUE(client);
  const std::string big1 = RandomBytes(6 * kMiB, 21), small1 = RandomBytes(70 * kKiB, 22);
  ASSERT_OK(client->WriteFile("/big", big1, kRoot));
  ASSERT_OK(client->WriteFile("/small", small1, kRoot));
  ASSERT_OK(cluster_->CrashDataServer(3));
  const std::string big2 = RandomBytes(6 * kMiB, 23), small2 = RandomBytes(70 * kKiB, 24);
  ASSERT_OK(client->WriteFile("/big", big2, kRoot));
  ASSERT_OK(client->WriteFile("/small", small2, kRoot));
  ASSERT_OK(cluster_->RestartDataServer(3));  // holds the old version of every chunk it had
  auto reader = NewClient();
  ASSERT_TRUE(reader);
  Result<std::string> big = reader->ReadFile("/big", kRoot);
  Result<std::string> small = reader->ReadFile("/small", kRoot);
  ASSERT_TRUE(big.ok() && small.ok());
  EXPECT_TRUE(*big == big2);
  EXPECT_TRUE(*small == small2);
  // Small random reads of single data chunks also see the new version.
  Result<Attributes> attr = reader->Resolve("/big", kRoot);
  Result<Client::Opened> opened = reader->Open(attr->inode, O_RDONLY, kRoot);
  ASSERT_TRUE(opened.ok());
  for (uint64_t at : {uint64_t{0}, kMiB + 7, 3 * kMiB + 100, 5 * kMiB + 4000}) {
    Result<std::string> got = ReadAt(*reader, *opened->file, at, 4096);
    ASSERT_TRUE(got.ok());
    EXPECT_TRUE(*got == big2.substr(at, 4096)) << at;
  }
  ASSERT_OK(reader->Release(std::move(opened->file)));
}

// Issue 17: a new cluster that loses a data server before its first file could not create files
// (the PG table was built at the first create, from the 5 servers then up: kUnavailable, EIO).
// The default table is now built when the 6 servers have registered, with the lost server in
// it, so files are created and written degraded, read back, and read by a fresh client too.
TEST_F(ClusterTest, ADataServerLostBeforeTheFirstFileStillLetsFilesBeCreatedWrittenAndRead) {
  StartCluster();
  ASSERT_OK(cluster_->CrashDataServer(2));
  ASSERT_OK(cluster_->WaitForUpDataServers(5));
  Result<ServerId> lost = cluster_->DataServerId(2);
  ASSERT_TRUE(lost.ok()) << lost.status().ToString();
  Result<client::ClusterMap> map = cluster_->GetClusterMap();
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  ASSERT_EQ(map->pg_tables.count(6), 1u) << "no default PG table before the first create";
  bool lost_has_positions = false;
  for (const auto& pg : map->pg_tables.at(6)) {
    lost_has_positions |= std::find(pg.begin(), pg.end(), *lost) != pg.end();
  }
  EXPECT_TRUE(lost_has_positions) << "the table was built before the server was lost";

  auto client = NewClient();
  ASSERT_TRUE(client);
  const std::string big = RandomBytes(9 * kMiB + 77, /*seed=*/171);
  const std::string small = RandomBytes(40 * kKiB, /*seed=*/172);
  ASSERT_OK(client->WriteFile("/first", big, kRoot));
  ASSERT_OK(client->WriteFile("/second", small, kRoot));
  Result<std::string> read = client->ReadFile("/first", kRoot);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(*read == big);
  auto other = NewClient();
  ASSERT_TRUE(other);
  read = other->ReadFile("/first", kRoot);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(*read == big);
  read = other->ReadFile("/second", kRoot);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(*read == small);
}

// ReadShared returns the same bytes as Read: views into the read cache for sequential reads
// inside one stripe, a copy for reads that span stripes, are random, or run past the end.
TEST_F(ClusterTest, ReadSharedReturnsTheSameBytesAsReadForEveryPattern) {
  StartCluster();
  auto client = NewClient();
  ASSERT_TRUE(client);
  const std::string blob = RandomBytes(13 * kMiB + 12345, 57);  // 3 full stripes and a tail
  ASSERT_OK(client->WriteFile("/v", blob, kRoot));
  Result<Attributes> attr = client->Resolve("/v", kRoot);
  ASSERT_TRUE(attr.ok());
  Result<Client::Opened> opened = client->Open(attr->inode, O_RDONLY, kRoot);
  ASSERT_TRUE(opened.ok());
  auto shared = [&](uint64_t at, uint64_t len) -> std::string {
    Result<Client::ReadView> v = client->ReadShared(*opened->file, at, len);
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    if (!v.ok()) return "";
    EXPECT_LE(v->pieces.size(), Client::kMaxViewPieces);
    std::string got;
    for (const auto& piece : v->pieces) {
      got.append(reinterpret_cast<const char*>(piece.data()), piece.size());
    }
    EXPECT_EQ(got.size(), v->size());
    return got;
  };
  // A sequential stream of 1 MiB reads (cache views), then one of 300 KiB reads (some span
  // stripe boundaries).
  for (uint64_t step : {kMiB, uint64_t{300 * kKiB}}) {
    for (uint64_t at = 0; at < blob.size(); at += step) {
      const std::string want = blob.substr(at, step);
      ASSERT_TRUE(shared(at, step) == want) << "step " << step << " at " << at;
    }
  }
  // Random reads, a read past the end, and one straddling the end.
  for (uint64_t at : {uint64_t{5 * kMiB + 3}, uint64_t{77}, uint64_t{12 * kMiB + 1}}) {
    ASSERT_TRUE(shared(at, 4096) == blob.substr(at, 4096)) << at;
  }
  EXPECT_TRUE(shared(blob.size() + 10, 4096).empty());
  EXPECT_TRUE(shared(blob.size() - 100, 4096) == blob.substr(blob.size() - 100));
  ASSERT_OK(client->Release(std::move(opened->file)));
}

// A sequential reader leaves only a window of its stripes in the read cache: the stripes it has
// passed are dropped (read-ahead of a large file used to fill the whole cache once, all of it
// freshly touched memory, and to push out the stripes of small files).
TEST_F(ClusterTest, SequentialReaderKeepsOnlyAWindowOfStripesInTheReadCache) {
  StartCluster();
  ClientOptions options;
  options.read_cache_bytes = 256 * kMiB;
  auto client = NewClient(options);
  ASSERT_TRUE(client);
  const uint64_t stripe = 4 * kMiB;  // the default layout: k = 4 units of 1 MiB
  const std::string blob = RandomBytes(12 * stripe, 58);
  ASSERT_OK(client->WriteFile("/seq", blob, kRoot));
  Result<Attributes> attr = client->Resolve("/seq", kRoot);
  ASSERT_TRUE(attr.ok());
  Result<Client::Opened> opened = client->Open(attr->inode, O_RDONLY, kRoot);
  ASSERT_TRUE(opened.ok());
  uint64_t most = 0;
  for (uint64_t at = 0; at < blob.size(); at += kMiB) {
    Result<std::string> got = ReadAt(*client, *opened->file, at, kMiB);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_TRUE(*got == blob.substr(at, kMiB)) << "at " << at;
    most = std::max(most, client->ReadCacheBytes());
  }
  ASSERT_OK(client->Release(std::move(opened->file)));
  const uint64_t window = (ClientOptions{}.readahead_stripes + 2) * stripe;
  EXPECT_GT(most, 0u);
  EXPECT_LE(most, window) << "the cache held " << most / kMiB << " MiB of a 48 MiB stream";
}

// A random reader that comes back to a stripe gets it whole in the read cache, in the
// background, after it has read 1/16 of the stripe's bytes there past the cache (docs/design.md
// "Stripes random readers come back to"); its later reads there send no chunk read, and every
// read returns the file's bytes. A reader that touches each stripe once fetches nothing whole.
// (4 KiB random reads each cost a chunk read before: 0.22 of a local FUSE pass-through.)
TEST_F(ClusterTest, RandomReadsThatComeBackToAStripeAreServedFromTheReadCache) {
  StartCluster();
  auto client = NewClient();
  ASSERT_TRUE(client);
  const uint64_t stripe = 4 * kMiB;  // the default layout: k = 4 units of 1 MiB
  const std::string blob = RandomBytes(3 * stripe + 12345, 61);
  ASSERT_OK(client->WriteFile("/random", blob, kRoot));
  Result<Attributes> attr = client->Resolve("/random", kRoot);
  ASSERT_TRUE(attr.ok());
  // Offsets never adjacent to the read before (not a stream), spread over the file.
  uint64_t state = 12345;
  auto next = [&](uint64_t from, uint64_t span) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return from + ((state >> 17) % (span / 4096)) * 4096;
  };
  // Reads 4 KiB at `at` through `file` and checks them against the file's bytes.
  auto read_4k = [&](OpenFile& file, uint64_t at) {
    Result<std::string> got = ReadAt(*client, file, at, 4096);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_TRUE(*got == blob.substr(at, 4096)) << "at " << at;
  };

  // Once per stripe: nothing is fetched whole.
  {
    Result<Client::Opened> opened = client->Open(attr->inode, O_RDONLY, kRoot);
    ASSERT_TRUE(opened.ok());
    for (uint64_t s = 0; s < 3; ++s) {
      ASSERT_NO_FATAL_FAILURE(read_4k(*opened->file, s * stripe + 8192 * (s + 1)));
    }
    // A whole-stripe fetch would run in the background: give one time to land.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_EQ(client->ReadCacheBytes(), 0u);
    ASSERT_OK(client->Release(std::move(opened->file)));
  }

  Result<Client::Opened> opened = client->Open(attr->inode, O_RDONLY, kRoot);
  ASSERT_TRUE(opened.ok());
  // Stripe 1, 4 KiB at a time: 64 reads make 1/16 of it.
  for (int i = 0; i < 64; ++i) {
    ASSERT_NO_FATAL_FAILURE(read_4k(*opened->file, next(stripe, stripe)));
  }
  for (int waited = 0; client->ReadCacheBytes() < stripe && waited < 500; ++waited) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(client->ReadCacheBytes(), stripe) << "stripe 1 was not fetched whole";
  const uint64_t chunk_reads = client->Counters().chunk_reads;
  for (int i = 0; i < 500; ++i) {
    ASSERT_NO_FATAL_FAILURE(read_4k(*opened->file, next(stripe, stripe)));
  }
  EXPECT_EQ(client->Counters().chunk_reads, chunk_reads)
      << "reads of a cached stripe went to the data servers";
  // The last stripe, short (12,345 bytes), is fetched whole too, and reads past its end stop
  // there.
  const uint64_t tail = 3 * stripe;
  for (int i = 0; i < 80; ++i) {
    ASSERT_NO_FATAL_FAILURE(
        read_4k(*opened->file, tail + std::vector<uint64_t>{8192, 0, 8292, 50}[i % 4]));
  }
  for (int waited = 0; client->ReadCacheBytes() <= stripe && waited < 500; ++waited) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GT(client->ReadCacheBytes(), stripe) << "the short last stripe was not fetched whole";
  Result<std::string> end = ReadAt(*client, *opened->file, blob.size() - 100, 4096);
  ASSERT_TRUE(end.ok());
  EXPECT_TRUE(*end == blob.substr(blob.size() - 100));
  ASSERT_OK(client->Release(std::move(opened->file)));
}

// A reader whose view (size, data_version) predates two rewrites by another client, so that its
// version was pruned on the data servers, reads the newer bytes after taking a fresh view, never
// zeros: with neither copy nor chunk left at or below its bound, a stripe is superseded, not a
// hole. (Two mounts saw zeros in the middle of a file another mount kept appending to.) The data
// servers delete superseded versions at once here (no grace), as they do after the grace.
TEST_F(ClusterTest, ReaderWhoseVersionWasPrunedReadsTheNewerBytesNotZeros) {
  StartCluster({.data_flags = {"--superseded-grace-ms", "0"}});
  auto writer = NewClient();
  auto reader = NewClient();
  ASSERT_TRUE(writer && reader);
  // An erasure-coded file (two stripes) and a replicated small one.
  for (const auto& [path, size] : {std::pair<std::string, uint64_t>{"/coded", 5 * kMiB + 7},
                                   std::pair<std::string, uint64_t>{"/small", 100 * kKiB}}) {
    ASSERT_OK(writer->WriteFile(path, RandomBytes(size, 1), kRoot));
    Result<Attributes> attr = reader->Resolve(path, kRoot);
    ASSERT_TRUE(attr.ok());
    Result<Client::Opened> opened = reader->Open(attr->inode, O_RDONLY, kRoot);
    ASSERT_TRUE(opened.ok());
    std::string latest;
    for (uint32_t seed = 2; seed <= 4; ++seed) {  // each write prunes the one two before it
      latest = RandomBytes(size, seed);
      ASSERT_OK(writer->WriteFile(path, latest, kRoot));
    }
    Result<std::string> got = ReadAt(*reader, *opened->file, 0, size);
    ASSERT_TRUE(got.ok()) << path << ": " << got.status().ToString();
    ASSERT_EQ(got->size(), size) << path;
    EXPECT_TRUE(*got == latest) << path << ": not the newest bytes ("
                                << std::count(got->begin(), got->end(), '\0') << " zero bytes)";
    ASSERT_OK(reader->Release(std::move(opened->file)));
  }
}

// Within the data servers' grace, a version that newer committed ones superseded stays readable:
// a reader whose view names it reads its view's bytes, whole (the kernel that view's size was
// told to asks for them). Once the grace is over, the heartbeat's sweep deletes it, and the same
// reader reads the newest bytes after a fresh view.
TEST_F(ClusterTest, ASupersededVersionStaysReadableForTheGraceThenGoes) {
  StartCluster({.data_flags = {"--superseded-grace-ms", "1500"}});
  auto writer = NewClient();
  auto early = NewClient();  // reads inside the grace
  auto late = NewClient();   // reads after it (its own read cache is empty)
  ASSERT_TRUE(writer && early && late);
  for (const auto& [path, size] : {std::pair<std::string, uint64_t>{"/coded", 5 * kMiB + 7},
                                   std::pair<std::string, uint64_t>{"/small", 100 * kKiB}}) {
    const std::string first = RandomBytes(size, 1);
    ASSERT_OK(writer->WriteFile(path, first, kRoot));
    Result<Attributes> attr = early->Resolve(path, kRoot);
    ASSERT_TRUE(attr.ok());
    Result<Client::Opened> e = early->Open(attr->inode, O_RDONLY, kRoot);
    Result<Client::Opened> l = late->Open(attr->inode, O_RDONLY, kRoot);
    ASSERT_TRUE(e.ok() && l.ok());
    std::string latest;
    for (uint32_t seed = 2; seed <= 4; ++seed) {  // without the grace, 1 and 2 would be pruned
      latest = RandomBytes(size, seed);
      ASSERT_OK(writer->WriteFile(path, latest, kRoot));
    }
    Result<std::string> got = ReadAt(*early, *e->file, 0, size);
    ASSERT_TRUE(got.ok()) << path << ": " << got.status().ToString();
    EXPECT_TRUE(*got == first) << path << ": not the bytes of the reader's view";
    std::this_thread::sleep_for(std::chrono::milliseconds(1500 + 1500));  // grace + sweeps
    got = ReadAt(*late, *l->file, 0, size);
    ASSERT_TRUE(got.ok()) << path << ": " << got.status().ToString();
    EXPECT_TRUE(*got == latest) << path << ": not the newest bytes after the grace";
    ASSERT_OK(early->Release(std::move(e->file)));
    ASSERT_OK(late->Release(std::move(l->file)));
  }
}

// A stripe written short (a data unit left empty, so never stored) and then truncated up to a
// full stripe still reads with two data servers down: the empty unit is zeros at the version that
// was written (each chunk records the stripe's length then), not a missing chunk. Before, the
// reader counted it missing, found fewer than k chunks and failed (EIO) on every stripe whose
// two lost servers did not include that unit's.
TEST_F(ClusterTest, StripeTruncatedUpAfterAShortWriteSurvivesTwoDataServerCrashes) {
  StartCluster();
  auto client = NewClient();
  ASSERT_TRUE(client);
  Result<Attributes> root = client->Resolve("/", kRoot);
  ASSERT_TRUE(root.ok());
  const std::string piece = RandomBytes(12 * kKiB, 21);
  const uint64_t at = 2 * kMiB + 68 * kKiB;  // in unit 2 of stripe 0; unit 3 stays empty
  std::string model(4 * kMiB, '\0');
  model.replace(at, piece.size(), piece);
  constexpr int kFiles = 6;  // each stripe's positions land on the servers in its own order
  for (int i = 0; i < kFiles; ++i) {
    Result<Client::Opened> opened =
        client->Create(root->inode, "short" + std::to_string(i), 0644, O_RDWR | O_CREAT, kRoot);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    WriteAt(*client, *opened->file, at, piece);
    ASSERT_OK(client->Release(std::move(opened->file)));
    AttrChanges grow;
    grow.size_bytes = 4 * kMiB;
    ASSERT_TRUE(client->SetAttr(opened->attr.inode, grow, kRoot).ok());
  }
  ASSERT_OK(cluster_->CrashDataServer(1));
  ASSERT_OK(cluster_->CrashDataServer(4));
  auto reader = NewClient();
  ASSERT_TRUE(reader);
  for (int i = 0; i < kFiles; ++i) {
    Result<std::string> read = reader->ReadFile("/short" + std::to_string(i), kRoot);
    ASSERT_TRUE(read.ok()) << "short" << i << ": " << read.status().ToString();
    EXPECT_TRUE(*read == model) << "short" << i;
  }
}

// A replicated read asks one copy first (chosen per inode): across many small files, some pick
// the restarted server's stale copy first, and must go on to the current copies, never return
// the old bytes.
TEST_F(ClusterTest, SmallFilesOverwrittenWhileACopyWasDownReadNewBytesWhicheverCopyIsAskedFirst) {
  StartCluster();
  auto client = NewClient();
  ASSERT_TRUE(client);
  constexpr int kFiles = 24;
  for (int i = 0; i < kFiles; ++i) {
    ASSERT_OK(client->WriteFile("/s" + std::to_string(i), RandomBytes(30 * kKiB, 100 + i), kRoot));
  }
  ASSERT_OK(cluster_->CrashDataServer(2));
  std::vector<std::string> fresh;
  for (int i = 0; i < kFiles; ++i) {
    fresh.push_back(RandomBytes(30 * kKiB, 200 + i));
    ASSERT_OK(client->WriteFile("/s" + std::to_string(i), fresh.back(), kRoot));
  }
  ASSERT_OK(cluster_->RestartDataServer(2));  // holds the old copies it had
  auto reader = NewClient();
  ASSERT_TRUE(reader);
  for (int i = 0; i < kFiles; ++i) {
    Result<std::string> got = reader->ReadFile("/s" + std::to_string(i), kRoot);
    ASSERT_TRUE(got.ok()) << i << " " << got.status().ToString();
    EXPECT_TRUE(*got == fresh[i]) << "file " << i << " read stale bytes";
  }
}

TEST_F(ClusterTest, WriterCrashBeforeCommitLeavesTheOldContentReadable) {
  StartCluster();
  auto writer = NewClient();
  ASSERT_TRUE(writer);
  const std::string v1 = RandomBytes(8 * kMiB, 31);
  ASSERT_OK(writer->WriteFile("/w", v1, kRoot));
  Result<Attributes> attr = writer->Resolve("/w", kRoot);
  ASSERT_TRUE(attr.ok());
  {
    Result<Client::Opened> opened = writer->Open(attr->inode, O_WRONLY, kRoot);
    ASSERT_TRUE(opened.ok());
    // Two full stripes: encoded and written to the data servers at the new version at once.
    WriteAt(*writer, *opened->file, 0, RandomBytes(8 * kMiB, 32));
    WriteAt(*writer, *opened->file, 8 * kMiB, "tail");
    // The writer dies: the handle is dropped without Flush or Release, then the client goes.
    opened->file.reset();
    writer.reset();
  }
  auto reader = NewClient();
  ASSERT_TRUE(reader);
  Result<std::string> read = reader->ReadFile("/w", kRoot);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(*read == v1);
}

TEST_F(ClusterTest, DataSurvivesAMetadataServerRestart) {
  StartCluster();
  auto client = NewClient();
  ASSERT_TRUE(client);
  const std::string blob = RandomBytes(5 * kMiB + 17, 51);
  ASSERT_OK(client->WriteFile("/m", blob, kRoot));
  ASSERT_OK(cluster_->CrashMeta());
  ASSERT_OK(cluster_->RestartMeta());
  auto other = NewClient();
  ASSERT_TRUE(other);
  Result<std::string> read = other->ReadFile("/m", kRoot);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(*read == blob);
}

// Regression (found by a tester): a small (replicated) file written while the target of its
// first copy was down has its copies on the other two; when that target comes back empty and the
// other two die, a read must fail (EIO) or return the right bytes (if the returned server was
// backfilled meanwhile), never zeros.
TEST_F(ClusterTest, ReadNeverTurnsMissingCopiesIntoZeros) {
  StartCluster();
  auto client = NewClient();
  ASSERT_TRUE(client);
  ASSERT_OK(client->WriteFile("/s", "", kRoot));
  Result<Attributes> attr = client->Resolve("/s", kRoot);
  ASSERT_TRUE(attr.ok());
  Result<client::ClusterMap> map = cluster_->GetClusterMap();
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  Result<client::StripePlacement> where = map->PlacementOf(attr->layout, 0);
  ASSERT_TRUE(where.ok());
  std::vector<int> index_of_position;
  for (int position = 0; position < 3; ++position) {
    for (int i = 0; i < cluster_->data_server_count(); ++i) {
      Result<ServerId> id = cluster_->DataServerId(i);
      if (id.ok() && *id == where->targets[position]) index_of_position.push_back(i);
    }
  }
  ASSERT_EQ(index_of_position.size(), 3u);
  ASSERT_OK(cluster_->StopDataServer(index_of_position[0]));
  const std::string content = RandomBytes(10 * kKiB, 71);
  ASSERT_OK(client->WriteFile("/s", content, kRoot));
  ASSERT_OK(cluster_->RestartDataServer(index_of_position[0]));
  ASSERT_OK(cluster_->CrashDataServer(index_of_position[1]));
  ASSERT_OK(cluster_->CrashDataServer(index_of_position[2]));
  auto reader = NewClient();
  ASSERT_TRUE(reader);
  Result<std::string> read = reader->ReadFile("/s", kRoot);
  if (read.ok()) {
    EXPECT_TRUE(*read == content) << "a read with both copies gone returned other bytes";
  } else {
    EXPECT_EQ(read.status().code(), Code::kUnavailable) << read.status().ToString();
  }
}

// Regression: after a metadata server restart the client's session is unknown there; a mount
// that stays up must renew it at once instead of failing creates and opens with ESTALE.
TEST_F(ClusterTest, ClientKeepsWorkingAcrossAMetadataServerRestart) {
  StartCluster();
  auto client = NewClient();
  ASSERT_TRUE(client);
  const std::string before = RandomBytes(3 * kMiB, 52);
  ASSERT_OK(client->WriteFile("/before", before, kRoot));
  ASSERT_OK(cluster_->CrashMeta());
  ASSERT_OK(cluster_->RestartMeta());
  // The same client, right away: create + write + close, open for write of an old file, read.
  const std::string after = RandomBytes(2 * kMiB + 5, 53);
  ASSERT_OK(client->WriteFile("/after", after, kRoot));
  ASSERT_OK(client->WriteFile("/before", after, kRoot));
  Result<std::string> read = client->ReadFile("/before", kRoot);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(*read == after);
  read = client->ReadFile("/after", kRoot);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(*read == after);
}

// Issue 17: a close(2) in flight while aquifer-meta is away longer than one RPC timeout (here
// 1 s, against a kill -9 and a 2.5 s outage) completes once the server is back, within the
// outage budget, and the file reads back whole; so does a create made during the outage. With
// one deadline per call both failed with EIO.
TEST_F(ClusterTest, ACloseAndACreateDuringAMetadataServerOutageCompleteWhenItIsBack) {
  StartCluster();
  ClientOptions options;
  options.rpc_timeout = std::chrono::milliseconds(1000);  // also the chunk write timeout
  options.meta_outage_wait = std::chrono::milliseconds(60000);
  auto client = NewClient(options);
  ASSERT_TRUE(client);
  const std::string blob = RandomBytes(6 * kMiB + 3, 54);
  Result<Client::Opened> f = client->Create(kRootInode, "closing", 0644, O_WRONLY, kRoot);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  WriteAt(*client, *f->file, 0, blob);

  ASSERT_OK(cluster_->CrashMeta());
  const auto crashed = std::chrono::steady_clock::now();
  std::atomic<bool> back{false};
  auto close = std::async(std::launch::async, [&] {
    Status s = client->Release(std::move(f->file));  // commits the size and version
    EXPECT_TRUE(back.load()) << "close returned before the server was back: " << s.ToString();
    return s;
  });
  auto create = std::async(std::launch::async, [&] {
    return client->WriteFile("/created", "made during the outage", kRoot);
  });
  // The outage (the scenario's length, not a wait for a condition).
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  back = true;
  ASSERT_OK(cluster_->RestartMeta());
  Status closed = close.get();
  Status created = create.get();
  ASSERT_TRUE(closed.ok()) << closed.ToString();
  ASSERT_TRUE(created.ok()) << created.ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - crashed, std::chrono::seconds(30));

  auto reader = NewClient();
  ASSERT_TRUE(reader);
  Result<std::string> read = reader->ReadFile("/closing", kRoot);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(*read == blob);
  read = reader->ReadFile("/created", kRoot);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, "made during the outage");
}

// A writer that crashed mid-stripe left 2 (< k) chunks of its version on stripe 0; another
// writer then committed a newer version by rewriting only stripe 2, which makes the crashed
// version <= data_version. Stripe 0 must still read as the last whole version (the servers keep
// it: it is the newest <= committed), not fail.
TEST_F(ClusterTest, PartialStripeOfACrashedWriterBelowACommitReadsTheOlderVersion) {
  StartCluster();
  auto client = NewClient();
  ASSERT_TRUE(client);
  std::string model = RandomBytes(12 * kMiB, 61);  // 3 stripes of 4 x 1 MiB
  ASSERT_OK(client->WriteFile("/p", model, kRoot));
  Result<Attributes> attr = client->Resolve("/p", kRoot);
  ASSERT_TRUE(attr.ok());
  const uint64_t v0 = attr->data_version;
  const Layout layout = attr->layout;
  ASSERT_EQ(layout.k, 4u);

  // The crashed writer: positions 0 and 1 of stripe 0 at version v0 + 1, nothing else.
  Result<client::ClusterMap> map = cluster_->GetClusterMap();
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  Result<client::StripePlacement> where = map->PlacementOf(layout, 0);
  ASSERT_TRUE(where.ok());
  const uint64_t crashed_version = v0 + 1;
  for (uint32_t position : {0u, 1u}) {
    const client::ServerEntry* server = map->Find(where->targets[position]);
    ASSERT_NE(server, nullptr);
    auto dc = client::NewGrpcDataClient(server->address);
    const std::string junk = RandomBytes(layout.unit_bytes, 70 + position);
    client::ChunkPlacement placement{layout.k + layout.m, where->pg_index, layout.k, layout.m,
                                     layout.unit_bytes, layout.stripe_bytes(), false};
    ASSERT_OK(dc->WriteChunk(ChunkId{attr->inode, 0, position}, crashed_version, v0, Bytes(junk),
                             /*sync=*/false, placement,
                             std::chrono::steady_clock::now() + std::chrono::seconds(5)));
  }

  // Another writer commits a change to stripe 2 only.
  auto writer = NewClient();
  ASSERT_TRUE(writer);
  {
    Result<Client::Opened> opened = writer->Open(attr->inode, O_WRONLY, kRoot);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    const std::string patch = RandomBytes(300 * kKiB, 62);
    WriteAt(*writer, *opened->file, 9 * kMiB, patch);
    model.replace(9 * kMiB, patch.size(), patch);
    ASSERT_OK(writer->Release(std::move(opened->file)));
  }
  Result<Attributes> after = writer->Resolve("/p", kRoot);
  ASSERT_TRUE(after.ok());
  ASSERT_GE(after->data_version, crashed_version) << "the test needs the partial version to be "
                                                     "at or below the new commit";

  // A small read inside a partial chunk (a fresh client: nothing cached) must not take the
  // partial version's bytes.
  auto reader = NewClient();
  ASSERT_TRUE(reader);
  Result<Client::Opened> opened = reader->Open(attr->inode, O_RDONLY, kRoot);
  ASSERT_TRUE(opened.ok());
  Result<std::string> piece = ReadAt(*reader, *opened->file, kMiB + 123, 5000);
  ASSERT_TRUE(piece.ok()) << piece.status().ToString();
  EXPECT_TRUE(*piece == model.substr(kMiB + 123, 5000));
  auto whole_reader = NewClient();
  ASSERT_TRUE(whole_reader);
  Result<std::string> read = whole_reader->ReadFile("/p", kRoot);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(read->substr(0, 4 * kMiB) == model.substr(0, 4 * kMiB)) << "stripe 0";
  EXPECT_TRUE(*read == model);
  ASSERT_OK(reader->Release(std::move(opened->file)));
}

}  // namespace
}  // namespace aquifer

namespace aquifer {
namespace {

// True when `read` is `version` or a prefix of it (a read may be short, never other bytes).
bool IsPrefixOf(const std::string& read, const std::string& version) {
  return read.size() <= version.size() && version.compare(0, read.size(), read) == 0;
}

// Regression (issue 16, problem 1): a reader that opened a file before another client rewrote
// it with O_TRUNC (open(path, "wb")) read whole stripes of zeros: the truncating client deleted
// the old chunks at once. Now the reader gets the old bytes, then (after a second rewrite pruned
// them) the new ones or a short read; never zeros.
TEST_F(ClusterTest, AReaderOpenDuringATruncatingRewriteGetsOldOrNewBytesNeverZeros) {
  StartCluster();
  auto writer = NewClient();
  auto reader = NewClient();
  ASSERT_TRUE(writer && reader);
  const std::string v0 = RandomBytes(6 * kMiB, 160);
  ASSERT_OK(writer->WriteFile("/r", v0, kRoot));
  Result<Attributes> attr = reader->Resolve("/r", kRoot);
  ASSERT_TRUE(attr.ok());
  Result<Client::Opened> r = reader->Open(attr->inode, O_RDONLY, kRoot);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<std::string> versions{v0};
  for (int round = 1; round <= 3; ++round) {
    SCOPED_TRACE(round);
    Result<Client::Opened> w = writer->Open(attr->inode, O_WRONLY | O_TRUNC, kRoot);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    // Truncated, nothing written yet: the reader's view still names the old version.
    Result<std::string> during = ReadAt(*reader, *r->file, 0, 6 * kMiB);
    ASSERT_TRUE(during.ok()) << during.status().ToString();
    bool known = false;
    for (const std::string& v : versions) known |= IsPrefixOf(*during, v);
    EXPECT_TRUE(known) << "read " << during->size() << " bytes that no version held";
    versions.push_back(RandomBytes(6 * kMiB, 160 + round));
    WriteAt(*writer, *w->file, 0, versions.back());
    Result<std::string> mid = ReadAt(*reader, *r->file, 0, 6 * kMiB);
    ASSERT_TRUE(mid.ok()) << mid.status().ToString();
    known = false;
    for (const std::string& v : versions) known |= IsPrefixOf(*mid, v);
    EXPECT_TRUE(known) << "read " << mid->size() << " bytes that no version held";
    ASSERT_OK(writer->Release(std::move(w->file)));
  }
  ASSERT_OK(reader->Release(std::move(r->file)));
  Result<std::string> fresh = reader->ReadFile("/r", kRoot);
  ASSERT_TRUE(fresh.ok());
  EXPECT_TRUE(*fresh == versions.back());
}

// Stripes a truncate cut read as zeros when the file grows again, even while their old chunks
// are still on the data servers (their GC waits for a reader's last close); the reader that
// opened before the truncate still reads the old bytes.
TEST_F(ClusterTest, CutStripesReadAsHolesWhileAnOlderReaderKeepsTheirChunks) {
  StartCluster();
  auto client = NewClient();
  auto reader = NewClient();
  ASSERT_TRUE(client && reader);
  const std::string old = RandomBytes(9 * kMiB, 170);
  ASSERT_OK(client->WriteFile("/h", old, kRoot));
  Result<Attributes> attr = client->Resolve("/h", kRoot);
  ASSERT_TRUE(attr.ok());
  Result<Client::Opened> r = reader->Open(attr->inode, O_RDONLY, kRoot);
  ASSERT_TRUE(r.ok());
  AttrChanges shrink;
  shrink.size_bytes = 1 * kMiB + 7;
  ASSERT_TRUE(client->SetAttr(attr->inode, shrink, kRoot).ok());
  AttrChanges grow;
  grow.size_bytes = 9 * kMiB;
  ASSERT_TRUE(client->SetAttr(attr->inode, grow, kRoot).ok());
  std::string model = old.substr(0, 1 * kMiB + 7);
  model.resize(9 * kMiB, '\0');
  auto fresh = NewClient();
  ASSERT_TRUE(fresh);
  Result<std::string> read = fresh->ReadFile("/h", kRoot);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ(read->size(), model.size());
  EXPECT_TRUE(*read == model) << "bytes a truncate cut came back";
  Result<std::string> older = ReadAt(*reader, *r->file, 0, 9 * kMiB);
  ASSERT_TRUE(older.ok()) << older.status().ToString();
  EXPECT_TRUE(*older == old);
  ASSERT_OK(reader->Release(std::move(r->file)));
}

// Regression (issue 16, problem 2): stripes whose every chunk is gone (more servers' disks lost
// than the layout survives) read back as zeros of the right length, with no error. Now they are
// kDataLoss (EIO), replicated and erasure-coded alike, while a recorded hole of a sparse file
// still reads as zeros without asking any data server.
TEST_F(ClusterTest, StripesLostBeyondRedundancyAreDataLossNotZeros) {
  StartCluster();
  auto client = NewClient();
  ASSERT_TRUE(client);
  ASSERT_OK(client->WriteFile("/small", RandomBytes(10 * kKiB, 180), kRoot));
  ASSERT_OK(client->WriteFile("/big", RandomBytes(9 * kMiB, 181), kRoot));
  {
    // A sparse file: stripe 0 and stripe 3 written, 1 and 2 holes.
    ASSERT_OK(client->WriteFile("/sparse", "", kRoot));
    Result<Attributes> attr = client->Resolve("/sparse", kRoot);
    ASSERT_TRUE(attr.ok());
    Result<Client::Opened> w = client->Open(attr->inode, O_WRONLY, kRoot);
    ASSERT_TRUE(w.ok());
    WriteAt(*client, *w->file, 0, RandomBytes(kMiB, 182));
    WriteAt(*client, *w->file, 12 * kMiB, RandomBytes(kMiB, 183));
    ASSERT_OK(client->Release(std::move(w->file)));
  }
  // Every data server loses its disk's chunks (all stopped first, so that none rebuilds them
  // from another's by backfill).
  for (int i = 0; i < cluster_->data_server_count(); ++i) ASSERT_OK(cluster_->StopDataServer(i));
  for (int i = 0; i < cluster_->data_server_count(); ++i) {
    std::filesystem::remove_all(cluster_->data_dir(i) + "/chunks");
    std::filesystem::create_directories(cluster_->data_dir(i) + "/chunks");
  }
  for (int i = 0; i < cluster_->data_server_count(); ++i) {
    ASSERT_OK(cluster_->RestartDataServer(i));
  }
  auto reader = NewClient();
  ASSERT_TRUE(reader);
  for (const char* path : {"/small", "/big"}) {
    SCOPED_TRACE(path);
    Result<std::string> read = reader->ReadFile(path, kRoot);
    ASSERT_FALSE(read.ok()) << "lost data read back as " << read->size() << " bytes";
    EXPECT_EQ(read.status().code(), Code::kDataLoss) << read.status().ToString();
    EXPECT_EQ(ToErrno(read.status()), EIO);
  }
  Result<Attributes> attr = reader->Resolve("/sparse", kRoot);
  ASSERT_TRUE(attr.ok());
  Result<Client::Opened> s = reader->Open(attr->inode, O_RDONLY, kRoot);
  ASSERT_TRUE(s.ok());
  Result<std::string> hole = ReadAt(*reader, *s->file, 4 * kMiB, 8 * kMiB);
  ASSERT_TRUE(hole.ok()) << hole.status().ToString();
  EXPECT_EQ(*hole, std::string(8 * kMiB, '\0'));
  Result<std::string> lost = ReadAt(*reader, *s->file, 0, kMiB);
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.status().code(), Code::kDataLoss) << lost.status().ToString();
  ASSERT_OK(reader->Release(std::move(s->file)));
  // The readers told the metadata server: the cluster's health says data is lost.
  Result<client::MovesStatus> moves = cluster_->admin().GetMoves();
  ASSERT_TRUE(moves.ok()) << moves.status().ToString();
  EXPECT_EQ(moves->lost_files, 3u) << moves->message;
  EXPECT_GE(moves->lost_stripes, 3u) << moves->message;
  EXPECT_NE(moves->message.find("DATA LOST"), std::string::npos) << moves->message;
  // A rewrite of the small file takes its stripe out of the count.
  ASSERT_OK(client->WriteFile("/small", "new bytes", kRoot));
  moves = cluster_->admin().GetMoves();
  ASSERT_TRUE(moves.ok());
  EXPECT_EQ(moves->lost_files, 2u) << moves->message;
}

}  // namespace
}  // namespace aquifer

namespace aquifer {
namespace {

// Regression (issue 16, problem 4): a writer whose session ended before it committed left chunks
// at its version; once another writer committed a higher version without rewriting those
// stripes, readers took the crashed writer's bytes for the file's. Now the metadata server
// records the version as abandoned when the session ends, and readers skip it.
TEST_F(ClusterTest, ACrashedWritersStripesStayInvisibleAfterAnotherWriterCommits) {
  StartCluster();
  const std::string v1 = RandomBytes(8 * kMiB, 190);
  {
    auto first = NewClient();
    ASSERT_TRUE(first);
    ASSERT_OK(first->WriteFile("/c", v1, kRoot));
  }
  auto crashed = NewClient();
  ASSERT_TRUE(crashed);
  Result<Attributes> attr = crashed->Resolve("/c", kRoot);
  ASSERT_TRUE(attr.ok());
  {
    Result<Client::Opened> w = crashed->Open(attr->inode, O_WRONLY, kRoot);
    ASSERT_TRUE(w.ok());
    // Two full stripes go to the data servers at once, at the crashed writer's version.
    WriteAt(*crashed, *w->file, 0, RandomBytes(8 * kMiB, 191));
    WriteAt(*crashed, *w->file, 8 * kMiB, "x");
    w->file.reset();  // dropped without a commit or a release: the writer dies
    crashed.reset();
  }
  auto second = NewClient();
  ASSERT_TRUE(second);
  Result<Client::Opened> w = second->Open(attr->inode, O_WRONLY, kRoot);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  const std::string head = RandomBytes(4 * kMiB, 192);
  WriteAt(*second, *w->file, 0, head);  // stripe 0 only
  ASSERT_OK(second->Release(std::move(w->file)));
  auto reader = NewClient();
  ASSERT_TRUE(reader);
  Result<std::string> read = reader->ReadFile("/c", kRoot);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ(read->size(), v1.size());
  EXPECT_TRUE(read->compare(0, head.size(), head) == 0) << "stripe 0 is not the second writer's";
  EXPECT_TRUE(read->compare(4 * kMiB, 4 * kMiB, v1, 4 * kMiB, 4 * kMiB) == 0)
      << "stripe 1 holds the crashed writer's uncommitted bytes";
}

}  // namespace
}  // namespace aquifer

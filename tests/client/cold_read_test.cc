// Cold reads of small files against a real cluster of processes (ProcessCluster; issue 19 must 3,
// docs/design.md "Opens without a round trip"): how many metadata calls a lookup, open, read and
// close of a file this client has not seen costs, and that the answers stay close-to-open.
#include <fcntl.h>

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "aquifer/client.h"
#include "testing/cluster_fixture.h"

namespace aquifer {
namespace {

using testing::RandomBytes;

const Caller kRoot{};

Result<std::string> ReadAll(Client& client, OpenFile& file, size_t length) {
  std::string out(length, '\0');
  Result<size_t> n = client.Read(
      file, 0, std::span<std::byte>(reinterpret_cast<std::byte*>(out.data()), length));
  if (!n.ok()) return n.status();
  out.resize(*n);
  return out;
}

// Opens `inode` read-only, checks its bytes are `want` and closes it.
void ExpectReadsAs(Client& client, InodeId inode, const std::string& want, const std::string& what) {
  Result<Client::Opened> o = client.Open(inode, O_RDONLY, kRoot);
  ASSERT_TRUE(o.ok()) << what << ": " << o.status().ToString();
  EXPECT_EQ(o->attr.size_bytes, want.size()) << what;
  Result<std::string> got = ReadAll(client, *o->file, want.size() + 10);
  ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
  EXPECT_TRUE(*got == want) << what << " read other bytes";
  ASSERT_OK(client.Release(std::move(o->file)));
}

class ColdReadClientTest : public testing::ProcessClusterTest {};

// Fewer files than a directory needs before it is listed (16 found lookups), so every lookup goes
// to the server: each file then costs its Lookup and nothing else. Before the lookup kept what it
// found for the open, each cost a Lookup and an Open (and a batched Release): 20 calls or more
// for these 10 files.
TEST_F(ColdReadClientTest, ALookedUpFileIsOpenedReadAndClosedWithNoFurtherMetadataCall) {
  StartCluster();
  auto writer = NewClient();
  ClientOptions caching;
  caching.cache_leases = true;
  auto reader = NewClient(caching);
  ASSERT_TRUE(writer && reader);
  ASSERT_OK(writer->Mkdir(kRootInode, "cold", 0755, kRoot).status());
  constexpr int kFiles = 10;
  std::vector<std::string> bytes;
  for (int i = 0; i < kFiles; ++i) {
    bytes.push_back(RandomBytes(4096 + 1000 * i, 70 + i));
    ASSERT_OK(writer->WriteFile("/cold/f" + std::to_string(i), bytes.back(), kRoot));
  }
  Result<Attributes> dir = reader->Lookup(kRootInode, "cold", kRoot);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();

  const uint64_t calls_before = reader->Counters().meta_calls;
  for (int i = 0; i < kFiles; ++i) {
    Result<Attributes> attr = reader->Lookup(dir->inode, "f" + std::to_string(i), kRoot);
    ASSERT_TRUE(attr.ok()) << attr.status().ToString();
    ASSERT_NO_FATAL_FAILURE(ExpectReadsAs(*reader, attr->inode, bytes[i], "f" + std::to_string(i)));
  }
  const uint64_t calls = reader->Counters().meta_calls - calls_before;
  // kFiles lookups, and at most two calls of the client's own (the recall poll, a cluster map).
  EXPECT_LE(calls, static_cast<uint64_t>(kFiles) + 2)
      << "a cold file cost more than its lookup: " << calls << " metadata calls for " << kFiles
      << " files";
}

// Close-to-open still holds: another client's rewrite of a file between this client's lookup
// and its open is read whole (the rewrite's recall dropped what the lookup kept), and so is a
// rename over the name (the kernel's next lookup finds the new inode).
TEST_F(ColdReadClientTest, ARewriteOrRenameOverBetweenLookupAndOpenIsSeenByTheOpen) {
  StartCluster();
  auto writer = NewClient();
  ClientOptions caching;
  caching.cache_leases = true;
  auto reader = NewClient(caching);
  ASSERT_TRUE(writer && reader);
  ASSERT_OK(writer->Mkdir(kRootInode, "d", 0755, kRoot).status());
  ASSERT_OK(writer->WriteFile("/d/a", RandomBytes(5000, 1), kRoot));
  ASSERT_OK(writer->WriteFile("/d/b", RandomBytes(6000, 2), kRoot));
  ASSERT_OK(writer->WriteFile("/d/.new", RandomBytes(7000, 3), kRoot));
  Result<Attributes> dir = reader->Lookup(kRootInode, "d", kRoot);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();

  Result<Attributes> a = reader->Lookup(dir->inode, "a", kRoot);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  const std::string rewritten = RandomBytes(9000, 4);
  ASSERT_OK(writer->WriteFile("/d/a", rewritten, kRoot));
  ASSERT_NO_FATAL_FAILURE(ExpectReadsAs(*reader, a->inode, rewritten, "a rewritten after the lookup"));

  Result<Attributes> b = reader->Lookup(dir->inode, "b", kRoot);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_OK(writer->Rename(dir->inode, ".new", dir->inode, "b", 0, kRoot));
  // The old inode lost its name: the open says so (the kernel then looks the name up again).
  Result<Client::Opened> old = reader->Open(b->inode, O_RDONLY, kRoot);
  if (old.ok()) {
    EXPECT_EQ(old->attr.nlink, 0u) << "an open of a replaced inode was answered as still named";
    ASSERT_OK(reader->Release(std::move(old->file)));
  }
  Result<Attributes> b2 = reader->Lookup(dir->inode, "b", kRoot);
  ASSERT_TRUE(b2.ok()) << b2.status().ToString();
  EXPECT_NE(b2->inode, b->inode);
  EXPECT_EQ(b2->size_bytes, 7000u);
}

// A file found by a plus listing (the kernel's READDIRPLUS: ls, a glob, os.scandir, then an open
// of each name, as a training job's dataset scan does) is opened, read and closed with no metadata
// call: the page kept each entry's attributes under the lease, as a lookup's answer. Before, each
// such file cost an Open and a ReleaseBatch (273 calls for 200 files through the mount). A
// rewrite by another client after the listing is still seen by the open.
TEST_F(ColdReadClientTest, AFileFoundByAPlusListingIsOpenedWithNoMetadataCallAndStaysCurrent) {
  StartCluster();
  auto writer = NewClient();
  ClientOptions caching;
  caching.cache_leases = true;
  auto reader = NewClient(caching);
  ASSERT_TRUE(writer && reader);
  ASSERT_OK(writer->Mkdir(kRootInode, "listed", 0755, kRoot).status());
  constexpr int kFiles = 10;
  std::vector<std::string> bytes;
  for (int i = 0; i < kFiles; ++i) {
    bytes.push_back(RandomBytes(3000 + 700 * i, 90 + i));
    ASSERT_OK(writer->WriteFile("/listed/f" + std::to_string(i), bytes.back(), kRoot));
  }
  Result<Attributes> dir = reader->Lookup(kRootInode, "listed", kRoot);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();

  const uint64_t calls_before = reader->Counters().meta_calls;
  Result<DirPage> page = reader->ReadDir(dir->inode, 0, 100, /*plus=*/true, kRoot);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  std::map<std::string, Attributes> found;
  for (const DirEntry& e : page->entries) {
    if (e.attr) found[e.name] = *e.attr;
  }
  ASSERT_EQ(found.size(), static_cast<size_t>(kFiles));
  for (int i = 0; i < kFiles; ++i) {
    const std::string name = "f" + std::to_string(i);
    ASSERT_NO_FATAL_FAILURE(ExpectReadsAs(*reader, found.at(name).inode, bytes[i], name));
  }
  const uint64_t calls = reader->Counters().meta_calls - calls_before;
  // The listing, and at most two calls of the client's own (the recall poll, a cluster map).
  EXPECT_LE(calls, 3u) << "files found by a plus listing cost " << calls << " metadata calls";

  // Listed again, then rewritten by the writer before the open: the recall dropped what the
  // page kept, so the open asks and reads the new bytes.
  page = reader->ReadDir(dir->inode, 0, 100, /*plus=*/true, kRoot);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  const std::string rewritten = RandomBytes(12000, 99);
  ASSERT_OK(writer->WriteFile("/listed/f3", rewritten, kRoot));
  ASSERT_NO_FATAL_FAILURE(ExpectReadsAs(*reader, found.at("f3").inode, rewritten,
                                        "f3 rewritten after the listing"));
}

}  // namespace
}  // namespace aquifer

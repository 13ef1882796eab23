// GroupCache: an answer is reused for the same thread, uid and gid within the ttl, and never
// otherwise; the map stays bounded.
#include "client_fuse/group_cache.h"

#include <gtest/gtest.h>

namespace aquifer::fuse {
namespace {

using std::chrono::milliseconds;
const GroupCache::Clock::time_point kT0{std::chrono::seconds(1000)};

TEST(GroupCacheTest, HitWithinTtlForSameThreadAndIds) {
  GroupCache cache(milliseconds(1000));
  EXPECT_FALSE(cache.Find(7, 1000, 1000, kT0).has_value());
  cache.Put(7, 1000, 1000, {10, 20}, kT0);
  auto hit = cache.Find(7, 1000, 1000, kT0 + milliseconds(999));
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(*hit, (std::vector<uint32_t>{10, 20}));
}

TEST(GroupCacheTest, MissAfterTtl) {
  GroupCache cache(milliseconds(1000));
  cache.Put(7, 1000, 1000, {10}, kT0);
  EXPECT_FALSE(cache.Find(7, 1000, 1000, kT0 + milliseconds(1000)).has_value());
  // A clock that went backwards (entry from the future) does not count as fresh either.
  EXPECT_FALSE(cache.Find(7, 1000, 1000, kT0 - milliseconds(1)).has_value());
}

// A reused thread id of another user or group must not inherit the groups.
TEST(GroupCacheTest, MissForOtherUidOrGidOrThread) {
  GroupCache cache(milliseconds(1000));
  cache.Put(7, 1000, 1000, {10}, kT0);
  EXPECT_FALSE(cache.Find(7, 1001, 1000, kT0).has_value());
  EXPECT_FALSE(cache.Find(7, 1000, 1001, kT0).has_value());
  EXPECT_FALSE(cache.Find(8, 1000, 1000, kT0).has_value());
}

TEST(GroupCacheTest, PutReplacesTheThreadsEntry) {
  GroupCache cache(milliseconds(1000));
  cache.Put(7, 1000, 1000, {10}, kT0);
  cache.Put(7, 0, 0, {}, kT0 + milliseconds(5));
  EXPECT_FALSE(cache.Find(7, 1000, 1000, kT0 + milliseconds(5)).has_value());
  auto hit = cache.Find(7, 0, 0, kT0 + milliseconds(5));
  ASSERT_TRUE(hit.has_value());
  EXPECT_TRUE(hit->empty());
  EXPECT_EQ(cache.size(), 1u);
}

TEST(GroupCacheTest, ZeroTtlDisablesTheCache) {
  GroupCache cache(milliseconds(0));
  cache.Put(7, 1000, 1000, {10}, kT0);
  EXPECT_FALSE(cache.Find(7, 1000, 1000, kT0).has_value());
  EXPECT_EQ(cache.size(), 0u);
}

TEST(GroupCacheTest, StaysBoundedByMaxEntries) {
  GroupCache cache(milliseconds(1000), /*max_entries=*/4);
  for (uint32_t tid = 0; tid < 100; ++tid) {
    cache.Put(tid, 1, 1, {tid}, kT0);
    EXPECT_LE(cache.size(), 4u);
  }
  // The newest entry survives the drop that made room for it.
  EXPECT_TRUE(cache.Find(99, 1, 1, kT0).has_value());
}

}  // namespace
}  // namespace aquifer::fuse

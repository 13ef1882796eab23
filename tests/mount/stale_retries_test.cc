// StaleRetries: an open counts as the kernel's retry after ESTALE only from the same thread,
// within the window, for the inode its lookup found since, never for the stale inode itself, and
// once per ESTALE; the map stays bounded.
#include "client_fuse/stale_retries.h"

#include <gtest/gtest.h>

namespace aquifer::fuse {
namespace {

using std::chrono::milliseconds;
const StaleRetries::Clock::time_point kT0{std::chrono::seconds(1000)};

TEST(StaleRetriesTest, RetryOfTheInodeTheLookupFoundIsFresh) {
  StaleRetries r(milliseconds(1000));
  r.AnsweredStale(7, 25, kT0);
  r.LookedUp(7, 30);
  EXPECT_TRUE(r.IsFreshRetry(7, 30, kT0 + milliseconds(2)));
  // Used up: the next open of that thread is an ordinary one.
  EXPECT_FALSE(r.IsFreshRetry(7, 30, kT0 + milliseconds(3)));
  EXPECT_EQ(r.size(), 0u);
}

TEST(StaleRetriesTest, NotWithoutALookupSinceOrForAnotherInode) {
  StaleRetries r(milliseconds(1000));
  r.AnsweredStale(7, 25, kT0);
  EXPECT_FALSE(r.IsFreshRetry(7, 30, kT0 + milliseconds(1)));  // no lookup answered since
  r.AnsweredStale(7, 25, kT0);
  r.LookedUp(7, 30);
  EXPECT_FALSE(r.IsFreshRetry(7, 31, kT0 + milliseconds(1)));  // not what the lookup found
}

TEST(StaleRetriesTest, TheStaleInodeFoundAgainIsNotFresh) {
  // The lookup gave the same stale inode back (a stale name cache): nothing proves it fresh.
  StaleRetries r(milliseconds(1000));
  r.AnsweredStale(7, 25, kT0);
  r.LookedUp(7, 25);
  EXPECT_FALSE(r.IsFreshRetry(7, 25, kT0 + milliseconds(1)));
}

TEST(StaleRetriesTest, OnlyTheSameThreadAndWithinTheWindow) {
  StaleRetries r(milliseconds(1000));
  r.AnsweredStale(7, 25, kT0);
  r.LookedUp(8, 30);  // another thread's lookup: not followed
  r.LookedUp(7, 30);
  EXPECT_FALSE(r.IsFreshRetry(8, 30, kT0 + milliseconds(1)));
  EXPECT_FALSE(r.IsFreshRetry(7, 30, kT0 + milliseconds(1000)));
  r.AnsweredStale(7, 25, kT0);
  r.LookedUp(7, 30);
  EXPECT_FALSE(r.IsFreshRetry(7, 30, kT0 - milliseconds(1)));  // a clock that went back
}

TEST(StaleRetriesTest, LastLookupWins) {
  // The retry walks every component again: the file's lookup comes last.
  StaleRetries r(milliseconds(1000));
  r.AnsweredStale(7, 25, kT0);
  r.LookedUp(7, 2);
  r.LookedUp(7, 30);
  EXPECT_TRUE(r.IsFreshRetry(7, 30, kT0 + milliseconds(1)));
}

TEST(StaleRetriesTest, StaysBounded) {
  StaleRetries r(milliseconds(1000), 4);
  for (uint32_t tid = 1; tid <= 4; ++tid) r.AnsweredStale(tid, 25, kT0);
  EXPECT_EQ(r.size(), 4u);
  r.AnsweredStale(5, 25, kT0 + milliseconds(1500));  // the four expired: dropped
  EXPECT_EQ(r.size(), 1u);
  for (uint32_t tid = 6; tid <= 8; ++tid) r.AnsweredStale(tid, 25, kT0 + milliseconds(1500));
  r.AnsweredStale(9, 25, kT0 + milliseconds(1500));  // full of live entries: all dropped
  EXPECT_LE(r.size(), 4u);
}

}  // namespace
}  // namespace aquifer::fuse

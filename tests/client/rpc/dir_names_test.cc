// DirNames (src/client/rpc/dir_names.h): when a lookup may be answered "absent" without asking
// the metadata server, and every event that must take that right away.
#include "client/rpc/dir_names.h"

#include <gtest/gtest.h>

namespace aquifer::client {
namespace {

using Known = DirNames::Known;
using namespace std::chrono_literals;

class DirNamesTest : public ::testing::Test {
 protected:
  DirNamesTest() : names_(Limits()) {
    names_.SetLease(8000ms);
    names_.Heard(DirNames::Clock::now());
  }
  static DirNames::Limits Limits() {
    DirNames::Limits l;
    l.max_names_per_dir = 8;
    l.max_names = 12;
    l.max_unsure_per_dir = 2;
    l.first_listing_after = 2;
    l.max_listing_after = 8;
    return l;
  }
  // A directory this client made: complete and empty.
  void Made(InodeId dir) {
    DirNames::Ticket t = names_.Begin(InodeId());
    ASSERT_TRUE(names_.Install(dir, t, {}));
  }
  DirNames names_;
  const InodeId d_{10}, e_{11};
};

TEST_F(DirNamesTest, AMadeDirectoryAnswersAbsentAndFollowsThisClientsChanges) {
  EXPECT_EQ(names_.Find(d_, "a"), Known::kUnknown);  // never listed
  Made(d_);
  EXPECT_EQ(names_.Find(d_, "a"), Known::kAbsent);
  names_.Added(d_, "a");
  EXPECT_EQ(names_.Find(d_, "a"), Known::kPresent);
  names_.Removed(d_, "a");
  EXPECT_EQ(names_.Find(d_, "a"), Known::kAbsent);
  // "." and ".." are the server's (and the kernel's) business.
  EXPECT_EQ(names_.Find(d_, "."), Known::kUnknown);
  EXPECT_EQ(names_.Find(d_, ".."), Known::kUnknown);
  EXPECT_EQ(names_.Find(d_, ""), Known::kUnknown);
  EXPECT_EQ(names_.Find(e_, "a"), Known::kUnknown);  // another directory
}

TEST_F(DirNamesTest, ARecalledNameIsAskedAgainAndTooManyDropTheList) {
  Made(d_);
  names_.Added(d_, "a");
  names_.Recalled(d_, "a");  // another session renamed, unlinked or made it
  names_.Recalled(d_, "b");
  EXPECT_EQ(names_.Find(d_, "a"), Known::kUnknown);
  EXPECT_EQ(names_.Find(d_, "b"), Known::kUnknown);
  EXPECT_EQ(names_.Find(d_, "c"), Known::kAbsent);  // the rest is still known
  names_.Added(d_, "b");  // this client's own create of it settles it again
  EXPECT_EQ(names_.Find(d_, "b"), Known::kPresent);
  names_.Recalled(d_, "x");
  names_.Recalled(d_, "y");  // past max_unsure_per_dir (2, with "a")
  EXPECT_EQ(names_.Find(d_, "c"), Known::kUnknown);
  EXPECT_EQ(names_.complete_dirs(), 0u);
}

TEST_F(DirNamesTest, AFailedChangeANewSessionOrANewServerRunDropsLists) {
  Made(d_);
  Made(e_);
  names_.Forget(d_);  // a create there failed or timed out: its outcome is not known
  EXPECT_EQ(names_.Find(d_, "a"), Known::kUnknown);
  EXPECT_EQ(names_.Find(e_, "a"), Known::kAbsent);
  names_.ForgetAll();
  EXPECT_EQ(names_.Find(e_, "a"), Known::kUnknown);
}

TEST_F(DirNamesTest, AnswersStopWhenTheRecallChannelWentQuietForHalfALease) {
  Made(d_);
  const auto now = DirNames::Clock::now();
  EXPECT_EQ(names_.Find(d_, "a", now + 3900ms), Known::kAbsent);
  EXPECT_EQ(names_.Find(d_, "a", now + 4100ms), Known::kUnknown);  // may have been broken
  names_.Heard(now + 4000ms);
  EXPECT_EQ(names_.Find(d_, "a", now + 4100ms), Known::kAbsent);
  // No lease (leases off): nothing is answered, nothing is installed.
  names_.SetLease(0ms);
  EXPECT_EQ(names_.Find(d_, "a"), Known::kUnknown);
  DirNames::Ticket t = names_.Begin(InodeId());
  EXPECT_FALSE(names_.Install(e_, t, {}));
}

TEST_F(DirNamesTest, AListingIsTakenOnlyIfNothingAboutTheDirectoryChangedMeanwhile) {
  // Misses ask for a listing after first_listing_after, then after twice as many.
  EXPECT_FALSE(names_.NoteMiss(d_));
  EXPECT_TRUE(names_.NoteMiss(d_));
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(names_.NoteMiss(d_));
  EXPECT_TRUE(names_.NoteMiss(d_));

  DirNames::Ticket t = names_.Begin(d_);
  names_.Recalled(d_, "new");  // came while the pages were read
  EXPECT_FALSE(names_.Install(d_, t, {"a", "b"}));
  t = names_.Begin(d_);
  names_.Added(d_, "mine");  // this client's change raced the listing
  EXPECT_FALSE(names_.Install(d_, t, {"a", "b"}));
  t = names_.Begin(d_);
  names_.ForgetAll();
  EXPECT_FALSE(names_.Install(d_, t, {"a", "b"}));
  t = names_.Begin(d_);
  EXPECT_TRUE(names_.Install(d_, t, {"a", "b"}));
  EXPECT_EQ(names_.Find(d_, "a"), Known::kPresent);
  EXPECT_EQ(names_.Find(d_, "c"), Known::kAbsent);
  EXPECT_FALSE(names_.NoteMiss(d_));  // complete: nothing to list

  // A directory this client is making: a change of it seen before the reply voids the ticket.
  t = names_.Begin(InodeId());
  names_.Recalled(e_, "x");
  EXPECT_FALSE(names_.Install(e_, t, {}));
}

TEST_F(DirNamesTest, ListsStayWithinTheirLimits) {
  DirNames::Ticket t = names_.Begin(d_);
  EXPECT_FALSE(names_.Install(d_, t, {"1", "2", "3", "4", "5", "6", "7", "8", "9"}));  // > 8
  t = names_.Begin(d_);
  ASSERT_TRUE(names_.Install(d_, t, {"1", "2", "3", "4", "5", "6", "7", "8"}));
  names_.Added(d_, "9");  // grew past the per-directory limit: dropped
  EXPECT_EQ(names_.Find(d_, "x"), Known::kUnknown);
  t = names_.Begin(d_);
  ASSERT_TRUE(names_.Install(d_, t, {"1", "2", "3", "4", "5", "6", "7", "8"}));
  t = names_.Begin(e_);
  ASSERT_TRUE(names_.Install(e_, t, {"1", "2", "3", "4", "5", "6"}));  // 14 > 12 in all
  EXPECT_EQ(names_.names(), 6u);  // the others went to make room
  EXPECT_EQ(names_.Find(e_, "x"), Known::kAbsent);
  EXPECT_EQ(names_.Find(d_, "x"), Known::kUnknown);
}

}  // namespace
}  // namespace aquifer::client

// DirNames (src/client/rpc/dir_names.h): when a lookup may be answered "absent" without asking
// the metadata server, and every event that must take that right away.
#include "client/rpc/dir_names.h"

#include <sys/stat.h>

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
  // What the mount caps the kernel's timeouts at: the newest answer's send time + lease / 2.
  EXPECT_EQ(names_.TrustedUntil(), now + 8000ms);
  names_.Heard(now);  // an older answer arriving late does not shorten it
  EXPECT_EQ(names_.TrustedUntil(), now + 8000ms);
  // No lease (leases off): nothing is answered, nothing is installed.
  names_.SetLease(0ms);
  EXPECT_EQ(names_.Find(d_, "a"), Known::kUnknown);
  EXPECT_EQ(names_.TrustedUntil(), DirNames::Clock::time_point{});
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

Attributes File(uint64_t ino, uint32_t nlink = 1, uint64_t size = 0) {
  Attributes a;
  a.inode = InodeId(ino);
  a.mode = S_IFREG | 0644;
  a.nlink = nlink;
  a.size_bytes = size;
  return a;
}

TEST_F(DirNamesTest, APlusListingAnswersOneLinkFilesAttributesUntilSomethingTouchesThem) {
  Attributes dir = File(22);
  dir.mode = S_IFDIR | 0755;
  dir.nlink = 2;
  std::vector<DirNames::Listed> listed{{"a", InodeId(20), File(20, 1, 7)},
                                       {"linked", InodeId(21), File(21, 2)},
                                       {"sub", InodeId(22), dir},
                                       {"bare", InodeId(23), std::nullopt}};
  DirNames::Ticket t = names_.Begin(d_);
  ASSERT_TRUE(names_.InstallListed(d_, t, std::move(listed)));
  DirNames::Found f = names_.FindEntry(d_, "a");
  EXPECT_EQ(f.known, Known::kPresent);
  ASSERT_TRUE(f.attr.has_value());
  EXPECT_EQ(f.attr->size_bytes, 7u);
  ASSERT_TRUE(names_.CachedAttr(InodeId(20)).has_value());
  // Two links (another name could change it unseen), a directory, no attributes: names only.
  EXPECT_EQ(names_.FindEntry(d_, "linked").known, Known::kPresent);
  EXPECT_FALSE(names_.FindEntry(d_, "linked").attr.has_value());
  EXPECT_FALSE(names_.FindEntry(d_, "sub").attr.has_value());
  EXPECT_FALSE(names_.FindEntry(d_, "bare").attr.has_value());
  EXPECT_EQ(names_.attrs(), 1u);
  // No answer past the trust window.
  EXPECT_FALSE(names_.CachedAttr(InodeId(20), DirNames::Clock::now() + 5000ms).has_value());
  // A change of this client or a recall of the inode takes them.
  names_.Touched(InodeId(20));
  EXPECT_EQ(names_.FindEntry(d_, "a").known, Known::kPresent);
  EXPECT_FALSE(names_.FindEntry(d_, "a").attr.has_value());
  EXPECT_FALSE(names_.CachedAttr(InodeId(20)).has_value());
}

TEST_F(DirNamesTest, KeptAttributesGoWithTheirNameTheirListOrANewServerRun) {
  auto fill = [&] {
    DirNames::Ticket t = names_.Begin(d_);
    ASSERT_TRUE(names_.InstallListed(
        d_, t, std::vector<DirNames::Listed>{{"a", InodeId(20), File(20)}, {"b", InodeId(21), File(21)}}));
    ASSERT_EQ(names_.attrs(), 2u);
  };
  fill();
  names_.Removed(d_, "a");  // this client's unlink or rename away
  EXPECT_FALSE(names_.CachedAttr(InodeId(20)).has_value());
  names_.Recalled(d_, "b");  // another session's change of the name
  EXPECT_FALSE(names_.CachedAttr(InodeId(21)).has_value());
  fill();
  names_.Added(d_, "a");  // a rename over "a": its old inode lost its only name
  EXPECT_FALSE(names_.CachedAttr(InodeId(20)).has_value());
  EXPECT_TRUE(names_.CachedAttr(InodeId(21)).has_value());
  names_.Forget(d_);  // a failed change: the list and its attributes
  EXPECT_EQ(names_.attrs(), 0u);
  fill();
  names_.ForgetAll();
  EXPECT_EQ(names_.attrs(), 0u);
}

TEST_F(DirNamesTest, ARepliedStateOlderThanAChangeIsNotKept) {
  Made(d_);
  names_.Added(d_, "a");
  // A lookup answered while this client's own commit of the inode was in flight.
  DirNames::Ticket t = names_.Begin(d_);
  names_.Touched(InodeId(20));
  Attributes old = File(20, 1, 0);
  names_.Answered(d_, "a", t, &old);
  EXPECT_EQ(names_.FindEntry(d_, "a").known, Known::kPresent);
  EXPECT_FALSE(names_.FindEntry(d_, "a").attr.has_value());
  // A listing likewise keeps the names, not that inode's attributes.
  t = names_.Begin(d_);
  names_.Touched(InodeId(20));
  ASSERT_TRUE(names_.InstallListed(d_, t, std::vector<DirNames::Listed>{{"a", InodeId(20), old}}));
  EXPECT_FALSE(names_.CachedAttr(InodeId(20)).has_value());
  // Asked after the change: kept.
  t = names_.Begin(d_);
  Attributes now = File(20, 1, 4096);
  names_.Answered(d_, "a", t, &now);
  ASSERT_TRUE(names_.CachedAttr(InodeId(20)).has_value());
  EXPECT_EQ(names_.CachedAttr(InodeId(20))->size_bytes, 4096u);
  // This client's create keeps the new inode's reply, unless it was touched meanwhile.
  t = names_.Begin(d_);
  Attributes made = File(30);
  names_.Added(d_, "new", &made, &t);
  EXPECT_TRUE(names_.FindEntry(d_, "new").attr.has_value());
  t = names_.Begin(d_);
  names_.Touched(InodeId(31));
  Attributes made2 = File(31);
  names_.Added(d_, "new2", &made2, &t);
  EXPECT_EQ(names_.FindEntry(d_, "new2").known, Known::kPresent);
  EXPECT_FALSE(names_.FindEntry(d_, "new2").attr.has_value());
}

// This client's own SetAttr or Commit replies with the inode's new attributes: they are kept
// where the old ones were, so the kernel's GETATTR after tar's futimens, fchown and fchmod is
// answered here. Not when anything else touched the inode during the change (a recall, another
// call), not when the name went, and never a lookup reply asked during the change.
TEST_F(DirNamesTest, AClientsOwnChangeKeepsItsRepliedAttributesWhereTheOldOnesWere) {
  Made(d_);
  DirNames::Ticket t = names_.Begin(d_);
  Attributes made = File(20);
  names_.Added(d_, "a", &made, &t);
  ASSERT_TRUE(names_.CachedAttr(InodeId(20)).has_value());
  DirNames::Change c = names_.Changing(InodeId(20));
  EXPECT_FALSE(names_.CachedAttr(InodeId(20)).has_value()) << "the old copy during the change";
  Attributes after = File(20, 1, 300);
  after.mode = S_IFREG | 0600;
  names_.Changed(InodeId(20), c, after);
  ASSERT_TRUE(names_.CachedAttr(InodeId(20)).has_value());
  EXPECT_EQ(names_.CachedAttr(InodeId(20))->size_bytes, 300u);
  EXPECT_EQ(names_.FindEntry(d_, "a").attr->mode, uint32_t{S_IFREG | 0600});
  // Changes in a row keep following each other.
  c = names_.Changing(InodeId(20));
  after.mode = S_IFREG | 0644;
  names_.Changed(InodeId(20), c, after);
  EXPECT_EQ(names_.CachedAttr(InodeId(20))->mode, uint32_t{S_IFREG | 0644});
  // A recall during the change: the reply may be older than the other session's change.
  c = names_.Changing(InodeId(20));
  names_.Touched(InodeId(20));
  names_.Changed(InodeId(20), c, after);
  EXPECT_FALSE(names_.CachedAttr(InodeId(20)).has_value());
  // Nothing kept before the change (so no name known for it): nothing kept after.
  c = names_.Changing(InodeId(20));
  names_.Changed(InodeId(20), c, after);
  EXPECT_FALSE(names_.CachedAttr(InodeId(20)).has_value());
  // A lookup asked during the change is not kept after it, nor is the reply of a second link.
  t = names_.Begin(d_);
  names_.Added(d_, "b", &made, &t);
  ASSERT_TRUE(names_.CachedAttr(InodeId(20)).has_value());
  c = names_.Changing(InodeId(20));
  t = names_.Begin(d_);
  names_.Changed(InodeId(20), c, File(20, 2));
  EXPECT_FALSE(names_.CachedAttr(InodeId(20)).has_value());
  Attributes stale = File(20, 1, 1);
  names_.Answered(d_, "b", t, &stale);
  EXPECT_FALSE(names_.CachedAttr(InodeId(20)).has_value());
  // The name removed during the change.
  t = names_.Begin(d_);
  names_.Added(d_, "c", &made, &t);
  c = names_.Changing(InodeId(20));
  names_.Removed(d_, "c");
  names_.Changed(InodeId(20), c, after);
  EXPECT_FALSE(names_.CachedAttr(InodeId(20)).has_value());
}

TEST_F(DirNamesTest, AServerAnswerSettlesAnUnsureNameOnlyIfNothingChangedSinceItWasAsked) {
  Made(d_);
  names_.Added(d_, "a");
  names_.Recalled(d_, "a");
  EXPECT_EQ(names_.Find(d_, "a"), Known::kUnknown);
  DirNames::Ticket t = names_.Begin(d_);
  names_.Answered(d_, "a", t, nullptr);  // the other session unlinked it
  EXPECT_EQ(names_.Find(d_, "a"), Known::kAbsent);
  names_.Recalled(d_, "b");
  t = names_.Begin(d_);
  Attributes b = File(40);
  names_.Answered(d_, "b", t, &b);  // it made it
  EXPECT_EQ(names_.Find(d_, "b"), Known::kPresent);
  EXPECT_TRUE(names_.FindEntry(d_, "b").attr.has_value());
  // A recall between the question and the answer: the answer may predate it.
  t = names_.Begin(d_);
  names_.Recalled(d_, "c");
  Attributes c = File(41);
  names_.Answered(d_, "c", t, &c);
  EXPECT_EQ(names_.Find(d_, "c"), Known::kUnknown);
  // Found names ask for a plus listing after first_plus_listing_after (16 by default).
  DirNames fresh;
  fresh.SetLease(8000ms);
  int asked = 0;
  for (int i = 0; i < 16; ++i) asked += fresh.NoteFound(e_) ? 1 : 0;
  EXPECT_EQ(asked, 1);
}

// A lookup the server answered in a directory with no complete list keeps the file's attributes
// for the open that follows (docs/design.md "Opens without a round trip"), by (dir, name): this
// client's own unlink, rename away or over, a recall of the name or inode, a failed change in the
// directory and a reply older than a change all take them; they never answer a lookup.
TEST_F(DirNamesTest, ALookupOutsideAListKeepsTheFilesAttributesUntilItsNameOrInodeChanges) {
  auto look = [&](const char* name, Attributes a) {
    DirNames::Ticket t = names_.Begin(d_);
    names_.Answered(d_, name, t, &a);
  };
  look("a", File(20, 1, 7));
  ASSERT_TRUE(names_.CachedAttr(InodeId(20)).has_value());
  EXPECT_EQ(names_.CachedAttr(InodeId(20))->size_bytes, 7u);
  EXPECT_EQ(names_.FindEntry(d_, "a").known, Known::kUnknown);  // the other names are not known
  EXPECT_EQ(names_.looked(), 1u);
  EXPECT_FALSE(names_.CachedAttr(InodeId(20), DirNames::Clock::now() + 5000ms).has_value());
  // Two links, or a directory: not kept.
  look("linked", File(21, 2));
  Attributes sub = File(22);
  sub.mode = S_IFDIR | 0755;
  look("sub", sub);
  EXPECT_FALSE(names_.CachedAttr(InodeId(21)).has_value());
  EXPECT_FALSE(names_.CachedAttr(InodeId(22)).has_value());

  names_.Removed(d_, "a");  // this client's unlink or rename away
  EXPECT_FALSE(names_.CachedAttr(InodeId(20)).has_value());
  look("a", File(20));
  names_.Added(d_, "a");  // a rename or create over it
  EXPECT_FALSE(names_.CachedAttr(InodeId(20)).has_value());
  look("a", File(20));
  names_.Recalled(d_, "a");  // another session's change of the name
  EXPECT_FALSE(names_.CachedAttr(InodeId(20)).has_value());
  look("a", File(20));
  names_.Touched(InodeId(20));  // a recall of the inode, or this client's change of it
  EXPECT_FALSE(names_.CachedAttr(InodeId(20)).has_value());
  look("a", File(20));
  names_.Forget(d_);  // a failed change in the directory
  EXPECT_FALSE(names_.CachedAttr(InodeId(20)).has_value());
  look("a", File(20));
  DirNames::Ticket t = names_.Begin(d_);
  names_.Answered(d_, "a", t, nullptr);  // gone at the server
  EXPECT_FALSE(names_.CachedAttr(InodeId(20)).has_value());
  look("a", File(20));
  names_.ForgetAll();
  EXPECT_FALSE(names_.CachedAttr(InodeId(20)).has_value());
  EXPECT_EQ(names_.looked(), 0u);

  // A reply asked before a change of the inode or the directory is not kept.
  t = names_.Begin(d_);
  names_.Touched(InodeId(20));
  Attributes old = File(20);
  names_.Answered(d_, "a", t, &old);
  EXPECT_FALSE(names_.CachedAttr(InodeId(20)).has_value());
  t = names_.Begin(d_);
  names_.Removed(d_, "b");
  names_.Answered(d_, "a", t, &old);
  EXPECT_FALSE(names_.CachedAttr(InodeId(20)).has_value());
  // A listing of the directory takes over: a plus listing keeps it as listed.
  look("a", File(20));
  t = names_.Begin(d_);
  ASSERT_TRUE(names_.InstallListed(d_, t, std::vector<DirNames::Listed>{{"a", InodeId(20), File(20, 1, 9)}}));
  EXPECT_EQ(names_.looked(), 0u);
  ASSERT_TRUE(names_.CachedAttr(InodeId(20)).has_value());
  EXPECT_EQ(names_.CachedAttr(InodeId(20))->size_bytes, 9u);
}

TEST(DirNamesLimitsTest, LookedUpAttributesStayWithinTheirLimit) {
  DirNames::Limits l;
  l.max_looked = 3;
  DirNames names(l);
  names.SetLease(8000ms);
  names.Heard(DirNames::Clock::now());
  for (uint64_t i = 1; i <= 10; ++i) {
    DirNames::Ticket t = names.Begin(InodeId(10));
    Attributes a;
    a.inode = InodeId(100 + i);
    a.mode = S_IFREG | 0644;
    a.nlink = 1;
    names.Answered(InodeId(10), "f" + std::to_string(i), t, &a);
    EXPECT_LE(names.looked(), 3u);
    EXPECT_LE(names.attrs(), 3u);
  }
  EXPECT_TRUE(names.CachedAttr(InodeId(110)).has_value());
}

}  // namespace
}  // namespace aquifer::client

#include "cli/move_progress.h"

#include <gtest/gtest.h>

namespace aquifer::cli {
namespace {

MoveView Task(uint64_t id, const char* state, uint32_t from, uint64_t bytes_done,
              uint64_t bytes_total, uint64_t rate = 0) {
  MoveView m;
  m.id = id;
  m.kind = "repair";
  m.state = state;
  m.from = ServerId(from);
  m.bytes_done = bytes_done;
  m.bytes_total = bytes_total;
  m.chunks_done = bytes_done / 1000;
  m.chunks_total = bytes_total / 1000;
  m.rate_bytes_per_s = rate;
  return m;
}

ClusterView ThreeServers() {
  ClusterView v;
  for (uint32_t i = 1; i <= 3; ++i) {
    ServerView s;
    s.id = ServerId(i);
    s.up = i != 3;  // server 3 is down; its last report stays
    s.state = "in";
    s.pg_positions = 10;
    s.used_bytes = 10'000'000 * i;  // 1, 2, 3 MB a position
    s.chunk_count = 1000 * i;
    v.servers.push_back(s);
  }
  return v;
}

// The bug: a repair's queued tasks report 0/0, so a wait's first lines said "0 B/0 B, eta 0 s"
// for minutes of work. A task with no report is counted at what a position holds on average.
TEST(MoveTallyTest, QueuedTasksAreCountedAtTheAveragePositionFromTheFirstReport) {
  const ClusterView view = ThreeServers();
  MoveView a = Task(1, "running", 3, 500'000, 3'000'000, 1'000'000);
  MoveView b = Task(2, "queued", 3, 0, 0);
  MoveView c = Task(3, "queued", 2, 0, 0);
  MoveTally t;
  t.Update({&a, &b, &c}, &view, 0);
  // The up servers hold 30 MB and 3,000 chunks in 20 positions; down server 3 does not count.
  EXPECT_EQ(t.bytes_total(), 3'000'000u + 2 * 1'500'000u);
  EXPECT_EQ(t.bytes_done(), 500'000u);
  EXPECT_EQ(t.chunks_total(), 3000u + 2 * 150u);
  EXPECT_TRUE(t.estimated());
  // The first report's rate is the running tasks' own, so the ETA is known at once.
  EXPECT_EQ(t.RateBytesPerS(), 1'000'000u);
  EXPECT_EQ(t.EtaMs(), 5'500);
  EXPECT_NE(t.Line().find("/~5.7 MiB"), std::string::npos) << t.Line();
  EXPECT_EQ(t.queued(), 2u);
  EXPECT_EQ(t.running(), 1u);
}

// A down source's last report stays while its positions move away: estimating from it made the
// total climb as the repair went on (35 MiB, then 71, then 79 for 44 moved).
TEST(MoveTallyTest, TheEstimateDoesNotDriftAsADownSourceLosesPositions) {
  ClusterView view = ThreeServers();
  MoveView b = Task(2, "queued", 3, 0, 0);
  MoveTally t;
  t.Update({&b}, &view, 0);
  const uint64_t before = t.bytes_total();
  view.servers[2].pg_positions = 1;  // moved away; its used bytes are as last reported
  t.Update({&b}, &view, 1'000);
  EXPECT_EQ(t.bytes_total(), before);
}

// Fractions of a chunk a position add up: 0.4 chunks a position over 5 tasks is 2, not 0.
TEST(MoveTallyTest, EstimatesAreSummedBeforeRounding) {
  ClusterView view = ThreeServers();
  for (ServerView& s : view.servers) s.chunk_count = 4;  // 8 chunks over 20 up positions
  std::vector<MoveView> tasks;
  for (uint64_t i = 1; i <= 5; ++i) tasks.push_back(Task(i, "queued", 1, 0, 0));
  std::vector<const MoveView*> ptrs;
  for (const MoveView& m : tasks) ptrs.push_back(&m);
  MoveTally t;
  t.Update(ptrs, &view, 0);
  EXPECT_EQ(t.chunks_total(), 2u);
}

// The rate counts from the first poll that saw work: the repair delay before it is not slowness.
TEST(MoveTallyTest, TheRateClockStartsWithTheFirstWork) {
  MoveTally t;
  t.Update({}, nullptr, 0, MovedSoFar{});
  t.Update({}, nullptr, 30'000, MovedSoFar{});  // the repair delay
  MoveView a = Task(1, "running", 1, 0, 0);
  t.Update({&a}, nullptr, 31'000, MovedSoFar{});
  t.Update({}, nullptr, 35'000, MovedSoFar{4'000'000, 4});
  // From the last poll that saw no work (30 s: the work began after it), not from 0.
  EXPECT_EQ(t.RateBytesPerS(), 800'000u);
}

// Bytes a task had moved before the wait began are not this wait's: counting them made the
// first rates far too high.
TEST(MoveTallyTest, RateCountsOnlyBytesMovedSinceTheFirstPoll) {
  const ClusterView view = ThreeServers();
  MoveView a = Task(1, "running", 1, 9'000'000, 10'000'000, 100);
  MoveTally t;
  t.Update({&a}, &view, 1'000);
  a.bytes_done = 9'400'000;
  t.Update({&a}, &view, 5'000);
  EXPECT_EQ(t.RateBytesPerS(), 100'000u);  // 400 kB in 4 s, not 9.4 MB in 4 s
  EXPECT_EQ(t.EtaMs(), 6'000);
}

TEST(MoveTallyTest, ATaskThatLeavesTheListIsFinishedAtItsLastTotal) {
  const ClusterView view = ThreeServers();
  MoveView a = Task(1, "running", 1, 100, 1'000);
  MoveView b = Task(2, "queued", 1, 0, 0);
  MoveTally t;
  t.Update({&a, &b}, &view, 0);
  t.Update({}, &view, 3'000);
  // a counts its reported total; b never reported, so what it did is unknown and counts 0 (not
  // the estimate it was shown at).
  EXPECT_EQ(t.finished(), 2u);
  EXPECT_EQ(t.bytes_done(), 1'000u);
  EXPECT_EQ(t.bytes_total(), 1'000u);
  EXPECT_FALSE(t.estimated());
  EXPECT_EQ(t.EtaMs(), 0);
  EXPECT_DOUBLE_EQ(t.Fraction(), 1.0);
}

// Tasks finish and leave the list between two polls, mostly before any report of theirs was
// seen: what they moved is the growth of the server's counter since the first poll.
TEST(MoveTallyTest, FinishedTasksCountWhatTheServersCounterSaysTheyMoved) {
  const ClusterView view = ThreeServers();
  MoveView a = Task(1, "running", 1, 0, 0);
  MoveView b = Task(2, "queued", 1, 0, 0);
  MoveTally t;
  t.Update({&a, &b}, &view, 0, MovedSoFar{7'000'000, 70});  // earlier repairs: not this wait's
  t.Update({&b}, &view, 1'000, MovedSoFar{7'000'000 + 3'000'000, 73});
  EXPECT_EQ(t.finished(), 1u);
  EXPECT_EQ(t.bytes_done(), 3'000'000u);
  EXPECT_EQ(t.bytes_total(), 3'000'000u + 1'500'000u);  // b is still an estimate
  t.Update({}, &view, 4'000, MovedSoFar{7'000'000 + 4'000'000, 74});
  EXPECT_EQ(t.bytes_done(), 4'000'000u);
  EXPECT_EQ(t.bytes_total(), 4'000'000u);
  EXPECT_EQ(t.chunks_done(), 4u);
  EXPECT_EQ(t.RateBytesPerS(), 1'000'000u);  // 4 MB in the 4 s since the first poll
  EXPECT_NE(t.Line().find("moves 2 done"), std::string::npos) << t.Line();
}

TEST(MoveTallyTest, AMetadataServerRestartKeepsWhatWasCounted) {
  MoveTally t;
  t.Update({}, nullptr, 0, MovedSoFar{5'000, 5});
  t.Update({}, nullptr, 1'000, MovedSoFar{8'000, 8});
  t.Update({}, nullptr, 2'000, MovedSoFar{1'000, 1});  // restarted: counts from 0 again
  EXPECT_EQ(t.bytes_done(), 3'000u + 1'000u);
  EXPECT_EQ(t.chunks_done(), 4u);
}

TEST(MoveTallyTest, NothingKnownGivesAnUnknownEta) {
  MoveView a = Task(1, "queued", 1, 0, 0);
  MoveTally t;
  t.Update({&a}, nullptr, 0);
  EXPECT_EQ(t.bytes_total(), 0u);
  EXPECT_EQ(t.EtaMs(), 0);  // nothing known to be left
  MoveView r = Task(2, "running", 1, 10, 100);
  t.Update({&r}, nullptr, 100);
  EXPECT_EQ(t.EtaMs(), -1);  // bytes left, no rate yet
  EXPECT_NE(t.Line().find("eta ?"), std::string::npos) << t.Line();
}

TEST(ProgressBarTest, FillsInProportionAndClamps) {
  EXPECT_EQ(ProgressBar(0.5, 10), "[#####-----] 50%");
  EXPECT_EQ(ProgressBar(2.0, 4), "[####] 100%");
  EXPECT_EQ(ProgressBar(-1.0, 4), "[----] 0%");
}

}  // namespace
}  // namespace aquifer::cli

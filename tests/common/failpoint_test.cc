#include "common/failpoint.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

namespace aquifer::failpoint {
namespace {

Spec S(std::string name, Action action, uint32_t delay_ms = 0, uint64_t nth = 0) {
  return Spec{std::move(name), action, delay_ms, nth};
}

TEST(FailPointParseTest, ParsesEveryActionAndTheNthHit) {
  struct Row {
    std::string text;
    std::vector<Spec> specs;
    size_t errors;
  };
  const Row rows[] = {
      {"", {}, 0},
      {" , ,", {}, 0},  // empty entries are skipped
      {"a.b:crash", {S("a.b", Action::kCrash)}, 0},
      {"a.b:error", {S("a.b", Action::kError)}, 0},
      {"a.b:delay=250", {S("a.b", Action::kDelay, 250)}, 0},
      {"a.b:delay=0", {S("a.b", Action::kDelay, 0)}, 0},
      {"client.commit.before:crash@3", {S("client.commit.before", Action::kCrash, 0, 3)}, 0},
      {"x:delay=5@2", {S("x", Action::kDelay, 5, 2)}, 0},
      {" x : error @ 7 ", {S("x", Action::kError, 0, 7)}, 0},  // spaces around parts
      {"a:crash,b:error,c:delay=1",
       {S("a", Action::kCrash), S("b", Action::kError), S("c", Action::kDelay, 1)},
       0},
      {"Data_1-x.y:crash", {S("Data_1-x.y", Action::kCrash)}, 0},
      // Malformed entries are reported and skipped; the others still count.
      {"a", {}, 1},                                   // no action
      {":crash", {}, 1},                              // no name
      {"a b:crash", {}, 1},                           // bad character in the name
      {"a:boom", {}, 1},                              // unknown action
      {"a:crash@0", {}, 1},                           // N starts at 1
      {"a:crash@", {}, 1},
      {"a:crash@x", {}, 1},
      {"a:crash@-1", {}, 1},
      {"a:delay=", {}, 1},
      {"a:delay=-5", {}, 1},
      {"a:delay=1.5", {}, 1},
      {"a:delay=3600001", {}, 1},                     // over an hour
      {"a:delay", {}, 1},
      {"a:Crash", {}, 1},                             // actions are lower case
      {"a:crash:error", {}, 1},
      {"a:boom,b:crash,c", {S("b", Action::kCrash)}, 2},
      {std::string(129, 'n') + ":crash", {}, 1},  // name too long
      {std::string(128, 'n') + ":crash", {S(std::string(128, 'n'), Action::kCrash)}, 0},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.text);
    ParsedSpecs got = ParseSpecs(row.text);
    EXPECT_EQ(got.specs, row.specs);
    EXPECT_EQ(got.errors.size(), row.errors);
    for (const std::string& e : got.errors) EXPECT_NE(e.find("bad fail point"), std::string::npos);
  }
}

TEST(FailPointParseTest, ErrorsSayWhatIsWrong) {
  Result<Spec> s = ParseSpec("x:boom");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kInvalidArgument);
  EXPECT_NE(s.status().message().find("unknown action 'boom'"), std::string::npos);
  s = ParseSpec("x:delay=abc");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("delay=MS"), std::string::npos);
}

TEST(FailPointTest, AnUnarmedPointIsOk) {
  EXPECT_TRUE(AQ_FAILPOINT_STATUS("test.never.armed").ok());
  AQ_FAILPOINT("test.never.armed");
  EXPECT_EQ(internal::g_state.load(), internal::kNoneArmed);  // AQ_FAILPOINT is unset in ctest
}

TEST(FailPointTest, ErrorArmingReturnsInternalAndTheGuardDisarms) {
  {
    ScopedFailPoint fp("test.err:error");
    Status s = AQ_FAILPOINT_STATUS("test.err");
    EXPECT_EQ(s.code(), Code::kInternal);
    EXPECT_EQ(s.message(), "fail point test.err");
    EXPECT_TRUE(AQ_FAILPOINT_STATUS("test.other").ok());  // only the armed name fires
    AQ_FAILPOINT("test.err");  // the plain form ignores an error arming
    EXPECT_EQ(fp.hits(), 2u);
  }
  EXPECT_TRUE(AQ_FAILPOINT_STATUS("test.err").ok());
  EXPECT_EQ(internal::g_state.load(), internal::kNoneArmed);
}

TEST(FailPointTest, NthHitFiresOnlyOnce) {
  ScopedFailPoint fp("test.nth:error@3");
  std::vector<bool> failed;
  for (int i = 0; i < 5; ++i) failed.push_back(!AQ_FAILPOINT_STATUS("test.nth").ok());
  EXPECT_EQ(failed, (std::vector<bool>{false, false, true, false, false}));
  EXPECT_EQ(fp.hits(), 5u);
}

TEST(FailPointTest, NestedGuardsRestoreTheOuterArming) {
  ScopedFailPoint outer("test.nest:error");
  {
    ScopedFailPoint inner("test.nest:delay=0");
    EXPECT_TRUE(AQ_FAILPOINT_STATUS("test.nest").ok());
  }
  EXPECT_FALSE(AQ_FAILPOINT_STATUS("test.nest").ok());
}

TEST(FailPointTest, DelaySleepsAtLeastThatLong) {
  ScopedFailPoint fp("test.delay:delay=30");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(AQ_FAILPOINT_STATUS("test.delay").ok());
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(30));
}

TEST(FailPointTest, HitsFromManyThreadsAreCountedExactly) {
  ScopedFailPoint fp("test.threads:error@500");
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 250; ++i) errors += AQ_FAILPOINT_STATUS("test.threads").ok() ? 0 : 1;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 1);
  EXPECT_EQ(fp.hits(), 1000u);
}

TEST(FailPointDeathTest, CrashNamesThePointAndExits86) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ScopedFailPoint fp("test.crash:crash@2");
        AQ_FAILPOINT("test.crash");  // hit 1: nothing
        AQ_FAILPOINT("test.crash");  // hit 2: exits
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(86), "AQ_FAILPOINT: crash at test.crash \\(hit 2\\)");
}

TEST(FailPointDeathTest, TheEnvironmentArmsPointsAndReportsMalformedOnes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // The threadsafe style re-executes the test binary, so the child reads AQ_FAILPOINT at start.
  ASSERT_EQ(::setenv("AQ_FAILPOINT", "test.env:crash,test.bad:boom", 1), 0);
  EXPECT_EXIT(
      {
        EXPECT_TRUE(AQ_FAILPOINT_STATUS("test.unknown.name").ok());
        AQ_FAILPOINT("test.env");
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(86),
      "bad fail point 'test.bad:boom'.*crash at test.env");
  ::unsetenv("AQ_FAILPOINT");
}

}  // namespace
}  // namespace aquifer::failpoint

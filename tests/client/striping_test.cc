// Striping arithmetic: offset -> (stripe, position), the replicated-or-coded rule, PG lookup.
#include "client/striping.h"

#include <gtest/gtest.h>

#include "aquifer/units.h"
#include "client/cluster_map.h"

namespace aquifer::client {
namespace {

Layout L(uint32_t k, uint32_t m, uint32_t unit, uint32_t pg_start = 0, uint32_t pg_count = 8) {
  Layout layout;
  layout.k = k;
  layout.m = m;
  layout.unit_bytes = unit;
  layout.pg_start = pg_start;
  layout.pg_count = pg_count;
  return layout;
}

TEST(StripingTest, MapsOffsetsToStripeAndPosition) {
  struct Row {
    uint64_t offset;
    uint64_t stripe, in_stripe;
    uint32_t position;
    uint64_t in_unit;
  };
  const Layout layout = L(4, 2, 1 * kMiB);  // 4 MiB stripes
  const Row rows[] = {
      {0, 0, 0, 0, 0},
      {1, 0, 1, 0, 1},
      {kMiB - 1, 0, kMiB - 1, 0, kMiB - 1},
      {kMiB, 0, kMiB, 1, 0},
      {3 * kMiB + 5, 0, 3 * kMiB + 5, 3, 5},
      {4 * kMiB - 1, 0, 4 * kMiB - 1, 3, kMiB - 1},
      {4 * kMiB, 1, 0, 0, 0},
      {9 * kMiB + 7, 2, kMiB + 7, 1, 7},
      {(1ull << 40) + 3, (1ull << 40) / (4 * kMiB), 3, 0, 3},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.offset);
    StripeOffset so = LocateStripe(layout, r.offset);
    EXPECT_EQ(so.stripe, r.stripe);
    EXPECT_EQ(so.offset_in_stripe_bytes, r.in_stripe);
    UnitOffset uo = LocateUnit(layout, so.offset_in_stripe_bytes);
    EXPECT_EQ(uo.position, r.position);
    EXPECT_EQ(uo.offset_in_unit_bytes, r.in_unit);
  }
}

TEST(StripingTest, StripeLengthAndReplicatedRuleFollowTheFileSize) {
  struct Row {
    uint64_t size;
    uint64_t stripe;
    uint64_t len;
    bool replicated;  // meaningful when len > 0
  };
  const Layout layout = L(4, 2, 1 * kMiB);
  const Row rows[] = {
      {1, 0, 1, true},
      {4 * kKiB, 0, 4 * kKiB, true},
      {kMiB - 1, 0, kMiB - 1, true},
      {kMiB, 0, kMiB, false},
      {4 * kMiB, 0, 4 * kMiB, false},
      {4 * kMiB, 1, 0, true},
      {4 * kMiB + 10, 1, 10, true},
      {6 * kMiB, 1, 2 * kMiB, false},
      {6 * kMiB, 0, 4 * kMiB, false},
      {6 * kMiB, 2, 0, true},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(testing::Message() << "size=" << r.size << " stripe=" << r.stripe);
    EXPECT_EQ(StripeLength(layout, r.size, r.stripe), r.len);
    if (r.len > 0) {
      EXPECT_EQ(IsReplicated(layout, r.len), r.replicated);
    }
  }
  EXPECT_EQ(StripeCount(layout, 0), 0u);
  EXPECT_EQ(StripeCount(layout, 1), 1u);
  EXPECT_EQ(StripeCount(layout, 4 * kMiB), 1u);
  EXPECT_EQ(StripeCount(layout, 4 * kMiB + 1), 2u);
}

TEST(StripingTest, DataChunksAreClippedToTheStripeLength) {
  const Layout layout = L(4, 2, 1 * kMiB);
  EXPECT_EQ(DataChunkLength(layout, 4 * kMiB, 3), kMiB);
  EXPECT_EQ(DataChunkLength(layout, 2 * kMiB + 5, 0), kMiB);
  EXPECT_EQ(DataChunkLength(layout, 2 * kMiB + 5, 2), 5u);
  EXPECT_EQ(DataChunkLength(layout, 2 * kMiB + 5, 3), 0u);
  EXPECT_EQ(DataChunkLength(layout, kMiB, 1), 0u);
}

TEST(StripingTest, PlacementGroupRotatesFromPgStartOverPgCount) {
  struct Row {
    uint32_t pg_start, pg_count, table;
    uint64_t stripe;
    uint32_t pg;
  };
  const Row rows[] = {
      {0, 8, 8, 0, 0}, {0, 8, 8, 7, 7}, {0, 8, 8, 8, 0},  {3, 8, 8, 0, 3},
      {3, 8, 8, 5, 0}, {3, 8, 8, 6, 1}, {2, 4, 16, 3, 1},  // the table grew since the file
      {5, 0, 7, 4, 2},                                     // legacy layout: the table's size
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(testing::Message() << "start=" << r.pg_start << " stripe=" << r.stripe);
    Result<uint32_t> pg = PgIndexOf(L(4, 2, kMiB, r.pg_start, r.pg_count), r.stripe, r.table);
    ASSERT_TRUE(pg.ok()) << pg.status().ToString();
    EXPECT_EQ(*pg, r.pg);
  }
}

// Regression (issue 22, the 30-minute storm: 4 files called lost, DATA LOST in `aquifer
// status`): a PG table grew (a server came back with no positions) and files created next named
// the new PGs; a reader whose map was a few seconds older folded the index into its smaller
// table, asked another PG's servers, found no copy and reported the stripe lost. A table
// smaller than the layout's pg_count is a map older than the file: an error that makes the
// caller fetch the map again, never another PG.
TEST(StripingTest, AMapOlderThanTheFilesPgCountIsUnavailableNotAnotherPg) {
  EXPECT_EQ(PgIndexOf(L(4, 2, kMiB, 69, 74), 0, 64).status().code(), Code::kUnavailable);
  EXPECT_EQ(PgIndexOf(L(4, 2, kMiB, 5, 8), 0, 4).status().code(), Code::kUnavailable);
  EXPECT_EQ(PgIndexOf(L(4, 2, kMiB, 0, 1), 0, 0).status().code(), Code::kUnavailable);
  ClusterMap map;
  for (uint32_t pg = 0; pg < 64; ++pg) {
    std::vector<ServerId> targets;
    for (uint32_t i = 0; i < 6; ++i) targets.push_back(ServerId(pg * 10 + i + 1));
    map.pg_tables[6].push_back(targets);
  }
  const Layout grown = L(4, 2, kMiB, 36477 % 74, 74);  // ino 36477 of the storm: PG 69
  EXPECT_EQ(map.TargetsOf(grown, 0).status().code(), Code::kUnavailable);
  EXPECT_EQ(map.PlacementOf(grown, 0).status().code(), Code::kUnavailable);
  EXPECT_TRUE(map.TargetsOf(L(4, 2, kMiB, 36477 % 64, 64), 0).ok());
}

TEST(StripingTest, ClusterMapGivesTheTargetsOfAStripe) {
  ClusterMap map;
  for (uint32_t pg = 0; pg < 3; ++pg) {
    std::vector<ServerId> targets;
    for (uint32_t i = 0; i < 6; ++i) targets.push_back(ServerId(pg * 10 + i + 1));
    map.pg_tables[6].push_back(targets);
  }
  Result<std::vector<ServerId>> t = map.TargetsOf(L(4, 2, kMiB, 1, 3), 1);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ((*t)[0], ServerId(21));
  EXPECT_EQ((*t)[5], ServerId(26));
  EXPECT_EQ(map.TargetsOf(L(8, 2, kMiB), 0).status().code(), Code::kUnavailable);
}

TEST(StripingTest, RejectsBadLayouts) {
  EXPECT_TRUE(ValidateLayout(L(4, 2, kMiB)).ok());
  EXPECT_FALSE(ValidateLayout(L(0, 2, kMiB)).ok());
  EXPECT_FALSE(ValidateLayout(L(4, 0, kMiB)).ok());
  EXPECT_FALSE(ValidateLayout(L(4, 2, 0)).ok());
  EXPECT_FALSE(ValidateLayout(L(4, 2, 32 * kMiB)).ok());
  EXPECT_FALSE(ValidateLayout(L(4, 2, kMiB, 0, 0)).ok());
}

}  // namespace
}  // namespace aquifer::client

#include "aquifer/stripe_map.h"

#include <gtest/gtest.h>

namespace aquifer {
namespace {

using E = StripeExtent;

TEST(StripeMapTest, ANewMapKnowsEveryStripeIsAHole) {
  StripeMap map;
  EXPECT_TRUE(map.known());
  StripeRecord r = map.Find(0);
  EXPECT_TRUE(r.known);
  EXPECT_FALSE(r.written);
}

TEST(StripeMapTest, AnUnknownMapSaysNothing) {
  StripeRecord r = StripeMap::Unknown().Find(3);
  EXPECT_FALSE(r.known);
  StripeMap unknown = StripeMap::Unknown();
  unknown.AddWritten(0, 4, 0);
  EXPECT_FALSE(unknown.known());
  EXPECT_TRUE(unknown.extents().empty());
}

TEST(StripeMapTest, AddsMergeNeighboursWithTheSameFloorAndKeepOldFloors) {
  struct Row {
    std::vector<E> before;
    uint64_t begin, end, floor;
    std::vector<E> after;
  };
  const Row rows[] = {
      {{}, 0, 4, 0, {{0, 4, 0}}},
      {{{0, 4, 0}}, 4, 8, 0, {{0, 8, 0}}},                       // appended, merged
      {{{0, 4, 0}}, 4, 8, 9, {{0, 4, 0}, {4, 8, 9}}},            // another floor: kept apart
      {{{0, 4, 0}}, 2, 6, 9, {{0, 4, 0}, {4, 6, 9}}},            // the recorded part keeps 0
      {{{0, 4, 0}}, 6, 8, 0, {{0, 4, 0}, {6, 8, 0}}},            // a hole between
      {{{0, 4, 0}, {6, 8, 0}}, 0, 10, 0, {{0, 10, 0}}},          // fills the hole
      {{{0, 4, 5}, {6, 8, 5}}, 3, 7, 7, {{0, 4, 5}, {4, 6, 7}, {6, 8, 5}}},
      {{{2, 3, 0}}, 0, 1, 0, {{0, 1, 0}, {2, 3, 0}}},            // before the first
      {{{0, 4, 0}}, 1, 1, 0, {{0, 4, 0}}},                       // empty range
  };
  for (const Row& row : rows) {
    Result<StripeMap> map = StripeMap::FromExtents(row.before, true);
    ASSERT_TRUE(map.ok()) << map.status().ToString();
    map->AddWritten(row.begin, row.end, row.floor);
    EXPECT_EQ(map->extents(), row.after) << "add [" << row.begin << "," << row.end << ")";
  }
}

TEST(StripeMapTest, FindGivesTheFloorOfItsExtent) {
  Result<StripeMap> map = StripeMap::FromExtents({{0, 4, 0}, {6, 8, 5}}, true);
  ASSERT_TRUE(map.ok());
  EXPECT_TRUE(map->Find(0).written);
  EXPECT_TRUE(map->Find(3).written);
  EXPECT_FALSE(map->Find(4).written);
  EXPECT_FALSE(map->Find(5).written);
  EXPECT_TRUE(map->Find(6).written);
  EXPECT_EQ(map->Find(7).floor_version, 5u);
  EXPECT_FALSE(map->Find(8).written);
  EXPECT_FALSE(map->Find(UINT64_MAX).written);
}

TEST(StripeMapTest, CutForgetsStripesFromThePoint) {
  Result<StripeMap> map = StripeMap::FromExtents({{0, 4, 0}, {6, 8, 5}}, true);
  ASSERT_TRUE(map.ok());
  EXPECT_TRUE(map->AnyFrom(7));
  map->CutFrom(7);
  EXPECT_EQ(map->extents(), (std::vector<E>{{0, 4, 0}, {6, 7, 5}}));
  map->CutFrom(5);
  EXPECT_EQ(map->extents(), (std::vector<E>{{0, 4, 0}}));
  EXPECT_FALSE(map->AnyFrom(4));
  map->CutFrom(0);
  EXPECT_TRUE(map->extents().empty());
  EXPECT_TRUE(map->known());
}

TEST(StripeMapTest, WithinClipsExtents) {
  Result<StripeMap> map = StripeMap::FromExtents({{0, 4, 0}, {6, 8, 5}}, true);
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(map->Within(2, 7), (std::vector<E>{{2, 4, 0}, {6, 7, 5}}));
  EXPECT_TRUE(map->Within(4, 6).empty());
}

TEST(StripeMapTest, BadExtentsAreRefused) {
  EXPECT_FALSE(StripeMap::FromExtents({{3, 3, 0}}, true).ok());              // empty
  EXPECT_FALSE(StripeMap::FromExtents({{4, 3, 0}}, true).ok());              // reversed
  EXPECT_FALSE(StripeMap::FromExtents({{0, 4, 0}, {3, 5, 0}}, true).ok());   // overlap
  EXPECT_FALSE(StripeMap::FromExtents({{6, 8, 0}, {0, 4, 0}}, true).ok());   // order
  EXPECT_FALSE(StripeMap::FromExtents({{0, 4, 0}}, false).ok());             // unknown with data
  std::vector<E> many;
  for (uint64_t i = 0; i <= StripeMap::kMaxExtents; ++i) many.push_back({2 * i, 2 * i + 1, 0});
  EXPECT_FALSE(StripeMap::FromExtents(many, true).ok());
}

TEST(StripeMapTest, TooManyExtentsMakeTheMapUnknown) {
  StripeMap map;
  for (uint64_t i = 0; i < StripeMap::kMaxExtents; ++i) map.AddWritten(2 * i, 2 * i + 1, 0);
  EXPECT_TRUE(map.known());
  EXPECT_EQ(map.extents().size(), StripeMap::kMaxExtents);
  map.AddWritten(2 * StripeMap::kMaxExtents, 2 * StripeMap::kMaxExtents + 1, 0);
  EXPECT_FALSE(map.known());
  EXPECT_FALSE(map.Find(0).known);
}

}  // namespace
}  // namespace aquifer

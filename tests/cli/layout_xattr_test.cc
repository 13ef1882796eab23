#include "cli/layout_xattr.h"

#include <gtest/gtest.h>

namespace aquifer::cli {
namespace {

TEST(LayoutSpecTest, ParsesSeparateTokens) {
  Result<LayoutSpec> s = ParseLayoutSpec({"k=4", "m=2", "unit=1048576"});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(*s->k, 4u);
  EXPECT_EQ(*s->m, 2u);
  EXPECT_EQ(*s->unit_bytes, 1048576u);
  EXPECT_EQ(FormatLayout(*s), "k=4 m=2 unit=1048576");
}

TEST(LayoutSpecTest, ParsesOneStringWithSpacesOrCommasAndSizeSuffixes) {
  Result<LayoutSpec> s = ParseLayoutSpec({"k=8,m=3 unit=64K"});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(FormatLayout(*s), "k=8 m=3 unit=65536");
  EXPECT_EQ(*ParseLayoutSpec({"unit=4M"})->unit_bytes, 4u * 1048576u);
}

TEST(LayoutSpecTest, AllowsAPartialSpecAndCompletesItFromTheCurrentLayout) {
  Result<LayoutSpec> s = ParseLayoutSpec({"m=1"});
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->k.has_value());
  LayoutSpec base = *ParseLayoutSpec({"k=4 m=2 unit=1M"});
  Result<LayoutSpec> full = CompleteLayout(*s, base);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(FormatLayout(*full), "k=4 m=1 unit=1048576");
  Result<LayoutSpec> none = CompleteLayout(*s, std::nullopt);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Code::kInvalidArgument);
}

TEST(LayoutSpecTest, RejectsBadTokens) {
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {},                    // nothing
           {"k4"},                // no '='
           {"k="},                // no value
           {"k=0"},               // k out of range
           {"k=17"},              // past the erasure codec's range
           {"m=5"},
           {"m=0"},               // no redundancy
           {"k=4", "m=0"},
           {"k=x"},
           {"unit=1000"},         // not a multiple of 4096
           {"unit=32M"},          // over 16 MiB
           {"unit=M"},
           {"k=4", "k=5"},        // repeated
           {"q=1"},               // unknown key
           {"k=99999999999999999999999"}}) {
    Result<LayoutSpec> s = ParseLayoutSpec(bad);
    EXPECT_FALSE(s.ok()) << ::testing::PrintToString(bad);
    if (!s.ok()) {
      EXPECT_EQ(s.status().code(), Code::kInvalidArgument);
    }
  }
}

TEST(LayoutXattrTest, GetOnAPathThatDoesNotExistIsNotFound) {
  Result<std::optional<std::string>> r = GetLayoutXattr("/nonexistent/aquifer/path");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
}

TEST(PlacementTest, ParsesTheThreeKeysAndRefusesBadText) {
  Result<FilePlacement> p = ParsePlacement("pg_width=6 pg_start=17 pg_count=64");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->pg_width, 6u);
  EXPECT_EQ(p->pg_start, 17u);
  EXPECT_EQ(p->pg_count, 64u);
  EXPECT_TRUE(ParsePlacement("pg_count=64 pg_width=6 pg_start=0 later=1").ok());
  for (const char* bad : {"", "pg_width=6 pg_start=17", "pg_width=6 pg_start=x pg_count=64",
                          "pg_width=6 pg_start=64 pg_count=64", "pg_width=6 pg_start=0 pg_count=0",
                          "pg_width=6 pg_start=1 pg_count=9999999999", "pg_width pg_start pg_count",
                          "pg_width=6 pg_start=-1 pg_count=4"}) {
    EXPECT_EQ(ParsePlacement(bad).status().code(), Code::kInvalidArgument) << bad;
  }
}

ClusterView TwoPgs() {
  ClusterView v;
  for (uint32_t i = 1; i <= 6; ++i) {
    ServerView s;
    s.id = ServerId(i);
    s.failure_domain = "ds" + std::to_string(i);
    v.servers.push_back(s);
  }
  v.pgs.push_back(PgView{3, {9, 9, 9}});  // another width: not this file's table
  v.pgs.push_back(PgView{6, {1, 2, 3, 4, 5, 6}});
  v.pgs.push_back(PgView{6, {6, 5, 4, 3, 2, 1}});
  return v;
}

TEST(PlacementTest, SaysWhichStripesAreCopiesAndWhichErasureCodedAndWhere) {
  const ClusterView view = TwoPgs();
  const LayoutSpec layout{4, 2, 1048576};
  // 4 MiB stripes: stripe 0 whole, stripe 1 holds 1.5 MiB (coded), stripe 2 ... none. A 4.5 MiB
  // file: stripe 1 holds 0.5 MiB, under one unit: copies.
  const std::string coded = DescribePlacement(5'767'168, layout, {6, 1, 2}, &view);
  EXPECT_NE(coded.find("5.5 MiB in 2 stripes of up to 4.0 MiB (PG width 6, first PG 1 of 2)"),
            std::string::npos)
      << coded;
  EXPECT_NE(coded.find("stripe 0 (PG 6/1): erasure coded 4+2, 4.0 MiB in chunks of 1.0 MiB on "
                       "6(ds6) 5(ds5) 4(ds4) 3(ds3) 2(ds2) 1(ds1) (data, then parity)"),
            std::string::npos)
      << coded;
  EXPECT_NE(coded.find("stripe 1 (PG 6/0): erasure coded 4+2, 1.5 MiB"), std::string::npos)
      << coded;
  const std::string tail = DescribePlacement(4'718'592, layout, {6, 1, 2}, &view);
  EXPECT_NE(tail.find("stripe 1 (PG 6/0): 3 copies of 512.0 KiB on 1(ds1) 2(ds2) 3(ds3)\n"),
            std::string::npos)
      << tail;
  EXPECT_EQ(DescribePlacement(0, layout, {6, 0, 2}, &view), "  empty: no chunks\n");
  const std::string no_view = DescribePlacement(10, layout, {6, 0, 2}, nullptr);
  EXPECT_NE(no_view.find("3 copies of 10 B on (PG table not available)"), std::string::npos)
      << no_view;
}

TEST(PlacementTest, ListsAtMostTheGivenNumberOfStripes) {
  const ClusterView view = TwoPgs();
  const std::string text =
      DescribePlacement(uint64_t{40} << 20, LayoutSpec{4, 2, 1048576}, {6, 0, 2}, &view, 3);
  EXPECT_NE(text.find("stripe 2 "), std::string::npos) << text;
  EXPECT_EQ(text.find("stripe 3 "), std::string::npos) << text;
  EXPECT_NE(text.find("... 7 more stripes"), std::string::npos) << text;
}

}  // namespace
}  // namespace aquifer::cli

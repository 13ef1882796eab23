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

}  // namespace
}  // namespace aquifer::cli

// Printable (common/printable.h): what an operator's terminal receives for an untrusted string.
#include "common/printable.h"

#include <gtest/gtest.h>

#include <string>

namespace aquifer {
namespace {

TEST(PrintableTest, ControlBytesBackslashesAndNonAsciiAreShownAsHexEscapes) {
  struct Row {
    std::string in;
    std::string out;
  } rows[] = {
      {"", ""},
      {"plain name.txt", "plain name.txt"},
      {"a\x1b[2Jb\nc", "a\\x1b[2Jb\\x0ac"},
      {"cr\rlf\n", "cr\\x0dlf\\x0a"},
      {"bell\x07 tab\t del\x7f", "bell\\x07 tab\\x09 del\\x7f"},
      {std::string("nul\0x", 5), "nul\\x00x"},
      {"back\\slash", "back\\x5cslash"},  // so an escape in the input cannot pose as ours
      {"caf\xc3\xa9", "caf\\xc3\\xa9"},
      {"\x9b" "31m", "\\x9b31m"},  // the 8-bit CSI
      {"~ !\"#$%&'()*+,-./:;<=>?@[]^_`{|}", "~ !\"#$%&'()*+,-./:;<=>?@[]^_`{|}"},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(Printable(row.in), row.out) << "input of " << row.in.size() << " bytes";
    const std::string out = Printable(row.in);
    for (char c : out) {
      EXPECT_TRUE(c >= 0x20 && c < 0x7f) << "byte " << int(static_cast<unsigned char>(c));
    }
  }
}

TEST(PrintableTest, LongTextIsCutAtTheLimitWithAnEllipsisAndEscapesAreNeverSplit) {
  EXPECT_EQ(Printable(std::string(300, 'a')), std::string(200, 'a') + "...");
  EXPECT_EQ(Printable(std::string(10, 'a'), 4), "aaaa...");
  EXPECT_EQ(Printable(std::string(200, 'a')), std::string(200, 'a'));
  EXPECT_EQ(Printable(std::string(300, 'a'), SIZE_MAX), std::string(300, 'a'));
  // An escape that starts before the limit is written whole.
  EXPECT_EQ(Printable("abc\x1b" "def", 4), "abc\\x1b...");
}

}  // namespace
}  // namespace aquifer

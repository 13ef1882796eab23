// ConfigFileOptions: TOML keys applied to options registered once as flags, the command line
// winning; every error a config file can cause.
#include "common/config_file.h"

#include <CLI/CLI.hpp>
#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "testing/test_util.h"

namespace aquifer {
namespace {

struct Options {
  std::string listen = "127.0.0.1:0";
  uint32_t io_depth = 32;
  uint64_t capacity_bytes = 0;
  bool tls = false;
  std::string config;
};

// Registers Options as a daemon would and parses `args` (then the file --config names).
Status Parse(const std::vector<std::string>& args, Options* o, std::string* help_out) {
  CLI::App app("config_file_test");
  ConfigFileOptions options(app);
  options.Add("--listen", &o->listen, "HOST:PORT");
  options.AddConfigFileFlag("--config", &o->config, "TOML file");
  options.Add("--io-depth", &o->io_depth, "io_uring entries per I/O thread");
  options.Add("--capacity-bytes", &o->capacity_bytes, "bytes");
  options.Add("--tls", &o->tls, "a switch");
  app.set_version_flag("--version", "config_file_test 1.2.3");
  std::vector<const char*> argv = {"config_file_test"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  return options.Parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data()), help_out);
}

TEST(ConfigFileOptionsTest, AppliesKeysWithTheCommandLineWinningAndRejectsBadFiles) {
  struct Row {
    std::string name;
    std::optional<std::string> toml;  // nullopt: --config names a file that does not exist
    std::vector<std::string> flags;   // besides --config
    Code code;
    std::string message;  // a part of the error message ("" when OK)
    Options want;         // checked when OK (config not compared)
  };
  const std::vector<Row> rows = {
      {"no file: defaults", "", {}, Code::kOk, "", {}},
      {"every type from the file",
       "listen = \"10.0.0.1:7000\"\nio-depth = 64\ncapacity-bytes = 5000000000\n",
       {}, Code::kOk, "", {.listen = "10.0.0.1:7000", .io_depth = 64,
                           .capacity_bytes = 5000000000}},
      {"underscore spelling", "io_depth = 8\ncapacity_bytes = 4096\n", {}, Code::kOk, "",
       {.io_depth = 8, .capacity_bytes = 4096}},
      {"flag overrides file", "listen = \"file:1\"\nio-depth = 3\n", {"--io-depth", "9"},
       Code::kOk, "", {.listen = "file:1", .io_depth = 9}},
      {"flag overrides a file value that would not fit", "io-depth = \"many\"\n",
       {"--io-depth", "5"}, Code::kOk, "", {.io_depth = 5}},
      {"uint32 upper bound fits", "io-depth = 4294967295\n", {}, Code::kOk, "",
       {.io_depth = 4294967295u}},
      {"a switch from the file", "tls = true\n", {}, Code::kOk, "", {.tls = true}},
      {"a switch off in the file", "tls = false\n", {}, Code::kOk, "", {.tls = false}},
      {"a switch on the command line wins", "tls = false\n", {"--tls"}, Code::kOk, "",
       {.tls = true}},
      {"a switch takes a boolean only", "tls = 1\n", {}, Code::kInvalidArgument,
       ": bad value for tls", {}},
      {"a switch takes no string", "tls = \"yes\"\n", {}, Code::kInvalidArgument,
       ": bad value for tls", {}},
      {"missing file", std::nullopt, {}, Code::kInvalidArgument, "config ", {}},
      {"not TOML", "listen = \n", {}, Code::kInvalidArgument, "config ", {}},
      {"unknown key", "nope = 1\n", {}, Code::kInvalidArgument, ": unknown key nope", {}},
      {"unknown key, underscore spelling", "no_such = 1\n", {}, Code::kInvalidArgument,
       ": unknown key no-such", {}},
      {"config is a flag, not a key", "config = \"x.toml\"\n", {}, Code::kInvalidArgument,
       ": unknown key config", {}},
      {"unknown key even when a flag has that name given", "nope = 1\n", {"--io-depth", "2"},
       Code::kInvalidArgument, ": unknown key nope", {}},
      {"string where an integer belongs", "io-depth = \"8\"\n", {}, Code::kInvalidArgument,
       ": bad value for io-depth", {}},
      {"integer where a string belongs", "listen = 5\n", {}, Code::kInvalidArgument,
       ": bad value for listen", {}},
      {"float where an integer belongs", "capacity-bytes = 1.5\n", {}, Code::kInvalidArgument,
       ": bad value for capacity-bytes", {}},
      {"uint32 too large", "io-depth = 4294967296\n", {}, Code::kInvalidArgument,
       ": bad value for io-depth", {}},
      {"negative uint64", "capacity_bytes = -1\n", {}, Code::kInvalidArgument,
       ": bad value for capacity-bytes", {}},
  };
  testing::ScratchDir scratch("aquifer_config_file_test");
  ASSERT_TRUE(scratch.ok());
  int n = 0;
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    const std::string path = scratch.path() + "/c" + std::to_string(n++) + ".toml";
    if (row.toml) std::ofstream(path) << *row.toml;
    std::vector<std::string> args = row.flags;
    args.insert(args.end(), {"--config", path});
    Options o;
    std::string help = "stale";
    const Status s = Parse(args, &o, &help);
    EXPECT_EQ(help, "");
    EXPECT_EQ(s.code(), row.code) << s.ToString();
    if (!row.message.empty()) {
      EXPECT_NE(s.message().find("config " + path), std::string::npos) << s.message();
      EXPECT_NE(s.message().find(row.message), std::string::npos) << s.message();
    }
    if (s.ok()) {
      EXPECT_EQ(o.listen, row.want.listen);
      EXPECT_EQ(o.io_depth, row.want.io_depth);
      EXPECT_EQ(o.capacity_bytes, row.want.capacity_bytes);
      EXPECT_EQ(o.tls, row.want.tls);
    }
  }
}

TEST(ConfigFileOptionsTest, HelpAndVersionFillHelpOutAndApplyNoFile) {
  testing::ScratchDir scratch("aquifer_config_file_test");
  ASSERT_TRUE(scratch.ok());
  const std::string bad = scratch.path() + "/bad.toml";
  std::ofstream(bad) << "nope = 1\n";  // would fail if it were applied
  Options o;
  std::string help;
  ASSERT_TRUE(Parse({"--config", bad, "--help"}, &o, &help).ok());
  EXPECT_NE(help.find("--io-depth"), std::string::npos) << help;
  EXPECT_NE(help.find("io_uring entries per I/O thread"), std::string::npos) << help;
  ASSERT_TRUE(Parse({"--config", bad, "--version"}, &o, &help).ok());
  EXPECT_EQ(help, "config_file_test 1.2.3\n");
}

TEST(ConfigFileOptionsTest, BadFlagsAreInvalidArgumentsAndFlagsSetFieldsWithoutAFile) {
  Options o;
  std::string help;
  ASSERT_TRUE(Parse({"--io-depth", "12", "--listen", "h:2"}, &o, &help).ok());
  EXPECT_EQ(o.io_depth, 12u);
  EXPECT_EQ(o.listen, "h:2");
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--no-such-flag", "1"}, {"--io-depth", "lots"}, {"--io-depth"}}) {
    const Status s = Parse(args, &o, &help);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << args[0];
    EXPECT_EQ(s.message().rfind("bad command line: ", 0), 0u) << s.message();
  }
}

}  // namespace
}  // namespace aquifer

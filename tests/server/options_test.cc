// aquifer-data's options: every key of a config file reaches its field, flags win over the file,
// and the file's errors come back as kInvalidArgument.
#include "server/options.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "testing/test_util.h"

namespace aquifer::server {
namespace {

Result<DataServerOptions> Parse(std::vector<std::string> args, std::string* help) {
  args.insert(args.begin(), "aquifer-data");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return ParseDataServerOptions(static_cast<int>(argv.size()), argv.data(), help);
}

TEST(DataServerOptionsTest, ConfigFileFillsEveryOptionAndFlagsWin) {
  testing::ScratchDir scratch("aquifer_data_options_test");
  ASSERT_TRUE(scratch.ok());
  const std::string path = scratch.path() + "/data.toml";
  std::ofstream(path) << "listen = \"127.0.0.1:7001\"\ndir = \"/srv/a\"\nmeta = \"m:1\"\n"
                         "failure_domain = \"rack-9\"\ncapacity-bytes = 5000000000\n"
                         "port-file = \"/run/p\"\nlog-level = \"debug\"\nio-depth = 64\n"
                         "heartbeat-interval-ms = 11\nregister-retry-ms = 12\n"
                         "meta-rpc-timeout-ms = 13\nblock-bytes = 8192\nscrub-rate-mib = 14\n"
                         "scrub-interval-s = 15\nbackfill-delay-ms = 16\n"
                         "superseded-grace-ms = 17\ngc-tombstone-ms = 18\n";
  std::string help;
  auto o = Parse({"--config", path, "--io-depth", "8", "--dir", "/srv/b"}, &help);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(help, "");
  EXPECT_EQ(o->listen, "127.0.0.1:7001");
  EXPECT_EQ(o->dir, "/srv/b");  // the flag
  EXPECT_EQ(o->meta, "m:1");
  EXPECT_EQ(o->failure_domain, "rack-9");
  EXPECT_EQ(o->capacity_bytes, 5000000000u);
  EXPECT_EQ(o->port_file, "/run/p");
  EXPECT_EQ(o->log_level, "debug");
  EXPECT_EQ(o->io_depth, 8u);  // the flag
  EXPECT_EQ(o->heartbeat_interval_ms, 11u);
  EXPECT_EQ(o->register_retry_ms, 12u);
  EXPECT_EQ(o->meta_rpc_timeout_ms, 13u);
  EXPECT_EQ(o->block_bytes, 8192u);
  EXPECT_EQ(o->scrub_rate_mib, 14u);
  EXPECT_EQ(o->scrub_interval_s, 15u);
  EXPECT_EQ(o->backfill_delay_ms, 16u);
  EXPECT_EQ(o->superseded_grace_ms, 17u);
  EXPECT_EQ(o->gc_tombstone_ms, 18u);
}

TEST(DataServerOptionsTest, BadConfigFilesAndFlagsAreInvalidArguments) {
  testing::ScratchDir scratch("aquifer_data_options_test");
  ASSERT_TRUE(scratch.ok());
  const std::string unknown = scratch.path() + "/unknown.toml";
  std::ofstream(unknown) << "config = \"other.toml\"\n";
  const std::string wrong = scratch.path() + "/wrong.toml";
  std::ofstream(wrong) << "io-depth = \"deep\"\n";
  std::string help;
  const struct {
    std::vector<std::string> args;
    std::string message;  // a part of the error message
  } rows[] = {
      {{"--config", unknown}, ": unknown key config"},
      {{"--config", wrong}, ": bad value for io-depth"},
      {{"--config", scratch.path() + "/missing.toml"}, "config " + scratch.path()},
      {{"--no-such-flag"}, "bad command line: "},
      {{"--superseded-grace-ms", "600001"}, "superseded-grace-ms must be in 0..600000"},
      {{"--gc-tombstone-ms", "3600001"}, "gc-tombstone-ms must be in 0..3600000"},
      // The listen address is what the server registers: a wildcard would send clients and
      // peers to their own host.
      {{"--listen", "0.0.0.0:7500"}, "not a wildcard"},
      {{"--listen", "[::]:7500"}, "not a wildcard"},
      {{"--http-listen", "127.0.0.1:70000"}, "the port must be a number in 0..65535"},
      {{"--http-listen", "nohost"}, "is not HOST:PORT"},
  };
  for (const auto& row : rows) {
    std::vector<std::string> args = {"--dir", "/srv/a", "--meta", "m:1"};
    args.insert(args.end(), row.args.begin(), row.args.end());
    auto o = Parse(args, &help);
    ASSERT_FALSE(o.ok()) << row.message;
    EXPECT_EQ(o.status().code(), Code::kInvalidArgument) << o.status().ToString();
    EXPECT_NE(o.status().message().find(row.message), std::string::npos) << o.status().ToString();
  }
  // --help returns default options and the help text, without needing --dir or --meta.
  auto o = Parse({"--help"}, &help);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_NE(help.find("--backfill-delay-ms"), std::string::npos);
}

}  // namespace
}  // namespace aquifer::server

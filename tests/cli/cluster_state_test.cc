#include "cli/cluster_state.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace aquifer::cli {
namespace {

ClusterState SampleState() {
  ClusterState s;
  s.root = "/tmp/aquifer-x";
  s.k = 4;
  s.m = 2;
  s.unit_bytes = 1048576;
  s.meta = {.pid = 100, .address = "127.0.0.1:40001", .db = "/tmp/aquifer-x/meta/db",
            .log = "/tmp/aquifer-x/logs/meta.log"};
  for (int i = 1; i <= 3; ++i) {
    DataServerRecord d;
    d.index = i;
    d.failure_domain = "ds" + std::to_string(i);
    d.dir = "/tmp/aquifer-x/data/ds" + std::to_string(i);
    d.pid = 200 + i;
    d.address = "127.0.0.1:" + std::to_string(40010 + i);
    d.capacity_bytes = 1ull << 40;
    d.log = "/tmp/aquifer-x/logs/ds" + std::to_string(i) + ".log";
    s.data_servers.push_back(d);
  }
  s.mount = {.dir = "/tmp/aquifer-x/mnt", .pid = 300, .log = "/tmp/aquifer-x/logs/mount.log"};
  return s;
}

// Replaces the first occurrence of `from` in the serialized sample with `to`.
std::string SampleWith(const std::string& from, const std::string& to) {
  std::string text = SerializeClusterState(SampleState());
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

void ExpectInvalid(const std::string& text, const std::string& needle) {
  Result<ClusterState> r = ParseClusterState(text);
  ASSERT_FALSE(r.ok()) << "accepted: " << text;
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
}

TEST(ClusterStateTest, SerializeThenParseGivesTheSameState) {
  ClusterState s = SampleState();
  Result<ClusterState> back = ParseClusterState(SerializeClusterState(s));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(*back == s);
}

TEST(ClusterStateTest, AcceptsANeverStartedClusterWithEmptyAddressesAndNoMount) {
  Result<ClusterState> r = ParseClusterState(R"({"version": 1, "root": "/r",
      "meta": {"db": "/r/meta/db"},
      "data_servers": [{"index": 1, "failure_domain": "ds1", "dir": "/r/data/ds1"}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->meta.pid, 0);
  EXPECT_TRUE(r->meta.address.empty());
  EXPECT_EQ(r->data_servers.size(), 1u);
  EXPECT_TRUE(r->mount.dir.empty());
  EXPECT_EQ(r->k, 4u);
}

TEST(ClusterStateTest, KeepsTheTlsFlagAndReadsItsAbsenceAsOff) {
  ClusterState s = SampleState();
  EXPECT_EQ(SerializeClusterState(s).find("\"tls\""), std::string::npos);
  s.tls = true;
  const std::string text = SerializeClusterState(s);
  EXPECT_NE(text.find("\"tls\": true"), std::string::npos) << text;
  Result<ClusterState> back = ParseClusterState(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->tls);
  EXPECT_TRUE(*back == s);
  Result<ClusterState> old = ParseClusterState(SerializeClusterState(SampleState()));
  ASSERT_TRUE(old.ok());
  EXPECT_FALSE(old->tls);
  const std::string on = "\"tls\": true";
  std::string bad = text;
  bad.replace(bad.find(on), on.size(), "\"tls\": \"yes\"");
  ExpectInvalid(bad, "tls: expected true or false");
}

TEST(ClusterStateTest, RejectsTextThatIsNotJson) {
  ExpectInvalid("{\"version\": 1,", "not valid JSON");
  ExpectInvalid("", "not valid JSON");
  ExpectInvalid("[1, 2]", "expected a JSON object");
}

TEST(ClusterStateTest, RejectsAnotherVersion) {
  ExpectInvalid(SampleWith("\"version\": 1", "\"version\": 2"), "unsupported version 2");
  ExpectInvalid(SampleWith("\"version\": 1", "\"version\": \"1\""), "version: expected an integer");
}

TEST(ClusterStateTest, RejectsNegativeOrNonIntegerPids) {
  ExpectInvalid(SampleWith("\"pid\": 201", "\"pid\": -5"), "data_servers[0].pid");
  ExpectInvalid(SampleWith("\"pid\": 100", "\"pid\": 1.5"), "meta.pid: expected an integer");
  ExpectInvalid(SampleWith("\"pid\": 300", "\"pid\": \"300\""), "mount.pid");
}

TEST(ClusterStateTest, RejectsBadAddresses) {
  ExpectInvalid(SampleWith("127.0.0.1:40001", "127.0.0.1"), "meta.address");
  ExpectInvalid(SampleWith("127.0.0.1:40012", "127.0.0.1:99999"), "data_servers[1].address");
  ExpectInvalid(SampleWith("127.0.0.1:40013", "127.0.0.1:4x"), "data_servers[2].address");
}

TEST(ClusterStateTest, RejectsDuplicateIndexesAndRelativeDirectories) {
  ExpectInvalid(SampleWith("\"index\": 2", "\"index\": 1"), "duplicate index 1");
  ExpectInvalid(SampleWith("\"/tmp/aquifer-x/data/ds3\"", "\"data/ds3\""),
                "data_servers[2].dir: expected an absolute path");
  ExpectInvalid(SampleWith("\"index\": 3", "\"index\": 0"), "data_servers[2].index");
}

TEST(ClusterStateTest, RejectsMissingOrMistypedSections) {
  ExpectInvalid(R"({"version": 1, "root": "/r", "data_servers": []})", "meta");
  ExpectInvalid(R"({"version": 1, "root": "/r", "meta": {"db": "/r/db"}})", "data_servers");
  ExpectInvalid(R"({"version": 1, "meta": {"db": "/r/db"}, "data_servers": []})", "root");
  ExpectInvalid(SampleWith("\"k\": 4", "\"k\": 0"), "k: out of range");
  ExpectInvalid(SampleWith("\"failure_domain\": \"ds1\"", "\"failure_domain\": 7"),
                "failure_domain: expected a string");
}

TEST(ClusterStateTest, PortOfReadsTheLastColonSeparatedField) {
  EXPECT_EQ(*PortOf("127.0.0.1:8080"), 8080);
  EXPECT_EQ(*PortOf("[::1]:9"), 9);
  EXPECT_FALSE(PortOf("127.0.0.1:0").ok());
  EXPECT_FALSE(PortOf(":80").ok());
  EXPECT_FALSE(PortOf("host:").ok());
  EXPECT_FALSE(PortOf("host").ok());
}

class ClusterStateFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/aquifer-cli-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(ClusterStateFileTest, SaveThenLoadRoundTrips) {
  const std::string path = dir_ + "/cluster.json";
  ASSERT_TRUE(SaveClusterState(path, SampleState()).ok());
  Result<ClusterState> back = LoadClusterState(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(*back == SampleState());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST_F(ClusterStateFileTest, LoadOfAMissingFileIsNotFound) {
  Result<ClusterState> r = LoadClusterState(dir_ + "/cluster.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
}

TEST_F(ClusterStateFileTest, LoadOfATruncatedFileNamesThePath) {
  const std::string path = dir_ + "/cluster.json";
  std::string text = SerializeClusterState(SampleState());
  std::ofstream(path) << text.substr(0, text.size() / 2);
  Result<ClusterState> r = LoadClusterState(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace aquifer::cli

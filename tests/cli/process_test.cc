#include "cli/process.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace aquifer::cli {
namespace {

class ProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/aquifer-cli-proc-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (pid_t p : started_) (void)StopProcess(p, "sleep", std::chrono::milliseconds(100));
    std::filesystem::remove_all(dir_);
  }
  std::string dir_;
  std::vector<pid_t> started_;
};

TEST_F(ProcessTest, SpawnedDaemonIsAliveUntilStoppedWithSigterm) {
  Result<pid_t> pid = SpawnDetached({"/bin/sleep", "600"}, dir_ + "/sleep.log");
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  started_.push_back(*pid);
  EXPECT_TRUE(IsProcessAlive(*pid, "sleep"));
  EXPECT_FALSE(IsProcessAlive(*pid, "aquifer-data"));  // a recycled pid is not our daemon
  Result<bool> killed = StopProcess(*pid, "sleep", std::chrono::seconds(5));
  ASSERT_TRUE(killed.ok());
  EXPECT_FALSE(*killed);  // SIGTERM sufficed
  EXPECT_FALSE(IsProcessAlive(*pid, "sleep"));
}

TEST_F(ProcessTest, WaitForPortFileFailsFastWhenTheDaemonExits) {
  Result<pid_t> pid = SpawnDetached({"/bin/sleep", "0"}, dir_ + "/sleep.log");
  ASSERT_TRUE(pid.ok());
  Result<std::string> addr =
      WaitForPortFile(dir_ + "/never.port", *pid, "sleep", std::chrono::seconds(30));
  ASSERT_FALSE(addr.ok());
  EXPECT_EQ(addr.status().code(), Code::kUnavailable);
  EXPECT_NE(addr.status().message().find("exited before serving"), std::string::npos);
}

TEST_F(ProcessTest, WaitForPortFileReturnsTheAddressOnceWritten) {
  Result<pid_t> pid = SpawnDetached({"/bin/sleep", "600"}, dir_ + "/sleep.log");
  ASSERT_TRUE(pid.ok());
  started_.push_back(*pid);
  std::ofstream(dir_ + "/d.port") << "127.0.0.1:4242\n";
  Result<std::string> addr =
      WaitForPortFile(dir_ + "/d.port", *pid, "sleep", std::chrono::seconds(5));
  ASSERT_TRUE(addr.ok()) << addr.status().ToString();
  EXPECT_EQ(*addr, "127.0.0.1:4242");
}

TEST_F(ProcessTest, ExecFailureIsReportedAndWrittenToTheLog) {
  Result<pid_t> pid = SpawnDetached({dir_ + "/no-such-binary"}, dir_ + "/x.log");
  ASSERT_FALSE(pid.ok());
  EXPECT_EQ(pid.status().code(), Code::kNotFound);
  EXPECT_NE(pid.status().message().find("cannot exec"), std::string::npos);
  EXPECT_NE(TailOfFile(dir_ + "/x.log", 5).find("cannot exec"), std::string::npos);
}

TEST_F(ProcessTest, FindBinaryLooksInBinDirAndItsBuildTree) {
  std::filesystem::create_directories(dir_ + "/src/server");
  std::string exe = dir_ + "/src/server/aquifer-data";
  std::ofstream(exe) << "#!/bin/sh\n";
  std::filesystem::permissions(exe, std::filesystem::perms::owner_all);
  Result<std::string> found = FindBinary("aquifer-data", dir_);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(*found, exe);
  Result<std::string> missing = FindBinary("aquifer-meta", dir_);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_NE(missing.status().message().find("--bin-dir"), std::string::npos);
}

TEST_F(ProcessTest, MountTypeIsEmptyWhereNothingIsMounted) {
  EXPECT_EQ(MountTypeAt(dir_), "");
  EXPECT_NE(MountTypeAt("/proc"), "");
}

// `status --meta ADDR` lists the mounts of that cluster only: an Aquifer mount's source is
// "aquifer:HOST:PORT" (aquifer-mount's fsname).
TEST(MountInfoTest, AquiferMountsOfACluster) {
  std::istringstream text(
      "22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n"
      "41 26 0:38 / /tmp/a/mnt rw,nosuid,nodev,relatime - fuse.aquifer aquifer:127.0.0.1:37095 "
      "rw,user_id=0,group_id=0\n"
      "42 26 0:39 / /tmp/b\\040x/mnt rw,relatime shared:5 - fuse.aquifer aquifer:127.0.0.1:41000 "
      "rw,user_id=0\n"
      "43 26 0:40 / /tmp/c rw,relatime - fuse.sshfs me@host:/data rw\n"
      "garbage\n");
  std::vector<MountEntry> mounts = ParseMountInfo(text);
  ASSERT_EQ(mounts.size(), 4u);
  EXPECT_EQ(mounts[2].point, "/tmp/b x/mnt");
  EXPECT_EQ(mounts[2].source, "aquifer:127.0.0.1:41000");
  EXPECT_EQ(MetaAddressOfSource(mounts[1].source), "127.0.0.1:37095");
  EXPECT_EQ(MetaAddressOfSource(mounts[3].source), "");
  EXPECT_EQ(AquiferMountsOf(mounts, "127.0.0.1:37095"),
            (std::vector<std::string>{"/tmp/a/mnt (fuse.aquifer)"}));
  EXPECT_EQ(AquiferMountsOf(mounts, "127.0.0.1:41000"),
            (std::vector<std::string>{"/tmp/b x/mnt (fuse.aquifer)"}));
  EXPECT_EQ(AquiferMountsOf(mounts, "localhost:37095"),
            (std::vector<std::string>{"/tmp/a/mnt (fuse.aquifer)"}));
  EXPECT_TRUE(AquiferMountsOf(mounts, "127.0.0.1:1").empty());
  EXPECT_FALSE(SameEndpoint("127.0.0.1:37095", "127.0.0.1:37096"));
  EXPECT_TRUE(SameEndpoint("[::1]:7000", "[::1]:7000"));
}

TEST(MountInfoTest, MetaAddressOfAPathOffAnyAquiferMountIsNotSupported) {
  Result<std::string> r = MetaAddressOfPath("/proc");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotSupported);
}

}  // namespace
}  // namespace aquifer::cli

#include "client_fuse/mount_options.h"

#include <gtest/gtest.h>

#include <vector>

namespace aquifer::fuse {
namespace {

Result<MountOptions> Parse(std::vector<const char*> args) {
  args.insert(args.begin(), "aquifer-mount");
  return ParseMountArgs(static_cast<int>(args.size()), args.data());
}

TEST(MountOptionsTest, ParsesPositionalsForegroundAndTimeouts) {
  Result<MountOptions> o = Parse({"127.0.0.1:7000", "/mnt/a", "-f", "-o",
                                  "attr_timeout=2.5,entry_timeout=0", "--log-level", "debug"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->meta_address, "127.0.0.1:7000");
  EXPECT_EQ(o->mountpoint, "/mnt/a");
  EXPECT_TRUE(o->foreground);
  EXPECT_DOUBLE_EQ(o->attr_timeout_s, 2.5);
  EXPECT_DOUBLE_EQ(o->entry_timeout_s, 0.0);
  EXPECT_EQ(o->log_level, "debug");
  EXPECT_TRUE(o->fuse_options.empty());
}

TEST(MountOptionsTest, DefaultsAreOneSecondCachesAndDaemonMode) {
  Result<MountOptions> o = Parse({"h:1", "/m"});
  ASSERT_TRUE(o.ok());
  EXPECT_FALSE(o->foreground);
  EXPECT_DOUBLE_EQ(o->attr_timeout_s, 1.0);
  EXPECT_DOUBLE_EQ(o->entry_timeout_s, 1.0);
}

TEST(MountOptionsTest, AcceptsMountHelperConventionAndDropsFstabWords) {
  // What mount(8) runs for `mount -t fuse.aquifer` with an fstab line's options.
  Result<MountOptions> o = Parse({"10.0.0.1:7000", "/mnt/x", "-o",
                                  "rw,_netdev,noauto,nofail,x-systemd.automount,ro,allow_other",
                                  "-t", "fuse.aquifer", "-n", "-v"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->fuse_options, (std::vector<std::string>{"ro", "allow_other"}));
  EXPECT_EQ(o->mountpoint, "/mnt/x");
}

TEST(MountOptionsTest, PassesUnknownOptionsToFuseAfterOurFixedOnes) {
  Result<MountOptions> o = Parse({"h:1", "/m", "-obogus_opt,max_threads=8"});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->max_threads, 8u);
  const std::string s = FuseOptionString(*o, /*as_root=*/true);
  EXPECT_EQ(s, "default_permissions,subtype=aquifer,max_read=1048576,fsname=aquifer:h:1,"
               "allow_other,bogus_opt");
  EXPECT_EQ(FuseOptionString(*o, false).find("allow_other"), std::string::npos);
}

TEST(MountOptionsTest, RejectsBadInputWithAMessage) {
  EXPECT_EQ(Parse({"h:1"}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(Parse({"h:1", "/m", "/extra"}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(Parse({"nohostport", "/m"}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(Parse({"h:1", "/m", "-o", "attr_timeout=abc"}).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(Parse({"h:1", "/m", "-o", "entry_timeout=-1"}).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(Parse({"h:1", "/m", "--frobnicate"}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(Parse({"h:1", "/m", "-o"}).status().code(), Code::kInvalidArgument);
  EXPECT_NE(Parse({"h:1", "/m", "-o", "max_threads=0"}).status().message().find("max_threads"),
            std::string::npos);
  EXPECT_NE(Parse({"h:1", "/m", "-o", "data_wire=yes"}).status().message().find("data_wire"),
            std::string::npos);
}

TEST(MountOptionsTest, LeaseWaitIsSecondsWithA30SecondDefault) {
  EXPECT_EQ(Parse({"h:1", "/m"})->lease_wait_s, 30);
  Result<MountOptions> o = Parse({"h:1", "/m", "-o", "lease_wait=600"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->lease_wait_s, 600);
  EXPECT_TRUE(o->fuse_options.empty());
  for (const char* bad : {"lease_wait=", "lease_wait=-1", "lease_wait=1e9", "lease_wait=5m"}) {
    Result<MountOptions> r = Parse({"h:1", "/m", "-o", bad});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("lease_wait"), std::string::npos) << bad;
  }
}

// -o meta_wait=S: how long metadata calls wait out an unreachable aquifer-meta (a restart).
TEST(MountOptionsTest, MetaWaitIsSecondsUpToAnHourWithA120SecondDefault) {
  EXPECT_EQ(Parse({"h:1", "/m"})->meta_wait_s, 120);
  const struct {
    const char* option;
    double seconds;
  } good[] = {{"meta_wait=0", 0}, {"meta_wait=60", 60}, {"meta_wait=2.5", 2.5},
              {"meta_wait=3600", 3600}};
  for (const auto& [option, seconds] : good) {
    Result<MountOptions> o = Parse({"h:1", "/m", "-o", option});
    ASSERT_TRUE(o.ok()) << option << ": " << o.status().ToString();
    EXPECT_DOUBLE_EQ(o->meta_wait_s, seconds) << option;
    EXPECT_TRUE(o->fuse_options.empty()) << option;
  }
  for (const char* bad : {"meta_wait=", "meta_wait=-1", "meta_wait=3601", "meta_wait=2m",
                          "meta_wait=nan"}) {
    Result<MountOptions> r = Parse({"h:1", "/m", "-o", bad});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("meta_wait"), std::string::npos) << bad;
    EXPECT_NE(r.status().message().find("0..3600"), std::string::npos) << bad;
  }
}

TEST(MountOptionsTest, WiresAreOnByDefaultAndCanBeTurnedOff) {
  EXPECT_TRUE(Parse({"h:1", "/m"})->data_wire);
  EXPECT_TRUE(Parse({"h:1", "/m"})->meta_wire);
  Result<MountOptions> o = Parse({"h:1", "/m", "-o", "data_wire=0,meta_wire=0"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_FALSE(o->data_wire);
  EXPECT_FALSE(o->meta_wire);
  EXPECT_TRUE(o->fuse_options.empty());
}

TEST(MountOptionsTest, CacheLeasesAreOnByDefaultAndTakeOnlyZeroOrOne) {
  EXPECT_TRUE(Parse({"h:1", "/m"})->cache_leases);
  Result<MountOptions> o = Parse({"h:1", "/m", "-o", "cache_leases=0"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_FALSE(o->cache_leases);
  EXPECT_TRUE(o->data_wire);
  EXPECT_TRUE(o->fuse_options.empty());
  for (const char* bad : {"cache_leases=2", "cache_leases=", "cache_leases=yes"}) {
    EXPECT_EQ(Parse({"h:1", "/m", "-o", bad}).status().code(), Code::kInvalidArgument) << bad;
  }
}

TEST(MountOptionsTest, LazyOpensAreOnByDefaultAndTakeOnlyZeroOrOne) {
  EXPECT_TRUE(Parse({"h:1", "/m"})->lazy_opens);
  Result<MountOptions> o = Parse({"h:1", "/m", "-o", "lazy_opens=0"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_FALSE(o->lazy_opens);
  EXPECT_TRUE(o->cache_leases);
  EXPECT_TRUE(o->fuse_options.empty());
  for (const char* bad : {"lazy_opens=2", "lazy_opens=", "lazy_opens=on"}) {
    EXPECT_EQ(Parse({"h:1", "/m", "-o", bad}).status().code(), Code::kInvalidArgument) << bad;
  }
}

TEST(MountOptionsTest, DirLeasesAreOffByDefaultAndTakeOnlyZeroOrOne) {
  EXPECT_FALSE(Parse({"h:1", "/m"})->dir_leases);
  Result<MountOptions> o = Parse({"h:1", "/m", "-o", "dir_leases=1"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_TRUE(o->dir_leases);
  EXPECT_TRUE(o->cache_leases);
  EXPECT_TRUE(o->fuse_options.empty());
  for (const char* bad : {"dir_leases=2", "dir_leases=", "dir_leases=on"}) {
    EXPECT_EQ(Parse({"h:1", "/m", "-o", bad}).status().code(), Code::kInvalidArgument) << bad;
  }
}

TEST(MountOptionsTest, TransportIsAutoByDefaultAndTakesOnlyAutoUringOrDev) {
  EXPECT_EQ(Parse({"h:1", "/m"})->transport, FuseTransport::kAuto);
  EXPECT_EQ(Parse({"h:1", "/m", "-o", "transport=uring"})->transport, FuseTransport::kUring);
  EXPECT_EQ(Parse({"h:1", "/m", "-o", "transport=dev"})->transport, FuseTransport::kDev);
  Result<MountOptions> o = Parse({"h:1", "/m", "-o", "transport=dev,transport=auto"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->transport, FuseTransport::kAuto);  // the last one wins
  EXPECT_TRUE(o->fuse_options.empty());
  for (const char* bad : {"transport=", "transport=io_uring", "transport=URING", "transport=1"}) {
    Result<MountOptions> r = Parse({"h:1", "/m", "-o", bad});
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("transport"), std::string::npos) << bad;
  }
}

TEST(MountOptionsTest, HelpNeedsNoPositionals) {
  Result<MountOptions> o = Parse({"--help"});
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->help);
}

}  // namespace
}  // namespace aquifer::fuse

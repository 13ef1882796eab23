#include "cli/status_report.h"

#include <gtest/gtest.h>

namespace aquifer::cli {
namespace {

ClusterView SixServersOneDown() {
  ClusterView v;
  v.map_version = 9;
  v.default_k = 4;
  v.default_m = 2;
  v.default_unit_bytes = 1048576;
  for (uint32_t i = 1; i <= 6; ++i) {
    ServerView s;
    s.id = ServerId(i);
    s.address = "127.0.0.1:" + std::to_string(41000 + i);
    s.failure_domain = "ds" + std::to_string(i);
    s.up = i != 3;
    s.capacity_bytes = 10ull << 30;
    s.used_bytes = 1ull << 20;
    s.last_heartbeat_ms_ago = s.up ? 200 : 9000;
    v.servers.push_back(s);
  }
  v.pg_count_by_width[6] = 64;
  v.total_bytes = 50ull << 30;
  v.usable_total_bytes = v.total_bytes * 4 / 6;
  return v;
}

TEST(StatusReportTest, ShowsEachServerUpOrDownWithCapacityAndPgCounts) {
  std::string text = FormatStatus("127.0.0.1:41000", SixServersOneDown(), std::nullopt, {});
  EXPECT_NE(text.find("6 registered, 5 up, 1 down"), std::string::npos) << text;
  EXPECT_NE(text.find("ds3"), std::string::npos);
  EXPECT_NE(text.find("DOWN"), std::string::npos);
  EXPECT_NE(text.find("10.0 GiB"), std::string::npos);
  EXPECT_NE(text.find("width 6: 64 placement groups"), std::string::npos) << text;
  EXPECT_NE(text.find("WARNING"), std::string::npos) << text;  // 5 up < k+m
  EXPECT_NE(text.find("no mount of this cluster on this host"), std::string::npos);
}

TEST(StatusReportTest, SaysWhenTheMetadataServerIsUnreachableAndShowsLocalProcesses) {
  LocalProcesses lp;
  lp.state.root = "/tmp/aquifer-r";
  lp.state.meta.pid = 10;
  lp.state.data_servers.resize(2);
  lp.state.data_servers[0].failure_domain = "ds1";
  lp.state.data_servers[0].pid = 11;
  lp.state.data_servers[1].failure_domain = "ds2";
  lp.data_alive = {true, false};
  lp.state.mount.dir = "/tmp/aquifer-r/mnt";
  std::string text =
      FormatStatus("127.0.0.1:1", Result<ClusterView>(Unavailable("connection refused")), lp, {});
  EXPECT_NE(text.find("UNREACHABLE"), std::string::npos) << text;
  EXPECT_NE(text.find("meta NOT RUNNING"), std::string::npos) << text;
  EXPECT_NE(text.find("ds1 pid 11"), std::string::npos) << text;
  EXPECT_NE(text.find("ds2 NOT RUNNING"), std::string::npos) << text;
  EXPECT_NE(text.find("NOT MOUNTED"), std::string::npos) << text;
}

TEST(StatusReportTest, HumanBytesUsesBinaryUnits) {
  EXPECT_EQ(HumanBytes(0), "0 B");
  EXPECT_EQ(HumanBytes(1023), "1023 B");
  EXPECT_EQ(HumanBytes(1536), "1.5 KiB");
  EXPECT_EQ(HumanBytes(3ull << 40), "3.0 TiB");
}

// Issue 16: `server remove --force` gave no warning while making data unreadable. With server 3
// down, removing server 5 leaves PGs holding both with m = 2 positions missing (at risk), and,
// with server 4 down too, PGs holding 3, 4 and 5 with 3 missing (lost).
TEST(StatusReportTest, RemovalRiskCountsPgsThatWouldLoseMoreThanMPositions) {
  ClusterView v = SixServersOneDown();
  v.pgs = {{6, {1, 2, 3, 4, 5, 6}}, {6, {5, 6, 1, 2, 3, 4}}, {6, {1, 2, 4, 5, 6, 7}},
           {6, {1, 2, 3, 4, 6, 7}}};
  RemovalRisk r = RemovalRiskOf(v, 5);
  EXPECT_EQ(r.m, 2u);
  EXPECT_EQ(r.servers_missing, 1u);
  EXPECT_EQ(r.pgs_lost, 0u);
  EXPECT_EQ(r.pgs_at_risk, 2u);  // PGs 0 and 1 (3 and 5 missing); PG 2 has only 5; PG 3 not 5's
  v.servers[3].up = false;       // server 4
  r = RemovalRiskOf(v, 5);
  EXPECT_EQ(r.servers_missing, 2u);
  EXPECT_EQ(r.pgs_lost, 2u);     // PGs 0 and 1: 3, 4, 5
  EXPECT_EQ(r.pgs_at_risk, 1u);  // PG 2: 4 and 5
}

}  // namespace
}  // namespace aquifer::cli

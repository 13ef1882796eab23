#include "cli/status_report.h"

#include <gtest/gtest.h>

#include <functional>
#include <vector>

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

// Strings that come from the wire (a server's address and failure domain, a move's kind, state and
// error, the metadata server's message, a degraded reason) are shown escaped: a data server that
// registers "\x1b[2J" and a newline cannot clear an operator's terminal or forge a report line.
TEST(StatusReportTest, StringsFromTheWireArePrintedWithControlBytesEscaped) {
  const std::string evil = "x\x1b[2J\ny\rz\x07";
  ClusterView v = SixServersOneDown();
  v.servers[0].address = "127.0.0.1:1" + evil;
  v.servers[1].failure_domain = "fd" + evil;
  v.servers[2].failure_domain = "down" + evil;  // server 3 is down: named in the health line
  MovesView mv;
  MoveView m;
  m.id = 1;
  m.kind = "repair" + evil;
  m.state = "running" + evil;
  m.from = ServerId(3);
  m.to = ServerId(2);
  m.error = "failed" + evil;
  mv.moves.push_back(m);
  DegradedPgView d;
  d.pg_width = 6;
  d.positions = {2};
  d.reason = "reason" + evil;
  mv.degraded.push_back(d);
  mv.message = "message" + evil;
  Result<MovesView> moves = mv;
  LocalProcesses local;
  local.state.root = "/tmp/root" + evil;
  local.state.mount.dir = "/mnt" + evil;
  DataServerRecord sp;
  sp.failure_domain = "local" + evil;
  local.state.data_servers.push_back(sp);
  local.data_alive.push_back(true);
  const std::vector<std::string> mounts = {"/mnt/other" + evil};
  for (const std::string& text :
       {FormatStatus("127.0.0.1:41000" + evil, v, std::nullopt, mounts, &moves),
        FormatStatus("127.0.0.1:41000" + evil, v, local, {}, &moves),
        FormatStatus("127.0.0.1:41000" + evil, Result<ClusterView>(Unavailable("down" + evil)),
                     local, {}, &moves),
        FormatServerTable(v), FormatMoves(mv, &v, 10)}) {
    EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
    EXPECT_EQ(text.find('\r'), std::string::npos) << text;
    EXPECT_EQ(text.find('\x07'), std::string::npos) << text;
    EXPECT_EQ(text.find("\ny"), std::string::npos) << "a raw newline inside a name:\n" << text;
    EXPECT_NE(text.find("x\\x1b[2J\\x0ay"), std::string::npos) << text;
  }
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

// Six servers all up, 20 PGs of width 6 (PG i on servers 1..6 in turn), no moves: ok.
ClusterView Healthy() {
  ClusterView v = SixServersOneDown();
  for (ServerView& s : v.servers) {
    s.up = true;
    s.pg_positions = 20;
  }
  for (int i = 0; i < 20; ++i) v.pgs.push_back(PgView{6, {1, 2, 3, 4, 5, 6}});
  return v;
}

// Issue 21 item 1: the health line comes first, names the most serious state with every reason,
// and the exit code is 0 only when ok. Before, status said "healthy" and exited 0 with stripes
// lost, servers 94-98% full and the mount daemon dead.
TEST(StatusReportTest, HealthNamesTheMostSeriousStateAndItsExitCode) {
  struct Case {
    const char* name;
    std::function<void(ClusterView&, MovesView&, LocalProcesses&)> make;
    HealthState want;
    int exit_code;
    const char* reason;  // a part of the health line
  };
  const std::vector<Case> cases = {
      {"healthy", [](ClusterView&, MovesView&, LocalProcesses&) {}, HealthState::kOk, 0, "ok"},
      {"a server down", [](ClusterView& v, MovesView&, LocalProcesses&) { v.servers[2].up = false; },
       HealthState::kDegraded, 4, "1 data server down holding PG positions (3)"},
      {"a down server holding nothing",
       [](ClusterView& v, MovesView&, LocalProcesses&) {
         v.servers[2].up = false;
         v.servers[2].pg_positions = 0;
         for (PgView& pg : v.pgs) pg.targets[2] = 7;
         v.servers.push_back(v.servers[0]);
         v.servers.back().id = ServerId(7);
       },
       HealthState::kDegraded, 4, "holding no PG positions (3)"},
      {"stripes below k+m", [](ClusterView&, MovesView& m, LocalProcesses&) { m.degraded_stripes = 4; },
       HealthState::kDegraded, 4, "4 stripes written below k+m"},
      {"two down in a PG",
       [](ClusterView& v, MovesView&, LocalProcesses&) {
         v.servers[1].up = false;
         v.servers[4].up = false;
       },
       HealthState::kDataAtRisk, 7, "20 PGs have m = 2 positions missing"},
      {"three down in a PG",
       [](ClusterView& v, MovesView&, LocalProcesses&) {
         v.servers[0].up = false;
         v.servers[1].up = false;
         v.servers[5].state = "removed";
       },
       HealthState::kDataLost, 8, "20 PGs have more than m = 2 positions"},
      {"lost stripes recorded", [](ClusterView&, MovesView& m, LocalProcesses&) {
         m.lost_stripes = 5;
         m.lost_files = 2;
       },
       HealthState::kDataLost, 8, "5 stripes in 2 files cannot be read"},
      {"waiting for a server",
       [](ClusterView& v, MovesView& m, LocalProcesses&) {
         v.servers[3].up = false;
         m.waiting_for_server = true;
       },
       HealthState::kWaitingForServer, 3, "no spare failure domain"},
      {"a server 94% full",
       [](ClusterView& v, MovesView&, LocalProcesses&) {
         v.servers[4].capacity_bytes = 100ull << 20;
         v.servers[4].used_bytes = 94ull << 20;
       },
       HealthState::kNearlyFull, 5, "server 5 (ds5) is 94% full"},
      {"the mount daemon dead",
       [](ClusterView&, MovesView&, LocalProcesses& lp) { lp.mount_alive = false; },
       HealthState::kMountDown, 6, "is not running"},
      {"not mounted",
       [](ClusterView&, MovesView&, LocalProcesses& lp) { lp.mount_type.clear(); },
       HealthState::kMountDown, 6, "is not mounted"},
      {"at risk and nearly full",
       [](ClusterView& v, MovesView&, LocalProcesses&) {
         v.servers[0].up = false;
         v.servers[1].up = false;
         v.servers[4].used_bytes = v.servers[4].capacity_bytes;
       },
       HealthState::kDataAtRisk, 7, "DATA AT RISK: 20 PGs"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ClusterView v = Healthy();
    MovesView m;
    LocalProcesses lp;
    lp.state.mount.dir = "/tmp/aquifer-r/mnt";
    lp.mount_alive = true;
    lp.mount_type = "fuse.aquifer";
    c.make(v, m, lp);
    const Result<ClusterView> view(v);
    const Result<MovesView> moves(m);
    const Health h = HealthOf(view, &moves, lp);
    EXPECT_EQ(HealthName(h.state), std::string(HealthName(c.want)));
    EXPECT_EQ(HealthExitCode(h.state), c.exit_code);
    const std::string text = FormatStatus("127.0.0.1:41000", view, lp, {}, &moves);
    EXPECT_EQ(text.rfind("health    ", 0), 0u) << "the health line is not first:\n" << text;
    const std::string line = text.substr(0, text.find('\n'));
    EXPECT_NE(line.find(c.reason), std::string::npos) << line;
  }
  const Health unreachable = HealthOf(Result<ClusterView>(Unavailable("refused")), nullptr, {});
  EXPECT_EQ(HealthExitCode(unreachable.state), 1);
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

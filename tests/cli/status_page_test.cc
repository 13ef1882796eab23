// aquifer-meta's status page as HTML: the same health as `aquifer status`, servers up and down,
// repair progress, sessions and events, with every untrusted text escaped.
#include "cli/status_page.h"

#include <gtest/gtest.h>

#include "cli/status_report.h"

namespace aquifer::cli {
namespace {

ClusterView FourServersOneDown() {
  ClusterView v;
  v.map_version = 5;
  v.default_k = 2;
  v.default_m = 2;
  for (uint32_t i = 1; i <= 4; ++i) {
    ServerView s;
    s.id = ServerId(i);
    s.address = "127.0.0.1:" + std::to_string(42000 + i);
    s.failure_domain = i == 4 ? "<b>ds4</b>" : "ds" + std::to_string(i);
    s.up = i != 2;
    s.capacity_bytes = 8ull << 30;
    s.used_bytes = 2ull << 30;
    s.pg_positions = 12;
    s.last_heartbeat_ms_ago = s.up ? 300 : 12000;
    v.servers.push_back(s);
  }
  v.pgs.push_back(PgView{4, {1, 2, 3, 4}});
  v.pg_count_by_width[4] = 1;
  v.total_bytes = 24ull << 30;
  v.usable_total_bytes = 16ull << 30;
  return v;
}

MovesView OneRepairHalfDone() {
  MovesView m;
  MoveView t;
  t.id = 17;
  t.kind = "repair";
  t.state = "running";
  t.pg_width = 4;
  t.pg_index = 0;
  t.position = 1;
  t.from = ServerId(2);
  t.to = ServerId(4);
  t.chunks_done = 5;
  t.chunks_total = 10;
  t.bytes_done = 50ull << 20;
  t.bytes_total = 100ull << 20;
  t.rate_bytes_per_s = 10ull << 20;
  t.eta_ms = 5000;
  m.moves.push_back(t);
  m.running = 1;
  m.bytes_left = 50ull << 20;
  m.eta_ms = 5000;
  m.degraded.push_back(DegradedPgView{4, 0, {1}, "repairing"});
  m.degraded_pgs = 1;
  m.message = "degraded: 1 PG repairing";
  return m;
}

TEST(StatusPageTest, ShowsTheDownServerTheRepairProgressAndTheSameHealthAsStatus) {
  StatusPageInput in;
  in.meta_address = "127.0.0.1:42000";
  in.view = FourServersOneDown();
  in.moves = OneRepairHalfDone();
  ActivityView a;
  a.sessions.push_back(SessionView{7, "host1:/mnt/aq", 1200, 3, true});
  a.events.push_back(EventView{2, 1'700'000'000'000, "warning",
                               "data server 2 (ds2) marked down: silent 6001 ms"});
  in.activity = a;
  in.now_unix_ms = 1'700'000'010'000;
  const std::string page = RenderStatusPage(in);
  const Health health = HealthOf(in.view, &in.moves, std::nullopt);
  EXPECT_NE(page.find(std::string("data-health=\"") + HealthName(health.state) + "\""),
            std::string::npos)
      << page;
  EXPECT_EQ(health.state, HealthState::kDegraded);
  EXPECT_NE(page.find("<meta http-equiv=\"refresh\" content=\"3\">"), std::string::npos);
  EXPECT_NE(page.find("data-server=\"2\" data-state=\"down\""), std::string::npos) << page;
  EXPECT_NE(page.find("data-server=\"1\" data-state=\"up\""), std::string::npos);
  EXPECT_NE(page.find("width:50.0%"), std::string::npos) << page;   // the task's bar
  EXPECT_NE(page.find("50.0 MiB / 100.0 MiB"), std::string::npos) << page;
  EXPECT_NE(page.find("10.0 MiB/s"), std::string::npos);
  EXPECT_NE(page.find("5 s"), std::string::npos);
  EXPECT_NE(page.find("host1:/mnt/aq"), std::string::npos);
  EXPECT_NE(page.find("marked down: silent 6001 ms"), std::string::npos);
  EXPECT_NE(page.find("2023-11-14 22:13:20"), std::string::npos) << page;  // the event, UTC
  // A name a data server sent is text, not markup.
  EXPECT_EQ(page.find("<b>ds4</b>"), std::string::npos);
  EXPECT_NE(page.find("&lt;b&gt;ds4&lt;/b&gt;"), std::string::npos);
}

TEST(StatusPageTest, SaysWhatItCouldNotFetch) {
  StatusPageInput in;
  in.meta_address = "127.0.0.1:1";
  in.view = Status(Code::kUnavailable, "GetClusterMap to metadata server failed: <refused>");
  in.refresh_seconds = 0;
  const std::string page = RenderStatusPage(in);
  EXPECT_NE(page.find("data-health=\"unreachable\""), std::string::npos) << page;
  EXPECT_NE(page.find("Cluster map unavailable"), std::string::npos);
  EXPECT_NE(page.find("&lt;refused&gt;"), std::string::npos);
  EXPECT_NE(page.find("Moves unavailable"), std::string::npos);
  EXPECT_EQ(page.find("http-equiv"), std::string::npos);
}

TEST(StatusPageTest, EscapesEveryHtmlSpecialCharacter) {
  EXPECT_EQ(HtmlEscape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  EXPECT_EQ(HtmlEscape(""), "");
}

}  // namespace
}  // namespace aquifer::cli

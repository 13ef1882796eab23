// Repair, rebalance and drain planning in MetadataService (src/metadata/moves.cc): test clocks
// moved by hand, data servers simulated by calling Heartbeat (and reporting move progress) the
// way aquifer-data does.
#include <filesystem>
#include <set>

#include "aquifer/units.h"
#include "service_test_util.h"

namespace aquifer::meta::testing {
namespace {

constexpr int64_t kRepairDelayMs = 1000;
constexpr int64_t kPgGcDelayMs = 500;

class MovesTest : public ServiceFixture {
 protected:
  void SetUp() override {
    opts_.repair_delay_ms = kRepairDelayMs;
    opts_.pg_gc_delay_ms = kPgGcDelayMs;
    opts_.heartbeat_timeout_ms = 300;
    ServiceFixture::SetUp();
  }

  std::vector<ServerId> Ids() {
    std::vector<ServerId> out;
    for (const auto& s : svc_->GetClusterMap().servers) out.push_back(s.record.id);
    return out;
  }

  Result<HeartbeatReply> Beat(ServerId id, std::vector<MoveProgress> moves = {},
                              std::vector<uint64_t> pg_gc_done = {}) {
    HeartbeatArgs a;
    a.server = id;
    a.capacity_bytes = 1000000;
    a.used_bytes = 1000;
    a.moves = std::move(moves);
    a.pg_gc_done = std::move(pg_gc_done);
    return svc_->Heartbeat(a);
  }

  // Moves the clock by `ms` in steps shorter than the heartbeat timeout; every server not in
  // `silent` heartbeats at each step; Tick runs after each step.
  void Advance(int64_t ms, const std::set<uint32_t>& silent = {}) {
    while (ms > 0) {
      int64_t step = std::min<int64_t>(ms, 100);
      mono_ms_ += step;
      ms -= step;
      for (ServerId id : Ids()) {
        if (!silent.count(id.value())) ASSERT_TRUE(Beat(id).ok());
      }
      svc_->Tick();
    }
  }

  // The width-6 table (k=4 m=2, the default).
  PgTable Table() {
    for (const PgTable& t : svc_->GetClusterMap().pg_tables) {
      if (t.width == 6) return t;
    }
    ADD_FAILURE() << "no width-6 table";
    return PgTable{};
  }

  // Positions each server is the target of.
  std::map<uint32_t, int> Held(const PgTable& t) {
    std::map<uint32_t, int> held;
    for (const auto& pg : t.pgs) {
      for (ServerId s : pg) held[s.value()]++;
    }
    return held;
  }

  // Every PG's positions, counting each position's target and pending target, sit on distinct
  // failure domains.
  void ExpectDistinctDomains() {
    ClusterMap map = svc_->GetClusterMap();
    std::map<uint32_t, std::string> domain;
    for (const auto& s : map.servers) domain[s.record.id.value()] = s.record.failure_domain;
    for (const PgTable& t : map.pg_tables) {
      for (size_t pg = 0; pg < t.pgs.size(); ++pg) {
        std::map<std::string, uint32_t> owner;  // domain -> position
        for (uint32_t pos = 0; pos < t.pgs[pg].size(); ++pos) {
          std::set<std::string> here{domain[t.pgs[pg][pos].value()]};
          if (!t.pending[pg].empty() && t.pending[pg][pos].value() != 0) {
            here.insert(domain[t.pending[pg][pos].value()]);
          }
          for (const std::string& d : here) {
            auto [it, fresh] = owner.emplace(d, pos);
            EXPECT_TRUE(fresh || it->second == pos)
                << "pg " << pg << ": positions " << it->second << " and " << pos << " share " << d;
          }
        }
      }
    }
  }

  // Plays every up server's move worker: each heartbeat reports every task it was given as done,
  // until no task is left (or `rounds` run out). Returns how many tasks finished.
  int FinishAllMoves(const std::set<uint32_t>& silent = {}, int rounds = 400) {
    int finished = 0;
    std::map<uint32_t, std::vector<MoveProgress>> report;
    for (int r = 0; r < rounds; ++r) {
      bool any = false;
      for (ServerId id : Ids()) {
        if (silent.count(id.value())) continue;
        auto reply = Beat(id, std::move(report[id.value()]));
        EXPECT_TRUE(reply.ok());
        report[id.value()].clear();
        if (!reply.ok()) return finished;
        EXPECT_LE(reply->moves.size(), opts_.max_concurrent_moves);
        for (const MoveAssignment& m : reply->moves) {
          EXPECT_EQ(m.task.to, id);
          EXPECT_EQ(m.rate_limit_bytes_per_s, uint64_t{opts_.move_rate_mib} * kMiB);
          report[id.value()].push_back(MoveProgress{m.task.id, 10, 10, 1000, 1000, true, ""});
          finished++;
          any = true;
        }
      }
      if (!any && svc_->GetMoves().moves.empty()) break;
    }
    return finished;
  }

  std::unique_ptr<MetadataService>& svc() { return svc_; }
};

TEST_F(MovesTest, RepairIsScheduledAfterTheDelayNotBefore) {
  AddServers(7);
  File(kRootInode, "f");
  const ServerId dead = Ids()[2];
  const int held = Held(Table())[dead.value()];
  ASSERT_GT(held, 0);
  Advance(opts_.heartbeat_timeout_ms + 100, {dead.value()});  // marked down
  MovesReport r = svc_->GetMoves();
  EXPECT_TRUE(r.moves.empty());
  ASSERT_EQ(r.degraded.size(), static_cast<size_t>(held));
  EXPECT_TRUE(r.degraded[0].reason.starts_with("repair in ")) << r.degraded[0].reason;
  EXPECT_FALSE(r.waiting_for_server);

  Advance(kRepairDelayMs - 200, {dead.value()});  // still inside the delay
  EXPECT_TRUE(svc_->GetMoves().moves.empty());

  const uint64_t v0 = svc_->GetClusterMap().version;
  Advance(300, {dead.value()});
  r = svc_->GetMoves();
  ASSERT_EQ(r.moves.size(), static_cast<size_t>(held));
  EXPECT_GT(svc_->GetClusterMap().version, v0);
  std::map<uint32_t, int> running;
  for (const MoveInfo& m : r.moves) {
    EXPECT_EQ(m.task.kind, MoveKind::kRepair);
    EXPECT_EQ(m.task.from, dead);
    EXPECT_NE(m.task.to, dead);
    if (m.running) running[m.task.to.value()]++;
    PgTable t = Table();
    EXPECT_EQ(t.pgs[m.task.pg_index][m.task.position], dead);
    EXPECT_EQ(t.pending[m.task.pg_index][m.task.position], m.task.to);
  }
  for (const auto& [to, n] : running) EXPECT_LE(n, 2) << "destination " << to;
  EXPECT_EQ(r.moves_running + r.moves_queued, r.moves.size());
  EXPECT_GT(r.moves_queued, 0u);  // 7 servers: all land on few destinations, the rest queue
  for (const DegradedPg& d : r.degraded) EXPECT_EQ(d.reason, "repairing");
  ExpectDistinctDomains();
}

// The status page's event list tells the story of a failure: the server marked down, one line
// for the repair tasks it caused (not one per task), the sessions; counts by severity.
TEST_F(MovesTest, EventsRecordAServerDownAndItsRepairInOneLine) {
  AddServers(7);
  auto session = svc_->OpenSession("host1:/mnt/a\x1b[31m", false);
  ASSERT_TRUE(session.ok());
  const ServerId dead = Ids()[2];
  Advance(opts_.heartbeat_timeout_ms + kRepairDelayMs + 300, {dead.value()});
  ASSERT_FALSE(svc_->GetMoves().moves.empty());
  const std::vector<ClusterEvent> events = svc_->RecentEvents(kEventLogCapacity);
  ASSERT_FALSE(events.empty());
  for (size_t i = 1; i < events.size(); ++i) EXPECT_GT(events[i - 1].seq, events[i].seq);
  int joined = 0, down = 0, scheduled = 0, opened = 0;
  for (const ClusterEvent& e : events) {
    joined += e.text.find(") joined") != std::string::npos;
    if (e.text.find("data server " + std::to_string(dead.value()) + " (") == 0 &&
        e.text.find("marked down") != std::string::npos) {
      ++down;
      EXPECT_EQ(e.severity, EventSeverity::kWarning);
    }
    if (e.text.find("repair tasks scheduled") != std::string::npos) ++scheduled;
    if (e.text.find("opened by host1:/mnt/a") != std::string::npos) {
      ++opened;
      // The client's name is printable: no escape byte reaches a terminal or the page.
      EXPECT_EQ(e.text.find('\x1b'), std::string::npos) << e.text;
    }
  }
  EXPECT_EQ(joined, 7);
  EXPECT_EQ(down, 1);
  EXPECT_EQ(scheduled, 1);
  EXPECT_EQ(opened, 1);
  EXPECT_EQ(svc_->EventCounts()[static_cast<size_t>(EventSeverity::kWarning)], 1u);
  ASSERT_EQ(svc_->ListSessions().size(), 1u);
  EXPECT_EQ(svc_->ListSessions()[0].id, session->session);
}

TEST(EventLogTest, KeepsTheNewestEventsAndCountsAll) {
  EventLog log;
  for (size_t i = 0; i < kEventLogCapacity + 10; ++i) {
    log.Record(i % 2 ? EventSeverity::kError : EventSeverity::kInfo, "e" + std::to_string(i));
  }
  const auto recent = log.Recent(kEventLogCapacity * 2);
  ASSERT_EQ(recent.size(), kEventLogCapacity);
  EXPECT_EQ(recent.front().text, "e" + std::to_string(kEventLogCapacity + 9));
  EXPECT_EQ(recent.back().text, "e10");
  EXPECT_EQ(log.Recent(2).size(), 2u);
  EXPECT_EQ(log.CountsBySeverity()[0] + log.CountsBySeverity()[2], kEventLogCapacity + 10);
}

TEST(EventLogTest, PrintableEscapesControlAndNonAsciiBytesAndCutsLongText) {
  EXPECT_EQ(Printable("ds1"), "ds1");
  EXPECT_EQ(Printable(std::string("a\nb\x1b[0m", 7)), "a\\x0ab\\x1b[0m");
  EXPECT_EQ(Printable("back\\slash"), "back\\x5cslash");
  EXPECT_EQ(Printable("\xc3\xa9"), "\\xc3\\xa9");
  const std::string longer = Printable(std::string(500, 'x'));
  EXPECT_EQ(longer, std::string(200, 'x') + "...");
}

TEST_F(MovesTest, WithoutASpareFailureDomainNoTaskAndTheClusterSaysItIsWaiting) {
  AddServers(6);
  File(kRootInode, "f");
  const ServerId dead = Ids()[0];
  Advance(opts_.heartbeat_timeout_ms + kRepairDelayMs + 200, {dead.value()});
  MovesReport r = svc_->GetMoves();
  EXPECT_TRUE(r.moves.empty());
  EXPECT_TRUE(r.waiting_for_server);
  ASSERT_EQ(r.degraded.size(), 64u);  // every PG has all 6 servers
  for (const DegradedPg& d : r.degraded) {
    EXPECT_EQ(d.reason, "waiting for a server");
    EXPECT_EQ(d.positions.size(), 1u);
  }
  EXPECT_NE(r.message.find("waiting for a server"), std::string::npos) << r.message;
  // A seventh server arrives: the repair starts on it.
  AddServers(1, "spare");
  r = svc_->GetMoves();
  EXPECT_FALSE(r.waiting_for_server);
  size_t repairs = 0;
  for (const MoveInfo& m : r.moves) repairs += m.task.kind == MoveKind::kRepair;
  EXPECT_EQ(repairs, 64u);
  ExpectDistinctDomains();
}

TEST_F(MovesTest, ProgressIsShownAndDoneSwitchesThePgAndBumpsTheVersion) {
  AddServers(7);
  File(kRootInode, "f");
  const ServerId dead = Ids()[3];
  Advance(opts_.heartbeat_timeout_ms + kRepairDelayMs + 200, {dead.value()});
  // Find a destination with a running task.
  MoveTask task;
  for (const MoveInfo& m : svc_->GetMoves().moves) {
    if (m.running) task = m.task;
  }
  ASSERT_NE(task.id, 0u);
  auto given = Beat(task.to);
  ASSERT_TRUE(given.ok());
  ASSERT_TRUE(std::any_of(given->moves.begin(), given->moves.end(),
                          [&](const MoveAssignment& m) { return m.task.id == task.id; }));
  ASSERT_TRUE(Beat(task.to, {MoveProgress{task.id, 1, 10, 1 * kMiB, 10 * kMiB, false, ""}}).ok());
  mono_ms_ += 1000;
  ASSERT_TRUE(Beat(task.to, {MoveProgress{task.id, 3, 10, 3 * kMiB, 10 * kMiB, false, ""}}).ok());
  MovesReport r = svc_->GetMoves();
  auto shown = std::find_if(r.moves.begin(), r.moves.end(),
                            [&](const MoveInfo& m) { return m.task.id == task.id; });
  ASSERT_NE(shown, r.moves.end());
  EXPECT_EQ(shown->progress.chunks_done, 3u);
  EXPECT_EQ(shown->rate_bytes_per_s, 2 * kMiB);  // 2 MiB over 1 s
  EXPECT_EQ(shown->eta_ms, 3500);                // 7 MiB left at 2 MiB/s

  // A report for a task the server does not run is ignored.
  const ServerId other = Ids()[0] == task.to ? Ids()[1] : Ids()[0];
  ASSERT_TRUE(Beat(other, {MoveProgress{task.id, 10, 10, 1, 1, true, ""}}).ok());
  EXPECT_EQ(svc_->GetMoves().moves_completed, 0u);
  const uint64_t v0 = svc_->GetClusterMap().version;
  ASSERT_TRUE(Beat(task.to, {MoveProgress{task.id, 10, 10, 10 * kMiB, 10 * kMiB, true, ""}}).ok());
  PgTable t = Table();
  EXPECT_EQ(t.pgs[task.pg_index][task.position], task.to);
  EXPECT_TRUE(t.pending[task.pg_index].empty() ||
              t.pending[task.pg_index][task.position].value() == 0);
  EXPECT_GT(svc_->GetClusterMap().version, v0);
  for (const MoveInfo& m : svc_->GetMoves().moves) EXPECT_NE(m.task.id, task.id);
  EXPECT_EQ(svc_->GetMoves().moves_completed, 1u);
  ExpectDistinctDomains();
}

TEST_F(MovesTest, ARepairedServerComingBackIsToldToDeleteWhatItNoLongerHolds) {
  AddServers(7);
  File(kRootInode, "f");
  const ServerId dead = Ids()[1];
  const PgTable before = Table();
  const int held = Held(before)[dead.value()];
  Advance(opts_.heartbeat_timeout_ms + kRepairDelayMs + 200, {dead.value()});
  EXPECT_EQ(FinishAllMoves({dead.value()}), held);
  EXPECT_EQ(Held(Table())[dead.value()], 0);
  EXPECT_TRUE(svc_->GetMoves().degraded.empty());
  EXPECT_EQ(svc_->GetMoves().message, "healthy");

  // It comes back: after the catch-up window it gets one PG GC per position it lost.
  mono_ms_ += kPgGcDelayMs;
  auto reply = Beat(dead);
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->state, MemberState::kIn);
  ASSERT_EQ(reply->pg_gc.size(), static_cast<size_t>(held));
  std::vector<uint64_t> done;
  for (const PgGcTask& g : reply->pg_gc) {
    EXPECT_EQ(before.pgs[g.pg_index][g.position], dead);
    EXPECT_NE(Table().pgs[g.pg_index][g.position], dead);
    done.push_back(g.id);
  }
  ASSERT_TRUE(Beat(dead, {}, done).ok());
  EXPECT_TRUE(Beat(dead)->pg_gc.empty());
}

// Regression (issue 22, the 30-minute storm): every data server that came back after repair had
// rebuilt its positions elsewhere counted as a new server, and the PG table grew by a seventh
// (64 to 147 PGs in 30 minutes, and each growth sent readers with a slightly older map to the
// wrong PG until the client stopped folding indexes). A returning server gets positions back by
// rebalance moves within the table it was sized for; only a server past that count grows it.
TEST_F(MovesTest, AServerComingBackAfterRepairGetsPositionsBackWithoutGrowingTheTable) {
  AddServers(7);
  File(kRootInode, "f");
  ASSERT_EQ(Table().pgs.size(), 64u);
  const ServerId dead = Ids()[1];
  Advance(opts_.heartbeat_timeout_ms + kRepairDelayMs + 200, {dead.value()});
  FinishAllMoves({dead.value()});
  ASSERT_EQ(Held(Table())[dead.value()], 0);

  ASSERT_TRUE(Beat(dead).ok());  // back, with no positions
  Advance(200);
  EXPECT_EQ(Table().pgs.size(), 64u) << "the table grew for a server it was sized for";
  MovesReport r = svc_->GetMoves();
  ASSERT_FALSE(r.moves.empty()) << "nothing moves back to the returning server";
  for (const MoveInfo& m : r.moves) {
    EXPECT_EQ(m.task.kind, MoveKind::kRebalance);
    EXPECT_EQ(m.task.to, dead);
  }
  FinishAllMoves();
  const int share = 64 * 6 / 7;  // 54 or 55 positions each
  EXPECT_GE(Held(Table())[dead.value()], share - 1);
  ExpectDistinctDomains();
  EXPECT_EQ(File(kRootInode, "g").layout.pg_count, 64u);

  // A server the table was not sized for still grows it.
  AddServers(1, "new");
  Advance(200);
  EXPECT_EQ(Table().pgs.size(), 74u);  // 64 * 8 / 7, rounded up
}

TEST_F(MovesTest, MoveTasksSurviveARestartOnRocksDb) {
  const std::string dir =
      "/tmp/aquifer-moves-test-" + std::to_string(::getpid()) + "-" +
      ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::filesystem::remove_all(dir);
  {
    auto store = OpenRocksStore(dir);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    Restart(std::move(*store));
  }
  AddServers(7);
  File(kRootInode, "f");
  const ServerId dead = Ids()[4];
  Advance(opts_.heartbeat_timeout_ms + kRepairDelayMs + 200, {dead.value()});
  MovesReport r = svc_->GetMoves();
  ASSERT_FALSE(r.moves.empty());
  const PgTable t0 = Table();

  svc().reset();  // releases the RocksDB lock
  {
    auto store = OpenRocksStore(dir);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    Restart(std::move(*store));
  }
  MovesReport again = svc_->GetMoves();
  ASSERT_EQ(again.moves.size(), r.moves.size());
  for (size_t i = 0; i < r.moves.size(); ++i) {
    EXPECT_EQ(again.moves[i].task.id, r.moves[i].task.id);
    EXPECT_EQ(again.moves[i].task.to, r.moves[i].task.to);
    EXPECT_EQ(again.moves[i].task.from, dead);
  }
  const PgTable t1 = Table();
  EXPECT_EQ(t1.pgs, t0.pgs);
  EXPECT_EQ(t1.pending, t0.pending);
  // The tasks still finish after the restart (the dead server is up for one timeout of grace,
  // then down again; its tasks are kept).
  EXPECT_EQ(FinishAllMoves({dead.value()}), static_cast<int>(r.moves.size()));
  EXPECT_EQ(Held(Table())[dead.value()], 0);
  svc().reset();
  std::filesystem::remove_all(dir);
}

// `aquifer server undrain`: a drain can be called off. The server is "in" again, its drain tasks
// are gone, it keeps the positions not moved yet, and it can be drained again.
TEST_F(MovesTest, UndrainCancelsTheDrainAndTheServerKeepsItsPositions) {
  AddServers(7);
  File(kRootInode, "f");
  const ServerId drained = Ids()[5];
  const int held = Held(Table())[drained.value()];
  ASSERT_GT(held, 0);
  ASSERT_TRUE(svc_->DrainServer(drained).ok());
  ASSERT_FALSE(svc_->GetMoves().moves.empty());
  auto u = svc_->UndrainServer(drained);
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->moves_cancelled, static_cast<uint32_t>(held));
  EXPECT_EQ(u->positions_held, static_cast<uint32_t>(held));
  for (const MoveInfo& m : svc_->GetMoves().moves) EXPECT_NE(m.task.from, drained);
  for (const auto& s : svc_->GetClusterMap().servers) {
    if (s.record.id == drained) EXPECT_EQ(s.record.state, MemberState::kIn);
  }
  EXPECT_EQ(Held(Table())[drained.value()], held);
  // Undrain of a server that is not draining changes nothing; of an unknown one, kNotFound.
  auto again = svc_->UndrainServer(drained);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->moves_cancelled, 0u);
  EXPECT_EQ(svc_->UndrainServer(ServerId(999)).status().code(), Code::kNotFound);
  // A new drain marks it draining again (its moves are planned once the cancelled tasks'
  // destinations have collected what they copied).
  auto d = svc_->DrainServer(drained);
  ASSERT_TRUE(d.ok());
  for (const auto& s : svc_->GetClusterMap().servers) {
    if (s.record.id == drained) EXPECT_EQ(s.record.state, MemberState::kDraining);
  }
}

TEST_F(MovesTest, DrainMovesEveryPositionOffThenRemoveSucceeds) {
  AddServers(7);
  File(kRootInode, "f");
  const ServerId drained = Ids()[5];
  const int held = Held(Table())[drained.value()];
  auto d = svc_->DrainServer(drained);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->positions_held, static_cast<uint32_t>(held));
  EXPECT_EQ(d->moves_scheduled, static_cast<uint32_t>(held));
  for (const MoveInfo& m : svc_->GetMoves().moves) {
    EXPECT_EQ(m.task.kind, MoveKind::kDrain);
    EXPECT_EQ(m.task.from, drained);
  }
  ExpectDistinctDomains();
  // A draining server takes no new PG table.
  ASSERT_TRUE(svc_->SetXattr(kRootInode, kLayoutXattr, "k=3 m=2", 0, Root()).ok());
  File(kRootInode, "narrow");
  for (const PgTable& t : svc_->GetClusterMap().pg_tables) {
    if (t.width != 5) continue;
    for (const auto& pg : t.pgs) {
      EXPECT_EQ(std::count(pg.begin(), pg.end(), drained), 0);
    }
  }
  EXPECT_EQ(FinishAllMoves(), held);
  EXPECT_EQ(Held(Table())[drained.value()], 0);
  auto removed = svc_->RemoveServer(drained, false);
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(removed->positions_held, 0u);
  for (const auto& s : svc_->GetClusterMap().servers) {
    if (s.record.id != drained) continue;
    EXPECT_EQ(s.record.state, MemberState::kRemoved);
    EXPECT_FALSE(s.up);
  }
  EXPECT_TRUE(svc_->GetMoves().degraded.empty());
}

TEST_F(MovesTest, RemoveIsRefusedWhileTheServerHoldsPositionsUnlessForced) {
  AddServers(7);
  File(kRootInode, "f");
  const ServerId victim = Ids()[0];
  const int held = Held(Table())[victim.value()];
  auto refused = svc_->RemoveServer(victim, false);
  ASSERT_EQ(refused.status().code(), Code::kNotEmpty);
  EXPECT_NE(refused.status().message().find("still holds " + std::to_string(held) + " PG"),
            std::string::npos)
      << refused.status().message();
  EXPECT_TRUE(svc_->GetMoves().moves.empty());
  EXPECT_EQ(svc_->RemoveServer(ServerId(999), false).status().code(), Code::kNotFound);

  // Forced: repaired at once, without waiting for the repair delay.
  auto forced = svc_->RemoveServer(victim, true);
  ASSERT_TRUE(forced.ok()) << forced.status().ToString();
  EXPECT_EQ(forced->moves_scheduled, static_cast<uint32_t>(held));
  for (const MoveInfo& m : svc_->GetMoves().moves) {
    EXPECT_EQ(m.task.kind, MoveKind::kRepair);
    EXPECT_EQ(m.task.from, victim);
  }
  // Its heartbeats do not bring it back up; it is told it is removed.
  auto hb = Beat(victim);
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(hb->state, MemberState::kRemoved);
  for (const auto& s : svc_->GetClusterMap().servers) {
    if (s.record.id == victim) EXPECT_FALSE(s.up);
  }
  EXPECT_EQ(FinishAllMoves({victim.value()}), held);
  EXPECT_EQ(Held(Table())[victim.value()], 0);
  ExpectDistinctDomains();
}

TEST_F(MovesTest, AddingThreeServersToSixSpreadsPositionsEvenly) {
  AddServers(6);
  Inode f = File(kRootInode, "f");
  ASSERT_EQ(Table().pgs.size(), 64u);
  const PgTable t0 = Table();
  AddServers(3, "new");  // 9 servers in 9 domains
  svc_->Tick();           // plans the rebalance (servers registering together plan together)
  const PgTable t1 = Table();
  // New PGs for new files at once; the 64 PGs of existing files keep their targets (only pending
  // targets are added), so f's layout (pg_count 64) stays valid.
  ASSERT_EQ(t1.pgs.size(), 96u);  // 64 * 9 / 6: positions per server stay 64
  EXPECT_TRUE(std::equal(t0.pgs.begin(), t0.pgs.end(), t1.pgs.begin()));
  EXPECT_EQ(svc_->GetAttr(f.ino)->layout.pg_count, 64u);
  EXPECT_EQ(File(kRootInode, "g").layout.pg_count, 96u);
  MovesReport r = svc_->GetMoves();
  ASSERT_FALSE(r.moves.empty());
  for (const MoveInfo& m : r.moves) EXPECT_EQ(m.task.kind, MoveKind::kRebalance);
  // 3 new servers each held 32 positions of the new PGs; they need 32 more each: 96 moves, no
  // more (only the surplus moves).
  EXPECT_EQ(r.moves.size(), 96u);
  std::map<uint32_t, int> running;
  for (const MoveInfo& m : r.moves) running[m.task.to.value()] += m.running;
  for (const auto& [to, n] : running) EXPECT_LE(n, 2);
  ExpectDistinctDomains();

  // Tolerance: once the moves finish every server holds its capacity share (96 * 6 / 9 = 64
  // positions) within one position.
  EXPECT_EQ(FinishAllMoves(), 96);
  auto held = Held(Table());
  ASSERT_EQ(held.size(), 9u);
  for (const auto& [id, n] : held) {
    EXPECT_GE(n, 63) << "server " << id;
    EXPECT_LE(n, 65) << "server " << id;
  }
  ExpectDistinctDomains();
  // Sources are told to drop what moved away, after the catch-up window.
  mono_ms_ += kPgGcDelayMs;
  size_t gcs = 0;
  for (ServerId id : Ids()) gcs += Beat(id)->pg_gc.size();
  EXPECT_EQ(gcs, 96u);
}

TEST_F(MovesTest, AFlappingServerSchedulesNothing) {
  AddServers(7);
  File(kRootInode, "f");
  const ServerId flappy = Ids()[6];
  const PgTable t0 = Table();
  for (int i = 0; i < 3; ++i) {
    Advance(opts_.heartbeat_timeout_ms + 200, {flappy.value()});  // down
    ASSERT_FALSE(svc_->GetClusterMap().servers[6].up);
    Advance(200);  // back before the repair delay
    ASSERT_TRUE(svc_->GetClusterMap().servers[6].up);
  }
  Advance(kRepairDelayMs * 3);
  EXPECT_TRUE(svc_->GetMoves().moves.empty());
  EXPECT_EQ(Table().pgs, t0.pgs);
  EXPECT_TRUE(svc_->GetMoves().degraded.empty());
}

TEST_F(MovesTest, ATaskWhoseDestinationDiesIsReplanned) {
  AddServers(8);
  File(kRootInode, "f");
  const ServerId dead = Ids()[0];
  Advance(opts_.heartbeat_timeout_ms + kRepairDelayMs + 200, {dead.value()});
  MovesReport r = svc_->GetMoves();
  ASSERT_FALSE(r.moves.empty());
  const ServerId dest = r.moves[0].task.to;
  const auto moved = std::make_tuple(r.moves[0].task.pg_width, r.moves[0].task.pg_index,
                                     r.moves[0].task.position);
  Advance(opts_.heartbeat_timeout_ms + kRepairDelayMs + 200, {dead.value(), dest.value()});
  r = svc_->GetMoves();
  bool found = false;
  for (const MoveInfo& m : r.moves) {
    EXPECT_NE(m.task.to, dest);
    EXPECT_NE(m.task.to, dead);
    if (std::make_tuple(m.task.pg_width, m.task.pg_index, m.task.position) == moved) found = true;
  }
  EXPECT_TRUE(found) << "the position is still being repaired, elsewhere";
  ExpectDistinctDomains();
}

TEST_F(MovesTest, AFailedTaskIsRetriedUnderANewId) {
  AddServers(7);
  File(kRootInode, "f");
  const ServerId victim = Ids()[2];
  ASSERT_TRUE(svc_->RemoveServer(victim, true).ok());
  MoveTask task;
  for (const MoveInfo& m : svc_->GetMoves().moves) {
    if (m.running) task = m.task;
  }
  ASSERT_NE(task.id, 0u);
  ASSERT_TRUE(Beat(task.to, {MoveProgress{task.id, 0, 0, 0, 0, false, "disk full"}}).ok());
  bool retried = false;
  for (const MoveInfo& m : svc_->GetMoves().moves) {
    EXPECT_NE(m.task.id, task.id);
    if (m.task.pg_index == task.pg_index && m.task.position == task.position) {
      retried = true;
      EXPECT_GT(m.task.id, task.id);
    }
  }
  EXPECT_TRUE(retried);
}

}  // namespace
}  // namespace aquifer::meta::testing

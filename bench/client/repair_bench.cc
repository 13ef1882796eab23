// Repair throughput and client reads during repair, against a local ProcessCluster of 7 data
// servers (RS 4+2, one spare failure domain). Writes a data set, measures sequential read
// throughput, kills one data server, and while the metadata server repairs its PG positions onto
// the others: samples GetMoves progress (MiB/s of rebuilt chunk bytes) and keeps a reader
// running (MiB/s during repair, degraded). Prints a table and one JSON line.
// Usage: repair_bench [--data-mib N] [--files N] [--move-rate-mib N] [--max-moves N]
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "aquifer/client.h"
#include "aquifer/units.h"
#include "client/rpc/move_admin.h"
#include "testing/process_cluster.h"

using namespace aquifer;
using Clock = std::chrono::steady_clock;

namespace {
double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
void Check(const Status& s, const char* what) {
  if (!s.ok()) {
    std::cerr << what << ": " << s.ToString() << "\n";
    std::exit(1);
  }
}
}  // namespace

int main(int argc, char** argv) {
  uint64_t data_mib = 192;
  int files = 6;
  int64_t move_rate_mib = 200;
  int64_t max_moves = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--data-mib") == 0) data_mib = std::stoull(argv[i + 1]);
    if (std::strcmp(argv[i], "--files") == 0) files = std::stoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--move-rate-mib") == 0) move_rate_mib = std::stoll(argv[i + 1]);
    if (std::strcmp(argv[i], "--max-moves") == 0) max_moves = std::stoll(argv[i + 1]);
  }
  testing::ProcessClusterOptions options;
  options.data_servers = 7;
  options.heartbeat_timeout_ms = 900;
  options.repair_delay_ms = 1000;
  options.pg_gc_delay_ms = 60000;
  options.move_rate_mib = move_rate_mib;
  options.max_concurrent_moves = max_moves;
  testing::ProcessCluster cluster(options);
  Check(cluster.Start(), "start cluster");
  Result<std::unique_ptr<Client>> connected = cluster.NewClient();
  Check(connected.status(), "connect");
  Client& client = **connected;
  const Caller caller{};

  // The data set: `files` files of data_mib / files MiB each.
  const uint64_t file_bytes = data_mib * kMiB / files;
  std::vector<std::string> contents;
  for (int f = 0; f < files; ++f) {
    contents.push_back(testing::RandomBytes(file_bytes, 10 + f));
    Check(client.WriteFile("/d" + std::to_string(f), contents.back(), caller), "write");
  }
  auto read_all_once = [&](Client& c, uint64_t* bytes) -> Status {
    for (int f = 0; f < files; ++f) {
      Result<std::string> r = c.ReadFile("/d" + std::to_string(f), caller);
      if (!r.ok()) return r.status();
      if (*r != contents[f]) return Internal("wrong bytes in /d" + std::to_string(f));
      *bytes += r->size();
    }
    return OkStatus();
  };

  // Read throughput before the failure (each file read whole, one at a time), after one
  // untimed warm-up pass so that before, during and after all read warm page caches.
  uint64_t before_bytes = 0;
  Check(read_all_once(client, &before_bytes), "warm-up read");
  before_bytes = 0;
  auto start = Clock::now();
  Check(read_all_once(client, &before_bytes), "read before");
  const double before_s = Seconds(Clock::now() - start);

  // Kill a server; wait for the repair tasks to appear.
  Check(cluster.CrashDataServer(2), "crash");
  const auto crashed_at = Clock::now();
  client::MoveAdmin& admin = cluster.admin();
  Clock::time_point repair_start;
  for (;;) {
    Result<client::MovesStatus> m = admin.GetMoves();
    if (m.ok() && !m->moves.empty()) {
      repair_start = Clock::now();
      break;
    }
    if (Clock::now() - crashed_at > std::chrono::seconds(30)) {
      std::cerr << "no repair planned\n";
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  // Reader during repair.
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> during_bytes{0};
  std::string reader_error;
  std::thread reader([&] {
    Result<std::unique_ptr<Client>> c = cluster.NewClient();
    if (!c.ok()) {
      reader_error = c.status().ToString();
      return;
    }
    while (!stop.load()) {
      for (int f = 0; f < files && !stop.load(); ++f) {
        Result<std::string> r = (*c)->ReadFile("/d" + std::to_string(f), caller);
        if (!r.ok() || *r != contents[f]) {
          reader_error = r.ok() ? "wrong bytes" : r.status().ToString();
          return;
        }
        if (!stop.load()) during_bytes.fetch_add(r->size());
      }
    }
  });

  // Sample progress until no task is left. A task that vanished finished: count its total.
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> seen;  // id -> (bytes_done, bytes_total)
  Clock::time_point repair_end;
  uint64_t peak_tasks = 0;
  for (;;) {
    Result<client::MovesStatus> m = admin.GetMoves();
    if (m.ok()) {
      peak_tasks = std::max<uint64_t>(peak_tasks, m->moves.size());
      for (const client::MoveEntry& e : m->moves) {
        auto& [done, total] = seen[e.id];
        done = std::max(done, e.bytes_done);
        total = std::max(total, e.bytes_total);
      }
      if (m->moves.empty() && m->degraded_pgs == 0) {
        repair_end = Clock::now();
        break;
      }
    }
    if (Clock::now() - repair_start > std::chrono::minutes(5)) {
      std::cerr << "repair did not finish in 5 minutes\n";
      stop.store(true);
      reader.join();
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  stop.store(true);
  reader.join();
  const double repair_s = Seconds(repair_end - repair_start);
  uint64_t repaired_bytes = 0;
  for (const auto& [id, p] : seen) repaired_bytes += std::max(p.first, p.second);
  if (!reader_error.empty()) {
    std::cerr << "reader during repair: " << reader_error << "\n";
    return 1;
  }

  // After repair.
  uint64_t after_bytes = 0;
  start = Clock::now();
  Check(read_all_once(client, &after_bytes), "read after");
  const double after_s = Seconds(Clock::now() - start);

  const double mib = static_cast<double>(kMiB);
  const double repair_mib_s = repaired_bytes / mib / repair_s;
  const double before_mib_s = before_bytes / mib / before_s;
  const double during_mib_s = during_bytes.load() / mib / repair_s;
  const double after_mib_s = after_bytes / mib / after_s;
  std::printf("%-36s %12s\n", "measure", "value");
  std::printf("%-36s %12.1f\n", "data_set_MiB", static_cast<double>(data_mib));
  std::printf("%-36s %12zu\n", "repair_tasks", seen.size());
  std::printf("%-36s %12.1f\n", "repaired_MiB", repaired_bytes / mib);
  std::printf("%-36s %12.2f\n", "repair_seconds", repair_s);
  std::printf("%-36s %12.1f\n", "repair_MiB_per_s", repair_mib_s);
  std::printf("%-36s %12.2f\n", "crash_to_first_task_seconds",
              Seconds(repair_start - crashed_at));
  std::printf("%-36s %12.1f\n", "read_MiB_per_s_before", before_mib_s);
  std::printf("%-36s %12.1f\n", "read_MiB_per_s_during_repair", during_mib_s);
  std::printf("%-36s %12.1f\n", "read_MiB_per_s_after", after_mib_s);
  nlohmann::json j = {{"bench", "repair"},
                      {"data_set_mib", data_mib},
                      {"files", files},
                      {"repair_tasks", seen.size()},
                      {"peak_tasks_listed", peak_tasks},
                      {"repaired_mib", repaired_bytes / mib},
                      {"repair_seconds", repair_s},
                      {"repair_mib_per_s", repair_mib_s},
                      {"crash_to_first_task_seconds", Seconds(repair_start - crashed_at)},
                      {"read_mib_per_s_before", before_mib_s},
                      {"read_mib_per_s_during_repair", during_mib_s},
                      {"read_mib_per_s_after", after_mib_s},
                      {"move_rate_mib_per_task", move_rate_mib},
                      {"max_concurrent_moves", max_moves},
                      {"layout", "k=4 m=2 unit=1MiB, 7 data servers on one host, 1 killed"}};
  std::cout << j.dump() << std::endl;
  return 0;
}

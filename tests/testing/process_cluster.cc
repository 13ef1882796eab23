#include "testing/process_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "client/rpc/meta_client.h"
#include "common/cluster_key.h"
#include "common/logging.h"
#include "common/tls.h"

#ifndef AQUIFER_META_BIN
#define AQUIFER_META_BIN ""
#endif
#ifndef AQUIFER_DATA_BIN
#define AQUIFER_DATA_BIN ""
#endif

namespace aquifer::testing {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {
constexpr std::chrono::milliseconds kPollInterval{10};
}  // namespace

ProcessCluster::ProcessCluster(ProcessClusterOptions options) : options_(std::move(options)) {
  // AQUIFER_TEST_LOG_LEVEL=debug makes the daemons' logs verbose when a test needs a look.
  if (const char* level = std::getenv("AQUIFER_TEST_LOG_LEVEL")) options_.log_level = level;
  // AQUIFER_TEST_CLIENT_LOG_LEVEL=debug does the same for the client library in this process.
  if (const char* level = std::getenv("AQUIFER_TEST_CLIENT_LOG_LEVEL")) SetupLogging(level);
  char tmpl[] = "/tmp/pcluster-XXXXXX";
  const char* dir = mkdtemp(tmpl);
  root_ = dir ? dir : "/tmp/pcluster-failed";
}

ProcessCluster::~ProcessCluster() {
  for (Proc& p : data_) Kill(p, SIGKILL);
  Kill(meta_, SIGKILL);
  std::error_code ec;
  fs::remove_all(root_, ec);
  if (!key_file_.empty()) SetProcessClusterKey(std::nullopt);
  if (!tls_dir_.empty()) SetProcessTls(nullptr);
}

void ProcessCluster::Kill(Proc& proc, int signal) {
  if (proc.pid <= 0) return;
  kill(proc.pid, signal);
  if (signal == SIGKILL) {
    waitpid(proc.pid, nullptr, 0);
  } else {
    // Wait for a clean exit, then insist.
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (waitpid(proc.pid, nullptr, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        kill(proc.pid, SIGKILL);
        waitpid(proc.pid, nullptr, 0);
        break;
      }
      std::this_thread::sleep_for(kPollInterval);
    }
  }
  proc.pid = -1;
}

Status ProcessCluster::Spawn(Proc& proc, const std::string& binary) {
  if (binary.empty() || access(binary.c_str(), X_OK) != 0) {
    return Unavailable("binary not built: '" + binary + "'");
  }
  std::error_code ec;
  fs::remove(proc.port_file, ec);
  const std::string log = root_ + "/" + proc.name + ".log";
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(binary.c_str()));
  for (std::string& a : proc.args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) return Internal("fork failed");
  if (pid == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  proc.pid = pid;
  return WaitPortFile(proc);
}

Status ProcessCluster::WaitPortFile(Proc& proc) {
  const auto deadline = Clock::now() + options_.start_timeout;
  while (Clock::now() < deadline) {
    int wstatus = 0;
    if (waitpid(proc.pid, &wstatus, WNOHANG) == proc.pid) {
      proc.pid = -1;
      return Unavailable(proc.name + " exited at start; see " + root_ + "/" + proc.name + ".log");
    }
    std::ifstream in(proc.port_file);
    std::string address;
    if (in && std::getline(in, address) && address.find(':') != std::string::npos &&
        address.back() != ':') {
      proc.address = address;
      return OkStatus();
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  return Unavailable(proc.name + " wrote no port file in time; see " + root_ + "/" + proc.name +
                     ".log");
}

Status ProcessCluster::Start() {
  meta_.name = "meta";
  meta_.port_file = root_ + "/meta.port";
  fs::create_directories(root_ + "/meta-db");
  meta_.args = {"--listen", "127.0.0.1:0", "--db", root_ + "/meta-db", "--port-file",
                meta_.port_file, "--k", std::to_string(options_.k), "--m",
                std::to_string(options_.m), "--unit-bytes", std::to_string(options_.unit_bytes),
                "--heartbeat-timeout-ms", std::to_string(options_.heartbeat_timeout_ms),
                "--session-ttl-ms", std::to_string(options_.session_ttl_ms), "--log-level",
                options_.log_level};
  auto knob = [&](const char* flag, int64_t value) {
    if (value < 0) return;
    meta_.args.push_back(flag);
    meta_.args.push_back(std::to_string(value));
  };
  knob("--repair-delay-ms", options_.repair_delay_ms);
  knob("--pg-gc-delay-ms", options_.pg_gc_delay_ms);
  knob("--max-concurrent-moves", options_.max_concurrent_moves);
  knob("--move-rate-mib", options_.move_rate_mib);
  for (const std::string& f : options_.meta_flags) meta_.args.push_back(f);
  if (options_.cluster_key) {
    key_file_ = root_ + "/cluster.key";
    AQ_RETURN_IF_ERROR(WriteNewClusterKeyFile(key_file_));
    AQ_RETURN_IF_ERROR(LoadKeyForProcess(key_file_));
    meta_.args.push_back("--key");
    meta_.args.push_back(key_file_);
  }
  if (options_.tls) {
    tls_dir_ = root_ + "/tls";
    AQ_RETURN_IF_ERROR(WriteNewTlsFiles(tls_dir_, kDefaultTlsServerName));
    tls_flags_ = {"--tls", "--tls-ca", tls_dir_ + "/ca.pem", "--tls-cert",
                  tls_dir_ + "/server.pem", "--tls-key", tls_dir_ + "/server.key"};
    Result<std::shared_ptr<const Tls>> tls = Tls::Load({.ca_file = tls_dir_ + "/ca.pem"}, false);
    if (!tls.ok()) return tls.status();
    SetProcessTls(*tls);
    meta_.args.insert(meta_.args.end(), tls_flags_.begin(), tls_flags_.end());
  }
  AQ_RETURN_IF_ERROR(Spawn(meta_, AQUIFER_META_BIN));
  meta_address_ = meta_.address;
  // Later restarts reuse the port, so clients reconnect to the same address.
  meta_.args[1] = meta_address_;

  admin_ = client::NewGrpcMoveAdmin(meta_address_, std::chrono::milliseconds(5000));
  data_.resize(options_.data_servers);
  for (int i = 0; i < options_.data_servers; ++i) AQ_RETURN_IF_ERROR(SpawnDataServer(i));
  return WaitForUpDataServers(options_.data_servers);
}

Status ProcessCluster::SpawnDataServer(int i) {
  Proc& p = data_[i];
  p.name = "data" + std::to_string(i);
  p.port_file = root_ + "/" + p.name + ".port";
  const std::string dir = data_dir(i);
  fs::create_directories(dir);
  p.args = {"--listen", "127.0.0.1:0", "--dir", dir, "--meta", meta_address_,
            "--failure-domain", "fd" + std::to_string(i), "--port-file", p.port_file,
            "--log-level", options_.log_level};
  for (const std::string& f : options_.data_flags) p.args.push_back(f);
  if (!key_file_.empty()) {
    p.args.push_back("--key");
    p.args.push_back(key_file_);
  }
  p.args.insert(p.args.end(), tls_flags_.begin(), tls_flags_.end());
  return Spawn(p, AQUIFER_DATA_BIN);
}

std::string ProcessCluster::data_dir(int i) const { return root_ + "/data" + std::to_string(i); }

std::string ProcessCluster::data_address(int i) const {
  return i >= 0 && i < static_cast<int>(data_.size()) ? data_[i].address : std::string();
}

Result<int> ProcessCluster::AddDataServer() {
  const int i = static_cast<int>(data_.size());
  data_.emplace_back();
  AQ_RETURN_IF_ERROR(SpawnDataServer(i));
  const auto deadline = Clock::now() + options_.start_timeout;
  Status last;
  while (Clock::now() < deadline) {
    Result<client::ClusterMap> map = GetClusterMap();
    if (map.ok()) {
      for (const auto& [id, s] : map->servers) {
        if (s.address == data_[i].address && s.up) return i;
      }
      last = NotFound("data server " + data_[i].address + " not up in the map yet");
    } else {
      last = map.status();
    }
    std::this_thread::sleep_for(kPollInterval * 5);
  }
  return Unavailable("added data server did not come up: " + last.ToString() + "; logs in " +
                     root_);
}

Result<client::ClusterMap> ProcessCluster::GetClusterMap() {
  auto meta = client::NewGrpcMetaClient(meta_address_, std::chrono::milliseconds(2000));
  return meta->GetClusterMap(0);
}

Result<ServerId> ProcessCluster::DataServerId(int i) {
  if (i < 0 || i >= static_cast<int>(data_.size())) return InvalidArgument("no such server");
  Result<client::ClusterMap> map = GetClusterMap();
  if (!map.ok()) return map.status();
  for (const auto& [id, s] : map->servers) {
    if (s.address == data_[i].address) return id;
  }
  return NotFound("data server " + data_[i].address + " is not in the cluster map");
}

client::MoveAdmin& ProcessCluster::admin() {
  if (!admin_) admin_ = client::NewGrpcMoveAdmin(meta_address_, std::chrono::milliseconds(5000));
  return *admin_;
}

Status ProcessCluster::WaitForMovesDone(std::chrono::milliseconds timeout, bool allow_degraded) {
  const auto deadline = Clock::now() + timeout;
  std::string last = "no answer";
  while (Clock::now() < deadline) {
    Result<client::MovesStatus> moves = admin().GetMoves();
    if (moves.ok()) {
      if (moves->moves.empty() && (allow_degraded || moves->degraded_pgs == 0)) {
        return OkStatus();
      }
      last = std::to_string(moves->moves.size()) + " tasks, " +
             std::to_string(moves->degraded_pgs) + " degraded PGs: " + moves->message;
    } else {
      last = moves.status().ToString();
    }
    std::this_thread::sleep_for(kPollInterval * 10);
  }
  return Unavailable("moves not done by the deadline: " + last);
}

Status ProcessCluster::WaitForUpDataServers(int up) {
  auto meta = client::NewGrpcMetaClient(meta_address_, std::chrono::milliseconds(2000));
  const auto deadline = Clock::now() + options_.start_timeout;
  Status last;
  while (Clock::now() < deadline) {
    Result<client::ClusterMap> map = meta->GetClusterMap(0);
    if (map.ok()) {
      int count = 0;
      for (const auto& [id, s] : map->servers) count += s.up ? 1 : 0;
      // Placement-group tables are built by the metadata server at the first file create.
      if (count == up) return OkStatus();
      last = Unavailable(std::to_string(count) + " data servers up, want " + std::to_string(up));
    } else {
      last = map.status();
    }
    std::this_thread::sleep_for(kPollInterval * 5);
  }
  return Unavailable("cluster not ready: " + last.ToString() + "; logs in " + root_);
}

Status ProcessCluster::CrashDataServer(int i) {
  if (i < 0 || i >= static_cast<int>(data_.size())) return InvalidArgument("no such server");
  Kill(data_[i], SIGKILL);
  return OkStatus();
}

Status ProcessCluster::StopDataServer(int i) {
  if (i < 0 || i >= static_cast<int>(data_.size())) return InvalidArgument("no such server");
  Kill(data_[i], SIGTERM);
  return OkStatus();
}

Status ProcessCluster::PauseDataServer(int i, bool pause) {
  if (i < 0 || i >= static_cast<int>(data_.size())) return InvalidArgument("no such server");
  if (data_[i].pid <= 0) return InvalidArgument("server " + std::to_string(i) + " is not running");
  if (kill(data_[i].pid, pause ? SIGSTOP : SIGCONT) != 0) return Internal("kill failed");
  return OkStatus();
}

Status ProcessCluster::RestartDataServer(int i) {
  if (i < 0 || i >= static_cast<int>(data_.size())) return InvalidArgument("no such server");
  Proc& p = data_[i];
  if (p.pid > 0) Kill(p, SIGKILL);
  AQ_RETURN_IF_ERROR(SpawnDataServer(i));
  int running = 0;
  for (const Proc& d : data_) running += d.pid > 0 ? 1 : 0;
  return WaitForUpDataServers(running);
}

Status ProcessCluster::CrashMeta() {
  Kill(meta_, SIGKILL);
  return OkStatus();
}

Status ProcessCluster::RestartMeta() {
  if (meta_.pid > 0) Kill(meta_, SIGKILL);
  AQ_RETURN_IF_ERROR(Spawn(meta_, AQUIFER_META_BIN));
  int running = 0;
  for (const Proc& d : data_) running += d.pid > 0 ? 1 : 0;
  return WaitForUpDataServers(running);
}

Result<std::unique_ptr<Client>> ProcessCluster::NewClient(ClientOptions options) {
  options.meta_address = meta_address_;
  return Client::Connect(options);
}

}  // namespace aquifer::testing

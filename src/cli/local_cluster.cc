#include "cli/local_cluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cli/file_lock.h"
#include "cli/process.h"
#include "cli/rpc/meta_admin.h"
#include "common/cluster_key.h"
#include "common/tls.h"

namespace aquifer::cli {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr char kMetaExe[] = "aquifer-meta";
constexpr char kDataExe[] = "aquifer-data";
constexpr char kMountExe[] = "aquifer-mount";

// Held while a command reads and changes ROOT/cluster.json (ROOT/cluster.lock).
using RootLock = FileLock;
Result<RootLock> LockRoot(const std::string& root) {
  return FileLock::Acquire(root + "/cluster.lock", 0644);
}

// A local cluster's record, read while holding ROOT's lock, so no other `aquifer cluster` command
// changes it between this read and the caller's SaveClusterState.
struct LockedCluster {
  std::string root;        // absolute
  std::string state_path;  // ROOT/cluster.json
  RootLock lock;
  ClusterState state;
};

// Locks ROOT (which must hold a cluster), then loads its record. Errors: LoadClusterState's
// (kNotFound when ROOT holds no cluster), kInternal when the lock cannot be taken.
Result<LockedCluster> LockExistingCluster(const std::string& root_arg) {
  const std::string root = AbsoluteRoot(root_arg);
  const std::string state_path = ClusterStatePath(root);
  Result<RootLock> lock = LockRoot(root);
  if (!lock.ok()) {
    Result<ClusterState> probe = LoadClusterState(state_path);  // the clearer error, if any
    return probe.ok() ? lock.status() : probe.status();
  }
  Result<ClusterState> loaded = LoadClusterState(state_path);
  if (!loaded.ok()) return loaded.status();
  AQ_RETURN_IF_ERROR(UseLocalClusterKey(root));
  AQ_RETURN_IF_ERROR(UseLocalClusterTls(root));
  return LockedCluster{root, state_path, std::move(*lock), std::move(*loaded)};
}

// kUnavailable unless the cluster's metadata server is running.
Status RequireMetaRunning(const LockedCluster& c) {
  if (!c.state.meta.address.empty() && IsProcessAlive(c.state.meta.pid, kMetaExe)) {
    return OkStatus();
  }
  return Unavailable("the metadata server of " + c.root +
                     " is not running; use `aquifer cluster up --root " + c.root + "`");
}

std::string PortFile(const ClusterState& s, const std::string& name) {
  return s.root + "/run/" + name + ".port";
}

Status DaemonFailed(const Status& why, const std::string& log) {
  return Status(why.code(), why.message() + "; last lines of " + log + ":\n" + TailOfFile(log, 15));
}

// Whether a listening socket can be bound on 127.0.0.1:`port` now, tried the way the daemons'
// gRPC servers bind (SO_REUSEADDR, so a port left in TIME_WAIT counts as free).
bool PortFree(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return true;  // cannot tell; the daemon's own bind decides
  int one = 1;
  (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool free = ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) == 0;
  ::close(fd);
  return free;
}

// The address a (re)started daemon listens on: "127.0.0.1:PORT" with the port `recorded` has,
// so the others keep its address; "127.0.0.1:0" (the kernel picks) when nothing is recorded or
// that port has been taken since (a freed port is anyone's: another program's ephemeral port
// can land on it). A data server on a new port registers its new address with the metadata
// server; a metadata server that moves makes ClusterUp restart the rest.
std::string ListenAddress(const std::string& recorded) {
  Result<uint16_t> port = PortOf(recorded);
  if (!port.ok() || *port == 0 || !PortFree(*port)) return "127.0.0.1:0";
  return "127.0.0.1:" + std::to_string(*port);
}

// Records the address data server `d` serves at now, saying so when it moved (ListenAddress
// found its old port taken).
void SetDataServerAddress(DataServerRecord& d, const std::string& address, std::ostream& out) {
  if (!d.address.empty() && d.address != address) {
    out << "aquifer: " << d.failure_domain << "'s port in " << d.address
        << " was taken; it listens on " << address << " and registers that address\n";
  }
  d.address = address;
}

Result<std::string> StartAndWait(const std::vector<std::string>& argv, const std::string& exe,
                                 const std::string& port_file, const std::string& log,
                                 std::chrono::milliseconds timeout, int* pid_out) {
  ::unlink(port_file.c_str());
  Result<pid_t> pid = SpawnDetached(argv, log);
  if (!pid.ok()) return pid.status();
  *pid_out = *pid;
  Result<std::string> addr = WaitForPortFile(port_file, *pid, exe, timeout);
  if (!addr.ok()) {
    if (IsProcessAlive(*pid, exe)) (void)StopProcess(*pid, exe, std::chrono::seconds(2));
    *pid_out = 0;
    return DaemonFailed(addr.status(), log);
  }
  return addr;
}

// `--key ROOT/cluster.key` when the cluster has a key file (every cluster `cluster up` made
// since the key existed), else nothing: a cluster recorded before it runs as it did.
void AddKeyFlag(const ClusterState& s, std::vector<std::string>* argv) {
  const std::string key = ClusterKeyPath(s.root);
  if (::access(key.c_str(), F_OK) == 0) {
    argv->push_back("--key");
    argv->push_back(key);
  }
}

// The local cluster's TLS files (ClusterTlsDir).
std::string TlsCaPath(const std::string& root) { return ClusterTlsDir(root) + "/ca.pem"; }
std::string TlsCertPath(const std::string& root) { return ClusterTlsDir(root) + "/server.pem"; }
std::string TlsKeyPath(const std::string& root) { return ClusterTlsDir(root) + "/server.key"; }

// `--tls --tls-ca ROOT/tls/ca.pem --tls-cert ROOT/tls/server.pem --tls-key ROOT/tls/server.key`
// for a cluster recorded with TLS (every daemon is a server and a client of the others, so each
// gets all three), else nothing.
void AddTlsFlags(const ClusterState& s, std::vector<std::string>* argv) {
  if (!s.tls) return;
  argv->insert(argv->end(), {"--tls", "--tls-ca", TlsCaPath(s.root), "--tls-cert",
                             TlsCertPath(s.root), "--tls-key", TlsKeyPath(s.root)});
}

// Makes ROOT/tls (a private CA and one server certificate naming "aquifer", 127.0.0.1 and ::1)
// unless it is already complete. Errors: kInvalidArgument when it holds some of the files but
// not all (a half-copied directory is not silently replaced), WriteNewTlsFiles's.
Status EnsureLocalTlsFiles(const std::string& root, std::ostream& out) {
  const std::string dir = ClusterTlsDir(root);
  const std::vector<std::string> needed = {TlsCaPath(root), TlsCertPath(root), TlsKeyPath(root)};
  std::string present, missing;
  for (const std::string& f : needed) {
    std::string& list = ::access(f.c_str(), F_OK) == 0 ? present : missing;
    list += (list.empty() ? "" : ", ") + f;
  }
  if (missing.empty()) return OkStatus();
  if (!present.empty() || ::access((dir + "/ca.key").c_str(), F_OK) == 0) {
    return InvalidArgument(dir + " is incomplete: it lacks " + missing +
                           " (put the files back, or delete " + dir +
                           " while the cluster is down to get new ones)");
  }
  AQ_RETURN_IF_ERROR(MakeDirs(dir));
  AQ_RETURN_IF_ERROR(WriteNewTlsFiles(dir, kDefaultTlsServerName));
  out << "aquifer: made a private CA and a server certificate (name \"" << kDefaultTlsServerName
      << "\") in " << dir << "\n";
  return OkStatus();
}

std::vector<std::string> MetaArgv(const std::string& bin, const ClusterState& s,
                                  const UpOptions& o) {
  std::vector<std::string> argv = {bin,
                                   "--listen", ListenAddress(s.meta.address),
                                   "--db", s.meta.db,
                                   "--port-file", PortFile(s, "meta"),
                                   "--k", std::to_string(s.k),
                                   "--m", std::to_string(s.m),
                                   "--unit-bytes", std::to_string(s.unit_bytes),
                                   "--log-level", o.log_level,
                                   // /metrics and the status page, on a port the kernel
                                   // chooses; `aquifer status` prints it
                                   "--http-listen", "127.0.0.1:0",
                                   "--http-port-file", PortFile(s, "meta.http")};
  AddKeyFlag(s, &argv);
  AddTlsFlags(s, &argv);
  // The client registry (`aquifer client add`); a missing file accepts no client credential.
  argv.push_back("--clients");
  argv.push_back(ClientRegistryPath(s.root));
  if (!o.meta_config.empty()) {
    argv.push_back("--config");
    argv.push_back(o.meta_config);
  }
  for (const std::string& a : s.meta.extra_args) argv.push_back(a);
  return argv;
}

std::vector<std::string> DataArgv(const std::string& bin, const ClusterState& s,
                                  const DataServerRecord& d, const std::string& log_level,
                                  const std::string& config) {
  std::vector<std::string> argv = {bin,
                                   "--listen", ListenAddress(d.address),
                                   "--dir", d.dir,
                                   "--meta", s.meta.address,
                                   "--failure-domain", d.failure_domain,
                                   "--port-file", PortFile(s, d.failure_domain),
                                   "--log-level", log_level,
                                   "--http-listen", "127.0.0.1:0",
                                   "--http-port-file", PortFile(s, d.failure_domain + ".http")};
  AddKeyFlag(s, &argv);
  AddTlsFlags(s, &argv);
  if (d.capacity_bytes > 0) {
    argv.push_back("--capacity-bytes");
    argv.push_back(std::to_string(d.capacity_bytes));
  }
  if (!config.empty()) {
    argv.push_back("--config");
    argv.push_back(config);
  }
  return argv;
}

// Waits until the metadata server reports every data server of `indexes` up (matched by port).
Status WaitServersUp(const ClusterState& s, const std::vector<int>& indexes,
                     std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  std::string missing;
  while (true) {
    Result<ClusterView> view = FetchClusterView(s.meta.address, std::chrono::seconds(3));
    missing.clear();
    if (view.ok()) {
      for (int idx : indexes) {
        const DataServerRecord& d = s.data_servers[static_cast<size_t>(idx - 1)];
        Result<uint16_t> want = PortOf(d.address);
        bool up = false;
        for (const ServerView& v : view->servers) {
          Result<uint16_t> port = PortOf(v.address);
          if (v.up && want.ok() && port.ok() && *port == *want) up = true;
        }
        if (!up) missing += (missing.empty() ? "" : ", ") + d.failure_domain;
      }
      if (missing.empty()) return OkStatus();
    } else {
      missing = view.status().ToString();
    }
    if (Clock::now() >= deadline) {
      return Unavailable("the metadata server at " + s.meta.address +
                         " does not report these data servers up: " + missing);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// Waits for new data server `d`'s port file and then until the metadata server reports it up,
// saving the record on the way. New servers are started one at a time through this: the
// metadata server numbers servers in registration order, so on a new cluster (and a grow with
// no server removed) dsN gets id N. Errors: the daemon's failure with the tail of its log, or
// kUnavailable from WaitServersUp.
Status WaitRegistered(ClusterState& s, DataServerRecord& d, const std::string& state_path,
                      std::chrono::milliseconds timeout) {
  Result<std::string> addr = WaitForPortFile(PortFile(s, d.failure_domain), d.pid, kDataExe,
                                             timeout);
  if (!addr.ok()) {
    d.pid = 0;
    (void)SaveClusterState(state_path, s);
    return DaemonFailed(addr.status(), d.log);
  }
  d.address = *addr;
  AQ_RETURN_IF_ERROR(SaveClusterState(state_path, s));
  return WaitServersUp(s, {d.index}, timeout);
}

Status Unmount(const std::string& dir, bool lazy_fallback, std::ostream& out) {
  if (MountTypeAt(dir).empty()) return OkStatus();
  for (int attempt = 0; attempt < 10; ++attempt) {
    Result<int> rc = RunAndWait({"fusermount3", "-u", dir});
    if (!rc.ok()) return rc.status();
    if (*rc == 0 || MountTypeAt(dir).empty()) return OkStatus();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  if (!lazy_fallback) return Unavailable("cannot unmount " + dir + " (busy?)");
  out << "aquifer: " << dir << " is busy; detaching it lazily (fusermount3 -uz)\n";
  Result<int> rc = RunAndWait({"fusermount3", "-uz", dir});
  if (!rc.ok()) return rc.status();
  if (*rc != 0) return Unavailable("fusermount3 -uz " + dir + " failed");
  return OkStatus();
}

Status WaitMounted(const std::string& dir, pid_t pid, const std::string& log,
                   std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (true) {
    if (MountTypeAt(dir).rfind("fuse", 0) == 0) return OkStatus();
    if (!IsProcessAlive(pid, kMountExe)) {
      return DaemonFailed(Unavailable("aquifer-mount exited before mounting " + dir), log);
    }
    if (Clock::now() >= deadline) {
      (void)StopProcess(pid, kMountExe, std::chrono::seconds(2));
      return DaemonFailed(Unavailable("aquifer-mount did not mount " + dir + " in time"), log);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

DataServerRecord NewDataServer(const std::string& root, int index, uint64_t capacity_bytes) {
  DataServerRecord d;
  d.index = index;
  d.failure_domain = "ds" + std::to_string(index);
  d.dir = root + "/data/" + d.failure_domain;
  d.capacity_bytes = capacity_bytes;
  d.log = root + "/logs/" + d.failure_domain + ".log";
  return d;
}

// A new record for `o` (nothing started yet).
ClusterState NewState(const UpOptions& o, const std::string& root) {
  ClusterState s;
  s.root = root;
  s.k = o.k;
  s.m = o.m;
  s.unit_bytes = o.unit_bytes;
  s.meta.db = root + "/meta/db";
  s.meta.log = root + "/logs/meta.log";
  for (int i = 1; i <= o.data_servers; ++i) {
    s.data_servers.push_back(NewDataServer(root, i, o.capacity_bytes));
  }
  s.meta.extra_args = o.meta_args;
  if (!o.no_mount) {
    s.mount.dir = o.mount_dir.empty() ? root + "/mnt" : AbsoluteRoot(o.mount_dir);
    s.mount.log = root + "/logs/mount.log";
  }
  return s;
}

Status CheckOptions(const UpOptions& o) {
  if (o.data_servers < 1 || o.data_servers > 64) {
    return InvalidArgument("--data-servers must be 1..64");
  }
  if (o.k < 1 || o.k > 16 || o.m < 1 || o.m > 4) {
    return InvalidArgument("--k must be 1..16 and --m 1..4 (the erasure codec's range)");
  }
  if (o.unit_bytes < 4096 || o.unit_bytes % 4096 != 0) {
    return InvalidArgument("--unit-bytes must be a multiple of 4096");
  }
  if (static_cast<uint32_t>(o.data_servers) < o.k + o.m) {
    return InvalidArgument("--data-servers " + std::to_string(o.data_servers) +
                           " is fewer than k+m = " + std::to_string(o.k + o.m) +
                           " (each chunk of a stripe needs its own failure domain)");
  }
  return OkStatus();
}

const char* Word(bool started) { return started ? "started" : "running"; }

// How a mount started now talks to the kernel, and how to change it: aquifer-mount's default
// (-o transport=auto) takes FUSE over io_uring when the fuse module offers it.
std::string FuseTransportLine(const std::string& mount_options) {
  if (mount_options.find("transport=dev") != std::string::npos) return "/dev/fuse (transport=dev)";
  std::ifstream param("/sys/module/fuse/parameters/enable_uring");
  std::string v;
  if (!param.is_open()) {
    return "/dev/fuse (this kernel has no FUSE over io_uring: it needs Linux 6.14+ with "
           "CONFIG_FUSE_IO_URING)";
  }
  if (param >> v && (v == "Y" || v == "1")) return "FUSE over io_uring (fuse.enable_uring=Y)";
  return "/dev/fuse; for FUSE over io_uring, as root: echo 1 > "
         "/sys/module/fuse/parameters/enable_uring, then mount again (docs/operations.md)";
}

}  // namespace

std::string AbsoluteRoot(const std::string& root) {
  std::string p = fs::absolute(fs::path(root)).lexically_normal().string();
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

std::string ClusterKeyPath(const std::string& root) { return root + "/cluster.key"; }

std::string ClusterTlsDir(const std::string& root) { return AbsoluteRoot(root) + "/tls"; }

Status UseTlsCa(const std::string& ca_file, const std::string& server_name) {
  TlsFiles files;
  files.ca_file = ca_file;
  if (!server_name.empty()) files.server_name = server_name;
  // The same rules as a mount's: the file given, else $AQUIFER_TLS_CA, else no TLS.
  Result<std::shared_ptr<const Tls>> tls = LoadTlsForProcess(false, files, /*server=*/false);
  if (!tls.ok()) {
    return tls.status().WithPrefix("TLS CA " + (ca_file.empty() ? "$AQUIFER_TLS_CA" : ca_file));
  }
  return OkStatus();
}

Status UseLocalClusterTls(const std::string& root) {
  const char* env = std::getenv("AQUIFER_TLS_CA");
  const std::string ca = TlsCaPath(AbsoluteRoot(root));
  if ((env != nullptr && *env != '\0') || ::access(ca.c_str(), F_OK) != 0) {
    return UseTlsCa("", "");
  }
  return UseTlsCa(ca, "");
}

std::string ClientRegistryPath(const std::string& root) {
  return AbsoluteRoot(root) + "/clients";
}

Status UseLocalClusterKey(const std::string& root) {
  const std::string explicit_key = KeyFilePath("");
  if (!explicit_key.empty() || ::access(ClusterKeyPath(root).c_str(), F_OK) != 0) {
    return LoadKeyForProcess(explicit_key);
  }
  return LoadKeyForProcess(ClusterKeyPath(root));
}

std::string ClusterStatePath(const std::string& root) {
  return AbsoluteRoot(root) + "/cluster.json";
}

Result<ClusterState> ClusterUp(const UpOptions& o, std::ostream& out) {
  AQ_RETURN_IF_ERROR(CheckOptions(o));
  const std::string root = AbsoluteRoot(o.root);
  Result<std::string> meta_bin = FindBinary(kMetaExe, o.bin_dir);
  if (!meta_bin.ok()) return meta_bin.status();
  Result<std::string> data_bin = FindBinary(kDataExe, o.bin_dir);
  if (!data_bin.ok()) return data_bin.status();
  Result<std::string> mount_bin = FindBinary(kMountExe, o.bin_dir);
  if (!mount_bin.ok() && !o.no_mount) return mount_bin.status();
  AQ_RETURN_IF_ERROR(MakeDirs(root + "/logs"));
  AQ_RETURN_IF_ERROR(MakeDirs(root + "/run"));
  // The cluster key (docs/operations.md "The cluster key"): made once, kept across restarts.
  if (Status made = WriteNewClusterKeyFile(ClusterKeyPath(root));
      !made.ok() && made.code() != Code::kAlreadyExists) {
    return made;
  }
  AQ_RETURN_IF_ERROR(UseLocalClusterKey(root));
  Result<RootLock> lock = LockRoot(root);
  if (!lock.ok()) return lock.status();

  const std::string state_path = ClusterStatePath(root);
  ClusterState s;
  Result<ClusterState> loaded = LoadClusterState(state_path);
  bool fresh = false;
  if (loaded.ok()) {
    s = std::move(*loaded);
    if (s.root != root) {
      return InvalidArgument(state_path + " belongs to root " + s.root + ", not " + root);
    }
    if (o.data_servers_given && static_cast<size_t>(o.data_servers) != s.data_servers.size()) {
      return InvalidArgument("the cluster at " + root + " has " +
                             std::to_string(s.data_servers.size()) +
                             " data servers; --data-servers cannot change that (use another "
                             "--root, or `cluster down` and delete " + root + ")");
    }
    if (o.layout_given && (o.k != s.k || o.m != s.m || o.unit_bytes != s.unit_bytes)) {
      return InvalidArgument("the cluster at " + root + " has default layout k=" +
                             std::to_string(s.k) + " m=" + std::to_string(s.m) +
                             "; use `aquifer layout set` on a directory instead");
    }
    if (!o.mount_dir.empty() && AbsoluteRoot(o.mount_dir) != s.mount.dir) {
      if (!s.mount.dir.empty() && IsProcessAlive(s.mount.pid, kMountExe)) {
        return InvalidArgument("the cluster is mounted at " + s.mount.dir +
                               "; run `cluster down` before choosing another --mount");
      }
      s.mount.dir = AbsoluteRoot(o.mount_dir);
      if (s.mount.log.empty()) s.mount.log = root + "/logs/mount.log";
    }
    if (!o.meta_args.empty()) s.meta.extra_args = o.meta_args;
    if (o.tls && !s.tls) {
      // Turning TLS on: every daemon and the mount must restart with it together.
      bool any_alive = IsProcessAlive(s.meta.pid, kMetaExe) ||
                       (!s.mount.dir.empty() && IsProcessAlive(s.mount.pid, kMountExe));
      for (const DataServerRecord& d : s.data_servers) {
        any_alive |= !d.removed && IsProcessAlive(d.pid, kDataExe);
      }
      if (any_alive) {
        return InvalidArgument("the cluster at " + root + " runs without TLS; `aquifer cluster "
                               "down --root " + root + "` first, then `cluster up --tls` starts "
                               "every daemon and the mount with it");
      }
      s.tls = true;
    }
  } else if (loaded.status().code() == Code::kNotFound) {
    s = NewState(o, root);
    s.tls = o.tls;
    fresh = true;
  } else {
    return Status(loaded.status().code(),
                  loaded.status().message() + " (fix or delete it, or use another --root)");
  }


  out << "aquifer: " << (fresh ? "creating" : "checking") << " the local cluster at " << root
      << " (default layout RS " << s.k << "+" << s.m << ", stripe unit " << s.unit_bytes
      << " bytes)\n";
  AQ_RETURN_IF_ERROR(MakeDirs(s.meta.db));
  // TLS (the record's choice, so restarts keep it): the files, and this process's own calls
  // (the waits below) go through it too.
  if (s.tls) {
    AQ_RETURN_IF_ERROR(EnsureLocalTlsFiles(root, out));
    AQ_RETURN_IF_ERROR(UseLocalClusterTls(root));
    out << "  tls    on: CA " << TlsCaPath(root) << " (clients: -o tls_ca=FILE or "
        << "AQUIFER_TLS_CA=FILE), server certificate " << TlsCertPath(root) << "\n";
  } else {
    AQ_RETURN_IF_ERROR(UseTlsCa("", ""));
  }

  // Metadata server: on the port it had, so data servers and the mount keep their address.
  bool meta_started = false;
  if (!IsProcessAlive(s.meta.pid, kMetaExe)) {
    const std::string old_address = s.meta.address;
    Result<std::string> addr = StartAndWait(MetaArgv(*meta_bin, s, o), kMetaExe,
                                            PortFile(s, "meta"), s.meta.log, o.timeout,
                                            &s.meta.pid);
    if (!addr.ok()) {
      (void)SaveClusterState(state_path, s);
      return addr.status();
    }
    s.meta.address = *addr;
    meta_started = true;
    AQ_RETURN_IF_ERROR(SaveClusterState(state_path, s));
    if (!old_address.empty() && old_address != s.meta.address) {
      // Its old port was taken (ListenAddress): the others must follow the new address.
      out << "aquifer: the metadata server moved from " << old_address << " to "
          << s.meta.address << "; restarting the data servers and the mount\n";
      for (DataServerRecord& d : s.data_servers) {
        (void)StopProcess(d.pid, kDataExe, std::chrono::seconds(10));
        d.pid = 0;
      }
      if (!s.mount.dir.empty()) {
        (void)Unmount(s.mount.dir, /*lazy_fallback=*/true, out);
        (void)StopProcess(s.mount.pid, kMountExe, std::chrono::seconds(10));
        s.mount.pid = 0;
      }
    }
  }
  out << "  meta   " << s.meta.address << "  pid " << s.meta.pid << "  " << Word(meta_started)
      << "  db " << s.meta.db << "  log " << s.meta.log << "\n";

  // Data servers: start every missing one, then wait for each port file. A server that never
  // registered (no address recorded yet) is started alone and waited for (WaitRegistered); the
  // others start together.
  std::vector<int> started;
  for (DataServerRecord& d : s.data_servers) {
    if (d.removed || IsProcessAlive(d.pid, kDataExe)) continue;
    const bool is_new = d.address.empty();
    AQ_RETURN_IF_ERROR(MakeDirs(d.dir));
    ::unlink(PortFile(s, d.failure_domain).c_str());
    Result<pid_t> pid = SpawnDetached(DataArgv(*data_bin, s, d, o.log_level, o.data_config),
                                      d.log);
    if (!pid.ok()) return pid.status();
    d.pid = *pid;
    started.push_back(d.index);
    if (is_new) AQ_RETURN_IF_ERROR(WaitRegistered(s, d, state_path, o.timeout));
  }
  AQ_RETURN_IF_ERROR(SaveClusterState(state_path, s));
  Status data_status;
  for (int idx : started) {
    DataServerRecord& d = s.data_servers[static_cast<size_t>(idx - 1)];
    Result<std::string> addr =
        WaitForPortFile(PortFile(s, d.failure_domain), d.pid, kDataExe, o.timeout);
    if (!addr.ok()) {
      d.pid = 0;
      if (data_status.ok()) data_status = DaemonFailed(addr.status(), d.log);
      continue;
    }
    SetDataServerAddress(d, *addr, out);
  }
  AQ_RETURN_IF_ERROR(SaveClusterState(state_path, s));
  AQ_RETURN_IF_ERROR(data_status);
  std::vector<int> all;
  for (const DataServerRecord& d : s.data_servers) {
    if (!d.removed) all.push_back(d.index);
  }
  AQ_RETURN_IF_ERROR(WaitServersUp(s, all, o.timeout));
  for (const DataServerRecord& d : s.data_servers) {
    if (d.removed) {
      out << "  " << d.failure_domain << "  removed from the cluster (not started)\n";
      continue;
    }
    bool was_started = false;
    for (int idx : started) was_started |= idx == d.index;
    out << "  " << d.failure_domain << (d.failure_domain.size() < 5 ? std::string(5 - d.failure_domain.size(), ' ') : "")
        << "  " << d.address << "  pid " << d.pid << "  " << Word(was_started) << "  dir "
        << d.dir << "\n";
  }

  // The mount: in the foreground (-f) so its pid is the one we record.
  if (!s.mount.dir.empty() && !o.no_mount) {
    bool mount_alive = IsProcessAlive(s.mount.pid, kMountExe);
    bool mounted = MountTypeAt(s.mount.dir).rfind("fuse", 0) == 0;
    bool mount_started = false;
    if (!mount_alive || !mounted) {
      if (mounted) {
        out << "aquifer: clearing a dead mount at " << s.mount.dir << "\n";
        AQ_RETURN_IF_ERROR(Unmount(s.mount.dir, /*lazy_fallback=*/true, out));
      } else if (!MountTypeAt(s.mount.dir).empty()) {
        return InvalidArgument(s.mount.dir + " already has a non-FUSE mount on it");
      }
      if (mount_alive) (void)StopProcess(s.mount.pid, kMountExe, std::chrono::seconds(5));
      AQ_RETURN_IF_ERROR(MakeDirs(s.mount.dir));
      std::vector<std::string> argv = {
          *mount_bin, s.meta.address, s.mount.dir, "-f", "-o",
          "http_listen=127.0.0.1:0,http_port_file=" + PortFile(s, "mount.http")};
      if (::access(ClusterKeyPath(s.root).c_str(), F_OK) == 0) {
        argv.push_back("-o");
        argv.push_back("key=" + ClusterKeyPath(s.root));
      }
      if (s.tls) {
        argv.push_back("-o");
        argv.push_back("tls_ca=" + TlsCaPath(s.root));
      }
      if (!o.mount_options.empty()) {
        argv.push_back("-o");
        argv.push_back(o.mount_options);
      }
      Result<pid_t> pid = SpawnDetached(argv, s.mount.log);
      if (!pid.ok()) return pid.status();
      s.mount.pid = *pid;
      Status st = WaitMounted(s.mount.dir, *pid, s.mount.log, o.timeout);
      if (!st.ok()) s.mount.pid = 0;
      AQ_RETURN_IF_ERROR(SaveClusterState(state_path, s));
      AQ_RETURN_IF_ERROR(st);
      mount_started = true;
    }
    out << "  mount  " << s.mount.dir << "  pid " << s.mount.pid << "  "
        << (mount_started ? "mounted" : "already mounted") << "  log " << s.mount.log << "\n"
        << "  fuse   " << FuseTransportLine(o.mount_options) << "\n";
  }
  AQ_RETURN_IF_ERROR(SaveClusterState(state_path, s));
  out << "aquifer: cluster up: metadata server " << s.meta.address << ", "
      << s.data_servers.size() << " data servers"
      << (s.mount.dir.empty() || o.no_mount ? "" : ", mounted at " + s.mount.dir) << "\n"
      << "  record  " << state_path << "\n"
      << "  logs    " << root << "/logs/\n"
      << "  status  aquifer status --root " << root << "\n"
      << "  stop    aquifer cluster down --root " << root << "\n";
  return s;
}

Status ClusterDown(const std::string& root_arg, std::chrono::milliseconds grace,
                   std::ostream& out) {
  Result<LockedCluster> locked = LockExistingCluster(root_arg);
  if (!locked.ok()) return locked.status();
  const std::string& root = locked->root;
  const std::string& state_path = locked->state_path;
  ClusterState& s = locked->state;
  Status first_error;
  auto note = [&first_error](const Status& st) {
    if (!st.ok() && first_error.ok()) first_error = st;
  };

  if (!s.mount.dir.empty()) {
    Status st = Unmount(s.mount.dir, /*lazy_fallback=*/true, out);
    note(st);
    Result<bool> killed = StopProcess(s.mount.pid, kMountExe, grace);
    note(killed.status());
    out << "  mount  " << s.mount.dir << (st.ok() ? " unmounted" : " NOT unmounted")
        << (killed.ok() && *killed ? " (aquifer-mount needed SIGKILL)" : "") << "\n";
    if (killed.ok()) s.mount.pid = 0;
  }
  // SIGTERM every data server first so they stop in parallel, then wait for each.
  std::vector<bool> alive;
  for (const DataServerRecord& d : s.data_servers) {
    alive.push_back(IsProcessAlive(d.pid, kDataExe));
    if (alive.back()) ::kill(d.pid, SIGTERM);
  }
  int stopped = 0;
  for (size_t i = 0; i < s.data_servers.size(); ++i) {
    DataServerRecord& d = s.data_servers[i];
    bool was_alive = alive[i];
    Result<bool> killed = StopProcess(d.pid, kDataExe, grace);
    note(killed.status());
    if (!killed.ok()) continue;
    if (was_alive) ++stopped;
    if (*killed) out << "  " << d.failure_domain << " needed SIGKILL\n";
    d.pid = 0;
  }
  out << "  data   " << stopped << " of " << s.data_servers.size() << " data servers stopped\n";
  bool meta_alive = IsProcessAlive(s.meta.pid, kMetaExe);
  Result<bool> killed = StopProcess(s.meta.pid, kMetaExe, grace);
  note(killed.status());
  if (killed.ok()) {
    out << "  meta   " << (meta_alive ? "stopped" : "was not running")
        << (*killed ? " (needed SIGKILL)" : "") << "\n";
    s.meta.pid = 0;
  }
  note(SaveClusterState(state_path, s));
  if (first_error.ok()) {
    out << "aquifer: cluster down; data kept under " << root << " (`aquifer cluster up --root "
        << root << "` brings it back)\n";
  }
  return first_error;
}

namespace {
// "no data server 0 in the cluster at ROOT (indexes are 1..6)".
Status NoSuchDataServer(int index, const ClusterState& s) {
  const std::string range = s.data_servers.empty()
                                ? "it has none"
                                : "indexes are 1.." + std::to_string(s.data_servers.size());
  return NotFound("no data server " + std::to_string(index) + " in the cluster at " + s.root +
                  " (" + range + ")");
}
}  // namespace

Status StopDataServer(const std::string& root_arg, int index, bool kill,
                      std::chrono::milliseconds grace, std::ostream& out) {
  Result<LockedCluster> locked = LockExistingCluster(root_arg);
  if (!locked.ok()) return locked.status();
  const std::string& state_path = locked->state_path;
  ClusterState& s = locked->state;
  if (index < 1 || static_cast<size_t>(index) > s.data_servers.size()) {
    return NoSuchDataServer(index, s);
  }
  DataServerRecord& d = s.data_servers[static_cast<size_t>(index - 1)];
  if (!IsProcessAlive(d.pid, kDataExe)) {
    out << "aquifer: data server " << d.failure_domain << " was not running\n";
  } else {
    Result<bool> killed = StopProcess(d.pid, kDataExe,
                                      kill ? std::chrono::milliseconds(0) : grace);
    if (!killed.ok()) return killed.status();
    out << "aquifer: data server " << d.failure_domain << " (" << d.address << ", pid " << d.pid
        << ") " << (kill ? "killed" : "stopped") << "\n";
  }
  d.pid = 0;
  return SaveClusterState(state_path, s);
}

Status StartDataServer(const std::string& root_arg, int index, const std::string& bin_dir,
                       std::chrono::milliseconds timeout, std::ostream& out) {
  Result<LockedCluster> locked = LockExistingCluster(root_arg);
  if (!locked.ok()) return locked.status();
  const std::string& state_path = locked->state_path;
  ClusterState& s = locked->state;
  if (index < 1 || static_cast<size_t>(index) > s.data_servers.size()) {
    return NoSuchDataServer(index, s);
  }
  AQ_RETURN_IF_ERROR(RequireMetaRunning(*locked));
  DataServerRecord& d = s.data_servers[static_cast<size_t>(index - 1)];
  if (IsProcessAlive(d.pid, kDataExe)) {
    out << "aquifer: data server " << d.failure_domain << " is already running (pid " << d.pid
        << ")\n";
    return OkStatus();
  }
  if (d.removed) {
    out << "aquifer: data server " << d.failure_domain
        << " was removed; starting it makes it register again and rejoin the cluster\n";
    d.removed = false;
  }
  Result<std::string> data_bin = FindBinary(kDataExe, bin_dir);
  if (!data_bin.ok()) return data_bin.status();
  AQ_RETURN_IF_ERROR(MakeDirs(d.dir));
  Result<std::string> addr =
      StartAndWait(DataArgv(*data_bin, s, d, "info", ""), kDataExe,
                   PortFile(s, d.failure_domain), d.log, timeout, &d.pid);
  if (!addr.ok()) {
    (void)SaveClusterState(state_path, s);
    return addr.status();
  }
  SetDataServerAddress(d, *addr, out);
  AQ_RETURN_IF_ERROR(SaveClusterState(state_path, s));
  AQ_RETURN_IF_ERROR(WaitServersUp(s, {index}, timeout));
  out << "aquifer: data server " << d.failure_domain << " started (" << d.address << ", pid "
      << d.pid << ") and registered\n";
  return OkStatus();
}

Status MarkDataServerRemoved(const std::string& root_arg, const std::string& address,
                             std::chrono::milliseconds grace, std::ostream& out) {
  Result<LockedCluster> locked = LockExistingCluster(root_arg);
  if (!locked.ok()) return locked.status();
  const std::string& root = locked->root;
  const std::string& state_path = locked->state_path;
  ClusterState& s = locked->state;
  Result<uint16_t> want = PortOf(address);
  for (DataServerRecord& d : s.data_servers) {
    Result<uint16_t> port = PortOf(d.address);
    if (!want.ok() || !port.ok() || *port != *want) continue;
    if (IsProcessAlive(d.pid, kDataExe)) {
      Result<bool> killed = StopProcess(d.pid, kDataExe, grace);
      if (!killed.ok()) return killed.status();
      out << "aquifer: stopped data server " << d.failure_domain << " (pid " << d.pid
          << "); its directory " << d.dir << " is kept (delete it to reclaim the space)\n";
    }
    d.pid = 0;
    d.removed = true;
    return SaveClusterState(state_path, s);
  }
  return NotFound("no data server at " + address + " in the cluster at " + root);
}

Status GrowCluster(const std::string& root_arg, int count, const std::string& bin_dir,
                   std::chrono::milliseconds timeout, std::ostream& out) {
  Result<LockedCluster> locked = LockExistingCluster(root_arg);
  if (!locked.ok()) return locked.status();
  const std::string& root = locked->root;
  const std::string& state_path = locked->state_path;
  ClusterState& s = locked->state;
  if (count < 1 || s.data_servers.size() + static_cast<size_t>(count) > 64) {
    return InvalidArgument("--data-servers must be >= 1 and the cluster at most 64 data servers "
                           "(it has " + std::to_string(s.data_servers.size()) + ")");
  }
  AQ_RETURN_IF_ERROR(RequireMetaRunning(*locked));
  Result<std::string> data_bin = FindBinary(kDataExe, bin_dir);
  if (!data_bin.ok()) return data_bin.status();
  const uint64_t capacity = s.data_servers.empty() ? 0 : s.data_servers[0].capacity_bytes;
  std::vector<int> added;
  for (int i = 0; i < count; ++i) {
    const int index = static_cast<int>(s.data_servers.size()) + 1;
    s.data_servers.push_back(NewDataServer(root, index, capacity));
    DataServerRecord& d = s.data_servers.back();
    AQ_RETURN_IF_ERROR(MakeDirs(d.dir));
    ::unlink(PortFile(s, d.failure_domain).c_str());
    Result<pid_t> pid = SpawnDetached(DataArgv(*data_bin, s, d, "info", ""), d.log);
    if (!pid.ok()) {
      s.data_servers.pop_back();
      (void)SaveClusterState(state_path, s);
      return pid.status();
    }
    d.pid = *pid;
    added.push_back(index);
    AQ_RETURN_IF_ERROR(WaitRegistered(s, d, state_path, timeout));
  }
  for (int idx : added) {
    const DataServerRecord& d = s.data_servers[static_cast<size_t>(idx - 1)];
    out << "aquifer: data server " << d.failure_domain << " started (" << d.address << ", pid "
        << d.pid << ", dir " << d.dir << ") and registered\n";
  }
  out << "aquifer: the cluster has " << s.data_servers.size()
      << " data servers; the metadata server rebalances PG positions onto the new ones "
         "(`aquifer rebalance wait --root " << root << "`)\n";
  return OkStatus();
}

}  // namespace aquifer::cli

// The `aquifer` command line: parsing (CLI11) into an Invocation, and running it.
//
//   aquifer cluster up [--root DIR] [--data-servers N] [--k K --m M] [--unit-bytes B]
//                      [--mount DIR | --no-mount] [--tls] [--config FILE.toml] ...
//   aquifer cluster down [--root DIR]
//   aquifer cluster stop-server ID [--root DIR] [--kill]
//   aquifer cluster start-server ID [--root DIR]
//   aquifer cluster grow --data-servers N [--root DIR]      (server add, local cluster)
//   aquifer status [--meta HOST:PORT | --root DIR]
//   aquifer server list|drain ID|remove ID [--force]  [--meta HOST:PORT | --root DIR]
//   aquifer repair wait | rebalance wait [--timeout S] [--meta HOST:PORT | --root DIR]
//   aquifer fsck [--repair] [--verbose] [--meta HOST:PORT | --root DIR]
//   aquifer meta backup DEST [--timeout S] [--meta HOST:PORT | --root DIR]
//   aquifer meta restore --from BACKUP --meta-dir DIR [--force] [--ino-margin N]
//   aquifer client add NAME [--path P] [--read-only] [--root-squash] [--allow CIDR]... [--out F]
//   aquifer client list | client remove NAME          [--registry FILE | --root DIR]
//   aquifer tls new DIR [--name NAME] [--days N]
//   aquifer layout get PATH
//   aquifer layout set PATH k=4 m=2 unit=1048576
//   aquifer --version
// Commands that call a cluster take --tls-ca FILE [--tls-server-name NAME] (else
// $AQUIFER_TLS_CA, else a local cluster's ROOT/tls/ca.pem) beside --key.
//
// Exit codes: 0 success, 1 the command failed (fsck: problems remain; wait: timed out), 2 bad
// usage, 3 (repair/rebalance wait) the cluster is waiting for a server (no spare failure domain).
#pragma once

#include <chrono>
#include <ostream>
#include <string>
#include <vector>

#include "aquifer/status.h"
#include "cli/client_admin.h"
#include "cli/local_cluster.h"

namespace aquifer::cli {

enum class Command {
  kHelp,          // --help anywhere, or no command: `help_text` holds what to print
  kClusterUp,
  kClusterDown,
  kStopServer,
  kStartServer,
  kStatus,
  kLayoutGet,
  kLayoutSet,
  kClusterGrow,
  kServerList,
  kServerDrain,
  kServerRemove,
  kServerUndrain,
  kMount,
  kRepairWait,
  kRebalanceWait,
  kFsck,
  kMetaBackup,
  kMetaRestore,
  kClusterKeyNew,  // cluster key new FILE: `path` is the FILE
  kTlsNew,         // tls new DIR: `path` is the DIR, `tls_server_name`, `tls_days`
  kClientAdd,      // client add NAME: `client`, `client_registry`
  kClientList,     // client list: `client_registry`
  kClientRemove,   // client remove NAME: `client.name`, `client_registry`
};

struct Invocation {
  Command command = Command::kHelp;
  std::string help_text;
  UpOptions up;                     // cluster up; up.root is also the --root of other commands
  std::string meta_address;         // status --meta
  std::string key_file;             // --key: the cluster key file ("" = $AQUIFER_KEY_FILE, or
                                    // the local cluster's ROOT/cluster.key)
  std::string tls_ca_file;          // --tls-ca: the CA that signs the servers' certificates
                                    // ("" = $AQUIFER_TLS_CA, or a local cluster's
                                    // ROOT/tls/ca.pem, or no TLS)
  std::string tls_server_name;      // --tls-server-name / tls new --name ("" = "aquifer")
  int tls_days = 3650;              // tls new --days: the server certificate's lifetime, days
  bool root_given = false;          // --root given explicitly
  int server_index = 0;             // stop-server / start-server
  bool kill = false;                // stop-server --kill
  std::chrono::milliseconds grace{10000};  // cluster down / stop-server: SIGTERM -> SIGKILL
  std::string path;                 // layout get/set
  std::vector<std::string> layout_tokens;  // layout set
  int grow_count = 0;               // cluster grow --data-servers
  std::string server_ref;           // server drain/undrain/remove: an id (the metadata server's)
                                    // or a name (a failure domain, e.g. ds3)
  bool all = false;                 // server list --all: removed servers too
  bool force = false;               // server remove --force
  bool yes = false;                 // server remove --force --yes: accept making data unreadable
  double wait_timeout_s = 3600;     // repair/rebalance wait --timeout
  double wait_interval_s = 5;       // repair/rebalance wait: seconds between plain lines
  bool follow = false;              // server drain --wait, cluster grow --wait: then follow the
                                    // moves as `rebalance wait` does
  bool fsck_repair = false;         // fsck --repair
  bool verbose = false;             // fsck --verbose
  std::string backup_dest;          // meta backup DEST (on the metadata server's host)
  std::string restore_from;         // meta restore --from
  std::string meta_dir;             // meta restore --meta-dir (aquifer-meta's --db)
  uint64_t ino_margin = 0;          // meta restore --ino-margin (0: by the backup's age)
  ClientAddRequest client;          // client add/remove: name and (add) its export
  std::string client_registry;      // client *: --registry, else ROOT/clients
};

// Parses `args` (without the program name). Errors: kInvalidArgument with CLI11's message
// for unknown commands or options, bad values, or --meta together with --root; and for a bad
// --config file (unreadable, not TOML, unknown key, wrong type).
Result<Invocation> ParseCommandLine(const std::vector<std::string>& args);

// Applies the [cluster] table of a TOML file to `options` (keys: root, data_servers, k, m,
// unit_bytes, mount, no_mount, mount_options, capacity_bytes, bin_dir, log_level, meta_config,
// data_config, timeout_ms, tls). Errors: kInvalidArgument naming the file and key.
Status ApplyUpConfigFile(const std::string& path, UpOptions* options);

// "aquifer 0.1.0": the project's version (CMake's project(VERSION ...)), as `--version` prints.
std::string VersionText();

// Runs a parsed invocation, printing results to `out` and errors to `err`. Returns the exit code.
int RunInvocation(const Invocation& inv, std::ostream& out, std::ostream& err);

// ParseCommandLine + RunInvocation (usage errors print the message and exit 2).
int RunCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace aquifer::cli

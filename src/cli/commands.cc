#include "cli/commands.h"

#include <algorithm>
#include <sstream>

#include <CLI/CLI.hpp>
#include <toml++/toml.h>

#include "cli/layout_xattr.h"
#include "cli/process.h"
#include "cli/rpc/meta_admin.h"
#include "cli/status_report.h"

namespace aquifer::cli {

namespace {

constexpr char kDataExe[] = "aquifer-data";
constexpr char kMetaExe[] = "aquifer-meta";
constexpr char kMountExe[] = "aquifer-mount";

// Flags of `cluster up` as given on the command line; applied over the config file's values.
struct UpFlags {
  std::string root, mount, mount_options, bin_dir, log_level, config, meta_config, data_config;
  int data_servers = 0;
  uint32_t k = 0, m = 0;
  uint64_t unit_bytes = 0, capacity_bytes = 0;
  int64_t timeout_ms = 0;
  bool no_mount = false;
};

std::string UsageText(CLI::App& app, const CLI::Error& e) {
  std::ostringstream out, err;
  app.exit(e, out, err);
  return out.str() + err.str();
}

template <class T>
Status TomlGet(const toml::table& t, const std::string& key, const std::string& path, T* out) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return OkStatus();
  if constexpr (std::is_same_v<T, std::string>) {
    if (!n->is_string()) return InvalidArgument(path + ": [cluster]." + key + ": expected a string");
    *out = **n->as_string();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!n->is_boolean()) {
      return InvalidArgument(path + ": [cluster]." + key + ": expected true or false");
    }
    *out = **n->as_boolean();
  } else {
    if (!n->is_integer() || **n->as_integer() < 0) {
      return InvalidArgument(path + ": [cluster]." + key + ": expected a non-negative integer");
    }
    *out = static_cast<T>(**n->as_integer());
  }
  return OkStatus();
}

int Fail(std::ostream& err, const Status& st) {
  err << "aquifer: error: " << st.message() << "\n";
  return 1;
}

int RunStatus(const Invocation& inv, std::ostream& out, std::ostream& err) {
  std::optional<LocalProcesses> local;
  std::string address = inv.meta_address;
  if (address.empty()) {
    Result<ClusterState> s = LoadClusterState(ClusterStatePath(inv.up.root));
    if (!s.ok()) {
      return Fail(err, Status(s.status().code(),
                              s.status().message() + " (pass --meta HOST:PORT for a cluster "
                                                     "that `aquifer cluster up` did not start)"));
    }
    LocalProcesses lp;
    lp.state = std::move(*s);
    lp.meta_alive = IsProcessAlive(lp.state.meta.pid, kMetaExe);
    for (const DataServerRecord& d : lp.state.data_servers) {
      lp.data_alive.push_back(IsProcessAlive(d.pid, kDataExe));
    }
    lp.mount_alive = IsProcessAlive(lp.state.mount.pid, kMountExe);
    if (!lp.state.mount.dir.empty()) lp.mount_type = MountTypeAt(lp.state.mount.dir);
    address = lp.state.meta.address;
    local = std::move(lp);
  }
  Result<ClusterView> view =
      address.empty() ? Result<ClusterView>(Unavailable("never started"))
                      : FetchClusterView(address, std::chrono::seconds(5));
  out << FormatStatus(address.empty() ? "(none)" : address, view, local, AquiferMounts());
  return view.ok() ? 0 : 1;
}

int RunLayoutGet(const Invocation& inv, std::ostream& out, std::ostream& err) {
  Result<std::optional<std::string>> v = GetLayoutXattr(inv.path);
  if (!v.ok()) return Fail(err, v.status());
  if (!v->has_value()) {
    out << inv.path << ": no layout of its own (inherits the cluster default)\n";
    return 0;
  }
  out << inv.path << ": " << **v << "\n";
  return 0;
}

int RunLayoutSet(const Invocation& inv, std::ostream& out, std::ostream& err) {
  Result<LayoutSpec> spec = ParseLayoutSpec(inv.layout_tokens);
  if (!spec.ok()) return Fail(err, spec.status());
  std::optional<LayoutSpec> base;
  if (!spec->k || !spec->m || !spec->unit_bytes) {
    Result<std::optional<std::string>> current = GetLayoutXattr(inv.path);
    if (!current.ok()) return Fail(err, current.status());
    if (current->has_value()) {
      Result<LayoutSpec> parsed = ParseLayoutSpec({**current});
      if (!parsed.ok()) {
        return Fail(err, InvalidArgument("current layout '" + **current +
                                         "' is unreadable: " + parsed.status().message()));
      }
      base = *parsed;
    }
  }
  Result<LayoutSpec> full = CompleteLayout(*spec, base);
  if (!full.ok()) return Fail(err, full.status());
  const std::string value = FormatLayout(*full);
  Status st = SetLayoutXattr(inv.path, value);
  if (!st.ok()) return Fail(err, st);
  out << inv.path << ": layout set to " << value << "\n";
  return 0;
}

}  // namespace

Status ApplyUpConfigFile(const std::string& path, UpOptions* o) {
  toml::table doc;
  try {
    doc = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << path << ": " << e.description() << " (line " << e.source().begin.line << ")";
    return InvalidArgument(msg.str());
  }
  static const std::vector<std::string> kKeys = {
      "root", "data_servers", "k", "m", "unit_bytes", "mount", "no_mount", "mount_options",
      "capacity_bytes", "bin_dir", "log_level", "meta_config", "data_config", "timeout_ms"};
  for (const auto& [key, node] : doc) {
    if (key.str() != "cluster") {
      return InvalidArgument(path + ": unknown table or key '" + std::string(key.str()) +
                             "' (expected [cluster])");
    }
  }
  const toml::table* t = doc["cluster"].as_table();
  if (t == nullptr) return OkStatus();
  for (const auto& [key, node] : *t) {
    if (std::find(kKeys.begin(), kKeys.end(), std::string(key.str())) == kKeys.end()) {
      return InvalidArgument(path + ": unknown key [cluster]." + std::string(key.str()));
    }
  }
  int64_t timeout_ms = o->timeout.count();
  AQ_RETURN_IF_ERROR(TomlGet(*t, "root", path, &o->root));
  if (t->get("data_servers")) o->data_servers_given = true;
  AQ_RETURN_IF_ERROR(TomlGet(*t, "data_servers", path, &o->data_servers));
  if (t->get("k") || t->get("m") || t->get("unit_bytes")) o->layout_given = true;
  AQ_RETURN_IF_ERROR(TomlGet(*t, "k", path, &o->k));
  AQ_RETURN_IF_ERROR(TomlGet(*t, "m", path, &o->m));
  AQ_RETURN_IF_ERROR(TomlGet(*t, "unit_bytes", path, &o->unit_bytes));
  AQ_RETURN_IF_ERROR(TomlGet(*t, "mount", path, &o->mount_dir));
  AQ_RETURN_IF_ERROR(TomlGet(*t, "no_mount", path, &o->no_mount));
  AQ_RETURN_IF_ERROR(TomlGet(*t, "mount_options", path, &o->mount_options));
  AQ_RETURN_IF_ERROR(TomlGet(*t, "capacity_bytes", path, &o->capacity_bytes));
  AQ_RETURN_IF_ERROR(TomlGet(*t, "bin_dir", path, &o->bin_dir));
  AQ_RETURN_IF_ERROR(TomlGet(*t, "log_level", path, &o->log_level));
  AQ_RETURN_IF_ERROR(TomlGet(*t, "meta_config", path, &o->meta_config));
  AQ_RETURN_IF_ERROR(TomlGet(*t, "data_config", path, &o->data_config));
  AQ_RETURN_IF_ERROR(TomlGet(*t, "timeout_ms", path, &timeout_ms));
  o->timeout = std::chrono::milliseconds(timeout_ms);
  return OkStatus();
}

Result<Invocation> ParseCommandLine(const std::vector<std::string>& args) {
  Invocation inv;
  CLI::App app("aquifer: operate an Aquifer file system", "aquifer");
  app.require_subcommand(0, 1);
  app.fallthrough(false);

  UpFlags f;
  std::string root;
  int64_t grace_ms = 10000;
  int64_t timeout_ms = 60000;

  // cluster ...
  CLI::App* cluster = app.add_subcommand("cluster", "start and stop a local cluster on this host");
  cluster->require_subcommand(1);
  CLI::App* up = cluster->add_subcommand(
      "up", "start (or complete) a local cluster: 1 aquifer-meta, N aquifer-data, a FUSE mount");
  CLI::Option* up_root = up->add_option("--root", f.root, "cluster directory")
                             ->default_str(kDefaultClusterRoot);
  CLI::Option* ds = up->add_option("--data-servers", f.data_servers, "data servers (default 6)")
                        ->check(CLI::Range(1, 64));
  CLI::Option* ok = up->add_option("--k", f.k, "data units per stripe (default 4)")
                        ->check(CLI::Range(1, 64));
  CLI::Option* om = up->add_option("--m", f.m, "parity units per stripe (default 2)")
                        ->check(CLI::Range(0, 16));
  CLI::Option* ou = up->add_option("--unit-bytes", f.unit_bytes, "stripe unit, bytes (default "
                                                                 "1048576)");
  CLI::Option* omnt = up->add_option("--mount", f.mount, "mount point (default ROOT/mnt)");
  CLI::Option* onm = up->add_flag("--no-mount", f.no_mount, "start the daemons only");
  CLI::Option* oopt = up->add_option("--mount-options", f.mount_options,
                                     "options passed to aquifer-mount -o");
  CLI::Option* ocap = up->add_option("--capacity-bytes", f.capacity_bytes,
                                     "capacity each data server reports (default: its disk)");
  CLI::Option* obin = up->add_option("--bin-dir", f.bin_dir,
                                     "directory (or build tree) holding aquifer-meta/-data/-mount");
  CLI::Option* olog = up->add_option("--log-level", f.log_level, "daemons' log level (info)");
  CLI::Option* ocfg = up->add_option("--config", f.config, "TOML file with a [cluster] table")
                          ->check(CLI::ExistingFile);
  CLI::Option* omc = up->add_option("--meta-config", f.meta_config,
                                    "TOML passed to aquifer-meta --config");
  CLI::Option* odc = up->add_option("--data-config", f.data_config,
                                    "TOML passed to aquifer-data --config");
  CLI::Option* oto = up->add_option("--timeout-ms", f.timeout_ms,
                                    "how long to wait for each daemon (default 60000)");
  (void)ocfg;

  CLI::App* down = cluster->add_subcommand("down", "unmount and stop the local cluster");
  down->add_option("--root", root, "cluster directory")->default_str(kDefaultClusterRoot);
  down->add_option("--grace-ms", grace_ms, "SIGTERM -> SIGKILL deadline per daemon (10000)");

  CLI::App* stop = cluster->add_subcommand("stop-server", "stop one data server of the cluster");
  stop->add_option("ID", inv.server_index, "data server number, 1..N (dsN)")
      ->required()
      ->check(CLI::PositiveNumber);
  stop->add_option("--root", root, "cluster directory")->default_str(kDefaultClusterRoot);
  stop->add_flag("--kill", inv.kill, "SIGKILL at once (a crash) instead of SIGTERM");
  stop->add_option("--grace-ms", grace_ms, "SIGTERM -> SIGKILL deadline (10000)");

  CLI::App* start = cluster->add_subcommand("start-server",
                                            "restart one stopped data server of the cluster");
  start->add_option("ID", inv.server_index, "data server number, 1..N (dsN)")
      ->required()
      ->check(CLI::PositiveNumber);
  start->add_option("--root", root, "cluster directory")->default_str(kDefaultClusterRoot);
  start->add_option("--bin-dir", f.bin_dir, "directory (or build tree) holding aquifer-data");
  start->add_option("--timeout-ms", timeout_ms, "how long to wait for it (60000)");

  // status
  CLI::App* status = app.add_subcommand("status", "servers, placement groups, capacity, mount");
  CLI::Option* smeta = status->add_option("--meta", inv.meta_address,
                                          "metadata server HOST:PORT");
  CLI::Option* sroot = status->add_option("--root", root, "local cluster directory")
                           ->default_str(kDefaultClusterRoot);
  smeta->excludes(sroot);

  // layout
  CLI::App* layout = app.add_subcommand("layout", "a file's or directory's layout (k, m, unit)");
  layout->require_subcommand(1);
  CLI::App* lget = layout->add_subcommand("get", "print PATH's layout");
  lget->add_option("PATH", inv.path, "a path on an Aquifer mount")->required();
  CLI::App* lset = layout->add_subcommand(
      "set", "set PATH's layout (directory: default for new files; file: only while empty)");
  lset->add_option("PATH", inv.path, "a path on an Aquifer mount")->required();
  lset->add_option("LAYOUT", inv.layout_tokens, "k=K m=M unit=BYTES")->required();

  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    inv.command = Command::kHelp;
    inv.help_text = UsageText(app, e);
    return inv;
  } catch (const CLI::CallForAllHelp& e) {
    inv.command = Command::kHelp;
    inv.help_text = UsageText(app, e);
    return inv;
  } catch (const CLI::ParseError& e) {
    return InvalidArgument(UsageText(app, e));
  }

  if (up->parsed()) {
    inv.command = Command::kClusterUp;
    if (!f.config.empty()) AQ_RETURN_IF_ERROR(ApplyUpConfigFile(f.config, &inv.up));
    if (up_root->count()) inv.up.root = f.root;
    if (ds->count()) {
      inv.up.data_servers = f.data_servers;
      inv.up.data_servers_given = true;
    }
    if (ok->count() || om->count() || ou->count()) inv.up.layout_given = true;
    if (ok->count()) inv.up.k = f.k;
    if (om->count()) inv.up.m = f.m;
    if (ou->count()) inv.up.unit_bytes = f.unit_bytes;
    if (omnt->count()) inv.up.mount_dir = f.mount;
    if (onm->count()) inv.up.no_mount = f.no_mount;
    if (oopt->count()) inv.up.mount_options = f.mount_options;
    if (ocap->count()) inv.up.capacity_bytes = f.capacity_bytes;
    if (obin->count()) inv.up.bin_dir = f.bin_dir;
    if (olog->count()) inv.up.log_level = f.log_level;
    if (omc->count()) inv.up.meta_config = f.meta_config;
    if (odc->count()) inv.up.data_config = f.data_config;
    if (oto->count()) inv.up.timeout = std::chrono::milliseconds(f.timeout_ms);
    if (inv.up.mount_dir.size() > 0 && inv.up.no_mount) {
      return InvalidArgument("--mount and --no-mount exclude each other");
    }
    inv.root_given = up_root->count() > 0;
    return inv;
  }
  if (!root.empty()) {
    inv.up.root = root;
    inv.root_given = true;
  }
  inv.grace = std::chrono::milliseconds(grace_ms);
  if (down->parsed()) {
    inv.command = Command::kClusterDown;
  } else if (stop->parsed()) {
    inv.command = Command::kStopServer;
  } else if (start->parsed()) {
    inv.command = Command::kStartServer;
    inv.up.bin_dir = f.bin_dir;
    inv.up.timeout = std::chrono::milliseconds(timeout_ms);
  } else if (status->parsed()) {
    inv.command = Command::kStatus;
    if (!inv.meta_address.empty()) {
      Result<uint16_t> port = PortOf(inv.meta_address);
      if (!port.ok()) return InvalidArgument("--meta: " + port.status().message());
    }
  } else if (lget->parsed()) {
    inv.command = Command::kLayoutGet;
  } else if (lset->parsed()) {
    inv.command = Command::kLayoutSet;
  } else {
    inv.command = Command::kHelp;
    inv.help_text = app.help();
  }
  return inv;
}

int RunInvocation(const Invocation& inv, std::ostream& out, std::ostream& err) {
  switch (inv.command) {
    case Command::kHelp:
      out << inv.help_text;
      return 0;
    case Command::kClusterUp: {
      Result<ClusterState> s = ClusterUp(inv.up, out);
      if (!s.ok()) return Fail(err, s.status());
      return 0;
    }
    case Command::kClusterDown: {
      Status st = ClusterDown(inv.up.root, inv.grace, out);
      return st.ok() ? 0 : Fail(err, st);
    }
    case Command::kStopServer: {
      Status st = StopDataServer(inv.up.root, inv.server_index, inv.kill, inv.grace, out);
      return st.ok() ? 0 : Fail(err, st);
    }
    case Command::kStartServer: {
      Status st = StartDataServer(inv.up.root, inv.server_index, inv.up.bin_dir, inv.up.timeout,
                                  out);
      return st.ok() ? 0 : Fail(err, st);
    }
    case Command::kStatus:
      return RunStatus(inv, out, err);
    case Command::kLayoutGet:
      return RunLayoutGet(inv, out, err);
    case Command::kLayoutSet:
      return RunLayoutSet(inv, out, err);
  }
  return 1;
}

int RunCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  Result<Invocation> inv = ParseCommandLine(args);
  if (!inv.ok()) {
    err << inv.status().message();
    if (inv.status().message().empty() || inv.status().message().back() != '\n') err << "\n";
    return 2;
  }
  return RunInvocation(*inv, out, err);
}

}  // namespace aquifer::cli

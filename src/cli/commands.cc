#include "cli/commands.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <ctime>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <iostream>
#include <optional>

#include <CLI/CLI.hpp>
#include <toml++/toml.h>

#include "cli/fsck.h"
#include "cli/layout_xattr.h"
#include "cli/move_progress.h"
#include "cli/process.h"
#include "cli/rpc/fsck_rpc.h"
#include "cli/rpc/meta_admin.h"
#include "cli/status_report.h"
#include "common/cluster_key.h"
#include "common/printable.h"
#include "common/tls.h"
#include "metadata/backup.h"

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
  bool tls = false;
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

// A server as the operator names it: an id as the metadata server hands them out (1, 2, ...)
// or its name (failure domain, e.g. ds3). CLI11's own range check would print its whole double
// range.
const CLI::Validator kServerRefCheck(
    [](std::string& text) -> std::string {
      const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
      if (digits && text.find_first_not_of('0') != std::string::npos) return "";
      const bool name = !text.empty() && !digits && text[0] != '-' &&
                        text.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                               "0123456789._-") == std::string::npos;
      if (name) return "";
      return "no server " + text + ": server ids are 1, 2, ... (see `aquifer server list`), or "
             "use its name (DOMAIN column)";
    },
    "ID or NAME");

// A local cluster's data server as `cluster stop-server` and `start-server` take it: N or dsN.
const CLI::Validator kLocalServerName(
    [](std::string& text) -> std::string {
      if (text.rfind("ds", 0) == 0 && text.size() > 2) text = text.substr(2);
      return "";
    },
    "N or dsN");

// The hint for a call that found no server while this process runs without TLS: a TLS server
// answers a plain client with nothing it can read, which gRPC reports as unavailable.
constexpr char kTlsHint[] =
    " (if the cluster runs with TLS, give its CA: --tls-ca FILE or AQUIFER_TLS_CA=FILE; a local "
    "cluster's is ROOT/tls/ca.pem)";

int Fail(std::ostream& err, const Status& st) {
  // Messages carry names and addresses from the servers and the file system: escaped.
  err << "aquifer: error: " << Printable(st.message(), SIZE_MAX)
      << (st.code() == Code::kUnavailable && !ProcessTls() ? kTlsHint : "") << "\n";
  return 1;
}

// This process's TLS for a local cluster at `root`: --tls-ca when given, else as
// UseLocalClusterTls ($AQUIFER_TLS_CA, else ROOT/tls/ca.pem).
Status UseTlsFor(const Invocation& inv, const std::string& root) {
  return inv.tls_ca_file.empty() ? UseLocalClusterTls(root)
                                 : UseTlsCa(inv.tls_ca_file, inv.tls_server_name);
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
    if (inv.key_file.empty()) {
      if (Status key = UseLocalClusterKey(s->root); !key.ok()) return Fail(err, key);
    }
    if (Status tls = UseTlsFor(inv, s->root); !tls.ok()) return Fail(err, tls);
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
  Result<MovesView> moves = view.ok() ? FetchMoves(address, std::chrono::seconds(5))
                                      : Result<MovesView>(view.status());
  // Only the mounts of this cluster: their source (aquifer-mount's fsname) names its address.
  if (!view.ok() && view.status().code() == Code::kUnavailable && !ProcessTls()) {
    err << "aquifer: the metadata server did not answer" << kTlsHint << "\n";
  }
  out << FormatStatus(address.empty() ? "(none)" : address, view, local,
                      local ? std::vector<std::string>() : AquiferMounts(address),
                      view.ok() ? &moves : nullptr);
  if (view.ok()) {
    // Where to look next: the status page and metrics, and who has the file system mounted.
    Result<ActivityView> activity = FetchActivity(address, 1, std::chrono::seconds(5));
    if (activity.ok()) {
      if (!activity->http_address.empty()) {
        out << "web       http://" << activity->http_address << "/  (status page; metrics at "
            << "/metrics)\n";
      }
      out << "sessions  " << activity->sessions.size() << " open";
      for (size_t i = 0; i < activity->sessions.size() && i < 8; ++i) {
        out << (i == 0 ? ": " : ", ") << Printable(activity->sessions[i].client_name);
      }
      out << (activity->sessions.size() > 8 ? ", ..." : "") << "\n";
    }
  }
  // The exit code says the health (docs/operations.md "Health and exit codes"): 0 only when ok.
  return HealthExitCode(HealthOf(view, view.ok() ? &moves : nullptr, local).state);
}

// For the commands that reach the metadata server through a mount (layout get/set): with no key
// given (--key, $AQUIFER_KEY_FILE), the key of the local cluster that serves `path`: one whose
// record, in a directory holding `path` (cluster up mounts at ROOT/mnt) or in the default root,
// names `meta_address`. Nothing when none does (the names are then not shown).
// Its TLS likewise, when none is given ($AQUIFER_TLS_CA).
void UseKeyOfLocalClusterServing(const std::string& path, const std::string& meta_address) {
  if (ProcessClusterKey() && ProcessTls()) return;
  std::error_code ec;
  std::filesystem::path p = std::filesystem::weakly_canonical(path, ec);
  std::vector<std::string> roots;
  for (; !ec && !p.empty() && p != p.root_path(); p = p.parent_path()) roots.push_back(p);
  roots.push_back(kDefaultClusterRoot);
  for (const std::string& root : roots) {
    Result<ClusterState> s = LoadClusterState(ClusterStatePath(root));
    if (s.ok() && s->meta.address == meta_address) {
      if (!ProcessClusterKey()) (void)UseLocalClusterKey(s->root);
      if (!ProcessTls()) (void)UseLocalClusterTls(s->root);
      return;
    }
  }
}

int RunLayoutGet(const Invocation& inv, std::ostream& out, std::ostream& err) {
  Result<std::optional<std::string>> v = GetLayoutXattr(inv.path);
  if (!v.ok()) return Fail(err, v.status());
  if (!v->has_value()) {
    out << Printable(inv.path, SIZE_MAX)
        << ": no layout of its own (inherits the cluster default)\n";
    return 0;
  }
  out << Printable(inv.path, SIZE_MAX) << ": " << Printable(**v, SIZE_MAX) << "\n";
  // A regular file: how its stripes are stored and on which servers.
  struct stat st {};
  if (::stat(inv.path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  Result<std::optional<std::string>> placement = GetXattrText(inv.path, kPlacementXattr);
  Result<LayoutSpec> layout = ParseLayoutSpec({**v});
  if (!placement.ok() || !placement->has_value() || !layout.ok() || !layout->k || !layout->m ||
      !layout->unit_bytes) {
    err << "aquifer: where the stripes sit is not known (" << kPlacementXattr << ": "
        << (!placement.ok() ? Printable(placement.status().ToString(), SIZE_MAX) : "not given")
        << ")\n";
    return 0;
  }
  Result<FilePlacement> p = ParsePlacement(**placement);
  if (!p.ok()) return Fail(err, p.status());
  Result<std::string> address = MetaAddressOfPath(inv.path);
  if (address.ok()) UseKeyOfLocalClusterServing(inv.path, *address);
  Result<ClusterView> view = address.ok() ? FetchClusterView(*address, std::chrono::seconds(5))
                                          : Result<ClusterView>(address.status());
  out << DescribePlacement(static_cast<uint64_t>(st.st_size), *layout, *p,
                           view.ok() ? &*view : nullptr);
  if (!view.ok()) err << "aquifer: server names not shown: " << view.status().ToString() << "\n";
  return 0;
}

// Why the file system refused (EINVAL) `layout` on `path`, as far as this side can tell: the
// errno carries no text, so the width is checked against the cluster's failure domains (from
// the metadata server named by the mount) and a file's size against 0.
Status ExplainLayoutRefusal(const std::string& path, const LayoutSpec& layout) {
  const std::string head = "the file system refused layout " + FormatLayout(layout) + " on " +
                           path + ": ";
  const uint32_t width = *layout.k + *layout.m;
  Result<std::string> address = MetaAddressOfPath(path);
  if (address.ok()) UseKeyOfLocalClusterServing(path, *address);
  Result<ClusterView> view = address.ok() ? FetchClusterView(*address, std::chrono::seconds(5))
                                          : Result<ClusterView>(address.status());
  if (view.ok()) {
    std::set<std::string> domains;
    for (const ServerView& s : view->servers) {
      if (s.state == "in" || s.state.empty()) domains.insert(s.failure_domain);
    }
    if (domains.size() < width) {
      return InvalidArgument(head + "k+m=" + std::to_string(width) + " needs " +
                             std::to_string(width) +
                             " data servers in distinct failure domains, the cluster has " +
                             std::to_string(domains.size()) + " (see `aquifer server list`)");
    }
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    return InvalidArgument(head + "a file's layout can change only while it is empty (it has " +
                           std::to_string(st.st_size) + " bytes)");
  }
  std::string why = head + "invalid layout (m must be 1..16, k+m at most the cluster's failure "
                           "domains; the aquifer-meta log says why)";
  if (!view.ok()) why += "; could not ask the metadata server: " + view.status().message();
  return InvalidArgument(why);
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
  if (st.code() == Code::kInvalidArgument) return Fail(err, ExplainLayoutRefusal(inv.path, *full));
  if (!st.ok()) return Fail(err, st);
  out << Printable(inv.path, SIZE_MAX) << ": layout set to " << value << "\n";
  return 0;
}

// The metadata server's address: --meta, else the local cluster's record (then *local is set).
// The cluster key for the calls that follow: --key, else $AQUIFER_KEY_FILE, else (a local
// cluster) its ROOT/cluster.key.
Result<std::string> MetaAddressFor(const Invocation& inv, std::optional<ClusterState>* local) {
  if (!inv.meta_address.empty()) {
    AQ_RETURN_IF_ERROR(LoadKeyForProcess(KeyFilePath(inv.key_file)));
    AQ_RETURN_IF_ERROR(UseTlsCa(inv.tls_ca_file, inv.tls_server_name));
    return inv.meta_address;
  }
  Result<ClusterState> s = LoadClusterState(ClusterStatePath(inv.up.root));
  if (s.ok()) {
    AQ_RETURN_IF_ERROR(inv.key_file.empty() ? UseLocalClusterKey(s->root)
                                            : LoadKeyForProcess(inv.key_file));
    AQ_RETURN_IF_ERROR(UseTlsFor(inv, s->root));
  }
  if (!s.ok()) {
    return Status(s.status().code(),
                  s.status().message() + " (pass --meta HOST:PORT for a cluster that `aquifer "
                                         "cluster up` did not start)");
  }
  if (s->meta.address.empty()) return Unavailable("the cluster at " + s->root + " never started");
  std::string address = s->meta.address;
  if (local != nullptr) *local = std::move(*s);
  return address;
}

const ServerView* FindServer(const ClusterView& v, uint32_t id) {
  for (const ServerView& s : v.servers) {
    if (s.id.value() == id) return &s;
  }
  return nullptr;
}

int RunServerList(const Invocation& inv, std::ostream& out, std::ostream& err) {
  Result<std::string> address = MetaAddressFor(inv, nullptr);
  if (!address.ok()) return Fail(err, address.status());
  Result<ClusterView> view = FetchClusterView(*address, std::chrono::seconds(5));
  if (!view.ok()) return Fail(err, view.status());
  // Removed servers are history: shown with --all only.
  ClusterView shown = *view;
  size_t hidden = 0;
  if (!inv.all) {
    std::erase_if(shown.servers, [&hidden](const ServerView& s) {
      const bool removed = s.state == "removed";
      hidden += removed ? 1 : 0;
      return removed;
    });
  }
  out << FormatServerTable(shown);
  if (hidden > 0) out << "  (" << hidden << " removed servers not shown; --all shows them)\n";
  return 0;
}

// The server `ref` names in `view`: an id, or a name (failure domain) that exactly one server
// that is not removed has (or, failing that, exactly one removed server).
Result<ServerId> ResolveServer(const ClusterView& view, const std::string& ref) {
  const bool digits = !ref.empty() && ref.find_first_not_of("0123456789") == std::string::npos;
  if (digits) {
    const unsigned long long id = std::strtoull(ref.c_str(), nullptr, 10);
    for (const ServerView& s : view.servers) {
      if (s.id.value() == id) return s.id;
    }
    return NotFound("no server " + Printable(ref) + " (see `aquifer server list --all`)");
  }
  std::vector<const ServerView*> live, removed;
  for (const ServerView& s : view.servers) {
    if (s.failure_domain != ref) continue;
    (s.state == "removed" ? removed : live).push_back(&s);
  }
  const std::vector<const ServerView*>& found = live.empty() ? removed : live;
  if (found.size() == 1) return found[0]->id;
  if (found.empty()) {
    return NotFound("no server named " + Printable(ref) + " (see `aquifer server list --all`)");
  }
  std::string ids;
  for (const ServerView* s : found) ids += (ids.empty() ? "" : ", ") + s->id.ToString();
  return InvalidArgument("several servers are named " + Printable(ref) + " (ids " + ids +
                         "): give the id");
}

Result<ServerId> ResolveServerAt(const std::string& address, const std::string& ref) {
  Result<ClusterView> view = FetchClusterView(address, std::chrono::seconds(5));
  if (!view.ok()) return view.status();
  return ResolveServer(*view, ref);
}

int RunWait(const Invocation& inv, bool repair, std::ostream& out, std::ostream& err);

int RunServerDrain(const Invocation& inv, std::ostream& out, std::ostream& err) {
  Result<std::string> address = MetaAddressFor(inv, nullptr);
  if (!address.ok()) return Fail(err, address.status());
  Result<ServerId> id = ResolveServerAt(*address, inv.server_ref);
  if (!id.ok()) return Fail(err, id.status());
  Result<ServerAdminResult> r = DrainServer(*address, *id, std::chrono::seconds(10));
  if (!r.ok()) return Fail(err, r.status());
  const std::string target =
      inv.meta_address.empty() ? " --root " + inv.up.root : " --meta " + *address;
  out << "aquifer: server " << id->value() << " is draining: it holds " << r->positions_held
      << " PG positions, " << r->moves_scheduled << " drain moves scheduled now\n"
      << (inv.follow ? "" : "  follow:  aquifer rebalance wait" + target + "\n")
      << "  then:    aquifer server remove " << id->value() << target
      << "\n  cancel:  aquifer server undrain " << id->value() << target << "\n";
  return inv.follow ? RunWait(inv, /*repair=*/false, out, err) : 0;
}

// `aquifer mount [--root R | --meta ADDR] DIR [-o OPTIONS]`: another mount of a cluster (a
// daemonized aquifer-mount; `fusermount3 -u DIR` ends it).
int RunMount(const Invocation& inv, std::ostream& out, std::ostream& err) {
  std::optional<ClusterState> local;
  Result<std::string> address = MetaAddressFor(inv, &local);
  if (!address.ok()) return Fail(err, address.status());
  Result<std::string> bin = FindBinary("aquifer-mount", inv.up.bin_dir);
  if (!bin.ok()) return Fail(err, bin.status());
  std::vector<std::string> argv = {*bin, *address, inv.path};
  std::string options = inv.up.mount_options;
  // A local cluster's mounts log beside its daemons (the daemon's own default is nowhere).
  if (local && options.find("log_file=") == std::string::npos) {
    std::string name = inv.path;
    for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    options += (options.empty() ? "" : ",") + std::string("log_file=") + local->root +
               "/logs/mount" + name + ".log";
  }
  if (options.find("key=") == std::string::npos) {
    std::string key = KeyFilePath(inv.key_file);
    if (key.empty() && local && ::access(ClusterKeyPath(local->root).c_str(), F_OK) == 0) {
      key = ClusterKeyPath(local->root);
    }
    if (!key.empty()) options += (options.empty() ? "" : ",") + std::string("key=") + key;
  }
  // TLS as for the CLI's own calls (MetaAddressFor loaded it): --tls-ca, $AQUIFER_TLS_CA, or
  // the local cluster's ROOT/tls/ca.pem.
  if (options.find("tls_ca=") == std::string::npos) {
    std::string ca = inv.tls_ca_file;
    if (ca.empty() && std::getenv("AQUIFER_TLS_CA") != nullptr) ca = std::getenv("AQUIFER_TLS_CA");
    if (ca.empty() && local && ::access((ClusterTlsDir(local->root) + "/ca.pem").c_str(),
                                        F_OK) == 0) {
      ca = ClusterTlsDir(local->root) + "/ca.pem";
    }
    if (!ca.empty()) options += (options.empty() ? "" : ",") + std::string("tls_ca=") + ca;
    if (!ca.empty() && !inv.tls_server_name.empty() &&
        options.find("tls_server_name=") == std::string::npos) {
      options += ",tls_server_name=" + inv.tls_server_name;
    }
  }
  if (!options.empty()) {
    argv.push_back("-o");
    argv.push_back(options);
  }
  Result<int> rc = RunAndWait(argv);  // returns once mounted (or failed): it daemonizes
  if (!rc.ok()) return Fail(err, rc.status());
  if (*rc != 0) {
    err << "aquifer: aquifer-mount could not mount " << inv.path << " (its message is above)\n";
    return 1;
  }
  out << "aquifer: mounted " << *address << " on " << inv.path << "\n"
      << "  unmount: fusermount3 -u " << inv.path << "\n";
  return 0;
}

int RunServerUndrain(const Invocation& inv, std::ostream& out, std::ostream& err) {
  Result<std::string> address = MetaAddressFor(inv, nullptr);
  if (!address.ok()) return Fail(err, address.status());
  Result<ServerId> id = ResolveServerAt(*address, inv.server_ref);
  if (!id.ok()) return Fail(err, id.status());
  Result<ServerAdminResult> r = UndrainServer(*address, *id, std::chrono::seconds(10));
  if (!r.ok()) return Fail(err, r.status());
  out << "aquifer: server " << id->value() << " is no longer draining: " << r->moves_cancelled
      << " drain moves cancelled; it holds " << r->positions_held << " PG positions\n";
  return 0;
}

int RunServerRemove(const Invocation& inv, std::ostream& out, std::ostream& err) {
  std::optional<ClusterState> local;
  Result<std::string> address = MetaAddressFor(inv, &local);
  if (!address.ok()) return Fail(err, address.status());
  // The server's address, to find its local process afterwards.
  Result<ClusterView> view = FetchClusterView(*address, std::chrono::seconds(5));
  if (!view.ok()) return Fail(err, view.status());
  Result<ServerId> resolved = ResolveServer(*view, inv.server_ref);
  if (!resolved.ok()) return Fail(err, resolved.status());
  const uint32_t server_id = resolved->value();
  const ServerView* sv = FindServer(*view, server_id);
  if (sv == nullptr) {
    return Fail(err, NotFound("no server " + std::to_string(server_id) +
                              " in the cluster (see `aquifer server list`)"));
  }
  const std::string server_address = sv->address;
  if (inv.force && sv->pg_positions > 0) {
    // What a forced removal loses: PGs in which this server and the servers already down or
    // removed leave more than m positions without a target (m of the default layout).
    const RemovalRisk risk = RemovalRiskOf(*view, server_id);
    if (risk.pgs_lost > 0 || risk.pgs_at_risk > 0) {
      err << "aquifer: warning: removing server " << server_id << " by force, with "
          << risk.servers_missing << " other server(s) down or removed:\n";
      if (risk.pgs_lost > 0) {
        err << "  " << risk.pgs_lost << " placement groups would have more than m = " << risk.m
            << " positions missing: every erasure-coded stripe in them becomes UNREADABLE (EIO),"
               " and small files whose copies were all on those servers too. Their data cannot "
               "be rebuilt; `aquifer fsck` will list the files.\n";
      }
      if (risk.pgs_at_risk > 0) {
        err << "  " << risk.pgs_at_risk << " placement groups would have exactly m = " << risk.m
            << " positions missing: one more failure before repair finishes loses data.\n";
      }
      if (risk.pgs_lost > 0 && !inv.yes) {
        err << "aquifer: error: refused: pass --yes to remove it anyway (or start the down "
               "servers again first)\n";
        return 1;
      }
    }
  }
  Result<ServerAdminResult> r =
      RemoveServer(*address, ServerId(server_id), inv.force, std::chrono::seconds(10));
  if (!r.ok()) {
    if (r.status().code() == Code::kNotEmpty) {
      err << "aquifer: error: refused: server " << server_id << " (" << sv->failure_domain
          << ") still holds " << sv->pg_positions
          << " PG positions. Drain it first (`aquifer server drain " << server_id
          << "`, then `aquifer rebalance wait`), or pass --force to treat it as failed (its "
             "positions are rebuilt from the other servers, with less redundancy meanwhile).\n"
          << "  (" << r.status().message() << ")\n";
      return 1;
    }
    return Fail(err, r.status());
  }
  out << "aquifer: server " << server_id << " (" << sv->failure_domain << ", "
      << server_address << ") removed";
  if (inv.force && r->moves_scheduled > 0) {
    out << "; " << r->moves_scheduled << " repair moves scheduled for its positions "
        << "(`aquifer repair wait`)";
  }
  out << "\n";
  if (local) {
    Status st = MarkDataServerRemoved(local->root, server_address, inv.grace, out);
    if (!st.ok() && st.code() != Code::kNotFound) return Fail(err, st);
  }
  return 0;
}

int RunMetaBackup(const Invocation& inv, std::ostream& out, std::ostream& err) {
  if (inv.backup_dest.empty() || inv.backup_dest[0] != '/') {
    return Fail(err, InvalidArgument("DEST must be an absolute path: the metadata server writes "
                                     "the backup on its own host (got '" +
                                     inv.backup_dest + "')"));
  }
  Result<std::string> address = MetaAddressFor(inv, nullptr);
  if (!address.ok()) return Fail(err, address.status());
  Result<MetaBackupView> r = BackupMeta(
      *address, inv.backup_dest,
      std::chrono::milliseconds(static_cast<int64_t>(inv.wait_timeout_s * 1000.0)));
  if (!r.ok()) return Fail(err, r.status());
  out << "aquifer: backup written to " << r->dir << " on the metadata server's host ("
      << *address << "): " << r->files << " files, " << HumanBytes(r->bytes) << ", "
      << r->inodes << " inodes, " << r->took_ms << " ms\n";
  if (r->same_file_system) {
    err << "aquifer: warning: the backup is on the same file system as the metadata server's "
           "RocksDB directory: it shares its files (hard links) and does not survive the loss "
           "of that disk. Copy it to another disk or host.\n";
  }
  return 0;
}

int RunMetaRestore(const Invocation& inv, std::ostream& out, std::ostream& err) {
  meta::RestoreOptions o;
  o.from = inv.restore_from;
  o.meta_dir = inv.meta_dir;
  o.force = inv.force;
  o.ino_margin = inv.ino_margin;
  Result<meta::RestoreResult> r = meta::RestoreBackup(o);
  if (!r.ok()) return Fail(err, r.status());
  const std::time_t taken = static_cast<std::time_t>(r->manifest.created_unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&taken, &tm);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
  out << "aquifer: restored " << inv.restore_from << " (taken " << when << " on "
      << (r->manifest.source_host.empty() ? "?" : r->manifest.source_host) << " from "
      << r->manifest.source_db << ") into " << inv.meta_dir << ": " << r->files
      << " files, " << HumanBytes(r->bytes) << ", " << r->inodes << " inodes";
  if (r->restores > 1) out << " (restore number " << r->restores << " of this namespace)";
  out << "\n";
  if (!r->moved_aside.empty()) {
    out << "  the directory's old contents were moved to " << r->moved_aside
        << " (delete it once the restored cluster is checked)\n";
  }
  out << "  new inode numbers start at " << r->ino_floor << " (" << r->ino_margin
      << " skipped), write versions at " << r->version_floor
      << ": nothing the lost server handed out after the backup is reused\n"
      << "next: start aquifer-meta on " << inv.meta_dir
      << ", then `aquifer fsck` lists the chunks written after the backup as orphans and "
         "`aquifer fsck --repair` removes them\n";
  return 0;
}

int RunWait(const Invocation& inv, bool repair, std::ostream& out, std::ostream& err) {
  using Clock = std::chrono::steady_clock;
  std::optional<ClusterState> local;
  Result<std::string> address = MetaAddressFor(inv, &local);
  if (!address.ok()) return Fail(err, address.status());
  const char* what = repair ? "repair" : "rebalance";
  const bool tty = &out == &std::cout && ::isatty(STDOUT_FILENO) == 1;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::milliseconds(
                                    static_cast<int64_t>(inv.wait_timeout_s * 1000.0));
  auto next_line = start;
  MoveTally tally;
  std::string last_error;
  auto elapsed_s = [&start] {
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  while (true) {
    // The map first: a server the map shows down has its degraded PGs in the moves fetched
    // after it. (Moves first raced a server being marked down between the two calls: neither
    // showed its missing positions, and the wait ended while the cluster was degraded.)
    Result<ClusterView> view = FetchClusterView(*address, std::chrono::seconds(5));
    Result<MovesView> moves = view.ok() ? FetchMoves(*address, std::chrono::seconds(5))
                                        : Result<MovesView>(view.status());
    std::string pending;  // why we are not done, "" = done
    int waiting_exit = 0;
    if (!moves.ok() || !view.ok()) {
      last_error = (!moves.ok() ? moves.status() : view.status()).ToString();
      pending = "metadata server: " + last_error;
    } else {
      std::set<uint32_t> down;  // members the map shows down
      for (const ServerView& sv : view->servers) {
        if (!sv.up && sv.state != "removed") down.insert(sv.id.value());
      }
      std::vector<const MoveView*> mine;
      for (const MoveView& m : moves->moves) {
        // A rebalance or drain move off a down server restores a missing position too: the
        // repair waits for it (a server that came back empty can take them before the repair
        // delay ends).
        const bool restores = m.kind == "repair" || down.count(m.from.value()) > 0;
        if (repair ? restores : (m.kind == "rebalance" || m.kind == "drain")) {
          mine.push_back(&m);
        }
      }
      std::optional<MovedSoFar> moved;
      if (!moves->completed_bytes.empty()) {
        moved = MovedSoFar{};
        for (const char* kind : repair ? std::vector<const char*>{"repair"}
                                       : std::vector<const char*>{"rebalance", "drain"}) {
          moved->bytes += moves->completed_bytes[kind];
          moved->chunks += moves->completed_chunks[kind];
        }
      }
      tally.Update(mine, view.ok() ? &*view : nullptr,
                   std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start)
                       .count(),
                   moved);
      if (moves->waiting_for_server) waiting_exit = 3;
      if (!mine.empty()) pending = std::to_string(mine.size()) + " moves left";
      if (repair) {
        for (const DegradedPgView& d : moves->degraded) {
          if (pending.empty()) pending = std::to_string(moves->degraded.size()) +
                                         " degraded PGs (" + d.reason + ")";
        }
        // A member that is down and still holds PG positions: its stripes are below k+m until
        // they moved (whatever the kind of the moves, or before they are planned).
        for (const ServerView& sv : view->servers) {
          if (pending.empty() && !sv.up && sv.state != "removed" && sv.pg_positions > 0) {
            pending = "server " + ServerName(sv.id, &*view) + " is down and holds " +
                      std::to_string(sv.pg_positions) + " PG positions";
          }
        }
        // A local data server that is not running but still reported up: the metadata server
        // has not noticed yet (heartbeat timeout), so a repair is still to come.
        if (pending.empty() && local) {
          for (const DataServerRecord& d : local->data_servers) {
            if (d.removed || d.address.empty() || IsProcessAlive(d.pid, kDataExe)) continue;
            for (const ServerView& sv : view->servers) {
              if (sv.up && sv.address == d.address && sv.state != "removed") {
                pending = d.failure_domain + " is not running but the metadata server still "
                                             "reports it up";
              }
            }
          }
        }
      } else {
        uint32_t max_positions = 0;
        for (const ServerView& sv : view->servers) {
          if (sv.up && sv.state != "removed") {
            max_positions = std::max(max_positions, sv.pg_positions);
          }
        }
        for (const ServerView& sv : view->servers) {
          if (!pending.empty()) break;
          if (sv.state == "draining" && sv.pg_positions > 0) {
            pending = "server " + sv.id.ToString() + " is draining and still holds " +
                      std::to_string(sv.pg_positions) + " PG positions";
          } else if (sv.up && sv.state == "in" && sv.pg_positions == 0 && max_positions > 0 &&
                     !moves->rebalance_paused) {
            pending = "server " + sv.id.ToString() + " holds no PG positions yet (rebalance "
                                                     "not planned yet)";
          }
        }
      }
    }
    const bool done = pending.empty();
    const bool timed_out = !done && Clock::now() >= deadline;
    // Progress.
    const double secs = elapsed_s();
    const std::string line = tally.Line();
    if (tty) {
      out << "\r\033[K" << what << " " << ProgressBar(done ? 1.0 : tally.Fraction()) << " "
          << line << std::flush;
    } else if (done || timed_out || waiting_exit || Clock::now() >= next_line) {
      char t[32];
      std::snprintf(t, sizeof(t), "%.1f", secs);
      out << what << " wait " << t << " s: " << line << (pending.empty() ? "" : "; " + pending)
          << "\n" << std::flush;
      next_line = Clock::now() + std::chrono::milliseconds(
                                     static_cast<int64_t>(inv.wait_interval_s * 1000.0));
    }
    if (waiting_exit) {
      if (tty) out << "\n";
      err << "aquifer: " << what << " cannot finish: "
          << (moves.ok() ? moves->message : std::string()) << "\n"
          << "  add a server with a new failure domain (local cluster: `aquifer cluster grow "
             "--data-servers 1`), or bring the lost one back\n";
      return waiting_exit;
    }
    if (done) {
      if (tty) out << "\n";
      out << "aquifer: no " << (repair ? "repair" : "rebalance or drain") << " move left ("
          << tally.finished() << " finished while waiting, " << HumanBytes(tally.bytes_done())
          << ")\n";
      return 0;
    }
    if (timed_out) {
      if (tty) out << "\n";
      err << "aquifer: timed out after " << inv.wait_timeout_s << " s: " << pending << "\n";
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

int RunFsckCommand(const Invocation& inv, std::ostream& out, std::ostream& err) {
  Result<std::string> address = MetaAddressFor(inv, nullptr);
  if (!address.ok()) return Fail(err, address.status());
  std::unique_ptr<FsckRpc> rpc = MakeGrpcFsckRpc(*address, std::chrono::seconds(30));
  FsckOptions o;
  o.repair = inv.fsck_repair;
  o.verbose = inv.verbose;
  o.progress_bar = &out == &std::cout && ::isatty(STDOUT_FILENO) == 1;
  o.progress_interval_s = o.progress_bar ? 0.2 : inv.wait_interval_s;
  Result<FsckReport> r = RunFsck(*rpc, o, out);
  if (!r.ok()) return Fail(err, r.status());
  return r->clean() ? 0 : 1;
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
      "capacity_bytes", "bin_dir", "log_level", "meta_config", "data_config", "timeout_ms",
      "tls"};
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
  AQ_RETURN_IF_ERROR(TomlGet(*t, "tls", path, &o->tls));
  o->timeout = std::chrono::milliseconds(timeout_ms);
  return OkStatus();
}

Result<Invocation> ParseCommandLine(const std::vector<std::string>& args) {
  Invocation inv;
  CLI::App app("aquifer: operate an Aquifer file system", "aquifer");
  app.require_subcommand(0, 1);
  app.fallthrough(false);
  app.set_version_flag("--version", VersionText(), "print the version and exit");

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
  CLI::Option* ok = up->add_option("--k", f.k, "data units per stripe, 1..16 (default 4)")
                        ->check(CLI::Range(1, 16));
  CLI::Option* om = up->add_option("--m", f.m, "parity units per stripe, 1..4 (default 2)")
                        ->check(CLI::Range(1, 4));
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
  std::vector<std::string> meta_args;
  CLI::Option* omarg = up->add_option(
      "--meta-arg", meta_args,
      "extra aquifer-meta flag, repeatable, e.g. --meta-arg=--repair-delay-ms=2000 (kept in "
      "cluster.json for later starts)");
  CLI::Option* otls = up->add_flag(
      "--tls", f.tls,
      "TLS on every connection: a private CA and server certificate in ROOT/tls (kept in "
      "cluster.json for later starts)");
  (void)ocfg;

  CLI::App* key = cluster->add_subcommand("key", "the cluster key (docs/operations.md)");
  key->require_subcommand(1);
  CLI::App* key_new = key->add_subcommand(
      "new", "make a new cluster key file (0600, 32 random bytes) for a multi-host cluster");
  key_new->add_option("FILE", inv.path, "where to write it (never overwritten)")->required();

  CLI::App* down = cluster->add_subcommand("down", "unmount and stop the local cluster");
  down->add_option("--root", root, "cluster directory")->default_str(kDefaultClusterRoot);
  down->add_option("--grace-ms", grace_ms, "SIGTERM -> SIGKILL deadline per daemon (10000)");

  CLI::App* stop = cluster->add_subcommand("stop-server", "stop one data server of the cluster");
  // Any integer: the range 1..N is checked against the cluster's record, which knows N.
  stop->add_option("ID", inv.server_index, "data server number 1..N, or its name dsN")
      ->required()
      ->transform(kLocalServerName);
  stop->add_option("--root", root, "cluster directory")->default_str(kDefaultClusterRoot);
  stop->add_flag("--kill", inv.kill, "SIGKILL at once (a crash) instead of SIGTERM");
  stop->add_option("--grace-ms", grace_ms, "SIGTERM -> SIGKILL deadline (10000)");

  CLI::App* start = cluster->add_subcommand("start-server",
                                            "restart one stopped data server of the cluster");
  // Any integer: the range 1..N is checked against the cluster's record, which knows N.
  start->add_option("ID", inv.server_index, "data server number 1..N, or its name dsN")
      ->required()
      ->transform(kLocalServerName);
  start->add_option("--root", root, "cluster directory")->default_str(kDefaultClusterRoot);
  start->add_option("--bin-dir", f.bin_dir, "directory (or build tree) holding aquifer-data");
  start->add_option("--timeout-ms", timeout_ms, "how long to wait for it (60000)");

  CLI::App* grow = cluster->add_subcommand(
      "grow", "add data servers to the local cluster (new failure domains dsN+1..)");
  grow->add_option("--data-servers", inv.grow_count, "how many to add")
      ->required()
      ->check(CLI::Range(1, 64));
  grow->add_option("--root", root, "cluster directory")->default_str(kDefaultClusterRoot);
  grow->add_option("--bin-dir", f.bin_dir, "directory (or build tree) holding aquifer-data");
  grow->add_option("--timeout-ms", timeout_ms, "how long to wait for them (60000)");
  grow->add_flag("--wait", inv.follow,
                 "then follow the rebalance onto them with a progress bar until it is done");
  grow->add_option("--interval", inv.wait_interval_s,
                   "with --wait: seconds between progress lines when not on a terminal (5)");

  // tls new
  CLI::App* tls = app.add_subcommand("tls", "TLS certificates for a cluster (docs/operations.md)");
  tls->require_subcommand(1);
  CLI::App* tls_new = tls->add_subcommand(
      "new", "make a private CA and one server certificate for a multi-host cluster");
  tls_new->add_option("DIR", inv.path,
                      "where to write ca.pem, ca.key, server.pem, server.key (never overwritten)")
      ->required();
  tls_new->add_option("--name", inv.tls_server_name,
                      "the DNS name the certificate carries and clients check (default aquifer)");
  tls_new->add_option("--days", inv.tls_days, "how long the certificates are good for (3650)")
      ->check(CLI::Range(1, 36500));

  // --tls-ca / --tls-server-name on a command that calls a cluster.
  auto add_tls = [&](CLI::App* sub) {
    sub->add_option("--tls-ca", inv.tls_ca_file,
                    "CA of a cluster with TLS (default $AQUIFER_TLS_CA, or ROOT/tls/ca.pem)");
    sub->add_option("--tls-server-name", inv.tls_server_name,
                    "the name the servers' certificates carry (default aquifer)");
  };

  // --meta | --root on a cluster-wide command.
  std::vector<std::pair<CLI::Option*, CLI::Option*>> target_opts;
  auto add_target = [&](CLI::App* sub) {
    CLI::Option* m = sub->add_option("--meta", inv.meta_address, "metadata server HOST:PORT");
    sub->add_option("--key", inv.key_file,
                    "cluster key file (default $AQUIFER_KEY_FILE, or ROOT/cluster.key)");
    CLI::Option* r = sub->add_option("--root", root, "local cluster directory")
                         ->default_str(kDefaultClusterRoot);
    m->excludes(r);
    add_tls(sub);
    target_opts.emplace_back(m, r);
  };

  // server
  CLI::App* server = app.add_subcommand("server", "list, drain and remove data servers");
  server->require_subcommand(1);
  CLI::App* slist = server->add_subcommand("list", "every data server: state, PG positions, use");
  slist->add_flag("--all", inv.all, "removed servers too");
  add_target(slist);
  CLI::App* sdrain = server->add_subcommand(
      "drain", "move every PG position off server ID (it takes no new ones)");
  sdrain->add_option("ID", inv.server_ref, "server id or name (as `aquifer server list` shows)")
      ->required()
      ->check(kServerRefCheck);
  sdrain->add_flag("--wait", inv.follow,
                   "then follow the drain with a progress bar until it is done (Ctrl-C stops "
                   "following, not the drain)");
  sdrain->add_option("--timeout", inv.wait_timeout_s, "with --wait: give up after S seconds (3600)");
  sdrain->add_option("--interval", inv.wait_interval_s,
                     "with --wait: seconds between progress lines when not on a terminal (5)");
  add_target(sdrain);
  CLI::App* sundrain = server->add_subcommand(
      "undrain", "end a drain: server ID takes PG positions again, its drain moves stop");
  sundrain->add_option("ID", inv.server_ref, "server id or name (as `aquifer server list` shows)")
      ->required()
      ->check(kServerRefCheck);
  add_target(sundrain);
  CLI::App* sremove = server->add_subcommand(
      "remove", "remove server ID from the cluster (refused while it holds PG positions)");
  sremove->add_option("ID", inv.server_ref, "server id or name (as `aquifer server list` shows)")
      ->required()
      ->check(kServerRefCheck);
  sremove->add_flag("--force", inv.force,
                    "remove even if it holds positions: treat it as failed and rebuild them");
  sremove->add_flag("--yes", inv.yes,
                    "with --force: go on even when the removal makes data unreadable");
  sremove->add_option("--grace-ms", grace_ms, "local cluster: SIGTERM -> SIGKILL (10000)");
  add_target(sremove);

  // client add/list/remove (client_admin.h)
  CLI::App* client = app.add_subcommand(
      "client", "client credentials and exports (run on the metadata server's host)");
  client->require_subcommand(1);
  CLI::App* cadd = client->add_subcommand("add", "make a credential for a mount (-o key=FILE)");
  cadd->add_option("NAME", inv.client.name, "client name: letters, digits, _ - .")->required();
  cadd->add_option("--path", inv.client.path, "the subtree it sees as its root (default /)");
  cadd->add_flag("--read-only", inv.client.read_only, "writes fail with EROFS");
  cadd->add_flag("--root-squash", inv.client.root_squash, "uid and gid 0 act as nobody (65534)");
  cadd->add_option("--allow", inv.client.allow, "peer network CIDR, repeatable (default any)");
  cadd->add_option("--out", inv.client.credential_file,
                   "credential file to write (0600, never overwritten; default NAME.key)");
  cadd->add_option("--key", inv.key_file,
                   "cluster key file (default $AQUIFER_KEY_FILE, or ROOT/cluster.key)");
  CLI::App* clist = client->add_subcommand("list", "the registered clients and their exports");
  CLI::App* cremove = client->add_subcommand(
      "remove", "revoke a client: its mounts fail within seconds");
  cremove->add_option("NAME", inv.client.name, "client name")->required();
  for (CLI::App* c : {cadd, clist, cremove}) {
    c->add_option("--registry", inv.client_registry,
                  "client registry file (aquifer-meta --clients; default ROOT/clients)");
    c->add_option("--root", root, "local cluster directory")->default_str(kDefaultClusterRoot);
  }

  // repair wait / rebalance wait
  CLI::App* repair = app.add_subcommand("repair", "repair of lost PG positions");
  repair->require_subcommand(1);
  CLI::App* rwait = repair->add_subcommand(
      "wait", "wait until no repair is left (progress bar on a terminal)");
  CLI::App* rebalance = app.add_subcommand("rebalance", "rebalance and drain moves");
  rebalance->require_subcommand(1);
  CLI::App* bwait = rebalance->add_subcommand(
      "wait", "wait until no rebalance or drain move is left (progress bar on a terminal)");
  for (CLI::App* w : {rwait, bwait}) {
    w->add_option("--timeout", inv.wait_timeout_s, "give up after S seconds (3600): exit 1");
    w->add_option("--interval", inv.wait_interval_s,
                  "seconds between progress lines when not on a terminal (5)");
    add_target(w);
  }

  // fsck
  CLI::App* fsck = app.add_subcommand(
      "fsck", "check every file's chunks on the data servers: missing, orphaned, uncommitted");
  fsck->add_flag("--repair", inv.fsck_repair, "delete orphaned chunks");
  fsck->add_flag("--verbose", inv.verbose, "list every finding, not the first 20 of each kind");
  fsck->add_option("--interval", inv.wait_interval_s,
                   "seconds between progress lines when not on a terminal (5; 0: none)");
  add_target(fsck);

  // meta backup / restore
  CLI::App* meta = app.add_subcommand("meta", "the namespace: backup and restore");
  meta->require_subcommand(1);
  CLI::App* mbackup = meta->add_subcommand(
      "backup", "write a consistent copy of the namespace into DEST, on the metadata server's "
                "host, while clients keep working");
  mbackup->add_option("DEST", inv.backup_dest,
                      "a new (or empty) directory: an absolute path on the metadata server's host")
      ->required();
  mbackup->add_option("--timeout", inv.wait_timeout_s, "give up after S seconds (3600)");
  add_target(mbackup);
  CLI::App* mrestore = meta->add_subcommand(
      "restore", "restore a backup into a metadata directory (aquifer-meta must be stopped)");
  mrestore->add_option("--from", inv.restore_from, "the backup directory")->required();
  mrestore->add_option("--meta-dir", inv.meta_dir,
                       "the metadata server's RocksDB directory (its --db)")
      ->required();
  mrestore->add_flag("--force", inv.force,
                     "restore into a non-empty directory: its contents are moved aside first");
  mrestore->add_option("--ino-margin", inv.ino_margin,
                       "inode numbers to skip past the backup's (default: 100,000 per second "
                       "since the backup, at least 2^24)")
      ->check(CLI::PositiveNumber);

  // status
  CLI::App* status = app.add_subcommand("status", "servers, placement groups, capacity, mount");
  status->add_option("--key", inv.key_file,
                     "cluster key file (default $AQUIFER_KEY_FILE, or ROOT/cluster.key)");
  CLI::Option* smeta = status->add_option("--meta", inv.meta_address,
                                          "metadata server HOST:PORT");
  CLI::Option* sroot = status->add_option("--root", root, "local cluster directory")
                           ->default_str(kDefaultClusterRoot);
  smeta->excludes(sroot);
  add_tls(status);

  // mount
  CLI::App* mount = app.add_subcommand(
      "mount", "mount the cluster on DIR once more (another mount, e.g. for a second user)");
  mount->add_option("DIR", inv.path, "an existing, empty directory")->required();
  mount->add_option("-o", inv.up.mount_options, "aquifer-mount options (opt1,opt2,...)");
  mount->add_option("--bin-dir", f.bin_dir, "directory (or build tree) holding aquifer-mount");
  add_target(mount);

  // layout
  CLI::App* layout = app.add_subcommand("layout", "a file's or directory's layout (k, m, unit)");
  layout->require_subcommand(1);
  CLI::App* lget = layout->add_subcommand("get", "print PATH's layout");
  lget->add_option("PATH", inv.path, "a path on an Aquifer mount")->required();
  CLI::App* lset = layout->add_subcommand(
      "set", "set PATH's layout (directory: default for new files; file: only while empty)");
  lset->add_option("PATH", inv.path, "a path on an Aquifer mount")->required();
  lset->add_option("LAYOUT", inv.layout_tokens, "k=K m=M unit=BYTES")->required();

  app.footer("aquifer help [COMMAND...] prints a command's help (as COMMAND... --help).");
  // `aquifer help [COMMAND...]` is `aquifer [COMMAND...] --help`.
  std::vector<std::string> words = args;
  if (!words.empty() && words.front() == "help") {
    words.erase(words.begin());
    CLI::App* at = &app;
    std::string path;
    for (const std::string& w : words) {
      CLI::App* sub = nullptr;
      try {
        sub = at->get_subcommand(w);
      } catch (const CLI::OptionNotFound&) {
      }
      if (sub == nullptr) {
        return InvalidArgument("aquifer help: no command '" + path + (path.empty() ? "" : " ") +
                               w + "' (`aquifer help` lists the commands)");
      }
      at = sub;
      path += (path.empty() ? "" : " ") + w;
    }
    words.push_back("--help");
  }
  std::vector<std::string> reversed(words.rbegin(), words.rend());
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
  } catch (const CLI::CallForVersion& e) {
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
    if (otls->count()) inv.up.tls = f.tls;
    for (std::string a : meta_args) {
      if (a.rfind("-", 0) != 0) a = "--" + a;
      inv.up.meta_args.push_back(a);
    }
    (void)omarg;
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
  if (cadd->parsed() || clist->parsed() || cremove->parsed()) {
    inv.command = cadd->parsed()   ? Command::kClientAdd
                  : clist->parsed() ? Command::kClientList
                                    : Command::kClientRemove;
    if (inv.client_registry.empty()) inv.client_registry = ClientRegistryPath(inv.up.root);
    if (inv.client.credential_file.empty()) inv.client.credential_file = inv.client.name + ".key";
    return inv;
  }
  if (key_new->parsed()) {
    inv.command = Command::kClusterKeyNew;
  } else if (tls_new->parsed()) {
    inv.command = Command::kTlsNew;
  } else if (down->parsed()) {
    inv.command = Command::kClusterDown;
  } else if (stop->parsed()) {
    inv.command = Command::kStopServer;
  } else if (start->parsed()) {
    inv.command = Command::kStartServer;
    inv.up.bin_dir = f.bin_dir;
    inv.up.timeout = std::chrono::milliseconds(timeout_ms);
  } else if (status->parsed()) {
    inv.command = Command::kStatus;
  } else if (grow->parsed()) {
    inv.command = Command::kClusterGrow;
    inv.up.bin_dir = f.bin_dir;
    inv.up.timeout = std::chrono::milliseconds(timeout_ms);
  } else if (slist->parsed()) {
    inv.command = Command::kServerList;
  } else if (sdrain->parsed()) {
    inv.command = Command::kServerDrain;
  } else if (sremove->parsed()) {
    inv.command = Command::kServerRemove;
  } else if (sundrain->parsed()) {
    inv.command = Command::kServerUndrain;
  } else if (mount->parsed()) {
    inv.command = Command::kMount;
    inv.up.bin_dir = f.bin_dir;
  } else if (rwait->parsed()) {
    inv.command = Command::kRepairWait;
  } else if (bwait->parsed()) {
    inv.command = Command::kRebalanceWait;
  } else if (fsck->parsed()) {
    inv.command = Command::kFsck;
  } else if (mbackup->parsed()) {
    inv.command = Command::kMetaBackup;
  } else if (mrestore->parsed()) {
    inv.command = Command::kMetaRestore;
  } else if (lget->parsed()) {
    inv.command = Command::kLayoutGet;
  } else if (lset->parsed()) {
    inv.command = Command::kLayoutSet;
  } else {
    inv.command = Command::kHelp;
    inv.help_text = app.help();
  }
  if (!inv.meta_address.empty()) {
    Result<uint16_t> port = PortOf(inv.meta_address);
    if (!port.ok()) return InvalidArgument("--meta: " + port.status().message());
  }
  if (inv.wait_timeout_s <= 0 || inv.wait_interval_s <= 0) {
    return InvalidArgument("--timeout and --interval must be positive");
  }
  return inv;
}

std::string VersionText() { return std::string("aquifer ") + AQUIFER_VERSION; }

int RunInvocation(const Invocation& inv, std::ostream& out, std::ostream& err) {
  const bool client_admin = inv.command == Command::kClientAdd ||
                            inv.command == Command::kClientList ||
                            inv.command == Command::kClientRemove;
  const bool offline = inv.command == Command::kClusterKeyNew ||
                       inv.command == Command::kTlsNew || client_admin;
  if (const std::string key = KeyFilePath(inv.key_file); !key.empty() && !offline) {
    if (Status st = LoadKeyForProcess(key); !st.ok()) return Fail(err, st);
  }
  // An explicit CA (--tls-ca, $AQUIFER_TLS_CA) for every command that calls a cluster; a local
  // cluster's own ROOT/tls/ca.pem is taken where its record is read.
  if (!offline && (!inv.tls_ca_file.empty() || std::getenv("AQUIFER_TLS_CA") != nullptr)) {
    if (Status st = UseTlsCa(inv.tls_ca_file, inv.tls_server_name); !st.ok()) {
      return Fail(err, st);
    }
  }
  switch (inv.command) {
    case Command::kHelp:
      out << inv.help_text;
      return 0;
    case Command::kClusterUp: {
      Result<ClusterState> s = ClusterUp(inv.up, out);
      if (!s.ok()) return Fail(err, s.status());
      return 0;
    }
    case Command::kClusterKeyNew: {
      Status st = WriteNewClusterKeyFile(inv.path);
      if (!st.ok()) return Fail(err, st);
      out << "aquifer: wrote a new cluster key to " << inv.path
          << " (mode 0600); copy it to every host of the cluster and name it with --key / "
             "key = in each daemon's config and -o key= on each mount\n";
      return 0;
    }
    case Command::kTlsNew: {
      const std::string name =
          inv.tls_server_name.empty() ? kDefaultTlsServerName : inv.tls_server_name;
      Status st = WriteNewTlsFiles(inv.path, name, inv.tls_days);
      if (!st.ok()) return Fail(err, st);
      const std::string d = inv.path;
      out << "aquifer: wrote a private CA and a server certificate for \"" << name << "\" (good "
          << "for " << inv.tls_days << " days) to " << d << ":\n"
          << "  " << d << "/ca.pem      the CA certificate: to every host (servers, mounts, "
             "the aquifer command)\n"
          << "  " << d << "/server.pem  the server certificate: to every aquifer-meta and "
             "aquifer-data host\n"
          << "  " << d << "/server.key  its key (0600): to every aquifer-meta and aquifer-data "
             "host, nowhere else\n"
          << "  " << d << "/ca.key      the CA's key (0600): keep it off the cluster, to sign "
             "the next certificate\n"
          << "then: servers   tls = true, tls_ca, tls_cert, tls_key"
          << (name == kDefaultTlsServerName ? "" : ", tls_server_name = \"" + name + "\"")
          << " in their configs (or --tls --tls-ca --tls-cert --tls-key"
          << (name == kDefaultTlsServerName ? "" : " --tls-server-name " + name) << ")\n"
          << "      mounts    -o tls_ca=FILE"
          << (name == kDefaultTlsServerName ? "" : ",tls_server_name=" + name) << "\n"
          << "      aquifer   --tls-ca FILE"
          << (name == kDefaultTlsServerName ? "" : " --tls-server-name " + name)
          << " or AQUIFER_TLS_CA=FILE\n";
      return 0;
    }
    case Command::kClientAdd: {
      // The client's key is derived from the cluster key: --key, $AQUIFER_KEY_FILE, else the
      // local cluster's ROOT/cluster.key.
      std::string key_path = KeyFilePath(inv.key_file);
      if (key_path.empty()) key_path = ClusterKeyPath(AbsoluteRoot(inv.up.root));
      Result<ClusterKey> key = ReadClusterKeyFile(key_path);
      if (!key.ok()) return Fail(err, key.status());
      Status st = AddClient(inv.client_registry, *key, inv.client, out);
      return st.ok() ? 0 : Fail(err, st);
    }
    case Command::kClientList: {
      Status st = ListClients(inv.client_registry, out);
      return st.ok() ? 0 : Fail(err, st);
    }
    case Command::kClientRemove: {
      Status st = RemoveClient(inv.client_registry, inv.client.name, out);
      return st.ok() ? 0 : Fail(err, st);
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
    case Command::kClusterGrow: {
      Status st = GrowCluster(inv.up.root, inv.grow_count, inv.up.bin_dir, inv.up.timeout, out);
      if (!st.ok()) return Fail(err, st);
      return inv.follow ? RunWait(inv, /*repair=*/false, out, err) : 0;
    }
    case Command::kServerList:
      return RunServerList(inv, out, err);
    case Command::kServerDrain:
      return RunServerDrain(inv, out, err);
    case Command::kServerRemove:
      return RunServerRemove(inv, out, err);
    case Command::kServerUndrain:
      return RunServerUndrain(inv, out, err);
    case Command::kMount:
      return RunMount(inv, out, err);
    case Command::kRepairWait:
      return RunWait(inv, /*repair=*/true, out, err);
    case Command::kRebalanceWait:
      return RunWait(inv, /*repair=*/false, out, err);
    case Command::kFsck:
      return RunFsckCommand(inv, out, err);
    case Command::kMetaBackup:
      return RunMetaBackup(inv, out, err);
    case Command::kMetaRestore:
      return RunMetaRestore(inv, out, err);
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

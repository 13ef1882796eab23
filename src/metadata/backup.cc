// Backups of the namespace (MetadataService::Backup) and their offline restore (backup.h).
#include "metadata/backup.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "common/logging.h"
#include "metadata/metadata_service.h"
#include "metadata/namespace_store.h"

namespace aquifer::meta {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxPathBytes = PATH_MAX - 1;  // 4095: what the kernel takes with its NUL

std::string Errno(int e) { return std::strerror(e); }

// Resolves symlinks in `p` (which must exist). Errors: kInternal.
Result<std::string> RealPath(const std::string& p) {
  char buf[PATH_MAX];
  if (::realpath(p.c_str(), buf) == nullptr) {
    return Internal("resolve " + p + ": " + Errno(errno));
  }
  return std::string(buf);
}

// Whether `inner` is `outer` or lies inside it (both absolute and normal, no trailing '/').
bool Within(const std::string& inner, const std::string& outer) {
  if (outer == "/") return true;
  return inner == outer || (inner.size() > outer.size() && inner.compare(0, outer.size(), outer) == 0 &&
                            inner[outer.size()] == '/');
}

// Whether directory `dir` holds nothing. Errors: kInternal.
Result<bool> DirIsEmpty(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return Internal("open directory " + dir + ": " + Errno(errno));
  bool empty = true;
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      empty = false;
      break;
    }
  }
  ::closedir(d);
  return empty;
}

Status FsyncPath(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), (directory ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Internal("open " + path + " to fsync: " + Errno(errno));
  int rc = ::fsync(fd);
  int e = errno;
  ::close(fd);
  if (rc != 0) return Internal("fsync " + path + ": " + Errno(e));
  return OkStatus();
}

int64_t SystemNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "20240131T120000Z" for a wall-clock time in ms.
std::string Stamp(int64_t unix_ms) {
  std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

// Files and bytes directly in `dir`.
std::pair<uint64_t, uint64_t> CountFiles(const std::string& dir) {
  uint64_t files = 0, bytes = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::error_code fec;
    if (!e.is_regular_file(fec)) continue;
    ++files;
    bytes += e.file_size(fec);
  }
  return {files, bytes};
}

}  // namespace

// --- destination checks and the manifest ------------------------------------------------------
Status CheckBackupDestination(std::string_view dest, const std::string& db_dir,
                              const std::string& root) {
  if (dest.empty()) return InvalidArgument("backup destination is empty");
  if (dest.size() > kMaxPathBytes) {
    return Status(Code::kNameTooLong, "backup destination is " + std::to_string(dest.size()) +
                                          " bytes long, over " + std::to_string(kMaxPathBytes));
  }
  if (dest.find('\0') != std::string_view::npos) {
    return InvalidArgument("backup destination holds a NUL byte");
  }
  const std::string shown(dest);
  if (dest.front() != '/') {
    return InvalidArgument("backup destination '" + shown +
                           "' is not an absolute path (the metadata server writes it on its "
                           "own host, so a relative path has no meaning there)");
  }
  std::string path(dest);
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  if (path == "/") return InvalidArgument("backup destination '/' names no directory");
  for (size_t at = 1; at <= path.size();) {
    size_t end = path.find('/', at);
    if (end == std::string::npos) end = path.size();
    const std::string_view part(path.data() + at, end - at);
    if (part == "." || part == "..") {
      return InvalidArgument("backup destination '" + shown + "' has a '" + std::string(part) +
                             "' component; give the plain absolute path");
    }
    if (part.size() > 255) {
      return Status(Code::kNameTooLong,
                    "backup destination '" + shown + "' has a component over 255 bytes");
    }
    at = end + 1;
  }
  const size_t slash = path.rfind('/');
  const std::string parent = slash == 0 ? "/" : path.substr(0, slash);
  const std::string name = path.substr(slash + 1);
  struct stat st{};
  if (::stat(parent.c_str(), &st) != 0) {
    const int e = errno;
    if (e == ENOENT) {
      return NotFound("backup destination's parent directory " + parent +
                      " does not exist on the metadata server's host (create it first)");
    }
    return Internal("stat " + parent + ": " + Errno(e));
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status(Code::kNotDirectory, "backup destination's parent " + parent +
                                           " is not a directory");
  }
  Result<std::string> real_parent = RealPath(parent);
  if (!real_parent.ok()) return real_parent.status();
  const std::string full = (*real_parent == "/" ? "" : *real_parent) + "/" + name;
  Result<std::string> real_db = RealPath(db_dir);
  if (!real_db.ok()) return real_db.status();
  if (Within(full, *real_db) || Within(*real_db, full)) {
    return InvalidArgument("backup destination " + shown +
                           " overlaps the metadata server's RocksDB directory " + *real_db);
  }
  if (!root.empty()) {
    Result<std::string> real_root = RealPath(root);
    if (!real_root.ok()) {
      return Status(Code::kPermissionDenied, "backup root " + root +
                                                 " cannot be resolved: " +
                                                 real_root.status().message());
    }
    if (full == *real_root || !Within(full, *real_root)) {
      return Status(Code::kPermissionDenied, "backup destination " + shown +
                                                 " is outside the metadata server's backup root " +
                                                 *real_root + " (--backup-root)");
    }
  }
  if (::lstat(path.c_str(), &st) != 0) {
    const int e = errno;
    if (e == ENOENT) return OkStatus();
    return Internal("stat " + path + ": " + Errno(e));
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status(Code::kNotDirectory, "backup destination " + shown +
                                           " exists and is not a directory");
  }
  Result<bool> empty = DirIsEmpty(path);
  if (!empty.ok()) return empty.status();
  if (!*empty) {
    return AlreadyExists("backup destination " + shown +
                         " is not empty: give a new directory (or an empty one)");
  }
  return OkStatus();
}

Status WriteBackupManifest(const std::string& dir, const BackupManifest& m) {
  const std::string path = dir + "/" + kBackupManifest;
  {
    std::ofstream out(path, std::ios::trunc);
    out << "# An Aquifer metadata backup (a RocksDB checkpoint). Restore it with\n"
        << "#   aquifer meta restore --from " << dir << " --meta-dir DIR\n"
        << "format " << m.format << "\n"
        << "created_unix_ms " << m.created_unix_ms << "\n"
        << "created " << Stamp(m.created_unix_ms) << "\n"
        << "source_db " << m.source_db << "\n"
        << "source_host " << m.source_host << "\n"
        << "inodes " << m.inodes << "\n";
    out.flush();
    if (!out) return Internal("write " + path);
  }
  AQ_RETURN_IF_ERROR(FsyncPath(path, false));
  return FsyncPath(dir, true);
}

Result<BackupManifest> ReadBackupManifest(const std::string& dir) {
  const std::string path = dir + "/" + kBackupManifest;
  std::ifstream in(path);
  if (!in) {
    return NotFound(dir + " is not an Aquifer metadata backup: it has no " +
                    std::string(kBackupManifest) + " file");
  }
  BackupManifest m;
  bool have_format = false, have_time = false;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.find(' ');
    const std::string key = line.substr(0, sp);
    const std::string value = sp == std::string::npos ? "" : line.substr(sp + 1);
    try {
      if (key == "format") {
        m.format = static_cast<uint32_t>(std::stoul(value));
        have_format = true;
      } else if (key == "created_unix_ms") {
        m.created_unix_ms = std::stoll(value);
        have_time = true;
      } else if (key == "source_db") {
        m.source_db = value;
      } else if (key == "source_host") {
        m.source_host = value;
      } else if (key == "inodes") {
        m.inodes = std::stoull(value);
      }  // other keys (e.g. "created"): for people
    } catch (const std::exception&) {
      return Corruption(path + ":" + std::to_string(n) + ": bad value for " + key);
    }
  }
  if (in.bad()) return Internal("read " + path);
  if (!have_format || !have_time) {
    return Corruption(path + ": no format or created_unix_ms line (a truncated manifest?)");
  }
  if (m.format != 1) {
    return Corruption(path + ": backup format " + std::to_string(m.format) +
                      " is not one this aquifer knows (1)");
  }
  return m;
}

// --- the online backup ------------------------------------------------------------------------
Result<BackupResult> MetadataService::Backup(std::string_view dest_dir) {
  std::unique_lock running(backup_mu_, std::try_to_lock);
  if (!running.owns_lock()) {
    return Status(Code::kWouldBlock, "another backup is running; try again when it ends");
  }
  AQ_RETURN_IF_ERROR(CheckBackupDestination(dest_dir, options_.db, options_.backup_root));
  const auto start = std::chrono::steady_clock::now();
  std::string dest(dest_dir);
  while (dest.size() > 1 && dest.back() == '/') dest.pop_back();
  const size_t slash = dest.rfind('/');
  const std::string parent = slash == 0 ? "/" : dest.substr(0, slash);
  std::mt19937_64 rng(std::random_device{}());
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, "%d-%08llx", static_cast<int>(::getpid()),
                static_cast<unsigned long long>(rng() & 0xffffffffu));
  // Beside the destination, so the final rename stays in one file system; hidden, so an
  // interrupted backup is not taken for one (the hourly timer's cleanup removes old ones).
  const std::string tmp = (parent == "/" ? "" : parent) + "/." + dest.substr(slash + 1) +
                          ".partial-" + suffix;
  auto cleanup = [&tmp] {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    fs::remove_all(tmp + ".tmp", ec);  // RocksDB's own staging directory
  };

  BackupManifest manifest;
  const Timespec now = clocks_.wall();
  manifest.created_unix_ms = now.sec * 1000 + now.nsec / 1000000;  // before: the age is not short
  manifest.source_db = options_.db;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) manifest.source_host = host;
  manifest.inodes = InodeCount();

  Status made = store_->Checkpoint(tmp);
  if (made.ok()) made = WriteBackupManifest(tmp, manifest);
  if (!made.ok()) {
    cleanup();
    Logger("meta")->error("backup failed dest={}: {}", dest, made.ToString());
    return made;
  }
  // rename(2) replaces an empty directory and fails on anything else, so a destination that
  // filled up since the check is never overwritten.
  if (::rename(tmp.c_str(), dest.c_str()) != 0) {
    const int e = errno;
    cleanup();
    if (e == EEXIST || e == ENOTEMPTY) {
      return AlreadyExists("backup destination " + dest + " is not empty any more");
    }
    return Internal("rename " + tmp + " to " + dest + ": " + Errno(e));
  }
  AQ_RETURN_IF_ERROR(FsyncPath(parent, true));

  BackupResult out;
  out.dir = dest;
  out.manifest = manifest;
  std::tie(out.files, out.bytes) = CountFiles(dest);
  struct stat a{}, b{};
  out.same_file_system = ::stat(dest.c_str(), &a) == 0 && ::stat(options_.db.c_str(), &b) == 0 &&
                         a.st_dev == b.st_dev;
  out.took_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - start)
                    .count();
  Logger("meta")->info("backup dir={} files={} bytes={} inodes={} took_ms={} same_fs={}", dest,
                       out.files, out.bytes, manifest.inodes, out.took_ms, out.same_file_system);
  if (out.same_file_system) {
    Logger("meta")->warn("backup dir={} is on the RocksDB directory's file system: it shares "
                         "its files (hard links) and does not survive that disk; copy it off",
                         dest);
  }
  return out;
}

// --- the offline restore ----------------------------------------------------------------------
namespace {

std::string Normal(const std::string& p) {
  fs::path n = fs::absolute(p).lexically_normal();
  std::string s = n.string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

// kUnavailable when another process holds RocksDB's lock on `dir` (a running aquifer-meta).
Status CheckNotLocked(const std::string& dir) {
  const std::string lock = dir + "/LOCK";
  int fd = ::open(lock.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return OkStatus();  // no lock file: no RocksDB has it open
  struct flock fl{};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  int rc = ::fcntl(fd, F_GETLK, &fl);
  ::close(fd);
  if (rc == 0 && fl.l_type != F_UNLCK) {
    return Unavailable(dir + " is in use: process " + std::to_string(fl.l_pid) +
                       " holds its RocksDB lock (stop aquifer-meta before a restore)");
  }
  return OkStatus();
}

Status CopyFileSynced(const std::string& from, const std::string& to, uint64_t* bytes) {
  std::error_code ec;
  if (!fs::copy_file(from, to, fs::copy_options::none, ec)) {
    return Internal("copy " + from + " to " + to + ": " + ec.message());
  }
  *bytes += fs::file_size(to, ec);
  return FsyncPath(to, false);
}

uint64_t Counter(NamespaceStore& store, const char* name, Status* st) {
  auto v = store.GetCounter(name);
  if (!v.ok()) {
    if (st->ok()) *st = v.status();
    return 0;
  }
  return *v;
}

}  // namespace

Result<RestoreResult> RestoreBackup(const RestoreOptions& o) {
  if (o.from.empty()) return InvalidArgument("restore: no backup directory (--from)");
  if (o.meta_dir.empty()) return InvalidArgument("restore: no metadata directory (--meta-dir)");
  const std::string from = Normal(o.from), meta = Normal(o.meta_dir);
  std::error_code ec;
  if (!fs::exists(from, ec)) return NotFound("no backup at " + from);
  if (!fs::is_directory(from, ec)) {
    return Status(Code::kNotDirectory, "backup " + from + " is not a directory");
  }
  Result<BackupManifest> manifest = ReadBackupManifest(from);
  if (!manifest.ok()) return manifest.status();
  if (!fs::exists(from + "/CURRENT", ec)) {
    return Corruption(from + " has a manifest but no RocksDB CURRENT file: not a whole backup");
  }
  const std::string real_from = fs::canonical(from, ec).string();
  const std::string real_meta = fs::weakly_canonical(meta, ec).string();
  if (Within(real_meta, real_from) || Within(real_from, real_meta)) {
    return InvalidArgument("restore: the metadata directory " + meta + " and the backup " + from +
                           " overlap");
  }

  RestoreResult out;
  out.manifest = *manifest;
  const int64_t now_ms = o.now_unix_ms ? o.now_unix_ms() : SystemNowMs();
  if (fs::exists(meta, ec) || fs::is_symlink(meta, ec)) {
    if (!fs::is_directory(meta, ec)) {
      return Status(Code::kNotDirectory, "metadata directory " + meta + " is not a directory");
    }
    AQ_RETURN_IF_ERROR(CheckNotLocked(meta));
    Result<bool> empty = DirIsEmpty(meta);
    if (!empty.ok()) return empty.status();
    if (!*empty) {
      if (!o.force) {
        return AlreadyExists("metadata directory " + meta +
                             " is not empty: a restore does not overwrite one. Stop aquifer-meta "
                             "and pass --force to move its contents aside (to " + meta +
                             ".pre-restore-TIME), or give an empty directory");
      }
      std::string aside = meta + ".pre-restore-" + Stamp(now_ms);
      for (int i = 1; fs::exists(aside, ec); ++i) {
        aside = meta + ".pre-restore-" + Stamp(now_ms) + "-" + std::to_string(i);
      }
      if (::rename(meta.c_str(), aside.c_str()) != 0) {
        return Internal("move " + meta + " aside to " + aside + ": " + Errno(errno) +
                        " (a mount point cannot be moved: empty it yourself, then restore)");
      }
      out.moved_aside = aside;
      if (::mkdir(meta.c_str(), 0700) != 0) return Internal("mkdir " + meta + ": " + Errno(errno));
    }
  } else {
    fs::create_directories(meta, ec);
    if (ec) return Internal("create " + meta + ": " + ec.message());
  }

  // Copy the checkpoint's files (it is flat: SST, MANIFEST, CURRENT, OPTIONS, WAL).
  for (const auto& e : fs::directory_iterator(from, ec)) {
    const std::string name = e.path().filename().string();
    if (name == kBackupManifest) continue;
    std::error_code fec;
    if (!e.is_regular_file(fec)) {
      return Corruption("backup " + from + " holds " + name + ", which is not a regular file");
    }
    AQ_RETURN_IF_ERROR(CopyFileSynced(e.path().string(), meta + "/" + name, &out.bytes));
    ++out.files;
  }
  if (ec) return Internal("list " + from + ": " + ec.message());
  AQ_RETURN_IF_ERROR(FsyncPath(meta, true));

  // Move the counters past anything handed out after the backup (backup.h).
  auto opened = OpenRocksStore(meta);
  if (!opened.ok()) {
    return Status(opened.status().code(), "open the restored store in " + meta + ": " +
                                              opened.status().message());
  }
  NamespaceStore& store = **opened;
  Status st;
  const uint64_t next_ino = std::max<uint64_t>(Counter(store, "next_ino", &st), 2);
  const uint64_t reserved = std::max<uint64_t>(Counter(store, "version_reserved", &st), 1);
  const uint64_t next_gc = std::max<uint64_t>(Counter(store, "next_gc", &st), 1);
  const uint64_t boot = Counter(store, "boot", &st);
  const uint64_t map_version = Counter(store, "map_version", &st);
  uint64_t id_floor = Counter(store, "id_floor", &st);
  uint64_t server_floor = Counter(store, "server_id_floor", &st);
  out.restores = Counter(store, "restores", &st) + 1;
  out.inodes = Counter(store, "inodes", &st);
  AQ_RETURN_IF_ERROR(st);
  auto servers = store.LoadServers();
  if (!servers.ok()) return servers.status();
  for (const ServerRecord& s : *servers) server_floor = std::max<uint64_t>(server_floor, s.id.value() + 1);
  auto moves = store.LoadMoveTasks();
  if (!moves.ok()) return moves.status();
  for (const MoveTask& m : *moves) id_floor = std::max(id_floor, m.id + 1);
  auto pg_gcs = store.LoadPgGcTasks();
  if (!pg_gcs.ok()) return pg_gcs.status();
  for (const PgGcTask& g : *pg_gcs) id_floor = std::max(id_floor, g.id + 1);

  const int64_t age_ms = std::max<int64_t>(0, now_ms - manifest->created_unix_ms);
  const uint64_t age_s = static_cast<uint64_t>(age_ms / 1000 + 1);
  out.ino_margin = o.ino_margin != 0
                       ? o.ino_margin
                       : std::max(kRestoreMinInoMargin,
                                  std::min<uint64_t>(age_s, uint64_t{1} << 40) *
                                      kRestoreCreatesPerSecond);
  constexpr uint64_t kLimit = uint64_t{1} << 62;
  if (out.ino_margin >= kLimit || next_ino >= kLimit - out.ino_margin) {
    return InvalidArgument("restore: an inode margin of " + std::to_string(out.ino_margin) +
                           " would pass 2^62");
  }
  if (reserved >= kLimit - kRestoreVersionMargin) {
    return InvalidArgument("restore: the write-version counter would pass 2^62");
  }
  server_floor += kRestoreServerIdMargin;
  if (server_floor > UINT32_MAX) return InvalidArgument("restore: server ids would pass 2^32");
  out.ino_floor = next_ino + out.ino_margin;
  out.version_floor = reserved + kRestoreVersionMargin;

  StoreBatch b;
  b.PutCounter("next_ino", out.ino_floor);
  b.PutCounter("version_reserved", out.version_floor);
  b.PutCounter("next_gc", next_gc + kRestoreIdMargin);
  b.PutCounter("id_floor", std::max<uint64_t>(id_floor, 1) + kRestoreIdMargin);
  b.PutCounter("server_id_floor", server_floor);
  b.PutCounter("boot", boot + kRestoreBootMargin);
  b.PutCounter("map_version", map_version + kRestoreMapVersionMargin);
  b.PutCounter("restore_version_floor", out.version_floor);
  b.PutCounter("restore_ino_floor", out.ino_floor);
  b.PutCounter("restores", out.restores);
  b.PutCounter("restored_at_ms", static_cast<uint64_t>(now_ms));
  // Sessions, opens, leases and locks of the backup's instant name clients that have moved on.
  b.DeleteSessionState();
  AQ_RETURN_IF_ERROR(store.Write(b, /*sync=*/true));
  opened->reset();  // closes RocksDB
  return out;
}

}  // namespace aquifer::meta

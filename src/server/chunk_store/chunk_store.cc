// Chunk store on a local directory. See chunk_store.h and docs/design.md ("Data server").
#include "server/chunk_store/chunk_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>

#include "aquifer/erasure.h"
#include "common/failpoint.h"
#include "common/logging.h"
#include "server/chunk_store/io_ring.h"

namespace aquifer::server {
namespace {

// --- on-disk header -------------------------------------------------------------------------
// Little-endian, 64 bytes, then (format 2 only) a 32-byte placement record, then nblocks CRC32C
// values (uint32 each), then the data.
//   0 magic "AQCHUNK1"   8 format u32 (1|2) 12 block_bytes u32   16 ino u64   24 stripe u64
//  32 position u32      36 reserved u32     40 version u64       48 length u64
//  56 nblocks u32       60 header_crc u32 = CRC32C of bytes [0, 60) and everything after 64.
// Placement record (format 2), at 64: pg_width u32, pg_index u32, k u32, m u32, unit_bytes u32,
//  flags u32 (bit 0: replicated), stripe_bytes u64.
// A chunk written without placement keeps format 1, so format 1 files read as before.
constexpr char kMagic[8] = {'A', 'Q', 'C', 'H', 'U', 'N', 'K', '1'};
constexpr uint32_t kFormat1 = 1;
constexpr uint32_t kFormat2 = 2;
constexpr size_t kFixedHeaderBytes = 64;
constexpr size_t kPlacementBytes = 32;

uint64_t BlockCount(uint64_t length, uint32_t block_bytes) {
  return (length + block_bytes - 1) / block_bytes;
}
size_t PreambleBytes(bool has_placement) {
  return kFixedHeaderBytes + (has_placement ? kPlacementBytes : 0);
}
uint64_t HeaderBytes(uint64_t length, uint32_t block_bytes, const ChunkPlacement& p) {
  return PreambleBytes(p.known()) + 4 * BlockCount(length, block_bytes);
}
int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
uint64_t FileBytes(const ChunkVersion& v, uint32_t block_bytes) {
  return HeaderBytes(v.length_bytes, block_bytes, v.placement) + v.length_bytes;
}

template <class T>
void Put(std::string* s, size_t at, T v) {
  std::memcpy(s->data() + at, &v, sizeof(T));  // x86-64 / aarch64 Linux: little-endian
}
template <class T>
T Get(std::string_view s, size_t at) {
  T v;
  std::memcpy(&v, s.data() + at, sizeof(T));
  return v;
}

uint32_t Crc(std::string_view bytes, uint32_t crc = 0) {
  return Crc32c(std::span<const std::byte>(reinterpret_cast<const std::byte*>(bytes.data()),
                                           bytes.size()),
                crc);
}

std::string EncodeHeader(const ChunkId& id, uint64_t version, std::string_view data,
                         uint32_t block_bytes, const ChunkPlacement& p) {
  const uint64_t nblocks = BlockCount(data.size(), block_bytes);
  const size_t pre = PreambleBytes(p.known());
  std::string h(pre + 4 * nblocks, '\0');
  std::memcpy(h.data(), kMagic, 8);
  Put<uint32_t>(&h, 8, p.known() ? kFormat2 : kFormat1);
  Put<uint32_t>(&h, 12, block_bytes);
  Put<uint64_t>(&h, 16, id.inode.value());
  Put<uint64_t>(&h, 24, id.stripe);
  Put<uint32_t>(&h, 32, id.position);
  Put<uint64_t>(&h, 40, version);
  Put<uint64_t>(&h, 48, data.size());
  Put<uint32_t>(&h, 56, static_cast<uint32_t>(nblocks));
  if (p.known()) {
    Put<uint32_t>(&h, 64, p.pg_width);
    Put<uint32_t>(&h, 68, p.pg_index);
    Put<uint32_t>(&h, 72, p.k);
    Put<uint32_t>(&h, 76, p.m);
    Put<uint32_t>(&h, 80, p.unit_bytes);
    Put<uint32_t>(&h, 84, p.replicated ? 1u : 0u);
    Put<uint64_t>(&h, 88, p.stripe_bytes);
  }
  for (uint64_t b = 0; b < nblocks; ++b) {
    const uint64_t off = b * block_bytes;
    const uint64_t n = std::min<uint64_t>(block_bytes, data.size() - off);
    Put<uint32_t>(&h, pre + 4 * b, Crc(data.substr(off, n)));
  }
  const std::string_view hv(h);
  Put<uint32_t>(&h, 60, Crc(hv.substr(kFixedHeaderBytes), Crc(hv.substr(0, 60))));
  return h;
}

// Checks a header read from disk against what the index says (from the file name); fills crcs.
Status DecodeHeader(std::string_view h, const ChunkId& id, uint64_t version, uint64_t length,
                    const ChunkPlacement& p, uint32_t block_bytes, std::vector<uint32_t>* crcs) {
  if (h.size() < kFixedHeaderBytes || std::memcmp(h.data(), kMagic, 8) != 0) {
    return Corruption("chunk header: bad magic");
  }
  const uint64_t nblocks = BlockCount(length, block_bytes);
  const size_t pre = PreambleBytes(p.known());
  if (Get<uint32_t>(h, 8) != (p.known() ? kFormat2 : kFormat1) ||
      Get<uint32_t>(h, 12) != block_bytes || Get<uint32_t>(h, 56) != nblocks ||
      h.size() != pre + 4 * nblocks) {
    return Corruption("chunk header: bad format, block size or block count");
  }
  if (Crc(h.substr(kFixedHeaderBytes), Crc(h.substr(0, 60))) != Get<uint32_t>(h, 60)) {
    return Corruption("chunk header: checksum mismatch");
  }
  if (Get<uint64_t>(h, 16) != id.inode.value() || Get<uint64_t>(h, 24) != id.stripe ||
      Get<uint32_t>(h, 32) != id.position || Get<uint64_t>(h, 40) != version ||
      Get<uint64_t>(h, 48) != length) {
    return Corruption("chunk header: key, version or length differs from its file name");
  }
  if (p.known() &&
      (Get<uint32_t>(h, 64) != p.pg_width || Get<uint32_t>(h, 68) != p.pg_index ||
       Get<uint32_t>(h, 72) != p.k || Get<uint32_t>(h, 76) != p.m ||
       Get<uint32_t>(h, 80) != p.unit_bytes || Get<uint32_t>(h, 84) != (p.replicated ? 1u : 0u) ||
       Get<uint64_t>(h, 88) != p.stripe_bytes)) {
    return Corruption("chunk header: placement differs from its file name");
  }
  crcs->resize(nblocks);
  for (uint64_t b = 0; b < nblocks; ++b) (*crcs)[b] = Get<uint32_t>(h, pre + 4 * b);
  return OkStatus();
}

Status Errno(const std::string& what, int err = errno) {
  std::string msg = what + ": " + std::strerror(err);
  if (err == ENOSPC || err == EDQUOT) return NoSpace(msg);
  return Internal(msg);
}

std::string FanoutPath(const std::string& root, uint32_t fanout) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "/chunks/%02x/%02x", fanout / 64, fanout % 64);
  return root + buf;
}

std::string ChunkFileName(const ChunkId& id, uint64_t version, uint64_t length,
                          const ChunkPlacement& p) {
  char buf[224];
  int n = std::snprintf(buf, sizeof buf, "c.%llu.%llu.%u.%llu.%llu",
                        static_cast<unsigned long long>(id.inode.value()),
                        static_cast<unsigned long long>(id.stripe), id.position,
                        static_cast<unsigned long long>(version),
                        static_cast<unsigned long long>(length));
  if (p.known()) {
    std::snprintf(buf + n, sizeof buf - n, ".%u.%u.%u.%u.%u.%llu.%u", unsigned{p.pg_width},
                  p.pg_index, unsigned{p.k}, unsigned{p.m}, p.unit_bytes,
                  static_cast<unsigned long long>(p.stripe_bytes), p.replicated ? 1u : 0u);
  }
  return buf;
}

// Parses "c.<ino>.<stripe>.<pos>.<ver>.<len>" (format 1) or the same followed by
// ".<width>.<pg>.<k>.<m>.<unit>.<stripe_bytes>.<replicated>" (format 2).
bool ParseChunkFileName(std::string_view name, ChunkId* id, uint64_t* version, uint64_t* length,
                        ChunkPlacement* placement) {
  if (name.substr(0, 2) != "c.") return false;
  name.remove_prefix(2);
  uint64_t f[12];
  int n = 0;
  while (n < 12) {
    auto [p, ec] = std::from_chars(name.data(), name.data() + name.size(), f[n]);
    if (ec != std::errc() || p == name.data()) return false;
    name.remove_prefix(static_cast<size_t>(p - name.data()));
    ++n;
    if (name.empty()) break;
    if (name[0] != '.') return false;
    name.remove_prefix(1);
  }
  if (!name.empty() || (n != 5 && n != 12) || f[2] > UINT32_MAX || f[3] == 0) return false;
  *id = ChunkId{InodeId(f[0]), f[1], static_cast<uint32_t>(f[2])};
  *version = f[3];
  *length = f[4];
  *placement = {};
  if (n == 12) {
    if (f[5] == 0 || f[5] > UINT16_MAX || f[6] > UINT32_MAX || f[7] > UINT8_MAX ||
        f[8] > UINT8_MAX || f[9] > UINT32_MAX || f[11] > 1) {
      return false;
    }
    *placement = ChunkPlacement{static_cast<uint16_t>(f[5]), static_cast<uint8_t>(f[7]),
                                static_cast<uint8_t>(f[8]),  static_cast<uint32_t>(f[6]),
                                static_cast<uint32_t>(f[9]), f[11] == 1,
                                f[10]};
  }
  return true;
}

using PgKeys = std::vector<std::pair<uint32_t, uint32_t>>;
PgKeys PgKeysOf(const std::vector<ChunkVersion>& versions) {
  PgKeys keys;
  for (const ChunkVersion& v : versions) {
    if (!v.placement.known()) continue;
    std::pair<uint32_t, uint32_t> key{v.placement.pg_width, v.placement.pg_index};
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  }
  return keys;
}

Status ValidatePlacement(const ChunkId& id, const ChunkPlacement& p) {
  if (!p.known()) return OkStatus();
  if (p.pg_width != uint32_t{p.k} + p.m || p.k == 0 || p.unit_bytes == 0 ||
      id.position >= p.pg_width) {
    return InvalidArgument("chunk " + id.ToString() + ": inconsistent placement (pg_width " +
                           std::to_string(p.pg_width) + ", k " + std::to_string(p.k) + ", m " +
                           std::to_string(p.m) + ", unit_bytes " + std::to_string(p.unit_bytes) +
                           ")");
  }
  return OkStatus();
}

Status FsyncPath(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno("open " + path);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  return rc == 0 ? OkStatus() : Errno("fsync " + path, err);
}

Status MkdirIfMissing(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return OkStatus();
  return Errno("mkdir " + path);
}

// Writes `content` to `path` atomically and durably (temp file, fsync, rename, dir fsync).
Status WriteFileAtomic(const std::string& dir, const std::string& name, std::string_view content) {
  const std::string tmp = dir + "/" + name + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("open " + tmp);
  bool ok = ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()) &&
            ::fsync(fd) == 0;
  int err = errno;
  ::close(fd);
  if (!ok) return Errno("write " + tmp, err);
  if (::rename(tmp.c_str(), (dir + "/" + name).c_str()) != 0) return Errno("rename " + tmp);
  return FsyncPath(dir);
}

}  // namespace

uint32_t FanoutOf(const ChunkId& id) {
  uint64_t h = id.inode.value() * 0x9E3779B97F4A7C15ull ^ (id.stripe * 0xC2B2AE3D27D4EB4Full);
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return static_cast<uint32_t>(h % kFanoutDirs);
}

// --- ChunkReader ----------------------------------------------------------------------------

ChunkReader::ChunkReader(ChunkReader&& o) noexcept { *this = std::move(o); }
ChunkReader& ChunkReader::operator=(ChunkReader&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    store_ = o.store_;
    fd_ = std::exchange(o.fd_, -1);
    id_ = o.id_;
    version_ = o.version_;
    length_ = o.length_;
    placement_ = o.placement_;
    block_bytes_ = o.block_bytes_;
    crcs_ = std::move(o.crcs_);
  }
  return *this;
}
ChunkReader::~ChunkReader() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {
// The block-aligned span of file data covering [offset, offset + length).
struct BlockSpan {
  uint64_t first_block = 0;
  uint64_t begin = 0;  // data offset of first_block
  uint64_t end = 0;    // data offset just past the last covering block, clipped to the length
  uint64_t want_begin = 0;
  uint64_t want_end = 0;
};
Result<BlockSpan> SpanOf(uint64_t offset, uint64_t length, uint64_t chunk_length,
                         uint32_t block_bytes) {
  if (length > UINT64_MAX - offset) return InvalidArgument("offset + length overflows");
  // Past the end reads nothing, as pread(2) does: a stripe's data chunk written while the file
  // was shorter is shorter than a reader that knows the new size expects; the rest is a hole.
  if (offset > chunk_length) offset = chunk_length;
  BlockSpan s;
  s.want_begin = offset;
  s.want_end = length == 0 ? chunk_length : std::min(chunk_length, offset + length);
  s.first_block = offset / block_bytes;
  s.begin = s.first_block * block_bytes;
  s.end = s.want_end == s.want_begin
              ? s.begin
              : std::min(chunk_length, BlockCount(s.want_end, block_bytes) * block_bytes);
  if (s.end < s.begin) s.end = s.begin;
  return s;
}
}  // namespace

Status ChunkReader::Read(uint64_t offset, uint64_t length, std::string* out) {
  Result<BlockSpan> span = SpanOf(offset, length, length_, block_bytes_);
  if (!span.ok()) return span.status();
  out->resize(span->end - span->begin);
  if (!out->empty()) {
    const iovec iov{out->data(), out->size()};
    const IoRequest req{fd_, {&iov, 1},
                        HeaderBytes(length_, block_bytes_, placement_) + span->begin};
    AQ_RETURN_IF_ERROR(RingRead({&req, 1}));
    AQ_RETURN_IF_ERROR(store_->VerifyBlocks(*this, span->first_block, *out));
  }
  out->resize(span->want_end - span->begin);
  out->erase(0, span->want_begin - span->begin);
  return OkStatus();
}

// --- ChunkStore -----------------------------------------------------------------------------

ChunkStore::ChunkStore(ChunkStoreOptions options)
    : options_(std::move(options)),
      chunk_locks_(new std::mutex[kChunkLocks]),
      dir_state_(kFanoutDirs, kDirMissing) {}

ChunkStore::~ChunkStore() = default;

Result<std::unique_ptr<ChunkStore>> ChunkStore::Open(const ChunkStoreOptions& options) {
  if (options.dir.empty()) return InvalidArgument("chunk store: dir is required");
  const uint32_t b = options.block_bytes;
  if (b < 4 * kKiB || b > kMaxChunkBytes || (b & (b - 1)) != 0) {
    return InvalidArgument("chunk store: block_bytes must be a power of 2 in [4 KiB, 16 MiB]");
  }
  std::unique_ptr<ChunkStore> store(new ChunkStore(options));
  AQ_RETURN_IF_ERROR(MkdirIfMissing(options.dir));
  AQ_RETURN_IF_ERROR(store->LoadFormat());
  AQ_RETURN_IF_ERROR(MkdirIfMissing(options.dir + "/chunks"));
  if (store->options_.capacity_bytes == 0) {
    struct statvfs vfs {};
    if (::statvfs(options.dir.c_str(), &vfs) != 0) return Errno("statvfs " + options.dir);
    struct stat st {};
    if (::stat(options.dir.c_str(), &st) != 0) return Errno("stat " + options.dir);
    store->options_.capacity_bytes = static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize;
    store->capacity_from_fs_ = true;
    char id[64];
    std::snprintf(id, sizeof id, "%llx:%lx", static_cast<unsigned long long>(st.st_dev),
                  static_cast<unsigned long>(vfs.f_fsid));
    store->fs_id_ = id;
    store->fs_free_bytes_ = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  }
  AQ_RETURN_IF_ERROR(store->Scan());
  return store;
}

uint64_t ChunkStore::FsFreeBytes() const {
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  if (now - fs_checked_ms_.load() >= 200) {
    fs_checked_ms_ = now;
    struct statvfs vfs {};
    if (::statvfs(options_.dir.c_str(), &vfs) == 0) {
      fs_free_bytes_ = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    }
  }
  return fs_free_bytes_.load();
}

Status ChunkStore::LoadFormat() {
  const std::string path = options_.dir + "/FORMAT";
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) {
    if (errno != ENOENT) return Errno("open " + path);
    return WriteFileAtomic(options_.dir, "FORMAT",
                           "aquifer-chunk-store 2 block_bytes=" +
                               std::to_string(options_.block_bytes) + "\n");
  }
  unsigned format = 0;
  unsigned long block = 0;
  int n = std::fscanf(f, "aquifer-chunk-store %u block_bytes=%lu", &format, &block);
  std::fclose(f);
  if (n != 2 || (format != 1 && format != 2) || block < 4 * kKiB || (block & (block - 1)) != 0) {
    return Internal("chunk store: unreadable " + path);
  }
  options_.block_bytes = static_cast<uint32_t>(block);
  if (format == 1) {
    // Store format 2 adds chunk files with placement; an older binary must not open it and
    // skip them, so the store says so once it may hold them.
    return WriteFileAtomic(options_.dir, "FORMAT",
                           "aquifer-chunk-store 2 block_bytes=" + std::to_string(block) + "\n");
  }
  return OkStatus();
}

Status ChunkStore::Scan() {
  auto log = Logger("data");
  for (uint32_t fanout = 0; fanout < kFanoutDirs; ++fanout) {
    const std::string dir = FanoutPath(options_.dir, fanout);
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
      if (errno == ENOENT) continue;
      return Errno("opendir " + dir);
    }
    dir_state_[fanout] = kDirExists;  // maybe not durable yet: the next sync makes sure
    const int dfd = ::dirfd(d);
    while (dirent* e = ::readdir(d)) {
      const std::string_view name(e->d_name);
      if (name == "." || name == "..") continue;
      if (name.substr(0, 2) == "t.") {  // a write that never reached its rename
        if (::unlinkat(dfd, e->d_name, 0) != 0) log->warn("remove temp file={} failed", name);
        ++temp_removed_;
        continue;
      }
      ChunkId id;
      uint64_t version = 0, length = 0;
      ChunkPlacement placement;
      if (!ParseChunkFileName(name, &id, &version, &length, &placement) ||
          FanoutOf(id) != fanout) {
        log->warn("skip unknown file={}/{}", dir, name);
        continue;
      }
      struct stat st {};
      if (::fstatat(dfd, e->d_name, &st, 0) != 0) return Errno("stat " + dir + "/" + e->d_name);
      const uint64_t file_bytes = HeaderBytes(length, options_.block_bytes, placement) + length;
      if (static_cast<uint64_t>(st.st_size) != file_bytes) {
        // A non-durable write torn by a crash: never acknowledged as durable, so drop it.
        log->warn("remove torn chunk file={}/{} size={} expected={}", dir, name, st.st_size,
                  file_bytes);
        if (::unlinkat(dfd, e->d_name, 0) != 0) log->warn("remove torn file={} failed", name);
        ++torn_removed_;
        continue;
      }
      std::vector<ChunkVersion>& versions = index_[id];
      auto it = std::find_if(versions.begin(), versions.end(),
                             [&](const ChunkVersion& v) { return v.version == version; });
      if (it != versions.end()) {
        // Same version, two names (lengths or placements): a crash between a replacing rename
        // and the unlink of the replaced file. Both are whole; the one renamed last (newer
        // ctime) is the live one.
        struct stat other {};
        const std::string other_name =
            ChunkFileName(id, version, it->length_bytes, it->placement);
        const bool other_newer =
            ::fstatat(dfd, other_name.c_str(), &other, 0) == 0 &&
            std::tie(other.st_ctim.tv_sec, other.st_ctim.tv_nsec) >
                std::tie(st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
        const std::string drop = other_newer ? std::string(name) : other_name;
        if (!other_newer) {
          used_bytes_ -= FileBytes(*it, options_.block_bytes);
          used_bytes_ += file_bytes;
          it->length_bytes = length;
          it->placement = placement;
        }
        (void)::unlinkat(dfd, drop.c_str(), 0);
        continue;
      }
      versions.push_back({version, length, placement});
      used_bytes_ += file_bytes;
      ++version_count_;
    }
    ::closedir(d);
  }
  for (auto& [id, versions] : index_) {
    std::sort(versions.begin(), versions.end(),
              [](const ChunkVersion& a, const ChunkVersion& b) { return a.version < b.version; });
    for (const auto& [w, g] : PgKeysOf(versions)) by_pg_.emplace(w, g, id);
  }
  log->info("open chunk store dir={} chunks={} versions={} used_bytes={} temp_removed={} "
            "torn_removed={}",
            options_.dir, index_.size(), version_count_, used_bytes_, temp_removed_,
            torn_removed_);
  return OkStatus();
}

// Fan-out directories are made on first use (mkdir only); their parents are fsynced by the
// next SyncDirs() that covers them, so a buffered write pays no fsync.
Status ChunkStore::EnsureDir(uint32_t fanout) {
  std::lock_guard<std::mutex> lock(dirs_mu_);
  if (dir_state_[fanout] != kDirMissing) return OkStatus();
  const std::string leaf = FanoutPath(options_.dir, fanout);
  AQ_RETURN_IF_ERROR(MkdirIfMissing(leaf.substr(0, leaf.rfind('/'))));
  AQ_RETURN_IF_ERROR(MkdirIfMissing(leaf));
  dir_state_[fanout] = kDirExists;
  return OkStatus();
}

std::mutex& ChunkStore::ChunkLock(const ChunkId& id) {
  return chunk_locks_[std::hash<ChunkId>()(id) % kChunkLocks];
}

std::string ChunkStore::ChunkPath(const ChunkId& id, uint64_t version, uint64_t length_bytes,
                                  const ChunkPlacement& placement) const {
  return FanoutPath(options_.dir, FanoutOf(id)) + "/" +
         ChunkFileName(id, version, length_bytes, placement);
}

void ChunkStore::ReindexPgLocked(const ChunkId& id, const PgKeys& before) {
  auto it = index_.find(id);
  const PgKeys after = it == index_.end() ? PgKeys{} : PgKeysOf(it->second);
  for (const auto& key : before) {
    if (std::find(after.begin(), after.end(), key) == after.end()) {
      by_pg_.erase({key.first, key.second, id});
    }
  }
  for (const auto& key : after) by_pg_.emplace(key.first, key.second, id);
}

// Group commit of directory fsyncs: the first waiter becomes the leader and fsyncs every
// directory queued so far in one io_uring submission; the others wait for a round that started
// after they queued.
Status ChunkStore::SyncDirs(std::vector<uint32_t> fanouts) {
  if (fanouts.empty()) return OkStatus();
  std::unique_lock<std::mutex> lock(sync_mu_);
  sync_pending_.insert(sync_pending_.end(), fanouts.begin(), fanouts.end());
  const uint64_t ticket = ++sync_requested_;
  while (sync_completed_ < ticket) {
    if (sync_running_) {
      sync_cv_.wait(lock);
      continue;
    }
    sync_running_ = true;
    std::vector<uint32_t> dirs = std::move(sync_pending_);
    sync_pending_.clear();
    const uint64_t upto = sync_requested_;
    lock.unlock();
    std::sort(dirs.begin(), dirs.end());
    dirs.erase(std::unique(dirs.begin(), dirs.end()), dirs.end());
    // Each leaf, plus its parents while the leaf's own entry may not be durable yet.
    std::vector<std::string> paths;
    std::vector<uint32_t> made_durable;
    {
      std::lock_guard<std::mutex> dirs_lock(dirs_mu_);
      for (uint32_t f : dirs) {
        paths.push_back(FanoutPath(options_.dir, f));
        if (dir_state_[f] == kDirExists) {
          made_durable.push_back(f);
          paths.push_back(paths.back().substr(0, paths.back().rfind('/')));
          paths.push_back(options_.dir + "/chunks");
        }
      }
    }
    std::sort(paths.begin(), paths.end());
    paths.erase(std::unique(paths.begin(), paths.end()), paths.end());
    Status status;
    std::vector<int> fds;
    for (const std::string& path : paths) {
      int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0) {
        status = Errno("open " + path);
        break;
      }
      fds.push_back(fd);
    }
    if (status.ok()) status = RingFsync(fds);
    for (int fd : fds) ::close(fd);
    if (status.ok()) {
      std::lock_guard<std::mutex> dirs_lock(dirs_mu_);
      for (uint32_t f : made_durable) dir_state_[f] = kDirDurable;
    }
    lock.lock();
    sync_running_ = false;
    sync_completed_ = upto;
    sync_last_status_ = status;
    sync_cv_.notify_all();
    if (!status.ok()) return status;
  }
  return sync_last_status_;
}

Status ChunkStore::Write(const ChunkId& id, uint64_t version, uint64_t committed_version,
                         std::string_view data, bool sync, const ChunkPlacement& placement,
                         bool if_absent) {
  if (version == 0) return InvalidArgument("chunk version 0 is reserved; versions start at 1");
  AQ_RETURN_IF_ERROR(ValidatePlacement(id, placement));
  if (data.size() > kMaxChunkBytes) {
    return InvalidArgument("chunk of " + std::to_string(data.size()) + " bytes exceeds " +
                           std::to_string(kMaxChunkBytes));
  }
  auto buried = [&] {
    writes_refused_by_gc_.fetch_add(1);
    return NotFound("chunk " + id.ToString() + " v" + std::to_string(version) +
                    " was garbage collected here (its file was deleted, or the stripe "
                    "truncated away)");
  };
  {
    std::shared_lock<std::shared_mutex> lock(index_mu_);
    if (BuriedLocked(id, version)) return buried();
  }
  const uint32_t fanout = FanoutOf(id);
  AQ_RETURN_IF_ERROR(EnsureDir(fanout));
  const std::string header = EncodeHeader(id, version, data, options_.block_bytes, placement);
  const uint64_t file_bytes = header.size() + data.size();
  {
    std::shared_lock<std::shared_mutex> lock(index_mu_);
    const uint64_t in_flight = reserved_bytes_.fetch_add(file_bytes) + file_bytes;
    if (used_bytes_ + in_flight > options_.capacity_bytes) {
      reserved_bytes_ -= file_bytes;
      return NoSpace("chunk store full: used " + std::to_string(used_bytes_) + " of " +
                     std::to_string(options_.capacity_bytes) + " bytes");
    }
    const double ratio = std::clamp(options_.full_ratio, 0.0, 1.0);
    const auto threshold =
        static_cast<uint64_t>(static_cast<double>(options_.capacity_bytes) * ratio);
    if (!if_absent && used_bytes_ + in_flight > threshold) {
      reserved_bytes_ -= file_bytes;
      return NoSpace("chunk store above its fill threshold: used " + std::to_string(used_bytes_) +
                     " of " + std::to_string(options_.capacity_bytes) + " bytes (full ratio " +
                     std::to_string(ratio) + "; the rest is kept for repair)");
    }
    if (!if_absent && capacity_from_fs_) {
      // The disk may be shared (other data servers, other programs): its own free space counts
      // too, so the reserve is kept for repair whoever filled the disk.
      const uint64_t reserve = options_.capacity_bytes - threshold;
      const uint64_t free = FsFreeBytes();
      if (free < reserve + in_flight) {
        reserved_bytes_ -= file_bytes;
        return NoSpace("file system of the chunk store above its fill threshold: " +
                       std::to_string(free) + " bytes free of " +
                       std::to_string(options_.capacity_bytes) + " (full ratio " +
                       std::to_string(ratio) + "; the rest is kept for repair)");
      }
    }
  }
  struct Unreserve {
    std::atomic<uint64_t>* r;
    uint64_t n;
    ~Unreserve() { *r -= n; }
  } unreserve{&reserved_bytes_, file_bytes};

  const std::string dir = FanoutPath(options_.dir, fanout);
  const std::string name = ChunkFileName(id, version, data.size(), placement);
  const std::string final_path = dir + "/" + name;
  const std::string tmp_path =
      dir + "/t." + name.substr(2) + "." + std::to_string(temp_seq_.fetch_add(1));
  int fd = ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("create " + tmp_path);
  const iovec iov[2] = {{const_cast<char*>(header.data()), header.size()},
                        {const_cast<char*>(data.data()), data.size()}};
  const IoRequest req{fd, {iov, data.empty() ? 1u : 2u}, 0};
  Status st = RingWrite({&req, 1}, sync);
  if (::close(fd) != 0 && st.ok()) st = Errno("close " + tmp_path);
  if (st.ok()) st = AQ_FAILPOINT_STATUS("data.write.before_rename");
  if (!st.ok()) {
    ::unlink(tmp_path.c_str());
    return st.WithPrefix("write chunk " + id.ToString());
  }

  std::vector<uint32_t> unused_dirs;
  {
    std::lock_guard<std::mutex> chunk_lock(ChunkLock(id));
    if (if_absent) {
      std::shared_lock<std::shared_mutex> lock(index_mu_);
      auto it = index_.find(id);
      if (it != index_.end() &&
          std::any_of(it->second.begin(), it->second.end(),
                      [&](const ChunkVersion& v) { return v.version == version; })) {
        ::unlink(tmp_path.c_str());
        return AlreadyExists("chunk " + id.ToString() + " v" + std::to_string(version) +
                             " is already stored");
      }
    }
    if (::rename(tmp_path.c_str(), final_path.c_str()) != 0) {
      Status err = Errno("rename " + tmp_path);
      ::unlink(tmp_path.c_str());
      return err;
    }
    AQ_FAILPOINT("data.write.after_rename");
    std::vector<ChunkVersion> doomed;
    {
      std::unique_lock<std::shared_mutex> lock(index_mu_);
      // Checked again with the index update: a GC task applied since the check above found no
      // index entry to delete, so this write must not add one (CollectGarbage records its
      // tombstone before it scans the index).
      if (BuriedLocked(id, version)) {
        auto chunk = index_.find(id);
        const bool present =
            chunk != index_.end() &&
            std::any_of(chunk->second.begin(), chunk->second.end(),
                        [&](const ChunkVersion& v) { return v.version == version; });
        // A version already indexed is the GC's to delete (it waits for this chunk's lock).
        if (!present) {
          lock.unlock();
          ::unlink(final_path.c_str());
          return buried();
        }
      }
      std::vector<ChunkVersion>& versions = index_[id];
      const PgKeys pgs_before = PgKeysOf(versions);
      auto it = std::lower_bound(
          versions.begin(), versions.end(), version,
          [](const ChunkVersion& v, uint64_t want) { return v.version < want; });
      if (it != versions.end() && it->version == version) {
        if (it->length_bytes != data.size() || !(it->placement == placement)) {
          doomed.push_back(*it);  // other file name
        }
        used_bytes_ -= FileBytes(*it, options_.block_bytes);
        it->length_bytes = data.size();
        it->placement = placement;
      } else {
        versions.insert(it, ChunkVersion{version, data.size(), placement});
        ++version_count_;
      }
      used_bytes_ += file_bytes;
      // Prune: keep the newest version <= committed_version and every newer one; the older
      // ones are superseded, and go once superseded for options_.superseded_grace.
      auto keep_from = std::upper_bound(
          versions.begin(), versions.end(), committed_version,
          [](uint64_t c, const ChunkVersion& v) { return c < v.version; });
      if (keep_from != versions.begin()) --keep_from;
      const int64_t grace = options_.superseded_grace.count();
      const int64_t now_ms = grace > 0 ? SteadyMs() : 0;
      bool marked = false;
      auto out = versions.begin();
      for (auto v = versions.begin(); v != keep_from; ++v) {
        if (grace > 0 && (v->superseded_until_ms == 0 || v->superseded_until_ms > now_ms)) {
          if (v->superseded_until_ms == 0) {
            v->superseded_until_ms = now_ms + grace;
            marked = true;
          }
          *out++ = *v;  // still readable
          continue;
        }
        doomed.push_back(*v);
        used_bytes_ -= FileBytes(*v, options_.block_bytes);
        --version_count_;
      }
      versions.erase(out, keep_from);
      if (marked) {
        std::lock_guard<std::mutex> sweep_lock(superseded_mu_);
        superseded_.emplace_back(now_ms + grace, id);
      }
      ReindexPgLocked(id, pgs_before);
    }
    for (const ChunkVersion& v : doomed) {
      const std::string path =
          dir + "/" + ChunkFileName(id, v.version, v.length_bytes, v.placement);
      if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
        Logger("data")->warn("remove chunk file={} failed: {}", path, std::strerror(errno));
      }
    }
  }
  if (options_.superseded_grace.count() > 0) {
    // Outside every chunk lock (the sweep takes others'): a few chunks whose grace ended.
    Result<uint64_t> swept = SweepSuperseded(/*max_chunks=*/8);
    if (!swept.ok()) Logger("data")->warn("sweep superseded: {}", swept.status().ToString());
  }
  if (sync) return SyncDirs({fanout});
  return OkStatus();
}

Result<ChunkReader> ChunkStore::OpenAndRead(const ChunkId& id, uint64_t max_version,
                                            uint64_t offset, uint64_t length, std::string* out) {
  // A version may be pruned between the index lookup and the open: look up again.
  for (int attempt = 0; attempt < 4; ++attempt) {
    ChunkVersion found;
    bool newer_only = false;  // versions exist, every one above max_version
    {
      std::shared_lock<std::shared_mutex> lock(index_mu_);
      auto it = index_.find(id);
      if (it != index_.end()) {
        newer_only = !it->second.empty();
        for (auto v = it->second.rbegin(); v != it->second.rend(); ++v) {
          if (max_version == 0 || v->version <= max_version) {
            found = *v;
            break;
          }
        }
      }
    }
    if (found.version == 0 && newer_only) {
      // The reader's bound is older than every version kept: the versions at or below it were
      // pruned after a newer one was committed. Not a hole: the reader must look again.
      return Status(Code::kStale, "chunk " + id.ToString() + " has only versions above " +
                                      std::to_string(max_version) + " (superseded)");
    }
    if (found.version == 0) {
      return NotFound("no chunk " + id.ToString() +
                      (max_version ? " with version <= " + std::to_string(max_version) : ""));
    }
    BlockSpan span;
    if (out != nullptr) {
      Result<BlockSpan> s = SpanOf(offset, length, found.length_bytes, options_.block_bytes);
      if (!s.ok()) return s.status();
      span = *s;
    }
    const std::string path = ChunkPath(id, found.version, found.length_bytes, found.placement);
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) continue;
      return Errno("open " + path);
    }
    ChunkReader r;
    r.store_ = this;
    r.fd_ = fd;
    r.id_ = id;
    r.version_ = found.version;
    r.length_ = found.length_bytes;
    r.placement_ = found.placement;
    r.block_bytes_ = options_.block_bytes;
    const uint64_t header_bytes =
        HeaderBytes(found.length_bytes, options_.block_bytes, found.placement);
    std::string header(header_bytes, '\0');
    iovec iov[2] = {{header.data(), header.size()}, {nullptr, 0}};
    IoRequest reqs[2] = {{fd, {iov, 1}, 0}, {fd, {}, 0}};
    size_t nreq = 1;
    if (out != nullptr) {
      out->resize(span.end - span.begin);
      if (!out->empty()) {
        iov[1] = {out->data(), out->size()};
        if (span.begin == 0) {
          reqs[0].iov = {iov, 2};  // header and data are adjacent: one readv
        } else {
          reqs[1] = {fd, {&iov[1], 1}, header_bytes + span.begin};
          nreq = 2;
        }
      }
    }
    AQ_RETURN_IF_ERROR(RingRead({reqs, nreq}));
    Status hs = DecodeHeader(header, id, found.version, found.length_bytes, found.placement,
                             options_.block_bytes, &r.crcs_);
    if (!hs.ok()) {
      CountCorruption(r, hs.message());
      return hs.WithPrefix("chunk " + id.ToString() + " v" + std::to_string(found.version));
    }
    if (out != nullptr) {
      if (!out->empty()) AQ_RETURN_IF_ERROR(VerifyBlocks(r, span.first_block, *out));
      out->resize(span.want_end - span.begin);
      out->erase(0, span.want_begin - span.begin);
    }
    return r;
  }
  return NotFound("chunk " + id.ToString() + " was deleted while being opened");
}

Result<ChunkReadInfo> ChunkStore::Read(const ChunkId& id, uint64_t max_version, uint64_t offset,
                                       uint64_t length, std::string* out) {
  Result<ChunkReader> r = OpenAndRead(id, max_version, offset, length, out);
  if (!r.ok()) return r.status();
  return ChunkReadInfo{r->version(), r->length_bytes(), r->placement()};
}

Result<ChunkReader> ChunkStore::OpenReader(const ChunkId& id, uint64_t max_version) {
  return OpenAndRead(id, max_version, 0, 0, nullptr);
}

Status ChunkStore::VerifyBlocks(const ChunkReader& r, uint64_t first_block,
                                std::string_view blocks) {
  const uint32_t b = r.block_bytes_;
  for (uint64_t i = 0; i * b < blocks.size(); ++i) {
    const uint64_t block = first_block + i;
    const std::string_view bytes = blocks.substr(i * b, b);
    if (block >= r.crcs_.size() || Crc(bytes) != r.crcs_[block]) {
      const std::string what = "block " + std::to_string(block) + " failed its CRC32C";
      CountCorruption(r, what);
      return Corruption("chunk " + r.id_.ToString() + " v" + std::to_string(r.version_) + ": " +
                        what);
    }
  }
  return OkStatus();
}

void ChunkStore::CountCorruption(const ChunkReader& r, const std::string& what) {
  corruptions_.fetch_add(1);
  Logger("data")->error("found corruption chunk={} version={} what={}", r.id_.ToString(),
                        r.version_, what);
  if (corruption_listener_) corruption_listener_(r.id_, r.version_);
}

Result<uint64_t> ChunkStore::SweepSuperseded(size_t max_chunks) {
  const int64_t now_ms = SteadyMs();
  std::vector<ChunkId> ids;
  {
    std::lock_guard<std::mutex> lock(superseded_mu_);
    while (!superseded_.empty() && superseded_.front().first <= now_ms && ids.size() < max_chunks) {
      ids.push_back(superseded_.front().second);
      superseded_.pop_front();
    }
  }
  if (ids.empty()) return uint64_t{0};
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  // A version marked again later (a newer deadline) is still in the queue for that one.
  return DeleteVersions(
      ids,
      [now_ms](const ChunkVersion& v) {
        return v.superseded_until_ms != 0 && v.superseded_until_ms <= now_ms;
      },
      /*sync=*/false);
}

Result<uint64_t> ChunkStore::DeleteRange(InodeId inode, uint64_t from_stripe,
                                         uint64_t max_version, bool sync, uint64_t min_version) {
  const auto doomed = [min_version, max_version](const ChunkVersion& v) {
    return min_version <= v.version && v.version <= max_version;
  };
  std::vector<ChunkId> ids;
  {
    std::shared_lock<std::shared_mutex> lock(index_mu_);
    for (auto it = index_.lower_bound(ChunkId{inode, from_stripe, 0});
         it != index_.end() && it->first.inode == inode; ++it) {
      if (std::any_of(it->second.begin(), it->second.end(), doomed)) ids.push_back(it->first);
    }
  }
  return DeleteVersions(ids, doomed, sync);
}

bool ChunkStore::BuriedLocked(const ChunkId& id, uint64_t version) const {
  auto it = gc_tombstones_.find(id.inode.value());
  if (it == gc_tombstones_.end()) return false;
  const int64_t now_ms = SteadyMs();
  return std::any_of(it->second.begin(), it->second.end(), [&](const GcTombstone& t) {
    return id.stripe >= t.from_stripe && version <= t.max_version && now_ms < t.expires_ms;
  });
}

Result<uint64_t> ChunkStore::CollectGarbage(InodeId inode, uint64_t from_stripe,
                                            uint64_t max_version, bool sync) {
  const int64_t keep_ms = options_.gc_tombstone_keep.count();
  if (keep_ms > 0 && options_.gc_tombstones_max > 0) {
    std::unique_lock<std::shared_mutex> lock(index_mu_);
    const int64_t now_ms = SteadyMs();
    // Expired tombstones go, and the oldest while the bound is reached.
    while (!gc_tombstone_order_.empty() &&
           (gc_tombstone_order_.front().first <= now_ms ||
            gc_tombstone_order_.size() >= options_.gc_tombstones_max)) {
      const auto [expires_ms, ino] = gc_tombstone_order_.front();
      gc_tombstone_order_.pop_front();
      auto it = gc_tombstones_.find(ino);
      if (it == gc_tombstones_.end()) continue;
      std::erase_if(it->second, [e = expires_ms](const GcTombstone& t) {
        return t.expires_ms <= e;
      });
      if (it->second.empty()) gc_tombstones_.erase(it);
    }
    std::vector<GcTombstone>& marks = gc_tombstones_[inode.value()];
    // A task that covers an earlier one of the inode replaces it (a deletion covers them all).
    std::erase_if(marks, [&](const GcTombstone& t) {
      return t.from_stripe >= from_stripe && t.max_version <= max_version;
    });
    // +1: now_ms is truncated, so the tombstone lasts at least keep_ms from this call.
    marks.push_back({from_stripe, max_version, now_ms + keep_ms + 1});
    gc_tombstone_order_.emplace_back(now_ms + keep_ms + 1, inode.value());
  }
  return DeleteRange(inode, from_stripe, max_version, sync);
}

Result<uint64_t> ChunkStore::DeleteVersion(const ChunkId& id, uint64_t version, bool sync) {
  return DeleteVersions({id}, [version](const ChunkVersion& v) { return v.version == version; },
                        sync);
}

Result<uint64_t> ChunkStore::DeletePgPosition(uint32_t pg_width, uint32_t pg_index,
                                              uint32_t position, bool sync) {
  std::vector<ChunkId> ids;
  {
    std::shared_lock<std::shared_mutex> lock(index_mu_);
    for (auto it = by_pg_.lower_bound({pg_width, pg_index, ChunkId{}});
         it != by_pg_.end() && std::get<0>(*it) == pg_width && std::get<1>(*it) == pg_index;
         ++it) {
      if (std::get<2>(*it).position == position) ids.push_back(std::get<2>(*it));
    }
  }
  return DeleteVersions(
      ids,
      [pg_width, pg_index](const ChunkVersion& v) {
        return v.placement.known() && v.placement.pg_width == pg_width &&
               v.placement.pg_index == pg_index;
      },
      sync);
}

Result<uint64_t> ChunkStore::DeleteVersions(
    const std::vector<ChunkId>& ids, const std::function<bool(const ChunkVersion&)>& doomed_if,
    bool sync) {
  uint64_t deleted = 0;
  std::vector<uint32_t> dirs;
  for (const ChunkId& id : ids) {
    std::lock_guard<std::mutex> chunk_lock(ChunkLock(id));
    std::vector<ChunkVersion> doomed;
    {
      std::unique_lock<std::shared_mutex> lock(index_mu_);
      auto it = index_.find(id);
      if (it == index_.end()) continue;
      std::vector<ChunkVersion>& versions = it->second;
      const PgKeys pgs_before = PgKeysOf(versions);
      std::erase_if(versions, [&](const ChunkVersion& v) {
        if (!doomed_if(v)) return false;
        doomed.push_back(v);
        used_bytes_ -= FileBytes(v, options_.block_bytes);
        --version_count_;
        return true;
      });
      if (versions.empty()) index_.erase(it);
      ReindexPgLocked(id, pgs_before);
    }
    for (const ChunkVersion& v : doomed) {
      const std::string path = ChunkPath(id, v.version, v.length_bytes, v.placement);
      if (::unlink(path.c_str()) != 0 && errno != ENOENT) return Errno("unlink " + path);
      ++deleted;
    }
    if (!doomed.empty()) dirs.push_back(FanoutOf(id));
  }
  if (sync) {
    AQ_RETURN_IF_ERROR(SyncDirs(std::move(dirs)));
  } else if (!dirs.empty()) {
    std::lock_guard<std::mutex> lock(unsynced_deletes_mu_);
    unsynced_deletes_.insert(unsynced_deletes_.end(), dirs.begin(), dirs.end());
  }
  return deleted;
}

Status ChunkStore::SyncDeletes() {
  std::vector<uint32_t> dirs;
  {
    std::lock_guard<std::mutex> lock(unsynced_deletes_mu_);
    dirs.swap(unsynced_deletes_);
  }
  std::sort(dirs.begin(), dirs.end());
  dirs.erase(std::unique(dirs.begin(), dirs.end()), dirs.end());
  Status s = SyncDirs(dirs);
  if (!s.ok()) {
    std::lock_guard<std::mutex> lock(unsynced_deletes_mu_);
    unsynced_deletes_.insert(unsynced_deletes_.end(), dirs.begin(), dirs.end());
  }
  return s;
}

std::vector<ChunkListEntry> ChunkStore::List(const ChunkId& after, uint32_t limit_chunks,
                                             bool* eof, const PgFilter* pg) const {
  std::vector<ChunkListEntry> out;
  std::shared_lock<std::shared_mutex> lock(index_mu_);
  uint32_t n = 0;
  if (pg != nullptr) {
    auto it = by_pg_.upper_bound({pg->pg_width, pg->pg_index, after});
    for (; it != by_pg_.end() && std::get<0>(*it) == pg->pg_width &&
           std::get<1>(*it) == pg->pg_index && n < limit_chunks;
         ++it, ++n) {
      const ChunkId& id = std::get<2>(*it);
      auto chunk = index_.find(id);
      if (chunk == index_.end()) continue;  // cannot happen: by_pg_ follows index_
      for (const ChunkVersion& v : chunk->second) {
        if (v.placement.known() && v.placement.pg_width == pg->pg_width &&
            v.placement.pg_index == pg->pg_index) {
          out.push_back({id, v.version, v.length_bytes, v.placement});
        }
      }
    }
    *eof = it == by_pg_.end() || std::get<0>(*it) != pg->pg_width ||
           std::get<1>(*it) != pg->pg_index;
    return out;
  }
  auto it = index_.upper_bound(after);
  for (; it != index_.end() && n < limit_chunks; ++it, ++n) {
    for (const ChunkVersion& v : it->second) {
      out.push_back({it->first, v.version, v.length_bytes, v.placement});
    }
  }
  *eof = it == index_.end();
  return out;
}

std::vector<ChunkVersion> ChunkStore::Versions(const ChunkId& id) const {
  std::shared_lock<std::shared_mutex> lock(index_mu_);
  auto it = index_.find(id);
  return it == index_.end() ? std::vector<ChunkVersion>{} : it->second;
}

ChunkStoreStats ChunkStore::Stats() const {
  ChunkStoreStats s;
  std::shared_lock<std::shared_mutex> lock(index_mu_);
  s.capacity_bytes = options_.capacity_bytes;
  s.used_bytes = used_bytes_;
  if (capacity_from_fs_) {
    s.fs_id = fs_id_;
    s.fs_free_bytes = FsFreeBytes();
  }
  s.chunk_count = index_.size();
  s.version_count = version_count_;
  s.corruptions_found = corruptions_.load();
  s.temp_files_removed = temp_removed_;
  s.torn_files_removed = torn_removed_;
  return s;
}

}  // namespace aquifer::server

#include "metadata/namespace_store.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

namespace aquifer::meta {

bool Inode::is_dir() const { return S_ISDIR(mode); }

uint64_t Inode::blocks() const {
  uint64_t bytes = size;
  const uint64_t width = layout.stripe_width_bytes();
  if (is_reg() && stripes.known() && width > 0) {
    bytes = 0;
    const uint64_t stripes_in_size = size / width;  // whole stripes below the size
    for (const StripeExtent& e : stripes.extents()) {
      // Clipped to the size without overflow: begin and end can be any stripe index.
      const uint64_t lo = e.begin_stripe > stripes_in_size ? size : e.begin_stripe * width;
      const uint64_t hi = e.end_stripe > stripes_in_size ? size : e.end_stripe * width;
      if (hi > lo) bytes += hi - lo;
    }
  }
  return bytes / 512 + (bytes % 512 != 0 ? 1 : 0);  // no overflow
}
bool Inode::is_reg() const { return S_ISREG(mode); }
bool Inode::is_symlink() const { return S_ISLNK(mode); }

const char* MemberStateName(MemberState state) {
  switch (state) {
    case MemberState::kIn: return "in";
    case MemberState::kDraining: return "draining";
    case MemberState::kRemoved: return "removed";
  }
  return "in";
}

const char* MoveKindName(MoveKind kind) {
  switch (kind) {
    case MoveKind::kRepair: return "repair";
    case MoveKind::kDrain: return "drain";
    case MoveKind::kRebalance: return "rebalance";
  }
  return "repair";
}

namespace {

// --- encoding helpers -------------------------------------------------------------------
void PutBE64(std::string* out, uint64_t v) {
  for (int i = 7; i >= 0; --i) out->push_back(static_cast<char>((v >> (i * 8)) & 0xff));
}
void PutBE32(std::string* out, uint32_t v) {
  for (int i = 3; i >= 0; --i) out->push_back(static_cast<char>((v >> (i * 8)) & 0xff));
}
uint64_t GetBE64(std::string_view s) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(s[i]);
  return v;
}

class Encoder {
 public:
  void U8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void U32(uint32_t v) { out_.append(reinterpret_cast<const char*>(&v), 4); }
  void U64(uint64_t v) { out_.append(reinterpret_cast<const char*>(&v), 8); }
  void I64(int64_t v) { U64(static_cast<uint64_t>(v)); }
  void Str(std::string_view s) {
    U32(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  void Time(const Timespec& t) {
    I64(t.sec);
    U32(t.nsec);
  }
  void Layout(const FileLayout& l) {
    U32(l.k);
    U32(l.m);
    U32(l.unit_bytes);
    U32(l.pg_start);
    U32(l.pg_count);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class Decoder {
 public:
  explicit Decoder(std::string_view in) : in_(in) {}
  bool ok() const { return ok_; }
  uint8_t U8() {
    if (!Need(1)) return 0;
    uint8_t v = static_cast<uint8_t>(in_[0]);
    in_.remove_prefix(1);
    return v;
  }
  uint32_t U32() {
    if (!Need(4)) return 0;
    uint32_t v;
    std::memcpy(&v, in_.data(), 4);
    in_.remove_prefix(4);
    return v;
  }
  uint64_t U64() {
    if (!Need(8)) return 0;
    uint64_t v;
    std::memcpy(&v, in_.data(), 8);
    in_.remove_prefix(8);
    return v;
  }
  int64_t I64() { return static_cast<int64_t>(U64()); }
  bool AtEnd() const { return in_.empty(); }
  std::string Str() {
    uint32_t n = U32();
    if (!Need(n)) return {};
    std::string s(in_.substr(0, n));
    in_.remove_prefix(n);
    return s;
  }
  Timespec Time() {
    Timespec t;
    t.sec = I64();
    t.nsec = U32();
    return t;
  }
  FileLayout Layout() {
    FileLayout l;
    l.k = U32();
    l.m = U32();
    l.unit_bytes = U32();
    l.pg_start = U32();
    l.pg_count = U32();
    return l;
  }

 private:
  bool Need(size_t n) {
    if (in_.size() < n) ok_ = false;
    return ok_;
  }
  std::string_view in_;
  bool ok_ = true;
};

constexpr uint8_t kInodeFormat = 1;

std::string InodeKey(InodeId ino) {
  std::string k("i");
  PutBE64(&k, ino.value());
  return k;
}
std::string DentryPrefix(InodeId parent) {
  std::string k("d");
  PutBE64(&k, parent.value());
  return k;
}
std::string DentryKey(InodeId parent, std::string_view name) {
  std::string k = DentryPrefix(parent);
  k.append(name);
  return k;
}
std::string IndexPrefix(InodeId parent) {
  std::string k("e");
  PutBE64(&k, parent.value());
  return k;
}
std::string IndexKey(InodeId parent, uint64_t seq) {
  std::string k = IndexPrefix(parent);
  PutBE64(&k, seq);
  return k;
}
std::string XattrPrefix(InodeId ino) {
  std::string k("x");
  PutBE64(&k, ino.value());
  return k;
}
std::string OrphanKey(InodeId ino) {
  std::string k("o");
  PutBE64(&k, ino.value());
  return k;
}
std::string LostKey(InodeId ino) {
  std::string k("l");
  PutBE64(&k, ino.value());
  return k;
}
std::string GcKey(uint64_t id) {
  std::string k("g");
  PutBE64(&k, id);
  return k;
}
std::string ServerKey(ServerId id) {
  std::string k("s");
  PutBE32(&k, id.value());
  return k;
}
std::string PgKey(uint32_t width) {
  std::string k("p");
  PutBE32(&k, width);
  return k;
}
std::string CounterKey(std::string_view name) { return "c" + std::string(name); }
std::string MoveKey(uint64_t id) {
  std::string k("m");
  PutBE64(&k, id);
  return k;
}
std::string PgGcKey(uint64_t id) {
  std::string k("q");
  PutBE64(&k, id);
  return k;
}
std::string SessionKey(uint64_t session) {
  std::string k("S");
  PutBE64(&k, session);
  return k;
}
std::string StateKey(InodeId ino) {
  std::string k("O");
  PutBE64(&k, ino.value());
  return k;
}
std::string ReplayPrefix(uint64_t session) {
  std::string k("R");
  PutBE64(&k, session);
  return k;
}
std::string ReplayKey(uint64_t session, uint64_t request_id) {
  std::string k = ReplayPrefix(session);
  PutBE32(&k, static_cast<uint32_t>(request_id % kReplaySlots));
  return k;
}
std::string DegradedKey(uint64_t epoch) {
  std::string k("D");
  PutBE64(&k, epoch);
  return k;
}

std::string EncodeInode(const Inode& n) {
  Encoder e;
  e.U8(kInodeFormat);
  e.U64(n.ino.value());
  e.U64(n.generation);
  e.U32(n.mode);
  e.U32(n.nlink);
  e.U32(n.uid);
  e.U32(n.gid);
  e.U64(n.size);
  e.U64(n.rdev);
  e.Time(n.atime);
  e.Time(n.mtime);
  e.Time(n.ctime);
  e.Layout(n.layout);
  e.U64(n.data_version);
  e.U64(n.parent.value());
  e.U64(n.next_entry_seq);
  e.U64(n.entry_count);
  e.Layout(n.dir_default);
  e.Str(n.symlink_target);
  // Appended fields (a record without them is an inode from before stripe maps: unknown map).
  e.U8(n.stripes.known() ? 1 : 0);
  e.U64(n.truncate_floor);
  e.U32(static_cast<uint32_t>(n.stripes.extents().size()));
  for (const StripeExtent& x : n.stripes.extents()) {
    e.U64(x.begin_stripe);
    e.U64(x.end_stripe);
    e.U64(x.floor_version);
  }
  e.U32(static_cast<uint32_t>(n.lost_stripes.size()));
  for (uint64_t stripe : n.lost_stripes) e.U64(stripe);
  e.U32(static_cast<uint32_t>(n.abandoned_versions.size()));
  for (const auto& [first, last] : n.abandoned_versions) {
    e.U64(first);
    e.U64(last);
  }
  return e.Take();
}

Result<Inode> DecodeInode(std::string_view v) {
  Decoder d(v);
  if (d.U8() != kInodeFormat) return Corruption("inode record has an unknown format");
  Inode n;
  n.ino = InodeId(d.U64());
  n.generation = d.U64();
  n.mode = d.U32();
  n.nlink = d.U32();
  n.uid = d.U32();
  n.gid = d.U32();
  n.size = d.U64();
  n.rdev = d.U64();
  n.atime = d.Time();
  n.mtime = d.Time();
  n.ctime = d.Time();
  n.layout = d.Layout();
  n.data_version = d.U64();
  n.parent = InodeId(d.U64());
  n.next_entry_seq = d.U64();
  n.entry_count = d.U64();
  n.dir_default = d.Layout();
  n.symlink_target = d.Str();
  if (!d.ok()) return Corruption("inode record is truncated");
  if (d.AtEnd()) {
    n.stripes = StripeMap::Unknown();
    return n;
  }
  const bool known = d.U8() == 1;
  n.truncate_floor = d.U64();
  const uint32_t count = d.U32();
  if (!d.ok() || count > StripeMap::kMaxExtents) return Corruption("inode stripe map is bad");
  std::vector<StripeExtent> extents(count);
  for (StripeExtent& x : extents) {
    x.begin_stripe = d.U64();
    x.end_stripe = d.U64();
    x.floor_version = d.U64();
  }
  if (!d.ok()) return Corruption("inode stripe map is truncated");
  Result<StripeMap> map = StripeMap::FromExtents(std::move(extents), known);
  if (!map.ok()) return Corruption("inode stripe map: " + map.status().message());
  n.stripes = std::move(*map);
  if (d.AtEnd()) return n;  // a record from before lost stripes were kept
  const uint32_t lost = d.U32();
  if (!d.ok() || lost > Inode::kMaxLostStripesRecorded) return Corruption("inode lost list");
  n.lost_stripes.resize(lost);
  for (uint64_t& stripe : n.lost_stripes) stripe = d.U64();
  if (!d.ok()) return Corruption("inode lost list is truncated");
  if (d.AtEnd()) return n;  // a record from before abandoned versions were kept
  const uint32_t abandoned = d.U32();
  if (!d.ok() || abandoned > Inode::kMaxAbandonedRanges) return Corruption("inode abandoned list");
  n.abandoned_versions.resize(abandoned);
  for (auto& [first, last] : n.abandoned_versions) {
    first = d.U64();
    last = d.U64();
  }
  if (!d.ok()) return Corruption("inode abandoned list is truncated");
  return n;
}

std::string EncodeDentry(const Dentry& de) {
  Encoder e;
  e.U64(de.ino.value());
  e.U32(de.mode);
  e.U64(de.seq);
  return e.Take();
}

}  // namespace

// --- StoreBatch ---------------------------------------------------------------------------
void StoreBatch::PutInode(const Inode& inode) {
  ops_.push_back({StoreOp::Kind::kPut, InodeKey(inode.ino), EncodeInode(inode)});
}
void StoreBatch::DeleteInode(InodeId ino) {
  ops_.push_back({StoreOp::Kind::kDelete, InodeKey(ino), {}});
}
void StoreBatch::PutDentry(InodeId parent, std::string_view name, const Dentry& dentry) {
  ops_.push_back({StoreOp::Kind::kPut, DentryKey(parent, name), EncodeDentry(dentry)});
  Encoder e;
  e.Str(name);
  e.U64(dentry.ino.value());
  e.U32(dentry.mode);
  ops_.push_back({StoreOp::Kind::kPut, IndexKey(parent, dentry.seq), e.Take()});
}
void StoreBatch::DeleteDentry(InodeId parent, std::string_view name, uint64_t seq) {
  ops_.push_back({StoreOp::Kind::kDelete, DentryKey(parent, name), {}});
  ops_.push_back({StoreOp::Kind::kDelete, IndexKey(parent, seq), {}});
}
void StoreBatch::PutXattr(InodeId ino, std::string_view name, std::string_view value) {
  ops_.push_back({StoreOp::Kind::kPut, XattrPrefix(ino) + std::string(name), std::string(value)});
}
void StoreBatch::DeleteXattr(InodeId ino, std::string_view name) {
  ops_.push_back({StoreOp::Kind::kDelete, XattrPrefix(ino) + std::string(name), {}});
}
void StoreBatch::DeleteAllXattrs(InodeId ino) {
  ops_.push_back({StoreOp::Kind::kDeletePrefix, XattrPrefix(ino), {}});
}
void StoreBatch::PutOrphan(InodeId ino) {
  ops_.push_back({StoreOp::Kind::kPut, OrphanKey(ino), {}});
}
void StoreBatch::PutLostMarker(InodeId ino) {
  ops_.push_back({StoreOp::Kind::kPut, LostKey(ino), {}});
}
void StoreBatch::DeleteLostMarker(InodeId ino) {
  ops_.push_back({StoreOp::Kind::kDelete, LostKey(ino), {}});
}
void StoreBatch::DeleteOrphan(InodeId ino) {
  ops_.push_back({StoreOp::Kind::kDelete, OrphanKey(ino), {}});
}
void StoreBatch::PutGcTask(const GcTask& task) {
  Encoder e;
  e.U64(task.id);
  e.U64(task.ino.value());
  e.U64(task.from_stripe);
  e.U64(task.max_version);
  e.U32(static_cast<uint32_t>(task.acked.size()));
  for (uint32_t s : task.acked) e.U32(s);
  ops_.push_back({StoreOp::Kind::kPut, GcKey(task.id), e.Take()});
}
void StoreBatch::DeleteGcTask(uint64_t id) {
  ops_.push_back({StoreOp::Kind::kDelete, GcKey(id), {}});
}
void StoreBatch::PutServer(const ServerRecord& s) {
  Encoder e;
  e.U32(s.id.value());
  e.Str(s.uuid);
  e.Str(s.address);
  e.Str(s.failure_domain);
  e.U64(s.capacity_bytes);
  e.U64(s.used_bytes);
  e.U8(static_cast<uint8_t>(s.state));
  ops_.push_back({StoreOp::Kind::kPut, ServerKey(s.id), e.Take()});
}
void StoreBatch::PutPgTable(const PgTable& t) {
  Encoder e;
  e.U32(t.width);
  e.U32(static_cast<uint32_t>(t.pgs.size()));
  for (const auto& pg : t.pgs) {
    e.U32(static_cast<uint32_t>(pg.size()));
    for (ServerId s : pg) e.U32(s.value());
  }
  // Pending targets: only the PGs that have some, as (pg index, width ids).
  uint32_t with_pending = 0;
  for (const auto& p : t.pending) with_pending += p.empty() ? 0 : 1;
  e.U32(with_pending);
  for (size_t i = 0; i < t.pending.size(); ++i) {
    if (t.pending[i].empty()) continue;
    e.U32(static_cast<uint32_t>(i));
    e.U32(static_cast<uint32_t>(t.pending[i].size()));
    for (ServerId s : t.pending[i]) e.U32(s.value());
  }
  e.U32(t.sized_for);  // added after the pending targets: older records end before it
  ops_.push_back({StoreOp::Kind::kPut, PgKey(t.width), e.Take()});
}
void StoreBatch::PutMoveTask(const MoveTask& t) {
  Encoder e;
  e.U64(t.id);
  e.U32(t.pg_width);
  e.U32(t.pg_index);
  e.U32(t.position);
  e.U32(t.from.value());
  e.U32(t.to.value());
  e.U8(static_cast<uint8_t>(t.kind));
  e.U64(t.map_version);
  ops_.push_back({StoreOp::Kind::kPut, MoveKey(t.id), e.Take()});
}
void StoreBatch::DeleteMoveTask(uint64_t id) {
  ops_.push_back({StoreOp::Kind::kDelete, MoveKey(id), {}});
}
void StoreBatch::PutPgGcTask(const PgGcTask& t) {
  Encoder e;
  e.U64(t.id);
  e.U32(t.server.value());
  e.U32(t.pg_width);
  e.U32(t.pg_index);
  e.U32(t.position);
  ops_.push_back({StoreOp::Kind::kPut, PgGcKey(t.id), e.Take()});
}
void StoreBatch::DeletePgGcTask(uint64_t id) {
  ops_.push_back({StoreOp::Kind::kDelete, PgGcKey(id), {}});
}
void StoreBatch::PutCounter(std::string_view name, uint64_t value) {
  Encoder e;
  e.U64(value);
  ops_.push_back({StoreOp::Kind::kPut, CounterKey(name), e.Take()});
}
void StoreBatch::PutSession(const SessionRecord& s) {
  Encoder e;
  e.U64(s.id);
  e.Str(s.client_name);
  e.U8(s.caches ? 1 : 0);
  e.U32(static_cast<uint32_t>(s.reserved_inos.size()));
  for (const auto& [first, end] : s.reserved_inos) {
    e.U64(first);
    e.U64(end);
  }
  ops_.push_back({StoreOp::Kind::kPut, SessionKey(s.id), e.Take()});
}
void StoreBatch::DeleteSession(uint64_t session) {
  ops_.push_back({StoreOp::Kind::kDelete, SessionKey(session), {}});
  ops_.push_back({StoreOp::Kind::kDeletePrefix, ReplayPrefix(session), {}});
}
void StoreBatch::PutInodeState(InodeId ino, const InodeState& st) {
  if (st.empty()) {
    ops_.push_back({StoreOp::Kind::kDelete, StateKey(ino), {}});
    return;
  }
  Encoder e;
  e.U64(ino.value());
  e.U64(st.lease_holder);
  e.U64(st.lease_version);
  // Sorted by session, so one state always encodes to the same bytes.
  std::vector<std::pair<uint64_t, OpenCount>> opens(st.opens.begin(), st.opens.end());
  std::sort(opens.begin(), opens.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  e.U32(static_cast<uint32_t>(opens.size()));
  for (const auto& [session, oc] : opens) {
    e.U64(session);
    e.U32(oc.total);
    e.U32(oc.write);
  }
  e.U32(static_cast<uint32_t>(st.locks.size()));
  for (const LockRecord& l : st.locks) {
    e.U64(l.session);
    e.U64(l.owner);
    e.U32(static_cast<uint32_t>(l.type));
    e.U64(l.start);
    e.U64(l.end);
    e.U32(l.pid);
    e.U8(l.flock ? 1 : 0);
  }
  ops_.push_back({StoreOp::Kind::kPut, StateKey(ino), e.Take()});
}
void StoreBatch::PutReplay(uint64_t session, uint64_t request_id) {
  Encoder e;
  e.U64(request_id);
  ops_.push_back({StoreOp::Kind::kPut, ReplayKey(session, request_id), e.Take()});
}
void StoreBatch::PutDegradedWrite(const DegradedWriteRecord& w) {
  Encoder e;
  e.U64(w.epoch);
  e.U64(w.stripes);
  e.U32(static_cast<uint32_t>(w.servers.size()));
  for (uint32_t id : w.servers) e.U32(id);
  ops_.push_back({StoreOp::Kind::kPut, DegradedKey(w.epoch), e.Take()});
}
void StoreBatch::DeleteDegradedWrite(uint64_t epoch) {
  ops_.push_back({StoreOp::Kind::kDelete, DegradedKey(epoch), {}});
}
void StoreBatch::DeleteSessionState() {
  for (const char* prefix : {"S", "O", "R"}) {
    ops_.push_back({StoreOp::Kind::kDeletePrefix, prefix, {}});
  }
}

// --- typed reads --------------------------------------------------------------------------
Result<std::optional<Inode>> NamespaceStore::GetInode(InodeId ino) {
  auto raw = GetRaw(InodeKey(ino));
  if (!raw.ok()) return raw.status();
  if (!raw->has_value()) return std::optional<Inode>();
  auto inode = DecodeInode(**raw);
  if (!inode.ok()) return inode.status().WithPrefix("inode " + ino.ToString());
  return std::optional<Inode>(std::move(*inode));
}

Result<std::optional<Dentry>> NamespaceStore::GetDentry(InodeId parent, std::string_view name) {
  auto raw = GetRaw(DentryKey(parent, name));
  if (!raw.ok()) return raw.status();
  if (!raw->has_value()) return std::optional<Dentry>();
  Decoder d(**raw);
  Dentry de;
  de.ino = InodeId(d.U64());
  de.mode = d.U32();
  de.seq = d.U64();
  if (!d.ok()) return Corruption("dentry record is truncated");
  return std::optional<Dentry>(de);
}

Result<std::vector<DirEntry>> NamespaceStore::ListDir(InodeId dir, uint64_t after_seq,
                                                      size_t max) {
  std::vector<DirEntry> out;
  if (max == 0) return out;
  std::string prefix = IndexPrefix(dir);
  bool bad = false;
  Status st = ScanRaw(prefix, IndexKey(dir, after_seq + 1),
                      [&](std::string_view key, std::string_view value) {
                        Decoder d(value);
                        DirEntry e;
                        e.cookie = GetBE64(key.substr(prefix.size()));
                        e.name = d.Str();
                        e.ino = InodeId(d.U64());
                        e.mode = d.U32();
                        if (!d.ok()) {
                          bad = true;
                          return false;
                        }
                        out.push_back(std::move(e));
                        return out.size() < max;
                      });
  AQ_RETURN_IF_ERROR(st);
  if (bad) return Corruption("directory index record is truncated");
  return out;
}

Result<std::optional<std::string>> NamespaceStore::GetXattr(InodeId ino, std::string_view name) {
  return GetRaw(XattrPrefix(ino) + std::string(name));
}

Result<std::vector<std::string>> NamespaceStore::ListXattrNames(InodeId ino) {
  std::vector<std::string> names;
  std::string prefix = XattrPrefix(ino);
  AQ_RETURN_IF_ERROR(ScanRaw(prefix, prefix, [&](std::string_view key, std::string_view) {
    names.emplace_back(key.substr(prefix.size()));
    return true;
  }));
  return names;
}

Result<uint64_t> NamespaceStore::GetCounter(std::string_view name) {
  auto raw = GetRaw(CounterKey(name));
  if (!raw.ok()) return raw.status();
  if (!raw->has_value()) return uint64_t{0};
  Decoder d(**raw);
  uint64_t v = d.U64();
  if (!d.ok()) return Corruption("counter record is truncated");
  return v;
}

Result<std::vector<InodeId>> NamespaceStore::LoadOrphans() {
  std::vector<InodeId> out;
  AQ_RETURN_IF_ERROR(ScanRaw("o", "o", [&](std::string_view key, std::string_view) {
    if (key.size() == 9) out.push_back(InodeId(GetBE64(key.substr(1))));
    return true;
  }));
  return out;
}

Result<std::vector<InodeId>> NamespaceStore::LoadLostMarkers() {
  std::vector<InodeId> out;
  AQ_RETURN_IF_ERROR(ScanRaw("l", "l", [&](std::string_view key, std::string_view) {
    if (key.size() == 9) out.push_back(InodeId(GetBE64(key.substr(1))));
    return true;
  }));
  return out;
}

Result<std::vector<GcTask>> NamespaceStore::LoadGcTasks() {
  std::vector<GcTask> out;
  bool bad = false;
  AQ_RETURN_IF_ERROR(ScanRaw("g", "g", [&](std::string_view, std::string_view value) {
    Decoder d(value);
    GcTask t;
    t.id = d.U64();
    t.ino = InodeId(d.U64());
    t.from_stripe = d.U64();
    t.max_version = d.U64();
    uint32_t n = d.U32();
    for (uint32_t i = 0; i < n && d.ok(); ++i) t.acked.push_back(d.U32());
    if (!d.ok()) bad = true;
    out.push_back(std::move(t));
    return !bad;
  }));
  if (bad) return Corruption("gc task record is truncated");
  return out;
}

Result<std::vector<ServerRecord>> NamespaceStore::LoadServers() {
  std::vector<ServerRecord> out;
  bool bad = false;
  AQ_RETURN_IF_ERROR(ScanRaw("s", "s", [&](std::string_view, std::string_view value) {
    Decoder d(value);
    ServerRecord s;
    s.id = ServerId(d.U32());
    s.uuid = d.Str();
    s.address = d.Str();
    s.failure_domain = d.Str();
    s.capacity_bytes = d.U64();
    s.used_bytes = d.U64();
    if (d.ok() && !d.AtEnd()) {
      uint8_t st = d.U8();
      if (st > static_cast<uint8_t>(MemberState::kRemoved)) bad = true;
      s.state = static_cast<MemberState>(st);
    }
    if (!d.ok()) bad = true;
    out.push_back(std::move(s));
    return !bad;
  }));
  if (bad) return Corruption("server record is truncated");
  return out;
}

Result<std::vector<PgTable>> NamespaceStore::LoadPgTables() {
  std::vector<PgTable> out;
  bool bad = false;
  AQ_RETURN_IF_ERROR(ScanRaw("p", "p", [&](std::string_view, std::string_view value) {
    Decoder d(value);
    PgTable t;
    t.width = d.U32();
    uint32_t n = d.U32();
    for (uint32_t i = 0; i < n && d.ok(); ++i) {
      uint32_t w = d.U32();
      std::vector<ServerId> pg;
      for (uint32_t j = 0; j < w && d.ok(); ++j) pg.push_back(ServerId(d.U32()));
      t.pgs.push_back(std::move(pg));
    }
    t.pending.resize(t.pgs.size());
    if (d.ok() && !d.AtEnd()) {
      uint32_t with_pending = d.U32();
      for (uint32_t i = 0; i < with_pending && d.ok(); ++i) {
        uint32_t index = d.U32(), w = d.U32();
        if (index >= t.pgs.size() || w != t.pgs[index].size()) {
          bad = true;
          break;
        }
        for (uint32_t j = 0; j < w && d.ok(); ++j) t.pending[index].push_back(ServerId(d.U32()));
      }
    }
    if (d.ok() && !bad && !d.AtEnd()) t.sized_for = d.U32();
    if (!d.ok()) bad = true;
    out.push_back(std::move(t));
    return !bad;
  }));
  if (bad) return Corruption("pg table record is truncated");
  return out;
}

Result<std::vector<MoveTask>> NamespaceStore::LoadMoveTasks() {
  std::vector<MoveTask> out;
  bool bad = false;
  AQ_RETURN_IF_ERROR(ScanRaw("m", "m", [&](std::string_view, std::string_view value) {
    Decoder d(value);
    MoveTask t;
    t.id = d.U64();
    t.pg_width = d.U32();
    t.pg_index = d.U32();
    t.position = d.U32();
    t.from = ServerId(d.U32());
    t.to = ServerId(d.U32());
    uint8_t kind = d.U8();
    t.map_version = d.U64();
    if (!d.ok() || kind > static_cast<uint8_t>(MoveKind::kRebalance)) bad = true;
    t.kind = static_cast<MoveKind>(kind);
    out.push_back(t);
    return !bad;
  }));
  if (bad) return Corruption("move task record is truncated");
  return out;
}

Result<std::vector<PgGcTask>> NamespaceStore::LoadPgGcTasks() {
  std::vector<PgGcTask> out;
  bool bad = false;
  AQ_RETURN_IF_ERROR(ScanRaw("q", "q", [&](std::string_view, std::string_view value) {
    Decoder d(value);
    PgGcTask t;
    t.id = d.U64();
    t.server = ServerId(d.U32());
    t.pg_width = d.U32();
    t.pg_index = d.U32();
    t.position = d.U32();
    if (!d.ok()) bad = true;
    out.push_back(t);
    return !bad;
  }));
  if (bad) return Corruption("pg gc task record is truncated");
  return out;
}

Result<std::vector<SessionRecord>> NamespaceStore::LoadSessions() {
  std::vector<SessionRecord> out;
  bool bad = false;
  AQ_RETURN_IF_ERROR(ScanRaw("S", "S", [&](std::string_view, std::string_view value) {
    Decoder d(value);
    SessionRecord s;
    s.id = d.U64();
    s.client_name = d.Str();
    s.caches = !d.AtEnd() && d.U8() != 0;  // records written before cache leases end here
    if (!d.AtEnd()) {  // records written before exclusive directory leases end here
      const uint32_t n = d.U32();
      for (uint32_t i = 0; i < n && i < 8 && d.ok(); ++i) {
        const uint64_t first = d.U64();
        const uint64_t end = d.U64();
        if (first > end) bad = true;
        s.reserved_inos.emplace_back(first, end);
      }
      if (n > 8) bad = true;
    }
    if (!d.ok() || s.id == 0) bad = true;
    out.push_back(std::move(s));
    return !bad;
  }));
  if (bad) return Corruption("session record is truncated");
  return out;
}

Result<std::vector<std::pair<InodeId, InodeState>>> NamespaceStore::LoadInodeStates() {
  std::vector<std::pair<InodeId, InodeState>> out;
  bool bad = false;
  AQ_RETURN_IF_ERROR(ScanRaw("O", "O", [&](std::string_view, std::string_view value) {
    Decoder d(value);
    InodeId ino(d.U64());
    InodeState st;
    st.lease_holder = d.U64();
    st.lease_version = d.U64();
    const uint32_t opens = d.U32();
    for (uint32_t i = 0; i < opens && d.ok(); ++i) {
      const uint64_t session = d.U64();
      OpenCount oc;
      oc.total = d.U32();
      oc.write = d.U32();
      st.opens[session] = oc;
    }
    const uint32_t locks = d.U32();
    for (uint32_t i = 0; i < locks && d.ok(); ++i) {
      LockRecord l;
      l.session = d.U64();
      l.owner = d.U64();
      const uint32_t type = d.U32();
      if (type > static_cast<uint32_t>(LockType::kWrite)) bad = true;
      l.type = static_cast<LockType>(type);
      l.start = d.U64();
      l.end = d.U64();
      l.pid = d.U32();
      l.flock = d.U8() != 0;
      st.locks.push_back(l);
    }
    if (!d.ok() || !d.AtEnd()) bad = true;
    out.emplace_back(ino, std::move(st));
    return !bad;
  }));
  if (bad) return Corruption("inode state record is truncated or bad");
  return out;
}

Result<bool> NamespaceStore::ReplayApplied(uint64_t session, uint64_t request_id) {
  auto raw = GetRaw(ReplayKey(session, request_id));
  if (!raw.ok()) return raw.status();
  if (!raw->has_value()) return false;
  Decoder d(**raw);
  const uint64_t recorded = d.U64();
  if (!d.ok()) return Corruption("replay record is truncated");
  return recorded == request_id;
}

Result<std::vector<DegradedWriteRecord>> NamespaceStore::LoadDegradedWrites() {
  std::vector<DegradedWriteRecord> out;
  bool bad = false;
  AQ_RETURN_IF_ERROR(ScanRaw("D", "D", [&](std::string_view, std::string_view value) {
    Decoder d(value);
    DegradedWriteRecord w;
    w.epoch = d.U64();
    w.stripes = d.U64();
    const uint32_t n = d.U32();
    for (uint32_t i = 0; i < n && d.ok(); ++i) w.servers.push_back(d.U32());
    if (!d.ok()) bad = true;
    out.push_back(std::move(w));
    return !bad;
  }));
  if (bad) return Corruption("degraded write record is truncated");
  return out;
}

// --- the in-memory engine -------------------------------------------------------------------
namespace {

class MemoryStore final : public NamespaceStore {
 public:
  Status Sync() override { return OkStatus(); }

 protected:
  Result<std::optional<std::string>> GetRaw(std::string_view key) override {
    std::lock_guard lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return std::optional<std::string>();
    return std::optional<std::string>(it->second);
  }

  Status ScanRaw(std::string_view prefix, std::string_view start,
                 const std::function<bool(std::string_view, std::string_view)>& fn) override {
    std::lock_guard lock(mu_);  // fn never calls back into the store
    for (auto it = map_.lower_bound(start); it != map_.end(); ++it) {
      if (it->first.compare(0, prefix.size(), prefix) != 0) break;
      if (!fn(it->first, it->second)) break;
    }
    return OkStatus();
  }

  Status WriteRaw(const std::vector<StoreOp>& ops, bool) override {
    std::lock_guard lock(mu_);
    for (const StoreOp& op : ops) {
      switch (op.kind) {
        case StoreOp::Kind::kPut:
          map_[op.key] = op.value;
          break;
        case StoreOp::Kind::kDelete:
          map_.erase(op.key);
          break;
        case StoreOp::Kind::kDeletePrefix: {
          auto it = map_.lower_bound(op.key);
          while (it != map_.end() && it->first.compare(0, op.key.size(), op.key) == 0) {
            it = map_.erase(it);
          }
          break;
        }
      }
    }
    return OkStatus();
  }

 private:
  std::mutex mu_;  // guards map_
  std::map<std::string, std::string, std::less<>> map_;
};

}  // namespace

std::unique_ptr<NamespaceStore> NewMemoryStore() { return std::make_unique<MemoryStore>(); }

}  // namespace aquifer::meta

// gRPC implementation of MetaClient. The only file of the client library that sees meta.proto.
#include "client/rpc/meta_client.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <optional>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>

#include "aquifer/units.h"
#include "client/rpc/dir_names.h"
#include "common/capability.h"
#include "common/client_credential.h"
#include "common/failpoint.h"
#include "common/logging.h"
#include "meta.grpc.pb.h"
#include "wire/connection.h"
#include "wire/meta_wire.h"
#include "common/rpc/rpc_auth.h"

namespace aquifer::client {
namespace {

namespace pb = ::aquifer::rpc;

// `resp` is read only after the call returned (argument order is unspecified in C++).
template <class Resp>
Status FromRpc(const grpc::Status& transport, const Resp* resp) {
  const pb::RpcStatus& status = resp->status();
  if (transport.error_code() == grpc::StatusCode::UNAUTHENTICATED) {  // a wrong or no key
    return Status(Code::kPermissionDenied, "metadata server: " + transport.error_message());
  }
  if (!transport.ok()) {
    return Unavailable("metadata server: " + transport.error_message());
  }
  if (status.code() == 0) return OkStatus();
  return Status(CodeFromInt(status.code()), status.message());
}

void ToPb(const Caller& c, pb::Caller* out) {
  out->set_uid(c.uid);
  out->set_gid(c.gid);
  for (uint32_t g : c.groups) out->add_groups(g);
  out->set_pid(c.pid);
}

Timestamp FromPb(const pb::Timespec& t) { return Timestamp{t.sec(), t.nsec()}; }
void ToPb(const Timestamp& t, pb::Timespec* out) {
  out->set_sec(t.sec);
  out->set_nsec(t.nsec);
}

// The changes of `ch` (and who asks) as a SetAttrRequest's valid bits and fields.
void FillSetAttr(const AttrChanges& ch, const Caller& c, pb::SetAttrRequest* req) {
  uint32_t valid = 0;
  if (ch.mode) { valid |= pb::SETATTR_MODE; req->set_mode(*ch.mode); }
  if (ch.uid) { valid |= pb::SETATTR_UID; req->set_uid(*ch.uid); }
  if (ch.gid) { valid |= pb::SETATTR_GID; req->set_gid(*ch.gid); }
  if (ch.size_bytes) { valid |= pb::SETATTR_SIZE; req->set_size(*ch.size_bytes); }
  if (ch.atime) { valid |= pb::SETATTR_ATIME; ToPb(*ch.atime, req->mutable_atime()); }
  if (ch.mtime) { valid |= pb::SETATTR_MTIME; ToPb(*ch.mtime, req->mutable_mtime()); }
  if (ch.atime_now) valid |= pb::SETATTR_ATIME_NOW;
  if (ch.mtime_now) valid |= pb::SETATTR_MTIME_NOW;
  req->set_valid(valid);
  ToPb(c, req->mutable_caller());
}

Attributes FromPb(const pb::Attr& a) {
  Attributes out;
  out.inode = InodeId(a.ino());
  out.generation = a.generation();
  out.mode = a.mode();
  out.nlink = a.nlink();
  out.uid = a.uid();
  out.gid = a.gid();
  out.size_bytes = a.size();
  out.rdev = a.rdev();
  out.blocks = a.blocks();
  out.atime = FromPb(a.atime());
  out.mtime = FromPb(a.mtime());
  out.ctime = FromPb(a.ctime());
  out.layout.k = a.layout().k();
  out.layout.m = a.layout().m();
  out.layout.unit_bytes = a.layout().unit_bytes();
  out.layout.pg_start = a.layout().pg_start();
  out.layout.pg_count = a.layout().pg_count();
  out.data_version = a.data_version();
  out.truncate_floor = a.truncate_floor();
  for (int i = 0; i + 1 < a.abandoned_versions_size(); i += 2) {
    out.abandoned_versions.emplace_back(a.abandoned_versions(i), a.abandoned_versions(i + 1));
  }
  if (a.stripe_map_known() && a.stripe_map_size() % 3 == 0) {
    std::vector<StripeExtent> extents;
    extents.reserve(a.stripe_map_size() / 3);
    for (int i = 0; i + 2 < a.stripe_map_size(); i += 3) {
      extents.push_back({a.stripe_map(i), a.stripe_map(i + 1), a.stripe_map(i + 2)});
    }
    // A map that does not validate is treated as unknown: holes are inferred, as before maps.
    Result<StripeMap> map = StripeMap::FromExtents(std::move(extents), true);
    if (map.ok()) out.stripes = std::make_shared<const StripeMap>(std::move(*map));
  }
  return out;
}

template <class Req, class Resp>
using StubMethod = grpc::Status (pb::MetaService::Stub::*)(grpc::ClientContext*, const Req&, Resp*);

// The metadata wire's number of a stub method (src/wire/meta_wire.h), if it carries it.
template <class Req, class Resp>
std::optional<wire::MetaMethod> WireMethodOf(StubMethod<Req, Resp> m) {
#define AQ_WIRE_METHOD(name, req_t, resp_t)                                              \
  if constexpr (std::is_same_v<Req, pb::req_t> && std::is_same_v<Resp, pb::resp_t>) {   \
    if (m == static_cast<StubMethod<Req, Resp>>(&pb::MetaService::Stub::name)) {         \
      return wire::MetaMethod::k##name;                                                  \
    }                                                                                    \
  }
  AQ_WIRE_METHOD(Lookup, LookupRequest, AttrResponse)
  AQ_WIRE_METHOD(GetAttr, GetAttrRequest, AttrResponse)
  AQ_WIRE_METHOD(SetAttr, SetAttrRequest, AttrResponse)
  AQ_WIRE_METHOD(Create, CreateRequest, CreateResponse)
  AQ_WIRE_METHOD(Mkdir, MkdirRequest, AttrResponse)
  AQ_WIRE_METHOD(Symlink, SymlinkRequest, AttrResponse)
  AQ_WIRE_METHOD(Link, LinkRequest, AttrResponse)
  AQ_WIRE_METHOD(Unlink, RemoveRequest, RemoveResponse)
  AQ_WIRE_METHOD(Rmdir, RemoveRequest, RemoveResponse)
  AQ_WIRE_METHOD(Rename, RenameRequest, StatusResponse)
  AQ_WIRE_METHOD(Readlink, ReadlinkRequest, ReadlinkResponse)
  AQ_WIRE_METHOD(ReadDir, ReadDirRequest, ReadDirResponse)
  AQ_WIRE_METHOD(GetXattr, XattrRequest, XattrResponse)
  AQ_WIRE_METHOD(SetXattr, XattrRequest, XattrResponse)
  AQ_WIRE_METHOD(ListXattr, XattrRequest, XattrResponse)
  AQ_WIRE_METHOD(RemoveXattr, XattrRequest, XattrResponse)
  AQ_WIRE_METHOD(StatFs, StatFsRequest, StatFsResponse)
  AQ_WIRE_METHOD(Open, OpenRequest, OpenResponse)
  AQ_WIRE_METHOD(Release, ReleaseRequest, StatusResponse)
  AQ_WIRE_METHOD(ReleaseBatch, ReleaseBatchRequest, ReleaseBatchResponse)
  AQ_WIRE_METHOD(Commit, CommitRequest, CommitResponse)
  AQ_WIRE_METHOD(KeepAlive, SessionRequest, KeepAliveResponse)
  AQ_WIRE_METHOD(CloseSession, SessionRequest, StatusResponse)
  AQ_WIRE_METHOD(SetLock, LockRequest, LockResponse)
  AQ_WIRE_METHOD(GetLock, LockRequest, LockResponse)
  AQ_WIRE_METHOD(GetClusterMap, ClusterMapRequest, ClusterMapResponse)
  AQ_WIRE_METHOD(Sync, SyncRequest, StatusResponse)
  AQ_WIRE_METHOD(AcquireLease, LeaseRequest, OpenResponse)
  AQ_WIRE_METHOD(ReturnLease, LeaseRequest, StatusResponse)
  AQ_WIRE_METHOD(WaitRecall, WaitRecallRequest, WaitRecallResponse)
  AQ_WIRE_METHOD(AcquireDirLease, DirLeaseRequest, DirLeaseResponse)
  AQ_WIRE_METHOD(ChangeBatch, ChangeBatchRequest, ChangeBatchResponse)
#undef AQ_WIRE_METHOD
  return std::nullopt;
}

// What gRPC's synchronous server answers (RESOURCE_EXHAUSTED) when it cannot start a thread for a
// call; the call was never handed to the service.
constexpr std::string_view kThreadpoolExhausted = "Server Threadpool Exhausted";

class GrpcMetaClient final : public MetaClient {
 public:
  GrpcMetaClient(const std::string& address, std::chrono::milliseconds timeout,
                 std::chrono::milliseconds attr_cache_ttl, bool use_wire,
                 std::chrono::milliseconds outage_wait)
      : timeout_(timeout),
        outage_wait_(outage_wait.count() > 0 ? outage_wait : timeout),
        attr_cache_ttl_(attr_cache_ttl),
        use_wire_(use_wire),
        address_(address) {
    host_ = address.substr(0, address.rfind(':'));
    if (host_.size() >= 2 && host_.front() == '[' && host_.back() == ']') {
      host_ = host_.substr(1, host_.size() - 2);
    }
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(static_cast<int>(kMaxRpcMessageBytes));
    args.SetMaxSendMessageSize(static_cast<int>(kMaxRpcMessageBytes));
    // Reconnect within about a second of a restarted metadata server listening again: gRPC's
    // default backoff grows to 120 s while the server is down, and calls waiting for it
    // (wait_for_ready) would sit that long after it came back.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, kRpcConnectTimeoutMs);  // connect timeout
    channel_ = NewAuthChannel(address, args);
    stub_ = pb::MetaService::NewStub(channel_);
  }

  Result<Attributes> Lookup(InodeId parent, std::string_view name, const Caller& c) override {
    const uint64_t cacher = cache_session_.load(std::memory_order_relaxed);
    if (cacher != 0) {
      DirNames::Found found = names_.FindEntry(parent, name);
      if (found.attr && AwaitQueuedCommit(found.attr->inode)) {
        found = names_.FindEntry(parent, name);
      }
      if (found.known == DirNames::Known::kAbsent) {
        local_absent_.fetch_add(1, std::memory_order_relaxed);
        return NotFound("no entry '" + std::string(name) + "' in inode " + parent.ToString() +
                        " (every name of it is known under the cache lease)");
      }
      if (found.attr) {
        local_found_.fetch_add(1, std::memory_order_relaxed);
        return std::move(*found.attr);
      }
    }
    pb::LookupRequest req;
    req.set_parent(parent.value());
    req.set_name(std::string(name));
    ToPb(c, req.mutable_caller());
    req.set_session(cacher);
    const DirNames::Ticket ticket = names_.Begin(parent);
    Result<Attributes> attr = AttrCall(&pb::MetaService::Stub::Lookup, req, Retry::kYes);
    if (cacher == 0) return attr;
    if (attr.ok()) {
      names_.Answered(parent, name, ticket, &*attr);
      if (names_.NoteFound(parent)) ListNames(parent, c, /*plus=*/true);
    } else if (attr.status().code() == Code::kNotFound) {
      names_.Answered(parent, name, ticket, nullptr);
      if (names_.NoteMiss(parent)) ListNames(parent, c, /*plus=*/false);
    }
    return attr;
  }

  // Reads every name of `dir` for names_ (a few lookups there missed, or found names: then with
  // their attributes). Gives up on an error or a directory past the list's limit; the lookups
  // then keep asking the server.
  void ListNames(InodeId dir, const Caller& c, bool plus) {
    listings_.fetch_add(1, std::memory_order_relaxed);
    const DirNames::Ticket ticket = names_.Begin(dir);
    std::vector<DirNames::Listed> all;
    uint64_t cookie = 0;
    for (;;) {
      Result<DirPage> page = ReadDirPage(dir, cookie, kListPage, plus, c);
      if (!page.ok()) return;
      for (DirEntry& e : page->entries) {
        all.push_back(DirNames::Listed{std::move(e.name), e.inode, std::move(e.attr)});
      }
      if (page->eof) break;
      if (page->entries.empty() || all.size() > kMaxListedNames) return;
      cookie = page->entries.back().cookie;
    }
    names_.InstallListed(dir, ticket, std::move(all));
  }

  // Marks an inode's attributes changed (DirNames::Changing, as Touched) before a call of this
  // client that changes them is sent and again after its reply, so neither a kept copy nor a
  // lookup or listing reply read meanwhile outlives the change. A call whose reply gives the
  // inode's new attributes (SetAttr, Commit) passes them to Succeeded: they are kept again where
  // the old ones were (DirNames::Changed).
  class Touching {
   public:
    Touching(DirNames& names, InodeId inode, bool changes = true)
        : names_(changes ? &names : nullptr), inode_(inode) {
      if (names_ != nullptr) change_ = names_->Changing(inode_);
    }
    ~Touching() {
      if (names_ == nullptr) return;
      if (after_) {
        names_->Changed(inode_, change_, *after_);
      } else {
        names_->Touched(inode_);
      }
    }
    void Succeeded(const Attributes& attr) { after_ = attr; }
    Touching(const Touching&) = delete;
    Touching& operator=(const Touching&) = delete;

   private:
    DirNames* names_;
    InodeId inode_;
    DirNames::Change change_;
    std::optional<Attributes> after_;
  };

  Result<Attributes> GetAttr(InodeId inode) override {
    std::optional<uint64_t> held_changes;
    if (std::optional<Attributes> held = HeldDirAttr(inode, &held_changes)) return *held;
    if (held_changes) {
      // A held directory this client changed through the server: ask (the batch goes first).
      pb::GetAttrRequest req;
      req.set_ino(inode.value());
      req.set_session(cache_session_.load(std::memory_order_relaxed));
      Result<Attributes> attr = AttrCall(&pb::MetaService::Stub::GetAttr, req, Retry::kYes);
      if (attr.ok()) HeldDirAnswered(inode, *held_changes, *attr);
      return attr;
    }
    if (std::optional<Attributes> cached = CachedDir(inode)) return *cached;
    if (cache_session_.load(std::memory_order_relaxed) != 0) {
      AwaitQueuedCommit(inode);
      if (std::optional<Attributes> kept = names_.CachedAttr(inode)) {
        local_getattrs_.fetch_add(1, std::memory_order_relaxed);
        return *kept;
      }
    }
    pb::GetAttrRequest req;
    req.set_ino(inode.value());
    req.set_session(cache_session_.load(std::memory_order_relaxed));
    return AttrCall(&pb::MetaService::Stub::GetAttr, req, Retry::kYes);
  }

  Result<Attributes> SetAttr(InodeId inode, const AttrChanges& ch, const Caller& c,
                             SessionId session) override {
    if (std::optional<Attributes> local = SetAttrLocally(inode, ch, c)) return *local;
    pb::SetAttrRequest req;
    req.set_ino(inode.value());
    FillSetAttr(ch, c, &req);
    req.set_session(session.value());
    ForgetDir(inode);
    Touching touching(names_, inode);
    Result<Attributes> attr = AttrCall(&pb::MetaService::Stub::SetAttr, req, Retry::kNo);
    if (attr.ok()) touching.Succeeded(*attr);
    return attr;
  }

  Result<OpenReply> Create(InodeId parent, std::string_view name, uint32_t mode, uint64_t rdev,
                           bool exclusive, const Caller& c, SessionId session,
                           bool open_for_write) override {
    pb::CreateRequest req;
    req.set_parent(parent.value());
    req.set_name(std::string(name));
    req.set_mode(mode);
    req.set_rdev(rdev);
    req.set_exclusive(exclusive);
    ToPb(c, req.mutable_caller());
    req.set_session(session.value());
    req.set_open_for_write(open_for_write);
    pb::CreateResponse resp;
    const uint64_t xattr_epoch = xattr_changes_.load();
    const DirNames::Ticket ticket = names_.Begin(parent);
    Status s = FromRpc(Call(&pb::MetaService::Stub::Create, req, &resp, Retry::kNo), &resp);
    if (!s.ok()) {
      names_.Forget(parent);
      return s;
    }
    KeepCapability(resp.attr());
    OpenReply reply{FromPb(resp.attr()), resp.write_version()};
    // A new inode's attributes are kept (its writes are the open file's until the commit, which
    // touches them); an existing one's are not (a racing create found it: who knows what else).
    if (resp.created()) {
      names_.Added(parent, name, &reply.attr, &ticket);
    } else {
      names_.Touched(reply.attr.inode);
      names_.Added(parent, name);
    }
    RememberDirs(resp.dir_attrs());
    if (resp.created()) RememberNoXattrs(InodeId(resp.attr().ino()), {}, xattr_epoch);
    return reply;
  }

  Result<Attributes> Mkdir(InodeId parent, std::string_view name, uint32_t mode,
                           const Caller& c) override {
    if (std::optional<Attributes> local = MkdirLocally(parent, name, mode, c)) return *local;
    pb::MkdirRequest req;
    req.set_parent(parent.value());
    req.set_name(std::string(name));
    req.set_mode(mode);
    ToPb(c, req.mutable_caller());
    const DirNames::Ticket ticket = names_.Begin(InodeId());
    Result<Attributes> attr = AttrCall(&pb::MetaService::Stub::Mkdir, req, Retry::kNo);
    if (!attr.ok()) {
      names_.Forget(parent);
      return attr;
    }
    names_.Added(parent, name);
    // Empty, and this session's reply granted it the new directory's lease.
    if (cache_session_.load(std::memory_order_relaxed) != 0) names_.Install(attr->inode, ticket, {});
    return attr;
  }

  Result<Attributes> Symlink(InodeId parent, std::string_view name, std::string_view target,
                             const Caller& c) override {
    pb::SymlinkRequest req;
    req.set_parent(parent.value());
    req.set_name(std::string(name));
    req.set_target(std::string(target));
    ToPb(c, req.mutable_caller());
    Result<Attributes> attr = AttrCall(&pb::MetaService::Stub::Symlink, req, Retry::kNo);
    NoteCreated(parent, name, attr.status());
    return attr;
  }

  Result<Attributes> Link(InodeId inode, InodeId new_parent, std::string_view new_name,
                          const Caller& c) override {
    pb::LinkRequest req;
    req.set_ino(inode.value());
    req.set_new_parent(new_parent.value());
    req.set_new_name(std::string(new_name));
    ToPb(c, req.mutable_caller());
    Touching touching(names_, inode);  // nlink and ctime
    {
      std::lock_guard lock(dl_mu_);
      local_files_.erase(inode.value());  // its new name may be in a directory others see
    }
    Result<Attributes> attr = AttrCall(&pb::MetaService::Stub::Link, req, Retry::kNo);
    NoteCreated(new_parent, new_name, attr.status());
    return attr;
  }

  Status Unlink(InodeId parent, std::string_view name, const Caller& c) override {
    if (UnlinkLocally(parent, name, c)) return OkStatus();
    return Remove(&pb::MetaService::Stub::Unlink, parent, name, c);
  }
  Status Rmdir(InodeId parent, std::string_view name, const Caller& c) override {
    return Remove(&pb::MetaService::Stub::Rmdir, parent, name, c);
  }

  Status Rename(InodeId parent, std::string_view name, InodeId new_parent,
                std::string_view new_name, uint32_t flags, const Caller& c) override {
    if (RenameLocally(parent, name, new_parent, new_name, flags, c)) return OkStatus();
    pb::RenameRequest req;
    req.set_parent(parent.value());
    req.set_name(std::string(name));
    req.set_new_parent(new_parent.value());
    req.set_new_name(std::string(new_name));
    req.set_flags(flags);
    ToPb(c, req.mutable_caller());
    const bool target_was_absent =
        names_.Find(new_parent, new_name) == DirNames::Known::kAbsent;
    // Where it goes others may see it: no longer a file only this client knows.
    NotLocalAnyMore(names_.FindEntry(parent, name));
    pb::StatusResponse resp;
    Status s = FromRpc(Call(&pb::MetaService::Stub::Rename, req, &resp, Retry::kNo), &resp);
    if (!s.ok()) {
      names_.Forget(parent);
      names_.Forget(new_parent);
      return s;
    }
    // The old name is gone only if the new one was known absent: an exchange keeps it, and so
    // does a rename between two links of one inode (POSIX: nothing happens). Otherwise it is
    // asked of the server again.
    if (target_was_absent) {
      names_.Removed(parent, name);
    } else {
      names_.Recalled(parent, name);
    }
    names_.Added(new_parent, new_name);
    RememberDirs(resp.dir_attrs());
    return s;
  }

  Result<std::string> Readlink(InodeId inode) override {
    pb::ReadlinkRequest req;
    req.set_ino(inode.value());
    pb::ReadlinkResponse resp;
    Status s = FromRpc(Call(&pb::MetaService::Stub::Readlink, req, &resp, Retry::kYes), &resp);
    if (!s.ok()) return s;
    return std::move(*resp.mutable_target());
  }

  // A plus page the kernel asked for (READDIRPLUS: ls, a glob, os.scandir) keeps each entry's
  // attributes as a lookup's answer would (DirNames::Answered): the server leased them to this
  // session with the page, so the open that usually follows is answered without a round trip
  // (lazy opens), as after a lookup.
  Result<DirPage> ReadDir(InodeId dir, uint64_t cookie, uint32_t max_entries, bool plus,
                          const Caller& c) override {
    const bool keeps = plus && cache_session_.load(std::memory_order_relaxed) != 0;
    DirNames::Ticket ticket;
    if (keeps) ticket = names_.Begin(dir);
    Result<DirPage> page = ReadDirPage(dir, cookie, max_entries, plus, c);
    if (keeps && page.ok()) {
      for (const DirEntry& e : page->entries) {
        if (e.attr) names_.Answered(dir, e.name, ticket, &*e.attr);  // keeps files only
      }
    }
    return page;
  }

  Result<DirPage> ReadDirPage(InodeId dir, uint64_t cookie, uint32_t max_entries, bool plus,
                              const Caller& c) {
    pb::ReadDirRequest req;
    req.set_ino(dir.value());
    req.set_cookie(cookie);
    req.set_max_entries(max_entries);
    req.set_plus(plus);
    ToPb(c, req.mutable_caller());
    req.set_session(cache_session_.load(std::memory_order_relaxed));
    pb::ReadDirResponse resp;
    Status s = FromRpc(Call(&pb::MetaService::Stub::ReadDir, req, &resp, Retry::kYes), &resp);
    if (!s.ok()) return s;
    DirPage page;
    page.eof = resp.eof();
    page.entries.reserve(resp.entries_size());
    for (const pb::DirEntry& e : resp.entries()) {
      DirEntry out;
      out.name = e.name();
      out.inode = InodeId(e.ino());
      out.mode = e.mode();
      out.cookie = e.cookie();
      if (plus && e.has_attr()) out.attr = FromPb(e.attr());
      page.entries.push_back(std::move(out));
    }
    return page;
  }

  Result<std::string> GetXattr(InodeId inode, std::string_view name, const Caller& c) override {
    if (KnownAbsentXattr(inode, name)) {
      return Status(Code::kNoData, "no attribute '" + std::string(name) + "' (cached)");
    }
    const uint64_t xattr_epoch = xattr_changes_.load();
    pb::XattrResponse resp;
    Status s = XattrCall(&pb::MetaService::Stub::GetXattr, inode, name, "", 0, c, &resp,
                         Retry::kYes);
    if (s.code() == Code::kNoData) RememberNoXattrs(inode, name, xattr_epoch);
    if (!s.ok()) return s;
    return std::move(*resp.mutable_value());
  }
  Status SetXattr(InodeId inode, std::string_view name, std::string_view value, int flags,
                  const Caller& c) override {
    pb::XattrResponse resp;
    ForgetDir(inode);  // ctime changes
    Touching touching(names_, inode);
    return ChangingXattrs(inode, [&] {
      return XattrCall(&pb::MetaService::Stub::SetXattr, inode, name, value, flags, c, &resp,
                       Retry::kNo);
    });
  }
  Result<std::vector<std::string>> ListXattr(InodeId inode, const Caller& c) override {
    const uint64_t xattr_epoch = xattr_changes_.load();
    pb::XattrResponse resp;
    Status s = XattrCall(&pb::MetaService::Stub::ListXattr, inode, "", "", 0, c, &resp,
                         Retry::kYes);
    if (!s.ok()) return s;
    if (resp.names().empty()) RememberNoXattrs(inode, {}, xattr_epoch);
    return std::vector<std::string>(resp.names().begin(), resp.names().end());
  }
  Status RemoveXattr(InodeId inode, std::string_view name, const Caller& c) override {
    pb::XattrResponse resp;
    ForgetDir(inode);  // ctime changes
    Touching touching(names_, inode);
    return ChangingXattrs(inode, [&] {
      return XattrCall(&pb::MetaService::Stub::RemoveXattr, inode, name, "", 0, c, &resp,
                       Retry::kNo);
    });
  }

  Result<FsStats> StatFs() override {
    pb::StatFsRequest req;
    pb::StatFsResponse resp;
    Status s = FromRpc(Call(&pb::MetaService::Stub::StatFs, req, &resp, Retry::kYes), &resp);
    if (!s.ok()) return s;
    FsStats out;
    out.total_bytes = resp.usable_total_bytes() ? resp.usable_total_bytes() : resp.total_bytes();
    out.free_bytes = resp.usable_total_bytes() ? resp.usable_free_bytes() : resp.free_bytes();
    out.files = resp.files();
    out.raw_free_bytes = resp.free_bytes();
    return out;
  }

  Result<OpenReply> Open(InodeId inode, int flags, SessionId session, const Caller& c) override {
    pb::OpenRequest req;
    req.set_ino(inode.value());
    req.set_flags(static_cast<uint32_t>(flags));
    req.set_session(session.value());
    ToPb(c, req.mutable_caller());
    pb::OpenResponse resp;
    // A write open takes the write lease and may truncate (O_TRUNC); a read open changes nothing.
    Touching touching(names_, inode, (flags & O_ACCMODE) != O_RDONLY);
    Status s = FromRpc(Call(&pb::MetaService::Stub::Open, req, &resp, ReadOnlyRetry(flags)), &resp);
    if (!s.ok()) return s;
    KeepCapability(resp.attr());
    return OpenReply{FromPb(resp.attr()), resp.write_version(), resp.unlink_pending()};
  }

  Result<std::string> Capability(InodeId inode, bool write, bool fresh) override {
    if (!needs_capabilities_) return std::string();
    const uint64_t now_s = NowUnixSeconds();
    if (!fresh) {
      std::lock_guard lock(caps_mu_);
      auto it = caps_.find(inode.value());
      if (it != caps_.end()) {
        // A write capability serves reads too.
        for (const HeldCapability* held : {&it->second.write, write ? nullptr : &it->second.read}) {
          if (held != nullptr && !held->bytes.empty() && held->renew_at_unix_seconds > now_s) {
            return held->bytes;
          }
        }
      }
    }
    pb::CapabilityRequest req;
    req.set_ino(inode.value());
    req.set_write(write);
    pb::CapabilityResponse resp;
    Status s =
        FromRpc(Call(&pb::MetaService::Stub::GetCapability, req, &resp, Retry::kYes), &resp);
    if (!s.ok()) return s;
    if (resp.capability().empty()) return std::string();  // the server asks for none
    Result<aquifer::Capability> cap = DecodeCapability(resp.capability());
    if (!cap.ok() || cap->inode != inode ||
        (write && cap->mode != CapabilityMode::kWrite)) {
      return Internal("metadata server sent a capability that does not fit inode " +
                      inode.ToString());
    }
    Remember(*cap, resp.capability());
    return std::string(resp.capability());
  }

  Status Release(InodeId inode, SessionId session, bool was_write) override {
    pb::ReleaseRequest req;
    req.set_ino(inode.value());
    req.set_session(session.value());
    req.set_was_write(was_write);
    pb::StatusResponse resp;
    Touching touching(names_, inode, was_write);
    return FromRpc(Call(&pb::MetaService::Stub::Release, req, &resp, Retry::kNo), &resp);
  }

  Result<std::vector<Status>> ReleaseBatch(SessionId session,
                                           std::span<const ReleaseItem> items) override {
    if (!batch_release_.load(std::memory_order_relaxed)) {
      return MetaClient::ReleaseBatch(session, items);
    }
    pb::ReleaseBatchRequest req;
    req.set_session(session.value());
    for (const ReleaseItem& item : items) {
      pb::ReleaseItem* out = req.add_items();
      out->set_ino(item.inode.value());
      out->set_was_write(item.was_write);
    }
    pb::ReleaseBatchResponse resp;
    // As Release's Touching: each write close, before the call and after its reply.
    auto touch_writes = [&] {
      for (const ReleaseItem& item : items) {
        if (item.was_write && !item.committed) names_.Touched(item.inode);
      }
    };
    touch_writes();
    const grpc::Status transport =
        Call(&pb::MetaService::Stub::ReleaseBatch, req, &resp, Retry::kNo);
    touch_writes();
    if (transport.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      // A metadata server older than ReleaseBatch: one call per item from now on.
      batch_release_.store(false, std::memory_order_relaxed);
      return MetaClient::ReleaseBatch(session, items);
    }
    Status s = FromRpc(transport, &resp);
    if (!s.ok()) return s;
    if (resp.results_size() != static_cast<int>(items.size())) {
      return Internal("release batch: " + std::to_string(resp.results_size()) + " results for " +
                      std::to_string(items.size()) + " items");
    }
    std::vector<Status> out;
    out.reserve(items.size());
    for (const pb::RpcStatus& r : resp.results()) {
      out.push_back(r.code() == 0 ? OkStatus() : Status(CodeFromInt(r.code()), r.message()));
    }
    return out;
  }

  Result<CommitReply> Commit(InodeId inode, SessionId session, uint64_t size_bytes,
                             Timestamp mtime, uint64_t write_version, bool sync,
                             std::span<const ServerId> backfill_servers,
                             const std::vector<std::pair<uint64_t, uint64_t>>* written_stripes,
                             uint64_t degraded_stripes, const AttrChanges* attrs,
                             const Caller& caller) override {
    pb::CommitRequest req;
    if (attrs != nullptr) {
      if (attrs->size_bytes) return InvalidArgument("commit: attributes with a size");
      FillSetAttr(*attrs, caller, req.mutable_attrs());
    }
    req.set_degraded_stripes(degraded_stripes);
    if (written_stripes != nullptr) {
      req.set_records_stripes(true);
      for (const auto& [b, e] : *written_stripes) {
        req.add_written_stripes(b);
        req.add_written_stripes(e);
      }
    }
    req.set_ino(inode.value());
    req.set_session(session.value());
    req.set_size(size_bytes);
    ToPb(mtime, req.mutable_mtime());
    req.set_write_version(write_version);
    req.set_sync(sync);
    for (ServerId id : backfill_servers) req.add_backfill_servers(id.value());
    pb::CommitResponse resp;
    Touching touching(names_, inode);
    Status s = FromRpc(Call(&pb::MetaService::Stub::Commit, req, &resp, Retry::kNo), &resp);
    if (!s.ok()) return s;
    CommitReply reply{FromPb(resp.attr()), resp.next_write_version()};
    touching.Succeeded(reply.attr);
    return reply;
  }

  Status ReportLost(InodeId inode, std::span<const uint64_t> stripes) override {
    pb::ReportLostRequest req;
    req.set_ino(inode.value());
    for (uint64_t s : stripes) req.add_stripes(s);
    pb::ReportLostResponse resp;
    // Idempotent: recording a stripe twice keeps one record.
    return FromRpc(Call(&pb::MetaService::Stub::ReportLost, req, &resp, Retry::kYes), &resp);
  }

  using MetaClient::OpenSession;
  Result<SessionInfo> OpenSession(std::string_view client_name, bool cache_leases) override {
    pb::OpenSessionRequest req;
    req.set_client_name(std::string(client_name));
    req.set_cache_leases(cache_leases);
    pb::OpenSessionResponse resp;
    // A duplicate (the first reached the server, its reply was lost) is an unused session that
    // expires after its lease TTL: harmless to repeat.
    Status s = FromRpc(Call(&pb::MetaService::Stub::OpenSession, req, &resp, Retry::kYes), &resp);
    if (!s.ok()) return s;
    // Later requests are tagged with this session (and wait out a metadata server restart).
    session_.store(resp.session(), std::memory_order_release);
    FollowWire(resp.wire_port(), resp.wire_instance(), /*fresh=*/true);
    return SessionInfo{SessionId(resp.session()), std::chrono::milliseconds(resp.lease_ttl_ms()),
                       std::chrono::milliseconds(resp.cache_lease_ms())};
  }

  Result<OpenReply> AcquireLease(InodeId inode, SessionId session) override {
    pb::LeaseRequest req;
    req.set_ino(inode.value());
    req.set_session(session.value());
    pb::OpenResponse resp;
    Touching touching(names_, inode);
    Status s = FromRpc(Call(&pb::MetaService::Stub::AcquireLease, req, &resp, Retry::kNo), &resp);
    if (!s.ok()) return s;
    KeepCapability(resp.attr());
    return OpenReply{FromPb(resp.attr()), resp.write_version()};
  }
  Status ReturnLease(InodeId inode, SessionId session) override {
    pb::LeaseRequest req;
    req.set_ino(inode.value());
    req.set_session(session.value());
    pb::StatusResponse resp;
    Touching touching(names_, inode);
    return FromRpc(Call(&pb::MetaService::Stub::ReturnLease, req, &resp, Retry::kNo), &resp);
  }
  // Does not wait out an outage (Retry::kBrief): the client's recall loop asks again.
  Result<std::vector<InodeId>> WaitRecall(SessionId session,
                                          std::chrono::milliseconds wait) override {
    Result<Recalls> r = WaitRecalls(session, wait, 0, 0);
    if (!r.ok()) return r.status();
    return std::move(r->write_leases);
  }

  void SetCacheSession(SessionId session, std::chrono::milliseconds lease) override {
    cache_session_.store(session.value(), std::memory_order_relaxed);
    names_.ForgetAll();  // the leases were the old session's
    {
      std::lock_guard lock(dl_mu_);
      DropHeldDirsLocked();
    }
    names_.SetLease(session.value() == 0 ? std::chrono::milliseconds(0) : lease);
  }
  Result<Recalls> WaitRecalls(SessionId session, std::chrono::milliseconds wait,
                              uint64_t acked_seq, uint64_t recall_epoch) override {
    pb::WaitRecallRequest req;
    req.set_session(session.value());
    req.set_wait_ms(static_cast<uint32_t>(std::clamp<int64_t>(wait.count(), 0, 10000)));
    req.set_acked_seq(acked_seq);
    req.set_recall_epoch(recall_epoch);
    pb::WaitRecallResponse resp;
    const auto sent = SteadyClock::now();
    Status s = FromRpc(Call(&pb::MetaService::Stub::WaitRecall, req, &resp, Retry::kBrief), &resp);
    if (!s.ok()) return s;
    if (resp.cache_recalls_size() > 0) AQ_FAILPOINT("client.cache_recall.before_forget");
    Recalls out;
    const uint64_t seen = seen_recall_epoch_.exchange(resp.recall_epoch());
    if (resp.recall_epoch() != seen) {
      // A new server run (or the first answer): it knows none of this client's leases.
      if (seen != 0) out.old_run_trusted_until = names_.TrustedUntil();
      names_.ForgetAll();
      ForgetAllDirs();
      ForgetAllXattrAbsences();
      std::lock_guard lock(dl_mu_);
      DropHeldDirsLocked();  // the new run holds no lease of ours (the creates still go out)
    }
    // What this client caches itself goes before trust is renewed (the caller handles the rest
    // and acknowledges with its next call).
    for (const pb::CacheRecall& r : resp.cache_recalls()) {
      for (uint64_t ino : r.inodes()) ForgetCached(InodeId(ino));
      for (const pb::CacheEntryName& e : r.entries()) names_.Recalled(InodeId(e.parent()), e.name());
    }
    if (session.value() == cache_session_.load(std::memory_order_relaxed)) names_.Heard(sent);
    out.recall_epoch = resp.recall_epoch();
    for (uint64_t ino : resp.inodes()) out.write_leases.push_back(InodeId(ino));
    for (const pb::CacheRecall& r : resp.cache_recalls()) {
      CacheRecall c;
      c.seq = r.seq();
      for (uint64_t ino : r.inodes()) c.inodes.push_back(InodeId(ino));
      for (const pb::CacheEntryName& e : r.entries()) {
        c.entries.emplace_back(InodeId(e.parent()), e.name());
      }
      out.cache_recalls.push_back(std::move(c));
    }
    return out;
  }
  std::chrono::steady_clock::time_point CacheTrustedUntil() override {
    if (cache_session_.load(std::memory_order_relaxed) == 0) return SteadyClock::time_point::max();
    return names_.TrustedUntil();
  }
  std::optional<Attributes> KeptAttr(InodeId inode) override {
    if (cache_session_.load(std::memory_order_relaxed) == 0) return std::nullopt;
    AwaitQueuedCommit(inode);
    return names_.CachedAttr(inode);
  }
  void ForgetCached(InodeId inode) override {
    ForgetDir(inode);
    names_.Touched(inode);
    ForgetXattrAbsences(inode);
  }

  // Neither waits out an outage (Retry::kBrief): the client's keep-alive runs again a third of a
  // lease TTL later and ignores kUnavailable, and a session left open at an unmount during an
  // outage expires by itself, which is better than holding the unmount for outage_wait_.
  Status KeepAlive(SessionId session) override {
    pb::SessionRequest req;
    req.set_session(session.value());
    pb::KeepAliveResponse resp;
    Status s = FromRpc(Call(&pb::MetaService::Stub::KeepAlive, req, &resp, Retry::kBrief), &resp);
    // A server restarted since the session began serves its wire on a new port and token.
    if (s.ok()) FollowWire(resp.wire_port(), resp.wire_instance(), /*fresh=*/false);
    return s;
  }
  void AddCallCounts(ClientCounters* out) const override {
    out->meta_calls = calls_.load(std::memory_order_relaxed);
    out->lookups_answered_absent = local_absent_.load(std::memory_order_relaxed);
    out->lookups_answered_found = local_found_.load(std::memory_order_relaxed);
    out->getattrs_answered = local_getattrs_.load(std::memory_order_relaxed);
    out->dir_listings = listings_.load(std::memory_order_relaxed);
    out->creates_local = local_creates_.load(std::memory_order_relaxed);
    out->change_batches = batches_.load(std::memory_order_relaxed);
  }
  Status CloseSession(SessionId session) override {
    if (cache_session_.load(std::memory_order_relaxed) != 0) {
      Logger("client")->info(
          "cache leases: answered here {} lookups absent, {} lookups and {} getattrs from kept "
          "attributes; {} directory listings; {} metadata calls in all",
          local_absent_.load(), local_found_.load(), local_getattrs_.load(), listings_.load(),
          calls_.load());
    }
    if (dir_leases_on_.load()) {
      Logger("client")->info("directory leases: {} creates and {} other changes made here, sent "
                             "in {} batches", local_creates_.load(), local_changes_.load(),
                             batches_.load() + (pending_count_.load() ? 1 : 0));
    }
    Status s = SessionCall(&pb::MetaService::Stub::CloseSession, session, Retry::kBrief);
    // Later requests carry no tag of the closed session.
    uint64_t current = session.value();
    session_.compare_exchange_strong(current, 0, std::memory_order_acq_rel);
    return s;
  }

  Status SetLock(InodeId inode, SessionId session, uint64_t owner, const LockRange& range,
                 bool flock) override {
    pb::LockResponse resp;
    return LockCall(&pb::MetaService::Stub::SetLock, inode, session, owner, range, flock, &resp,
                    Retry::kNo);
  }

  Result<LockRange> GetLock(InodeId inode, SessionId session, uint64_t owner,
                            const LockRange& range) override {
    pb::LockResponse resp;
    Status s =
        LockCall(&pb::MetaService::Stub::GetLock, inode, session, owner, range, false, &resp,
                 Retry::kYes);
    if (!s.ok()) return s;
    return LockRange{static_cast<int>(resp.type()), resp.start(), resp.end(), resp.pid()};
  }

  Result<ClusterMap> GetClusterMap(uint64_t known_version) override {
    pb::ClusterMapRequest req;
    req.set_known_version(known_version);
    pb::ClusterMapResponse resp;
    Status s = FromRpc(Call(&pb::MetaService::Stub::GetClusterMap, req, &resp, Retry::kYes), &resp);
    if (!s.ok()) return s;
    ClusterMap map;
    map.version = resp.version();
    for (const pb::ServerInfo& info : resp.servers()) {
      ServerEntry e;
      e.id = ServerId(info.id());
      e.address = info.address();
      e.failure_domain = info.failure_domain();
      e.up = info.up();
      e.capacity_bytes = info.capacity_bytes();
      e.used_bytes = info.used_bytes();
      e.state = info.state();
      e.pg_positions = info.pg_positions();
      e.chunks_scrubbed = info.chunks_scrubbed();
      e.corrupt_found = info.corrupt_found();
      e.corrupt_repaired = info.corrupt_repaired();
      map.servers[e.id] = std::move(e);
    }
    for (const pb::PgTable& table : resp.pg_tables()) {
      auto& pgs = map.pg_tables[table.width()];
      auto& pending = map.pg_pending[table.width()];
      for (const pb::PlacementGroup& pg : table.pgs()) {
        std::vector<ServerId> targets;
        for (uint32_t t : pg.targets()) targets.push_back(ServerId(t));
        pgs.push_back(std::move(targets));
        std::vector<ServerId> to;
        for (uint32_t t : pg.pending()) to.push_back(ServerId(t));
        pending.push_back(std::move(to));
      }
    }
    map.default_k = static_cast<uint32_t>(resp.default_k());
    map.default_m = static_cast<uint32_t>(resp.default_m());
    map.default_unit_bytes = static_cast<uint32_t>(resp.default_unit_bytes());
    return map;
  }

  // --- exclusive directory leases (docs/design.md "Exclusive directory leases") ---------
  ~GrpcMetaClient() override {
    {
      std::lock_guard lock(dl_mu_);
      flusher_stop_ = true;
    }
    flush_cv_.notify_all();
    if (flusher_.joinable()) flusher_.join();
  }

  void EnableDirLeases(std::function<void(InodeId parent, const std::string& name)> on_refused,
                       std::function<void(InodeId inode)> on_attrs_stale) override {
    on_refused_ = std::move(on_refused);
    on_attrs_stale_ = std::move(on_attrs_stale);
    dir_leases_on_.store(true);
  }

  std::optional<OpenReply> CreateLocally(InodeId parent, std::string_view name, uint32_t mode,
                                         const Caller& c, bool open_for_write) override {
    if (!LocalChangesOn(name)) return std::nullopt;  // the server's Create gives any error
    const DirNames::Ticket ticket = names_.Begin(parent);
    if (names_.Find(parent, name) != DirNames::Known::kAbsent) return std::nullopt;
    if (!EnsureDirLease(parent, c)) return std::nullopt;
    Attributes attr;
    uint64_t write_version = 0;
    const Timestamp now = WallNow();
    {
      std::lock_guard lock(dl_mu_);
      auto held = held_dirs_.find(parent.value());
      // Unknown attributes (this client changed the directory through the server) may hold an
      // old mode: the setgid rule needs the current one.
      if (held == held_dirs_.end() || !held->second.known || ino_next_ >= ino_end_) {
        return std::nullopt;
      }
      const uint64_t ino = ino_next_++;
      const Attributes& dir = held->second.attr;
      attr.inode = InodeId(ino);
      attr.generation = ino_generation_;
      attr.mode = S_IFREG | (mode & 07777);
      attr.nlink = 1;
      attr.uid = c.uid;
      attr.gid = (dir.mode & S_ISGID) ? dir.gid : c.gid;
      attr.atime = attr.mtime = attr.ctime = now;
      attr.layout = held->second.file_layout;
      if (attr.layout.pg_count > 0) attr.layout.pg_start = static_cast<uint32_t>(ino % attr.layout.pg_count);
      attr.stripes = std::make_shared<const StripeMap>();
      Touch(held->second, now);
      pb::ChangeBatchItem item = NewChange(pb::ChangeBatchItem::CREATE, parent, name, c, now);
      item.set_mode(attr.mode);
      item.set_new_ino(ino);
      item.set_generation(ino_generation_);
      item.set_open_for_write(open_for_write);
      if (open_for_write && ver_next_ != 0 && ver_next_ < ver_end_) {
        write_version = ver_next_++;
        item.set_write_version(write_version);
      }
      QueueChangeLocked(std::move(item));
      local_files_[ino] = parent.value();
    }
    names_.Added(parent, name, &attr, &ticket);
    RememberNoXattrs(attr.inode, {}, xattr_changes_.load());
    local_creates_.fetch_add(1, std::memory_order_relaxed);
    OpenReply reply;
    reply.attr = attr;
    reply.created_locally = true;
    reply.write_version = write_version;
    return reply;
  }

  // The clock of a change made here: the new inode's times, ctime and the parents' mtime.
  static Timestamp WallNow() {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
    return Timestamp{ns / 1000000000, static_cast<uint32_t>(ns % 1000000000)};
  }
  // Whether this client may change names itself now: directory leases on, a cache session, no
  // client credential, and `name` a name the server would take.
  bool LocalChangesOn(std::string_view name) const {
    if (!dir_leases_on_.load() || cache_session_.load(std::memory_order_relaxed) == 0 ||
        needs_capabilities_) {
      return false;
    }
    return !name.empty() && name.size() <= kMaxNameBytes && name != "." && name != ".." &&
           name.find('/') == std::string_view::npos && name.find('\0') == std::string_view::npos;
  }
  // A change of `kind` to `name` in `parent` by `c` at `now`, for QueueChangeLocked.
  static pb::ChangeBatchItem NewChange(pb::ChangeBatchItem::Kind kind, InodeId parent,
                                       std::string_view name, const Caller& c, Timestamp now) {
    pb::ChangeBatchItem item;
    item.set_kind(kind);
    item.set_parent(parent.value());
    item.set_name(std::string(name));
    ToPb(c, item.mutable_caller());
    ToPb(now, item.mutable_time());
    return item;
  }
  // Queues `item` (dl_mu_ held), starts the flusher and wakes it.
  void QueueChangeLocked(pb::ChangeBatchItem item) {
    const bool was_empty = pending_.empty();
    pending_.push_back(std::move(item));
    pending_count_.fetch_add(1);
    if (!flusher_.joinable()) flusher_ = std::thread([this] { FlushLoop(); });
    // The sender waits for the first change only; while it lingers for more, a notification
    // per change woke it for nothing (a futex wake-up per create, unlink or rename).
    if (was_empty) flush_cv_.notify_one();
  }

  // mkdir under the exclusive lease of `parent`: the new directory is this client's too (the
  // server leases it to the session when the batch applies), empty and complete in names_.
  std::optional<Attributes> MkdirLocally(InodeId parent, std::string_view name, uint32_t mode,
                                         const Caller& c) {
    if (!LocalChangesOn(name)) return std::nullopt;
    const DirNames::Ticket ticket = names_.Begin(InodeId());
    if (names_.Find(parent, name) != DirNames::Known::kAbsent) return std::nullopt;
    if (!EnsureDirLease(parent, c)) return std::nullopt;
    const Timestamp now = WallNow();
    Attributes attr;
    {
      std::lock_guard lock(dl_mu_);
      auto held = held_dirs_.find(parent.value());
      if (held == held_dirs_.end() || !held->second.known || ino_next_ >= ino_end_) {
        return std::nullopt;
      }
      if (held->second.attr.nlink >= 65000) return std::nullopt;  // the server's kMaxLinks
      const uint64_t ino = ino_next_++;
      Attributes& dir = held->second.attr;
      attr.inode = InodeId(ino);
      attr.generation = ino_generation_;
      attr.mode = S_IFDIR | (mode & 07777);
      attr.nlink = 2;
      attr.uid = c.uid;
      attr.gid = c.gid;
      if (dir.mode & S_ISGID) {
        attr.gid = dir.gid;
        attr.mode |= S_ISGID;
      }
      attr.size_bytes = 4096;
      attr.atime = attr.mtime = attr.ctime = now;
      dir.nlink++;
      Touch(held->second, now);
      const Layout file_layout = held->second.file_layout;
      held_dirs_[ino] = HeldDir{attr, file_layout};  // may rehash: `held` is not used after
      pb::ChangeBatchItem item = NewChange(pb::ChangeBatchItem::MKDIR, parent, name, c, now);
      item.set_mode(attr.mode);
      item.set_new_ino(ino);
      item.set_generation(ino_generation_);
      QueueChangeLocked(std::move(item));
    }
    names_.Added(parent, name);
    names_.Install(attr.inode, ticket, {});
    local_changes_.fetch_add(1, std::memory_order_relaxed);
    return attr;
  }

  // A chmod, chown or utimes of a file only this client knows (local_files_, its directory
  // still held), when the rules of the server's ChangedAttrs (metadata_service.cc) let the
  // caller make it: queued as a SETATTR behind the file's other changes, and answered with its
  // kept attributes so changed. Anything the caller may not do, a size and a file whose
  // attributes are not kept go to the server (which gives the error). The kept size may predate
  // a queued commit: the client's Overlay gives an open writer's size, and a local answer of the
  // attributes waits for the batch (AwaitQueuedCommit).
  std::optional<Attributes> SetAttrLocally(InodeId inode, const AttrChanges& ch, const Caller& c) {
    if (ch.size_bytes || !dir_leases_on_.load() || needs_capabilities_ ||
        cache_session_.load(std::memory_order_relaxed) == 0) {
      return std::nullopt;
    }
    {
      std::lock_guard lock(dl_mu_);
      auto local = local_files_.find(inode.value());
      if (local == local_files_.end() || !held_dirs_.count(local->second)) return std::nullopt;
    }
    std::optional<Attributes> base = names_.CachedAttr(inode);
    if (!base || !S_ISREG(base->mode) || base->nlink != 1) return std::nullopt;
    auto in_group = [&c](uint32_t gid) {
      return c.gid == gid || std::find(c.groups.begin(), c.groups.end(), gid) != c.groups.end();
    };
    const bool root = c.uid == 0;
    if (!root && c.uid != base->uid) return std::nullopt;  // not the owner: the server's rules
    const Timestamp now = WallNow();
    Attributes next = *base;
    if (ch.mode) {
      next.mode = (base->mode & S_IFMT) | (*ch.mode & 07777);
      if (!root && !in_group(base->gid)) next.mode &= ~uint32_t{S_ISGID};
    }
    if (ch.uid) {
      if (!root && *ch.uid != base->uid) return std::nullopt;  // EPERM, from the server
      next.uid = *ch.uid;
    }
    if (ch.gid) {
      if (!root && !in_group(*ch.gid)) return std::nullopt;
      next.gid = *ch.gid;
    }
    if ((ch.uid || ch.gid) && !ch.mode && (next.uid != base->uid || next.gid != base->gid)) {
      next.mode &= ~uint32_t{S_ISUID};
      if (next.mode & S_IXGRP) next.mode &= ~uint32_t{S_ISGID};
    }
    if ((ch.atime && ch.atime->nsec >= 1000000000u) ||
        (ch.mtime && ch.mtime->nsec >= 1000000000u)) {
      return std::nullopt;  // kInvalidArgument, from the server
    }
    if (ch.atime_now) {
      next.atime = now;
    } else if (ch.atime) {
      next.atime = *ch.atime;
    }
    if (ch.mtime_now) {
      next.mtime = now;
    } else if (ch.mtime) {
      next.mtime = *ch.mtime;
    }
    next.ctime = now;
    {
      std::lock_guard lock(dl_mu_);
      auto local = local_files_.find(inode.value());
      if (local == local_files_.end() || !held_dirs_.count(local->second)) return std::nullopt;
      pb::ChangeBatchItem item;
      item.set_kind(pb::ChangeBatchItem::SETATTR);
      item.set_new_ino(inode.value());
      ToPb(c, item.mutable_caller());
      ToPb(now, item.mutable_time());
      FillSetAttr(ch, c, item.mutable_attrs());
      // Answered from attributes that predate a queued commit (its blocks, its times): the
      // kernel asks again once the batch is answered.
      if (unsettled_.count(inode.value()) && stale_replies_.size() < kMaxKeptCreateResults) {
        stale_replies_.insert(inode.value());
      }
      // Kept before the item can be answered (its answer's attributes replace these).
      names_.Refresh(next);
      QueueChangeLocked(std::move(item));
      NoteUnsettledLocked(inode.value());
    }
    local_changes_.fetch_add(1, std::memory_order_relaxed);
    return next;
  }

  // The non-directory with one link named `name` in `parent`, when this client keeps its
  // attributes (it knows every name of `parent`).
  std::optional<Attributes> KeptChild(InodeId parent, std::string_view name) {
    DirNames::Found found = names_.FindEntry(parent, name);
    if (found.known != DirNames::Known::kPresent || !found.attr) return std::nullopt;
    if (S_ISDIR(found.attr->mode) || found.attr->nlink != 1) return std::nullopt;
    return found.attr;
  }

  // unlink under the exclusive lease of `parent`.
  bool UnlinkLocally(InodeId parent, std::string_view name, const Caller& c) {
    if (!LocalChangesOn(name)) return false;
    std::optional<Attributes> victim = KeptChild(parent, name);
    if (!victim || !EnsureDirLease(parent, c)) return false;
    const Timestamp now = WallNow();
    {
      std::lock_guard lock(dl_mu_);
      auto held = held_dirs_.find(parent.value());
      if (held == held_dirs_.end()) return false;
      Touch(held->second, now);
      QueueChangeLocked(NewChange(pb::ChangeBatchItem::UNLINK, parent, name, c, now));
      local_files_.erase(victim->inode.value());
    }
    names_.Removed(parent, name);
    names_.Touched(victim->inode);
    local_changes_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  // rename of a non-directory under the exclusive leases of both parents, over nothing or over
  // a non-directory with one link.
  bool RenameLocally(InodeId parent, std::string_view name, InodeId new_parent,
                     std::string_view new_name, uint32_t flags, const Caller& c) {
    if (!LocalChangesOn(name) || !LocalChangesOn(new_name)) return false;
    if (flags & ~uint32_t{RENAME_NOREPLACE}) return false;  // an exchange goes to the server
    if (parent == new_parent && name == new_name) return false;
    std::optional<Attributes> moved = KeptChild(parent, name);
    if (!moved) return false;
    const DirNames::Found target = names_.FindEntry(new_parent, new_name);
    std::optional<Attributes> victim;
    if (target.known == DirNames::Known::kPresent) {
      if (flags & RENAME_NOREPLACE) return false;  // the server gives EEXIST
      victim = KeptChild(new_parent, new_name);
      if (!victim || victim->inode == moved->inode) return false;
    } else if (target.known != DirNames::Known::kAbsent) {
      return false;
    }
    if (!EnsureDirLease(parent, c) || (new_parent != parent && !EnsureDirLease(new_parent, c))) {
      return false;
    }
    const Timestamp now = WallNow();
    {
      std::lock_guard lock(dl_mu_);
      auto from = held_dirs_.find(parent.value());
      auto to = held_dirs_.find(new_parent.value());
      if (from == held_dirs_.end() || to == held_dirs_.end()) return false;
      Touch(from->second, now);
      if (to != from) Touch(to->second, now);
      pb::ChangeBatchItem item = NewChange(pb::ChangeBatchItem::RENAME, parent, name, c, now);
      item.set_new_parent(new_parent.value());
      item.set_new_name(std::string(new_name));
      QueueChangeLocked(std::move(item));
      if (victim) local_files_.erase(victim->inode.value());
      auto local = local_files_.find(moved->inode.value());
      if (local != local_files_.end()) local->second = new_parent.value();
    }
    if (victim) {
      names_.Removed(new_parent, new_name);
      names_.Touched(victim->inode);
    }
    names_.Removed(parent, name);
    names_.Touched(moved->inode);
    // Its one name is the new one now, with the attributes it had (ctime moved): kept there, so
    // a later unlink or rename of it here is local too.
    const DirNames::Ticket ticket = names_.Begin(new_parent);
    Attributes after = *moved;
    after.ctime = std::max(after.ctime, now);
    names_.Added(new_parent, new_name, &after, &ticket);
    local_changes_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  Status FlushChanges(bool sync) override {
    std::unique_lock flushing(flush_mu_);
    std::vector<pb::ChangeBatchItem> items;
    {
      std::lock_guard lock(dl_mu_);
      items.swap(pending_);  // still counted in pending_count_ until answered
    }
    Status result;
    std::vector<Attributes> committed;  // what the batches' commits and setattrs answered
    std::vector<InodeId> refused_inodes;  // their refused ones: the attributes kept go
    if (items.empty()) {
      if (sync) {
        pb::SyncRequest req;
        pb::StatusResponse resp;
        result = FromRpc(Call(&pb::MetaService::Stub::Sync, req, &resp, Retry::kYes), &resp);
      }
      return result;
    }
    for (size_t begin = 0; begin < items.size(); begin += kMaxChangeBatchItems) {
      const size_t end = std::min(items.size(), begin + kMaxChangeBatchItems);
      pb::ChangeBatchRequest req;
      req.set_session(session_.load(std::memory_order_relaxed));
      req.set_sync(sync);
      for (size_t i = begin; i < end; ++i) *req.add_items() = items[i];
      pb::ChangeBatchResponse resp;
      Status s = FromRpc(Call(&pb::MetaService::Stub::ChangeBatch, req, &resp, Retry::kNo), &resp);
      if (s.ok() && resp.results_size() != static_cast<int>(end - begin)) {
        s = Internal("change batch: " + std::to_string(resp.results_size()) + " answers for " +
                     std::to_string(end - begin) + " changes");
      }
      if (!s.ok() && result.ok()) result = s;  // the call itself failed
      batches_.fetch_add(1, std::memory_order_relaxed);
      std::lock_guard lock(dl_mu_);
      for (size_t i = begin; i < end; ++i) {
        const pb::ChangeBatchItem& item = items[i];
        Status one = s;
        if (s.ok()) {
          const pb::RpcStatus& rs = resp.results(static_cast<int>(i - begin)).status();
          if (rs.code() != 0) one = Status(CodeFromInt(rs.code()), rs.message());
        }
        if (item.kind() == pb::ChangeBatchItem::COMMIT ||
            item.kind() == pb::ChangeBatchItem::SETATTR) {
          const bool commit = item.kind() == pb::ChangeBatchItem::COMMIT;
          SettledLocked(item.new_ino());
          auto q = commit ? queued_commits_.find(item.new_ino()) : queued_commits_.end();
          if (!one.ok()) {
            one = one.WithPrefix(std::string(commit ? "commit" : "setattr") + " of inode " +
                                 std::to_string(item.new_ino()) + " (sent in a batch)");
            Logger("client")->warn("{}", one.ToString());
            if (change_error_.ok()) change_error_ = one;
            if (q != queued_commits_.end()) q->second.answer = one;
            refused_inodes.push_back(InodeId(item.new_ino()));
            continue;
          }
          const pb::ChangeBatchResult& r = resp.results(static_cast<int>(i - begin));
          CommitReply reply{FromPb(r.attr()), r.write_version()};
          committed.push_back(reply.attr);
          if (q != queued_commits_.end()) q->second.answer = std::move(reply);
          continue;
        }
        if (!one.ok()) {
          static constexpr const char* kWhat[] = {"create", "mkdir", "unlink", "rename"};
          one = one.WithPrefix(std::string(kWhat[item.kind() & 3]) + " of '" + item.name() +
                               "' in inode " + std::to_string(item.parent()) +
                               " (sent in a batch)");
          Logger("client")->warn("{}", one.ToString());
          if (item.new_ino() != 0) {
            if (create_errors_.size() >= kMaxKeptCreateResults) create_errors_.clear();
            create_errors_[item.new_ino()] = one;
          }
          if (change_error_.ok()) change_error_ = one;  // for the next SyncNamespace
          failed_dirs_.push_back(InodeId(item.parent()));
          refused_names_.emplace_back(InodeId(item.parent()), item.name());
          if (item.new_parent() != 0) {
            failed_dirs_.push_back(InodeId(item.new_parent()));
            refused_names_.emplace_back(InodeId(item.new_parent()), item.new_name());
          }
          continue;
        }
        const pb::ChangeBatchResult& r = resp.results(static_cast<int>(i - begin));
        if (item.open_for_write() && item.write_version() == 0 && r.write_version() != 0) {
          if (created_leases_.size() >= kMaxKeptCreateResults) created_leases_.clear();
          created_leases_[item.new_ino()] = OpenReply{FromPb(r.attr()), r.write_version()};
        }
      }
    }
    pending_count_.fetch_sub(items.size());
    // A name the server refused is not there: the lists must ask again.
    std::vector<InodeId> failed;
    std::vector<std::pair<InodeId, std::string>> refused;
    {
      std::lock_guard lock(dl_mu_);
      failed.swap(failed_dirs_);
      refused.swap(refused_names_);
    }
    answered_cv_.notify_all();
    std::vector<InodeId> stale;  // settled now: the kernel asks again
    {
      std::lock_guard lock(dl_mu_);
      for (auto it = stale_replies_.begin(); it != stale_replies_.end();) {
        if (unsettled_.count(*it)) {
          ++it;
          continue;
        }
        stale.push_back(InodeId(*it));
        it = stale_replies_.erase(it);
      }
    }
    for (InodeId dir : failed) names_.Forget(dir);
    // The committed files' attributes are kept where the old ones were (sizes, versions).
    for (const Attributes& attr : committed) names_.Refresh(attr);
    for (InodeId ino : refused_inodes) names_.Touched(ino);
    flushing.unlock();  // the kernel call below may wait for a directory a caller here holds
    // The kernel here took those changes as made: it must ask again.
    if (on_refused_) {
      for (const auto& [parent, name] : refused) on_refused_(parent, name);
    }
    if (on_attrs_stale_) {
      for (InodeId ino : stale) on_attrs_stale_(ino);
    }
    return result;
  }

  Status TakeChangeError() override {
    std::lock_guard lock(dl_mu_);
    Status out = change_error_;
    change_error_ = OkStatus();
    return out;
  }

  std::optional<OpenReply> TakeCreatedLease(InodeId inode) override {
    (void)FlushChanges(false);  // errors are kept per inode (CreateError)
    std::lock_guard lock(dl_mu_);
    auto it = created_leases_.find(inode.value());
    if (it == created_leases_.end()) return std::nullopt;
    OpenReply out = std::move(it->second);
    created_leases_.erase(it);
    return out;
  }

  bool DropCreatedLease(InodeId inode) override {
    std::lock_guard lock(dl_mu_);
    return created_leases_.erase(inode.value()) != 0;
  }

  bool LocalFile(InodeId inode) override {
    if (!dir_leases_on_.load()) return false;
    std::lock_guard lock(dl_mu_);
    auto local = local_files_.find(inode.value());
    return local != local_files_.end() && held_dirs_.count(local->second) != 0;
  }

  bool QueueCommit(InodeId inode, uint64_t size_bytes, Timestamp mtime, uint64_t write_version,
                   const std::vector<std::pair<uint64_t, uint64_t>>& written_stripes) override {
    if (!dir_leases_on_.load()) return false;
    std::lock_guard lock(dl_mu_);
    auto local = local_files_.find(inode.value());
    if (local == local_files_.end() || !held_dirs_.count(local->second)) return false;
    // One at a time per file (its handle takes the answer before it commits again), and a
    // bounded map.
    if (queued_commits_.count(inode.value()) ||
        queued_commits_.size() >= kMaxKeptCreateResults) {
      return false;
    }
    pb::ChangeBatchItem item;
    item.set_kind(pb::ChangeBatchItem::COMMIT);
    item.set_new_ino(inode.value());
    item.set_size(size_bytes);
    item.set_write_version(write_version);
    ToPb(mtime, item.mutable_time());
    for (const auto& [b, e] : written_stripes) {
      item.add_written_stripes(b);
      item.add_written_stripes(e);
    }
    names_.Queued(inode);  // DirNames' mutex is a leaf
    QueueChangeLocked(std::move(item));
    queued_commits_[inode.value()] = QueuedCommit{};
    NoteUnsettledLocked(inode.value());
    return true;
  }

  std::optional<Result<CommitReply>> TakeQueuedCommit(InodeId inode, bool soon) override {
    for (int round = 0;; ++round) {
      Status flushed;
      if (round > 0) flushed = FlushChanges(false);
      std::unique_lock lock(dl_mu_);
      auto it = queued_commits_.find(inode.value());
      if (it == queued_commits_.end()) return std::nullopt;
      if (round == 0 && soon && !it->second.answer) {
        // The sender goes within kFlushLinger: more commits share its batch.
        answered_cv_.wait_for(lock, kQueuedCommitWait, [&] {
          auto q = queued_commits_.find(inode.value());
          return q == queued_commits_.end() || q->second.answer.has_value();
        });
        it = queued_commits_.find(inode.value());
        if (it == queued_commits_.end()) return std::nullopt;
      }
      if (it->second.answer || round > 0) {
        std::optional<Result<CommitReply>> out = std::move(it->second.answer);
        queued_commits_.erase(it);
        if (!out) {  // not answered: the batch that carried it failed as a whole
          out = flushed.ok() ? Internal("queued commit of inode " + inode.ToString() +
                                        " was not answered")
                             : flushed;
        }
        return out;
      }
    }
  }

  Status CreateError(InodeId inode) override {
    std::lock_guard lock(dl_mu_);
    auto it = create_errors_.find(inode.value());
    return it == create_errors_.end() ? OkStatus() : it->second;
  }

  bool GiveBackDirLease(InodeId dir, SessionId session) override {
    {
      std::lock_guard lock(dl_mu_);
      // No more creates there from now; a grant on its way is not installed (dir_gen_).
      const bool known = held_dirs_.erase(dir.value()) != 0 || asking_.count(dir.value()) != 0;
      ++dir_gen_;
      // Its files are another session's to see from now on (a new lease does not make them
      // this client's alone again).
      std::erase_if(local_files_, [&](const auto& kv) { return kv.second == dir.value(); });
      if (!known) return false;
    }
    Status flushed = FlushChanges(false);
    if (!flushed.ok()) {
      Logger("client")->warn("dir lease give-back dir={}: {}", dir.value(), flushed.ToString());
    }
    ForgetDir(dir);
    Status returned = ReturnLease(dir, session);
    Logger("client")->debug("dir lease given back dir={} status={}", dir.value(),
                            returned.ToString());
    return true;
  }

 private:
  using SteadyClock = std::chrono::steady_clock;

  // Points wire calls at the metadata wire a reply named (OpenSession, KeepAlive): a new pool
  // when the port or token changed (the server restarted), none when it serves no wire. A new
  // pool, or a new session (`fresh`), tries the wire at once again.
  void FollowWire(uint64_t port, uint64_t instance, bool fresh) {
    if (!use_wire_) return;
    std::lock_guard lock(wire_mu_);
    if (port == 0 || port > UINT16_MAX) {
      wire_pool_.reset();
      return;
    }
    if (wire_pool_ && wire_pool_->port() == port && wire_pool_->instance() == instance) {
      if (fresh) {
        wire_retry_at_ = {};
        wire_backoff_ = std::chrono::milliseconds(500);
      }
      return;
    }
    wire_pool_ = std::make_shared<wire::ConnectionPool>(host_, static_cast<uint16_t>(port),
                                                        instance);
    wire_retry_at_ = {};
    wire_backoff_ = std::chrono::milliseconds(500);
  }

  // Whether a call may be sent again after a transport failure whose reply was lost. kYes for
  // reads and for calls whose repetition changes nothing; kNo for namespace and lock changes,
  // which a repeat after a lost reply would answer wrongly (EEXIST, ENOENT) unless the request
  // carries a RequestTag (then the server knows the repeat and answers from the first attempt);
  // kBrief for calls safe to repeat that must not wait out an outage: repeated within one RPC
  // timeout only.
  enum class Retry { kNo, kYes, kBrief };
  static Retry ReadOnlyRetry(int flags) {
    // A read-only open takes no lease; a repeat at worst counts one open twice in a session.
    return (flags & O_ACCMODE) == O_RDONLY ? Retry::kYes : Retry::kNo;
  }

  // Tags `req` (when its type has a RequestTag and this client holds a session) with the
  // session and a new id, retry unset. Returns whether it did. A ReleaseBatch takes one id per
  // item (the server names item i's change tag.id + i), so ids of later calls do not meet them.
  template <class Req>
  bool TagRequest(Req& req) {
    if constexpr (requires { req.mutable_tag(); }) {
      const uint64_t session = session_.load(std::memory_order_acquire);
      if (session == 0) return false;
      uint64_t ids = 1;
      if constexpr (std::is_same_v<Req, pb::ReleaseBatchRequest>) {
        ids = std::max<uint64_t>(1, static_cast<uint64_t>(req.items_size()));
      }
      pb::RequestTag* tag = req.mutable_tag();
      tag->set_session(session);
      tag->set_id(next_tag_id_.fetch_add(ids, std::memory_order_relaxed));
      tag->set_retry(false);
      return true;
    } else {
      return false;
    }
  }
  // Marks a tagged `req` as a re-send: an earlier send of it may have been applied.
  template <class Req>
  static void MarkResent(Req& req) {
    if constexpr (requires { req.mutable_tag(); }) {
      if (req.has_tag()) req.mutable_tag()->set_retry(true);
    }
  }

  // One warn line when calls start waiting for an unreachable metadata server, one info line
  // when one gets through again; nothing per attempt.
  void NoteUnreachable() {
    bool was = false;
    if (!unreachable_.compare_exchange_strong(was, true, std::memory_order_acq_rel)) return;
    unreachable_since_ns_.store(SteadyClock::now().time_since_epoch().count(),
                                std::memory_order_relaxed);
    Logger("client")->warn("metadata server unreachable: waiting up to {} s address={}",
                           std::chrono::duration_cast<std::chrono::seconds>(outage_wait_).count(),
                           address_);
  }
  void NoteReachable() {
    if (!unreachable_.load(std::memory_order_relaxed)) return;
    if (!unreachable_.exchange(false, std::memory_order_acq_rel)) return;
    const auto since = SteadyClock::time_point(
        SteadyClock::duration(unreachable_since_ns_.load(std::memory_order_relaxed)));
    Logger("client")->info(
        "metadata server reachable again after {} ms address={}",
        std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - since).count(),
        address_);
  }

  // One metadata call. Every attempt waits for the metadata server to be reachable instead of
  // failing at once (wait_for_ready), so a restart of aquifer-meta is a pause, not a burst of
  // EIO; the channel finds a restarted server within about a second (reconnect backoff 100 ms to
  // 1 s).
  // Calls that wait out an outage (the client holds a session, and the call is tagged or
  // Retry::kYes): after UNAVAILABLE (the server is down, or the call went out on a connection its
  // death broke), DEADLINE_EXCEEDED or a lost metadata-wire connection, the call is sent again
  // after 10, 20, 40... ms (at most 1 s apart), a tagged one with retry set, until outage_wait_
  // has passed since the call began; each attempt's deadline is min(timeout_, what is left).
  // Other calls have one deadline, timeout_: within it a Retry::kYes or kBrief call is sent again
  // after UNAVAILABLE, a Retry::kNo call without a tag is sent once.
  // A call that gRPC's synchronous server refused for want of a thread (RESOURCE_EXHAUSTED with
  // this message, grpc PR #16356) never reached the service, so it is sent again for every
  // method, within the call's time.
  template <class Req, class Resp>
  grpc::Status Call(grpc::Status (pb::MetaService::Stub::*method)(grpc::ClientContext*,
                                                                    const Req&, Resp*),
                    Req& req, Resp* resp, Retry retry) {
    if constexpr (SendsCreatesFirst<Req>()) {
      // This client's local creates reach the server before anything it asks next.
      if (pending_count_.load(std::memory_order_relaxed) != 0) (void)FlushChanges(false);
    }
    const bool tagged = TagRequest(req);
    const bool repeatable = tagged || retry != Retry::kNo;
    const bool waits = (tagged || retry == Retry::kYes) &&
                       session_.load(std::memory_order_relaxed) != 0;
    const auto end = SteadyClock::now() + (waits ? outage_wait_ : timeout_);
    const std::optional<wire::MetaMethod> wire_id = WireMethodOf(method);
    std::chrono::milliseconds backoff(10);
    calls_.fetch_add(1, std::memory_order_relaxed);
    for (int attempt = 1;; ++attempt) {
      const auto attempt_end = std::min(SteadyClock::now() + timeout_, end);
      std::optional<grpc::Status> wired;
      if (wire_id) {
        Status lost;
        wired = WireCall(*wire_id, req, resp, attempt_end, &lost);
        // Lost after it went out: it may have been applied. One that may not be repeated fails
        // as gRPC reports a broken connection; else gRPC sends it again now.
        if (!lost.ok() && !repeatable) {
          wired = grpc::Status(grpc::StatusCode::UNAVAILABLE, "metadata wire: " + lost.message());
        } else if (!lost.ok()) {
          resp->Clear();
          MarkResent(req);
        }
      }
      grpc::Status st;
      if (wired) {
        st = *wired;
      } else {
        if (waits && channel_->GetState(false) == GRPC_CHANNEL_TRANSIENT_FAILURE) {
          NoteUnreachable();  // now rather than when this attempt's deadline passes
        }
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + (attempt_end - SteadyClock::now()));
        ctx.set_wait_for_ready(true);
        st = (stub_.get()->*method)(&ctx, req, resp);
      }
      // A sync server out of threads refuses a call before any handler runs it: repeating it
      // is safe for every call, namespace changes included.
      const bool refused_unrun = st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
                                 st.error_message() == kThreadpoolExhausted;
      const bool unreachable =
          st.error_code() == grpc::StatusCode::UNAVAILABLE ||
          (waits && st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
      if (st.error_code() != grpc::StatusCode::UNAVAILABLE &&
          st.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
        NoteReachable();  // the server answered
      }
      const bool repeat = refused_unrun || (unreachable && repeatable);
      if (!repeat) return st;
      if (SteadyClock::now() + backoff >= end) {
        if (!waits || !unreachable) return st;
        return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            "unreachable for " + std::to_string(outage_wait_.count()) +
                                " ms (" + std::to_string(attempt) +
                                " attempts): " + st.error_message());
      }
      // Waiting: a full attempt's deadline passed, or a re-send failed too (one broken
      // connection that the next attempt replaces is not an outage worth a log line).
      if (unreachable && waits &&
          (attempt > 1 || st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)) {
        NoteUnreachable();
      }
      resp->Clear();
      MarkResent(req);
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
    }
  }

  // One call on the metadata wire, when this client uses it and knows the server's endpoint,
  // with `deadline` for the whole exchange.
  // Returns nothing when the call should go over gRPC instead: no endpoint, no connection (the
  // server may be restarting: gRPC waits for it; the wire is tried again 1 s later, doubling
  // up to 64 s while connections keep failing), a method the server does not carry, or a
  // connection lost after the call went out (then *lost holds why: the caller decides whether
  // it may be sent again).
  template <class Req, class Resp>
  std::optional<grpc::Status> WireCall(wire::MetaMethod method, const Req& req, Resp* resp,
                                       SteadyClock::time_point deadline, Status* lost) {
    std::shared_ptr<wire::ConnectionPool> pool;
    {
      std::lock_guard lock(wire_mu_);
      if (!wire_pool_ || SteadyClock::now() < wire_retry_at_) return std::nullopt;
      pool = wire_pool_;
    }
    std::string payload;
    if (!req.SerializeToString(&payload) || payload.size() > wire::kMaxCallPayloadBytes) {
      return std::nullopt;
    }
    bool reused = false;
    Result<wire::Conn> conn = pool->Acquire(deadline, &reused);
    if (!conn.ok()) {
      // 1 s after the first failure, doubling up to 64 s while they go on (a firewall that
      // drops packets costs a connect timeout per try); a new session resets it.
      std::lock_guard lock(wire_mu_);
      wire_backoff_ = std::min(wire_backoff_ * 2, std::chrono::milliseconds(64000));
      wire_retry_at_ = SteadyClock::now() + wire_backoff_;
      return std::nullopt;
    }
    auto lost_after_send = [&](const Status& s) -> std::optional<grpc::Status> {
      conn->Close();
      pool->DropIdle();
      *lost = s;
      return std::nullopt;
    };
    const auto head = wire::EncodeCall({method, static_cast<uint32_t>(payload.size())});
    iovec iov[2] = {{const_cast<std::byte*>(head.data()), head.size()},
                    {payload.data(), payload.size()}};
    Status s = wire::SendAll(*conn, iov, 2, deadline);
    if (!s.ok()) return lost_after_send(s);
    std::array<std::byte, wire::kCallHeaderBytes> frame;
    s = wire::RecvAll(*conn, frame, deadline, /*wait_first=*/true);
    if (!s.ok()) return lost_after_send(s);
    Result<wire::CallReplyHeader> reply = wire::DecodeCallReply(frame);
    if (!reply.ok()) {
      conn->Close();
      return grpc::Status(grpc::StatusCode::INTERNAL, reply.status().message());
    }
    std::string bytes(reply->payload_bytes, '\0');
    s = wire::RecvAll(*conn, std::as_writable_bytes(std::span<char>(bytes.data(), bytes.size())),
                      deadline);
    if (!s.ok()) return lost_after_send(s);
    pool->Release(std::move(*conn));
    switch (reply->outcome) {
      case wire::CallOutcome::kUnknownMethod:
        return std::nullopt;
      case wire::CallOutcome::kBadRequest:
        return grpc::Status(grpc::StatusCode::INTERNAL,
                            "metadata wire: the server could not parse the request");
      case wire::CallOutcome::kOk:
        break;
    }
    if (!resp->ParseFromString(bytes)) {
      return grpc::Status(grpc::StatusCode::INTERNAL, "metadata wire: unparsable response");
    }
    return grpc::Status::OK;
  }

  template <class Req>
  Result<Attributes> AttrCall(grpc::Status (pb::MetaService::Stub::*method)(
                                  grpc::ClientContext*, const Req&, pb::AttrResponse*),
                              Req& req, Retry retry) {
    pb::AttrResponse resp;
    Status s = FromRpc(Call(method, req, &resp, retry), &resp);
    if (!s.ok()) return s;
    RememberDirs(resp.dir_attrs());
    KeepCapability(resp.attr());
    Attributes attr = FromPb(resp.attr());
    RememberDir(attr);
    return attr;
  }

  Status Remove(grpc::Status (pb::MetaService::Stub::*method)(
                    grpc::ClientContext*, const pb::RemoveRequest&, pb::RemoveResponse*),
                InodeId parent, std::string_view name, const Caller& c) {
    // An untagged repeat after a lost reply would say ENOENT; a tagged one is sent again.
    const Retry retry = Retry::kNo;
    pb::RemoveRequest req;
    req.set_parent(parent.value());
    req.set_name(std::string(name));
    ToPb(c, req.mutable_caller());
    pb::RemoveResponse resp;
    Status s = FromRpc(Call(method, req, &resp, retry), &resp);
    if (!s.ok()) {
      names_.Forget(parent);
      return s;
    }
    names_.Removed(parent, name);
    RememberDirs(resp.dir_attrs());
    return s;
  }

  void NoteCreated(InodeId parent, std::string_view name, const Status& s) {
    if (s.ok()) {
      names_.Added(parent, name);
    } else {
      names_.Forget(parent);  // failed, or an outcome this client cannot know
    }
  }

  // --- directory attribute cache ---------------------------------------------------------------
  // Directory attributes from replies (GetAttr, Lookup, SetAttr, and the dir_attrs of namespace
  // changes) answer GetAttr while younger than attr_cache_ttl_ (the mount's attr_timeout: the
  // kernel would have cached them as long, had a local change not invalidated them). A reply
  // replaces an entry only if its ctime is not older, so a slow reply cannot undo a newer one.
  struct DirEntryCache {
    Attributes attr;
    SteadyClock::time_point at;
  };
  static constexpr size_t kMaxCachedDirs = 1 << 16;

  static bool Older(const Timestamp& a, const Timestamp& b) {
    return a.sec < b.sec || (a.sec == b.sec && a.nsec < b.nsec);
  }
  void RememberDir(const Attributes& attr) {
    if (attr_cache_ttl_.count() <= 0 || !S_ISDIR(attr.mode)) return;
    std::lock_guard lock(dir_mu_);
    if (dirs_.size() >= kMaxCachedDirs) dirs_.clear();
    auto [it, added] = dirs_.try_emplace(attr.inode.value(), DirEntryCache{attr, SteadyClock::now()});
    if (!added && !Older(attr.ctime, it->second.attr.ctime)) {
      it->second = DirEntryCache{attr, SteadyClock::now()};
    }
  }
  // Chunk capabilities handed to this client credential (docs/design.md "Chunk capabilities"),
  // per inode: a read and a write slot, so a read capability from a lookup never hides the
  // write capability an open gave. At most kMaxHeldCapabilities inodes, then the cache is
  // cleared (each is asked for again when next needed).
  static constexpr size_t kMaxHeldCapabilities = 1 << 16;
  struct HeldCapability {
    std::string bytes;
    uint64_t expiry_unix_seconds = 0;
    // Asked for again from then on: kCapabilityRenewMargin before expiry, or a quarter of its
    // life when it was handed out with less than four margins (a short --capability-lifetime-s).
    uint64_t renew_at_unix_seconds = 0;
  };
  struct HeldCapabilities {
    HeldCapability read, write;
  };
  static uint64_t NowUnixSeconds() {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count());
  }
  // Keeps the capability a reply's attributes carried, when it has the right shape and names
  // that inode (a server's bytes are checked before they are trusted even for caching).
  void KeepCapability(const pb::Attr& a) {
    if (!needs_capabilities_ || a.capability().empty()) return;
    Result<aquifer::Capability> cap = DecodeCapability(a.capability());
    if (!cap.ok() || cap->inode.value() != a.ino()) return;
    Remember(*cap, a.capability());
  }
  void Remember(const aquifer::Capability& cap, const std::string& bytes) {
    std::lock_guard lock(caps_mu_);
    if (caps_.size() >= kMaxHeldCapabilities && !caps_.count(cap.inode.value())) caps_.clear();
    HeldCapabilities& held = caps_[cap.inode.value()];
    HeldCapability& slot = cap.mode == CapabilityMode::kWrite ? held.write : held.read;
    if (cap.expiry_unix_seconds < slot.expiry_unix_seconds) return;  // keep the longer-lived
    const uint64_t now_s = NowUnixSeconds();
    const uint64_t life = cap.expiry_unix_seconds > now_s ? cap.expiry_unix_seconds - now_s : 0;
    const uint64_t margin =
        std::min<uint64_t>(static_cast<uint64_t>(kCapabilityRenewMargin.count()), life / 4);
    slot.bytes = bytes;
    slot.expiry_unix_seconds = cap.expiry_unix_seconds;
    slot.renew_at_unix_seconds = cap.expiry_unix_seconds - margin;
  }

  void RememberDirs(const google::protobuf::RepeatedPtrField<pb::Attr>& attrs) {
    for (const pb::Attr& a : attrs) {
      HeldDirUnknown(InodeId(a.ino()));  // a change this client sent changed it
      RememberDir(FromPb(a));
    }
  }
  void ForgetDir(InodeId inode) {
    HeldDirUnknown(inode);
    if (attr_cache_ttl_.count() <= 0) return;
    std::lock_guard lock(dir_mu_);
    dirs_.erase(inode.value());
  }
  void ForgetAllDirs() {
    std::lock_guard lock(dir_mu_);
    dirs_.clear();
  }
  std::optional<Attributes> CachedDir(InodeId inode) {
    if (attr_cache_ttl_.count() <= 0) return std::nullopt;
    std::lock_guard lock(dir_mu_);
    auto it = dirs_.find(inode.value());
    if (it == dirs_.end()) return std::nullopt;
    if (SteadyClock::now() - it->second.at >= attr_cache_ttl_) {
      dirs_.erase(it);
      return std::nullopt;
    }
    return it->second.attr;
  }

  // --- extended-attribute absence cache ----------------------------------------------------
  // The kernel asks for security.capability before every write(2) to a FUSE file (to drop file
  // capabilities as it drops the setuid bit; FUSE never marks inodes S_NOSEC, so the answer is
  // not kept): without this cache, one metadata round trip per write. Absences learnt from
  // replies (ENODATA for a name, an empty ListXattr, a Create that made the inode) answer
  // GetXattr with kNoData while younger than attr_cache_ttl_, the bound the kernel puts on the
  // mode bits it checks for the same purpose. Another client's SetXattr is seen once the entry
  // ages out; this client's SetXattr/RemoveXattr drop the inode's entry before and after the
  // call, and bump xattr_changes_ so that a reply sent before the change is not remembered.
  struct XattrAbsence {
    SteadyClock::time_point at;
    bool all = false;                // no extended attribute at all
    std::vector<std::string> names;  // these names are absent
  };
  static constexpr size_t kMaxXattrAbsences = 1 << 16;
  static constexpr size_t kMaxAbsentNamesPerInode = 8;

  // Records that `inode` has no attribute `name` (empty: none at all), unless an xattr change by
  // this client started since `epoch` was read.
  void RememberNoXattrs(InodeId inode, std::string_view name, uint64_t epoch) {
    if (attr_cache_ttl_.count() <= 0 || (!name.empty() && !AbsenceCacheable(name))) return;
    std::lock_guard lock(xattr_mu_);
    if (xattr_changes_.load() != epoch) return;
    if (absent_xattrs_.size() >= kMaxXattrAbsences) absent_xattrs_.clear();
    XattrAbsence& a = absent_xattrs_[inode.value()];
    const auto now = SteadyClock::now();
    if (now - a.at >= attr_cache_ttl_) a = XattrAbsence{};
    a.at = now;
    if (name.empty()) {
      a.all = true;
      a.names.clear();
    } else if (!a.all && a.names.size() < kMaxAbsentNamesPerInode &&
               std::find(a.names.begin(), a.names.end(), name) == a.names.end()) {
      a.names.emplace_back(name);
    }
  }
  // Only user.* and security.* absences are kept: whether they exist does not depend on who
  // asks (the kernel checks user.* read access itself). trusted.* exist only for root (another
  // caller is told ENODATA), and aquifer.layout is virtual (computed by the metadata server,
  // never stored or listed): those are always asked for.
  static bool AbsenceCacheable(std::string_view name) {
    return name.starts_with("user.") || name.starts_with("security.");
  }
  bool KnownAbsentXattr(InodeId inode, std::string_view name) {
    if (attr_cache_ttl_.count() <= 0 || !AbsenceCacheable(name)) return false;
    std::lock_guard lock(xattr_mu_);
    auto it = absent_xattrs_.find(inode.value());
    if (it == absent_xattrs_.end()) return false;
    if (SteadyClock::now() - it->second.at >= attr_cache_ttl_) {
      absent_xattrs_.erase(it);
      return false;
    }
    const XattrAbsence& a = it->second;
    return a.all || std::find(a.names.begin(), a.names.end(), name) != a.names.end();
  }
  void ForgetXattrAbsences(InodeId inode) {
    xattr_changes_.fetch_add(1);
    std::lock_guard lock(xattr_mu_);
    absent_xattrs_.erase(inode.value());
  }
  void ForgetAllXattrAbsences() {
    xattr_changes_.fetch_add(1);
    std::lock_guard lock(xattr_mu_);
    absent_xattrs_.clear();
  }
  template <typename Fn>
  Status ChangingXattrs(InodeId inode, Fn&& call) {
    ForgetXattrAbsences(inode);
    Status s = call();
    ForgetXattrAbsences(inode);  // drops what a GetXattr answered during the call
    return s;
  }

  Status XattrCall(grpc::Status (pb::MetaService::Stub::*method)(
                       grpc::ClientContext*, const pb::XattrRequest&, pb::XattrResponse*),
                   InodeId inode, std::string_view name, std::string_view value, int flags,
                   const Caller& c, pb::XattrResponse* resp, Retry retry) {
    pb::XattrRequest req;
    req.set_ino(inode.value());
    req.set_name(std::string(name));
    req.set_value(std::string(value));
    req.set_flags(static_cast<uint32_t>(flags));
    ToPb(c, req.mutable_caller());
    return FromRpc(Call(method, req, resp, retry), resp);
  }

  Status SessionCall(grpc::Status (pb::MetaService::Stub::*method)(
                         grpc::ClientContext*, const pb::SessionRequest&, pb::StatusResponse*),
                     SessionId session, Retry retry) {
    pb::SessionRequest req;
    req.set_session(session.value());
    pb::StatusResponse resp;
    return FromRpc(Call(method, req, &resp, retry), &resp);
  }

  Status LockCall(grpc::Status (pb::MetaService::Stub::*method)(
                      grpc::ClientContext*, const pb::LockRequest&, pb::LockResponse*),
                  InodeId inode, SessionId session, uint64_t owner, const LockRange& range,
                  bool flock, pb::LockResponse* resp, Retry retry) {
    pb::LockRequest req;
    req.set_ino(inode.value());
    req.set_session(session.value());
    req.set_owner(owner);
    req.set_type(static_cast<uint32_t>(range.type));
    req.set_start(range.start);
    req.set_end(range.end);
    req.set_pid(range.pid);
    req.set_flock(flock);
    return FromRpc(Call(method, req, resp, retry), resp);
  }

  const std::chrono::milliseconds timeout_;      // deadline of one attempt
  const std::chrono::milliseconds outage_wait_;  // budget of a call that waits out an outage
  std::chrono::milliseconds attr_cache_ttl_;
  const bool use_wire_;
  const std::string address_;  // host:port of the metadata server, for log lines
  std::string host_;
  // The session of the last successful OpenSession (0: none yet, or closed): the tags' session.
  std::atomic<uint64_t> session_{0};
  std::atomic<uint64_t> cache_session_{0};  // named in Lookup, GetAttr, ReadDir (cache leases)
  // Answered under cache leases without a round trip (logged at CloseSession).
  std::atomic<uint64_t> local_absent_{0}, local_found_{0}, local_getattrs_{0}, listings_{0};
  std::atomic<uint64_t> calls_{0};  // every call sent (retries of one call count once)
  std::atomic<uint64_t> next_tag_id_{1};  // the next RequestTag id; never reused
  // Whether a call found the server unreachable and none got through since, and since when
  // (steady clock, ns): one log line per outage.
  std::atomic<bool> unreachable_{false};
  std::atomic<int64_t> unreachable_since_ns_{0};
  std::shared_ptr<grpc::Channel> channel_;
  std::mutex wire_mu_;  // guards the three below
  std::shared_ptr<wire::ConnectionPool> wire_pool_;  // from the last OpenSession; null: gRPC
  std::chrono::steady_clock::time_point wire_retry_at_;  // no wire call before this
  std::chrono::milliseconds wire_backoff_{500};         // doubled by each failed connection
  std::unique_ptr<pb::MetaService::Stub> stub_;
  std::atomic<bool> batch_release_{true};  // false once the server said UNIMPLEMENTED
  std::mutex xattr_mu_;  // guards absent_xattrs_
  std::unordered_map<uint64_t, XattrAbsence> absent_xattrs_;
  std::atomic<uint64_t> xattr_changes_{0};  // SetXattr/RemoveXattr calls started or ended
  std::mutex dir_mu_;  // guards dirs_
  std::unordered_map<uint64_t, DirEntryCache> dirs_;
  // Complete directory name lists under the cache session's leases (dir_names.h); the recall
  // epoch of the last WaitRecall answer (a change drops every cache).
  static constexpr uint32_t kListPage = 1024;
  static constexpr size_t kMaxListedNames = 1 << 16;
  DirNames names_;
  // A client credential's calls need chunk capabilities; a cluster-key holder's do not.
  const bool needs_capabilities_ = ProcessClientIdentity().has_value();
  std::mutex caps_mu_;  // guards caps_
  std::unordered_map<uint64_t, HeldCapabilities> caps_;
  std::atomic<uint64_t> seen_recall_epoch_{0};

  // Exclusive directory leases: the directories this client holds the lease on (their
  // attributes as this client changed them, and the layout a file made there gets), inode
  // numbers reserved for it [ino_next_, ino_end_), the creates not sent yet (in order), what
  // each sent create answered, and directories whose lease was refused (not asked again for
  // kDirLeaseRetry). dl_mu_ is a leaf; flush_mu_ is taken before it and held across the
  // ChangeBatch call, so batches go out in order.
  static constexpr size_t kMaxChangeBatchItems = 1024;  // as the server's
  static constexpr uint32_t kInodesPerReservation = 1024;
  static constexpr size_t kMaxKeptCreateResults = 1 << 16;
  static constexpr std::chrono::milliseconds kFlushLinger{2};
  static constexpr std::chrono::seconds kDirLeaseRetry{1};
  // A held directory's attributes are this client's to answer GetAttr with while `known`: the
  // server's (from the grant, or a GetAttr answered with no local change of it in between)
  // plus the local changes since. A change of it this client sent to the server (a chmod, a
  // directory renamed in or out, anything whose reply carries its attributes) makes them
  // unknown until the next GetAttr, which sends the batch first.
  struct HeldDir {
    Attributes attr;
    Layout file_layout;
    bool known = true;
    uint64_t changes = 0;  // local changes of it so far
  };
  // A local change in held directory `dir` (dl_mu_ held): its times move to `now`.
  static void Touch(HeldDir& dir, Timestamp now) {
    dir.changes++;
    dir.attr.mtime = std::max(dir.attr.mtime, now);
    dir.attr.ctime = std::max(dir.attr.ctime, now);
  }
  // When `inode` has a commit queued and not answered: sends the batch (waiting for it), so the
  // attributes kept for it are the committed ones. True when it sent.
  bool AwaitQueuedCommit(InodeId inode) {
    if (unsettled_count_.load(std::memory_order_relaxed) == 0) return false;
    {
      std::lock_guard lock(dl_mu_);
      if (!unsettled_.count(inode.value())) return false;
    }
    (void)FlushChanges(false);  // its errors are the handle's (TakeQueuedCommit)
    return true;
  }
  // Where it goes others may see it: `found`'s inode (all of them when unknown) no longer
  // counts as a file only this client knows.
  void NotLocalAnyMore(const DirNames::Found& found) {
    std::lock_guard lock(dl_mu_);
    if (found.attr) {
      local_files_.erase(found.attr->inode.value());
    } else {
      local_files_.clear();
    }
  }
  // No directory is held any more (dl_mu_ held): the files made in them are no longer known to
  // be this client's alone.
  void DropHeldDirsLocked() {
    held_dirs_.clear();
    local_files_.clear();
  }
  std::atomic<bool> dir_leases_on_{false};
  std::mutex flush_mu_;
  std::mutex dl_mu_;
  std::condition_variable flush_cv_;
  std::condition_variable answered_cv_;  // a batch was answered
  static constexpr std::chrono::milliseconds kQueuedCommitWait{50};
  bool flusher_stop_ = false;
  std::thread flusher_;
  std::unordered_map<uint64_t, HeldDir> held_dirs_;
  std::unordered_map<uint64_t, SteadyClock::time_point> refused_dirs_;
  std::unordered_map<uint64_t, int> asking_;  // AcquireDirLease calls in flight, by directory
  uint64_t dir_gen_ = 0;                       // give-backs so far
  uint64_t ino_next_ = 0, ino_end_ = 0;
  // Write versions reserved with them [ver_next_, ver_end_): a file created for write takes one
  // and writes at once (its create's batch answers with nothing it needs).
  uint64_t ver_next_ = 0, ver_end_ = 0;
  uint64_t ino_generation_ = 0;  // the generation inodes of the reserved numbers get
  uint64_t reserved_session_ = 0;  // the session the numbers were reserved for
  std::vector<pb::ChangeBatchItem> pending_;
  std::atomic<size_t> pending_count_{0};  // created locally and not answered yet
  std::unordered_map<uint64_t, OpenReply> created_leases_;
  // Files created here whose directory this client has held since, by inode: their parent
  // (QueueCommit's rule). A give-back of the directory, a rename or link of the file through the
  // server, or losing the held directories drops them.
  std::unordered_map<uint64_t, uint64_t> local_files_;
  // Commits queued by QueueCommit and not taken yet: once its batch was answered, the answer
  // (names_ keeps the answered attributes: DirNames::Refresh).
  struct QueuedCommit {
    std::optional<Result<CommitReply>> answer;
  };
  std::unordered_map<uint64_t, QueuedCommit> queued_commits_;
  std::unordered_map<uint64_t, Status> create_errors_;
  Status change_error_;  // the first batched change refused since the last TakeChangeError
  std::vector<InodeId> failed_dirs_;
  std::vector<std::pair<InodeId, std::string>> refused_names_;
  std::function<void(InodeId, const std::string&)> on_refused_;  // set before any change
  std::function<void(InodeId)> on_attrs_stale_;                    // set before any change
  // Files SetAttrLocally answered while a commit or setattr of theirs was still queued: the
  // kernel is told to ask again once they are all answered (dl_mu_).
  std::unordered_set<uint64_t> stale_replies_;
  std::atomic<uint64_t> local_creates_{0}, local_changes_{0}, batches_{0};
  // Queued commits and setattrs not answered yet, by inode (AwaitQueuedCommit), and how many.
  std::unordered_map<uint64_t, uint32_t> unsettled_;
  std::atomic<uint64_t> unsettled_count_{0};
  void NoteUnsettledLocked(uint64_t ino) {
    ++unsettled_[ino];
    unsettled_count_.fetch_add(1, std::memory_order_relaxed);
  }
  void SettledLocked(uint64_t ino) {
    auto u = unsettled_.find(ino);
    if (u == unsettled_.end()) return;
    if (--u->second == 0) unsettled_.erase(u);
    unsettled_count_.fetch_sub(1, std::memory_order_relaxed);
  }

  // Holds (or is granted now) the exclusive lease on `dir` with inode numbers to spare.
  bool EnsureDirLease(InodeId dir, const Caller& c) {
    const uint64_t session = session_.load(std::memory_order_relaxed);
    {
      std::lock_guard lock(dl_mu_);
      if (reserved_session_ != session) {  // numbers of another session are not ours to use
        ino_next_ = ino_end_ = 0;
        ver_next_ = ver_end_ = 0;
        DropHeldDirsLocked();
        reserved_session_ = session;
      }
      const bool held = held_dirs_.count(dir.value()) != 0;
      if (held && ino_next_ < ino_end_) return true;
      auto refused = refused_dirs_.find(dir.value());
      if (!held && refused != refused_dirs_.end()) {
        if (SteadyClock::now() < refused->second) return false;
        refused_dirs_.erase(refused);
      }
    }
    uint64_t gen;
    {
      std::lock_guard lock(dl_mu_);
      gen = dir_gen_;
      ++asking_[dir.value()];
    }
    pb::DirLeaseRequest req;
    req.set_ino(dir.value());
    req.set_session(session);
    // Numbers only when few are left (a refused lease is asked again, at most once a second).
    {
      std::lock_guard lock(dl_mu_);
      if (ino_end_ - ino_next_ < kInodesPerReservation / 8) {
        req.set_want_inodes(kInodesPerReservation);
      }
    }
    ToPb(c, req.mutable_caller());
    pb::DirLeaseResponse resp;
    Status s =
        FromRpc(Call(&pb::MetaService::Stub::AcquireDirLease, req, &resp, Retry::kYes), &resp);
    std::unique_lock lock(dl_mu_);
    if (--asking_[dir.value()] == 0) asking_.erase(dir.value());
    if (s.ok() && resp.granted() && gen != dir_gen_) {
      // A give-back ran while this was asked: the grant may postdate it, and the caller that
      // recalled the lease must not wait for it to be broken. Given back at once, not used.
      lock.unlock();
      (void)ReturnLease(dir, SessionId(session));
      return false;
    }
    if (!s.ok()) {
      if (refused_dirs_.size() > 4096) refused_dirs_.clear();
      refused_dirs_[dir.value()] = SteadyClock::now() + kDirLeaseRetry;
      return false;
    }
    if (reserved_session_ != session) return false;
    // Only a newer reservation replaces the one in use: two leases asked at once (two writers
    // in two new directories) may each bring numbers, and their answers may come in either
    // order. Numbers must be taken in order (the server refuses one at or below the last it
    // saw used, and then collects its chunks), so going back to the older range after using
    // the newer one would fail those files' creates and writes.
    if (resp.ino_count() > 0 && resp.ino_first() >= ino_end_) {
      ino_next_ = resp.ino_first();
      ino_end_ = resp.ino_first() + resp.ino_count();
      ino_generation_ = resp.generation();
      ver_next_ = resp.version_first();
      ver_end_ = resp.version_count() > 0 ? resp.version_first() + resp.version_count() : 0;
    }
    if (!resp.granted()) {
      if (refused_dirs_.size() > 4096) refused_dirs_.clear();
      refused_dirs_[dir.value()] = SteadyClock::now() + kDirLeaseRetry;
      return held_dirs_.count(dir.value()) != 0 && ino_next_ < ino_end_;
    }
    HeldDir& h = held_dirs_[dir.value()];
    if (h.attr.inode.value() == 0) h.attr = FromPb(resp.dir_attr());
    h.file_layout.k = resp.file_layout().k();
    h.file_layout.m = resp.file_layout().m();
    h.file_layout.unit_bytes = resp.file_layout().unit_bytes();
    h.file_layout.pg_count = resp.file_layout().pg_count();
    return ino_next_ < ino_end_;
  }

  // The attributes of a directory this client holds the lease on, as its creates left them.
  // Sets *changes to the held directory's local change count when its attributes are unknown
  // (the caller asks the server and passes the count to HeldDirAnswered).
  std::optional<Attributes> HeldDirAttr(InodeId dir, std::optional<uint64_t>* changes) {
    if (!dir_leases_on_.load()) return std::nullopt;
    std::lock_guard lock(dl_mu_);
    auto it = held_dirs_.find(dir.value());
    if (it == held_dirs_.end()) return std::nullopt;
    if (!it->second.known) {
      *changes = it->second.changes;
      return std::nullopt;
    }
    return it->second.attr;
  }
  // The server answered a GetAttr of held directory `dir`, asked when it had `changes` local
  // changes: its attributes are known again if it had no local change since.
  void HeldDirAnswered(InodeId dir, uint64_t changes, const Attributes& attr) {
    std::lock_guard lock(dl_mu_);
    auto it = held_dirs_.find(dir.value());
    if (it == held_dirs_.end() || it->second.changes != changes) return;
    it->second.attr = attr;
    it->second.known = true;
  }
  void HeldDirUnknown(InodeId dir) {
    if (!dir_leases_on_.load()) return;
    std::lock_guard lock(dl_mu_);
    auto it = held_dirs_.find(dir.value());
    if (it != held_dirs_.end()) it->second.known = false;
  }

  // Sends the creates kFlushLinger after the first one not sent yet.
  void FlushLoop() {
    std::unique_lock lock(dl_mu_);
    for (;;) {
      flush_cv_.wait(lock, [&] { return flusher_stop_ || !pending_.empty(); });
      if (flusher_stop_) return;
      flush_cv_.wait_for(lock, kFlushLinger, [&] { return flusher_stop_; });
      if (flusher_stop_) return;
      lock.unlock();
      AQ_FAILPOINT("client.change_batch.before_send");
      Status s = FlushChanges(false);
      (void)s;  // kept per inode
      lock.lock();
    }
  }

  // Whether a call must first send the creates made locally: every call but those that do not
  // read or change the namespace (and the batch itself).
  template <class Req>
  static constexpr bool SendsCreatesFirst() {
    return !std::is_same_v<Req, pb::ChangeBatchRequest> &&
           !std::is_same_v<Req, pb::DirLeaseRequest> &&
           !std::is_same_v<Req, pb::WaitRecallRequest> &&
           !std::is_same_v<Req, pb::ClusterMapRequest> &&
           !std::is_same_v<Req, pb::CapabilityRequest> &&
           !std::is_same_v<Req, pb::OpenSessionRequest> &&
           !std::is_same_v<Req, pb::SyncRequest>;  // FlushChanges's own (flush_mu_ held)
  }
};

}  // namespace

std::unique_ptr<MetaClient> NewGrpcMetaClient(const std::string& address,
                                              std::chrono::milliseconds timeout,
                                              std::chrono::milliseconds attr_cache_ttl,
                                              bool use_wire,
                                              std::chrono::milliseconds outage_wait) {
  return std::make_unique<GrpcMetaClient>(address, timeout, attr_cache_ttl, use_wire,
                                          outage_wait);
}

}  // namespace aquifer::client

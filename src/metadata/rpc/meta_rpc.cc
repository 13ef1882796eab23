#include "metadata/rpc/meta_rpc.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <random>
#include <set>
#include <utility>

#include "aquifer/units.h"
#include "common/capability.h"
#include "common/failpoint.h"
#include "common/logging.h"
#include "common/rpc/rpc_auth.h"
#include "common/rpc/rpc_metrics.h"
#include "metadata/rpc/client_gate.h"
#include "meta.grpc.pb.h"
#include "wire/connection.h"
#include "wire/meta_wire.h"

namespace aquifer::meta {
namespace {

namespace pb = aquifer::rpc;

void SetStatus(pb::RpcStatus* out, const Status& st) {
  out->set_code(static_cast<int32_t>(st.code()));
  if (!st.ok()) out->set_message(st.message());
}

Caller FromPb(const pb::Caller& c) {
  Caller out;
  out.uid = c.uid();
  out.gid = c.gid();
  out.groups.assign(c.groups().begin(), c.groups().end());
  out.pid = c.pid();
  return out;
}

Timespec FromPb(const pb::Timespec& t) { return Timespec{t.sec(), t.nsec()}; }

// A SetAttrRequest's changes (its valid bits and fields; not who asks, not the inode).
SetAttrArgs FromPb(const pb::SetAttrRequest& req) {
  SetAttrArgs a;
  a.valid = req.valid();
  a.mode = req.mode();
  a.uid = req.uid();
  a.gid = req.gid();
  a.size = req.size();
  a.atime = FromPb(req.atime());
  a.mtime = FromPb(req.mtime());
  a.ctime = FromPb(req.ctime());
  return a;
}

void ToPb(const Timespec& t, pb::Timespec* out) {
  out->set_sec(t.sec);
  out->set_nsec(t.nsec);
}

void ToPb(const FileLayout& l, pb::Layout* out) {
  out->set_k(l.k);
  out->set_m(l.m);
  out->set_unit_bytes(l.unit_bytes);
  out->set_pg_start(l.pg_start);
  out->set_pg_count(l.pg_count);
}

void ToPb(const Inode& n, pb::Attr* out) {
  out->set_ino(n.ino.value());
  out->set_generation(n.generation);
  out->set_mode(n.mode);
  out->set_nlink(n.nlink);
  out->set_uid(n.uid);
  out->set_gid(n.gid);
  out->set_size(n.size);
  out->set_rdev(n.rdev);
  ToPb(n.atime, out->mutable_atime());
  ToPb(n.mtime, out->mutable_mtime());
  ToPb(n.ctime, out->mutable_ctime());
  if (n.is_reg()) {
    ToPb(n.layout, out->mutable_layout());
    out->set_data_version(n.data_version);
    out->set_stripe_map_known(n.stripes.known());
    out->set_truncate_floor(n.truncate_floor);
    for (const auto& [first, last] : n.abandoned_versions) {
      out->add_abandoned_versions(first);
      out->add_abandoned_versions(last);
    }
    for (const StripeExtent& e : n.stripes.extents()) {
      out->add_stripe_map(e.begin_stripe);
      out->add_stripe_map(e.end_stripe);
      out->add_stripe_map(e.floor_version);
    }
  }
  out->set_blocks(n.blocks());
}

// Fills an AttrResponse-like message from a Result<Inode>.
template <class Resp>
void FillAttr(const Result<Inode>& r, Resp* resp) {
  SetStatus(resp->mutable_status(), r.status());
  if (r.ok()) ToPb(*r, resp->mutable_attr());
}

void ToPb(const MoveTask& t, uint64_t rate_bytes_per_s, pb::MoveTask* out) {
  out->set_id(t.id);
  out->set_pg_width(t.pg_width);
  out->set_pg_index(t.pg_index);
  out->set_position(t.position);
  out->set_from_server(t.from.value());
  out->set_to_server(t.to.value());
  out->set_kind(MoveKindName(t.kind));
  out->set_rate_limit_bytes_per_s(rate_bytes_per_s);
  out->set_map_version(t.map_version);
}

void FillAdmin(const Result<ServerAdminResult>& r, pb::ServerAdminResponse* resp) {
  SetStatus(resp->mutable_status(), r.status());
  if (!r.ok()) return;
  resp->set_positions_held(r->positions_held);
  resp->set_moves_scheduled(r->moves_scheduled);
  resp->set_moves_cancelled(r->moves_cancelled);
}

LockArgs FromPb(const pb::LockRequest& r) {
  LockArgs a;
  a.ino = InodeId(r.ino());
  a.session = SessionId(r.session());
  a.owner = r.owner();
  a.type = static_cast<LockType>(r.type());
  a.start = r.start();
  a.end = r.end();
  a.pid = r.pid();
  a.flock = r.flock();
  return a;
}

RequestTag TagOf(const pb::RequestTag& t) { return RequestTag{t.session(), t.id()}; }

// The request a handler was given, for ClientGate::Admit to confine in place before the handler
// reads it: gRPC's sync server owns the message and hands it to this one handler only.
template <class Req>
Req* Mutable(const Req* req) {
  return const_cast<Req*>(req);
}

// What an open asks for: a write when it may change data (write access or O_TRUNC).
ClientAccess OpenAccess(uint32_t flags) {
  const uint32_t acc = flags & O_ACCMODE;
  return acc != O_RDONLY || (flags & O_TRUNC) != 0 ? ClientAccess::kWrite : ClientAccess::kRead;
}

// The answer to a call ClientGate refused: its status in the reply, as handlers answer errors.
template <class Resp>
grpc::Status Refuse(const ClientGate::Call& call, Resp* resp) {
  SetStatus(resp->mutable_status(), call.status());
  return grpc::Status::OK;
}

// A chunk capability for the client credential that made this call (docs/design.md "Chunk
// capabilities"), good for kCapabilityLifetime from now; "" for a cluster-key holder (which
// needs none), for a server without a key, and for `write` asked by a read-only credential
// (the gate refused such calls already; this keeps a read-only client from ever holding one).
std::string CapabilityFor(grpc::ServerContext* ctx, InodeId ino, CapabilityMode mode,
                          std::chrono::seconds lifetime, uint64_t* expiry_unix_seconds = nullptr) {
  const std::optional<ClientIdentity> who = CallClient(ctx);
  if (!who) return "";
  const std::optional<ClusterKey> key = ProcessClusterKey();
  if (!key) return "";
  if (mode == CapabilityMode::kWrite && who->read_only) mode = CapabilityMode::kRead;
  Result<std::array<std::byte, kClientIdBytes>> id = ClientIdBytes(who->id_hex);
  if (!id.ok()) return "";  // CallClient parsed it: cannot happen
  Capability cap;
  cap.inode = ino;
  cap.mode = mode;
  cap.expiry_unix_seconds = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::seconds>(
          (std::chrono::system_clock::now() + std::min(lifetime, kCapabilityLifetime))
              .time_since_epoch())
          .count());
  cap.client_id = *id;
  if (expiry_unix_seconds != nullptr) *expiry_unix_seconds = cap.expiry_unix_seconds;
  return MintCapability(DeriveCapabilityKey(*key), cap);
}

// Puts a capability in a successful reply's `attr` when it is a regular file's.
template <class Resp>
void GrantCapability(grpc::ServerContext* ctx, Resp* resp, CapabilityMode mode,
                     std::chrono::seconds lifetime) {
  if (resp->status().code() != 0 || !resp->has_attr() || !S_ISREG(resp->attr().mode())) return;
  std::string cap = CapabilityFor(ctx, InodeId(resp->attr().ino()), mode, lifetime);
  if (!cap.empty()) resp->mutable_attr()->set_capability(std::move(cap));
}

class ServiceImpl final : public pb::MetaService::Service {
 public:
  ServiceImpl(MetadataService* svc, std::string client_registry,
              std::chrono::seconds capability_lifetime)
      : svc_(svc),
        gate_(svc, std::move(client_registry)),
        capability_lifetime_(capability_lifetime) {}

  // One tagged change as a handler runs it (docs/design.md "Metadata server restarts"). It
  // waits while a twin of the same (session, id) still runs here (the client's deadline passed
  // on a slow server and it sent the change again), so the two never both run; it opens the
  // RequestScope that records the change with its batch; and applied() says whether the change
  // is a re-send (tag.retry) of one already applied: the handler then answers from the state
  // that attempt left instead of running it twice. A record that cannot be read counts as not
  // applied: the change runs again.
  class TaggedCall {
   public:
    TaggedCall(ServiceImpl* impl, const pb::RequestTag& t)
        : impl_(impl), key_(t.session(), t.id()), scope_(TagOf(t)) {
      if (key_.first == 0 || key_.second == 0) return;
      {
        std::unique_lock lock(impl_->running_mu_);
        impl_->running_cv_.wait(lock, [&] { return !impl_->running_.count(key_); });
        impl_->running_.insert(key_);
      }
      registered_ = true;
      if (!t.retry()) return;
      Result<bool> done = impl_->svc_->Replayed(TagOf(t));
      applied_ = done.ok() && *done;
      if (applied_) {
        Logger("meta")->info("replay session={} request={}: applied before its reply was lost",
                             key_.first, key_.second);
      }
    }
    ~TaggedCall() {
      if (!registered_) return;
      {
        std::lock_guard lock(impl_->running_mu_);
        impl_->running_.erase(key_);
      }
      impl_->running_cv_.notify_all();
    }
    TaggedCall(const TaggedCall&) = delete;
    TaggedCall& operator=(const TaggedCall&) = delete;
    bool applied() const { return applied_; }

   private:
    ServiceImpl* impl_;
    std::pair<uint64_t, uint64_t> key_;
    MetadataService::RequestScope scope_;
    bool registered_ = false;
    bool applied_ = false;
  };
  // The write version a replayed open, create or commit answers with; kStale when the session
  // no longer holds the write lease.
  Result<uint64_t> ReplayedLeaseVersion(InodeId ino, SessionId session) {
    const uint64_t v = svc_->LeaseVersionFor(ino, session);
    if (v == 0) {
      return Status(Code::kStale, "the write lease of inode " + ino.ToString() +
                                      " was lost after the call was applied");
    }
    return v;
  }

  void StopRecallWaits() { svc_->StopRecallWaits(); }

  // The metadata wire's port and hello token, told to clients by OpenSession. Set before serving.
  void SetWire(uint16_t port, uint64_t instance) {
    wire_port_ = port;
    wire_instance_ = instance;
  }

  grpc::Status Lookup(grpc::ServerContext* ctx, const pb::LookupRequest* req,
                      pb::AttrResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kRead, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    // Exclusive directory leases of other sessions on what this call reads or changes are
    // given back first (docs/design.md "Exclusive directory leases").
    auto leased = svc_->BreakDirLeases({req->parent()}, req->session());
    FillAttr(svc_->Lookup(InodeId(req->parent()), req->name(), FromPb(req->caller()),
                          SessionId(req->session())),
             resp);
    // Lazy opens read with it.
    GrantCapability(ctx, resp, CapabilityMode::kRead, capability_lifetime_);
    return grpc::Status::OK;
  }
  grpc::Status GetAttr(grpc::ServerContext* ctx, const pb::GetAttrRequest* req,
                       pb::AttrResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kRead, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    auto leased = svc_->BreakDirLeases({req->ino()}, req->session());
    FillAttr(svc_->GetAttr(InodeId(req->ino()), SessionId(req->session())), resp);
    GrantCapability(ctx, resp, CapabilityMode::kRead, capability_lifetime_);
    return grpc::Status::OK;
  }
  grpc::Status SetAttr(grpc::ServerContext* ctx, const pb::SetAttrRequest* req,
                       pb::AttrResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kWrite, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    auto leased = svc_->BreakDirLeases({req->ino()}, req->tag().session());
    const SetAttrArgs a = FromPb(*req);
    TaggedCall call(this, req->tag());
    if (call.applied()) {
      FillAttr(svc_->GetAttr(InodeId(req->ino())), resp);
      return grpc::Status::OK;
    }
    FillAttr(svc_->SetAttr(InodeId(req->ino()), a, FromPb(req->caller()),
                           SessionId(req->session())),
             resp);
    return grpc::Status::OK;
  }
  // After a successful namespace change: the attributes of the directories it changed.
  template <class Resp>
  void AddDirAttrs(Resp* resp, std::initializer_list<InodeId> dirs) {
    if (resp->status().code() != 0) return;
    InodeId added[2];
    size_t n = 0;
    for (InodeId dir : dirs) {
      if (dir.value() == 0 || std::find(added, added + n, dir) != added + n) continue;
      Result<Inode> attr = svc_->GetAttr(dir);
      if (!attr.ok() || !attr->is_dir()) continue;
      ToPb(*attr, resp->add_dir_attrs());
      if (n < 2) added[n++] = dir;
    }
  }

  grpc::Status Create(grpc::ServerContext* ctx, const pb::CreateRequest* req,
                      pb::CreateResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kWrite, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    auto leased = svc_->BreakDirLeases({req->parent()}, req->tag().session());
    CreateArgs a;
    a.parent = InodeId(req->parent());
    a.name = req->name();
    a.mode = req->mode();
    a.rdev = req->rdev();
    a.exclusive = req->exclusive();
    a.session = SessionId(req->session());
    a.open_for_write = req->open_for_write();
    TaggedCall call(this, req->tag());
    if (call.applied()) {
      Result<Inode> made =
          svc_->Lookup(a.parent, a.name, FromPb(req->caller()), SessionId(req->tag().session()));
      Result<uint64_t> version = uint64_t{0};
      if (made.ok() && a.open_for_write) version = ReplayedLeaseVersion(made->ino, a.session);
      SetStatus(resp->mutable_status(), made.ok() ? version.status() : made.status());
      if (made.ok() && version.ok()) {
        ToPb(*made, resp->mutable_attr());
        resp->set_write_version(*version);
      }
      GrantCapability(ctx, resp, a.open_for_write ? CapabilityMode::kWrite : CapabilityMode::kRead,
                      capability_lifetime_);
      AddDirAttrs(resp, {a.parent});
      return grpc::Status::OK;
    }
    auto r = svc_->Create(a, FromPb(req->caller()));
    SetStatus(resp->mutable_status(), r.status());
    if (r.ok()) {
      ToPb(r->attr, resp->mutable_attr());
      resp->set_write_version(r->write_version);
      resp->set_created(r->created);
    }
    GrantCapability(ctx, resp, a.open_for_write ? CapabilityMode::kWrite : CapabilityMode::kRead,
                    capability_lifetime_);
    AddDirAttrs(resp, {a.parent});
    return grpc::Status::OK;
  }
  grpc::Status Mkdir(grpc::ServerContext* ctx, const pb::MkdirRequest* req,
                     pb::AttrResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kWrite, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    auto leased = svc_->BreakDirLeases({req->parent()}, req->tag().session());
    TaggedCall call(this, req->tag());
    if (call.applied()) {
      FillAttr(svc_->Lookup(InodeId(req->parent()), req->name(), FromPb(req->caller()),
                            SessionId(req->tag().session())),
               resp);
      AddDirAttrs(resp, {InodeId(req->parent())});
      return grpc::Status::OK;
    }
    FillAttr(svc_->Mkdir(InodeId(req->parent()), req->name(), req->mode(), FromPb(req->caller())),
             resp);
    AddDirAttrs(resp, {InodeId(req->parent())});
    return grpc::Status::OK;
  }
  grpc::Status Symlink(grpc::ServerContext* ctx, const pb::SymlinkRequest* req,
                       pb::AttrResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kWrite, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    auto leased = svc_->BreakDirLeases({req->parent()}, req->tag().session());
    TaggedCall call(this, req->tag());
    if (call.applied()) {
      FillAttr(svc_->Lookup(InodeId(req->parent()), req->name(), FromPb(req->caller()),
                            SessionId(req->tag().session())),
               resp);
      AddDirAttrs(resp, {InodeId(req->parent())});
      return grpc::Status::OK;
    }
    FillAttr(svc_->Symlink(InodeId(req->parent()), req->name(), req->target(),
                           FromPb(req->caller())),
             resp);
    AddDirAttrs(resp, {InodeId(req->parent())});
    return grpc::Status::OK;
  }
  grpc::Status Link(grpc::ServerContext* ctx, const pb::LinkRequest* req,
                    pb::AttrResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kWrite, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    auto leased = svc_->BreakDirLeases({req->new_parent()}, req->tag().session());
    TaggedCall call(this, req->tag());
    if (call.applied()) {
      FillAttr(svc_->Lookup(InodeId(req->new_parent()), req->new_name(), FromPb(req->caller()),
                            SessionId(req->tag().session())),
               resp);
      AddDirAttrs(resp, {InodeId(req->new_parent())});
      return grpc::Status::OK;
    }
    FillAttr(svc_->Link(InodeId(req->ino()), InodeId(req->new_parent()), req->new_name(),
                        FromPb(req->caller())),
             resp);
    AddDirAttrs(resp, {InodeId(req->new_parent())});
    return grpc::Status::OK;
  }
  grpc::Status Unlink(grpc::ServerContext* ctx, const pb::RemoveRequest* req,
                      pb::RemoveResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kWrite, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    auto leased = svc_->BreakDirLeases({req->parent()}, req->tag().session());
    TaggedCall call(this, req->tag());
    if (call.applied()) {
      SetStatus(resp->mutable_status(), OkStatus());
      AddDirAttrs(resp, {InodeId(req->parent())});
      return grpc::Status::OK;
    }
    SetStatus(resp->mutable_status(),
              svc_->Unlink(InodeId(req->parent()), req->name(), FromPb(req->caller())));
    AddDirAttrs(resp, {InodeId(req->parent())});
    return grpc::Status::OK;
  }
  grpc::Status Rmdir(grpc::ServerContext* ctx, const pb::RemoveRequest* req,
                     pb::RemoveResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kWrite, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    auto leased = svc_->BreakDirLeases(
        {req->parent(), svc_->LeasedChild(InodeId(req->parent()), req->name())},
        req->tag().session());
    TaggedCall call(this, req->tag());
    if (call.applied()) {
      SetStatus(resp->mutable_status(), OkStatus());
      AddDirAttrs(resp, {InodeId(req->parent())});
      return grpc::Status::OK;
    }
    SetStatus(resp->mutable_status(),
              svc_->Rmdir(InodeId(req->parent()), req->name(), FromPb(req->caller())));
    AddDirAttrs(resp, {InodeId(req->parent())});
    return grpc::Status::OK;
  }
  grpc::Status Rename(grpc::ServerContext* ctx, const pb::RenameRequest* req,
                      pb::StatusResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kWrite, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    auto leased = svc_->BreakDirLeases(
        {req->parent(), req->new_parent(),
         svc_->LeasedChild(InodeId(req->new_parent()), req->new_name())},
        req->tag().session());
    TaggedCall call(this, req->tag());
    if (call.applied()) {
      SetStatus(resp->mutable_status(), OkStatus());
      AddDirAttrs(resp, {InodeId(req->parent()), InodeId(req->new_parent())});
      return grpc::Status::OK;
    }
    SetStatus(resp->mutable_status(),
              svc_->Rename(InodeId(req->parent()), req->name(), InodeId(req->new_parent()),
                           req->new_name(), req->flags(), FromPb(req->caller())));
    AddDirAttrs(resp, {InodeId(req->parent()), InodeId(req->new_parent())});
    if (resp->status().code() == 0) {
      // A renamed directory's ctime (and "..") changed too; a renamed file is not cached.
      Result<Inode> moved = svc_->Lookup(InodeId(req->new_parent()), req->new_name(), Caller{});
      if (moved.ok() && moved->is_dir()) ToPb(*moved, resp->add_dir_attrs());
    }
    return grpc::Status::OK;
  }
  grpc::Status Readlink(grpc::ServerContext* ctx, const pb::ReadlinkRequest* req,
                        pb::ReadlinkResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kRead, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    auto r = svc_->Readlink(InodeId(req->ino()));
    SetStatus(resp->mutable_status(), r.status());
    if (r.ok()) resp->set_target(*r);
    return grpc::Status::OK;
  }
  grpc::Status ReadDir(grpc::ServerContext* ctx, const pb::ReadDirRequest* req,
                       pb::ReadDirResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kRead, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    auto leased = svc_->BreakDirLeases({req->ino()}, req->session());
    bool eof = false;
    auto r = svc_->ReadDir(InodeId(req->ino()), req->cookie(), req->max_entries(), req->plus(),
                           FromPb(req->caller()), &eof, SessionId(req->session()));
    SetStatus(resp->mutable_status(), r.status());
    if (!r.ok()) return grpc::Status::OK;
    for (const DirEntry& e : *r) {
      pb::DirEntry* out = resp->add_entries();
      out->set_name(e.name);
      out->set_ino(e.ino.value());
      out->set_mode(e.mode);
      out->set_cookie(e.cookie);
      if (e.attr) ToPb(*e.attr, out->mutable_attr());
    }
    resp->set_eof(eof);
    return grpc::Status::OK;
  }
  grpc::Status GetXattr(grpc::ServerContext* ctx, const pb::XattrRequest* req,
                        pb::XattrResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kRead, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    auto leased = svc_->BreakDirLeases({req->ino()}, req->tag().session());
    auto r = svc_->GetXattr(InodeId(req->ino()), req->name(), FromPb(req->caller()));
    SetStatus(resp->mutable_status(), r.status());
    if (r.ok()) resp->set_value(*r);
    return grpc::Status::OK;
  }
  grpc::Status SetXattr(grpc::ServerContext* ctx, const pb::XattrRequest* req,
                        pb::XattrResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kWrite, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    auto leased = svc_->BreakDirLeases({req->ino()}, req->tag().session());
    TaggedCall call(this, req->tag());
    if (call.applied()) {
      SetStatus(resp->mutable_status(), OkStatus());
      return grpc::Status::OK;
    }
    SetStatus(resp->mutable_status(), svc_->SetXattr(InodeId(req->ino()), req->name(),
                                                     req->value(), req->flags(),
                                                     FromPb(req->caller())));
    return grpc::Status::OK;
  }
  grpc::Status ListXattr(grpc::ServerContext* ctx, const pb::XattrRequest* req,
                         pb::XattrResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kRead, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    auto leased = svc_->BreakDirLeases({req->ino()}, req->tag().session());
    auto r = svc_->ListXattr(InodeId(req->ino()), FromPb(req->caller()));
    SetStatus(resp->mutable_status(), r.status());
    if (r.ok()) {
      for (const std::string& n : *r) resp->add_names(n);
    }
    return grpc::Status::OK;
  }
  grpc::Status RemoveXattr(grpc::ServerContext* ctx, const pb::XattrRequest* req,
                           pb::XattrResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kWrite, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    auto leased = svc_->BreakDirLeases({req->ino()}, req->tag().session());
    TaggedCall call(this, req->tag());
    if (call.applied()) {
      SetStatus(resp->mutable_status(), OkStatus());
      return grpc::Status::OK;
    }
    SetStatus(resp->mutable_status(),
              svc_->RemoveXattr(InodeId(req->ino()), req->name(), FromPb(req->caller())));
    return grpc::Status::OK;
  }
  grpc::Status StatFs(grpc::ServerContext* ctx, const pb::StatFsRequest*,
                      pb::StatFsResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kSession, nullptr, resp);
    if (!gate.ok()) return Refuse(gate, resp);
    auto r = svc_->StatFs();
    SetStatus(resp->mutable_status(), r.status());
    if (r.ok()) {
      resp->set_total_bytes(r->total_bytes);
      resp->set_free_bytes(r->free_bytes);
      resp->set_files(r->files);
      resp->set_usable_total_bytes(r->usable_total_bytes);
      resp->set_usable_free_bytes(r->usable_free_bytes);
    }
    return grpc::Status::OK;
  }
  // What a replayed open (or AcquireLease) answers: the attributes now and, when the first
  // attempt took the write lease (`lease`), the version the session holds under it.
  Result<OpenResult> ReplayedOpen(InodeId ino, SessionId session, bool lease) {
    Result<Inode> attr = svc_->GetAttr(ino);
    if (!attr.ok()) return attr.status();
    OpenResult out{.attr = *attr};
    if (lease && attr->is_reg()) {
      Result<uint64_t> version = ReplayedLeaseVersion(ino, session);
      if (!version.ok()) return version.status();
      out.write_version = *version;
    }
    return out;
  }
  static void FillOpen(const Result<OpenResult>& r, pb::OpenResponse* resp) {
    SetStatus(resp->mutable_status(), r.status());
    if (!r.ok()) return;
    ToPb(r->attr, resp->mutable_attr());
    resp->set_write_version(r->write_version);
    resp->set_unlink_pending(r->unlink_pending);
  }

  grpc::Status Open(grpc::ServerContext* ctx, const pb::OpenRequest* req,
                    pb::OpenResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, OpenAccess(req->flags()), Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    auto leased = svc_->BreakDirLeases({req->ino()}, req->session());
    const InodeId ino(req->ino());
    const SessionId session(req->session());
    TaggedCall call(this, req->tag());
    const uint32_t acc = req->flags() & O_ACCMODE;
    FillOpen(call.applied()
                 ? ReplayedOpen(ino, session, acc == O_WRONLY || acc == O_RDWR)
                 : svc_->Open(ino, req->flags(), session, FromPb(req->caller())),
             resp);
    GrantCapability(ctx, resp,
                    OpenAccess(req->flags()) == ClientAccess::kWrite ? CapabilityMode::kWrite
                                                                     : CapabilityMode::kRead,
                    capability_lifetime_);
    return grpc::Status::OK;
  }
  grpc::Status GetCapability(grpc::ServerContext* ctx, const pb::CapabilityRequest* req,
                             pb::CapabilityResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    // A renewal is a read or a write of the inode, as an open is: the gate keeps it inside the
    // export and refuses a write capability to a read-only credential (kReadOnly).
    ClientGate::Call gate = gate_.Admit(
        ctx, req->write() ? ClientAccess::kWrite : ClientAccess::kRead, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    const InodeId ino(req->ino());
    Result<Inode> attr = svc_->GetAttr(ino);
    if (!attr.ok()) {
      SetStatus(resp->mutable_status(), attr.status());
      return grpc::Status::OK;
    }
    if (!S_ISREG(attr->mode)) {
      SetStatus(resp->mutable_status(),
                InvalidArgument("inode " + ino.ToString() + " is not a regular file"));
      return grpc::Status::OK;
    }
    uint64_t expiry = 0;
    resp->set_capability(CapabilityFor(
        ctx, ino, req->write() ? CapabilityMode::kWrite : CapabilityMode::kRead,
        capability_lifetime_, &expiry));
    if (!resp->capability().empty()) resp->set_expiry_unix_seconds(expiry);
    SetStatus(resp->mutable_status(), OkStatus());
    return grpc::Status::OK;
  }
  grpc::Status Release(grpc::ServerContext* ctx, const pb::ReleaseRequest* req,
                       pb::StatusResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kRead, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    TaggedCall call(this, req->tag());
    if (call.applied()) {
      SetStatus(resp->mutable_status(), OkStatus());
      return grpc::Status::OK;
    }
    SetStatus(resp->mutable_status(),
              svc_->Release(InodeId(req->ino()), SessionId(req->session()), req->was_write()));
    return grpc::Status::OK;
  }
  grpc::Status ReleaseBatch(grpc::ServerContext* ctx, const pb::ReleaseBatchRequest* req,
                            pb::ReleaseBatchResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kRead, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    if (req->items_size() > static_cast<int>(kMaxReleaseBatchItems)) {
      SetStatus(resp->mutable_status(),
                InvalidArgument("release batch of " + std::to_string(req->items_size()) +
                                " items (at most " + std::to_string(kMaxReleaseBatchItems) + ")"));
      return grpc::Status::OK;
    }
    const SessionId session(req->session());
    // Item i is the change tag.id + i (the client takes one id per item), so a batch cut short
    // by a crash replays the items it applied and runs the rest.
    for (int i = 0; i < req->items_size(); ++i) {
      const pb::ReleaseItem& item = req->items(i);
      pb::RequestTag tag = req->tag();
      if (tag.id() != 0) tag.set_id(tag.id() + static_cast<uint64_t>(i));
      TaggedCall call(this, tag);
      if (call.applied()) {
        SetStatus(resp->add_results(), OkStatus());
        continue;
      }
      SetStatus(resp->add_results(),
                svc_->Release(InodeId(item.ino()), session, item.was_write()));
    }
    SetStatus(resp->mutable_status(), OkStatus());
    return grpc::Status::OK;
  }
  grpc::Status AcquireDirLease(grpc::ServerContext* ctx, const pb::DirLeaseRequest* req,
                               pb::DirLeaseResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kWrite, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    auto r = svc_->AcquireDirLease(InodeId(req->ino()), SessionId(req->session()),
                                   req->want_inodes(), FromPb(req->caller()));
    SetStatus(resp->mutable_status(), r.status());
    if (r.ok()) {
      resp->set_granted(r->granted);
      resp->set_ino_first(r->ino_first);
      resp->set_ino_count(r->ino_count);
      ToPb(r->dir, resp->mutable_dir_attr());
      ToPb(r->file_layout, resp->mutable_file_layout());
      resp->set_generation(r->generation);
      resp->set_version_first(r->version_first);
      resp->set_version_count(r->version_count);
    }
    return grpc::Status::OK;
  }
  grpc::Status ChangeBatch(grpc::ServerContext* ctx, const pb::ChangeBatchRequest* req,
                           pb::ChangeBatchResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kWrite, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    if (req->items_size() > static_cast<int>(MetadataService::kMaxChangeBatchItems)) {
      SetStatus(resp->mutable_status(),
                InvalidArgument("create batch of " + std::to_string(req->items_size()) +
                                " items (at most " +
                                std::to_string(MetadataService::kMaxChangeBatchItems) + ")"));
      return grpc::Status::OK;
    }
    const SessionId session(req->session());
    TaggedCall call(this, req->tag());
    if (call.applied()) {
      // Applied before (one store write: all of it), its reply lost: each item as it is now.
      for (const pb::ChangeBatchItem& item : req->items()) {
        pb::ChangeBatchResult* out = resp->add_results();
        if (item.kind() == pb::ChangeBatchItem::UNLINK ||
            item.kind() == pb::ChangeBatchItem::RENAME) {
          SetStatus(out->mutable_status(), OkStatus());
          continue;
        }
        Result<Inode> made = svc_->GetAttr(InodeId(item.new_ino()));
        Result<uint64_t> version = uint64_t{0};
        // A commit's next write version is its lease's (as a replayed Commit answers).
        if (made.ok() && (item.open_for_write() || item.kind() == pb::ChangeBatchItem::COMMIT)) {
          version = ReplayedLeaseVersion(made->ino, session);
        }
        SetStatus(out->mutable_status(), made.ok() ? version.status() : made.status());
        if (made.ok() && version.ok()) {
          ToPb(*made, out->mutable_attr());
          out->set_write_version(*version);
        }
      }
      SetStatus(resp->mutable_status(), OkStatus());
      return grpc::Status::OK;
    }
    std::vector<BatchChange> items;
    items.reserve(req->items_size());
    for (const pb::ChangeBatchItem& item : req->items()) {
      BatchChange b;
      switch (item.kind()) {
        case pb::ChangeBatchItem::MKDIR: b.kind = BatchChange::Kind::kMkdir; break;
        case pb::ChangeBatchItem::UNLINK: b.kind = BatchChange::Kind::kUnlink; break;
        case pb::ChangeBatchItem::RENAME: b.kind = BatchChange::Kind::kRename; break;
        case pb::ChangeBatchItem::CREATE: b.kind = BatchChange::Kind::kCreate; break;
        case pb::ChangeBatchItem::COMMIT: b.kind = BatchChange::Kind::kCommit; break;
        case pb::ChangeBatchItem::SETATTR: b.kind = BatchChange::Kind::kSetAttr; break;
        default: b.kind = BatchChange::Kind::kUnknown; break;  // the item is refused
      }
      if (item.written_stripes_size() % 2 != 0 ||
          static_cast<size_t>(item.written_stripes_size()) > 2 * kMaxCommitStripeRanges) {
        b.stripes_malformed = true;  // the item is refused
      }
      for (int i = 0; i + 1 < item.written_stripes_size(); i += 2) {
        b.written_stripes.emplace_back(item.written_stripes(i), item.written_stripes(i + 1));
      }
      b.size = item.size();
      b.write_version = item.write_version();
      if (item.has_attrs()) b.attrs = FromPb(item.attrs());
      b.generation = item.generation();
      b.new_parent = InodeId(item.new_parent());
      b.new_name = item.new_name();
      b.parent = InodeId(item.parent());
      b.name = item.name();
      b.mode = item.mode();
      b.ino = InodeId(item.new_ino());
      b.caller = FromPb(item.caller());
      b.time = FromPb(item.time());
      b.open_for_write = item.open_for_write();
      items.push_back(std::move(b));
    }
    auto r = svc_->ChangeBatch(session, items, req->sync());
    SetStatus(resp->mutable_status(), r.status());
    if (r.ok()) {
      for (const Result<OpenResult>& one : *r) {
        pb::ChangeBatchResult* out = resp->add_results();
        SetStatus(out->mutable_status(), one.status());
        if (one.ok()) {
          ToPb(one->attr, out->mutable_attr());
          out->set_write_version(one->write_version);
        }
      }
    }
    return grpc::Status::OK;
  }
  grpc::Status Commit(grpc::ServerContext* ctx, const pb::CommitRequest* req,
                      pb::CommitResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kWrite, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    CommitArgs a;
    a.ino = InodeId(req->ino());
    a.session = SessionId(req->session());
    a.size = req->size();
    a.mtime = FromPb(req->mtime());
    a.write_version = req->write_version();
    a.sync = req->sync();
    if (req->backfill_servers_size() > kMaxBackfillServers) {
      SetStatus(resp->mutable_status(),
                InvalidArgument("commit: " + std::to_string(req->backfill_servers_size()) +
                                " backfill servers, at most " +
                                std::to_string(kMaxBackfillServers)));
      return grpc::Status::OK;
    }
    for (uint32_t id : req->backfill_servers()) a.backfill_servers.push_back(ServerId(id));
    if (req->written_stripes_size() % 2 != 0 ||
        static_cast<size_t>(req->written_stripes_size()) > 2 * kMaxCommitStripeRanges) {
      SetStatus(resp->mutable_status(),
                InvalidArgument("commit: written_stripes must be at most " +
                                std::to_string(kMaxCommitStripeRanges) + " (begin, end) pairs"));
      return grpc::Status::OK;
    }
    for (int i = 0; i + 1 < req->written_stripes_size(); i += 2) {
      a.written_stripes.emplace_back(req->written_stripes(i), req->written_stripes(i + 1));
    }
    a.records_stripes = req->records_stripes();
    a.degraded_stripes = req->degraded_stripes();
    if (req->has_attrs()) {
      a.attrs = FromPb(req->attrs());
      a.caller = FromPb(req->attrs().caller());
    }
    TaggedCall call(this, req->tag());
    // Applied and the lease still held: answer from it. Without the lease, running the commit
    // again is safe (same size, version and stripes) and gives the right error or answer.
    const uint64_t lease_version = call.applied() ? svc_->LeaseVersionFor(a.ino, a.session) : 0;
    if (lease_version != 0) {
      Result<Inode> attr = svc_->GetAttr(a.ino);
      SetStatus(resp->mutable_status(), attr.status());
      if (attr.ok()) {
        ToPb(*attr, resp->mutable_attr());
        resp->set_next_write_version(lease_version);
      }
      return grpc::Status::OK;
    }
    auto r = svc_->Commit(a);
    SetStatus(resp->mutable_status(), r.status());
    if (r.ok()) {
      ToPb(r->attr, resp->mutable_attr());
      resp->set_next_write_version(r->next_write_version);
    }
    return grpc::Status::OK;
  }
  grpc::Status OpenSession(grpc::ServerContext* ctx, const pb::OpenSessionRequest* req,
                           pb::OpenSessionResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kSession, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    auto r = svc_->OpenSession(req->client_name(), req->cache_leases());
    SetStatus(resp->mutable_status(), r.status());
    if (r.ok()) {
      resp->set_session(r->session.value());
      resp->set_lease_ttl_ms(r->lease_ttl_ms);
      resp->set_cache_lease_ms(r->cache_lease_ms);
      resp->set_wire_port(wire_port_);
      resp->set_wire_instance(wire_instance_);
    }
    return grpc::Status::OK;
  }
  grpc::Status KeepAlive(grpc::ServerContext* ctx, const pb::SessionRequest* req,
                         pb::KeepAliveResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kSession, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    SetStatus(resp->mutable_status(), svc_->KeepAlive(SessionId(req->session())));
    resp->set_wire_port(wire_port_);
    resp->set_wire_instance(wire_instance_);
    return grpc::Status::OK;
  }
  grpc::Status CloseSession(grpc::ServerContext* ctx, const pb::SessionRequest* req,
                            pb::StatusResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kSession, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    SetStatus(resp->mutable_status(), svc_->CloseSession(SessionId(req->session())));
    return grpc::Status::OK;
  }
  grpc::Status AcquireLease(grpc::ServerContext* ctx, const pb::LeaseRequest* req,
                            pb::OpenResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kWrite, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    const InodeId ino(req->ino());
    const SessionId session(req->session());
    TaggedCall call(this, req->tag());
    FillOpen(call.applied() ? ReplayedOpen(ino, session, /*lease=*/true)
                            : svc_->AcquireLease(ino, session),
             resp);
    GrantCapability(ctx, resp, CapabilityMode::kWrite, capability_lifetime_);
    return grpc::Status::OK;
  }
  grpc::Status ReturnLease(grpc::ServerContext* ctx, const pb::LeaseRequest* req,
                           pb::StatusResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kRead, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    TaggedCall call(this, req->tag());
    SetStatus(resp->mutable_status(),
              call.applied() ? OkStatus()
                             : svc_->ReturnLease(InodeId(req->ino()), SessionId(req->session())));
    return grpc::Status::OK;
  }
  // Over gRPC a recall wait would hold one of the server's few request threads per mount: it
  // answers at once (the client polls). The metadata wire has a thread per connection and waits.
  grpc::Status WaitRecall(grpc::ServerContext* ctx, const pb::WaitRecallRequest* req,
                          pb::WaitRecallResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kSession, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    return AnswerWaitRecall(*req, std::chrono::milliseconds(0), resp);
  }
  grpc::Status WaitRecallOnWire(grpc::ServerContext*, const pb::WaitRecallRequest* req,
                                pb::WaitRecallResponse* resp) {
    return AnswerWaitRecall(*req, std::chrono::milliseconds(req->wait_ms()), resp);
  }
  grpc::Status AnswerWaitRecall(const pb::WaitRecallRequest& req, std::chrono::milliseconds wait,
                                pb::WaitRecallResponse* resp) {
    Result<MetadataService::Recalls> r =
        svc_->WaitRecalls(SessionId(req.session()), wait, req.acked_seq(), req.recall_epoch());
    SetStatus(resp->mutable_status(), r.status());
    if (!r.ok()) return grpc::Status::OK;
    resp->set_recall_epoch(r->recall_epoch);
    for (InodeId ino : r->write_leases) resp->add_inodes(ino.value());
    for (const MetadataService::CacheRecall& c : r->cache_recalls) {
      pb::CacheRecall* out = resp->add_cache_recalls();
      out->set_seq(c.seq);
      for (InodeId ino : c.inodes) out->add_inodes(ino.value());
      for (const auto& [parent, name] : c.entries) {
        pb::CacheEntryName* e = out->add_entries();
        e->set_parent(parent.value());
        e->set_name(name);
      }
    }
    return grpc::Status::OK;
  }
  grpc::Status SetLock(grpc::ServerContext* ctx, const pb::LockRequest* req,
                       pb::LockResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kRead, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    TaggedCall call(this, req->tag());
    if (call.applied()) {
      SetStatus(resp->mutable_status(), OkStatus());
      return grpc::Status::OK;
    }
    SetStatus(resp->mutable_status(), svc_->SetLock(FromPb(*req)));
    return grpc::Status::OK;
  }
  grpc::Status GetLock(grpc::ServerContext* ctx, const pb::LockRequest* req,
                       pb::LockResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kRead, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    auto r = svc_->GetLock(FromPb(*req));
    SetStatus(resp->mutable_status(), r.status());
    if (r.ok()) {
      resp->set_type(static_cast<uint32_t>(r->type));
      resp->set_start(r->start);
      resp->set_end(r->end);
      resp->set_pid(r->pid);
    }
    return grpc::Status::OK;
  }
  grpc::Status RegisterServer(grpc::ServerContext* ctx, const pb::RegisterServerRequest* req,
                              pb::RegisterServerResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kAdmin, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    ServerRegistration reg;
    reg.address = req->address();
    reg.failure_domain = req->failure_domain();
    reg.capacity_bytes = req->capacity_bytes();
    reg.used_bytes = req->used_bytes();
    reg.server_uuid = req->server_uuid();
    if (req->fs_id().size() <= 256) reg.fs_id = req->fs_id();  // longer: not ours, ignored
    reg.fs_free_bytes = req->fs_free_bytes();
    auto r = svc_->RegisterServer(reg);
    SetStatus(resp->mutable_status(), r.status());
    if (r.ok()) {
      resp->set_server_id(r->first.value());
      resp->set_heartbeat_interval_ms(r->second);
    }
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(grpc::ServerContext* ctx, const pb::HeartbeatRequest* req,
                         pb::HeartbeatResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kAdmin, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    HeartbeatArgs a;
    a.server = ServerId(req->server_id());
    a.capacity_bytes = req->capacity_bytes();
    a.used_bytes = req->used_bytes();
    a.chunk_count = req->chunk_count();
    a.gc_done.assign(req->gc_done().begin(), req->gc_done().end());
    for (const pb::MoveProgress& p : req->moves()) {
      a.moves.push_back(MoveProgress{p.task_id(), p.chunks_done(), p.chunks_total(),
                                     p.bytes_done(), p.bytes_total(), p.done(), p.error()});
    }
    a.pg_gc_done.assign(req->pg_gc_done().begin(), req->pg_gc_done().end());
    a.chunks_scrubbed = req->chunks_scrubbed();
    a.corrupt_found = req->corrupt_found();
    a.corrupt_repaired = req->corrupt_repaired();
    a.backfills_complete = req->backfills_complete();
    if (req->fs_id().size() <= 256) a.fs_id = req->fs_id();  // longer: not ours, ignored
    a.fs_free_bytes = req->fs_free_bytes();
    auto r = svc_->Heartbeat(a);
    SetStatus(resp->mutable_status(), r.status());
    if (r.ok()) {
      resp->set_map_version(r->map_version);
      for (const GcTask& t : r->gc) {
        pb::GcTask* out = resp->add_gc();
        out->set_id(t.id);
        out->set_ino(t.ino.value());
        out->set_from_stripe(t.from_stripe);
        out->set_max_version(t.max_version);
      }
      for (const MoveAssignment& m : r->moves) {
        ToPb(m.task, m.rate_limit_bytes_per_s, resp->add_moves());
      }
      for (const PgGcTask& g : r->pg_gc) {
        pb::PgGcTask* out = resp->add_pg_gc();
        out->set_id(g.id);
        out->set_pg_width(g.pg_width);
        out->set_pg_index(g.pg_index);
        out->set_position(g.position);
      }
      resp->set_state(MemberStateName(r->state));
      resp->set_backfill(r->backfill);
    }
    return grpc::Status::OK;
  }
  grpc::Status GetClusterMap(grpc::ServerContext* ctx, const pb::ClusterMapRequest*,
                             pb::ClusterMapResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kSession, nullptr, resp);
    if (!gate.ok()) return Refuse(gate, resp);
    ClusterMap map = svc_->GetClusterMap();
    SetStatus(resp->mutable_status(), OkStatus());
    resp->set_version(map.version);
    for (const ServerStatus& s : map.servers) {
      pb::ServerInfo* out = resp->add_servers();
      out->set_id(s.record.id.value());
      out->set_address(s.record.address);
      out->set_failure_domain(s.record.failure_domain);
      out->set_up(s.up);
      out->set_capacity_bytes(s.record.capacity_bytes);
      out->set_used_bytes(s.record.used_bytes);
      out->set_chunk_count(s.chunk_count);
      out->set_last_heartbeat_ms_ago(s.last_heartbeat_ms_ago);
      out->set_state(MemberStateName(s.record.state));
      out->set_chunks_scrubbed(s.chunks_scrubbed);
      out->set_corrupt_found(s.corrupt_found);
      out->set_corrupt_repaired(s.corrupt_repaired);
      out->set_pg_positions(s.pg_positions);
    }
    for (const PgTable& t : map.pg_tables) {
      pb::PgTable* out = resp->add_pg_tables();
      out->set_width(t.width);
      for (size_t i = 0; i < t.pgs.size(); ++i) {
        pb::PlacementGroup* g = out->add_pgs();
        for (ServerId s : t.pgs[i]) g->add_targets(s.value());
        if (i < t.pending.size()) {
          for (ServerId s : t.pending[i]) g->add_pending(s.value());
        }
      }
    }
    resp->set_default_k(map.default_k);
    resp->set_default_m(map.default_m);
    resp->set_default_unit_bytes(map.default_unit_bytes);
    resp->set_restore_version_floor(map.restore_version_floor);
    resp->set_restore_ino_floor(map.restore_ino_floor);
    return grpc::Status::OK;
  }
  grpc::Status Backup(grpc::ServerContext* ctx, const pb::BackupRequest* req,
                      pb::BackupResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kAdmin, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    // The path is checked by the core (length, NUL, absolute, components): it crosses a process
    // boundary and names a place on this host.
    Result<BackupResult> r = svc_->Backup(req->dest_dir());
    SetStatus(resp->mutable_status(), r.status());
    if (!r.ok()) return grpc::Status::OK;
    resp->set_dest_dir(r->dir);
    resp->set_files(r->files);
    resp->set_bytes(r->bytes);
    resp->set_created_unix_ms(r->manifest.created_unix_ms);
    resp->set_inodes(r->manifest.inodes);
    resp->set_took_ms(r->took_ms);
    resp->set_same_file_system(r->same_file_system);
    return grpc::Status::OK;
  }
  grpc::Status ListGcTasks(grpc::ServerContext* ctx, const pb::ListGcTasksRequest* req,
                           pb::ListGcTasksResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kAdmin, nullptr, resp);
    if (!gate.ok()) return Refuse(gate, resp);
    constexpr uint32_t kMaxTasks = 10000;
    const uint32_t limit = req->max_tasks() == 0 ? kMaxTasks : std::min(req->max_tasks(), kMaxTasks);
    bool eof = false;
    for (const GcTask& t : svc_->GcTasksAfter(req->after_id(), limit, &eof)) {
      pb::GcTask* out = resp->add_tasks();
      out->set_id(t.id);
      out->set_ino(t.ino.value());
      out->set_from_stripe(t.from_stripe);
      out->set_max_version(t.max_version);
    }
    resp->set_eof(eof);
    SetStatus(resp->mutable_status(), OkStatus());
    return grpc::Status::OK;
  }
  grpc::Status GetActivity(grpc::ServerContext* ctx, const pb::GetActivityRequest* req,
                           pb::GetActivityResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kAdmin, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    const uint32_t asked = req->max_events();
    if (asked > kEventLogCapacity) {
      SetStatus(resp->mutable_status(),
                InvalidArgument("max_events " + std::to_string(asked) + " is over " +
                                std::to_string(kEventLogCapacity)));
      return grpc::Status::OK;
    }
    SetStatus(resp->mutable_status(), OkStatus());
    for (const SessionInfo& s : svc_->ListSessions()) {
      pb::SessionInfo* out = resp->add_sessions();
      out->set_id(s.id.value());
      out->set_client_name(Printable(s.client_name));
      out->set_idle_ms(s.idle_ms);
      out->set_inodes(s.inodes);
      out->set_caches(s.caches);
    }
    for (const ClusterEvent& e : svc_->RecentEvents(asked == 0 ? 50 : asked)) {
      pb::ClusterEvent* out = resp->add_events();
      out->set_seq(e.seq);
      out->set_unix_ms(e.unix_ms);
      out->set_severity(EventSeverityName(e.severity));
      out->set_text(e.text);
    }
    resp->set_http_address(svc_->http_address());
    resp->set_started_unix_ms(svc_->started_unix_ms());
    return grpc::Status::OK;
  }
  grpc::Status Sync(grpc::ServerContext* ctx, const pb::SyncRequest*,
                    pb::StatusResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    // Any client: a mount's fsyncdir asks it (it makes what was answered durable, no more).
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kRead, nullptr, resp);
    if (!gate.ok()) return Refuse(gate, resp);
    SetStatus(resp->mutable_status(), svc_->Sync());
    return grpc::Status::OK;
  }
  grpc::Status DrainServer(grpc::ServerContext* ctx, const pb::ServerAdminRequest* req,
                           pb::ServerAdminResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kAdmin, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    FillAdmin(svc_->DrainServer(ServerId(req->server_id())), resp);
    return grpc::Status::OK;
  }
  grpc::Status UndrainServer(grpc::ServerContext* ctx, const pb::ServerAdminRequest* req,
                             pb::ServerAdminResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kAdmin, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    FillAdmin(svc_->UndrainServer(ServerId(req->server_id())), resp);
    return grpc::Status::OK;
  }
  grpc::Status RemoveServer(grpc::ServerContext* ctx, const pb::ServerAdminRequest* req,
                            pb::ServerAdminResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kAdmin, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    FillAdmin(svc_->RemoveServer(ServerId(req->server_id()), req->force()), resp);
    return grpc::Status::OK;
  }
  grpc::Status GetMoves(grpc::ServerContext* ctx, const pb::GetMovesRequest*,
                        pb::GetMovesResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kAdmin, nullptr, resp);
    if (!gate.ok()) return Refuse(gate, resp);
    MovesReport r = svc_->GetMoves();
    SetStatus(resp->mutable_status(), OkStatus());
    for (const MoveInfo& m : r.moves) {
      pb::MoveInfo* out = resp->add_moves();
      ToPb(m.task, r.move_rate_bytes_per_s, out->mutable_task());
      out->set_state(m.running ? "running" : "queued");
      pb::MoveProgress* p = out->mutable_progress();
      p->set_task_id(m.task.id);
      p->set_chunks_done(m.progress.chunks_done);
      p->set_chunks_total(m.progress.chunks_total);
      p->set_bytes_done(m.progress.bytes_done);
      p->set_bytes_total(m.progress.bytes_total);
      p->set_done(m.progress.done);
      p->set_error(m.progress.error);
      out->set_rate_bytes_per_s(m.rate_bytes_per_s);
      out->set_eta_ms(m.eta_ms);
      out->set_age_ms(m.age_ms);
    }
    for (const DegradedPg& d : r.degraded) {
      pb::DegradedPg* out = resp->add_degraded();
      out->set_pg_width(d.pg_width);
      out->set_pg_index(d.pg_index);
      for (uint32_t p : d.positions) out->add_positions(p);
      out->set_reason(d.reason);
    }
    pb::MoveSummary* sum = resp->mutable_summary();
    sum->set_moves_running(r.moves_running);
    sum->set_moves_queued(r.moves_queued);
    sum->set_degraded_pgs(static_cast<uint32_t>(r.degraded.size()));
    sum->set_waiting_for_server(r.waiting_for_server);
    sum->set_bytes_left(r.bytes_left);
    sum->set_eta_ms(r.eta_ms);
    sum->set_message(r.message);
    sum->set_max_concurrent_moves(r.max_concurrent_moves);
    sum->set_move_rate_bytes_per_s(r.move_rate_bytes_per_s);
    sum->set_rebalance_paused(r.rebalance_paused);
    sum->set_moves_completed(r.moves_completed);
    for (uint64_t b : r.completed_bytes) sum->add_completed_bytes(b);
    for (uint64_t c : r.completed_chunks) sum->add_completed_chunks(c);
    sum->set_lost_stripes(r.lost_stripes);
    sum->set_lost_files(r.lost_files);
    sum->set_degraded_stripes(r.degraded_stripes);
    return grpc::Status::OK;
  }
  grpc::Status ReportLost(grpc::ServerContext* ctx, const pb::ReportLostRequest* req,
                          pb::ReportLostResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kRead, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    if (req->stripes_size() > static_cast<int>(Inode::kMaxLostStripesRecorded)) {
      SetStatus(resp->mutable_status(), InvalidArgument("report lost: more than 1024 stripes"));
      return grpc::Status::OK;
    }
    std::vector<uint64_t> stripes(req->stripes().begin(), req->stripes().end());
    Result<uint64_t> r = svc_->ReportLost(InodeId(req->ino()), stripes);
    SetStatus(resp->mutable_status(), r.status());
    if (r.ok()) resp->set_recorded(*r);
    return grpc::Status::OK;
  }
  grpc::Status SetRebalance(grpc::ServerContext* ctx, const pb::SetRebalanceRequest* req,
                            pb::StatusResponse* resp) override {
    if (grpc::Status refused = CheckCallAuth(ctx); !refused.ok()) return refused;
    ClientGate::Call gate = gate_.Admit(ctx, ClientAccess::kAdmin, Mutable(req), resp);
    if (!gate.ok()) return Refuse(gate, resp);
    RebalanceKnobs k;
    k.max_concurrent_moves = req->max_concurrent_moves();
    k.move_rate_mib = req->move_rate_mib();
    if (req->set_paused()) k.paused = req->paused();
    SetStatus(resp->mutable_status(), svc_->SetRebalance(k));
    return grpc::Status::OK;
  }

 private:
  MetadataService* svc_;
  ClientGate gate_;  // client credentials: checks and confines each call before its handler
  const std::chrono::seconds capability_lifetime_;  // of the chunk capabilities it signs
  // Tagged changes running now, by (session, id) (TaggedCall).
  std::mutex running_mu_;
  std::condition_variable running_cv_;
  std::set<std::pair<uint64_t, uint64_t>> running_;
  uint16_t wire_port_ = 0;
  uint64_t wire_instance_ = 0;
};

}  // namespace

// The metadata wire (src/wire/meta_wire.h): method number -> parse the request, run the same
// handler gRPC runs, serialize the response. Handlers take no notice of their ServerContext.
class WireDispatch {
 public:
  explicit WireDispatch(ServiceImpl* service) : service_(service) {
    using M = wire::MetaMethod;
    Add(M::kLookup, "Lookup", &ServiceImpl::Lookup);
    Add(M::kGetAttr, "GetAttr", &ServiceImpl::GetAttr);
    Add(M::kSetAttr, "SetAttr", &ServiceImpl::SetAttr);
    Add(M::kCreate, "Create", &ServiceImpl::Create);
    Add(M::kMkdir, "Mkdir", &ServiceImpl::Mkdir);
    Add(M::kSymlink, "Symlink", &ServiceImpl::Symlink);
    Add(M::kLink, "Link", &ServiceImpl::Link);
    Add(M::kUnlink, "Unlink", &ServiceImpl::Unlink);
    Add(M::kRmdir, "Rmdir", &ServiceImpl::Rmdir);
    Add(M::kRename, "Rename", &ServiceImpl::Rename);
    Add(M::kReadlink, "Readlink", &ServiceImpl::Readlink);
    Add(M::kReadDir, "ReadDir", &ServiceImpl::ReadDir);
    Add(M::kGetXattr, "GetXattr", &ServiceImpl::GetXattr);
    Add(M::kSetXattr, "SetXattr", &ServiceImpl::SetXattr);
    Add(M::kListXattr, "ListXattr", &ServiceImpl::ListXattr);
    Add(M::kRemoveXattr, "RemoveXattr", &ServiceImpl::RemoveXattr);
    Add(M::kStatFs, "StatFs", &ServiceImpl::StatFs);
    Add(M::kOpen, "Open", &ServiceImpl::Open);
    Add(M::kRelease, "Release", &ServiceImpl::Release);
    Add(M::kReleaseBatch, "ReleaseBatch", &ServiceImpl::ReleaseBatch);
    Add(M::kCommit, "Commit", &ServiceImpl::Commit);
    Add(M::kKeepAlive, "KeepAlive", &ServiceImpl::KeepAlive);
    Add(M::kCloseSession, "CloseSession", &ServiceImpl::CloseSession);
    Add(M::kSetLock, "SetLock", &ServiceImpl::SetLock);
    Add(M::kGetLock, "GetLock", &ServiceImpl::GetLock);
    Add(M::kGetClusterMap, "GetClusterMap", &ServiceImpl::GetClusterMap);
    Add(M::kSync, "Sync", &ServiceImpl::Sync);
    Add(M::kAcquireLease, "AcquireLease", &ServiceImpl::AcquireLease);
    Add(M::kReturnLease, "ReturnLease", &ServiceImpl::ReturnLease);
    Add(M::kWaitRecall, "WaitRecall", &ServiceImpl::WaitRecallOnWire);
    Add(M::kAcquireDirLease, "AcquireDirLease", &ServiceImpl::AcquireDirLease);
    Add(M::kChangeBatch, "ChangeBatch", &ServiceImpl::ChangeBatch);
  }

  // Serves one connection: call frames until the peer closes or a header fails to decode.
  void Serve(wire::Conn& conn, const std::atomic<bool>& stopping) const {
    constexpr size_t kKeptBufferBytes = 2u << 20;
    std::string in, out;
    for (;;) {
      std::array<std::byte, wire::kCallHeaderBytes> head;
      if (!wire::ReadFull(conn, head, /*idle=*/true, stopping).ok()) return;
      Result<wire::CallHeader> call = wire::DecodeCall(head);
      if (!call.ok()) {
        // At most one line per 10 s: a peer can send bad frames as fast as it can connect.
        static LogLimiter limiter;
        if (uint64_t held = 0; limiter.Allow(&held)) {
          Logger("meta")->warn("metadata wire rejected a frame: {} ({} more since the last line)",
                               call.status().ToString(), held);
        }
        return;  // the framing cannot be trusted after a bad header
      }
      const auto deadline =
          std::chrono::steady_clock::now() + std::chrono::seconds(wire::kFrameTimeoutSeconds);
      if (!wire::ReadPayload(conn, call->payload_bytes, &in, deadline).ok()) return;
      out.clear();
      wire::CallReplyHeader reply;
      const auto& run = table_[static_cast<size_t>(call->method)];
      if (!run) {
        reply.outcome = wire::CallOutcome::kUnknownMethod;
      } else if (!run(in, &out)) {
        reply.outcome = wire::CallOutcome::kBadRequest;
        out.clear();
      } else if (out.size() > wire::kMaxCallPayloadBytes) {
        Logger("meta")->error("metadata wire reply of {} bytes is over the limit", out.size());
        return;
      } else {
        reply.payload_bytes = static_cast<uint32_t>(out.size());
      }
      const auto reply_head = wire::EncodeCallReply(reply);
      iovec iov[2] = {{const_cast<std::byte*>(reply_head.data()), reply_head.size()},
                      {out.data(), out.size()}};
      calls_.fetch_add(1);
      AQ_FAILPOINT("meta.wire.before_reply");  // delay: a reply late to go out
      if (!wire::WriteFull(conn, iov, 2).ok()) {
        replies_lost_.fetch_add(1);
        return;
      }
      if (in.capacity() > kKeptBufferBytes) std::string().swap(in);
      if (out.capacity() > kKeptBufferBytes) std::string().swap(out);
    }
  }

 private:
  using Run = std::function<bool(std::string_view in, std::string* out)>;

  template <class Req, class Resp>
  void Add(wire::MetaMethod method, const char* name,
           grpc::Status (ServiceImpl::*handler)(grpc::ServerContext*, const Req*, Resp*)) {
    ServiceImpl* service = service_;
    auto counts = std::make_shared<RpcMethodMetrics>("aquifer_meta", name);
    table_[static_cast<size_t>(method)] = [service, handler, counts](std::string_view in,
                                                                     std::string* out) {
      const auto start = std::chrono::steady_clock::now();
      Req req;
      if (!req.ParseFromArray(in.data(), static_cast<int>(in.size()))) {
        counts->CountBadRequest();
        return false;
      }
      Resp resp;
      grpc::ServerContext ctx;
      (service->*handler)(&ctx, &req, &resp);
      counts->Count(CodeFromInt(resp.status().code()),
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      return resp.SerializeToString(out);
    };
  }

  ServiceImpl* service_;
  std::array<Run, static_cast<size_t>(wire::MetaMethod::kEnd)> table_;
  mutable std::atomic<uint64_t> calls_{0};
  mutable std::atomic<uint64_t> replies_lost_{0};  // answers whose write failed

 public:
  uint64_t calls() const { return calls_.load(); }
  uint64_t replies_lost() const { return replies_lost_.load(); }
};

struct MetaRpcServer::Impl {
  std::unique_ptr<ServiceImpl> service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<WireDispatch> dispatch;
  std::unique_ptr<wire::Listener> wire;  // null when the metadata wire is off
  bool stopped = false;
};

Result<std::unique_ptr<MetaRpcServer>> MetaRpcServer::Start(MetadataService* service,
                                                            const std::string& listen,
                                                            uint32_t threads, bool wire,
                                                            uint16_t wire_port,
                                                            const std::string& client_registry,
                                                            std::chrono::seconds capability_lifetime) {
  std::unique_ptr<MetaRpcServer> out(new MetaRpcServer());
  out->impl_ = std::make_unique<Impl>();
  out->impl_->service =
      std::make_unique<ServiceImpl>(service, client_registry, capability_lifetime);
  if (wire) {
    // On the gRPC address's host; clients learn the port from OpenSession.
    std::string host = listen.substr(0, listen.rfind(':'));
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    out->impl_->dispatch = std::make_unique<WireDispatch>(out->impl_->service.get());
    std::random_device random;
    const uint64_t instance = (static_cast<uint64_t>(random()) << 32) ^ random();
    const WireDispatch* dispatch = out->impl_->dispatch.get();
    Result<std::unique_ptr<wire::Listener>> listener = wire::Listener::Start(
        "metadata wire", host, wire_port, instance,
        [dispatch](wire::Conn& conn, const std::atomic<bool>& stopping) {
          dispatch->Serve(conn, stopping);
        });
    if (!listener.ok()) return listener.status();
    out->impl_->wire = std::move(*listener);
    out->impl_->service->SetWire(out->impl_->wire->port(), instance);
  }
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, NewServerCredentials(), &port);
  builder.RegisterService(out->impl_->service.get());
  // The token check first: its verdict is what each handler's CheckCallAuth reads.
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(NewAuthInterceptorFactory("aquifer-meta gRPC"));
  for (auto& c : RpcMetricsInterceptors("aquifer_meta")) creators.push_back(std::move(c));
  builder.experimental().SetInterceptorCreators(std::move(creators));
  builder.SetMaxReceiveMessageSize(static_cast<int>(kMaxRpcMessageBytes));
  builder.SetMaxSendMessageSize(static_cast<int>(kMaxRpcMessageBytes));
  grpc::ResourceQuota quota("aquifer-meta");
  quota.SetMaxThreads(static_cast<int>(std::max<uint32_t>(threads, 2)));
  builder.SetResourceQuota(quota);
  // Enough idle pollers per completion queue that a finished handler goes back to polling
  // instead of exiting (MAX_POLLERS 2 made the sync server create and destroy a thread per
  // request under load): meta_bench, 1 client thread, creates/s 3.0k -> 5.8k, getattrs/s
  // 7.8k -> 12.8k on this 2-core machine.
  // Pollers are a part of the thread budget, not all of it: with MAX_POLLERS at half the cap on
  // each of the 2 queues, idle pollers alone could hold every thread, and a burst of calls that
  // block on the namespace lock was refused ("Server Threadpool Exhausted", RESOURCE_EXHAUSTED;
  // seen with 8 processes on 2 mounts and the old cap of 16). Clients repeat such refusals.
  const int pollers = static_cast<int>(std::clamp<uint32_t>(threads / 8, 2, 8));
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, 2);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 2);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, pollers);
  out->impl_->server = builder.BuildAndStart();
  if (!out->impl_->server || port == 0) return Unavailable("cannot listen on " + listen);
  std::string host = listen.substr(0, listen.rfind(':'));
  out->address_ = host + ":" + std::to_string(port);
  return out;
}

uint16_t MetaRpcServer::wire_port() const { return impl_->wire ? impl_->wire->port() : 0; }
uint64_t MetaRpcServer::wire_calls() const { return impl_->dispatch ? impl_->dispatch->calls() : 0; }
uint64_t MetaRpcServer::wire_replies_lost() const {
  return impl_->dispatch ? impl_->dispatch->replies_lost() : 0;
}

void MetaRpcServer::Shutdown() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->service->StopRecallWaits();  // before the wire waits for its connection threads
  if (impl_->wire) impl_->wire->Shutdown();
  if (!impl_->server) return;  // Start failed
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  impl_->server->Wait();
}

MetaRpcServer::~MetaRpcServer() { Shutdown(); }

}  // namespace aquifer::meta

// The client registry and per-call confinement on aquifer-meta (client_gate.h).
#include "metadata/rpc/client_gate.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "common/logging.h"
#include "common/rpc/rpc_auth.h"

namespace aquifer::meta {
namespace {

namespace gp = google::protobuf;

constexpr int kMaxMessageDepth = 8;  // the deepest inode field is two messages down
constexpr int kMaxParentWalk = 4096;

bool IsInodeField(const gp::FieldDescriptor* f) {
  return f->cpp_type() == gp::FieldDescriptor::CPPTYPE_UINT64 && !f->is_repeated() &&
         (f->name() == "ino" || f->name() == "parent" || f->name() == "new_parent");
}

// Root squash of a `caller` message: its uid, gid and groups of 0 become kNobodyId.
void SquashCaller(gp::Message* caller) {
  const gp::Descriptor* d = caller->GetDescriptor();
  const gp::Reflection* r = caller->GetReflection();
  for (const char* id : {"uid", "gid"}) {
    const gp::FieldDescriptor* f = d->FindFieldByName(id);
    if (f != nullptr && f->cpp_type() == gp::FieldDescriptor::CPPTYPE_UINT32) {
      r->SetUInt32(caller, f, SquashId(r->GetUInt32(*caller, f)));
    }
  }
  const gp::FieldDescriptor* g = d->FindFieldByName("groups");
  if (g == nullptr || !g->is_repeated() || g->cpp_type() != gp::FieldDescriptor::CPPTYPE_UINT32) {
    return;
  }
  for (int j = 0; j < r->FieldSize(*caller, g); ++j) {
    r->SetRepeatedUInt32(caller, g, j, SquashId(r->GetRepeatedUInt32(*caller, g, j)));
  }
}

}  // namespace

ClientGate::ClientGate(MetadataService* service, std::string registry_path)
    : service_(service), registry_path_(std::move(registry_path)) {}

ClientGate::Call::Call(Call&& other) noexcept
    : status_(std::move(other.status_)),
      gate_(other.gate_),
      client_(std::move(other.client_)),
      root_(other.root_),
      reply_(other.reply_) {
  other.gate_ = nullptr;
}

ClientGate::Call::~Call() {
  if (gate_ != nullptr && reply_ != nullptr && status_.ok()) {
    gate_->TranslateReply(client_, root_, reply_, 0);
  }
}

void ClientGate::MaybeReload() {
  const auto now = std::chrono::steady_clock::now();
  if (loaded_ && now < next_check_) return;
  next_check_ = now + kRegistryCheckInterval;
  loaded_ = true;
  if (registry_path_.empty()) return;
  struct stat st {};
  int64_t mtime_ns = 0, size = 0;
  uint64_t ino = 0;
  if (::stat(registry_path_.c_str(), &st) == 0) {
    mtime_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
    size = st.st_size;
    ino = st.st_ino;
  }
  if (mtime_ns == file_mtime_ns_ && size == file_size_ && ino == file_ino_) return;
  file_mtime_ns_ = mtime_ns;
  file_size_ = size;
  file_ino_ = ino;
  std::vector<ClientExport> exports;
  if (ino != 0) {
    std::ifstream in(registry_path_);
    std::stringstream text;
    text << in.rdbuf();
    Result<std::vector<ClientExport>> parsed = ParseClientRegistry(text.str());
    if (!parsed.ok()) {
      Logger("meta")->error("client registry {} refused, every client credential is refused "
                            "until it is fixed: {}",
                            registry_path_, parsed.status().message());
      registry_broken_ = true;
      clients_.clear();
      return;
    }
    exports = std::move(*parsed);
  }
  registry_broken_ = false;
  std::map<std::string, ClientState> next;
  for (ClientExport& e : exports) {
    ClientState state;
    if (auto it = clients_.find(e.who.name); it != clients_.end() && it->second.entry == e) {
      state = std::move(it->second);  // unchanged: keep its root and what it has seen
    }
    state.entry = std::move(e);
    next.emplace(state.entry.who.name, std::move(state));
  }
  Logger("meta")->info("load client registry path={} clients={}", registry_path_, next.size());
  clients_ = std::move(next);
}

Result<InodeId> ClientGate::RootOf(const std::string& client, const std::string& path) {
  {
    std::lock_guard lock(mu_);
    auto it = clients_.find(client);
    if (it != clients_.end() && it->second.root.value() != 0) return it->second.root;
  }
  InodeId cur = kRootInode;
  for (const std::string& part : ExportPathComponents(path)) {
    Result<Inode> next = service_->Lookup(cur, part, Caller{});
    if (!next.ok()) return NotFound("export path " + path + " does not exist");
    if (!next->is_dir()) return NotFound("export path " + path + " is not a directory");
    cur = next->ino;
  }
  std::lock_guard lock(mu_);
  auto it = clients_.find(client);
  if (it != clients_.end() && it->second.entry.path == path) it->second.root = cur;
  return cur;
}

Status ClientGate::CheckInside(const std::string& client, InodeId root, InodeId ino) {
  if (ino == root) return OkStatus();
  const Status outside = NotFound("inode " + ino.ToString() + " not found");
  Result<Inode> n = service_->GetAttr(ino);
  if (!n.ok()) return n.status();
  if (!n->is_dir()) {
    std::lock_guard lock(mu_);
    auto it = clients_.find(client);
    if (it != clients_.end() && it->second.seen.count(ino.value()) != 0) return OkStatus();
    return outside;
  }
  InodeId cur = n->parent;
  for (int depth = 0; depth < kMaxParentWalk; ++depth) {
    if (cur == root) return OkStatus();
    if (cur == kRootInode) return outside;
    Result<Inode> p = service_->GetAttr(cur);
    if (!p.ok()) return outside;
    cur = p->parent;
  }
  return outside;
}

Status ClientGate::ConfineMessage(const std::string& client, InodeId root, bool squash,
                                  gp::Message* m, int depth) {
  if (depth > kMaxMessageDepth) return InvalidArgument("request nested too deep");
  const gp::Descriptor* d = m->GetDescriptor();
  const gp::Reflection* r = m->GetReflection();
  const bool confined = root != kRootInode;
  for (int i = 0; i < d->field_count(); ++i) {
    const gp::FieldDescriptor* f = d->field(i);
    if (IsInodeField(f)) {
      const uint64_t v = r->GetUInt64(*m, f);
      if (v == 0 || !confined) continue;
      const InodeId ino = v == kRootInode.value() ? root : InodeId(v);
      AQ_RETURN_IF_ERROR(CheckInside(client, root, ino));
      r->SetUInt64(m, f, ino.value());
    } else if (confined && f->type() == gp::FieldDescriptor::TYPE_BYTES && !f->is_repeated() &&
               f->name() == "name" && d->name() == "LookupRequest") {
      const std::string name = r->GetString(*m, f);
      if (name == "." || name == "..") return NotFound("no '" + name + "' in an export");
    } else if (f->cpp_type() == gp::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int j = 0; j < r->FieldSize(*m, f); ++j) {
          AQ_RETURN_IF_ERROR(
              ConfineMessage(client, root, squash, r->MutableRepeatedMessage(m, f, j), depth + 1));
        }
        continue;
      }
      if (!r->HasField(*m, f)) continue;
      gp::Message* sub = r->MutableMessage(m, f);
      if (squash && f->name() == "caller") {
        SquashCaller(sub);
        continue;
      }
      AQ_RETURN_IF_ERROR(ConfineMessage(client, root, squash, sub, depth + 1));
    }
  }
  return OkStatus();
}

void ClientGate::TranslateReply(const std::string& client, InodeId root, gp::Message* m,
                                int depth) {
  if (depth > kMaxMessageDepth) return;
  const gp::Descriptor* d = m->GetDescriptor();
  const gp::Reflection* r = m->GetReflection();
  const bool confined = root != kRootInode;
  for (int i = 0; i < d->field_count(); ++i) {
    const gp::FieldDescriptor* f = d->field(i);
    if (IsInodeField(f)) {
      const uint64_t v = r->GetUInt64(*m, f);
      if (v == 0) continue;
      if (confined && v == root.value()) {
        r->SetUInt64(m, f, kRootInode.value());
      } else if (f->name() == "ino" && confined) {
        std::lock_guard lock(mu_);
        auto it = clients_.find(client);
        if (it == clients_.end()) continue;
        if (it->second.seen.size() >= kMaxSeenInodes) it->second.seen.clear();
        it->second.seen.insert(v);
      }
    } else if (confined && f->cpp_type() == gp::FieldDescriptor::CPPTYPE_UINT64 &&
               f->is_repeated() && f->name() == "inodes") {
      for (int j = 0; j < r->FieldSize(*m, f); ++j) {
        if (r->GetRepeatedUInt64(*m, f, j) == root.value()) {
          r->SetRepeatedUInt64(m, f, j, kRootInode.value());
        }
      }
    } else if (f->cpp_type() == gp::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int j = 0; j < r->FieldSize(*m, f); ++j) {
          TranslateReply(client, root, r->MutableRepeatedMessage(m, f, j), depth + 1);
        }
      } else if (r->HasField(*m, f)) {
        TranslateReply(client, root, r->MutableMessage(m, f), depth + 1);
      }
    }
  }
}

ClientGate::Call ClientGate::Admit(grpc::ServerContext* ctx, ClientAccess access,
                                   gp::Message* request, gp::Message* reply) {
  Call call;
  const std::optional<ClientIdentity> who = CallClient(ctx);
  if (!who) return call;  // a cluster-key holder: full rights
  std::optional<ClientExport> entry;
  {
    std::lock_guard lock(mu_);
    MaybeReload();
    if (auto it = clients_.find(who->name); it != clients_.end()) entry = it->second.entry;
  }
  call.status_ = AuthorizeClientCall(entry, *who, PeerAddress(ctx->peer()), access);
  if (!call.status_.ok()) {
    Logger("meta")->debug("refuse client call client={} peer={}: {}", who->name, ctx->peer(),
                          call.status_.message());
    return call;
  }
  Result<InodeId> root = RootOf(who->name, entry->path);
  if (!root.ok()) {
    call.status_ = root.status();
    return call;
  }
  if (request != nullptr) {
    call.status_ = ConfineMessage(who->name, *root, entry->root_squash, request, 0);
    if (!call.status_.ok()) return call;
  }
  call.gate_ = this;
  call.client_ = who->name;
  call.root_ = *root;
  call.reply_ = reply;
  return call;
}

}  // namespace aquifer::meta

// Client credentials on aquifer-meta (docs/design.md "Client credentials and exports"): the
// registry of exports, re-read when its file changes, and the check every MetaService handler
// runs before it reads its request. Under rpc/ because it works on the request and reply
// messages through protobuf reflection, so one rule covers every RPC: each uint64 field named
// `ino`, `parent` or `new_parent` (at any depth) is an inode the call names, each `caller`
// message is who asks, and each `ino` in a reply is an inode the client has now seen.
#pragma once

#include <google/protobuf/message.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>

#include "aquifer/ids.h"
#include "aquifer/status.h"
#include "common/client_credential.h"
#include "metadata/metadata_service.h"

namespace aquifer::meta {

class ClientGate {
 public:
  // Inode numbers a confined client may name by number (files it found by lookup, readdir or
  // create), per client; past this the set is cleared and the client finds them again.
  static constexpr size_t kMaxSeenInodes = 1 << 20;
  // How often the registry file's change time is looked at, at most.
  static constexpr std::chrono::seconds kRegistryCheckInterval{1};

  // `service` is not owned and must outlive the gate. `registry_path` is the client registry
  // (client_credential.h's format; "" = none: every client credential is refused). A missing
  // file is an empty registry; one that does not parse refuses every client (fail closed) and
  // logs the error once per change.
  ClientGate(MetadataService* service, std::string registry_path);

  // One admitted call. While it lives, the reply it was given is translated when it ends (the
  // export's root inode is shown as inode 1) and the inodes it names are recorded as seen.
  class Call {
   public:
    Call() = default;
    Call(Call&& other) noexcept;
    Call& operator=(Call&&) = delete;
    ~Call();
    const Status& status() const { return status_; }
    bool ok() const { return status_.ok(); }

   private:
    friend class ClientGate;
    Status status_;
    ClientGate* gate_ = nullptr;  // null: nothing to translate (cluster-key holder, refused)
    std::string client_;
    InodeId root_;
    google::protobuf::Message* reply_ = nullptr;
  };

  // Checks a call before its handler runs. A cluster-key holder (CallClient nullopt) passes
  // untouched. A client credential must be in the registry with the same id and access, call
  // from an allowed network, and ask for `access` its credential grants (AuthorizeClientCall);
  // then, in `request` (rewritten in place: the handler owns it and has not read it yet), inode
  // 1 becomes the export's root, every inode named must lie in the export (directories by their
  // ".." chain, other inodes by having been seen), names "." and ".." are refused, and with root
  // squash uid and gid 0 become kNobodyId. The Call is not ok when the call must not run: its
  // status is kPermissionDenied, kReadOnly, or kNotFound for an inode outside the export.
  // `reply` must outlive the Call. Thread-safe.
  Call Admit(grpc::ServerContext* ctx, ClientAccess access, google::protobuf::Message* request,
             google::protobuf::Message* reply);

 private:
  struct ClientState {
    ClientExport entry;
    InodeId root;  // 0 = not resolved yet
    std::unordered_set<uint64_t> seen;
  };

  // Re-reads the registry when its file changed (at most once per kRegistryCheckInterval).
  void MaybeReload();
  // The export's root inode, resolving and caching it. Errors: kNotFound when the path is gone.
  Result<InodeId> RootOf(const std::string& client, const std::string& path);
  // OK when `ino` lies in the export of `client` rooted at `root`; kNotFound otherwise.
  Status CheckInside(const std::string& client, InodeId root, InodeId ino);
  Status ConfineMessage(const std::string& client, InodeId root, bool squash,
                        google::protobuf::Message* m, int depth);
  void TranslateReply(const std::string& client, InodeId root, google::protobuf::Message* m,
                      int depth);

  MetadataService* const service_;
  const std::string registry_path_;
  std::mutex mu_;  // guards everything below
  std::chrono::steady_clock::time_point next_check_;
  bool loaded_ = false;
  bool registry_broken_ = false;
  int64_t file_mtime_ns_ = -1;
  uint64_t file_ino_ = 0;
  int64_t file_size_ = -1;
  std::map<std::string, ClientState> clients_;
};

}  // namespace aquifer::meta

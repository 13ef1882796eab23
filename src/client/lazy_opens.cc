// Opens without a round trip (docs/design.md "Opens without a round trip"): a read-only open
// answered from the attributes this client keeps under its cache lease, told to the metadata
// server only when something could make the difference matter.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>

#include "client/client_impl.h"
#include "common/logging.h"

namespace aquifer {

namespace {
// POSIX read permission by mode bits, as the metadata server checks it (CheckAccess): root
// always; else the owner, group (primary or supplementary) or other class, the first that
// matches.
bool MayRead(const Attributes& a, const Caller& c) {
  if (c.uid == 0) return true;
  uint32_t bits;
  if (c.uid == a.uid) {
    bits = a.mode >> 6;
  } else if (c.gid == a.gid || std::find(c.groups.begin(), c.groups.end(), a.gid) != c.groups.end()) {
    bits = a.mode >> 3;
  } else {
    bits = a.mode;
  }
  return (bits & 4) != 0;
}

// Whether a root squash would judge `c` as another caller (uid, gid or a group 0 become
// nobody). Only the registry on the metadata host says whether a client credential's export
// squashes, so on a credential mount such a caller's opens go to the server.
bool Squashable(const Caller& c) {
  return c.uid == 0 || c.gid == 0 ||
         std::find(c.groups.begin(), c.groups.end(), 0u) != c.groups.end();
}
}  // namespace

std::optional<Client::Opened> Client::Impl::OpenLazily(InodeId inode, int flags,
                                                       const Caller& caller) {
  if (!options_.lazy_opens || !cache_leases_on_.load()) return std::nullopt;
  if ((flags & O_ACCMODE) != O_RDONLY || (flags & (O_TRUNC | O_CREAT)) != 0) return std::nullopt;
  std::optional<Attributes> kept = meta_->KeptAttr(inode);
  if (!kept || !S_ISREG(kept->mode) || kept->nlink == 0 || (client_credential_ && Squashable(caller)) ||
      !MayRead(*kept, caller)) {
    return std::nullopt;
  }
  Result<Opened> opened = OpenWith(client::OpenReply{*kept, 0}, flags);
  if (!opened.ok()) return std::nullopt;  // the server's open gives the error
  OpenFile* f = opened->file.get();
  {
    std::lock_guard lock(lazy_mu_);
    f->lazy = OpenFile::Lazy::kLazy;
    f->lazy_caller = caller;
    lazy_[inode].push_back(f);
    lazy_count_.fetch_add(1);
  }
  lazy_opened_.fetch_add(1);
  // A recall of the inode drops the kept attributes (GrpcMetaClient::WaitRecalls) before it is
  // handled (HandleCacheRecall, which tells the server of the lazy opens it finds). If it came
  // between the look above and the listing, its handling may have missed this handle: tell the
  // server now. Kept attributes still there (of the same version) mean no recall came yet, and
  // its handling will find the handle.
  std::optional<Attributes> still = meta_->KeptAttr(inode);
  if (!still || still->data_version != kept->data_version) {
    RegisterLazy(&inode);
    bool lost;
    {
      std::unique_lock lock(lazy_mu_);
      lazy_cv_.wait(lock, [&] { return f->lazy != OpenFile::Lazy::kRegistering; });
      lost = f->lazy == OpenFile::Lazy::kLost;
    }
    if (lost) {
      // The server no longer has the inode (the recall's change deleted it, and its hold ended
      // before this open was told): the handle could read nothing. The server's open answers
      // instead (kNotFound: the mount's ESTALE has the kernel look the name up again).
      Status released = Release(std::move(opened->file));
      (void)released;
      return std::nullopt;
    }
  }
  return std::move(*opened);
}

void Client::Impl::RegisterLazy(const InodeId* inode) {
  std::vector<OpenFile*> todo;
  {
    std::lock_guard lock(lazy_mu_);
    auto take = [&](std::vector<OpenFile*>& files) {
      for (OpenFile* f : files) {
        f->lazy = OpenFile::Lazy::kRegistering;
        todo.push_back(f);
      }
      lazy_count_.fetch_sub(files.size());
    };
    if (inode != nullptr) {
      auto it = lazy_.find(*inode);
      if (it == lazy_.end()) return;
      take(it->second);
      lazy_.erase(it);
    } else {
      for (auto& [ino, files] : lazy_) take(files);
      lazy_.clear();
    }
  }
  if (todo.empty()) return;
  for (OpenFile* f : todo) {
    // Not WithSession: this runs inside RenewSession too. A lost session is renewed by the
    // caller's next call, and every handle still lazy is told again then.
    Result<client::OpenReply> told = meta_->Open(f->inode, O_RDONLY, session(), f->lazy_caller);
    if (!told.ok()) {
      Logger("client")->warn("tell lazy open inode={} failed status={}", f->inode.value(),
                             told.status().ToString());
    }
    lazy_told_.fetch_add(1);
    std::lock_guard lock(lazy_mu_);
    f->lazy = told.ok() ? OpenFile::Lazy::kTold : OpenFile::Lazy::kLost;
  }
  lazy_cv_.notify_all();
}

bool Client::Impl::ForgetLazy(OpenFile& f) {
  std::unique_lock lock(lazy_mu_);
  lazy_cv_.wait(lock, [&] { return f.lazy != OpenFile::Lazy::kRegistering; });
  switch (f.lazy) {
    case OpenFile::Lazy::kLazy: {
      auto it = lazy_.find(f.inode);
      if (it != lazy_.end()) {
        auto& files = it->second;
        files.erase(std::remove(files.begin(), files.end(), &f), files.end());
        if (files.empty()) lazy_.erase(it);
        lazy_count_.fetch_sub(1);
      }
      return true;
    }
    case OpenFile::Lazy::kLost:
      return true;
    default:
      return false;
  }
}

}  // namespace aquifer

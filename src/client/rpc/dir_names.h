// Complete name lists of directories, kept under cache leases (docs/design.md "Cache leases",
// "Negative lookups without a round trip"). While this client knows every name of a directory
// and holds the cache lease that makes the metadata server recall any other session's change of
// them, a lookup of a name that is not in the list is answered "absent" here: a create, mkdir,
// rsync temp file or rename target in that directory then costs one round trip, not two.
//
// A list becomes complete in two ways: this client made the directory (Mkdir's reply: empty), or
// it read every page of the directory after a few lookups there missed. It stays complete
// through this client's own changes (the caller reports each one that succeeded); a recall of a
// name from another session makes that name unsure (asked of the server again) and a failed or
// unknown-outcome change of this client drops the list. Answers are trusted only while the
// client's recall channel answered within half a cache lease (Heard): a holder cut off longer
// may have had its lease broken by the server.
//
// Attributes too (docs/design.md "Positive lookups and cold stats without a round trip"): a
// listed name's inode attributes (from a plus listing, a lookup the server answered, or this
// client's own create) answer its lookup and a GetAttr of the inode here, while the lease holds.
// Only regular files, symlinks and special files with one link are kept: each then has exactly
// one name, in a list, so this client's own unlink or rename of it reaches the cached attributes
// through that name, and a link(2) names the inode. Every call of this client that changes an
// inode's attributes (SetAttr, Open, Commit, Release, Link, xattrs, write leases) reports it with
// Touched, before it is sent and after its reply; another session's change comes as a recall of
// the inode (Touched too). A lookup or listing reply is taken only if nothing touched its inodes
// or directory since its ticket (Begin), so a reply older than a change cannot undo it.
//
// Looked-up attributes (docs/design.md "Opens without a round trip"): a lookup the server
// answered in a directory with no complete list also keeps the found inode's attributes (same
// rule: one link, not a directory, nothing touched since the ticket, the directory unchanged),
// indexed by its (directory, name), so an open or GetAttr of a file the kernel just looked up
// costs no second round trip. They answer CachedAttr only, never a lookup (the directory's other
// names are not known). This client's own unlink, rename, create over, recall or failed change
// of that (directory, name) drops them through the index; at most `max_looked` are kept (past
// it all of them go).
//
// The caller checks search permission itself (the mount's default_permissions makes the kernel
// do it): an answer here does not look at the directory's mode.
//
// Thread-safe: one mutex guards all of it; no call blocks on anything else.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "aquifer/client.h"
#include "aquifer/ids.h"

namespace aquifer::client {

class DirNames {
 public:
  using Clock = std::chrono::steady_clock;
  struct Limits {
    size_t max_names_per_dir = 1 << 16;  // a larger directory is not listed (nor kept growing)
    size_t max_names = 1 << 18;          // over all directories; past it every list is dropped
    size_t max_unsure_per_dir = 1024;    // recalled names per list; past it the list is dropped
    uint32_t first_listing_after = 4;    // misses in a directory before it is listed; doubles
    uint32_t max_listing_after = 1024;   //   after each listing, up to this
    uint32_t first_plus_listing_after = 16;  // lookups the server answered (found) in a
                                             //   directory before it is listed with attributes
    size_t max_looked = 1 << 14;  // looked-up attributes outside complete lists
  };
  DirNames() : DirNames(Limits{}) {}
  explicit DirNames(Limits limits) : limits_(limits) {}

  // `lease`: the server's cache lease (0: off, nothing is answered).
  void SetLease(std::chrono::milliseconds lease);
  // A WaitRecalls sent at `sent` was answered: answers are trusted until sent + lease / 2.
  void Heard(Clock::time_point sent);
  // Until when answers are trusted (the epoch of Clock when never, or with no lease).
  Clock::time_point TrustedUntil();

  enum class Known { kUnknown, kAbsent, kPresent };
  Known Find(InodeId dir, std::string_view name, Clock::time_point now = Clock::now());
  // Find, and for a present name the attributes of its inode when they are kept.
  struct Found {
    Known known = Known::kUnknown;
    std::optional<Attributes> attr;
  };
  Found FindEntry(InodeId dir, std::string_view name, Clock::time_point now = Clock::now());
  // The kept attributes of `inode` (see above), if any and the lease holds.
  std::optional<Attributes> CachedAttr(InodeId inode, Clock::time_point now = Clock::now());

  // A lookup in `dir` went to the server and found nothing. True when the caller should now list
  // the directory (Begin, every page, Install).
  bool NoteMiss(InodeId dir);
  // A lookup in `dir` went to the server and found the name. True when the caller should now
  // list the directory with attributes (a stat of many of its names, as `ls -l`, `find` or a
  // training job's first epoch does: Lustre calls prefetching it "statahead").
  bool NoteFound(InodeId dir);

  // Listing: Begin before the first request whose answers Install uses; Install takes the names
  // only if nothing about `dir` changed in between (a recall, a change of this client, a drop).
  // Begin(InodeId()) is the ticket for a directory this client is making (Mkdir).
  struct Ticket {
    uint64_t epoch = 0;
    uint64_t dir_gen = 0;
    uint64_t touch_seq = 0;  // Touched calls so far
  };
  Ticket Begin(InodeId dir);
  bool Install(InodeId dir, const Ticket& ticket, std::vector<std::string> names);
  // A listing with inode numbers, and attributes where it was a plus listing.
  struct Listed {
    std::string name;
    InodeId inode;
    std::optional<Attributes> attr;
  };
  bool InstallListed(InodeId dir, const Ticket& ticket, std::vector<Listed> entries);
  // The server answered a lookup of `name` in `dir` (sent after `ticket`): `attr` is what it
  // found, null for kNotFound. A complete list takes the answer (an unsure name is settled) if
  // nothing about `dir` changed since the ticket; the attributes if nothing touched the inode.
  void Answered(InodeId dir, std::string_view name, const Ticket& ticket, const Attributes* attr);

  // This client's own changes, after the server said they succeeded. `attr` (Added): the new
  // inode's attributes from the reply, kept as Answered does (`ticket` taken before the call).
  void Added(InodeId dir, std::string_view name, const Attributes* attr = nullptr,
             const Ticket* ticket = nullptr);
  void Removed(InodeId dir, std::string_view name);
  // The attributes of `inode` changed or may have (this client's call, or a recall).
  void Touched(InodeId inode);
  // This client's own change of `inode` (a SetAttr, a Commit) is about to be sent: as Touched,
  // remembering where its attributes were kept, so Changed can keep the reply there.
  struct Change {
    uint64_t epoch = 0;
    uint64_t seq = 0;  // the touch this made
    uint64_t dir = 0;  // the inode's one name, when its attributes were kept (else 0)
    std::string name;
  };
  Change Changing(InodeId inode);
  // The change succeeded and its reply says `inode` is now `attr`: kept again under the name it
  // had, when nothing else touched the inode since Changing (a recall, another call of this
  // client) and that name still names it; as Touched otherwise. Either way replies of lookups
  // and listings asked during the change are not kept (they may predate it). So a file this
  // client writes keeps answering the kernel's GETATTR after its own commit, chown and chmod
  // (tar's futimens, fchown, fchmod, then the kernel asks GETATTR).
  void Changed(InodeId inode, const Change& change, const Attributes& attr);
  // A commit of `inode` by this client is queued (MetaClient::QueueCommit): lookup and listing
  // replies asked before now are not kept (they may predate it), but the attributes kept for it
  // stay (its type and links do not change; who answers its size from them waits for the
  // commit first).
  void Queued(InodeId inode);
  // The queued commit was answered with `attr`: replaces the attributes kept for `inode`, if
  // any are still kept (a change since, such as a SetAttr's Changing, dropped them, and its own
  // reply is newer). Touches nothing.
  void Refresh(const Attributes& attr);
  // Something about `dir`'s names is no longer known (a failed change, an exchange).
  void Forget(InodeId dir);
  // Another session changed `name` in `dir` (a cache recall).
  void Recalled(InodeId dir, std::string_view name);
  // Every list goes (a new session, a new server run).
  void ForgetAll();

  // For tests and logs.
  size_t complete_dirs();
  size_t names();
  size_t attrs();
  size_t looked();  // looked-up attributes outside complete lists

 private:
  struct List {
    std::unordered_map<std::string, uint64_t> names;  // name -> inode (0: not known)
    std::unordered_set<std::string> unsure;           // recalled: ask the server
  };
  struct Kept {
    Attributes attr;
    uint64_t dir = 0;  // the one name of the inode: dir, name (a list holds it, or looked_)
    std::string name;
    bool looked = false;  // kept from a lookup outside a complete list: indexed in looked_
  };
  struct Misses {
    uint32_t count = 0;
    uint32_t need = 0;
  };
  void DropLocked(InodeId dir);
  void TouchLocked(InodeId dir);
  void TouchInodeLocked(uint64_t ino);
  void DropAttrLocked(uint64_t ino);
  // Looked-up attributes: drops the one kept for (dir, name), or every one of `dir`.
  void DropLookedLocked(uint64_t dir, const std::string& name);
  void DropLookedDirLocked(uint64_t dir);
  // Keeps `attr`, found by a lookup of `name` in `dir` (no complete list) after `ticket`.
  void KeepLookedLocked(uint64_t dir, const std::string& name, const Attributes& attr,
                        const Ticket& ticket);
  // Keeps `attr` for `name` in `dir`'s list if it may be kept and nothing touched it since
  // `ticket`.
  void KeepLocked(uint64_t dir, const std::string& name, const Attributes& attr,
                  const Ticket& ticket);
  // NoteMiss and NoteFound: counts one in `counts`; true when `first` (then doubling) is reached.
  bool CountLocked(std::unordered_map<uint64_t, Misses>& counts, InodeId dir, uint32_t first);
  uint64_t GenLocked(InodeId dir) const;  // gens_[dir], 0 when none
  bool Trusted(Clock::time_point now) const { return lease_.count() > 0 && now < trusted_until_; }

  const Limits limits_;
  std::mutex mu_;
  std::chrono::milliseconds lease_{0};
  Clock::time_point trusted_until_{};
  uint64_t epoch_ = 1;  // bumped by ForgetAll and by bookkeeping overflow
  std::unordered_map<uint64_t, List> lists_;
  std::unordered_map<uint64_t, uint64_t> gens_;  // per directory: changes seen (Touch)
  std::unordered_map<uint64_t, Misses> misses_;
  std::unordered_map<uint64_t, Misses> founds_;
  std::unordered_map<uint64_t, Kept> attrs_;
  std::map<std::pair<uint64_t, std::string>, uint64_t> looked_;  // (dir, name) -> inode
  uint64_t touch_seq_ = 0;
  uint64_t touch_floor_ = 0;  // tickets older than this cannot be checked (touched_ overflowed)
  std::unordered_map<uint64_t, uint64_t> touched_;  // inode -> touch_seq_ of its last Touched
  size_t total_names_ = 0;
};

}  // namespace aquifer::client

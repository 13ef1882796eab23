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
// The caller checks search permission itself (the mount's default_permissions makes the kernel
// do it): an absent answer does not look at the directory's mode.
//
// Thread-safe: one mutex guards all of it; no call blocks on anything else.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

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
  };
  DirNames() : DirNames(Limits{}) {}
  explicit DirNames(Limits limits) : limits_(limits) {}

  // `lease`: the server's cache lease (0: off, nothing is answered).
  void SetLease(std::chrono::milliseconds lease);
  // A WaitRecalls sent at `sent` was answered: answers are trusted until sent + lease / 2.
  void Heard(Clock::time_point sent);

  enum class Known { kUnknown, kAbsent, kPresent };
  Known Find(InodeId dir, std::string_view name, Clock::time_point now = Clock::now());

  // A lookup in `dir` went to the server and found nothing. True when the caller should now list
  // the directory (Begin, every page, Install).
  bool NoteMiss(InodeId dir);

  // Listing: Begin before the first request whose answers Install uses; Install takes the names
  // only if nothing about `dir` changed in between (a recall, a change of this client, a drop).
  // Begin(InodeId()) is the ticket for a directory this client is making (Mkdir).
  struct Ticket {
    uint64_t epoch = 0;
    uint64_t dir_gen = 0;
  };
  Ticket Begin(InodeId dir);
  bool Install(InodeId dir, const Ticket& ticket, std::vector<std::string> names);

  // This client's own changes, after the server said they succeeded.
  void Added(InodeId dir, std::string_view name);
  void Removed(InodeId dir, std::string_view name);
  // Something about `dir`'s names is no longer known (a failed change, an exchange).
  void Forget(InodeId dir);
  // Another session changed `name` in `dir` (a cache recall).
  void Recalled(InodeId dir, std::string_view name);
  // Every list goes (a new session, a new server run).
  void ForgetAll();

  // For tests and logs.
  size_t complete_dirs();
  size_t names();

 private:
  struct List {
    std::unordered_set<std::string> names;
    std::unordered_set<std::string> unsure;  // recalled: ask the server
  };
  struct Misses {
    uint32_t count = 0;
    uint32_t need = 0;
  };
  void DropLocked(InodeId dir);
  void TouchLocked(InodeId dir);

  const Limits limits_;
  std::mutex mu_;
  std::chrono::milliseconds lease_{0};
  Clock::time_point trusted_until_{};
  uint64_t epoch_ = 1;  // bumped by ForgetAll and by bookkeeping overflow
  std::unordered_map<uint64_t, List> lists_;
  std::unordered_map<uint64_t, uint64_t> gens_;  // per directory: changes seen (Touch)
  std::unordered_map<uint64_t, Misses> misses_;
  size_t total_names_ = 0;
};

}  // namespace aquifer::client

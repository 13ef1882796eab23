#include "cli/fsck.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <unordered_map>

#include "cli/move_progress.h"
#include "cli/status_report.h"
#include "common/printable.h"

namespace aquifer::cli {

namespace {

struct FileInfo {
  uint64_t size = 0;
  uint64_t data_version = 0;
  uint32_t k = 0, m = 0, unit_bytes = 0;
  std::string path;
  bool stripes_known = false;
  std::vector<StripeExtent> stripes;  // recorded as written (the file's stripe map)
  VersionRanges abandoned;            // a crashed writer's versions: leftovers, not data
  // After a restore from a backup: the versions written after the backup, [first, last]
  // (first > last: none). Orphans.
  uint64_t restored_first = 1, restored_last = 0;
  bool RestoredLeftover(uint64_t version) const {
    return restored_first <= version && version <= restored_last;
  }
  bool Abandoned(uint64_t version) const {
    for (const auto& [first, last] : abandoned) {
      if (first <= version && version <= last) return true;
    }
    return false;
  }
  uint64_t checked_to = 0;            // stripes below this were seen in the listings or counted
  uint64_t StripeSpan() const { return static_cast<uint64_t>(k) * unit_bytes; }
  uint64_t EndStripe() const {
    const uint64_t span = StripeSpan();
    return span == 0 ? 0 : size / span + (size % span != 0 ? 1 : 0);
  }
  // The recorded floor of `stripe`, or nullopt when the map says it is a hole (or is unknown).
  std::optional<uint64_t> FloorOf(uint64_t stripe) const {
    for (const StripeExtent& e : stripes) {
      if (e.begin_stripe <= stripe && stripe < e.end_stripe) return e.floor_version;
    }
    return std::nullopt;
  }
};

// One server's listing, fetched a page at a time.
class Cursor {
 public:
  Cursor(FsckRpc& rpc, std::string address, uint32_t page)
      : rpc_(rpc), address_(std::move(address)), page_(page) {}
  // The next chunk version, or nullptr at the end. Errors: the ListChunks failure.
  Result<const FsckChunk*> Peek() {
    while (idx_ >= chunks_.size()) {
      if (eof_) return static_cast<const FsckChunk*>(nullptr);
      InodeId ino;
      uint64_t stripe = 0;
      uint32_t pos = 0;
      if (!chunks_.empty()) {
        ino = chunks_.back().ino;
        stripe = chunks_.back().stripe;
        pos = chunks_.back().position;
      }
      Result<FsckChunkPage> p = rpc_.ListChunks(address_, ino, stripe, pos, page_);
      if (!p.ok()) return p.status();
      chunks_ = std::move(p->chunks);
      idx_ = 0;
      eof_ = p->eof || chunks_.empty();
    }
    return &chunks_[idx_];
  }
  void Pop() { ++idx_; }
  const std::string& address() const { return address_; }

 private:
  FsckRpc& rpc_;
  std::string address_;
  uint32_t page_;
  std::vector<FsckChunk> chunks_;
  size_t idx_ = 0;
  bool eof_ = false;
};

struct Held {  // orphan chunk versions of one inode, by server
  std::set<size_t> servers;
  uint64_t chunks = 0;
  uint64_t bytes = 0;
  uint64_t first_stripe = UINT64_MAX;
  uint64_t max_version = 0;
};

std::string JoinPositions(const std::vector<uint32_t>& v) {
  std::string s;
  for (uint32_t p : v) s += (s.empty() ? "" : ",") + std::to_string(p);
  return s;
}

// Positions a whole stripe version needs, and how many of them are empty data chunks.
struct Rule {
  std::vector<uint32_t> needed;
  uint32_t empty_data = 0;
  uint32_t k = 1;
  bool replicated = false;
};

Rule RuleFor(const FsckChunk* placed, const FileInfo& f, uint64_t stripe) {
  Rule r;
  uint32_t k = f.k, m = f.m, unit = f.unit_bytes;
  uint64_t sb = 0;
  bool replicated = false;
  if (placed != nullptr && placed->has_placement) {
    k = placed->k;
    m = placed->m;
    unit = placed->unit_bytes;
    sb = placed->stripe_bytes;
    replicated = placed->replicated;
  } else {
    const uint64_t span = static_cast<uint64_t>(k) * unit;
    const uint64_t start = stripe * span;
    sb = f.size > start ? std::min(f.size - start, span) : 0;
    replicated = sb < unit;
  }
  r.k = k;
  r.replicated = replicated;
  if (replicated) {
    for (uint32_t i = 0; i <= m; ++i) r.needed.push_back(i);
    return r;
  }
  for (uint32_t i = 0; i < k; ++i) {
    const uint64_t off = static_cast<uint64_t>(i) * unit;
    if (sb > off) {
      r.needed.push_back(i);
    } else {
      ++r.empty_data;
    }
  }
  for (uint32_t i = k; i < k + m; ++i) r.needed.push_back(i);
  return r;
}

// Findings and the progress bar share the terminal: the bar is drawn without a newline, and
// the next finding written through this buffer first clears that line.
class BarClearingBuf : public std::streambuf {
 public:
  explicit BarClearingBuf(std::streambuf* to) : to_(to) {}
  void BarShown() { bar_shown_ = true; }
  void ClearBar() {
    if (!bar_shown_) return;
    bar_shown_ = false;
    to_->sputn("\r\033[K", 4);
  }

 protected:
  int overflow(int c) override {
    ClearBar();
    return c == traits_type::eof() ? traits_type::not_eof(c) : to_->sputc(static_cast<char>(c));
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    ClearBar();
    return to_->sputn(s, n);
  }
  int sync() override { return to_->pubsync(); }

 private:
  std::streambuf* to_;
  bool bar_shown_ = false;
};

class Checker {
 public:
  Checker(FsckRpc& rpc, const FsckOptions& o, std::ostream& out)
      : rpc_(rpc), o_(o), raw_(out), clearing_(out.rdbuf()), out_(&clearing_) {}

  Result<FsckReport> Run() {
    Result<FsckRestoreFloors> floors = rpc_.RestoreFloors();
    if (!floors.ok()) return floors.status();
    floors_ = *floors;
    if (floors_.version > 0) {
      out_ << "note: the namespace was restored from a backup (first version after it "
           << floors_.version << ", first inode " << floors_.ino
           << "): chunks written after the backup are orphans\n";
    }
    if (o_.progress_bar || o_.progress_interval_s > 0) {
      Result<uint64_t> inodes = rpc_.InodesInUse();
      if (inodes.ok()) walk_total_ = *inodes;
      started_ = next_progress_ = Clock::now();
    }
    AQ_RETURN_IF_ERROR(Walk());
    Progress(/*end_of_phase=*/true);
    out_ << "namespace: " << r_.directories << " directories, " << r_.files
         << " regular files\n";
    Result<std::vector<FsckServer>> servers = rpc_.Servers();
    if (!servers.ok()) return servers.status();
    for (const FsckServer& s : *servers) {
      if (s.state == "removed") continue;
      if (!s.up) {
        out_ << "server " << s.id.ToString() << " (" << Printable(s.address, SIZE_MAX)
             << ") is DOWN: not listed";
        if (s.pg_positions > 0) {
          out_ << "; it holds " << s.pg_positions
               << " PG positions, so its chunks count as missing (repair moves rebuild them "
                  "after the repair delay: `aquifer repair wait`)\n";
          r_.servers_skipped.push_back(s.id.ToString());
        } else {
          out_ << " (it holds no PG positions; `aquifer server remove " << s.id.ToString()
               << "` when it is gone for good)\n";
        }
        continue;
      }
      cursors_.emplace_back(rpc_, s.address, o_.page_chunks);
      server_names_.push_back(s.id.ToString() + " (" + Printable(s.address, SIZE_MAX) + ")");
      list_chunks_total_ += s.chunk_count;
      list_bytes_total_ += s.used_bytes;
    }
    r_.servers_listed = cursors_.size();
    listing_ = true;
    phase_start_ = Clock::now();
    AQ_RETURN_IF_ERROR(Merge());
    Progress(/*end_of_phase=*/true);
    for (auto& [ino, f] : files_) CountUnlisted(ino, f, f.EndStripe());
    // The metadata server records what was found lost, so `aquifer status` says so.
    for (const auto& [ino, stripes] : lost_to_report_) {
      Status reported = rpc_.ReportLost(InodeId(ino), stripes);
      if (!reported.ok()) {
        ++r_.errors;
        out_ << "ERROR  recording inode " << ino << "'s lost stripes at the metadata server: "
             << Printable(reported.ToString(), SIZE_MAX) << "\n";
      }
    }
    ConfirmOrphans();
    if (o_.repair) Repair();
    Summary();
    return r_;
  }

 private:
  Status Walk() {
    std::deque<std::pair<InodeId, std::string>> dirs;
    dirs.emplace_back(kRootInode, "");
    std::set<uint64_t> seen_dirs{kRootInode.value()};
    while (!dirs.empty()) {
      auto [dir, path] = dirs.front();
      dirs.pop_front();
      ++r_.directories;
      uint64_t cookie = 0;
      while (true) {
        Result<FsckDirPage> page = rpc_.ReadDir(dir, cookie);
        if (!page.ok()) {
          return Status(page.status().code(),
                        "reading directory " + (path.empty() ? "/" : path) + ": " +
                            page.status().message());
        }
        walked_ += page->entries.size();
        Progress(false);
        for (const FsckDirEntry& e : page->entries) {
          cookie = e.cookie;
          // Names are printed, never used to reach anything: control bytes are shown as \xNN,
          // so a name cannot write escape sequences to an operator's terminal.
          const std::string child = path + "/" + Printable(e.name, SIZE_MAX);
          if (S_ISDIR(e.attr.mode)) {
            if (seen_dirs.insert(e.attr.ino.value()).second) dirs.emplace_back(e.attr.ino, child);
          } else if (S_ISREG(e.attr.mode)) {
            auto [it, fresh] = files_.try_emplace(e.attr.ino.value());
            if (fresh) {
              FileInfo& f = it->second;
              f.size = e.attr.size;
              f.data_version = e.attr.data_version;
              f.k = e.attr.k;
              f.m = e.attr.m;
              f.unit_bytes = e.attr.unit_bytes;
              f.stripes_known = e.attr.stripes_known;
              f.stripes = e.attr.stripes;
              f.abandoned = e.attr.abandoned;
              SetRestoredLeftovers(e.attr.ino.value(), f);
              f.path = child;
              ++r_.files;
            }
          }
        }
        if (page->eof || page->entries.empty()) break;
      }
    }
    return OkStatus();
  }

  Status Merge() {
    std::vector<std::pair<size_t, FsckChunk>> group;
    while (true) {
      // The smallest (ino, stripe) at the head of any listing.
      bool any = false;
      uint64_t ino = 0, stripe = 0;
      for (size_t i = 0; i < cursors_.size(); ++i) {
        Result<const FsckChunk*> c = cursors_[i].Peek();
        if (!c.ok()) return c.status().WithPrefix("listing server " + server_names_[i]);
        if (*c == nullptr) continue;
        const auto key = std::make_pair((*c)->ino.value(), (*c)->stripe);
        if (!any || key < std::make_pair(ino, stripe)) {
          ino = key.first;
          stripe = key.second;
          any = true;
        }
      }
      if (!any) return OkStatus();
      group.clear();
      for (size_t i = 0; i < cursors_.size(); ++i) {
        while (true) {
          Result<const FsckChunk*> c = cursors_[i].Peek();
          if (!c.ok()) return c.status().WithPrefix("listing server " + server_names_[i]);
          if (*c == nullptr || (*c)->ino.value() != ino || (*c)->stripe != stripe) break;
          group.emplace_back(i, **c);
          cursors_[i].Pop();
        }
      }
      r_.chunk_versions += group.size();
      for (const auto& [server, c] : group) listed_bytes_ += c.length;
      ++r_.stripes;
      CheckStripe(ino, stripe, group);
      if ((r_.stripes & 255) == 0) Progress(false);
    }
  }

  void NoteOrphan(std::map<uint64_t, Held>& into, uint64_t ino, uint64_t stripe, size_t server,
                  const FsckChunk& c) {
    Held& h = into[ino];
    h.servers.insert(server);
    ++h.chunks;
    h.bytes += c.length;
    h.first_stripe = std::min(h.first_stripe, stripe);
    h.max_version = std::max(h.max_version, c.version);
  }

  // After a restore, a file from the backup (inode below the restore's inode floor) may hold
  // chunk versions above its restored data_version and below the restore's version floor:
  // written after the backup, or by a writer the backup caught mid-file, and never committed
  // in this namespace. Once a writer opened the file after the restore, the metadata server
  // keeps that range as an abandoned one (data_version has moved past it).
  void SetRestoredLeftovers(uint64_t ino, FileInfo& f) const {
    if (floors_.version == 0 || ino >= floors_.ino) return;
    if (f.data_version + 1 < floors_.version) {
      f.restored_first = f.data_version + 1;
      f.restored_last = floors_.version - 1;
      return;
    }
    for (const auto& [first, last] : f.abandoned) {
      if (last == floors_.version - 1) {
        f.restored_first = first;
        f.restored_last = last;
      }
    }
  }

  void CheckStripe(uint64_t ino, uint64_t stripe,
                   const std::vector<std::pair<size_t, FsckChunk>>& listed) {
    auto fit = files_.find(ino);
    if (fit == files_.end()) {
      for (const auto& [server, c] : listed) NoteOrphan(no_inode_, ino, stripe, server, c);
      return;
    }
    FileInfo& f = fit->second;
    std::vector<std::pair<size_t, FsckChunk>> kept;
    const bool restored = f.restored_first <= f.restored_last;
    if (restored) {
      for (const auto& [server, c] : listed) {
        if (f.RestoredLeftover(c.version)) {
          NoteOrphan(restored_, ino, stripe, server, c);
        } else {
          kept.emplace_back(server, c);
        }
      }
    }
    const auto& group = restored ? kept : listed;
    CountUnlisted(ino, f, stripe);
    f.checked_to = std::max(f.checked_to, stripe + 1);
    // With a stripe map: a stripe it does not record is a hole whose chunks are a truncate's
    // leftovers (their GC waits for the file's last close), and chunks at or below a recorded
    // stripe's floor are leftovers too. Neither is data to check.
    std::optional<uint64_t> floor = f.FloorOf(stripe);
    if (f.stripes_known && !floor) return;
    const uint64_t below = floor.value_or(0);
    std::set<std::pair<uint64_t, uint32_t>> uncommitted;
    uint64_t newest = 0;
    bool any_committed = false;
    for (const auto& [server, c] : group) {
      if ((f.stripes_known && c.version <= below) || f.Abandoned(c.version)) continue;
      if (c.version > f.data_version) {
        uncommitted.insert({c.version, c.position});
      } else {
        any_committed = true;
        newest = std::max(newest, c.version);
      }
    }
    if (!uncommitted.empty()) {
      r_.uncommitted_versions += uncommitted.size();
      Print(warn_printed_, "UNCOMMITTED", f.path + " (inode " + std::to_string(ino) + ") stripe " +
                                              std::to_string(stripe) + ": " +
                                              std::to_string(uncommitted.size()) +
                                              " chunk versions newer than data_version " +
                                              std::to_string(f.data_version) +
                                              " (a writer's, or a crashed one's)");
    }
    if (!any_committed) {
      if (f.stripes_known && stripe < f.EndStripe()) {
        ReportLost(ino, f, stripe, stripe + 1, "only uncommitted or truncated chunk versions");
      }
      return;
    }
    const uint64_t span = f.StripeSpan();
    const uint64_t end_stripe = span == 0 ? 0 : (f.size + span - 1) / span;
    if (stripe >= end_stripe) {
      for (const auto& [server, c] : group) {
        if (c.version <= f.data_version) NoteOrphan(past_eof_, ino, stripe, server, c);
      }
      return;
    }
    // Versions <= data_version, newest first: the newest must be whole, or be a crashed
    // writer's partial version over a whole older one.
    std::map<uint64_t, std::pair<std::set<uint32_t>, const FsckChunk*>, std::greater<>> versions;
    for (const auto& [server, c] : group) {
      if (c.version > f.data_version) continue;
      if ((f.stripes_known && c.version <= below) || f.Abandoned(c.version)) continue;
      auto& v = versions[c.version];
      v.first.insert(c.position);
      if (v.second == nullptr || (!v.second->has_placement && c.has_placement)) v.second = &c;
    }
    bool first = true;
    std::string first_problem;
    uint32_t first_missing = 0;
    bool first_rebuildable = false;
    for (const auto& [version, pv] : versions) {
      const Rule rule = RuleFor(pv.second, f, stripe);
      std::vector<uint32_t> missing;
      uint32_t present = 0;
      for (uint32_t p : rule.needed) {
        if (pv.first.count(p)) {
          ++present;
        } else {
          missing.push_back(p);
        }
      }
      if (missing.empty()) {
        if (first) return;  // whole
        ++r_.partial_versions;
        Print(warn_printed_, "PARTIAL", first_problem + "; version " + std::to_string(version) +
                                            " is whole and is what readers get (a crashed "
                                            "writer's leftover)");
        return;
      }
      const bool rebuildable =
          rule.replicated ? present >= 1 : present + rule.empty_data >= rule.k;
      if (first) {
        first = false;
        first_missing = static_cast<uint32_t>(missing.size());
        first_rebuildable = rebuildable;
        first_problem = f.path + " (inode " + std::to_string(ino) + ") stripe " +
                        std::to_string(stripe) + " version " + std::to_string(version) + " (" +
                        (rule.replicated ? "replicated" : "erasure coded") + "): position" +
                        (missing.size() > 1 ? "s " : " ") + JoinPositions(missing) +
                        " absent, " + std::to_string(present) + " of " +
                        std::to_string(rule.needed.size()) + " present";
      }
      if (rebuildable) break;  // an older whole version does not matter then
    }
    if (first_rebuildable) {
      ++r_.missing_stripes;
      r_.missing_chunks += first_missing;
      Print(missing_printed_, "MISSING", first_problem + " (rebuildable)");
    } else {
      ++r_.lost_stripes;
      if (lost_to_report_[ino].size() < 1024) lost_to_report_[ino].push_back(stripe);
      if (lost_files_.insert(ino).second) ++r_.lost_files;
      Print(missing_printed_, "LOST", first_problem + " (too few to rebuild)");
    }
  }

  // Stripes in [f.checked_to, to) that the file's map records as written had no chunk in any
  // listing: lost (every copy or more than m chunks gone). Only said when every server holding
  // PG positions was listed; otherwise a skipped server may hold them.
  void CountUnlisted(uint64_t ino, FileInfo& f, uint64_t to) {
    to = std::min(to, f.EndStripe());
    if (!f.stripes_known || f.checked_to >= to) {
      f.checked_to = std::max(f.checked_to, to);
      return;
    }
    for (const StripeExtent& e : f.stripes) {
      const uint64_t b = std::max(e.begin_stripe, f.checked_to), x = std::min(e.end_stripe, to);
      if (b >= x) continue;
      if (!r_.servers_skipped.empty()) {
        unverified_stripes_ += x - b;
        continue;
      }
      ReportLost(ino, f, b, x, "no chunk on any server");
    }
    f.checked_to = to;
  }

  void ReportLost(uint64_t ino, const FileInfo& f, uint64_t begin, uint64_t end,
                  const std::string& why) {
    auto& to_report = lost_to_report_[ino];
    for (uint64_t s = begin; s < end && to_report.size() < 1024; ++s) to_report.push_back(s);
    r_.lost_stripes += end - begin;
    if (lost_files_.insert(ino).second) ++r_.lost_files;
    Print(missing_printed_, "LOST",
          f.path + " (inode " + std::to_string(ino) + ") stripe" +
              (end - begin > 1 ? "s " + std::to_string(begin) + "-" + std::to_string(end - 1)
                               : " " + std::to_string(begin)) +
              ": recorded as written, " + why + " (reads fail with EIO)");
  }

  void Print(size_t& printed, const char* kind, const std::string& what) {
    if (o_.verbose || printed < o_.max_listed) out_ << kind << "  " << what << "\n";
    ++printed;
  }

  // Whether a pending GC task covers every chunk version `h` holds of `ino`.
  static bool Covered(const std::multimap<uint64_t, FsckGcTask>& gc, uint64_t ino,
                      const Held& h) {
    auto [begin, end] = gc.equal_range(ino);
    for (auto it = begin; it != end; ++it) {
      if (it->second.from_stripe <= h.first_stripe && h.max_version <= it->second.max_version) {
        return true;
      }
    }
    return false;
  }

  // Whether any server in `h` still holds a chunk of `ino` (listed again now).
  Result<bool> StillHeld(uint64_t ino, const Held& h) {
    if (ino == 0) return true;  // no key sorts before it to list after
    for (size_t server : h.servers) {
      // ListChunks starts after its key: the last possible key of inode ino-1.
      Result<FsckChunkPage> p = rpc_.ListChunks(cursors_[server].address(), InodeId(ino - 1),
                                                UINT64_MAX, UINT32_MAX, 1);
      if (!p.ok()) return p.status();
      if (!p->chunks.empty() && p->chunks.front().ino.value() == ino) return true;
    }
    return false;
  }

  // Chunks whose GC the metadata server has pending are being collected, not orphans: a file
  // deleted or truncated just before the check (the data servers delete them a few heartbeats
  // later). The tasks are asked for after the listing, so a task that was pending while the
  // listing ran and finished before this call has deleted its chunks by now: an inode with
  // no pending task is listed again, and only chunks still there count as orphans.
  void SetAsideCollected() {
    if (no_inode_.empty() && past_eof_.empty()) return;
    Result<std::vector<FsckGcTask>> tasks = rpc_.PendingGc();
    if (!tasks.ok()) {
      ++r_.errors;
      out_ << "ERROR  listing the metadata server's pending GC tasks: "
           << Printable(tasks.status().ToString(), SIZE_MAX) << "\n";
      return;
    }
    std::multimap<uint64_t, FsckGcTask> gc;
    for (const FsckGcTask& t : *tasks) gc.emplace(t.ino.value(), t);
    // no_inode_ and past_eof_ never share an inode (without / with a file), so each counts once.
    auto collected = [this](const Held& h) {
      ++r_.collecting_inodes;
      r_.collecting_chunks += h.chunks;
      r_.collecting_bytes += h.bytes;
    };
    for (auto it = no_inode_.begin(); it != no_inode_.end();) {
      if (Covered(gc, it->first, it->second)) {
        collected(it->second);
        it = no_inode_.erase(it);
        continue;
      }
      Result<bool> held = StillHeld(it->first, it->second);
      if (!held.ok()) {
        ++r_.errors;
        out_ << "ERROR  listing inode " << it->first
             << "'s chunks again: " << Printable(held.status().ToString(), SIZE_MAX) << "\n";
        ++it;
        continue;
      }
      if (!*held) {  // deleted since the listing
        r_.collected_during_check += it->second.chunks;
        it = no_inode_.erase(it);
        continue;
      }
      ++it;
    }
    for (auto it = past_eof_.begin(); it != past_eof_.end();) {
      if (Covered(gc, it->first, it->second)) {
        collected(it->second);
        it = past_eof_.erase(it);
      } else {
        ++it;
      }
    }
  }

  void ConfirmOrphans() {
    ConfirmNoInode();
    SetAsideCollected();
    CountOrphans();
  }

  // Drops from no_inode_ the inodes that exist now (created during the walk, or unlinked and
  // still open).
  void ConfirmNoInode() {
    for (auto it = no_inode_.begin(); it != no_inode_.end();) {
      Result<std::optional<FsckAttr>> a = rpc_.GetAttr(InodeId(it->first));
      if (!a.ok()) {
        ++r_.errors;
        out_ << "ERROR  GetAttr(" << it->first
             << "): " << Printable(a.status().ToString(), SIZE_MAX) << "\n";
        it = no_inode_.erase(it);
        continue;
      }
      if (a->has_value()) {  // created during the walk, or unlinked but still open
        it = no_inode_.erase(it);
        continue;
      }
      ++it;
    }
  }

  void CountOrphans() {
    for (auto it = no_inode_.begin(); it != no_inode_.end(); ++it) {
      ++r_.orphan_inodes;
      r_.orphan_chunks += it->second.chunks;
      r_.orphan_bytes += it->second.bytes;
      Print(orphan_printed_, "ORPHAN", "inode " + std::to_string(it->first) +
                                           " does not exist: " +
                                           std::to_string(it->second.chunks) +
                                           " chunk versions (" + HumanBytes(it->second.bytes) +
                                           ") on " + std::to_string(it->second.servers.size()) +
                                           " server(s)");
    }
    for (const auto& [ino, h] : past_eof_) {
      ++r_.past_eof_files;
      r_.orphan_chunks += h.chunks;
      r_.orphan_bytes += h.bytes;
      const FileInfo& f = files_.at(ino);
      Print(orphan_printed_, "ORPHAN", f.path + " (inode " + std::to_string(ino) + ", size " +
                                           std::to_string(f.size) + "): " +
                                           std::to_string(h.chunks) +
                                           " committed chunk versions past the end, from stripe " +
                                           std::to_string(h.first_stripe));
    }
    for (const auto& [ino, h] : restored_) {
      ++r_.restored_leftover_files;
      r_.orphan_chunks += h.chunks;
      r_.orphan_bytes += h.bytes;
      const FileInfo& f = files_.at(ino);
      Print(orphan_printed_, "ORPHAN", f.path + " (inode " + std::to_string(ino) + "): " +
                                           std::to_string(h.chunks) +
                                           " chunk versions written after the backup the "
                                           "namespace was restored from (versions " +
                                           std::to_string(f.restored_first) + ".." +
                                           std::to_string(f.restored_last) + ")");
    }
    r_.orphans_left = r_.orphan_chunks;
  }

  // Deletes orphans; on success they no longer count as left.
  void Repair() {
    for (const auto& [ino, h] : no_inode_) {
      bool ok = true;
      for (size_t server : h.servers) {
        Result<uint64_t> n = rpc_.DeleteChunks(cursors_[server].address(), InodeId(ino), 0,
                                               UINT64_MAX, 0);
        if (!n.ok()) {
          ok = false;
          ++r_.errors;
          out_ << "ERROR  deleting inode " << ino << "'s chunks on " << server_names_[server]
               << ": " << Printable(n.status().ToString(), SIZE_MAX) << "\n";
        } else {
          r_.orphans_deleted += *n;
        }
      }
      if (ok) r_.orphans_left -= std::min(r_.orphans_left, h.chunks);
    }
    for (const auto& [ino, h] : past_eof_) {
      Result<std::optional<FsckAttr>> a = rpc_.GetAttr(InodeId(ino));
      if (!a.ok()) {
        ++r_.errors;
        continue;
      }
      uint64_t from = 0, max_version = UINT64_MAX;
      if (a->has_value()) {
        const uint64_t span = static_cast<uint64_t>((*a)->k) * (*a)->unit_bytes;
        from = span == 0 ? 0 : ((*a)->size + span - 1) / span;
        max_version = (*a)->data_version;
      }
      bool ok = true;
      for (size_t server : h.servers) {
        Result<uint64_t> n =
            rpc_.DeleteChunks(cursors_[server].address(), InodeId(ino), from, max_version, 0);
        if (!n.ok()) {
          ok = false;
          ++r_.errors;
          out_ << "ERROR  deleting inode " << ino << "'s chunks past its end on "
               << server_names_[server] << ": " << Printable(n.status().ToString(), SIZE_MAX)
               << "\n";
        } else {
          r_.orphans_deleted += *n;
        }
      }
      if (ok) r_.orphans_left -= std::min(r_.orphans_left, h.chunks);
    }
    // Versions written after the restored backup: only that version range, never the file's
    // committed versions below it, and only on servers that honour a range's lower bound.
    for (const auto& [ino, h] : restored_) {
      const FileInfo& f = files_.at(ino);
      bool ok = true;
      for (size_t server : h.servers) {
        Result<bool> ranges = DeletesVersionRanges(server);
        Status failed = ranges.ok() ? OkStatus() : ranges.status();
        if (ranges.ok() && !*ranges) {
          failed = Status(Code::kNotSupported,
                          "it does not honour a lower version bound on deletes (an older "
                          "aquifer-data): upgrade it, then run fsck --repair again");
        }
        if (failed.ok()) {
          Result<uint64_t> n = rpc_.DeleteChunks(cursors_[server].address(), InodeId(ino), 0,
                                                 f.restored_last, f.restored_first);
          if (n.ok()) {
            r_.orphans_deleted += *n;
            continue;
          }
          failed = n.status();
        }
        ok = false;
        ++r_.errors;
        out_ << "ERROR  deleting inode " << ino << "'s chunk versions written after the backup on "
             << server_names_[server] << ": " << Printable(failed.ToString(), SIZE_MAX) << "\n";
      }
      if (ok) r_.orphans_left -= std::min(r_.orphans_left, h.chunks);
    }
  }

  Result<bool> DeletesVersionRanges(size_t server) {
    auto it = version_ranges_.find(server);
    if (it != version_ranges_.end()) return it->second;
    Result<bool> r = rpc_.DeletesVersionRanges(cursors_[server].address());
    if (r.ok()) version_ranges_[server] = *r;
    return r;
  }

  using Clock = std::chrono::steady_clock;

  // One progress report (FsckOptions::progress_bar / progress_interval_s), at most every
  // progress_interval_s; `end_of_phase` always redraws a bar (it ends at its phase's final
  // figures) and prints a line if one was due.
  void Progress(bool end_of_phase) {
    if (!o_.progress_bar && o_.progress_interval_s <= 0) return;
    const Clock::time_point now = Clock::now();
    if (!end_of_phase && now < next_progress_) return;
    if (end_of_phase && !o_.progress_bar && now < next_progress_) return;
    next_progress_ = now + std::chrono::microseconds(
                               static_cast<int64_t>(o_.progress_interval_s * 1e6));
    const double secs =
        std::max(1e-3, std::chrono::duration<double>(now - (listing_ ? phase_start_ : started_))
                           .count());
    std::string line;
    double fraction = 0;
    if (!listing_) {
      // The walk: entries read against the inodes in use (hard links count once there, each
      // name once here; the root is not listed).
      const uint64_t total = std::max(walk_total_, walked_);
      const double rate = static_cast<double>(walked_) / secs;
      const int64_t eta =
          rate > 0 ? static_cast<int64_t>(static_cast<double>(total - walked_) / rate * 1000)
                   : -1;
      fraction = total > 0 ? static_cast<double>(walked_) / static_cast<double>(total) : 1.0;
      line = "walking the namespace: " + std::to_string(walked_) + "/" +
             (walk_total_ > 0 ? "~" + std::to_string(total) : std::string("?")) + " names, " +
             std::to_string(static_cast<uint64_t>(rate)) + "/s, eta " +
             (end_of_phase ? std::string("0 s") : HumanDuration(walk_total_ > 0 ? eta : -1));
    } else {
      // The listing: chunk versions and bytes against the servers' last reported counts.
      const uint64_t total = std::max(list_bytes_total_, listed_bytes_);
      const double rate = static_cast<double>(listed_bytes_) / secs;
      const int64_t eta =
          rate > 0 ? static_cast<int64_t>(static_cast<double>(total - listed_bytes_) / rate *
                                          1000)
                   : -1;
      fraction =
          total > 0 ? static_cast<double>(listed_bytes_) / static_cast<double>(total) : 1.0;
      line = "listing chunks: " + std::to_string(r_.chunk_versions) + "/~" +
             std::to_string(std::max(list_chunks_total_, r_.chunk_versions)) + " versions, " +
             HumanBytes(listed_bytes_) + "/~" + HumanBytes(total) + ", " +
             HumanBytes(static_cast<uint64_t>(rate)) + "/s, eta " +
             (end_of_phase ? std::string("0 s") : HumanDuration(eta));
    }
    if (end_of_phase) fraction = 1.0;
    out_.flush();
    if (o_.progress_bar) {
      clearing_.ClearBar();
      raw_ << "fsck " << ProgressBar(fraction) << " " << line;
      if (end_of_phase) {
        raw_ << "\n";
      } else {
        clearing_.BarShown();
      }
      raw_.flush();
    } else {
      raw_ << "fsck: " << line << "\n" << std::flush;
    }
  }

  void Summary() {
    auto more = [this](size_t printed, const char* what) {
      if (!o_.verbose && printed > o_.max_listed) {
        out_ << "  (" << printed - o_.max_listed << " more " << what
             << " findings not shown; --verbose lists all)\n";
      }
    };
    more(missing_printed_, "missing/lost");
    more(orphan_printed_, "orphan");
    more(warn_printed_, "warning");
    out_ << "checked: " << r_.stripes << " stripes, " << r_.chunk_versions
         << " chunk versions on " << r_.servers_listed << " data servers\n";
    out_ << "missing: " << r_.missing_stripes << " stripes (" << r_.missing_chunks
         << " chunks) rebuildable, " << r_.lost_stripes << " stripes lost in "
         << r_.lost_files << " files\n";
    if (unverified_stripes_ > 0) {
      out_ << "note: " << unverified_stripes_
           << " stripes recorded as written had no chunk on the listed servers; a server that "
              "was not listed may hold them (run fsck again when every server is up)\n";
    }
    out_ << "orphans: " << r_.orphan_chunks << " chunk versions (" << HumanBytes(r_.orphan_bytes)
         << "): " << r_.orphan_inodes << " inodes that do not exist, " << r_.past_eof_files
         << " files with chunks past their end";
    if (floors_.version > 0) {
      out_ << ", " << r_.restored_leftover_files
           << " files with chunk versions written after the restored backup";
    }
    if (o_.repair) out_ << "; deleted " << r_.orphans_deleted << " chunk versions";
    out_ << "\n";
    if (r_.collecting_chunks > 0 || r_.collected_during_check > 0) {
      out_ << "being collected: " << r_.collecting_chunks << " chunk versions ("
           << HumanBytes(r_.collecting_bytes) << ") of " << r_.collecting_inodes
           << " deleted or truncated files, pending GC on the metadata server (not problems: "
              "the data servers delete them within a few heartbeats)";
      if (r_.collected_during_check > 0) {
        out_ << "; " << r_.collected_during_check
             << " more were deleted by GC while the check ran";
      }
      out_ << "\n";
    }
    out_ << "warnings: " << r_.uncommitted_versions << " uncommitted chunk versions, "
         << r_.partial_versions << " partial versions over a whole older one\n";
    if (r_.missing_stripes > 0 || !r_.servers_skipped.empty()) {
      out_ << "note: fsck does not rebuild chunks itself. Positions on a down server are rebuilt "
              "by repair moves after the metadata server's repair delay (`aquifer repair "
              "wait`); chunks lost on a server that is up are rebuilt only when a move of that "
              "PG position runs.\n";
    }
    if (!o_.repair && r_.orphans_left > 0) {
      out_ << "note: `aquifer fsck --repair` deletes the orphans\n";
    }
    out_ << (r_.clean() ? "fsck: clean\n" : "fsck: PROBLEMS remain\n");
  }

  FsckRpc& rpc_;
  const FsckOptions& o_;
  std::ostream& raw_;          // the caller's stream (the bar)
  BarClearingBuf clearing_;    // over raw_'s buffer
  std::ostream out_;           // findings and the summary, through clearing_
  FsckReport r_;
  // Progress.
  Clock::time_point started_, phase_start_, next_progress_;
  bool listing_ = false;          // the walk is done, the chunk listing runs
  uint64_t walk_total_ = 0;       // inodes in use (0: unknown)
  uint64_t walked_ = 0;           // names read
  uint64_t list_chunks_total_ = 0, list_bytes_total_ = 0;  // the listed servers' last reports
  uint64_t listed_bytes_ = 0;
  std::unordered_map<uint64_t, FileInfo> files_;
  std::vector<Cursor> cursors_;
  std::vector<std::string> server_names_;
  std::map<uint64_t, Held> no_inode_;
  std::map<uint64_t, Held> past_eof_;
  std::map<uint64_t, Held> restored_;          // versions written after the restored backup
  FsckRestoreFloors floors_;
  std::map<size_t, bool> version_ranges_;      // server index -> honours min_version
  size_t missing_printed_ = 0, orphan_printed_ = 0, warn_printed_ = 0;
  std::set<uint64_t> lost_files_;
  std::map<uint64_t, std::vector<uint64_t>> lost_to_report_;  // ino -> lost stripes (<= 1024)
  uint64_t unverified_stripes_ = 0;
};

}  // namespace

Result<FsckReport> RunFsck(FsckRpc& rpc, const FsckOptions& options, std::ostream& out) {
  Checker c(rpc, options, out);
  return c.Run();
}

}  // namespace aquifer::cli

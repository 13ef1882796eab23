// Complete directory name lists, and their inodes' attributes, under cache leases (dir_names.h).
#include "client/rpc/dir_names.h"

#include <sys/stat.h>

#include <algorithm>

namespace aquifer::client {

namespace {
// Bookkeeping maps past this many entries are cleared (and every open ticket voided).
constexpr size_t kMaxTracked = 1 << 16;

// Attributes kept only for inodes with one name (dir_names.h): not directories, one link.
bool Keepable(const Attributes& a) {
  return !S_ISDIR(a.mode) && a.nlink == 1 && a.inode.value() != 0;
}
}  // namespace

void DirNames::SetLease(std::chrono::milliseconds lease) {
  std::lock_guard lock(mu_);
  lease_ = lease;
  trusted_until_ = {};
}

void DirNames::Heard(Clock::time_point sent) {
  std::lock_guard lock(mu_);
  if (lease_.count() <= 0) return;
  trusted_until_ = std::max(trusted_until_, sent + lease_ / 2);
}

DirNames::Clock::time_point DirNames::TrustedUntil() {
  std::lock_guard lock(mu_);
  return lease_.count() > 0 ? trusted_until_ : Clock::time_point{};
}

DirNames::Known DirNames::Find(InodeId dir, std::string_view name, Clock::time_point now) {
  return FindEntry(dir, name, now).known;
}

DirNames::Found DirNames::FindEntry(InodeId dir, std::string_view name, Clock::time_point now) {
  if (name.empty() || name == "." || name == "..") return {};
  std::lock_guard lock(mu_);
  if (!Trusted(now)) return {};
  auto it = lists_.find(dir.value());
  if (it == lists_.end()) return {};
  const std::string key(name);
  if (it->second.unsure.count(key)) return {};
  auto n = it->second.names.find(key);
  if (n == it->second.names.end()) return Found{Known::kAbsent, std::nullopt};
  Found out{Known::kPresent, std::nullopt};
  if (n->second != 0) {
    auto a = attrs_.find(n->second);
    if (a != attrs_.end()) out.attr = a->second.attr;
  }
  return out;
}

std::optional<Attributes> DirNames::CachedAttr(InodeId inode, Clock::time_point now) {
  std::lock_guard lock(mu_);
  if (!Trusted(now)) return std::nullopt;
  auto a = attrs_.find(inode.value());
  if (a == attrs_.end()) return std::nullopt;
  return a->second.attr;
}

bool DirNames::NoteMiss(InodeId dir) {
  std::lock_guard lock(mu_);
  return CountLocked(misses_, dir, limits_.first_listing_after);
}

bool DirNames::NoteFound(InodeId dir) {
  std::lock_guard lock(mu_);
  return CountLocked(founds_, dir, limits_.first_plus_listing_after);
}

bool DirNames::CountLocked(std::unordered_map<uint64_t, Misses>& counts, InodeId dir,
                           uint32_t first) {
  if (lease_.count() <= 0 || lists_.count(dir.value())) return false;
  if (counts.size() >= kMaxTracked) counts.clear();
  Misses& m = counts[dir.value()];
  if (m.need == 0) m.need = first;
  if (++m.count < m.need) return false;
  m.count = 0;
  m.need = std::min(m.need * 2, limits_.max_listing_after);
  return true;
}

uint64_t DirNames::GenLocked(InodeId dir) const {
  auto g = gens_.find(dir.value());
  return g == gens_.end() ? 0 : g->second;
}

DirNames::Ticket DirNames::Begin(InodeId dir) {
  std::lock_guard lock(mu_);
  return Ticket{epoch_, GenLocked(dir), touch_seq_};
}

bool DirNames::Install(InodeId dir, const Ticket& ticket, std::vector<std::string> names) {
  std::vector<Listed> entries;
  entries.reserve(names.size());
  for (std::string& n : names) entries.push_back(Listed{std::move(n), InodeId(), std::nullopt});
  return InstallListed(dir, ticket, std::move(entries));
}

bool DirNames::InstallListed(InodeId dir, const Ticket& ticket, std::vector<Listed> entries) {
  std::lock_guard lock(mu_);
  if (lease_.count() <= 0 || ticket.epoch != epoch_) return false;
  if (GenLocked(dir) != ticket.dir_gen) return false;
  if (entries.size() > limits_.max_names_per_dir) return false;
  DropLocked(dir);
  if (total_names_ + entries.size() > limits_.max_names) {
    // Full: start over rather than track which list was used last.
    lists_.clear();
    attrs_.clear();
    looked_.clear();
    total_names_ = 0;
  }
  List& list = lists_[dir.value()];
  for (Listed& e : entries) {
    auto [it, added] = list.names.emplace(std::move(e.name), e.inode.value());
    if (added && e.attr) KeepLocked(dir.value(), it->first, *e.attr, ticket);
  }
  total_names_ += list.names.size();
  misses_.erase(dir.value());
  founds_.erase(dir.value());
  TouchLocked(dir);
  return true;
}

void DirNames::Answered(InodeId dir, std::string_view name, const Ticket& ticket,
                        const Attributes* attr) {
  if (name.empty() || name == "." || name == "..") return;
  std::lock_guard lock(mu_);
  if (lease_.count() <= 0 || ticket.epoch != epoch_) return;
  const std::string key(name);
  auto it = lists_.find(dir.value());
  if (it == lists_.end()) {
    // No complete list: keep the found inode's attributes by (dir, name) for the open that
    // usually follows; a name no longer there (or another inode now) drops what was kept.
    if (attr != nullptr && GenLocked(dir) == ticket.dir_gen) {
      KeepLookedLocked(dir.value(), key, *attr, ticket);
    } else {
      DropLookedLocked(dir.value(), key);
    }
    return;
  }
  if (GenLocked(dir) != ticket.dir_gen) return;  // a change came meanwhile
  List& list = it->second;
  list.unsure.erase(key);
  auto n = list.names.find(key);
  if (attr == nullptr) {
    if (n == list.names.end()) return;
    if (n->second != 0) DropAttrLocked(n->second);
    list.names.erase(n);
    --total_names_;
    return;
  }
  if (n == list.names.end()) {
    if (list.names.size() >= limits_.max_names_per_dir || total_names_ >= limits_.max_names) {
      DropLocked(dir);
      return;
    }
    n = list.names.emplace(key, 0).first;
    ++total_names_;
  }
  if (n->second != attr->inode.value()) {
    if (n->second != 0) DropAttrLocked(n->second);
    n->second = attr->inode.value();
  }
  KeepLocked(dir.value(), n->first, *attr, ticket);
}

void DirNames::Added(InodeId dir, std::string_view name, const Attributes* attr,
                     const Ticket* ticket) {
  std::lock_guard lock(mu_);
  TouchLocked(dir);
  const std::string key(name);
  DropLookedLocked(dir.value(), key);  // the name now names another inode
  auto it = lists_.find(dir.value());
  if (it == lists_.end()) return;
  it->second.unsure.erase(key);
  auto [n, added] = it->second.names.emplace(key, 0);
  if (added) ++total_names_;
  if (n->second != 0) DropAttrLocked(n->second);  // a rename over it: the old inode's name went
  n->second = attr != nullptr ? attr->inode.value() : 0;
  if (it->second.names.size() > limits_.max_names_per_dir || total_names_ > limits_.max_names) {
    DropLocked(dir);
    return;
  }
  if (attr != nullptr && ticket != nullptr && ticket->epoch == epoch_) {
    KeepLocked(dir.value(), n->first, *attr, *ticket);
  }
}

void DirNames::Removed(InodeId dir, std::string_view name) {
  std::lock_guard lock(mu_);
  TouchLocked(dir);
  const std::string key(name);
  DropLookedLocked(dir.value(), key);
  auto it = lists_.find(dir.value());
  if (it == lists_.end()) return;
  it->second.unsure.erase(key);
  auto n = it->second.names.find(key);
  if (n == it->second.names.end()) return;
  if (n->second != 0) DropAttrLocked(n->second);
  it->second.names.erase(n);
  --total_names_;
}

void DirNames::Touched(InodeId inode) {
  std::lock_guard lock(mu_);
  TouchInodeLocked(inode.value());
}

void DirNames::Queued(InodeId inode) {
  std::lock_guard lock(mu_);
  const uint64_t ino = inode.value();
  if (touched_.size() >= kMaxTracked && !touched_.count(ino)) {
    touched_.clear();
    touch_floor_ = touch_seq_ + 1;
  }
  touched_[ino] = ++touch_seq_;
}

void DirNames::Refresh(const Attributes& attr) {
  std::lock_guard lock(mu_);
  auto k = attrs_.find(attr.inode.value());
  if (k == attrs_.end() || !Keepable(attr)) return;
  k->second.attr = attr;
}

DirNames::Change DirNames::Changing(InodeId inode) {
  std::lock_guard lock(mu_);
  Change change;
  auto k = attrs_.find(inode.value());
  if (k != attrs_.end()) {
    change.dir = k->second.dir;
    change.name = k->second.name;
  }
  TouchInodeLocked(inode.value());
  change.epoch = epoch_;
  change.seq = touch_seq_;
  return change;
}

void DirNames::Changed(InodeId inode, const Change& change, const Attributes& attr) {
  std::lock_guard lock(mu_);
  const uint64_t ino = inode.value();
  auto t = touched_.find(ino);
  const bool untouched = t != touched_.end() && t->second == change.seq;
  TouchInodeLocked(ino);  // lookups and listings asked during the change may predate it
  if (!untouched || change.dir == 0 || change.epoch != epoch_ || attr.inode != inode ||
      !Keepable(attr)) {
    return;
  }
  auto list = lists_.find(change.dir);
  if (list == lists_.end()) return;
  auto n = list->second.names.find(change.name);
  if (n == list->second.names.end() || n->second != ino || list->second.unsure.count(n->first)) {
    return;
  }
  if (attrs_.size() >= limits_.max_names) return;
  DropAttrLocked(ino);
  attrs_[ino] = Kept{attr, change.dir, change.name};
}

void DirNames::Forget(InodeId dir) {
  std::lock_guard lock(mu_);
  DropLocked(dir);
  TouchLocked(dir);
}

void DirNames::Recalled(InodeId dir, std::string_view name) {
  std::lock_guard lock(mu_);
  TouchLocked(dir);  // a listing under way may or may not have seen the change
  const std::string key(name);
  auto l = looked_.find(std::make_pair(dir.value(), key));
  if (l != looked_.end()) TouchInodeLocked(l->second);  // drops it and replies in flight
  auto it = lists_.find(dir.value());
  if (it == lists_.end()) return;
  auto n = it->second.names.find(key);
  if (n != it->second.names.end() && n->second != 0) TouchInodeLocked(n->second);
  it->second.unsure.insert(key);
  if (it->second.unsure.size() > limits_.max_unsure_per_dir) DropLocked(dir);
}

void DirNames::ForgetAll() {
  std::lock_guard lock(mu_);
  lists_.clear();
  gens_.clear();
  misses_.clear();
  founds_.clear();
  attrs_.clear();
  looked_.clear();
  touched_.clear();
  total_names_ = 0;
  ++epoch_;
}

size_t DirNames::complete_dirs() {
  std::lock_guard lock(mu_);
  return lists_.size();
}

size_t DirNames::names() {
  std::lock_guard lock(mu_);
  return total_names_;
}

size_t DirNames::attrs() {
  std::lock_guard lock(mu_);
  return attrs_.size();
}

size_t DirNames::looked() {
  std::lock_guard lock(mu_);
  return looked_.size();
}

void DirNames::DropLocked(InodeId dir) {
  DropLookedDirLocked(dir.value());
  auto it = lists_.find(dir.value());
  if (it == lists_.end()) return;
  for (const auto& [name, ino] : it->second.names) {
    if (ino != 0) DropAttrLocked(ino);
  }
  total_names_ -= it->second.names.size();
  lists_.erase(it);
}

void DirNames::TouchLocked(InodeId dir) {
  if (gens_.size() >= kMaxTracked && !gens_.count(dir.value())) {
    gens_.clear();
    ++epoch_;  // the tickets' dir_gen can no longer be checked: void them all
  }
  ++gens_[dir.value()];
}

void DirNames::TouchInodeLocked(uint64_t ino) {
  DropAttrLocked(ino);
  if (touched_.size() >= kMaxTracked && !touched_.count(ino)) {
    touched_.clear();
    touch_floor_ = touch_seq_ + 1;  // older tickets can no longer be checked
  }
  touched_[ino] = ++touch_seq_;
}

void DirNames::DropAttrLocked(uint64_t ino) {
  auto a = attrs_.find(ino);
  if (a == attrs_.end()) return;
  if (a->second.looked) looked_.erase(std::make_pair(a->second.dir, a->second.name));
  attrs_.erase(a);
}

void DirNames::DropLookedLocked(uint64_t dir, const std::string& name) {
  const auto key = std::make_pair(dir, name);
  auto l = looked_.find(key);
  if (l == looked_.end()) return;
  const uint64_t ino = l->second;
  looked_.erase(l);
  auto a = attrs_.find(ino);
  if (a != attrs_.end() && a->second.looked && a->second.dir == dir && a->second.name == name) {
    attrs_.erase(a);
  }
}

void DirNames::DropLookedDirLocked(uint64_t dir) {
  auto l = looked_.lower_bound(std::make_pair(dir, std::string()));
  while (l != looked_.end() && l->first.first == dir) {
    auto a = attrs_.find(l->second);
    if (a != attrs_.end() && a->second.looked && a->second.dir == dir) attrs_.erase(a);
    l = looked_.erase(l);
  }
}

void DirNames::KeepLookedLocked(uint64_t dir, const std::string& name, const Attributes& attr,
                                const Ticket& ticket) {
  const uint64_t ino = attr.inode.value();
  auto l = looked_.find(std::make_pair(dir, name));
  if (l != looked_.end() && l->second != ino) DropAttrLocked(l->second);  // erases l
  if (!Keepable(attr) || ticket.touch_seq < touch_floor_) return;
  auto t = touched_.find(ino);
  if (t != touched_.end() && t->second > ticket.touch_seq) return;  // changed since the ticket
  auto a = attrs_.find(ino);
  if (a != attrs_.end() && (a->second.dir != dir || a->second.name != name)) {
    DropAttrLocked(ino);  // one link, two names known: keep neither (as KeepLocked)
    return;
  }
  if (a == attrs_.end() && attrs_.size() >= limits_.max_names) return;
  if (looked_.size() >= limits_.max_looked && !looked_.count(std::make_pair(dir, name))) {
    // Full: start over rather than track which was used last.
    for (const auto& [key, looked_ino] : looked_) {
      auto k = attrs_.find(looked_ino);
      if (k != attrs_.end() && k->second.looked) attrs_.erase(k);
    }
    looked_.clear();
  }
  attrs_[ino] = Kept{attr, dir, name, /*looked=*/true};
  looked_[std::make_pair(dir, name)] = ino;
}

void DirNames::KeepLocked(uint64_t dir, const std::string& name, const Attributes& attr,
                          const Ticket& ticket) {
  if (!Keepable(attr) || ticket.touch_seq < touch_floor_) return;
  auto t = touched_.find(attr.inode.value());
  if (t != touched_.end() && t->second > ticket.touch_seq) return;  // changed since the ticket
  if (attrs_.size() >= limits_.max_names && !attrs_.count(attr.inode.value())) return;
  auto [it, added] = attrs_.try_emplace(attr.inode.value());
  if (!added && (it->second.dir != dir || it->second.name != name)) {
    // One link, two names known: something changed that this client did not see. Keep neither.
    DropAttrLocked(attr.inode.value());
    return;
  }
  if (!added && it->second.looked) looked_.erase(std::make_pair(dir, name));  // listed now
  it->second = Kept{attr, dir, name};
}

}  // namespace aquifer::client

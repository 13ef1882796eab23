// Complete directory name lists under cache leases (dir_names.h).
#include "client/rpc/dir_names.h"

#include <algorithm>

namespace aquifer::client {

namespace {
// Bookkeeping maps past this many entries are cleared (and every open ticket voided).
constexpr size_t kMaxTracked = 1 << 16;
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

DirNames::Known DirNames::Find(InodeId dir, std::string_view name, Clock::time_point now) {
  if (name.empty() || name == "." || name == "..") return Known::kUnknown;
  std::lock_guard lock(mu_);
  if (lease_.count() <= 0 || now >= trusted_until_) return Known::kUnknown;
  auto it = lists_.find(dir.value());
  if (it == lists_.end()) return Known::kUnknown;
  const std::string key(name);
  if (it->second.unsure.count(key)) return Known::kUnknown;
  return it->second.names.count(key) ? Known::kPresent : Known::kAbsent;
}

bool DirNames::NoteMiss(InodeId dir) {
  std::lock_guard lock(mu_);
  if (lease_.count() <= 0 || lists_.count(dir.value())) return false;
  if (misses_.size() >= kMaxTracked) misses_.clear();
  Misses& m = misses_[dir.value()];
  if (m.need == 0) m.need = limits_.first_listing_after;
  if (++m.count < m.need) return false;
  m.count = 0;
  m.need = std::min(m.need * 2, limits_.max_listing_after);
  return true;
}

DirNames::Ticket DirNames::Begin(InodeId dir) {
  std::lock_guard lock(mu_);
  auto g = gens_.find(dir.value());
  return Ticket{epoch_, g == gens_.end() ? 0 : g->second};
}

bool DirNames::Install(InodeId dir, const Ticket& ticket, std::vector<std::string> names) {
  std::lock_guard lock(mu_);
  if (lease_.count() <= 0 || ticket.epoch != epoch_) return false;
  auto g = gens_.find(dir.value());
  if ((g == gens_.end() ? 0 : g->second) != ticket.dir_gen) return false;
  if (names.size() > limits_.max_names_per_dir) return false;
  DropLocked(dir);
  if (total_names_ + names.size() > limits_.max_names) {
    // Full: start over rather than track which list was used last.
    lists_.clear();
    total_names_ = 0;
  }
  List& list = lists_[dir.value()];
  for (std::string& n : names) list.names.insert(std::move(n));
  total_names_ += list.names.size();
  misses_.erase(dir.value());
  TouchLocked(dir);
  return true;
}

void DirNames::Added(InodeId dir, std::string_view name) {
  std::lock_guard lock(mu_);
  TouchLocked(dir);
  auto it = lists_.find(dir.value());
  if (it == lists_.end()) return;
  const std::string key(name);
  it->second.unsure.erase(key);
  if (it->second.names.insert(key).second) ++total_names_;
  if (it->second.names.size() > limits_.max_names_per_dir || total_names_ > limits_.max_names) {
    DropLocked(dir);
  }
}

void DirNames::Removed(InodeId dir, std::string_view name) {
  std::lock_guard lock(mu_);
  TouchLocked(dir);
  auto it = lists_.find(dir.value());
  if (it == lists_.end()) return;
  const std::string key(name);
  it->second.unsure.erase(key);
  if (it->second.names.erase(key) != 0) --total_names_;
}

void DirNames::Forget(InodeId dir) {
  std::lock_guard lock(mu_);
  DropLocked(dir);
  TouchLocked(dir);
}

void DirNames::Recalled(InodeId dir, std::string_view name) {
  std::lock_guard lock(mu_);
  TouchLocked(dir);  // a listing under way may or may not have seen the change
  auto it = lists_.find(dir.value());
  if (it == lists_.end()) return;
  it->second.unsure.emplace(name);
  if (it->second.unsure.size() > limits_.max_unsure_per_dir) DropLocked(dir);
}

void DirNames::ForgetAll() {
  std::lock_guard lock(mu_);
  lists_.clear();
  gens_.clear();
  misses_.clear();
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

void DirNames::DropLocked(InodeId dir) {
  auto it = lists_.find(dir.value());
  if (it == lists_.end()) return;
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

}  // namespace aquifer::client

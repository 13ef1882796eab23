// Shared fixture for MetadataService tests: an in-memory store, test clocks that only move when
// a test moves them, six data servers in distinct failure domains, and an invariant checker.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "common/logging.h"
#include "metadata/metadata_service.h"

namespace aquifer::meta::testing {

inline Caller Root() { return Caller{}; }
inline Caller User(uint32_t uid = 1000, uint32_t gid = 1000) { return Caller{uid, gid, {}, 1}; }

class ServiceFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    SetupLogging("warn");
    opts_.db = "memory";
    Restart(NewMemoryStore());
  }

  void Restart(std::unique_ptr<NamespaceStore> store) {
    svc_.reset();
    Clocks c;
    c.wall = [this] {
      uint64_t ns = wall_ns_.fetch_add(1000) + 1000;
      return Timespec{static_cast<int64_t>(1700000000 + ns / 1000000000),
                      static_cast<uint32_t>(ns % 1000000000)};
    };
    c.mono_ms = [this] { return mono_ms_.load(); };
    auto s = MetadataService::Open(std::move(store), opts_, c);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    svc_ = std::move(*s);
  }

  void TearDown() override {
    svc_.reset();
    if (!rocks_dir_.empty()) std::filesystem::remove_all(rocks_dir_);
  }

  // Runs the service on a RocksDB store in a fresh scratch directory (deleted at TearDown).
  void UseRocksStore(const std::string& tag) {
    rocks_dir_ = (std::filesystem::temp_directory_path() /
                  ("aquifer-meta-" + tag + "-" + std::to_string(::getpid())))
                     .string();
    std::filesystem::remove_all(rocks_dir_);
    ReopenRocksStore();
  }
  // A crash and a start: the service goes with all its memory and opens again on the same
  // RocksDB directory (UseRocksStore first).
  void ReopenRocksStore() {
    svc_.reset();
    auto store = OpenRocksStore(rocks_dir_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    Restart(std::move(*store));
  }

  void AddServers(int n, const std::string& prefix = "srv") {
    for (int i = 0; i < n; ++i) {
      ServerRegistration r{"127.0.0.1:" + std::to_string(7000 + i), prefix + "-fd" + std::to_string(i),
                           1000000, 1000, prefix + "-uuid-" + std::to_string(i)};
      ASSERT_TRUE(svc_->RegisterServer(r).ok());
    }
  }

  Inode File(InodeId parent, const std::string& name, uint32_t mode = 0644,
             const Caller& c = Root()) {
    CreateArgs a;
    a.parent = parent;
    a.name = name;
    a.mode = S_IFREG | mode;
    a.exclusive = true;
    auto r = svc_->Create(a, c);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->attr : Inode{};
  }
  Inode Dir(InodeId parent, const std::string& name, uint32_t mode = 0755,
            const Caller& c = Root()) {
    auto r = svc_->Mkdir(parent, name, mode, c);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : Inode{};
  }
  Code CodeOf(const Status& s) { return s.code(); }

  // Walks the tree from the root and checks: every entry's inode exists, regular files' nlink
  // equals the names pointing at them, directories' nlink is 2 + subdirectories and their
  // entry count matches, every directory's ".." is the parent it was found in, and the number
  // of inodes reached equals the service's inode count (no leaked or orphaned inode).
  // Returns a text snapshot of the whole tree (attributes, xattrs) for "changes nothing" checks.
  std::string CheckInvariants() {
    std::map<uint64_t, uint32_t> names;  // ino -> names seen
    std::map<uint64_t, Inode> inodes;
    std::ostringstream snap;
    std::function<void(InodeId, const std::string&)> walk = [&](InodeId dir,
                                                                const std::string& path) {
      auto d = svc_->GetAttr(dir);
      EXPECT_TRUE(d.ok());
      if (!d.ok()) return;
      inodes[dir.value()] = *d;
      uint64_t cookie = 0, entries = 0, subdirs = 0;
      bool eof = false;
      while (!eof) {
        auto page = svc_->ReadDir(dir, cookie, 7, true, Root(), &eof);
        EXPECT_TRUE(page.ok()) << page.status().ToString();
        if (!page.ok()) return;
        for (const DirEntry& e : *page) {
          cookie = e.cookie;
          ++entries;
          EXPECT_TRUE(e.attr.has_value());
          auto n = svc_->GetAttr(e.ino);
          EXPECT_TRUE(n.ok()) << path << "/" << e.name << " points at a missing inode";
          if (!n.ok()) continue;
          EXPECT_EQ(e.mode, n->mode & S_IFMT);
          names[e.ino.value()]++;
          inodes[e.ino.value()] = *n;
          const Inode& a = *n;
          snap << path << "/" << e.name << " ino=" << a.ino.value() << " mode=" << a.mode
               << " nlink=" << a.nlink << " uid=" << a.uid << " gid=" << a.gid
               << " size=" << a.size << " mtime=" << a.mtime.sec << "." << a.mtime.nsec
               << " ctime=" << a.ctime.sec << "." << a.ctime.nsec;
          auto xs = svc_->ListXattr(e.ino, Root());
          if (xs.ok()) {
            for (const auto& x : *xs) snap << " x:" << x << "=" << *svc_->GetXattr(e.ino, x, Root());
          }
          snap << "\n";
          if (S_ISDIR(n->mode)) {
            ++subdirs;
            EXPECT_EQ(n->parent, dir) << path << "/" << e.name;
            walk(e.ino, path + "/" + e.name);
          }
        }
      }
      EXPECT_EQ(d->entry_count, entries) << path;
      EXPECT_EQ(d->nlink, 2 + subdirs) << path;
      snap << path << "/. mode=" << d->mode << " nlink=" << d->nlink << " mtime=" << d->mtime.sec
           << "." << d->mtime.nsec << "\n";
    };
    walk(kRootInode, "");
    for (const auto& [ino, count] : names) {
      if (!S_ISDIR(inodes[ino].mode)) EXPECT_EQ(inodes[ino].nlink, count) << "inode " << ino;
    }
    EXPECT_EQ(svc_->InodeCount(), inodes.size()) << "leaked or orphaned inodes";
    return snap.str();
  }

  MetaOptions opts_;
  std::atomic<uint64_t> wall_ns_{0};
  std::string rocks_dir_;  // UseRocksStore's directory; "" for the in-memory store
  std::atomic<int64_t> mono_ms_{1000000};
  std::unique_ptr<MetadataService> svc_;
};

}  // namespace aquifer::meta::testing

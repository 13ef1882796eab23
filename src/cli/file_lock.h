// An exclusive flock(2) on a lock file, held for the object's lifetime: how `aquifer` commands
// that read, change and replace one file on disk (a local cluster's record, the client
// registry) keep two of themselves from interleaving. Blocks until the lock is free.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "aquifer/status.h"

namespace aquifer::cli {

class FileLock {
 public:
  // Opens (creating with `mode`) and locks `path`. Errors: kInternal naming the failed call.
  static Result<FileLock> Acquire(const std::string& path, mode_t mode) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, mode);
    if (fd < 0) return Internal("cannot open " + path + ": " + std::strerror(errno));
    if (::flock(fd, LOCK_EX) != 0) {
      const int err = errno;
      ::close(fd);
      return Internal("cannot lock " + path + ": " + std::strerror(err));
    }
    return FileLock(fd);
  }
  FileLock(FileLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(FileLock&&) = delete;
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace aquifer::cli

#include "common/port_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace aquifer {

Status WritePortFile(const std::string& path, const std::string& address) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Internal("create " + tmp + ": " + std::strerror(errno));
  const std::string line = address + "\n";
  const bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  const int write_errno = errno;
  ::close(fd);
  if (!ok) {
    ::unlink(tmp.c_str());
    return Internal("write " + tmp + ": " + std::strerror(write_errno));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int rename_errno = errno;
    ::unlink(tmp.c_str());
    return Internal("rename " + tmp + " to " + path + ": " + std::strerror(rename_errno));
  }
  return OkStatus();
}

}  // namespace aquifer

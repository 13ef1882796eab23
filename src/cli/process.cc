#include "cli/process.h"

#include <fcntl.h>
#include <signal.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

namespace aquifer::cli {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPollInterval = std::chrono::milliseconds(20);

std::vector<char*> CArgv(const std::vector<std::string>& argv) {
  std::vector<char*> out;
  out.reserve(argv.size() + 1);
  for (const std::string& a : argv) out.push_back(const_cast<char*>(a.c_str()));
  out.push_back(nullptr);
  return out;
}

// Undoes the octal escapes (\040 for space etc.) of /proc/self/mountinfo fields.
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\') {
      int v = 0;
      bool ok = true;
      for (size_t j = 1; j <= 3; ++j) {
        if (i + j >= s.size() || s[i + j] < '0' || s[i + j] > '7') {
          ok = false;
          break;
        }
        v = v * 8 + (s[i + j] - '0');
      }
      if (ok) {
        out.push_back(static_cast<char>(v));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

std::vector<MountEntry> ReadMountInfo() {
  std::ifstream in("/proc/self/mountinfo");
  return ParseMountInfo(in);
}

// The addresses HOST resolves to (numeric text), or {} when it does not resolve.
std::set<std::string> ResolveHost(const std::string& host) {
  std::set<std::string> out;
  // "localhost" is loopback (RFC 6761 6.3) even where /etc/hosts is missing (a minimal root).
  if (host == "localhost") out = {"127.0.0.1", "::1"};
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return out;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    char text[NI_MAXHOST];
    if (::getnameinfo(a->ai_addr, a->ai_addrlen, text, sizeof(text), nullptr, 0,
                      NI_NUMERICHOST) == 0) {
      out.insert(text);
    }
  }
  ::freeaddrinfo(res);
  return out;
}

// "HOST:PORT" or "[V6]:PORT" -> {HOST, PORT}; {"", ""} without a colon.
std::pair<std::string, std::string> SplitHostPort(const std::string& address) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) return {"", ""};
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return {host, address.substr(colon + 1)};
}

}  // namespace

Result<pid_t> SpawnDetached(const std::vector<std::string>& argv, const std::string& log_path) {
  if (argv.empty()) return InvalidArgument("empty command line");
  int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return Internal("cannot open log " + log_path + ": " + std::strerror(errno));
  // The child reports an exec failure's errno through this pipe; a successful exec closes it
  // (O_CLOEXEC), so when read() returns 0 the child is already the new program.
  int exec_pipe[2];
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0) {
    int e = errno;
    ::close(log_fd);
    return Internal(std::string("pipe: ") + std::strerror(e));
  }
  std::vector<char*> cargv = CArgv(argv);
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    ::close(log_fd);
    ::close(exec_pipe[0]);
    ::close(exec_pipe[1]);
    return Internal(std::string("fork: ") + std::strerror(e));
  }
  if (pid == 0) {
    ::setsid();
    int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    for (int fd = 3; fd < 1024; ++fd) {
      if (fd != exec_pipe[1]) ::close(fd);
    }
    ::signal(SIGPIPE, SIG_DFL);
    ::execv(cargv[0], cargv.data());
    int e = errno;
    dprintf(2, "aquifer: cannot exec %s: %s\n", cargv[0], std::strerror(e));
    (void)!::write(exec_pipe[1], &e, sizeof(e));
    ::_exit(127);
  }
  ::close(log_fd);
  ::close(exec_pipe[1]);
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(exec_pipe[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  ::close(exec_pipe[0]);
  if (n > 0) {
    int st = 0;
    ::waitpid(pid, &st, 0);
    return Status(child_errno == ENOENT ? Code::kNotFound : Code::kInternal,
                  "cannot exec " + argv[0] + ": " + std::strerror(child_errno));
  }
  return pid;
}

Result<int> RunAndWait(const std::vector<std::string>& argv) {
  if (argv.empty()) return InvalidArgument("empty command line");
  std::vector<char*> cargv = CArgv(argv);
  pid_t pid = ::fork();
  if (pid < 0) return Internal(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    ::dup2(2, 1);
    ::execvp(cargv[0], cargv.data());
    dprintf(2, "aquifer: cannot exec %s: %s\n", cargv[0], std::strerror(errno));
    ::_exit(127);
  }
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0) {
    if (errno != EINTR) return Internal(std::string("waitpid: ") + std::strerror(errno));
  }
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return 1;
}

void ReapIfChild(pid_t pid) {
  if (pid > 0) {
    int st = 0;
    ::waitpid(pid, &st, WNOHANG);
  }
}

bool IsProcessAlive(pid_t pid, const std::string& exe_name) {
  if (pid <= 0) return false;
  ReapIfChild(pid);
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  // A zombie is dead for our purposes.
  std::ifstream stat_file("/proc/" + std::to_string(pid) + "/stat");
  std::string stat_line;
  if (!std::getline(stat_file, stat_line)) return false;
  size_t paren = stat_line.rfind(')');
  if (paren != std::string::npos && paren + 2 < stat_line.size()) {
    char state = stat_line[paren + 2];
    if (state == 'Z' || state == 'X') return false;
  }
  char buf[4096];
  std::string link = "/proc/" + std::to_string(pid) + "/exe";
  ssize_t n = ::readlink(link.c_str(), buf, sizeof(buf) - 1);
  if (n <= 0) return false;
  std::string exe(buf, static_cast<size_t>(n));
  const std::string deleted = " (deleted)";  // the binary was rebuilt under a running daemon
  if (exe.size() > deleted.size() &&
      exe.compare(exe.size() - deleted.size(), deleted.size(), deleted) == 0) {
    exe.resize(exe.size() - deleted.size());
  }
  return std::filesystem::path(exe).filename() == exe_name;
}

Result<bool> StopProcess(pid_t pid, const std::string& exe_name,
                         std::chrono::milliseconds grace) {
  if (!IsProcessAlive(pid, exe_name)) return false;
  ::kill(pid, SIGTERM);
  auto deadline = Clock::now() + grace;
  while (Clock::now() < deadline) {
    if (!IsProcessAlive(pid, exe_name)) return false;
    std::this_thread::sleep_for(kPollInterval);
  }
  ::kill(pid, SIGKILL);
  deadline = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < deadline) {
    if (!IsProcessAlive(pid, exe_name)) return true;
    std::this_thread::sleep_for(kPollInterval);
  }
  return Internal(exe_name + " pid " + std::to_string(pid) + " survived SIGKILL");
}

Result<std::string> WaitForPortFile(const std::string& port_file, pid_t pid,
                                    const std::string& exe_name,
                                    std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (true) {
    std::ifstream in(port_file);
    std::string text;
    if (in && std::getline(in, text)) {
      while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r')) {
        text.pop_back();
      }
      if (text.find(':') != std::string::npos) return text;
    }
    if (!IsProcessAlive(pid, exe_name)) {
      return Unavailable(exe_name + " (pid " + std::to_string(pid) + ") exited before serving");
    }
    if (Clock::now() >= deadline) {
      return Unavailable(exe_name + " (pid " + std::to_string(pid) + ") did not write " +
                         port_file + " within " + std::to_string(timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

std::vector<MountEntry> ParseMountInfo(std::istream& in) {
  std::vector<MountEntry> out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string f[5];
    for (auto& x : f) ls >> x;
    std::string tok;
    while (ls >> tok && tok != "-") {
    }
    MountEntry e;
    ls >> e.fstype >> e.source;
    if (f[4].empty() || e.fstype.empty()) continue;
    e.point = Unescape(f[4]);
    e.source = Unescape(e.source);
    out.push_back(std::move(e));
  }
  return out;
}

std::string MountTypeAt(const std::string& dir) {
  std::string want = dir;
  while (want.size() > 1 && want.back() == '/') want.pop_back();
  std::string type;
  for (const MountEntry& m : ReadMountInfo()) {
    if (m.point == want) type = m.fstype;  // the last one stacks on top
  }
  return type;
}

std::vector<std::string> FuseMountsUnder(const std::string& prefix) {
  std::vector<std::string> out;
  for (const MountEntry& m : ReadMountInfo()) {
    if (m.fstype.rfind("fuse", 0) == 0 && m.point.rfind(prefix, 0) == 0) out.push_back(m.point);
  }
  return out;
}

bool IsAquiferMount(const MountEntry& m) {
  return m.fstype.rfind("fuse", 0) == 0 && m.fstype.find("aquifer") != std::string::npos;
}

std::string MetaAddressOfSource(const std::string& source) {
  constexpr std::string_view kPrefix = "aquifer:";
  if (source.rfind(kPrefix, 0) != 0) return "";
  return source.substr(kPrefix.size());
}

bool SameEndpoint(const std::string& a, const std::string& b) {
  if (a == b) return true;
  auto [host_a, port_a] = SplitHostPort(a);
  auto [host_b, port_b] = SplitHostPort(b);
  if (port_a.empty() || port_a != port_b) return false;
  if (host_a == host_b) return true;
  std::set<std::string> addrs_a = ResolveHost(host_a);
  for (const std::string& addr : ResolveHost(host_b)) {
    if (addrs_a.count(addr)) return true;
  }
  return false;
}

std::vector<std::string> AquiferMountsOf(const std::vector<MountEntry>& mounts,
                                         const std::string& meta_address) {
  std::vector<std::string> out;
  for (const MountEntry& m : mounts) {
    if (!IsAquiferMount(m)) continue;
    const std::string addr = MetaAddressOfSource(m.source);
    if (!addr.empty() && SameEndpoint(addr, meta_address)) {
      out.push_back(m.point + " (" + m.fstype + ")");
    }
  }
  return out;
}

std::vector<std::string> AquiferMounts(const std::string& meta_address) {
  return AquiferMountsOf(ReadMountInfo(), meta_address);
}

Result<std::string> MetaAddressOfPath(const std::string& path) {
  std::error_code ec;
  std::string real = std::filesystem::weakly_canonical(path, ec).string();
  if (ec || real.empty()) return NotFound("cannot resolve " + path);
  const MountEntry* best = nullptr;
  std::vector<MountEntry> mounts = ReadMountInfo();
  for (const MountEntry& m : mounts) {
    const bool under = real == m.point || m.point == "/" ||
                       (real.rfind(m.point, 0) == 0 && real[m.point.size()] == '/');
    // The longest mount point holding the path; among equal ones the last (it stacks on top).
    if (under && (best == nullptr || m.point.size() >= best->point.size())) best = &m;
  }
  if (best == nullptr || !IsAquiferMount(*best)) {
    return Status(Code::kNotSupported, path + " is not on an Aquifer mount");
  }
  std::string addr = MetaAddressOfSource(best->source);
  if (addr.empty()) {
    return Status(Code::kNotSupported, "the mount " + best->point + " does not name its "
                                       "metadata server (source '" + best->source + "')");
  }
  return addr;
}

std::string SelfExePath() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  return std::string(buf, static_cast<size_t>(n));
}

Result<std::string> FindBinary(const std::string& name, const std::string& bin_dir) {
  namespace fs = std::filesystem;
  const char* module = name == "aquifer-meta"    ? "metadata"
                       : name == "aquifer-data"  ? "server"
                       : name == "aquifer-mount" ? "client_fuse"
                                                 : "cli";
  std::vector<fs::path> candidates;
  if (!bin_dir.empty()) {
    candidates.push_back(fs::path(bin_dir) / name);
    candidates.push_back(fs::path(bin_dir) / "src" / module / name);
  } else {
    std::string self = SelfExePath();
    if (!self.empty()) {
      fs::path dir = fs::path(self).parent_path();
      candidates.push_back(dir / name);
      candidates.push_back(dir.parent_path() / module / name);
    }
    const char* path_env = ::getenv("PATH");
    std::string path = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
    std::stringstream ss(path);
    std::string part;
    while (std::getline(ss, part, ':')) {
      if (!part.empty()) candidates.push_back(fs::path(part) / name);
    }
  }
  std::string tried;
  for (const fs::path& c : candidates) {
    if (::access(c.c_str(), X_OK) == 0 && fs::is_regular_file(c)) {
      return fs::absolute(c).lexically_normal().string();
    }
    if (tried.size() < 600) tried += (tried.empty() ? "" : ", ") + c.string();
  }
  return NotFound("cannot find " + name + " (tried " + tried +
                  "); build it (scripts/build.sh) or pass --bin-dir");
}

std::string TailOfFile(const std::string& path, int max_lines) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    lines.push_back(line);
    if (static_cast<int>(lines.size()) > max_lines) lines.pop_front();
  }
  std::string out;
  for (const std::string& l : lines) out += "    " + l + "\n";
  return out;
}

Status MakeDirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return Internal("cannot create directory " + path + ": " + ec.message());
  return OkStatus();
}

}  // namespace aquifer::cli

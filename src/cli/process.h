// Process helpers for the local cluster: start a daemon detached with its output in a log file,
// tell whether a recorded pid is still that daemon, stop it with a deadline, wait for the
// port file a daemon writes once it serves, find mounts, and find sibling binaries.
// Single-threaded use (the `aquifer` command); nothing here keeps state.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <istream>
#include <string>
#include <vector>

#include "aquifer/status.h"

namespace aquifer::cli {

// Starts argv[0] (an absolute path) with argv in a new session (setsid), stdin from /dev/null,
// stdout and stderr appended to `log_path`. Returns the child's pid once it has exec'd (so
// /proc/PID/exe names the new program); the child outlives this process. Errors: kNotFound when
// argv[0] does not exist, kInternal when fork or exec fails or the log cannot be opened (the
// exec error is also written to the log).
Result<pid_t> SpawnDetached(const std::vector<std::string>& argv, const std::string& log_path);

// Runs argv to completion (no shell), output to this process's stderr. Returns its exit code
// (128 + signal number when killed). Errors: kInternal when it cannot be started.
Result<int> RunAndWait(const std::vector<std::string>& argv);

// True when `pid` > 0 is a live (not zombie) process whose executable's file name is
// `exe_name` (e.g. "aquifer-data"), so a recycled pid is not mistaken for our daemon.
bool IsProcessAlive(pid_t pid, const std::string& exe_name);

// Reaps `pid` if it is a child of this process that has exited; no effect otherwise.
void ReapIfChild(pid_t pid);

// Sends SIGTERM to `pid` (if alive as `exe_name`), waits up to `grace` for it to exit, then
// SIGKILL and waits up to 5 s more. Returns true when it had to use SIGKILL.
// Errors: kInternal when the process is still alive after SIGKILL.
Result<bool> StopProcess(pid_t pid, const std::string& exe_name, std::chrono::milliseconds grace);

// Waits until `port_file` exists and holds "HOST:PORT", polling every 20 ms, while `pid` stays
// alive as `exe_name`. Returns the trimmed contents. Errors: kUnavailable when the process
// exits first ("exited before serving; see LOG") or the deadline passes.
Result<std::string> WaitForPortFile(const std::string& port_file, pid_t pid,
                                    const std::string& exe_name,
                                    std::chrono::milliseconds timeout);

// One line of /proc/self/mountinfo (proc(5)): mount point, file system type (e.g.
// "fuse.aquifer") and source (aquifer-mount's fsname, "aquifer:HOST:PORT"), octal escapes undone.
struct MountEntry {
  std::string point;
  std::string fstype;
  std::string source;
};

// Parses mountinfo text, one mount per line; malformed lines are skipped.
std::vector<MountEntry> ParseMountInfo(std::istream& in);

// The file system type of the mount at `dir` (e.g. "fuse.aquifer"), from /proc/self/mountinfo,
// or "" when nothing is mounted exactly there.
std::string MountTypeAt(const std::string& dir);

// Mount points (absolute paths) of every mount whose type starts with "fuse" and whose mount
// point starts with `prefix` (e.g. "/tmp/aquifer-").
std::vector<std::string> FuseMountsUnder(const std::string& prefix);

// True for a mount whose type starts with "fuse" and contains "aquifer".
bool IsAquiferMount(const MountEntry& mount);

// The metadata server address in an Aquifer mount's source: "aquifer:HOST:PORT" -> "HOST:PORT";
// "" for any other source.
std::string MetaAddressOfSource(const std::string& source);

// Whether two HOST:PORT addresses name the same endpoint: the same text, or the same port and
// hosts that resolve (getaddrinfo, may ask DNS) to a common address ("localhost:7000" and
// "127.0.0.1:7000").
bool SameEndpoint(const std::string& a, const std::string& b);

// "MOUNTPOINT (TYPE)" of every Aquifer mount in `mounts` whose source names `meta_address`
// (SameEndpoint): the mounts of that cluster, not every FUSE mount of the host.
std::vector<std::string> AquiferMountsOf(const std::vector<MountEntry>& mounts,
                                         const std::string& meta_address);

// AquiferMountsOf(this host's /proc/self/mountinfo, meta_address).
std::vector<std::string> AquiferMounts(const std::string& meta_address);

// The metadata server address of the Aquifer mount holding `path` (the mount's source). Errors:
// kNotFound (the path cannot be resolved), kNotSupported (not on an Aquifer mount, or the mount's
// source names no address).
Result<std::string> MetaAddressOfPath(const std::string& path);

// Absolute path of this executable (/proc/self/exe), or "" when unreadable.
std::string SelfExePath();

// Finds the executable `name` (e.g. "aquifer-meta"). Order: if `bin_dir` is not empty, only
// bin_dir/name and bin_dir/src/<module>/name (bin_dir may be a build tree); otherwise beside
// this executable, in the build tree relative to it (../metadata/, ../server/,
// ../client_fuse/), then $PATH. Errors: kNotFound listing the places tried.
Result<std::string> FindBinary(const std::string& name, const std::string& bin_dir);

// The last `max_lines` lines of a text file ("" if unreadable), for error messages.
std::string TailOfFile(const std::string& path, int max_lines);

// mkdir -p. Errors: kInternal with the errno text.
Status MakeDirs(const std::string& path);

}  // namespace aquifer::cli

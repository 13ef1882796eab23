// aquifer-mount: mounts an Aquifer cluster with libfuse3's low-level API and a multi-threaded
// session loop. Also run as mount.aquifer / mount.fuse.aquifer by mount(8). See mount_options.h
// for the command line and fuse_ops.h for the kernel-side setup.
//
// Start-up order: parse options and create the FUSE session (option errors print on the
// terminal), then fork unless -f (gRPC is not fork-safe, so the daemon forks before the client
// library starts any thread, and the parent waits on a pipe until the child has connected and
// mounted: it exits 0 only once the mount is up, which is what mount(8) and fstab need), then
// connect the client library, mount, and run the loop. On SIGTERM/SIGINT/SIGHUP or
// `fusermount3 -u` the loop ends; the daemon unmounts, flushes and releases every file the
// kernel left open, and closes its session.
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "client_fuse/fuse_ops.h"
#include "client_fuse/fuse_uring.h"
#include "client_fuse/kernel_invalidator.h"
#include "common/allocator.h"
#include "common/client_credential.h"
#include "common/cluster_key.h"
#include "common/tls.h"
#include "wire/conn.h"
#include "common/lock_checks.h"
#include "common/http_endpoint.h"
#include "common/logging.h"
#include "common/metrics.h"

namespace aquifer::fuse {
namespace {

// The kernel's read-ahead window for this mount, KiB. FUSE starts a mount at 128 KiB (and the
// INIT reply can only lower it), which cuts a sequential reader into 128 KiB requests; the
// window is raised through the mount's bdi in sysfs (needs root; best effort).
constexpr int kReadAheadKib = 4096;

// The newest mount at `path` (an absolute, resolved path) as /proc/self/mountinfo lists it: its
// device ("major:minor") and file-system type; nullopt when nothing is mounted there. The
// mount-point field escapes space, tab, newline and backslash as \ooo octal.
struct MountEntry {
  std::string dev;
  std::string type;
};
std::optional<MountEntry> NewestMountAt(const std::string& path) {
  auto unescape = [](const std::string& f) {
    std::string out;
    for (size_t i = 0; i < f.size(); ++i) {
      if (f[i] == '\\' && i + 3 < f.size() &&
          std::isdigit(static_cast<unsigned char>(f[i + 1]))) {
        out += static_cast<char>(std::stoi(f.substr(i + 1, 3), nullptr, 8));
        i += 3;
      } else {
        out += f[i];
      }
    }
    return out;
  };
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::string line;
  std::optional<MountEntry> found;
  while (std::getline(mountinfo, line)) {
    std::istringstream fields(line);
    std::string id, parent, majmin, root, point, field;
    fields >> id >> parent >> majmin >> root >> point;
    if (unescape(point) != path) continue;
    while (fields >> field && field != "-") {
    }
    fields >> field;
    found = MountEntry{majmin, field};  // the last match is the newest mount
  }
  return found;
}

void RaiseReadAhead(const std::string& mountpoint) {
  const std::optional<MountEntry> m = NewestMountAt(mountpoint);
  if (!m) return;
  std::ofstream ra("/sys/class/bdi/" + m->dev + "/read_ahead_kb");
  ra << kReadAheadKib << "\n";
  ra.flush();
  Logger("fuse")->info("read_ahead_kb={} bdi={} ok={}", kReadAheadKib, m->dev, ra.good());
}

// Tells the waiting parent how start-up ended (0 = mounted) and closes the pipe.
void NotifyParent(int& fd, char status) {
  if (fd < 0) return;
  ssize_t ignored = write(fd, &status, 1);
  (void)ignored;
  close(fd);
  fd = -1;
}

// Forks; the parent waits for the child's start-up verdict and exits with it. Returns in the child
// with the write end of the pipe.
int ForkAndWait() {
  int fds[2];
  if (pipe(fds) != 0) {
    perror("aquifer-mount: pipe");
    exit(1);
  }
  pid_t pid = fork();
  if (pid < 0) {
    perror("aquifer-mount: fork");
    exit(1);
  }
  if (pid > 0) {
    close(fds[1]);
    char status = 1;
    ssize_t n = read(fds[0], &status, 1);
    _exit(n == 1 ? status : 1);
  }
  close(fds[0]);
  setsid();
  return fds[1];
}

// The client library's counters as Prometheus families, read at each scrape (docs/metrics.md).
metrics::Collector RegisterClientMetrics(const Client* client) {
  return metrics::Collector([client] {
    using metrics::Counter;
    const ClientCounters c = client->Counters();
    auto one = [](uint64_t v) { return std::vector<metrics::Sample>{{{}, static_cast<double>(v)}}; };
    std::vector<metrics::Sample> by_cause;
    for (size_t i = 0; i < c.degraded_reads_by_cause.size(); ++i) {
      by_cause.push_back({{{"cause", DegradedCauseNames()[i]}},
                          static_cast<double>(c.degraded_reads_by_cause[i])});
    }
    return std::vector<prometheus::MetricFamily>{
        Counter("aquifer_client_meta_calls_total",
                "metadata calls sent to aquifer-meta (a retried call counts once)",
                one(c.meta_calls)),
        Counter("aquifer_client_cache_answers_total",
                "lookups and getattrs answered in the mount from what cache leases keep, with "
                "no metadata call",
                {{{{"kind", "lookup_absent"}}, static_cast<double>(c.lookups_answered_absent)},
                 {{{"kind", "lookup_found"}}, static_cast<double>(c.lookups_answered_found)},
                 {{{"kind", "getattr"}}, static_cast<double>(c.getattrs_answered)}}),
        Counter("aquifer_client_dir_listings_total",
                "directory name lists fetched to answer lookups under cache leases",
                one(c.dir_listings)),
        Counter("aquifer_client_local_creates_total",
                "creates answered in the mount under an exclusive directory lease",
                one(c.creates_local)),
        Counter("aquifer_client_change_batches_total",
                "ChangeBatch calls that sent the changes made under directory leases",
                one(c.change_batches)),
        Counter("aquifer_client_chunk_reads_total", "chunk read RPCs sent to data servers",
                one(c.chunk_reads)),
        Counter("aquifer_client_degraded_reads_total",
                "stripe reads decoded from other chunks, by the cause of the first missing one",
                by_cause),
        Counter("aquifer_client_lost_stripe_reads_total",
                "reads of stripes with fewer than k chunks left (answered EIO)",
                one(c.lost_stripe_reads)),
    };
  });
}

void RedirectStdio(const std::string& log_file) {
  int null_fd = open("/dev/null", O_RDWR);
  if (null_fd >= 0) {
    dup2(null_fd, 0);
    dup2(null_fd, 1);
  }
  int err_fd = log_file.empty() ? null_fd : open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (err_fd >= 0) dup2(err_fd, 2);
  if (err_fd > 2 && err_fd != null_fd) close(err_fd);
  if (null_fd > 2) close(null_fd);
}

int Run(int argc, char** argv) {
  // Stripe-sized buffers (1-4 MiB) come and go per request: keep freed memory in the heap
  // instead of mmap/munmap per buffer, which cost a page fault and a kernel zero-fill per 4 KiB.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc refuses more than 32 MiB
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  Result<MountOptions> parsed = ParseMountArgs(argc, argv);
  if (!parsed.ok()) {
    fprintf(stderr, "aquifer-mount: %s\n%s", parsed.status().message().c_str(), UsageText());
    return 1;
  }
  MountOptions opts = std::move(*parsed);
  if (opts.help) {
    fputs(UsageText(), stdout);
    fuse_lowlevel_help();
    return 0;
  }
  if (opts.version) {
    printf("aquifer-mount %s (libfuse %s)\n", AQUIFER_VERSION, fuse_pkgversion());
    return 0;
  }
  char real[PATH_MAX];
  if (realpath(opts.mountpoint.c_str(), real) == nullptr) {
    fprintf(stderr, "aquifer-mount: bad mountpoint '%s': %s\n", opts.mountpoint.c_str(),
            strerror(errno));
    return 1;
  }
  opts.mountpoint = real;
  // A second mount on a mounted point hides the first (its processes keep using it) and a later
  // unmount takes the wrong one off: refuse. An autofs point (systemd's x-systemd.automount) is
  // meant to be mounted over.
  if (const std::optional<MountEntry> m = NewestMountAt(opts.mountpoint);
      m && m->type != "autofs") {
    fprintf(stderr,
            "aquifer-mount: %s is already a mount point (%s): unmount it first "
            "(fusermount3 -u %s)\n",
            opts.mountpoint.c_str(), m->type.c_str(), opts.mountpoint.c_str());
    return 1;
  }
  // With -o log_file=, the log goes there from the first line (errors that stop the mount are
  // still printed on stderr too).
  if (Status logging = SetupLogging(opts.log_level, opts.log_file); !logging.ok()) {
    fprintf(stderr, "aquifer-mount: %s\n", logging.ToString().c_str());
    return 2;
  }
  TuneAllocator();
  DisableMutexDeadlockDetection();
  bool client_credential = false;
  if (Status key = LoadKeyOrCredentialForProcess(KeyFilePath(opts.key_file), &client_credential);
      !key.ok()) {
    fprintf(stderr, "aquifer-mount: key: %s\n", key.ToString().c_str());
    return 2;
  }
  if (Result<std::shared_ptr<const Tls>> tls =
          LoadTlsForProcess(false, {opts.tls_ca, "", "", opts.tls_server_name}, false);
      !tls.ok()) {
    fprintf(stderr, "aquifer-mount: TLS: %s\n", tls.status().ToString().c_str());
    return 2;
  } else if (*tls != nullptr) {
    Logger("mount")->info("TLS on: ca={} server_name={}",
                          opts.tls_ca.empty() ? "$AQUIFER_TLS_CA" : opts.tls_ca,
                          (*tls)->server_name());
  }
  if (client_credential) {
    // The wires' handshake proves the cluster key itself; a client credential calls over gRPC,
    // where its token names it (docs/design.md "Client credentials and exports").
    opts.meta_wire = false;
    opts.data_wire = false;
  }

  // Declared before the daemon so it outlives the client whose recall thread calls it.
  std::unique_ptr<KernelInvalidator> invalidator;
  Daemon daemon;
  daemon.options = opts;
  std::vector<std::string> fuse_argv = {argv[0], "-o", FuseOptionString(opts, geteuid() == 0)};
  if (opts.fuse_debug) fuse_argv.push_back("-d");
  std::vector<char*> ptrs;
  for (std::string& a : fuse_argv) ptrs.push_back(a.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(ptrs.size()), ptrs.data());
  fuse_session* se = fuse_session_new(&args, &Operations(), sizeof(fuse_lowlevel_ops), &daemon);
  fuse_opt_free_args(&args);
  if (se == nullptr) {
    fprintf(stderr, "aquifer-mount: the FUSE options were refused (see the message above)\n%s",
            UsageText());
    return 1;
  }
  daemon.session = se;

  if (opts.transport == FuseTransport::kUring && !KernelOffersFuseUring()) {
    fprintf(stderr,
            "aquifer-mount: -o transport=uring, but the kernel does not offer FUSE over io_uring "
            "(needs Linux 6.14+ with CONFIG_FUSE_IO_URING, and as root: echo 1 > "
            "/sys/module/fuse/parameters/enable_uring); use transport=auto or dev\n");
    fuse_session_destroy(se);
    return 1;
  }
  int notify_fd = opts.foreground ? -1 : ForkAndWait();
  if (opts.cache_leases) {
    // A recall is acknowledged once the kernel dropped what it names; after 50 ms when a change
    // of this mount holds the directory, 2 s at most otherwise (see kernel_invalidator.h; the
    // metadata server waits 8 s by default). Made after the fork:
    // a thread started before it would not exist in the daemon (its join waited forever on a
    // thread id the daemon's next thread took, and no recall reached the kernel).
    invalidator = std::make_unique<KernelInvalidator>(
        se, std::chrono::milliseconds(50),
        [&daemon](uint64_t ino) { return daemon.inodes.LookupCount(InodeId(ino)) > 0; },
        std::chrono::milliseconds(2000),
        [&daemon](uint64_t dir) { return daemon.dir_changes.Any(dir); });
  }

  // Threads the client library starts inherit a blocked mask, so the termination signals reach
  // this thread, where the session loop waits.
  sigset_t term_signals;
  sigemptyset(&term_signals);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&term_signals, sig);
  pthread_sigmask(SIG_BLOCK, &term_signals, nullptr);

  ClientOptions client_options;
  client_options.meta_address = opts.meta_address;
  client_options.data_wire = opts.data_wire;
  client_options.meta_wire = opts.meta_wire;
  client_options.lease_wait =
      std::chrono::milliseconds(static_cast<int64_t>(opts.lease_wait_s * 1000));
  client_options.meta_outage_wait =
      std::chrono::milliseconds(static_cast<int64_t>(opts.meta_wait_s * 1000));
  client_options.attr_cache_ttl =
      std::chrono::milliseconds(static_cast<int64_t>(opts.attr_timeout_s * 1000 / 2));
  client_options.replaced_view_keep =
      std::chrono::milliseconds(static_cast<int64_t>(opts.attr_timeout_s * 1000) + 1000);
  // A lock grant that finds the file changed on another host drops the kernel's pages and
  // attributes of it before the grant is answered (Client::SetLock), so the holder reads what the
  // previous holder wrote. The kernel holds no inode or page lock of ours in a SETLK or FLOCK
  // request (and the blocked-lock thread is no request at all), so the invalidation cannot wait
  // on the thread that asks for it; a write handler could, which is why only locks do this.
  client_options.on_changed_at_lock = [&daemon](InodeId inode) {
    const int rc = fuse_lowlevel_notify_inval_inode(daemon.session, inode.value(), 0, 0);
    if (rc != 0 && rc != -ENOENT) {
      Logger("fuse")->warn("drop cached pages at lock inode={} rc={}", inode.value(), rc);
    }
  };
  client_options.cache_leases = opts.cache_leases;
  client_options.lazy_opens = opts.lazy_opens;
  client_options.dir_leases = opts.dir_leases && opts.cache_leases;
  if (invalidator) {
    KernelInvalidator* inv = invalidator.get();
    client_options.on_attrs_recalled = [inv, &daemon](InodeId inode) {
      inv->Attrs(inode, daemon.recall_epoch.fetch_add(1) + 1);
    };
    client_options.on_name_recalled = [inv, &daemon](InodeId parent, const std::string& name) {
      inv->Name(parent, name, daemon.recall_epoch.fetch_add(1) + 1);
    };
    daemon.invalidator = inv;
  }
  char host[256] = "host";
  gethostname(host, sizeof host - 1);
  client_options.client_name = !opts.client_name.empty()
                                   ? opts.client_name
                                   : std::string(host) + ":" + std::to_string(getpid()) + ":" +
                                         opts.mountpoint;
  Result<std::unique_ptr<Client>> client = Client::Connect(client_options);
  if (!client.ok()) {
    // gRPC says only "unavailable" when TLS fails: a plain client of a TLS server, or a TLS
    // client that refuses the server's certificate. Say which.
    std::string why;
    if (client.status().code() == Code::kUnavailable) {
      if (ProcessTls() == nullptr) {
        why = " (if the cluster runs with TLS, give its CA: -o tls_ca=FILE or "
              "AQUIFER_TLS_CA=FILE)";
      } else if (auto at = ParseListenAddress(opts.meta_address); at.ok()) {
        Status probe = wire::ProbeTls(at->first, at->second, *ProcessTls(),
                                      std::chrono::steady_clock::now() + std::chrono::seconds(5));
        if (!probe.ok()) why = " (" + probe.message() + ")";
      }
    }
    fprintf(stderr, "aquifer-mount: cannot connect to aquifer-meta at %s: %s%s\n",
            opts.meta_address.c_str(), client.status().ToString().c_str(), why.c_str());
    NotifyParent(notify_fd, 1);
    if (invalidator) invalidator->Stop();
    fuse_session_destroy(se);
    return 1;
  }
  daemon.client = std::move(*client);
  daemon.cache_leases = invalidator != nullptr && daemon.client->CachesUnderLeases();
  // /metrics: FUSE requests are counted by the handlers (fuse_metrics.h); the client library's
  // counters are read at each scrape. Started before the mount, so a port that cannot be bound
  // fails the mount rather than leaving it unwatched.
  metrics::Collector client_metrics = RegisterClientMetrics(daemon.client.get());
  std::unique_ptr<HttpEndpoint> http;
  if (!opts.http_listen.empty()) {
    auto started = ServeHttp(opts.http_listen, opts.http_port_file,
                             {{"/metrics", [] { return metrics::MetricsReply(); }}});
    if (!started.ok()) {
      fprintf(stderr, "aquifer-mount: cannot serve /metrics on %s: %s\n", opts.http_listen.c_str(),
              started.status().ToString().c_str());
      NotifyParent(notify_fd, 1);
      if (invalidator) invalidator->Stop();
      fuse_session_destroy(se);
      return 1;
    }
    http = std::move(*started);
    Logger("fuse")->info("http address={} (/metrics)", http->address());
  }
  daemon.lock_waiters = std::make_unique<LockWaiters>(*daemon.client);

  if (fuse_session_mount(se, opts.mountpoint.c_str()) != 0) {
    fprintf(stderr, "aquifer-mount: cannot mount on %s (see the message above)\n",
            opts.mountpoint.c_str());
    NotifyParent(notify_fd, 1);
    if (invalidator) invalidator->Stop();
    fuse_session_destroy(se);
    return 1;
  }
  // The transport: FUSE over io_uring when asked or offered (fuse_uring.h); the hooks decide at
  // FUSE_INIT, from what the kernel offers then, and log the choice.
  std::unique_ptr<FuseUring> uring;
  std::unique_ptr<FuseUring> init_hooks;  // /dev/fuse: the hooks complete the INIT reply only
  const bool dev_only = opts.transport == FuseTransport::kDev ||
                        (opts.transport == FuseTransport::kAuto && !KernelOffersFuseUring());
  if (dev_only) {
    if (opts.transport == FuseTransport::kDev) {
      Logger("fuse")->info("fuse transport=dev (-o transport=dev)");
    } else {
      Logger("fuse")->info(
          "fuse transport=dev: the kernel does not offer FUSE over io_uring "
          "(/sys/module/fuse/parameters/enable_uring is not Y)");
    }
    FuseUring::Options hooks_only;
    hooks_only.rings = false;
    auto installed = FuseUring::Install(se, hooks_only);
    if (installed.ok()) {
      init_hooks = std::move(*installed);
    } else {
      Logger("fuse")->warn("fuse: lookups of one directory stay serialised (the INIT reply "
                           "cannot be completed: {})", installed.status().ToString());
    }
  } else {
    FuseUring::Options uring_options;
    uring_options.threads_per_queue = std::clamp(opts.max_threads / 2, 2u, 16u);
    // A queue serves the requests of one CPU's callers and grows while all its entries are
    // busy: each may reach max_threads, as /dev/fuse's loop may.
    uring_options.max_threads_per_queue = std::max(opts.max_threads, uring_options.threads_per_queue);
    uring_options.required = opts.transport == FuseTransport::kUring;
    auto installed = FuseUring::Install(se, uring_options);
    if (installed.ok()) {
      uring = std::move(*installed);
    } else if (opts.transport == FuseTransport::kUring) {
      fprintf(stderr, "aquifer-mount: -o transport=uring: %s\n",
              installed.status().ToString().c_str());
      fuse_session_unmount(se);
      NotifyParent(notify_fd, 1);
      if (invalidator) invalidator->Stop();
      fuse_session_destroy(se);
      return 1;
    } else {
      Logger("fuse")->warn("fuse transport=dev: {}", installed.status().ToString());
    }
  }
  if (fuse_set_signal_handlers(se) != 0) {
    fprintf(stderr, "aquifer-mount: cannot install signal handlers\n");
    fuse_session_unmount(se);
    NotifyParent(notify_fd, 1);
    if (invalidator) invalidator->Stop();
    fuse_session_destroy(se);
    return 1;
  }
  RaiseReadAhead(opts.mountpoint);
  pthread_sigmask(SIG_UNBLOCK, &term_signals, nullptr);
  Logger("fuse")->info(
      "mounted meta={} mountpoint={} attr_timeout={}s entry_timeout={}s cache_leases={}",
      opts.meta_address, opts.mountpoint, opts.attr_timeout_s, opts.entry_timeout_s,
      opts.cache_leases ? 1 : 0);
  if (!opts.foreground) {
    if (chdir("/") != 0) perror("aquifer-mount: chdir /");
    RedirectStdio(opts.log_file);
    NotifyParent(notify_fd, 0);
  } else if (!opts.log_file.empty()) {
    RedirectStdio(opts.log_file);
  }

  fuse_loop_config* cfg = fuse_loop_cfg_create();
  fuse_loop_cfg_set_clone_fd(cfg, 1);
  fuse_loop_cfg_set_max_threads(cfg, opts.max_threads);
  // Idle threads are kept (libfuse's default, -1): destroying workers is discouraged by libfuse.
  int rc = fuse_session_loop_mt(se, cfg);
  fuse_loop_cfg_destroy(cfg);
  daemon.lock_waiters.reset();  // answers (EINTR) the lock requests still waiting

  Logger("fuse")->info("unmount mountpoint={} loop_result={}", opts.mountpoint, rc);
  Logger("fuse")->info("opens of names replaced on another host: {} answered ESTALE, {} served "
                       "while the unlink was pending, {} served on the kernel's retry",
                       daemon.stale_opens.load(), daemon.orphan_opens_pending.load(),
                       daemon.orphan_opens_retry.load());
  if (http) http->Stop();
  if (invalidator) invalidator->Stop();  // later recalls ask nothing of the kernel
  fuse_session_unmount(se);
  if (init_hooks) init_hooks->Stop();
  if (uring) {
    uring->Stop();
    Logger("fuse")->info("fuse transport={}: {} requests answered on the rings; threads per "
                         "queue at the end: {}",
                         uring->transport(), uring->ring_requests(), uring->queue_threads());
  }
  int failed = ReleaseAllOpenFiles(daemon);
  fuse_remove_signal_handlers(se);
  fuse_session_destroy(se);
  daemon.client.reset();
  // rc > 0 is the signal that ended the loop (a requested unmount); < 0 is an error.
  return (rc < 0 || failed > 0) ? 1 : 0;
}

}  // namespace
}  // namespace aquifer::fuse

int main(int argc, char** argv) { return aquifer::fuse::Run(argc, argv); }

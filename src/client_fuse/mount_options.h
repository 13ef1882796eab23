// Command line of aquifer-mount (also run as mount.aquifer / mount.fuse.aquifer by mount(8)).
//
//   aquifer-mount META_ADDR MOUNTPOINT [-f] [-d] [-o opt1,opt2,...] [--log-level L] [--log-file F]
//
// mount(8) calls a helper as `mount.aquifer SOURCE DIR [-sfnv] -o OPTIONS [-t TYPE]`; the mount(8)
// noise (rw, defaults, _netdev, auto, noauto, user, nofail, x-*, comment=...) is accepted and
// dropped here. Options that are Aquifer's own are consumed here; every other -o option is handed
// to libfuse, which rejects the ones it does not know (fuse_session_new fails with a message).
// No FUSE or gRPC types: a pure parser, unit tested in tests/mount.
#pragma once

#include <string>
#include <vector>

#include "aquifer/status.h"

namespace aquifer::fuse {

// One mount's options. Each field: default, unit.
// How the mount talks to the kernel: FUSE over io_uring (one ring per CPU queue; fuse_uring.h) or
// read(2)/write(2) on /dev/fuse. kAuto takes the ring when the kernel offers it.
enum class FuseTransport { kAuto, kUring, kDev };

struct MountOptions {
  std::string meta_address;           // host:port of aquifer-meta (required, 1st positional)
  std::string mountpoint;             // existing directory (required, 2nd positional)
  bool foreground = false;            // -f: stay in the foreground (else daemonize once mounted)
  bool fuse_debug = false;            // -d: libfuse request tracing on stderr (implies -f)
  double attr_timeout_s = 1.0;        // -o attr_timeout=S: kernel attribute cache, seconds
  double entry_timeout_s = 1.0;       // -o entry_timeout=S: kernel dentry cache, seconds
  unsigned max_threads = 64;          // -o max_threads=N: FUSE worker threads at most
  std::string log_level = "info";     // --log-level / -o log_level=: trace..off
  std::string log_file;               // --log-file / -o log_file=: daemon log (default: stderr,
                                      //   /dev/null once daemonized)
  std::string client_name;            // -o client_name=: shown by aquifer-meta (default host:pid)
  std::string http_listen;            // -o http_listen=HOST:PORT: serve /metrics there (port 0:
                                      //   the kernel chooses); "" (default): no HTTP
  std::string http_port_file;         // -o http_port_file=F: write the bound HTTP HOST:PORT there
  std::string key_file;               // -o key=FILE: the cluster key file (0600); "" (default):
                                      //   $AQUIFER_KEY_FILE, else none (a keyed cluster refuses)
  std::string tls_ca;                 // -o tls_ca=FILE: TLS to every server, trusting this CA
                                      // (PEM); "" (default): $AQUIFER_TLS_CA, else plain TCP
  std::string tls_server_name = "aquifer";  // -o tls_server_name=NAME: what certificates name
  bool data_wire = true;              // -o data_wire=0|1: chunk I/O on the chunk wire (default 1)
  bool meta_wire = true;              // -o meta_wire=0|1: metadata calls on the metadata wire
  bool cache_leases = true;           // -o cache_leases=0|1: take cache leases, so other hosts'
                                      // changes drop this kernel's names and attributes before
                                      // they return there (docs/design.md "Cache leases");
                                      // default 1
  bool lazy_opens = true;             // -o lazy_opens=0|1: a read-only open of a file whose
                                      // attributes are kept under the cache lease asks the
                                      // metadata server nothing (docs/design.md "Opens without a
                                      // round trip"); default 1
  bool dir_leases = false;            // -o dir_leases=0|1: creates under exclusive directory
                                      // leases, sent in batches (docs/design.md "Exclusive
                                      // directory leases"); default 0
  FuseTransport transport = FuseTransport::kAuto;  // -o transport=auto|uring|dev: uring fails
                                      // the mount when the kernel does not offer it; auto takes
                                      // it when offered, else /dev/fuse (default auto)
  double lease_wait_s = 30;           // -o lease_wait=S: an open for write waits this long for
                                      // another host's write lease, then fails with EAGAIN
  double meta_wait_s = 120;           // -o meta_wait=S (0..3600): a metadata call waits this
                                      // long for an unreachable (restarting) aquifer-meta, then
                                      // fails (EIO); 0: one RPC timeout (15 s)
  std::vector<std::string> fuse_options;  // the remaining -o options, for libfuse
  bool help = false;                  // -h / --help
  bool version = false;               // -V / --version
};

// Parses argv (argv[0] is the program name). Errors: kInvalidArgument with a message fit for the
// user (missing positional, bad number, stray argument).
Result<MountOptions> ParseMountArgs(int argc, const char* const* argv);

// The -o string given to libfuse: our fixed options (default_permissions, fsname, subtype,
// max_read=1 MiB, allow_other when `as_root`) followed by opts.fuse_options.
std::string FuseOptionString(const MountOptions& opts, bool as_root);

// One line of usage text.
const char* UsageText();

}  // namespace aquifer::fuse

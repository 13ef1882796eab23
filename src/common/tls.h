// TLS for the cluster's connections (docs/design.md "TLS"), an option next to the cluster key:
// the key proves who may call, TLS hides and protects what crosses the network. With TLS on,
// every gRPC channel and server uses gRPC's SSL credentials and both wires (chunk_wire.h,
// meta_wire.h) run their hello, handshake and frames inside a TLS session (OpenSSL, TLS 1.3 only,
// no session tickets, no client certificates: a client is still known by its cluster key or
// credential). A client trusts a server whose certificate chains to `ca_file` and names
// `server_name` (a DNS subjectAltName); the one name lets every server of a cluster share one
// certificate, and it is what gRPC checks too (its target-name override). No sockets here.
#pragma once

#include <memory>
#include <string>

#include "aquifer/status.h"

using SSL_CTX = struct ssl_ctx_st;

namespace aquifer {

// The name a server's certificate must carry when none is configured.
inline constexpr const char* kDefaultTlsServerName = "aquifer";

// Where a process finds its TLS material, all PEM files. A client needs `ca_file` only; a server
// (aquifer-meta, aquifer-data: they are clients of each other too) needs all three.
struct TlsFiles {
  std::string ca_file;    // the certificate(s) that sign the servers' certificates
  std::string cert_file;  // this server's certificate (its chain after it)
  std::string key_file;   // its private key: mode 0600 or tighter (as the cluster key)
  std::string server_name = kDefaultTlsServerName;
};

// Loaded TLS material and the OpenSSL contexts made from it. Immutable after Load; thread-safe
// (SSL_CTX may be shared by threads once set up).
class Tls {
 public:
  // Reads the files and builds the contexts. The key file must not be readable or writable by
  // group or others (kPermissionDenied), the certificate must match the key and `server_name`
  // must be a valid DNS name (kInvalidArgument, with OpenSSL's reason); a missing file is
  // kNotFound. `server` false: only `ca_file` is read (cert and key must be empty).
  static Result<std::shared_ptr<const Tls>> Load(const TlsFiles& files, bool server);
  ~Tls();
  Tls(const Tls&) = delete;
  Tls& operator=(const Tls&) = delete;

  const std::string& ca_pem() const { return ca_pem_; }
  const std::string& cert_pem() const { return cert_pem_; }  // "" for a client
  const std::string& key_pem() const { return key_pem_; }    // "" for a client
  const std::string& server_name() const { return server_name_; }
  bool is_server() const { return server_ctx_ != nullptr; }

  // Contexts for SSL_new. client_ctx verifies the server's chain against the CA (SSL_set1_host
  // with server_name() is the caller's, per connection); server_ctx presents the certificate
  // and is null for a client.
  SSL_CTX* client_ctx() const { return client_ctx_; }
  SSL_CTX* server_ctx() const { return server_ctx_; }

 private:
  Tls() = default;
  std::string ca_pem_, cert_pem_, key_pem_, server_name_;
  SSL_CTX* client_ctx_ = nullptr;
  SSL_CTX* server_ctx_ = nullptr;
};

// The TLS this process uses when a component is given none explicitly, as ProcessClusterKey():
// the daemons' and the mount's main() set it from their flags or config, the CLI from the local
// cluster's tls/ directory or $AQUIFER_TLS_CA. Null = TLS off (plain TCP, the default).
// Thread-safe; meant to be set once at start-up.
std::shared_ptr<const Tls> ProcessTls();
void SetProcessTls(std::shared_ptr<const Tls> tls);

// For a program's start-up. A server (`server` true) with `on` loads all of `files`; a client is
// on when files.ca_file is set, or else $AQUIFER_TLS_CA is (the CLI's and tools' fallback). Sets
// the process TLS (none when off) and returns what it loaded (null when off). Errors: Load's;
// kInvalidArgument for a server given TLS files with TLS off ("tls is off but tls_ca is set"),
// so a config that meant TLS never runs in clear by a typo.
Result<std::shared_ptr<const Tls>> LoadTlsForProcess(bool on, const TlsFiles& files,
                                                     bool server);

// What OpenSSL queued on this thread about the last failure, oldest first, "; "-joined, and
// empties the queue; "" when nothing is queued.
std::string TakeOpenSslErrors();

// Makes a new private CA and one server certificate it signs, for a cluster that has no PKI of
// its own: `dir`/ca.pem (the CA certificate: give it to every client), `dir`/ca.key (its key,
// keep it to sign more), `dir`/server.pem and `dir`/server.key (every server's), the keys 0600.
// The server certificate names `server_name` (DNS) plus 127.0.0.1 and ::1, good for `days`. EC
// P-256 keys, SHA-256 signatures. Never overwrites (kAlreadyExists when any file exists).
Status WriteNewTlsFiles(const std::string& dir, const std::string& server_name, int days = 3650);

}  // namespace aquifer

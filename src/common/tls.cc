// TLS material and contexts (tls.h), on OpenSSL 3.
#include "common/tls.h"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

#include "common/cluster_key.h"

namespace aquifer {
namespace {

constexpr size_t kMaxPemBytes = 1 << 20;

std::mutex process_tls_mu;
std::shared_ptr<const Tls> process_tls;  // guarded by process_tls_mu

// TakeOpenSslErrors, or a placeholder when OpenSSL queued nothing.
std::string OpenSslError() {
  std::string out = TakeOpenSslErrors();
  return out.empty() ? "no reason given" : out;
}

Result<std::string> ReadPublicFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return NotFound(path + ": no such file");
    return PermissionDenied(path + ": " + std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().size() > kMaxPemBytes) return InvalidArgument(path + ": larger than 1 MiB");
  return text.str();
}

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyFree>;

// Every certificate in `pem`, in order. kInvalidArgument when there is none or one is malformed.
Result<std::vector<X509Ptr>> ParseCertificates(const std::string& pem, const std::string& path) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  std::vector<X509Ptr> certs;
  for (;;) {
    X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr);
    if (x == nullptr) break;
    certs.emplace_back(x);
  }
  // The loop ends on "no start line" at the end of the text; anything else is a broken file.
  const unsigned long last = ERR_peek_last_error();
  if (last != 0 && !(ERR_GET_LIB(last) == ERR_LIB_PEM &&
                     ERR_GET_REASON(last) == PEM_R_NO_START_LINE)) {
    return InvalidArgument(path + ": not a PEM certificate: " + OpenSslError());
  }
  ERR_clear_error();
  if (certs.empty()) return InvalidArgument(path + ": no PEM certificate in it");
  return certs;
}

bool ValidDnsName(const std::string& name) {
  if (name.empty() || name.size() > 253) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.')) return false;
  }
  return name.front() != '.' && name.front() != '-';
}

// Settings both contexts share: TLS 1.3 only, partial and moving writes for the wires'
// non-blocking sends, no session resumption (nothing arrives on an idle connection after the
// handshake, which the wires' pools rely on: readable idle = closed). A close without
// close_notify reads as the end of the stream: the wires never send one, and their frames carry
// their lengths, so a cut-off frame is still an error.
bool Configure(SSL_CTX* ctx) {
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) != 1) return false;
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_IGNORE_UNEXPECTED_EOF);
  // Read what the socket holds in one recv (up to the buffer), not a record header then its
  // body: a 1 MiB chunk is 64 records, which cost 128 recv calls without it.
  SSL_CTX_set_read_ahead(ctx, 1);
  SSL_CTX_set_default_read_buffer_len(ctx, 256 << 10);
  return SSL_CTX_set_num_tickets(ctx, 0) == 1;
}

}  // namespace

Tls::~Tls() {
  SSL_CTX_free(client_ctx_);
  SSL_CTX_free(server_ctx_);
}

Result<std::shared_ptr<const Tls>> Tls::Load(const TlsFiles& files, bool server) {
  if (files.ca_file.empty()) return InvalidArgument("TLS: no CA file given (tls_ca)");
  if (!ValidDnsName(files.server_name)) {
    return InvalidArgument("TLS: server name '" + files.server_name + "' is not a DNS name");
  }
  if (server && (files.cert_file.empty() || files.key_file.empty())) {
    return InvalidArgument("TLS: a server needs tls_cert and tls_key as well as tls_ca");
  }
  if (!server && (!files.cert_file.empty() || !files.key_file.empty())) {
    return InvalidArgument("TLS: a client takes no certificate or key, only tls_ca");
  }
  std::shared_ptr<Tls> tls(new Tls());
  tls->server_name_ = files.server_name;
  Result<std::string> ca = ReadPublicFile(files.ca_file);
  if (!ca.ok()) return ca.status();
  tls->ca_pem_ = std::move(*ca);
  Result<std::vector<X509Ptr>> ca_certs = ParseCertificates(tls->ca_pem_, files.ca_file);
  if (!ca_certs.ok()) return ca_certs.status();

  tls->client_ctx_ = SSL_CTX_new(TLS_client_method());
  if (tls->client_ctx_ == nullptr || !Configure(tls->client_ctx_)) {
    return Internal("TLS: no client context: " + OpenSslError());
  }
  X509_STORE* store = SSL_CTX_get_cert_store(tls->client_ctx_);
  for (const X509Ptr& c : *ca_certs) {
    if (X509_STORE_add_cert(store, c.get()) != 1) {
      return InvalidArgument(files.ca_file + ": " + OpenSslError());
    }
  }
  SSL_CTX_set_verify(tls->client_ctx_, SSL_VERIFY_PEER, nullptr);
  if (!server) return std::shared_ptr<const Tls>(std::move(tls));

  Result<std::string> cert = ReadPublicFile(files.cert_file);
  if (!cert.ok()) return cert.status();
  tls->cert_pem_ = std::move(*cert);
  Result<std::string> key = ReadSecretFile(files.key_file, kMaxPemBytes);
  if (!key.ok()) return key.status();
  tls->key_pem_ = std::move(*key);
  Result<std::vector<X509Ptr>> chain = ParseCertificates(tls->cert_pem_, files.cert_file);
  if (!chain.ok()) return chain.status();
  BioPtr key_bio(BIO_new_mem_buf(tls->key_pem_.data(), static_cast<int>(tls->key_pem_.size())));
  KeyPtr pkey(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (pkey == nullptr) {
    return InvalidArgument(files.key_file + ": not a PEM private key: " + OpenSslError());
  }
  tls->server_ctx_ = SSL_CTX_new(TLS_server_method());
  if (tls->server_ctx_ == nullptr || !Configure(tls->server_ctx_)) {
    return Internal("TLS: no server context: " + OpenSslError());
  }
  if (SSL_CTX_use_certificate(tls->server_ctx_, (*chain)[0].get()) != 1) {
    return InvalidArgument(files.cert_file + ": " + OpenSslError());
  }
  for (size_t i = 1; i < chain->size(); ++i) {
    if (SSL_CTX_add1_chain_cert(tls->server_ctx_, (*chain)[i].get()) != 1) {
      return InvalidArgument(files.cert_file + ": " + OpenSslError());
    }
  }
  if (SSL_CTX_use_PrivateKey(tls->server_ctx_, pkey.get()) != 1 ||
      SSL_CTX_check_private_key(tls->server_ctx_) != 1) {
    return InvalidArgument(files.key_file + " does not match " + files.cert_file + ": " +
                           OpenSslError());
  }
  // The certificate must be one this cluster's clients accept: chained to the CA and naming the
  // server name. Checked here, so a wrong file fails the daemon at start, not every client.
  X509_STORE_CTX* check = X509_STORE_CTX_new();
  STACK_OF(X509)* untrusted = sk_X509_new_null();
  for (size_t i = 1; i < chain->size(); ++i) sk_X509_push(untrusted, (*chain)[i].get());
  X509_STORE_CTX_init(check, store, (*chain)[0].get(), untrusted);
  const bool chained = X509_verify_cert(check) == 1;
  const int why = X509_STORE_CTX_get_error(check);
  X509_STORE_CTX_free(check);
  sk_X509_free(untrusted);
  if (!chained) {
    return InvalidArgument(files.cert_file + " does not chain to " + files.ca_file + ": " +
                           X509_verify_cert_error_string(why));
  }
  if (X509_check_host((*chain)[0].get(), files.server_name.data(), files.server_name.size(), 0,
                      nullptr) != 1) {
    return InvalidArgument(files.cert_file + " does not name '" + files.server_name +
                           "' (tls_server_name): clients would refuse it");
  }
  return std::shared_ptr<const Tls>(std::move(tls));
}

std::string TakeOpenSslErrors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

std::shared_ptr<const Tls> ProcessTls() {
  std::lock_guard lock(process_tls_mu);
  return process_tls;
}

void SetProcessTls(std::shared_ptr<const Tls> tls) {
  std::lock_guard lock(process_tls_mu);
  process_tls = std::move(tls);
}

Result<std::shared_ptr<const Tls>> LoadTlsForProcess(bool on, const TlsFiles& files,
                                                     bool server) {
  TlsFiles f = files;
  if (server && !on) {
    if (!f.ca_file.empty() || !f.cert_file.empty() || !f.key_file.empty()) {
      return InvalidArgument("tls is off but tls_ca, tls_cert or tls_key is set: add tls = true "
                             "(--tls) or remove them");
    }
    SetProcessTls(nullptr);
    return std::shared_ptr<const Tls>();
  }
  if (!server && f.ca_file.empty()) {
    const char* env = std::getenv("AQUIFER_TLS_CA");
    if (env != nullptr && *env != '\0') f.ca_file = env;
  }
  if (!server && f.ca_file.empty()) {
    SetProcessTls(nullptr);
    return std::shared_ptr<const Tls>();
  }
  Result<std::shared_ptr<const Tls>> tls = Tls::Load(f, server);
  if (!tls.ok()) return tls.status();
  SetProcessTls(*tls);
  return *tls;
}

namespace {

KeyPtr NewKey() { return KeyPtr(EVP_EC_gen("P-256")); }

bool AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) return false;
  const bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// A certificate for `key` named `common_name`, signed by `issuer_key` (`issuer` null: itself).
X509Ptr NewCertificate(EVP_PKEY* key, const std::string& common_name, X509* issuer,
                       EVP_PKEY* issuer_key, int days,
                       const std::vector<std::pair<int, std::string>>& extensions) {
  X509Ptr cert(X509_new());
  std::array<unsigned char, 16> serial;
  if (cert == nullptr || RAND_bytes(serial.data(), serial.size()) != 1) return nullptr;
  serial[0] &= 0x7f;  // a positive number
  BIGNUM* bn = BN_bin2bn(serial.data(), serial.size(), nullptr);
  ASN1_INTEGER* sn = BN_to_ASN1_INTEGER(bn, nullptr);
  BN_free(bn);
  const bool ok_serial = sn != nullptr && X509_set_serialNumber(cert.get(), sn) == 1;
  ASN1_INTEGER_free(sn);
  if (!ok_serial || X509_set_version(cert.get(), 2) != 1) return nullptr;
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);  // an hour of clock skew
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(days) * 86400);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("aquifer"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                             0);
  X509_set_issuer_name(cert.get(),
                       issuer != nullptr ? X509_get_subject_name(issuer) : name);
  if (X509_set_pubkey(cert.get(), key) != 1) return nullptr;
  for (const auto& [nid, value] : extensions) {
    if (!AddExtension(cert.get(), issuer != nullptr ? issuer : cert.get(), nid, value.c_str())) {
      return nullptr;
    }
  }
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) == 0) return nullptr;
  return cert;
}

std::string CertPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), cert);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

std::string KeyPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}


}  // namespace

Status WriteNewTlsFiles(const std::string& dir, const std::string& server_name, int days) {
  if (!ValidDnsName(server_name)) {
    return InvalidArgument("TLS: server name '" + server_name + "' is not a DNS name");
  }
  if (days < 1 || days > 36500) return InvalidArgument("TLS: days must be 1..36500");
  const std::string ca_pem = dir + "/ca.pem", ca_key = dir + "/ca.key";
  const std::string server_pem = dir + "/server.pem", server_key = dir + "/server.key";
  for (const std::string& p : {ca_pem, ca_key, server_pem, server_key}) {
    if (::access(p.c_str(), F_OK) == 0) return AlreadyExists(p + " exists: not overwritten");
  }
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return Internal(dir + ": " + std::strerror(errno));
  }
  KeyPtr ca_k = NewKey(), server_k = NewKey();
  if (ca_k == nullptr || server_k == nullptr) return Internal("TLS: key generation failed");
  X509Ptr ca = NewCertificate(ca_k.get(), "aquifer cluster CA", nullptr, ca_k.get(), days,
                              {{NID_basic_constraints, "critical,CA:TRUE"},
                               {NID_key_usage, "critical,keyCertSign,cRLSign"},
                               {NID_subject_key_identifier, "hash"}});
  if (ca == nullptr) return Internal("TLS: CA certificate: " + OpenSslError());
  X509Ptr server = NewCertificate(
      server_k.get(), server_name, ca.get(), ca_k.get(), days,
      {{NID_basic_constraints, "critical,CA:FALSE"},
       {NID_key_usage, "critical,digitalSignature"},
       {NID_ext_key_usage, "serverAuth"},
       {NID_authority_key_identifier, "keyid"},
       {NID_subject_alt_name, "DNS:" + server_name + ",IP:127.0.0.1,IP:::1"}});
  if (server == nullptr) return Internal("TLS: server certificate: " + OpenSslError());
  AQ_RETURN_IF_ERROR(WriteNewSecretFile(ca_key, KeyPem(ca_k.get())));
  AQ_RETURN_IF_ERROR(WriteNewSecretFile(server_key, KeyPem(server_k.get())));
  AQ_RETURN_IF_ERROR(WriteNewFile(ca_pem, CertPem(ca.get()), 0644));
  return WriteNewFile(server_pem, CertPem(server.get()), 0644);
}

}  // namespace aquifer

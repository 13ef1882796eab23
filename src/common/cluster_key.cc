// The cluster key, call tokens and wire proofs (cluster_key.h), on OpenSSL's HMAC and RAND.
#include "common/cluster_key.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace aquifer {
namespace {

constexpr char kHex[] = "0123456789abcdef";

std::string ToHex(std::span<const std::byte> in) {
  std::string out;
  out.reserve(in.size() * 2);
  for (std::byte b : in) {
    out.push_back(kHex[static_cast<uint8_t>(b) >> 4]);
    out.push_back(kHex[static_cast<uint8_t>(b) & 15]);
  }
  return out;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Exactly out.size() * 2 hex digits.
bool FromHex(std::string_view in, std::span<std::byte> out) {
  if (in.size() != out.size() * 2) return false;
  for (size_t i = 0; i < out.size(); ++i) {
    const int hi = HexDigit(in[2 * i]), lo = HexDigit(in[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<std::byte>(hi << 4 | lo);
  }
  return true;
}

std::mutex process_key_mu;
std::optional<ClusterKey> process_key;  // guarded by process_key_mu

std::span<const std::byte> Bytes(std::string_view s) { return std::as_bytes(std::span(s)); }

Mac WireProof(std::string_view label, const ClusterKey& key, uint64_t instance,
              const Nonce& server_nonce, const Nonce& client_nonce) {
  std::string msg(label);
  for (int i = 0; i < 8; ++i) msg.push_back(static_cast<char>(instance >> (8 * i)));
  msg.append(reinterpret_cast<const char*>(server_nonce.data()), server_nonce.size());
  msg.append(reinterpret_cast<const char*>(client_nonce.data()), client_nonce.size());
  return Hmac(key, Bytes(msg));
}

std::string TokenMessage(std::string_view method, std::string_view seconds,
                         std::string_view nonce_hex) {
  std::string msg = "aquifer-grpc-1\n";
  msg.append(method).append("\n").append(seconds).append("\n").append(nonce_hex);
  return msg;
}

}  // namespace

Status WriteNewSecretFile(const std::string& path, std::string_view text) {
  return WriteNewFile(path, text, 0600);
}

Status WriteNewFile(const std::string& path, std::string_view text, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) {
    if (errno == EEXIST) return AlreadyExists(path + " exists (not replaced)");
    return Internal("create " + path + ": " + std::strerror(errno));
  }
  ::fchmod(fd, mode);  // whatever the umask
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                  ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) {
    ::unlink(path.c_str());
    return Internal("write " + path + ": " + std::strerror(err));
  }
  return OkStatus();
}

Result<std::string> ReadSecretFile(const std::string& path, size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return NotFound("key file " + path + " does not exist");
    return Status(Code::kPermissionDenied, "open key file " + path + ": " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || (st.st_mode & 077) != 0) {
    ::close(fd);
    return Status(Code::kPermissionDenied,
                  "key file " + path + " is readable or writable by others: chmod 600 it");
  }
  std::string text(max_bytes + 1, '\0');  // one more: a longer file is told from a full one
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return Internal("read " + path + ": " + std::strerror(err));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  if (got > max_bytes) {
    return InvalidArgument("key file " + path + ": longer than " + std::to_string(max_bytes) +
                           " bytes");
  }
  text.resize(got);
  return text;
}

Status WriteNewClusterKeyFile(const std::string& path) {
  ClusterKey key;
  AQ_RETURN_IF_ERROR(RandomBytes(key.bytes));
  Status s = WriteNewSecretFile(path, ToHex(key.bytes) + "\n");
  if (s.code() == Code::kAlreadyExists) return AlreadyExists("key file " + s.message());
  return s;
}

Result<ClusterKey> ParseClusterKeyText(std::string_view text, const std::string& path) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r' ||
                           text.back() == '\t')) {
    text.remove_suffix(1);
  }
  ClusterKey key;
  if (!FromHex(text, key.bytes)) {
    return InvalidArgument("key file " + path + ": not 64 hex digits");
  }
  return key;
}

Result<ClusterKey> ReadClusterKeyFile(const std::string& path) {
  Result<std::string> text = ReadSecretFile(path, 128);
  if (!text.ok()) {
    if (text.status().code() == Code::kInvalidArgument) {
      return InvalidArgument("key file " + path + ": not 64 hex digits");
    }
    return text.status();
  }
  return ParseClusterKeyText(*text, path);
}

std::optional<ClusterKey> ProcessClusterKey() {
  std::lock_guard lock(process_key_mu);
  return process_key;
}

void SetProcessClusterKey(std::optional<ClusterKey> key) {
  std::lock_guard lock(process_key_mu);
  process_key = key;
}

std::string KeyFilePath(const std::string& flag_value) {
  if (!flag_value.empty()) return flag_value;
  const char* env = std::getenv("AQUIFER_KEY_FILE");
  return env == nullptr ? std::string() : std::string(env);
}

Status LoadKeyForProcess(const std::string& path) {
  if (path.empty()) {
    SetProcessClusterKey(std::nullopt);
    return OkStatus();
  }
  Result<ClusterKey> key = ReadClusterKeyFile(path);
  if (!key.ok()) return key.status();
  SetProcessClusterKey(*key);
  return OkStatus();
}

Mac Hmac(const ClusterKey& key, std::span<const std::byte> message) {
  Mac out{};
  unsigned int len = 0;
  ::HMAC(EVP_sha256(), key.bytes.data(), static_cast<int>(key.bytes.size()),
         reinterpret_cast<const unsigned char*>(message.data()), message.size(),
         reinterpret_cast<unsigned char*>(out.data()), &len);
  return out;
}

bool MacEqual(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Status RandomBytes(std::span<std::byte> out) {
  if (::RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(out.size())) !=
      1) {
    return Internal("RAND_bytes failed");
  }
  return OkStatus();
}

Result<std::string> MintToken(const ClusterKey& key, std::string_view method,
                              std::chrono::system_clock::time_point now) {
  std::array<std::byte, 16> nonce;
  AQ_RETURN_IF_ERROR(RandomBytes(nonce));
  const std::string seconds = std::to_string(
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count());
  const std::string nonce_hex = ToHex(nonce);
  const Mac mac = Hmac(key, Bytes(TokenMessage(method, seconds, nonce_hex)));
  return "1." + seconds + "." + nonce_hex + "." + ToHex(mac);
}

Status VerifyToken(const ClusterKey& key, std::string_view method, std::string_view token,
                   std::chrono::system_clock::time_point now) {
  const auto malformed = [] { return Status(Code::kPermissionDenied, "malformed token"); };
  // "1." seconds "." 32 hex "." 64 hex
  if (token.size() < 2 + 1 + 1 + 32 + 1 + 64 || token.size() > 2 + 20 + 1 + 32 + 1 + 64 ||
      token.substr(0, 2) != "1.") {
    return malformed();
  }
  std::string_view rest = token.substr(2);
  const size_t dot = rest.find('.');
  if (dot == std::string_view::npos || dot == 0) return malformed();
  const std::string_view seconds = rest.substr(0, dot);
  rest.remove_prefix(dot + 1);
  if (rest.size() != 32 + 1 + 64 || rest[32] != '.') return malformed();
  const std::string_view nonce_hex = rest.substr(0, 32);
  std::array<std::byte, 16> nonce;
  Mac mac;
  if (!FromHex(nonce_hex, nonce) || !FromHex(rest.substr(33), mac)) return malformed();
  int64_t at = 0;
  const auto [end, ec] = std::from_chars(seconds.data(), seconds.data() + seconds.size(), at);
  if (ec != std::errc() || end != seconds.data() + seconds.size() || at < 0 ||
      seconds.front() == '+') {
    return malformed();
  }
  const int64_t now_s =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  // The MAC first, so a forger learns nothing from which check failed.
  const Mac want = Hmac(key, Bytes(TokenMessage(method, seconds, nonce_hex)));
  if (!MacEqual(want, mac)) return Status(Code::kPermissionDenied, "bad MAC");
  if (at < now_s - kTokenWindow.count()) return Status(Code::kPermissionDenied, "expired token");
  if (at > now_s + kTokenWindow.count()) {
    return Status(Code::kPermissionDenied, "token from the future");
  }
  return OkStatus();
}

Mac WireClientProof(const ClusterKey& key, uint64_t instance, const Nonce& server_nonce,
                    const Nonce& client_nonce) {
  return WireProof("aquifer-wire-client-1", key, instance, server_nonce, client_nonce);
}

Mac WireServerProof(const ClusterKey& key, uint64_t instance, const Nonce& server_nonce,
                    const Nonce& client_nonce) {
  return WireProof("aquifer-wire-server-1", key, instance, server_nonce, client_nonce);
}

}  // namespace aquifer

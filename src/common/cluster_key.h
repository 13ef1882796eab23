// The cluster secret (docs/design.md "Cluster identity"): a 32-byte key that every daemon, mount
// and admin command of one cluster holds, and the two proofs built on it: per-call tokens for
// gRPC and the challenge-response of the wire handshake. The key never crosses the network; only
// HMAC-SHA256 values (RFC 2104 over FIPS 180-4 SHA-256, computed by OpenSSL) do, and every
// comparison of a received MAC is constant-time (CRYPTO_memcmp). No sockets, no gRPC.
#pragma once

#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "aquifer/status.h"

namespace aquifer {

inline constexpr size_t kClusterKeyBytes = 32;
inline constexpr size_t kMacBytes = 32;    // HMAC-SHA256 output
inline constexpr size_t kNonceBytes = 32;  // wire handshake challenge, each side

struct ClusterKey {
  std::array<std::byte, kClusterKeyBytes> bytes{};
};
using Mac = std::array<std::byte, kMacBytes>;
using Nonce = std::array<std::byte, kNonceBytes>;

// The key file: 64 lowercase hex digits and a newline, mode 0600, owned by whoever runs the
// daemons. WriteNewClusterKeyFile makes one from 32 bytes of OpenSSL's RAND_bytes (the OS's
// CSPRNG), created with O_EXCL (it never overwrites: errors kAlreadyExists) and mode 0600.
// ReadClusterKeyFile refuses a file that group or others can read or write (kPermissionDenied,
// as ssh does for private keys) and anything but 64 hex digits with optional trailing white
// space (kInvalidArgument); kNotFound when it is missing. Blocking file I/O; thread-safe.
Status WriteNewClusterKeyFile(const std::string& path);
Result<ClusterKey> ReadClusterKeyFile(const std::string& path);
// The key file format alone: 64 hex digits with optional trailing white space. `path` only
// names the file in the error (kInvalidArgument). Pure.
Result<ClusterKey> ParseClusterKeyText(std::string_view text, const std::string& path);

// Secret files (cluster keys, client credentials): ReadSecretFile returns the whole content of
// `path`, at most `max_bytes` (kInvalidArgument past that), with ReadClusterKeyFile's checks
// (kNotFound, kPermissionDenied for a file group or others may read or write, kInternal for a
// failed read). WriteNewSecretFile creates `path` with mode 0600 whatever the umask, writes
// `text` and fsyncs; kAlreadyExists when it exists (never overwrites), kInternal otherwise (the
// partial file is removed). Blocking file I/O; thread-safe.
Result<std::string> ReadSecretFile(const std::string& path, size_t max_bytes);
Status WriteNewSecretFile(const std::string& path, std::string_view text);
// WriteNewSecretFile with another mode (0644 for a certificate); the same errors.
Status WriteNewFile(const std::string& path, std::string_view text, mode_t mode);

// The key this process uses when a component is given none explicitly (the daemons' and the
// mount's main() set it from --key / the config / AQUIFER_KEY_FILE; a test sets it for its
// clients). nullopt = no key: servers run open (with a warning), clients send no proof.
// Thread-safe (a copy under a mutex), but meant to be set once at start-up.
std::optional<ClusterKey> ProcessClusterKey();
void SetProcessClusterKey(std::optional<ClusterKey> key);

// Where a program finds its key file: `flag_value` when non-empty, else the environment variable
// AQUIFER_KEY_FILE when set, else "". Then LoadKeyForProcess reads it (errors as
// ReadClusterKeyFile) and sets the process key; "" sets none and returns OK.
std::string KeyFilePath(const std::string& flag_value);
Status LoadKeyForProcess(const std::string& path);

// HMAC-SHA256(key, message), RFC 2104. Pure; thread-safe.
Mac Hmac(const ClusterKey& key, std::span<const std::byte> message);
// Constant-time equality of two MACs (the time does not depend on where they differ).
bool MacEqual(std::span<const std::byte> a, std::span<const std::byte> b);
// `n` bytes from RAND_bytes. Errors: kInternal when OpenSSL's generator fails.
Status RandomBytes(std::span<std::byte> out);

// ---- gRPC call tokens ----------------------------------------------------------------------
// A token rides in the call's metadata under kTokenHeader and proves, for one call, that the
// caller holds the key: "1.<unix seconds>.<32 hex nonce>.<64 hex MAC>" where MAC =
// HMAC(key, "aquifer-grpc-1\n" method "\n" seconds "\n" nonce). `method` is gRPC's full method
// name ("/aquifer.rpc.MetaService/Lookup"), so a token taken from one call does not open another
// method; the time bounds its life to +-kTokenWindow around the server's clock.
inline constexpr std::string_view kTokenHeader = "aq-auth";
inline constexpr std::chrono::seconds kTokenWindow{120};

// Errors: kInternal when no random nonce can be had.
Result<std::string> MintToken(const ClusterKey& key, std::string_view method,
                              std::chrono::system_clock::time_point now);
// OK when `token` is well formed, for `method`, within kTokenWindow of `now`, and its MAC
// matches. Errors: kPermissionDenied with the reason ("malformed token", "expired token",
// "token from the future", "bad MAC": a wrong key or another method). Pure; thread-safe.
Status VerifyToken(const ClusterKey& key, std::string_view method, std::string_view token,
                   std::chrono::system_clock::time_point now);

// ---- wire handshake (connection.h runs it) --------------------------------------------------
// After the hello (whose flags say "auth") the server sends its nonce Ns; the client answers Nc
// and HMAC(key, "aquifer-wire-client-1" instance Ns Nc); the server checks it and answers
// HMAC(key, "aquifer-wire-server-1" instance Ns Nc), which the client checks: both sides prove
// the key, bound to this connection's fresh nonces and the server's instance, and a proof
// cannot be reflected (the two labels differ). `instance` is the hello's.
Mac WireClientProof(const ClusterKey& key, uint64_t instance, const Nonce& server_nonce,
                    const Nonce& client_nonce);
Mac WireServerProof(const ClusterKey& key, uint64_t instance, const Nonce& server_nonce,
                    const Nonce& client_nonce);

}  // namespace aquifer

#include "common/cluster_key.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include <gtest/gtest.h>

#include "testing/test_util.h"

namespace aquifer {
namespace {

using std::chrono::seconds;
using std::chrono::system_clock;

ClusterKey KeyOf(uint8_t fill) {
  ClusterKey k;
  k.bytes.fill(static_cast<std::byte>(fill));
  return k;
}

constexpr std::string_view kMethod = "/aquifer.rpc.MetaService/Lookup";

TEST(ClusterKeyTest, HmacMatchesRfc4231TestCase2) {
  // RFC 4231 case 2 uses a 4-byte key; HMAC pads keys shorter than the block with zeros, so the
  // same key zero-padded to 32 bytes gives the same MAC.
  ClusterKey key;
  const char jefe[] = "Jefe";
  std::memcpy(key.bytes.data(), jefe, 4);
  const std::string msg = "what do ya want for nothing?";
  const Mac mac = Hmac(key, std::as_bytes(std::span(msg)));
  const uint8_t want[] = {0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24,
                          0x26, 0x08, 0x95, 0x75, 0xc7, 0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27,
                          0x39, 0x83, 0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec, 0x38, 0x43};
  EXPECT_EQ(std::memcmp(mac.data(), want, 32), 0);
}

TEST(ClusterKeyTest, TokensAreCheckedForKeyMethodTimeAndForm) {
  const ClusterKey key = KeyOf(1);
  const auto now = system_clock::now();
  Result<std::string> token = MintToken(key, kMethod, now);
  ASSERT_TRUE(token.ok());
  Result<std::string> old = MintToken(key, kMethod, now - kTokenWindow - seconds(1));
  Result<std::string> future = MintToken(key, kMethod, now + kTokenWindow + seconds(1));
  Result<std::string> edge = MintToken(key, kMethod, now - kTokenWindow + seconds(1));
  ASSERT_TRUE(old.ok() && future.ok() && edge.ok());
  std::string flipped = *token;
  flipped.back() = flipped.back() == '0' ? '1' : '0';
  std::string other_time = *token;  // the time changed, the MAC kept: a replay made "fresh"
  other_time[2] = other_time[2] == '1' ? '2' : '1';
  struct Row {
    std::string name;
    ClusterKey key;
    std::string method;
    std::string token;
    bool ok;
    std::string reason;
  } rows[] = {
      {"right key", key, std::string(kMethod), *token, true, ""},
      {"inside the window", key, std::string(kMethod), *edge, true, ""},
      {"wrong key", KeyOf(2), std::string(kMethod), *token, false, "bad MAC"},
      {"replayed on another method", key, "/aquifer.rpc.MetaService/Unlink", *token, false,
       "bad MAC"},
      {"expired", key, std::string(kMethod), *old, false, "expired token"},
      {"from the future", key, std::string(kMethod), *future, false, "token from the future"},
      {"one MAC digit changed", key, std::string(kMethod), flipped, false, "bad MAC"},
      {"time changed", key, std::string(kMethod), other_time, false, "bad MAC"},
      {"empty", key, std::string(kMethod), "", false, "malformed token"},
      {"truncated", key, std::string(kMethod), token->substr(0, token->size() - 1), false,
       "malformed token"},
      {"extended", key, std::string(kMethod), *token + "0", false, "malformed token"},
      {"other version", key, std::string(kMethod), "2" + token->substr(1), false,
       "malformed token"},
      {"the key in clear", key, std::string(kMethod), std::string(64, 'a'), false,
       "malformed token"},
      {"non-hex MAC", key, std::string(kMethod), token->substr(0, token->size() - 1) + "g",
       false, "malformed token"},
      {"signed time", key, std::string(kMethod), "1.+" + token->substr(3), false,
       "malformed token"},
  };
  for (const Row& row : rows) {
    const Status s = VerifyToken(row.key, row.method, row.token, now);
    EXPECT_EQ(s.ok(), row.ok) << row.name << ": " << s.ToString();
    if (!row.ok) {
      EXPECT_EQ(s.code(), Code::kPermissionDenied) << row.name;
      EXPECT_EQ(s.message(), row.reason) << row.name;
    }
  }
}

TEST(ClusterKeyTest, TwoTokensForOneCallDiffer) {
  const auto now = system_clock::now();
  Result<std::string> a = MintToken(KeyOf(1), kMethod, now);
  Result<std::string> b = MintToken(KeyOf(1), kMethod, now);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);  // fresh nonce each
}

TEST(ClusterKeyTest, WireProofsBindKeyNoncesInstanceAndDirection) {
  const ClusterKey key = KeyOf(1);
  Nonce ns, nc;
  ASSERT_TRUE(RandomBytes(ns).ok());
  ASSERT_TRUE(RandomBytes(nc).ok());
  const Mac client = WireClientProof(key, 7, ns, nc);
  EXPECT_TRUE(MacEqual(client, WireClientProof(key, 7, ns, nc)));
  EXPECT_FALSE(MacEqual(client, WireServerProof(key, 7, ns, nc)));  // no reflection
  EXPECT_FALSE(MacEqual(client, WireClientProof(KeyOf(2), 7, ns, nc)));
  EXPECT_FALSE(MacEqual(client, WireClientProof(key, 8, ns, nc)));
  EXPECT_FALSE(MacEqual(client, WireClientProof(key, 7, nc, ns)));
  EXPECT_FALSE(MacEqual(client, std::span(client).first(31)));  // a truncated proof
}

TEST(ClusterKeyTest, KeyFileIsMadeOnce0600AndReadBack) {
  testing::ScratchDir dir("cluster_key_test");
  const std::string path = dir.path() + "/cluster.key";
  ASSERT_TRUE(WriteNewClusterKeyFile(path).ok());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(WriteNewClusterKeyFile(path).code(), Code::kAlreadyExists);
  Result<ClusterKey> key = ReadClusterKeyFile(path);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_NE(key->bytes, ClusterKey{}.bytes);

  ::chmod(path.c_str(), 0644);
  EXPECT_EQ(ReadClusterKeyFile(path).status().code(), Code::kPermissionDenied);
  EXPECT_EQ(ReadClusterKeyFile(dir.path() + "/none").status().code(), Code::kNotFound);
  const std::string bad = dir.path() + "/bad.key";
  std::ofstream(bad) << "abc\n";
  ::chmod(bad.c_str(), 0600);
  EXPECT_EQ(ReadClusterKeyFile(bad).status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace aquifer

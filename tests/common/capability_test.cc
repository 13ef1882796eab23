// Chunk capabilities: signing and verification (common/capability.h).
#include "common/capability.h"

#include <gtest/gtest.h>

#include <vector>

namespace aquifer {
namespace {

using std::chrono::seconds;
using std::chrono::system_clock;

ClusterKey KeyOf(uint8_t fill) {
  ClusterKey k;
  k.bytes.fill(static_cast<std::byte>(fill));
  return k;
}

const std::string kClientHex = "00112233445566778899aabbccddeeff";
const std::string kOtherHex = "ffeeddccbbaa99887766554433221100";
const system_clock::time_point kNow = system_clock::time_point(seconds(1'800'000'000));

Capability CapOf(uint64_t ino, CapabilityMode mode, system_clock::time_point expiry) {
  Capability c;
  c.inode = InodeId(ino);
  c.mode = mode;
  c.expiry_unix_seconds = static_cast<uint64_t>(
      std::chrono::duration_cast<seconds>(expiry.time_since_epoch()).count());
  c.client_id = *ClientIdBytes(kClientHex);
  return c;
}

TEST(CapabilityTest, MintedCapabilityHasItsFixedLengthAndDecodes) {
  const ClusterKey key = DeriveCapabilityKey(KeyOf(1));
  const Capability cap = CapOf(42, CapabilityMode::kWrite, kNow + seconds(600));
  const std::string bytes = MintCapability(key, cap);
  ASSERT_EQ(bytes.size(), kCapabilityBytes);
  Result<Capability> back = DecodeCapability(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->inode, InodeId(42));
  EXPECT_EQ(back->mode, CapabilityMode::kWrite);
  EXPECT_EQ(back->expiry_unix_seconds, cap.expiry_unix_seconds);
  EXPECT_EQ(back->client_id, cap.client_id);
}

TEST(CapabilityTest, DerivedKeyDiffersFromTheClusterKey) {
  EXPECT_NE(DeriveCapabilityKey(KeyOf(1)).bytes, KeyOf(1).bytes);
  EXPECT_NE(DeriveCapabilityKey(KeyOf(1)).bytes, DeriveCapabilityKey(KeyOf(2)).bytes);
}

// Every way a capability can fail to open a chunk call, and the two ways it succeeds.
TEST(CapabilityTest, VerifyRefusesEveryMismatch) {
  const ClusterKey key = DeriveCapabilityKey(KeyOf(1));
  const std::string read_cap =
      MintCapability(key, CapOf(42, CapabilityMode::kRead, kNow + seconds(600)));
  const std::string write_cap =
      MintCapability(key, CapOf(42, CapabilityMode::kWrite, kNow + seconds(600)));
  auto flip = [](std::string s, size_t at) {
    s[at] = static_cast<char>(s[at] ^ 0x01);
    return s;
  };
  struct Case {
    std::string name;
    ClusterKey key;
    std::string bytes;
    uint64_t ino;
    CapabilityMode want;
    std::string client;
    system_clock::time_point now;
    std::string error;  // "" = accepted
  };
  const std::vector<Case> cases = {
      {"read with read", key, read_cap, 42, CapabilityMode::kRead, kClientHex, kNow, ""},
      {"read with write", key, write_cap, 42, CapabilityMode::kRead, kClientHex, kNow, ""},
      {"write with write", key, write_cap, 42, CapabilityMode::kWrite, kClientHex, kNow, ""},
      {"write with read", key, read_cap, 42, CapabilityMode::kWrite, kClientHex, kNow,
       "read capability for a write"},
      {"wrong inode", key, read_cap, 43, CapabilityMode::kRead, kClientHex, kNow,
       "capability for inode 42"},
      {"another client", key, read_cap, 42, CapabilityMode::kRead, kOtherHex, kNow,
       "capability of another client"},
      {"expired", key, read_cap, 42, CapabilityMode::kRead, kClientHex, kNow + seconds(600),
       "expired capability"},
      {"from the future", key,
       MintCapability(key, CapOf(42, CapabilityMode::kRead, kNow + seconds(3600))), 42,
       CapabilityMode::kRead, kClientHex, kNow, "capability from the future"},
      {"wrong key", DeriveCapabilityKey(KeyOf(2)), read_cap, 42, CapabilityMode::kRead,
       kClientHex, kNow, "bad capability MAC"},
      {"the cluster key itself", KeyOf(1), read_cap, 42, CapabilityMode::kRead, kClientHex, kNow,
       "bad capability MAC"},
      {"mode byte changed", key, flip(read_cap, 1) /* read 1 -> 0 */, 42, CapabilityMode::kRead,
       kClientHex, kNow, "bad capability MAC"},
      {"read turned into write", key, [&] {
         std::string s = read_cap;
         s[1] = 2;
         return s;
       }(), 42, CapabilityMode::kWrite, kClientHex, kNow, "bad capability MAC"},
      {"inode byte changed", key, flip(read_cap, 8), 43, CapabilityMode::kRead, kClientHex, kNow,
       "bad capability MAC"},
      {"expiry byte changed", key, flip(read_cap, 17), 42, CapabilityMode::kRead, kClientHex,
       kNow, "bad capability MAC"},
      {"client id byte changed", key, flip(read_cap, 24), 42, CapabilityMode::kRead, kClientHex,
       kNow, "bad capability MAC"},
      {"MAC byte changed", key, flip(read_cap, 71), 42, CapabilityMode::kRead, kClientHex, kNow,
       "bad capability MAC"},
      {"missing", key, "", 42, CapabilityMode::kRead, kClientHex, kNow, "no capability"},
      {"truncated", key, read_cap.substr(0, 71), 42, CapabilityMode::kRead, kClientHex, kNow,
       "malformed capability"},
      {"extended", key, read_cap + "x", 42, CapabilityMode::kRead, kClientHex, kNow,
       "malformed capability"},
      {"caller id not hex", key, read_cap, 42, CapabilityMode::kRead, std::string(32, 'z'), kNow,
       "capability of another client"},
  };
  for (const Case& c : cases) {
    const Status s = VerifyCapability(c.key, c.bytes, InodeId(c.ino), c.want, c.client, c.now);
    if (c.error.empty()) {
      EXPECT_TRUE(s.ok()) << c.name << ": " << s.ToString();
    } else {
      EXPECT_EQ(s.code(), Code::kPermissionDenied) << c.name << ": " << s.ToString();
      EXPECT_EQ(s.message(), c.error) << c.name;
    }
  }
}

TEST(CapabilityTest, DecodeRefusesBadShapes) {
  const std::string good = MintCapability(DeriveCapabilityKey(KeyOf(1)),
                                          CapOf(7, CapabilityMode::kRead, kNow));
  EXPECT_FALSE(DecodeCapability(good.substr(1)).ok());
  std::string v = good;
  v[0] = 2;
  EXPECT_FALSE(DecodeCapability(v).ok());
  std::string mode = good;
  mode[1] = 3;
  EXPECT_FALSE(DecodeCapability(mode).ok());
  std::string reserved = good;
  reserved[5] = 1;
  EXPECT_FALSE(DecodeCapability(reserved).ok());
  EXPECT_FALSE(ClientIdBytes("0011").ok());
}

}  // namespace
}  // namespace aquifer

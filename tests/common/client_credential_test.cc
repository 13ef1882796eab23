// Client credentials, the export registry and the authorization decisions (client_credential.h).
#include "common/client_credential.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace aquifer {
namespace {

ClusterKey KeyOf(uint8_t fill) {
  ClusterKey k;
  k.bytes.fill(static_cast<std::byte>(fill));
  return k;
}

ClientIdentity Who(bool read_only = false) {
  return ClientIdentity{"train-1", std::string(32, 'a'), read_only};
}

TEST(ClientCredentialTest, IdentityRoundTripsAndRefusesBadShapes) {
  const ClientIdentity who = Who(true);
  Result<ClientIdentity> back = ParseClientIdentity(FormatClientIdentity(who));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, who);
  for (std::string_view bad :
       {"", "1:", "2:train-1:" "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:ro", "1:train-1:aaaa:ro",
        "1:train-1:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:rx",
        "1:tr ain:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:ro",
        "1::aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:ro", "1:.x:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:ro",
        "1:x:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA:ro", "1:x:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:ro:"}) {
    EXPECT_FALSE(ParseClientIdentity(bad).ok()) << bad;
  }
}

TEST(ClientCredentialTest, DerivedKeyDependsOnEveryPartAndTheClusterKey) {
  const ClusterKey base = DeriveClientKey(KeyOf(1), Who());
  EXPECT_EQ(base.bytes, DeriveClientKey(KeyOf(1), Who()).bytes);
  EXPECT_NE(base.bytes, DeriveClientKey(KeyOf(2), Who()).bytes);
  EXPECT_NE(base.bytes, DeriveClientKey(KeyOf(1), Who(/*read_only=*/true)).bytes);
  ClientIdentity other_id = Who();
  other_id.id_hex[0] = 'b';
  EXPECT_NE(base.bytes, DeriveClientKey(KeyOf(1), other_id).bytes);
  ClientIdentity other_name = Who();
  other_name.name = "train-2";
  EXPECT_NE(base.bytes, DeriveClientKey(KeyOf(1), other_name).bytes);
}

TEST(ClientCredentialTest, CredentialFileRoundTripsAndRefusesDamage) {
  const ClientCredential c{Who(true), DeriveClientKey(KeyOf(7), Who(true))};
  const std::string text = FormatClientCredential(c);
  EXPECT_TRUE(IsClientCredentialText(text));
  EXPECT_FALSE(IsClientCredentialText(std::string(64, 'a') + "\n"));
  Result<ClientCredential> back = ParseClientCredential(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->who, c.who);
  EXPECT_EQ(back->key.bytes, c.key.bytes);

  const std::string key_hex = text.substr(text.size() - 65, 64);
  const std::string id(32, 'a');
  struct Case {
    std::string text;
    std::string why;
  };
  for (const Case& bad : std::vector<Case>{
           {"", "empty"},
           {"aquifer-client-1 train-1 " + id + " ro\n", "no key"},
           {"aquifer-client-2 train-1 " + id + " ro " + key_hex + "\n", "other version"},
           {"aquifer-client-1 train-1 " + id + " rx " + key_hex + "\n", "bad access"},
           {"aquifer-client-1 train/1 " + id + " ro " + key_hex + "\n", "bad name"},
           {"aquifer-client-1 train-1 " + id.substr(1) + " ro " + key_hex + "\n", "short id"},
           {"aquifer-client-1 train-1 " + id + " ro " + key_hex.substr(1) + "\n", "short key"},
           {"aquifer-client-1 train-1 " + id + " ro " + key_hex + " extra\n", "extra field"},
           {"aquifer-client-1 train-1 " + id + " ro " + key_hex + "\nsecond line\n", "2 lines"},
       }) {
    EXPECT_FALSE(ParseClientCredential(bad.text).ok()) << bad.why;
  }
}

TEST(ClientCredentialTest, ReadsEitherKindOfKeyFileAndRefusesOpenModes) {
  const std::string dir = std::filesystem::temp_directory_path() /
                          ("aq-cred-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string cred = dir + "/c.key", cluster = dir + "/cluster.key";
  const ClientCredential c{Who(), DeriveClientKey(KeyOf(3), Who())};
  ASSERT_TRUE(WriteNewSecretFile(cred, FormatClientCredential(c)).ok());
  EXPECT_EQ(WriteNewSecretFile(cred, "x").code(), Code::kAlreadyExists);
  ASSERT_TRUE(WriteNewClusterKeyFile(cluster).ok());
  struct stat st {};
  ASSERT_EQ(::stat(cred.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  ClusterKey k;
  Result<std::optional<ClientCredential>> r = ReadKeyOrCredentialFile(cred, &k);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->who, c.who);
  r = ReadKeyOrCredentialFile(cluster, &k);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->has_value());
  ::chmod(cred.c_str(), 0644);
  EXPECT_EQ(ReadKeyOrCredentialFile(cred, &k).status().code(), Code::kPermissionDenied);
  EXPECT_EQ(ReadKeyOrCredentialFile(dir + "/none", &k).status().code(), Code::kNotFound);
  // A file longer than any credential is refused whole, not read as its first 4 KiB.
  const std::string big = dir + "/big.key";
  ASSERT_TRUE(WriteNewSecretFile(big, FormatClientCredential(c) + std::string(5000, '#')).ok());
  EXPECT_EQ(ReadKeyOrCredentialFile(big, &k).status().code(), Code::kInvalidArgument);
  std::filesystem::remove_all(dir);
}

TEST(ClientCredentialTest, NetworksParseAndMatch) {
  struct Case {
    std::string net, peer;
    bool inside;
  };
  for (const Case& c : std::vector<Case>{
           {"10.0.0.0/8", "ipv4:10.1.2.3:4000", true},
           {"10.0.0.0/8", "ipv4:11.1.2.3:4000", false},
           {"127.0.0.1", "ipv4:127.0.0.1:1", true},
           {"127.0.0.1", "ipv4:127.0.0.2:1", false},
           {"192.168.1.0/25", "ipv4:192.168.1.127:1", true},
           {"192.168.1.0/25", "ipv4:192.168.1.128:1", false},
           {"0.0.0.0/0", "ipv4:8.8.8.8:53", true},
           {"::1", "ipv6:[::1]:5", true},
           {"::1", "ipv6:%5B::1%5D:5", true},
           {"fd00::/8", "ipv6:[fd12::1]:5", true},
           {"fd00::/8", "ipv6:[fe80::1]:5", false},
           {"127.0.0.0/8", "ipv6:[::ffff:127.0.0.1]:5", true},  // IPv4-mapped
           {"::1", "ipv4:127.0.0.1:1", false},
           {"10.0.0.0/8", "unix:/tmp/sock", false},
       }) {
    Result<Network> n = ParseNetwork(c.net);
    ASSERT_TRUE(n.ok()) << c.net;
    const std::optional<Network> p = PeerAddress(c.peer);
    EXPECT_EQ(p.has_value() && NetworkContains(*n, *p), c.inside) << c.net << " " << c.peer;
  }
  for (std::string_view bad : {"", "10.0.0.0/33", "::/129", "10.0.0/8", "x", "10.0.0.0/", "1/8"}) {
    EXPECT_FALSE(ParseNetwork(bad).ok()) << bad;
  }
  EXPECT_EQ(FormatNetwork(*ParseNetwork("10.1.0.0/16")), "10.1.0.0/16");
}

TEST(ClientCredentialTest, RegistryRoundTripsAndNamesTheBadLine) {
  ClientExport a;
  a.who = Who(true);
  a.path = "/datasets/imagenet";
  a.root_squash = true;
  a.allow = {*ParseNetwork("10.0.0.0/8"), *ParseNetwork("::1")};
  ClientExport b;
  b.who = ClientIdentity{"b", std::string(32, 'f'), false};
  const std::string text = FormatClientRegistry({a, b});
  Result<std::vector<ClientExport>> back = ParseClientRegistry(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0], a);
  EXPECT_EQ((*back)[1], b);

  const std::string id(32, 'a');
  for (const std::string& bad : {
           "x " + id + " ro squash * relative\n",
           "x " + id + " ro squash * /a/../b\n",
           "x " + id + " ro squash * /a//b\n",
           "x " + id + " ro maybe * /\n",
           "x " + id + " ro squash 10.0.0.0/40 /\n",
           "x " + id + " ro squash * / extra\n",
           "x " + id + " ro squash * /\nx " + id + " rw nosquash * /\n",  // twice
       }) {
    Result<std::vector<ClientExport>> r = ParseClientRegistry("# comment\n\n" + bad);
    EXPECT_FALSE(r.ok()) << bad;
    // The bad line is the last one: after the comment, the blank line and any good lines.
    const std::string line =
        "line " + std::to_string(2 + std::count(bad.begin(), bad.end(), '\n'));
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find(line), std::string::npos) << bad;
    }
  }
  EXPECT_TRUE(ParseClientRegistry("").ok());
}

TEST(ClientCredentialTest, ExportPaths) {
  for (std::string_view good : {"/", "/a", "/a/b.c/d-e"}) {
    EXPECT_TRUE(ValidateExportPath(good).ok()) << good;
  }
  for (std::string_view bad : {"", "a", "/a/", "//", "/.", "/a/..", "/a\nb", "/a b"}) {
    EXPECT_FALSE(ValidateExportPath(bad).ok()) << bad;
  }
  EXPECT_EQ(ExportPathComponents("/a/b"), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(ExportPathComponents("/").empty());
}

// The decision table: entry x identity x peer x access -> code.
TEST(ClientCredentialTest, AuthorizationDecisions) {
  ClientExport rw;
  rw.who = Who(false);
  ClientExport ro = rw;
  ro.who.read_only = true;
  ClientExport fenced = rw;
  fenced.allow = {*ParseNetwork("10.0.0.0/8")};
  const std::optional<Network> inside = PeerAddress("ipv4:10.0.0.5:1");
  const std::optional<Network> outside = PeerAddress("ipv4:127.0.0.1:1");
  ClientIdentity replaced = Who(false);
  replaced.id_hex[5] = '0';
  using A = ClientAccess;
  struct Case {
    std::optional<ClientExport> entry;
    ClientIdentity who;
    std::optional<Network> peer;
    ClientAccess access;
    Code want;
  };
  const std::vector<Case> cases = {
      {rw, Who(false), outside, A::kSession, Code::kOk},
      {rw, Who(false), outside, A::kRead, Code::kOk},
      {rw, Who(false), outside, A::kWrite, Code::kOk},
      {rw, Who(false), outside, A::kAdmin, Code::kPermissionDenied},
      {ro, Who(true), outside, A::kRead, Code::kOk},
      {ro, Who(true), outside, A::kSession, Code::kOk},
      {ro, Who(true), outside, A::kWrite, Code::kReadOnly},
      {ro, Who(true), outside, A::kAdmin, Code::kPermissionDenied},
      // A registry entry that says rw does not lift a credential made ro, and the other way.
      {rw, Who(true), outside, A::kRead, Code::kPermissionDenied},
      {ro, Who(false), outside, A::kWrite, Code::kPermissionDenied},
      {std::nullopt, Who(false), outside, A::kRead, Code::kPermissionDenied},  // revoked
      {rw, replaced, outside, A::kRead, Code::kPermissionDenied},  // removed, added again
      {fenced, Who(false), inside, A::kWrite, Code::kOk},
      {fenced, Who(false), outside, A::kRead, Code::kPermissionDenied},
      {fenced, Who(false), std::nullopt, A::kSession, Code::kPermissionDenied},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    EXPECT_EQ(AuthorizeClientCall(c.entry, c.who, c.peer, c.access).code(), c.want)
        << "case " << i;
  }
  EXPECT_EQ(SquashId(0), kNobodyId);
  EXPECT_EQ(SquashId(1000), 1000u);
}

}  // namespace
}  // namespace aquifer

// Client credentials on an in-process MetaRpcServer (rpc/client_gate.h): MetaClients made with a
// credential get what the registry says, through the real gRPC edge and interceptor.
#include "metadata/rpc/client_gate.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "client/rpc/meta_client.h"
#include "common/capability.h"
#include "common/client_credential.h"
#include "metadata/metadata_service.h"
#include "metadata/namespace_store.h"
#include "metadata/rpc/meta_rpc.h"

namespace aquifer::meta {
namespace {

using std::chrono::milliseconds;

const aquifer::Caller kRoot{};

class ClientGateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() /
            ("aq-gate-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    std::filesystem::create_directories(dir_);
    registry_ = dir_ + "/clients";
    cluster_key_.bytes.fill(std::byte{0x5a});
    SetProcessClusterKey(cluster_key_);
    SetProcessClientIdentity(std::nullopt);
    Result<std::unique_ptr<MetadataService>> svc = MetadataService::Open(NewMemoryStore(), {});
    ASSERT_TRUE(svc.ok()) << svc.status().ToString();
    service_ = std::move(*svc);
    // Six data servers in distinct failure domains: a PG table for regular files (4 + 2).
    for (int i = 0; i < 6; ++i) {
      ASSERT_TRUE(service_
                      ->RegisterServer({"127.0.0.1:" + std::to_string(7000 + i),
                                        "fd" + std::to_string(i), uint64_t{1} << 40, 0,
                                        "uuid-" + std::to_string(i)})
                      .ok());
    }
    Result<std::unique_ptr<MetaRpcServer>> s =
        MetaRpcServer::Start(service_.get(), "127.0.0.1:0", 8, /*wire=*/false, 0, registry_);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
    admin_ = NewClient();  // made while the process holds the cluster key
  }
  void TearDown() override {
    SetProcessClientIdentity(std::nullopt);
    SetProcessClusterKey(std::nullopt);
    server_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::unique_ptr<client::MetaClient> NewClient() {
    return client::NewGrpcMetaClient(server_->address(), milliseconds(5000));
  }
  // Registers `e` (replacing the registry) and returns a client that calls with its credential.
  std::unique_ptr<client::MetaClient> ClientFor(const std::vector<ClientExport>& registry,
                                                const ClientIdentity& who) {
    WriteRegistry(registry);
    SetProcessClusterKey(DeriveClientKey(cluster_key_, who));
    SetProcessClientIdentity(who);
    std::unique_ptr<client::MetaClient> c = NewClient();
    SetProcessClientIdentity(std::nullopt);
    SetProcessClusterKey(cluster_key_);
    return c;
  }
  void WriteRegistry(const std::vector<ClientExport>& registry) {
    const std::string tmp = registry_ + ".tmp";
    std::ofstream(tmp) << FormatClientRegistry(registry);
    std::filesystem::rename(tmp, registry_);
  }
  static ClientExport Export(const std::string& name, bool read_only, const std::string& path,
                             bool squash = false) {
    ClientExport e;
    e.who = ClientIdentity{name, std::string(32, name[0] == 'a' ? 'a' : 'b'), read_only};
    e.path = path;
    e.root_squash = squash;
    return e;
  }
  // Polls `c`'s GetAttr of the root until it answers `want` (the registry is re-read at most
  // once per ClientGate::kRegistryCheckInterval), for at most 10 s.
  static bool RootAnswers(client::MetaClient& c, Code want) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      if (c.GetAttr(kRootInode).status().code() == want) return true;
      std::this_thread::sleep_for(milliseconds(50));
    }
    return false;
  }

  std::string dir_, registry_;
  ClusterKey cluster_key_;
  std::unique_ptr<MetadataService> service_;
  std::unique_ptr<MetaRpcServer> server_;
  std::unique_ptr<client::MetaClient> admin_;
};

TEST_F(ClientGateTest, SubtreeHidesEverythingOutsideByNameNumberAndRename) {
  Result<aquifer::Attributes> data = admin_->Mkdir(kRootInode, "datasets", 0755, kRoot);
  ASSERT_TRUE(data.ok());
  Result<aquifer::Attributes> sub = admin_->Mkdir(data->inode, "sub", 0755, kRoot);
  Result<aquifer::Attributes> outside = admin_->Mkdir(kRootInode, "outside", 0755, kRoot);
  ASSERT_TRUE(sub.ok() && outside.ok());
  Result<client::OpenReply> secret = admin_->Create(outside->inode, "secret", S_IFREG | 0644, 0,
                                                    /*exclusive=*/true, kRoot, SessionId(), false);
  ASSERT_TRUE(secret.ok()) << secret.status().ToString();
  Result<client::OpenReply> inside = admin_->Create(data->inode, "a", S_IFREG | 0644, 0, true,
                                                    kRoot, SessionId(), false);
  ASSERT_TRUE(inside.ok());

  const ClientExport e = Export("sub", false, "/datasets");
  std::unique_ptr<client::MetaClient> c = ClientFor({e}, e.who);
  // Its root is /datasets, shown as inode 1.
  Result<aquifer::Attributes> root = c->GetAttr(kRootInode);
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  EXPECT_EQ(root->inode, kRootInode);
  Result<aquifer::Attributes> s = c->Lookup(kRootInode, "sub", kRoot);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->inode, sub->inode);
  EXPECT_EQ(c->Lookup(kRootInode, "outside", kRoot).status().code(), Code::kNotFound);
  EXPECT_EQ(c->Lookup(kRootInode, "..", kRoot).status().code(), Code::kNotFound);
  // Inode numbers from outside, guessed: not found, directory or file.
  EXPECT_EQ(c->GetAttr(outside->inode).status().code(), Code::kNotFound);
  EXPECT_EQ(c->GetAttr(secret->attr.inode).status().code(), Code::kNotFound);
  EXPECT_EQ(c->ReadDir(outside->inode, 0, 100, true, kRoot).status().code(), Code::kNotFound);
  EXPECT_EQ(c->Mkdir(outside->inode, "x", 0755, kRoot).status().code(), Code::kNotFound);
  // A file inside, never looked up: its number alone does not open it; a listing does.
  EXPECT_EQ(c->GetAttr(inside->attr.inode).status().code(), Code::kNotFound);
  ASSERT_TRUE(c->ReadDir(kRootInode, 0, 100, true, kRoot).ok());
  EXPECT_TRUE(c->GetAttr(inside->attr.inode).ok());
  // No move out of the subtree, and no link of an outside file in.
  EXPECT_EQ(c->Rename(kRootInode, "a", outside->inode, "a", 0, kRoot).code(), Code::kNotFound);
  EXPECT_EQ(c->Link(secret->attr.inode, kRootInode, "stolen", kRoot).status().code(),
            Code::kNotFound);
  // Changes inside land inside.
  ASSERT_TRUE(c->Mkdir(kRootInode, "made", 0755, kRoot).ok());
  EXPECT_TRUE(admin_->Lookup(data->inode, "made", kRoot).ok());
  // The real root, by any number, stays out of reach: 1 is the export.
  Result<aquifer::DirPage> top = c->ReadDir(kRootInode, 0, 100, false, kRoot);
  ASSERT_TRUE(top.ok());
  for (const aquifer::DirEntry& d : top->entries) EXPECT_NE(d.name, "outside");
}

TEST_F(ClientGateTest, ReadOnlyCredentialReadsButEveryChangeIsReadOnly) {
  ASSERT_TRUE(admin_->Mkdir(kRootInode, "d", 0755, kRoot).ok());
  Result<client::OpenReply> f =
      admin_->Create(kRootInode, "f", S_IFREG | 0644, 0, true, kRoot, SessionId(), false);
  ASSERT_TRUE(f.ok());
  const ClientExport e = Export("ro", true, "/");
  std::unique_ptr<client::MetaClient> c = ClientFor({e}, e.who);
  EXPECT_TRUE(c->Lookup(kRootInode, "f", kRoot).ok());
  EXPECT_TRUE(c->ReadDir(kRootInode, 0, 100, true, kRoot).ok());
  EXPECT_EQ(c->Mkdir(kRootInode, "x", 0755, kRoot).status().code(), Code::kReadOnly);
  EXPECT_EQ(c->Create(kRootInode, "y", S_IFREG | 0644, 0, true, kRoot, SessionId(), false)
                .status()
                .code(),
            Code::kReadOnly);
  EXPECT_EQ(c->Unlink(kRootInode, "f", kRoot).code(), Code::kReadOnly);
  EXPECT_EQ(c->Rmdir(kRootInode, "d", kRoot).code(), Code::kReadOnly);
  EXPECT_EQ(c->Rename(kRootInode, "f", kRootInode, "g", 0, kRoot).code(), Code::kReadOnly);
  EXPECT_EQ(c->SetXattr(f->attr.inode, "user.x", "1", 0, kRoot).code(), Code::kReadOnly);
  aquifer::AttrChanges chmod;
  chmod.mode = 0600;
  EXPECT_EQ(c->SetAttr(f->attr.inode, chmod, kRoot, SessionId()).status().code(),
            Code::kReadOnly);
  Result<client::SessionInfo> session = c->OpenSession("ro-test", false);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  EXPECT_TRUE(c->Open(f->attr.inode, O_RDONLY, session->id, kRoot).ok());
  EXPECT_EQ(c->Open(f->attr.inode, O_WRONLY, session->id, kRoot).status().code(),
            Code::kReadOnly);
  EXPECT_EQ(c->Open(f->attr.inode, O_RDONLY | O_TRUNC, session->id, kRoot).status().code(),
            Code::kReadOnly);
  EXPECT_TRUE(admin_->Lookup(kRootInode, "f", kRoot).ok());
}

// docs/design.md "Chunk capabilities": the metadata server signs a capability for a client
// credential only for regular files inside its export, read-only credentials get no write
// capability, and the capability names the inode, the mode and the credential.
TEST_F(ClientGateTest, ChunkCapabilitiesFollowTheCredential) {
  Result<aquifer::Attributes> data = admin_->Mkdir(kRootInode, "datasets", 0755, kRoot);
  Result<aquifer::Attributes> outside = admin_->Mkdir(kRootInode, "outside", 0755, kRoot);
  ASSERT_TRUE(data.ok() && outside.ok());
  Result<client::OpenReply> a = admin_->Create(data->inode, "a", S_IFREG | 0644, 0, true, kRoot,
                                               SessionId(), false);
  Result<client::OpenReply> secret = admin_->Create(outside->inode, "secret", S_IFREG | 0600, 0,
                                                    true, kRoot, SessionId(), false);
  ASSERT_TRUE(a.ok() && secret.ok());
  const InodeId a_ino = a->attr.inode;
  // The cluster key needs none.
  Result<std::string> none = admin_->Capability(a_ino, /*write=*/true, /*fresh=*/true);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->empty());

  const ClientExport sub = Export("sub", false, "/datasets");  // id b...b
  const ClientExport ro = Export("aro", true, "/");            // id a...a
  std::unique_ptr<client::MetaClient> s = ClientFor({sub, ro}, sub.who);
  std::unique_ptr<client::MetaClient> r = ClientFor({sub, ro}, ro.who);
  ASSERT_TRUE(RootAnswers(*s, Code::kOk));
  ASSERT_TRUE(RootAnswers(*r, Code::kOk));
  const ClusterKey cap_key = DeriveCapabilityKey(cluster_key_);
  const auto now = std::chrono::system_clock::now();

  // Inside the export, after a lookup: a read capability, then a write one.
  ASSERT_TRUE(s->Lookup(kRootInode, "a", kRoot).ok());
  Result<std::string> read = s->Capability(a_ino, false, false);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ(read->size(), kCapabilityBytes);
  EXPECT_TRUE(VerifyCapability(cap_key, *read, a_ino, CapabilityMode::kRead, sub.who.id_hex, now)
                  .ok());
  EXPECT_EQ(VerifyCapability(cap_key, *read, a_ino, CapabilityMode::kWrite, sub.who.id_hex, now)
                .message(),
            "read capability for a write");
  EXPECT_EQ(VerifyCapability(cap_key, *read, a_ino, CapabilityMode::kRead, ro.who.id_hex, now)
                .message(),
            "capability of another client");
  Result<std::string> write = s->Capability(a_ino, true, true);
  ASSERT_TRUE(write.ok()) << write.status().ToString();
  EXPECT_TRUE(
      VerifyCapability(cap_key, *write, a_ino, CapabilityMode::kWrite, sub.who.id_hex, now).ok());
  Result<aquifer::Capability> decoded = DecodeCapability(*write);
  ASSERT_TRUE(decoded.ok());
  const int64_t now_s =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  EXPECT_GE(decoded->expiry_unix_seconds, uint64_t(now_s + kCapabilityLifetime.count() - 5));
  EXPECT_LE(decoded->expiry_unix_seconds, uint64_t(now_s + kCapabilityLifetime.count() + 5));
  // Outside the export, by a guessed number: as if it did not exist. A directory: no chunks.
  EXPECT_EQ(s->Capability(secret->attr.inode, false, true).status().code(), Code::kNotFound);
  EXPECT_EQ(s->Capability(kRootInode, false, true).status().code(), Code::kInvalidArgument);

  // Read-only: reads, never a write capability.
  ASSERT_TRUE(r->Lookup(data->inode, "a", kRoot).ok());
  Result<std::string> ro_read = r->Capability(a_ino, false, true);
  ASSERT_TRUE(ro_read.ok()) << ro_read.status().ToString();
  EXPECT_TRUE(
      VerifyCapability(cap_key, *ro_read, a_ino, CapabilityMode::kRead, ro.who.id_hex, now).ok());
  EXPECT_EQ(r->Capability(a_ino, true, true).status().code(), Code::kReadOnly);
  Result<client::SessionInfo> session = r->OpenSession("ro-caps", false);
  ASSERT_TRUE(session.ok());
  EXPECT_TRUE(r->Open(a_ino, O_RDONLY, session->id, kRoot).ok());
  Result<std::string> after_open = r->Capability(a_ino, false, false);
  ASSERT_TRUE(after_open.ok());
  EXPECT_EQ(DecodeCapability(*after_open)->mode, CapabilityMode::kRead);
}

TEST_F(ClientGateTest, RootSquashCreatesAsNobody) {
  Result<aquifer::Attributes> open = admin_->Mkdir(kRootInode, "open", 01777, kRoot);
  ASSERT_TRUE(open.ok());
  const ClientExport e = Export("sq", false, "/", /*squash=*/true);
  std::unique_ptr<client::MetaClient> c = ClientFor({e}, e.who);
  EXPECT_EQ(c->Mkdir(kRootInode, "no", 0755, kRoot).status().code(), Code::kPermissionDenied);
  Result<aquifer::Attributes> made = c->Mkdir(open->inode, "mine", 0755, kRoot);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_EQ(made->uid, kNobodyId);
  EXPECT_EQ(made->gid, kNobodyId);
  const aquifer::Caller user{1000, 1000, {}, 0};
  Result<aquifer::Attributes> theirs = c->Mkdir(open->inode, "theirs", 0755, user);
  ASSERT_TRUE(theirs.ok());
  EXPECT_EQ(theirs->uid, 1000u);  // only 0 is squashed
}

TEST_F(ClientGateTest, RevocationForgedIdentityAndReplacedCredentialsAreRefused) {
  const ClientExport e = Export("rw", false, "/");
  std::unique_ptr<client::MetaClient> c = ClientFor({e}, e.who);
  ASSERT_TRUE(c->GetAttr(kRootInode).ok());
  // A client that claims rw with a read-only credential's key fails the MAC (UNAUTHENTICATED).
  ClientIdentity forged = Export("ro", true, "/").who;
  WriteRegistry({e, Export("ro", true, "/")});
  SetProcessClusterKey(DeriveClientKey(cluster_key_, forged));
  forged.read_only = false;
  SetProcessClientIdentity(forged);
  std::unique_ptr<client::MetaClient> f = NewClient();
  SetProcessClientIdentity(std::nullopt);
  SetProcessClusterKey(cluster_key_);
  EXPECT_FALSE(f->GetAttr(kRootInode).ok());
  EXPECT_FALSE(f->Mkdir(kRootInode, "x", 0755, kRoot).ok());
  // Removed: refused within a registry check.
  WriteRegistry({});
  EXPECT_TRUE(RootAnswers(*c, Code::kPermissionDenied));
  // The same name again with a new id: the old credential stays refused.
  ClientExport again = e;
  again.who.id_hex = std::string(32, 'c');
  std::unique_ptr<client::MetaClient> fresh = ClientFor({again}, again.who);
  EXPECT_TRUE(RootAnswers(*fresh, Code::kOk));
  EXPECT_EQ(c->GetAttr(kRootInode).status().code(), Code::kPermissionDenied);
  // The cluster key keeps full rights throughout.
  EXPECT_TRUE(admin_->Mkdir(kRootInode, "admin", 0755, kRoot).ok());
}

}  // namespace
}  // namespace aquifer::meta

// TLS material (common/tls.h): the CA maker's files load, a client trusts a server of its own
// CA that names the server name and no other, and every bad file is refused with its reason.
#include "common/tls.h"

#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "testing/test_util.h"

namespace aquifer {
namespace {

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(scratch_.ok());
    ASSERT_TRUE(WriteNewTlsFiles(Dir("a"), "aquifer").ok());
  }
  std::string Dir(const std::string& name) const { return scratch_.path() + "/" + name; }
  TlsFiles ServerFiles(const std::string& dir) const {
    return {dir + "/ca.pem", dir + "/server.pem", dir + "/server.key", "aquifer"};
  }
  TlsFiles ClientFiles(const std::string& dir, const std::string& name = "aquifer") const {
    TlsFiles f;
    f.ca_file = dir + "/ca.pem";
    f.server_name = name;
    return f;
  }

  // A TLS 1.3 handshake over a socket pair: true when the client accepted the server.
  static bool Handshake(const Tls& server, const Tls& client) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return false;
    SSL* s = SSL_new(server.server_ctx());
    SSL* c = SSL_new(client.client_ctx());
    SSL_set_fd(s, fds[0]);
    SSL_set_fd(c, fds[1]);
    SSL_set1_host(c, client.server_name().c_str());
    std::thread accept([s] { (void)SSL_accept(s); });
    const bool ok = SSL_connect(c) == 1;
    ::shutdown(fds[1], SHUT_RDWR);  // ends the server's wait when the client gave up
    accept.join();
    SSL_free(s);
    SSL_free(c);
    ::close(fds[0]);
    ::close(fds[1]);
    return ok;
  }

  testing::ScratchDir scratch_{"aq-tls-test"};
};

TEST_F(TlsTest, AClientTrustsAServerOfItsCaThatNamesTheServerName) {
  Result<std::shared_ptr<const Tls>> server = Tls::Load(ServerFiles(Dir("a")), true);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  Result<std::shared_ptr<const Tls>> client = Tls::Load(ClientFiles(Dir("a")), false);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_TRUE((*server)->is_server());
  EXPECT_FALSE((*client)->is_server());
  EXPECT_TRUE(Handshake(**server, **client));
  // A server is also a client of the others (data servers call aquifer-meta and each other).
  EXPECT_TRUE(Handshake(**server, **server));
}

TEST_F(TlsTest, AClientRefusesAnotherCasServerOrAnotherName) {
  ASSERT_TRUE(WriteNewTlsFiles(Dir("b"), "aquifer").ok());
  Result<std::shared_ptr<const Tls>> server_b = Tls::Load(ServerFiles(Dir("b")), true);
  Result<std::shared_ptr<const Tls>> client_a = Tls::Load(ClientFiles(Dir("a")), false);
  Result<std::shared_ptr<const Tls>> client_a_other =
      Tls::Load(ClientFiles(Dir("a"), "storage.example"), false);
  Result<std::shared_ptr<const Tls>> server_a = Tls::Load(ServerFiles(Dir("a")), true);
  ASSERT_TRUE(server_b.ok() && client_a.ok() && client_a_other.ok() && server_a.ok());
  EXPECT_FALSE(Handshake(**server_b, **client_a));        // signed by another CA
  EXPECT_FALSE(Handshake(**server_a, **client_a_other));  // the right CA, another name
}

TEST_F(TlsTest, BadFilesAreRefusedWithTheirReason) {
  const std::string a = Dir("a");
  struct Case {
    const char* what;
    TlsFiles files;
    bool server;
    Code code;
  };
  ASSERT_TRUE(WriteNewTlsFiles(Dir("b"), "aquifer").ok());
  ASSERT_TRUE(WriteNewTlsFiles(Dir("c"), "other.name").ok());
  {
    std::ofstream(Dir("garbage.pem")) << "-----BEGIN CERTIFICATE-----\nnot base64 !!\n"
                                         "-----END CERTIFICATE-----\n";
    std::ofstream(Dir("empty.pem")) << "";
  }
  ASSERT_EQ(::chmod((Dir("c") + "/server.key").c_str(), 0644), 0);
  const Case cases[] = {
      {"no CA", {"", "", "", "aquifer"}, false, Code::kInvalidArgument},
      {"missing CA", {a + "/nope.pem", "", "", "aquifer"}, false, Code::kNotFound},
      {"garbage CA", {Dir("garbage.pem"), "", "", "aquifer"}, false, Code::kInvalidArgument},
      {"empty CA", {Dir("empty.pem"), "", "", "aquifer"}, false, Code::kInvalidArgument},
      {"bad name", {a + "/ca.pem", "", "", "a b"}, false, Code::kInvalidArgument},
      {"client with a key", ServerFiles(a), false, Code::kInvalidArgument},
      {"server without a key", {a + "/ca.pem", a + "/server.pem", "", "aquifer"}, true,
       Code::kInvalidArgument},
      {"key of another certificate",
       {a + "/ca.pem", a + "/server.pem", Dir("b") + "/server.key", "aquifer"}, true,
       Code::kInvalidArgument},
      {"certificate of another CA",
       {a + "/ca.pem", Dir("b") + "/server.pem", Dir("b") + "/server.key", "aquifer"}, true,
       Code::kInvalidArgument},
      {"key readable by others",
       {Dir("c") + "/ca.pem", Dir("c") + "/server.pem", Dir("c") + "/server.key", "other.name"},
       true, Code::kPermissionDenied},
      {"server name the certificate lacks",
       {a + "/ca.pem", a + "/server.pem", a + "/server.key", "storage.example"}, true,
       Code::kInvalidArgument},
  };
  for (const Case& c : cases) {
    Result<std::shared_ptr<const Tls>> tls = Tls::Load(c.files, c.server);
    ASSERT_FALSE(tls.ok()) << c.what;
    EXPECT_EQ(tls.status().code(), c.code) << c.what << ": " << tls.status().ToString();
  }
}

TEST_F(TlsTest, TheCaMakerNeverOverwritesAndKeepsKeysPrivate) {
  EXPECT_EQ(WriteNewTlsFiles(Dir("a"), "aquifer").code(), Code::kAlreadyExists);
  for (const char* key : {"/ca.key", "/server.key"}) {
    struct stat st {};
    ASSERT_EQ(::stat((Dir("a") + key).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << key;
  }
  EXPECT_EQ(WriteNewTlsFiles(Dir("d"), "-bad").code(), Code::kInvalidArgument);
  EXPECT_EQ(WriteNewTlsFiles(Dir("d"), "aquifer", 0).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace aquifer

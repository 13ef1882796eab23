#include "cli/commands.h"
#include "cli/cluster_state.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace aquifer::cli {
namespace {

Invocation ParseOk(const std::vector<std::string>& args) {
  Result<Invocation> r = ParseCommandLine(args);
  EXPECT_TRUE(r.ok()) << ::testing::PrintToString(args) << ": " << r.status().ToString();
  return r.ok() ? *r : Invocation{};
}

void ExpectUsageError(const std::vector<std::string>& args, const std::string& needle) {
  Result<Invocation> r = ParseCommandLine(args);
  ASSERT_FALSE(r.ok()) << "accepted " << ::testing::PrintToString(args);
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
}

TEST(CommandLineTest, ClusterUpHasTheDocumentedDefaults) {
  Invocation inv = ParseOk({"cluster", "up"});
  EXPECT_EQ(inv.command, Command::kClusterUp);
  EXPECT_EQ(inv.up.root, "/tmp/aquifer-cluster");
  EXPECT_EQ(inv.up.data_servers, 6);
  EXPECT_EQ(inv.up.k, 4u);
  EXPECT_EQ(inv.up.m, 2u);
  EXPECT_EQ(inv.up.unit_bytes, 1048576u);
  EXPECT_TRUE(inv.up.mount_dir.empty());
  EXPECT_FALSE(inv.up.no_mount);
  EXPECT_FALSE(inv.up.data_servers_given);
  EXPECT_FALSE(inv.up.layout_given);
}

TEST(CommandLineTest, ClusterUpTakesRootServersLayoutAndMount) {
  Invocation inv = ParseOk({"cluster", "up", "--root", "/tmp/aquifer-t", "--data-servers", "8",
                            "--k", "5", "--m", "3", "--mount", "/tmp/aquifer-t-mnt"});
  EXPECT_EQ(inv.up.root, "/tmp/aquifer-t");
  EXPECT_EQ(inv.up.data_servers, 8);
  EXPECT_TRUE(inv.up.data_servers_given);
  EXPECT_EQ(inv.up.k, 5u);
  EXPECT_EQ(inv.up.m, 3u);
  EXPECT_TRUE(inv.up.layout_given);
  EXPECT_EQ(inv.up.mount_dir, "/tmp/aquifer-t-mnt");
}

TEST(CommandLineTest, RejectsOutOfRangeOrMalformedNumbers) {
  ExpectUsageError({"cluster", "up", "--data-servers", "0"}, "data-servers");
  ExpectUsageError({"cluster", "up", "--data-servers", "six"}, "data-servers");
  ExpectUsageError({"cluster", "up", "--k", "0"}, "--k");
  ExpectUsageError({"cluster", "up", "--m", "17"}, "--m");
  ExpectUsageError({"cluster", "stop-server", "two"}, "ID");
  // Server ids start at 1; the message says so instead of CLI11's whole numeric range.
  ExpectUsageError({"server", "drain", "0"},
                   "ID: no server 0: server ids are 1, 2, ... (see `aquifer server list`)");
  ExpectUsageError({"server", "remove", "-3"}, "no server -3: server ids are 1, 2, ...");
  ExpectUsageError({"server", "undrain", "ds 3"}, "no server ds 3");
  // A server is named by its id or by its name (failure domain), wherever an id is taken.
  EXPECT_EQ(ParseOk({"server", "drain", "ds3"}).server_ref, "ds3");
  EXPECT_EQ(ParseOk({"server", "undrain", "7"}).command, Command::kServerUndrain);
  EXPECT_EQ(ParseOk({"server", "remove", "rack1-host3"}).server_ref, "rack1-host3");
  EXPECT_TRUE(ParseOk({"server", "list", "--all"}).all);
  EXPECT_EQ(ParseOk({"cluster", "stop-server", "ds4"}).server_index, 4);
  EXPECT_EQ(ParseOk({"cluster", "start-server", "2"}).server_index, 2);
  // Data server indexes are checked against the cluster's record (which knows how many).
  EXPECT_EQ(ParseOk({"cluster", "stop-server", "0"}).server_index, 0);
  EXPECT_EQ(ParseOk({"cluster", "start-server", "-1"}).server_index, -1);
}

TEST(CommandLineTest, VersionPrintsTheProjectVersion) {
  EXPECT_EQ(VersionText(), std::string("aquifer ") + AQUIFER_VERSION);
  std::ostringstream out, err;
  EXPECT_EQ(RunCli({"--version"}, out, err), 0);
  EXPECT_EQ(out.str(), std::string("aquifer ") + AQUIFER_VERSION + "\n");
  EXPECT_EQ(err.str(), "");
}

TEST(CommandLineTest, RejectsUnknownCommandsAndOptions) {
  ExpectUsageError({"frobnicate"}, "frobnicate");
  ExpectUsageError({"cluster", "sideways"}, "");  // CLI11: "A subcommand is required"
  ExpectUsageError({"cluster", "up", "--colour", "blue"}, "--colour");
  ExpectUsageError({"cluster"}, "subcommand");
  ExpectUsageError({"cluster", "up", "--mount", "/tmp/aquifer-m", "--no-mount"}, "--no-mount");
}

TEST(CommandLineTest, StatusTakesMetaOrRootButNotBoth) {
  Invocation by_meta = ParseOk({"status", "--meta", "127.0.0.1:7000"});
  EXPECT_EQ(by_meta.command, Command::kStatus);
  EXPECT_EQ(by_meta.meta_address, "127.0.0.1:7000");
  Invocation by_root = ParseOk({"status", "--root", "/tmp/aquifer-q"});
  EXPECT_EQ(by_root.up.root, "/tmp/aquifer-q");
  EXPECT_TRUE(by_root.meta_address.empty());
  Invocation by_default = ParseOk({"status"});
  EXPECT_EQ(by_default.up.root, "/tmp/aquifer-cluster");
  ExpectUsageError({"status", "--meta", "127.0.0.1:7000", "--root", "/tmp/x"}, "excludes");
  ExpectUsageError({"status", "--meta", "localhost"}, "HOST:PORT");
}

TEST(CommandLineTest, ServerHelpersTakeAnIndexRootAndKill) {
  Invocation stop = ParseOk({"cluster", "stop-server", "2", "--root", "/tmp/aquifer-z", "--kill"});
  EXPECT_EQ(stop.command, Command::kStopServer);
  EXPECT_EQ(stop.server_index, 2);
  EXPECT_TRUE(stop.kill);
  EXPECT_EQ(stop.up.root, "/tmp/aquifer-z");
  Invocation start = ParseOk({"cluster", "start-server", "5"});
  EXPECT_EQ(start.command, Command::kStartServer);
  EXPECT_EQ(start.server_index, 5);
  EXPECT_EQ(start.up.root, "/tmp/aquifer-cluster");
  ExpectUsageError({"cluster", "start-server"}, "ID");
}

TEST(CommandLineTest, LayoutCommandsTakeAPathAndTokens) {
  Invocation get = ParseOk({"layout", "get", "/tmp/aquifer-cluster/mnt/x"});
  EXPECT_EQ(get.command, Command::kLayoutGet);
  EXPECT_EQ(get.path, "/tmp/aquifer-cluster/mnt/x");
  Invocation set = ParseOk({"layout", "set", "/mnt/d", "k=4", "m=2", "unit=1048576"});
  EXPECT_EQ(set.command, Command::kLayoutSet);
  EXPECT_EQ(set.path, "/mnt/d");
  EXPECT_EQ(set.layout_tokens, (std::vector<std::string>{"k=4", "m=2", "unit=1048576"}));
  ExpectUsageError({"layout", "set", "/mnt/d"}, "LAYOUT");
  ExpectUsageError({"layout", "get"}, "PATH");
}

TEST(CommandLineTest, MetaBackupAndRestoreTakeTheirPathsAndFlags) {
  Invocation backup = ParseOk({"meta", "backup", "/srv/b/1", "--meta", "10.0.0.1:7400"});
  EXPECT_EQ(backup.command, Command::kMetaBackup);
  EXPECT_EQ(backup.backup_dest, "/srv/b/1");
  EXPECT_EQ(backup.meta_address, "10.0.0.1:7400");
  Invocation local = ParseOk({"meta", "backup", "/srv/b/2", "--root", "/tmp/aquifer-q"});
  EXPECT_EQ(local.up.root, "/tmp/aquifer-q");
  Invocation restore = ParseOk({"meta", "restore", "--from", "/srv/b/1", "--meta-dir",
                                "/var/lib/aquifer/meta", "--force", "--ino-margin", "1000"});
  EXPECT_EQ(restore.command, Command::kMetaRestore);
  EXPECT_EQ(restore.restore_from, "/srv/b/1");
  EXPECT_EQ(restore.meta_dir, "/var/lib/aquifer/meta");
  EXPECT_TRUE(restore.force);
  EXPECT_EQ(restore.ino_margin, 1000u);
  EXPECT_FALSE(ParseOk({"meta", "restore", "--from", "a", "--meta-dir", "b"}).force);
  ExpectUsageError({"meta", "backup"}, "DEST");
  ExpectUsageError({"meta", "restore", "--from", "/srv/b/1"}, "--meta-dir");
  ExpectUsageError({"meta", "restore", "--meta-dir", "/x"}, "--from");
  ExpectUsageError({"meta", "restore", "--from", "a", "--meta-dir", "b", "--ino-margin", "0"},
                   "--ino-margin");
  ExpectUsageError({"meta"}, "subcommand");
  // A relative destination is refused before any call: it would name a place on the metadata
  // server's host relative to nothing.
  std::ostringstream out, err;
  EXPECT_EQ(RunCli({"meta", "backup", "backups/1", "--meta", "127.0.0.1:1"}, out, err), 1);
  EXPECT_NE(err.str().find("must be an absolute path"), std::string::npos) << err.str();
}

TEST(CommandLineTest, HelpIsNotAnError) {
  Invocation inv = ParseOk({"cluster", "up", "--help"});
  EXPECT_EQ(inv.command, Command::kHelp);
  EXPECT_NE(inv.help_text.find("--data-servers"), std::string::npos) << inv.help_text;
  Invocation none = ParseOk({});
  EXPECT_EQ(none.command, Command::kHelp);
  EXPECT_NE(none.help_text.find("cluster"), std::string::npos);
}

// `aquifer help` was a usage error ("help" is not a command); now it is the top-level help, and
// `aquifer help CMD...` that command's, as `CMD... --help` gives it.
TEST(CommandLineTest, HelpCommandPrintsTheHelpOfWhatFollowsIt) {
  Invocation top = ParseOk({"help"});
  EXPECT_EQ(top.command, Command::kHelp);
  EXPECT_NE(top.help_text.find("status"), std::string::npos) << top.help_text;
  EXPECT_NE(top.help_text.find("aquifer help [COMMAND...]"), std::string::npos) << top.help_text;
  Invocation up = ParseOk({"help", "cluster", "up"});
  EXPECT_EQ(up.command, Command::kHelp);
  EXPECT_NE(up.help_text.find("--data-servers"), std::string::npos) << up.help_text;
  std::ostringstream out, err;
  EXPECT_EQ(RunCli({"help", "no-such-command"}, out, err), 2) << out.str() << err.str();
}

TEST(CommandLineTest, RunCliExitsTwoOnUsageErrorsAndOneOnFailures) {
  std::ostringstream out, err;
  EXPECT_EQ(RunCli({"cluster", "up", "--k"}, out, err), 2);
  std::ostringstream out2, err2;
  EXPECT_EQ(RunCli({"status", "--root", "/nonexistent/aquifer-root"}, out2, err2), 1);
  EXPECT_NE(err2.str().find("no cluster record"), std::string::npos) << err2.str();
  std::ostringstream out3, err3;
  EXPECT_EQ(RunCli({"cluster", "down", "--root", "/nonexistent/aquifer-root"}, out3, err3), 1);
  std::ostringstream out4, err4;
  EXPECT_EQ(RunCli({"layout", "set", "/", "k=4", "bogus=1"}, out4, err4), 1);
  EXPECT_NE(err4.str().find("unknown layout key"), std::string::npos) << err4.str();
}

// stop-server / start-server with an index outside 1..N name the indexes that exist.
TEST(CommandLineTest, DataServerIndexOutsideTheClusterSaysWhichIndexesExist) {
  char tmpl[] = "/tmp/aquifer-cli-idx-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  ClusterState s;
  s.root = root;
  s.k = 4;
  s.m = 2;
  s.unit_bytes = 1048576;
  s.meta.db = root + "/meta/db";
  for (int i = 1; i <= 6; ++i) {
    DataServerRecord d;
    d.index = i;
    d.failure_domain = "ds" + std::to_string(i);
    d.dir = root + "/data/ds" + std::to_string(i);
    s.data_servers.push_back(d);
  }
  ASSERT_TRUE(SaveClusterState(ClusterStatePath(root), s).ok());
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"cluster", "stop-server", "0"},
           {"cluster", "stop-server", "-1"},
           {"cluster", "stop-server", "7"},
           {"cluster", "start-server", "0"}}) {
    std::vector<std::string> full = args;
    full.insert(full.end(), {"--root", root});
    std::ostringstream out, err;
    EXPECT_EQ(RunCli(full, out, err), 1) << args[2];
    EXPECT_EQ(err.str(), "aquifer: error: no data server " + args[2] + " in the cluster at " +
                             root + " (indexes are 1..6)\n");
  }
  std::filesystem::remove_all(root);
}

TEST(CommandLineTest, ClusterUpTakesTlsAndIsPlainByDefault) {
  EXPECT_FALSE(ParseOk({"cluster", "up"}).up.tls);
  EXPECT_TRUE(ParseOk({"cluster", "up", "--tls"}).up.tls);
  Invocation help = ParseOk({"help", "cluster", "up"});
  EXPECT_NE(help.help_text.find("--tls"), std::string::npos) << help.help_text;
}

TEST(CommandLineTest, TlsNewTakesADirNameAndDays) {
  Invocation inv = ParseOk({"tls", "new", "/tmp/aquifer-pki"});
  EXPECT_EQ(inv.command, Command::kTlsNew);
  EXPECT_EQ(inv.path, "/tmp/aquifer-pki");
  EXPECT_TRUE(inv.tls_server_name.empty());
  EXPECT_EQ(inv.tls_days, 3650);
  inv = ParseOk({"tls", "new", "pki", "--name", "storage.example.org", "--days", "90"});
  EXPECT_EQ(inv.tls_server_name, "storage.example.org");
  EXPECT_EQ(inv.tls_days, 90);
  ExpectUsageError({"tls", "new"}, "DIR");
  ExpectUsageError({"tls", "new", "pki", "--days", "0"}, "--days");
  ExpectUsageError({"tls"}, "subcommand");
  Invocation top = ParseOk({"help"});
  EXPECT_NE(top.help_text.find("tls"), std::string::npos) << top.help_text;
  Invocation help = ParseOk({"help", "tls", "new"});
  EXPECT_NE(help.help_text.find("--name"), std::string::npos) << help.help_text;
}

TEST(CommandLineTest, CommandsThatCallAClusterTakeATlsCa) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"status"}, {"fsck"}, {"server", "list"}, {"repair", "wait"}, {"rebalance", "wait"},
           {"meta", "backup", "/b"}, {"server", "drain", "ds1"}, {"mount", "/mnt/x"}}) {
    std::vector<std::string> full = args;
    full.insert(full.end(), {"--meta", "127.0.0.1:7000", "--tls-ca", "/etc/aquifer/ca.pem",
                             "--tls-server-name", "storage.example.org"});
    Invocation inv = ParseOk(full);
    EXPECT_EQ(inv.tls_ca_file, "/etc/aquifer/ca.pem") << args[0];
    EXPECT_EQ(inv.tls_server_name, "storage.example.org") << args[0];
  }
}

// `tls new` writes the four files (keys 0600), says where each goes, and never overwrites.
TEST(CommandLineTest, TlsNewWritesTheFilesOnceAndSaysWhereTheyGo) {
  char tmpl[] = "/tmp/aquifer-cli-tls-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = std::string(tmpl) + "/pki";
  std::ostringstream out, err;
  ASSERT_EQ(RunCli({"tls", "new", dir, "--name", "storage.example.org"}, out, err), 0)
      << err.str();
  for (const char* f : {"ca.pem", "ca.key", "server.pem", "server.key"}) {
    EXPECT_TRUE(std::filesystem::exists(dir + "/" + f)) << f;
    EXPECT_NE(out.str().find(dir + "/" + f), std::string::npos) << out.str();
  }
  for (const char* f : {"ca.key", "server.key"}) {
    const auto perms = std::filesystem::status(dir + "/" + f).permissions();
    EXPECT_EQ(perms & (std::filesystem::perms::group_all | std::filesystem::perms::others_all),
              std::filesystem::perms::none) << f;
  }
  EXPECT_NE(out.str().find("tls_server_name=storage.example.org"), std::string::npos)
      << out.str();
  std::ostringstream out2, err2;
  EXPECT_EQ(RunCli({"tls", "new", dir}, out2, err2), 1);
  EXPECT_NE(err2.str().find("not overwritten"), std::string::npos) << err2.str();
  std::filesystem::remove_all(tmpl);
}

// A CA file that does not exist is an error before any call, naming the file.
TEST(CommandLineTest, AMissingTlsCaFailsAtOnceNamingTheFile) {
  std::ostringstream out, err;
  EXPECT_EQ(RunCli({"server", "list", "--meta", "127.0.0.1:1", "--tls-ca",
                    "/nonexistent/aquifer-ca.pem"}, out, err), 1);
  EXPECT_NE(err.str().find("/nonexistent/aquifer-ca.pem"), std::string::npos) << err.str();
}

class ConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/aquifer-cli-cfg-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& text) {
    std::string path = dir_ + "/cluster.toml";
    std::ofstream(path) << text;
    return path;
  }
  std::string dir_;
};

TEST_F(ConfigFileTest, ConfigValuesApplyAndFlagsOverrideThem) {
  std::string path = Write(
      "[cluster]\nroot = \"/tmp/aquifer-cfg\"\ndata_servers = 7\nk = 5\nm = 2\n"
      "mount = \"/tmp/aquifer-cfg-mnt\"\ncapacity_bytes = 1073741824\n");
  Invocation inv = ParseOk({"cluster", "up", "--config", path, "--data-servers", "9"});
  EXPECT_EQ(inv.up.root, "/tmp/aquifer-cfg");
  EXPECT_EQ(inv.up.data_servers, 9);
  EXPECT_EQ(inv.up.k, 5u);
  EXPECT_TRUE(inv.up.layout_given);
  EXPECT_EQ(inv.up.mount_dir, "/tmp/aquifer-cfg-mnt");
  EXPECT_EQ(inv.up.capacity_bytes, 1073741824u);
}

TEST_F(ConfigFileTest, TlsKeyTurnsTlsOn) {
  EXPECT_TRUE(ParseOk({"cluster", "up", "--config", Write("[cluster]\ntls = true\n")}).up.tls);
  ExpectUsageError({"cluster", "up", "--config", Write("[cluster]\ntls = \"yes\"\n")},
                   "[cluster].tls: expected true or false");
}

TEST_F(ConfigFileTest, RejectsUnknownKeysWrongTypesAndBadToml) {
  ExpectUsageError({"cluster", "up", "--config", Write("[cluster]\ncolour = \"blue\"\n")},
                   "unknown key [cluster].colour");
  ExpectUsageError({"cluster", "up", "--config", Write("[cluster]\ndata_servers = \"six\"\n")},
                   "data_servers");
  ExpectUsageError({"cluster", "up", "--config", Write("[cluster\nk = 4\n")}, "cluster.toml");
  ExpectUsageError({"cluster", "up", "--config", Write("[other]\nk = 4\n")}, "other");
  ExpectUsageError({"cluster", "up", "--config", dir_ + "/missing.toml"}, "missing.toml");
}

}  // namespace
}  // namespace aquifer::cli

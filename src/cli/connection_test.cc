#include "cli/connection.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "net/access_file.h"
#include "net/local_socket.h"

namespace drover::cli {
namespace {

const std::string kToken(64, 'a');
const std::string kPrint(64, 'b');

class ConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/drover_cli_conn_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    unsetenv("DROVER_ACCESS");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(ConnectionTest, ReadsTheAccessFileAndLetsFlagsOverrideTheToken) {
  const std::string path = dir_ + "/access.json";
  ASSERT_TRUE(net::WriteAccessFile(path, {"127.0.0.1:7300", kToken, kPrint, true}).ok());
  ConnectionFlags flags;
  flags.access = path;
  Result<net::ClientOptions> o = ResolveConnection(flags);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->host, "127.0.0.1");
  EXPECT_EQ(o->port, 7300);
  EXPECT_TRUE(o->tls);
  EXPECT_EQ(o->token, kToken);
  flags.token = std::string(64, 'c');
  o = ResolveConnection(flags);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->token, flags.token);
}

TEST_F(ConnectionTest, DroverAccessIsUsedWhenNoFlagIsGiven) {
  const std::string path = dir_ + "/env.json";
  ASSERT_TRUE(net::WriteAccessFile(path, {"127.0.0.1:7301", kToken, "", false}).ok());
  setenv("DROVER_ACCESS", path.c_str(), 1);
  Result<net::ClientOptions> o = ResolveConnection(ConnectionFlags{});
  unsetenv("DROVER_ACCESS");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->port, 7301);
  EXPECT_FALSE(o->tls);
}

TEST_F(ConnectionTest, MissingAccessFileSaysHowToGetOne) {
  ConnectionFlags flags;
  flags.access = dir_ + "/nothing.json";
  Result<net::ClientOptions> o = ResolveConnection(flags);
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), StatusCode::kNotFound);
  EXPECT_NE(o.status().message().find("drover up"), std::string::npos);
}

TEST_F(ConnectionTest, ExplicitServerNeedsTokenAndFingerprint) {
  ConnectionFlags flags;
  flags.server = "10.0.0.5:7210";
  EXPECT_EQ(ResolveConnection(flags).status().code(), StatusCode::kInvalidArgument);
  flags.token = kToken;
  EXPECT_NE(ResolveConnection(flags).status().message().find("--fingerprint"), std::string::npos);
  flags.no_tls = true;
  Result<net::ClientOptions> o = ResolveConnection(flags);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->host, "10.0.0.5");
  EXPECT_FALSE(o->tls);
}

// The access file's local socket is used only for a loopback server that
// answers on it, and never when the user asked for TLS with --fingerprint
// or named the server with --server.
TEST_F(ConnectionTest, LocalSocketWhenTheFileNamesOneThatAnswers) {
  const std::string socket = dir_ + "/api.sock";
  const std::string path = dir_ + "/access.json";
  ASSERT_TRUE(
      net::WriteAccessFile(path, {"127.0.0.1:7302", kToken, kPrint, true, socket}).ok());
  ConnectionFlags flags;
  flags.access = path;
  {
    Result<net::LocalSocketListener> listener = net::LocalSocketListener::Claim(socket);
    ASSERT_TRUE(listener.ok()) << listener.status().ToString();
    Result<net::ClientOptions> o = ResolveConnection(flags);
    ASSERT_TRUE(o.ok()) << o.status().ToString();
    EXPECT_EQ(o->local_socket, socket);
    EXPECT_EQ(o->token, kToken);

    ConnectionFlags pinned = flags;
    pinned.fingerprint = kPrint;
    o = ResolveConnection(pinned);
    ASSERT_TRUE(o.ok());
    EXPECT_TRUE(o->local_socket.empty());

    ConnectionFlags server;
    server.server = "127.0.0.1:7302";
    server.token = kToken;
    server.no_tls = true;
    o = ResolveConnection(server);
    ASSERT_TRUE(o.ok());
    EXPECT_TRUE(o->local_socket.empty());

    // Another machine's file (its address is not loopback) with a socket
    // path that happens to answer here.
    const std::string remote = dir_ + "/remote.json";
    ASSERT_TRUE(
        net::WriteAccessFile(remote, {"10.0.0.5:7302", kToken, kPrint, true, socket}).ok());
    ConnectionFlags remote_flags;
    remote_flags.access = remote;
    o = ResolveConnection(remote_flags);
    ASSERT_TRUE(o.ok());
    EXPECT_TRUE(o->local_socket.empty());
  }
  // The server is gone: TCP, as the file says.
  Result<net::ClientOptions> o = ResolveConnection(flags);
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->local_socket.empty());
  EXPECT_EQ(o->port, 7302);
  EXPECT_TRUE(o->tls);
}

TEST_F(ConnectionTest, TokenFileIsRead) {
  const std::string path = dir_ + "/token";
  std::ofstream(path) << kToken << "\n";
  Result<std::string> t = TokenFromFlags("", path);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(*t, kToken);
  EXPECT_FALSE(TokenFromFlags(kToken, path).ok()) << "both given";
  EXPECT_FALSE(TokenFromFlags("", dir_ + "/missing").ok());
}

}  // namespace
}  // namespace drover::cli

// The server's local socket (<state dir>/api.sock) with real processes: the
// CLI submits over it with the token and is refused without it, the socket
// is owner-only, a second server on the same state directory fails without
// taking it, and the CLI goes over TCP when it is gone.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "cluster.h"
#include "net/access_file.h"
#include "net/http_client.h"
#include "net/local_socket.h"
#include "net/private_file.h"

namespace drover::testing {
namespace {

const std::string kWrongToken(64, '0');

std::string SocketOf(const Cluster& c) { return c.dir() + "/state/api.sock"; }

ino_t InodeOf(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

// An access file like the cluster's, but whose TCP address answers nothing
// (port 1 on loopback): a command that works with it went over the socket.
std::string SocketOnlyAccess(const Cluster& c) {
  Result<net::AccessInfo> access = net::ReadAccessFile(c.access_file());
  EXPECT_TRUE(access.ok()) << access.status().ToString();
  if (!access.ok()) return "";
  net::AccessInfo info = *access;
  info.address = "127.0.0.1:1";
  const std::string path = c.dir() + "/socket-only.json";
  EXPECT_TRUE(net::WriteAccessFile(path, info).ok());
  return path;
}

RunResult DroverWith(const Cluster& c, const std::string& access, std::vector<std::string> args) {
  std::vector<std::string> argv = {c.binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunToEnd(argv, In(kJobTimeout), {"DROVER_ACCESS=" + access});
}

TEST(LocalSocketTest, SubmitOverTheSocketNeedsTheToken) {
  Cluster c;
  c.StartServer();
  c.StartWorker("w1");
  const std::string sock = SocketOf(c);

  struct stat st;
  ASSERT_EQ(::lstat(sock.c_str(), &st), 0) << c.server()->output();
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, ::geteuid());
  Result<net::AccessInfo> access = net::ReadAccessFile(c.access_file());
  ASSERT_TRUE(access.ok()) << access.status().ToString();
  EXPECT_EQ(access->socket, sock);

  // The TCP port is unreachable through this file: the submission, its
  // wait and the status below can only have gone over the socket.
  const std::string socket_only = SocketOnlyAccess(c);
  RunResult ok = DroverWith(c, socket_only, {"submit", "--wait", "--", "true"});
  ASSERT_EQ(ok.status, 0) << ok.output;
  RunResult status = DroverWith(c, socket_only, {"status"});
  EXPECT_EQ(status.status, 0) << status.output;

  // A wrong token is refused over the socket too: one line, exit 1.
  RunResult wrong =
      DroverWith(c, socket_only, {"submit", "--wait", "--token", kWrongToken, "--", "true"});
  EXPECT_EQ(wrong.status, 1) << wrong.output;
  EXPECT_NE(wrong.output.find("token"), std::string::npos) << wrong.output;

  // Raw requests over the socket: 401 with a wrong token and with none.
  net::ClientOptions raw;
  raw.local_socket = sock;
  raw.host = "127.0.0.1";
  raw.port = 1;
  for (const std::string& token : {kWrongToken, std::string()}) {
    raw.token = token;
    Result<net::Response> r = net::HttpClient(raw).Post("/api/v1/jobs", R"({"tasks":[]})");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, 401) << "token \"" << token << "\": " << r->body;
  }
  // The refused ones submitted nothing: only the one job exists.
  nlohmann::json jobs = c.Get("/api/v1/jobs");
  EXPECT_EQ(jobs["jobs"].size(), 1u) << jobs.dump(2);
}

TEST(LocalSocketTest, SecondServerOnTheStateDirFailsAndLeavesTheSocket) {
  Cluster c;
  c.StartServer();
  c.StartWorker("w1");
  const std::string sock = SocketOf(c);
  const ino_t inode = InodeOf(sock);
  ASSERT_NE(inode, 0u);

  Process second({c.binary(), "server", "--bind", "127.0.0.1", "--port", "0", "--state-dir",
                  c.dir() + "/state", "--access-file", c.dir() + "/second.json"});
  std::optional<int> exit = second.Wait(In(kStartTimeout));
  ASSERT_TRUE(exit.has_value()) << "the second server kept running:\n" << second.output();
  EXPECT_NE(*exit, 0) << second.output();
  EXPECT_NE(second.output().find("another server is answering on " + sock), std::string::npos)
      << second.output();
  EXPECT_FALSE(net::PathExists(c.dir() + "/second.json"));

  // The first server still owns the socket and answers on it.
  EXPECT_EQ(InodeOf(sock), inode);
  RunResult ok = DroverWith(c, SocketOnlyAccess(c), {"submit", "--wait", "--", "true"});
  EXPECT_EQ(ok.status, 0) << ok.output;
}

TEST(LocalSocketTest, CliUsesTcpWhenTheSocketIsGone) {
  Cluster c;
  c.StartServer();
  c.StartWorker("w1");
  const std::string sock = SocketOf(c);
  ASSERT_TRUE(net::PathExists(sock));

  // Removed under a running server: the access file still names it, the
  // CLI finds nothing there and goes over TCP + TLS.
  ASSERT_EQ(::unlink(sock.c_str()), 0);
  RunResult ok = c.Drover({"submit", "--wait", "--", "true"});
  EXPECT_EQ(ok.status, 0) << ok.output;
  // Proof that it was TCP: through the file without a TCP address the
  // same command cannot reach the server.
  RunResult socket_only = DroverWith(c, SocketOnlyAccess(c), {"status"});
  EXPECT_EQ(socket_only.status, 1) << socket_only.output;
  EXPECT_NE(socket_only.output.find("127.0.0.1:1"), std::string::npos) << socket_only.output;
}

TEST(LocalSocketTest, CleanStopRemovesTheSocketAndAStaleOneIsReplaced) {
  Cluster c;
  c.StartServer();
  const std::string sock = SocketOf(c);
  ASSERT_TRUE(net::PathExists(sock));
  c.KillServer(SIGTERM);
  EXPECT_FALSE(net::PathExists(sock)) << c.server()->output();

  // A killed server leaves its socket behind, answering nothing; the next
  // server replaces it and answers there.
  c.StartServer();
  c.KillServer(SIGKILL);
  ASSERT_TRUE(net::PathExists(sock));
  ASSERT_FALSE(net::LocalSocketAccepts(sock));
  c.StartServer();
  EXPECT_TRUE(net::LocalSocketAccepts(sock)) << c.server()->output();
  RunResult status = DroverWith(c, SocketOnlyAccess(c), {"status"});
  EXPECT_EQ(status.status, 0) << status.output;
}

TEST(LocalSocketTest, NoLocalSocketFlag) {
  Cluster c({"--no-local-socket"});
  c.StartServer();
  EXPECT_FALSE(net::PathExists(SocketOf(c)));
  Result<net::AccessInfo> access = net::ReadAccessFile(c.access_file());
  ASSERT_TRUE(access.ok()) << access.status().ToString();
  EXPECT_TRUE(access->socket.empty());
  RunResult status = c.Drover({"status"});
  EXPECT_EQ(status.status, 0) << status.output;
}

// A relative --state-dir (and --workdir) is taken from where the command
// runs: the access file names the socket by its absolute path, so a client
// started anywhere else reaches the server (before, it refused the file:
// 'field "socket" must be an absolute path, not "state/api.sock"').
TEST(LocalSocketTest, RelativeStateAndWorkDirectoriesWorkFromAnywhere) {
  Cluster c;  // for its directory and binary only
  const std::string access = c.dir() + "/access.json";
  Process server({"/bin/sh", "-c",
                  "cd " + c.dir() + " && exec " + c.binary() +
                      " server --bind 127.0.0.1 --port 0 --state-dir ./state/ --access-file "
                      "access.json"});
  ASSERT_TRUE(server.WaitForLine("drover: listening on", In(kStartTimeout))) << server.output();
  Process worker({"/bin/sh", "-c",
                  "cd " + c.dir() + " && exec " + c.binary() +
                      " worker --access access.json --name w --workdir work --isolation none "
                      "--run-as-root"});
  ASSERT_TRUE(worker.WaitForLine("attached as worker", In(kStartTimeout))) << worker.output();
  Result<net::AccessInfo> info = net::ReadAccessFile(access);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->socket, c.dir() + "/state/api.sock");
  RunResult run = RunToEnd({c.binary(), "submit", "--wait", "--", "true"}, In(kJobTimeout),
                           {"DROVER_ACCESS=" + access});
  EXPECT_EQ(run.status, 0) << run.output << server.output() << worker.output();
  EXPECT_TRUE(std::filesystem::is_directory(c.dir() + "/work")) << worker.output();
  worker.Signal(SIGTERM);
  EXPECT_TRUE(worker.Wait(In(kStartTimeout)).has_value());
}

}  // namespace
}  // namespace drover::testing

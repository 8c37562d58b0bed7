// The local socket: claiming its path (live, stale, foreign files), and a
// real Server answering HttpClient and the WebSocket client over it, the
// token still required.

#include "net/local_socket.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <fstream>

#include "net/http_client.h"
#include "net/net_test_util.h"
#include "net/private_file.h"
#include "net/server.h"
#include "net/ws_client.h"

namespace drover::net {
namespace {

using testing::Inbox;
using testing::LoopbackServerOptions;
using testing::LoopThread;
using testing::TempDir;

const std::string kSocketToken(64, 'f');

ino_t InodeOf(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

TEST(LocalSocketTest, ClaimMakesAnOwnerOnlySocketAndRemovesItAtTheEnd) {
  TempDir dir;
  const std::string path = dir / "api.sock";
  {
    Result<LocalSocketListener> l = LocalSocketListener::Claim(path);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    struct stat st;
    ASSERT_EQ(::lstat(path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_TRUE(LocalSocketAccepts(path));
  }
  EXPECT_FALSE(PathExists(path));
  EXPECT_FALSE(LocalSocketAccepts(path));
}

TEST(LocalSocketTest, LiveSocketIsNeverTaken) {
  TempDir dir;
  const std::string path = dir / "api.sock";
  Result<LocalSocketListener> first = LocalSocketListener::Claim(path);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const ino_t inode = InodeOf(path);
  Result<LocalSocketListener> second = LocalSocketListener::Claim(path);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("another server is answering on " + path),
            std::string::npos)
      << second.status().message();
  EXPECT_EQ(InodeOf(path), inode);
  EXPECT_TRUE(LocalSocketAccepts(path));
}

// A claim under way elsewhere (the lock held, nothing listening yet) is not
// raced.
TEST(LocalSocketTest, HeldLockIsRefused) {
  TempDir dir;
  const std::string path = dir / "api.sock";
  Result<LocalSocketListener> first = LocalSocketListener::Claim(path);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  // Stop answering but keep the claim: what a server between its lock and
  // its listen looks like to another.
  ::close(first->ReleaseFd());
  Result<LocalSocketListener> second = LocalSocketListener::Claim(path);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find(path + ".lock"), std::string::npos)
      << second.status().message();
}

TEST(LocalSocketTest, StaleSocketOfADeadServerIsReplaced) {
  TempDir dir;
  const std::string path = dir / "api.sock";
  // A socket file nobody listens on, as a killed server leaves it.
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ::close(fd);
  ASSERT_TRUE(PathExists(path));
  EXPECT_FALSE(LocalSocketAccepts(path));

  Result<LocalSocketListener> l = LocalSocketListener::Claim(path);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_TRUE(LocalSocketAccepts(path));
}

TEST(LocalSocketTest, OtherFilesAndLongPathsAreRefused) {
  TempDir dir;
  const std::string path = dir / "api.sock";
  std::ofstream(path) << "not a socket";
  Result<LocalSocketListener> l = LocalSocketListener::Claim(path);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(l.status().message().find(path + " exists and is not a socket"), std::string::npos)
      << l.status().message();
  EXPECT_TRUE(PathExists(path));  // never removed

  const std::string long_path = dir / (std::string(MaxLocalSocketPath(), 'x') + ".sock");
  Result<LocalSocketListener> too_long = LocalSocketListener::Claim(long_path);
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_long.status().message().find("at most " + std::to_string(MaxLocalSocketPath())),
            std::string::npos)
      << too_long.status().message();
}

// A later server's socket at the same path is left alone by an older
// claim's Remove.
TEST(LocalSocketTest, RemoveLeavesAnotherServersSocket) {
  TempDir dir;
  const std::string path = dir / "api.sock";
  Result<LocalSocketListener> first = LocalSocketListener::Claim(path);
  ASSERT_TRUE(first.ok());
  ::close(first->ReleaseFd());
  // Moved aside (so its inode number stays taken), and someone else's
  // socket at the path now (bound by hand: the lock is still ours).
  ASSERT_EQ(::rename(path.c_str(), (path + ".moved").c_str()), 0);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const ino_t theirs = InodeOf(path);
  first->Remove();
  EXPECT_EQ(InodeOf(path), theirs);
  ::close(fd);
}

class LocalServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // TLS on the port: the socket serves plain HTTP beside it.
    server_ = std::make_unique<Server>(loop_, LoopbackServerOptions(dir_.path(), kSocketToken, true));
    server_->Route("GET", "/api/v1/who", [](const Request& r, Responder done) {
      done(JsonResponse(R"({"remote":")" + r.remote + R"("})"));
    });
    server_->Route("POST", "/jobs", [](const Request& r, Responder done) {
      Response res;
      res.status = 201;
      res.body = r.body;
      done(std::move(res));
    });
    server_->WebSocketRoute("/ws", [](std::shared_ptr<WsSession> s, const Request&) {
      s->SendText("hello");
    });
    Result<LocalSocketListener> l = LocalSocketListener::Claim(socket_path());
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    server_->ServeLocalSocket(std::move(*l));
    ASSERT_TRUE(server_->Start().ok());
    EXPECT_EQ(server_->local_socket(), socket_path());
    loop_thread_ = std::make_unique<LoopThread>(loop_);
  }

  void TearDown() override {
    if (loop_thread_) loop_thread_->Call([this] { server_->Stop(); });
    loop_thread_.reset();
    server_.reset();
  }

  std::string socket_path() const { return dir_ / "api.sock"; }

  // A client of the local socket only: host:port point nowhere, so any
  // answer came over the socket.
  ClientOptions Client(const std::string& token = kSocketToken) const {
    ClientOptions o;
    o.host = "127.0.0.1";
    o.port = 1;
    o.tls = true;
    o.token = token;
    o.local_socket = socket_path();
    o.timeout = Seconds(20);
    return o;
  }

  TempDir dir_;
  EventLoop loop_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<LoopThread> loop_thread_;
};

TEST_F(LocalServerTest, HttpNeedsTheTokenOverTheSocketToo) {
  Result<Response> ok = HttpClient(Client()).Get("/api/v1/who");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(ok->body, R"({"remote":"local"})");

  Result<Response> wrong = HttpClient(Client(std::string(64, '0'))).Get("/api/v1/who");
  ASSERT_TRUE(wrong.ok()) << wrong.status().ToString();
  EXPECT_EQ(wrong->status, 401) << wrong->body;
  Result<Response> none = HttpClient(Client("")).Get("/api/v1/who");
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none->status, 401) << none->body;
}

TEST_F(LocalServerTest, RequestThenWebSocketOverTheSocket) {
  EventLoop client_loop;
  Inbox<std::string> got;
  std::shared_ptr<WsSession> session;
  ClientRequest post;
  post.method = "POST";
  post.target = "/jobs";
  post.body = "{}";
  RequestThenWebSocket(
      client_loop, Client(), post,
      [&](const Response& r) -> Result<std::string> {
        got.Push("status " + std::to_string(r.status));
        return std::string("/ws");
      },
      [&](Result<std::shared_ptr<WsSession>> s) {
        if (!s.ok()) {
          got.Push("error " + s.status().ToString());
          return;
        }
        session = *s;
        session->OnText([&](std::string m) { got.Push(std::move(m)); });
        session->OnClose([](const Status&) {});
      });
  LoopThread thread(client_loop);
  EXPECT_EQ(got.Pop().value_or("none"), "status 201");
  EXPECT_EQ(got.Pop().value_or("none"), "hello");
  thread.Call([&] {
    if (session) session->Close("done");
    session.reset();
  });
}

TEST_F(LocalServerTest, WebSocketWithoutTheTokenIsRefused) {
  EventLoop client_loop;
  Inbox<Status> result;
  ConnectWebSocket(client_loop, Client(std::string(64, '0')), "/ws",
                   [&](Result<std::shared_ptr<WsSession>> s) {
                     result.Push(s.ok() ? Status::Ok() : s.status());
                   });
  LoopThread thread(client_loop);
  std::optional<Status> st = result.Pop();
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->code(), StatusCode::kUnauthenticated) << st->ToString();
  EXPECT_NE(st->message().find(socket_path()), std::string::npos) << st->ToString();
}

TEST_F(LocalServerTest, StopRemovesTheSocket) {
  ASSERT_TRUE(PathExists(socket_path()));
  loop_thread_->Call([this] { server_->Stop(); });
  EXPECT_FALSE(PathExists(socket_path()));
  Result<Response> r = HttpClient(Client()).Get("/api/v1/who");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("cannot connect to " + socket_path()), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace drover::net

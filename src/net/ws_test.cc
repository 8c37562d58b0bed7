// WebSocket server sessions and ConnectWebSocket against each other on
// loopback, over TLS and plain TCP.

#include <gtest/gtest.h>
#include <poll.h>

#include "net/net_test_util.h"
#include "net/server.h"
#include "net/tls_identity.h"
#include "net/ws_client.h"

namespace drover::net {
namespace {

using testing::ClientOf;
using testing::Inbox;
using testing::LoopbackServerOptions;
using testing::LoopThread;
using testing::TempDir;

const std::string kWsToken(64, 'e');

// What one side of a connection saw.
struct Seen {
  Inbox<std::string> text;
  Inbox<std::string> binary;
  Inbox<Status> closed;

  void Attach(WsSession& s) {
    s.OnText([this](std::string m) { text.Push(std::move(m)); });
    s.OnBinary([this](std::string m) { binary.Push(std::move(m)); });
    s.OnClose([this](const Status& st) { closed.Push(st); });
  }
};

// The i-th message of a burst: from one byte to 300 KiB (about nineteen
// TLS records), its bytes telling which message and which offset it is.
std::string BurstMessage(int i) {
  const size_t size = 1 + (static_cast<size_t>(i) * 104'729) % (300 * 1024);
  std::string m(size, '\0');
  for (size_t k = 0; k < size; ++k) m[k] = static_cast<char>((i * 31 + k) % 251);
  return m;
}

class WsTest : public ::testing::TestWithParam<bool> {
 protected:
  bool tls() const { return GetParam(); }

  void SetUp() override {
    ServerOptions o = LoopbackServerOptions(state_.path(), kWsToken, tls());
    o.limits.max_ws_message_bytes = 1024;
    server_ = std::make_unique<Server>(loop_, o);
    // Echo: text back as text, binary back as binary; greets on open.
    WsOpenHandler echo = [this](std::shared_ptr<WsSession> s, const Request& r) {
      EXPECT_TRUE(loop_.InLoopThread());
      std::weak_ptr<WsSession> weak = s;
      s->OnText([weak](std::string m) {
        if (auto s = weak.lock()) s->SendText(std::move(m));
      });
      s->OnBinary([weak](std::string m) {
        if (auto s = weak.lock()) s->SendBinary(std::move(m));
      });
      s->OnClose([this, s](const Status& st) { server_closed_.Push(st); });
      ws_remotes_.Push(r.remote);
      s->SendText("hello " + r.path_params.at("name"));
    };
    server_->WebSocketRoute("/ws/{name}", echo);
    // Sends {n} binary messages of many sizes at once, as fast as the
    // socket takes them (BurstMessage).
    server_->WebSocketRoute("/burst/{n}", [](std::shared_ptr<WsSession> s, const Request& r) {
      const int n = std::stoi(r.path_params.at("n"));
      for (int i = 0; i < n; ++i) s->SendBinary(BurstMessage(i));
    });
    // A route for browsers, which can only send the token in the URL.
    server_->WebSocketRoute("/browser/{name}", echo, WsToken::kHeaderOrQuery);
    // A job submission's stand-in for RequestThenWebSocket: names the
    // stream to follow.
    server_->Route("POST", "/jobs", [this](const Request& r, Responder done) {
      http_remotes_.Push(r.remote);
      Response res;
      res.status = 201;
      res.body = R"({"name":")" + r.body + R"("})";
      done(std::move(res));
    });
    ASSERT_TRUE(server_->Start().ok());
    loop_thread_ = std::make_unique<LoopThread>(loop_);
  }

  void TearDown() override {
    loop_thread_->Call([this] { server_->Stop(); });
    loop_thread_.reset();
    server_.reset();
  }

  ClientOptions Client(const std::string& token = kWsToken) {
    return ClientOf(*server_, token, tls());
  }

  // POST /jobs with `body`, for RequestThenWebSocket.
  static ClientRequest PostJobs(std::string body) {
    ClientRequest post;
    post.method = "POST";
    post.target = "/jobs";
    post.body = std::move(body);
    return post;
  }

  // Connects and attaches `seen`; returns the session or the failure.
  Result<std::shared_ptr<WsSession>> Connect(const ClientOptions& o, const std::string& target,
                                             Seen* seen) {
    Inbox<Result<std::shared_ptr<WsSession>>> result;
    loop_.Post([&, o, target] {
      ConnectWebSocket(loop_, o, target, [&, seen](Result<std::shared_ptr<WsSession>> r) {
        if (r.ok()) seen->Attach(**r);
        result.Push(std::move(r));
      });
    });
    auto r = result.Pop();
    if (!r) return Status(StatusCode::kDeadlineExceeded, "connect callback never ran");
    return std::move(*r);
  }

  TempDir state_;
  EventLoop loop_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<LoopThread> loop_thread_;
  Inbox<Status> server_closed_;
  Inbox<std::string> ws_remotes_;    // the peer of each WebSocket opened
  Inbox<std::string> http_remotes_;  // the peer of each POST /jobs
};

TEST_P(WsTest, EchoTextAndBinaryBothWays) {
  Seen seen;
  auto session = Connect(Client(), "/ws/alpha", &seen);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  EXPECT_EQ(seen.text.Pop().value_or("<none>"), "hello alpha");

  (*session)->SendText("ping 1");
  std::string blob("\x00\x01\xff binary", 10);
  (*session)->SendBinary(blob);
  (*session)->SendText("ping 2");
  EXPECT_EQ(seen.text.Pop().value_or("<none>"), "ping 1");
  EXPECT_EQ(seen.binary.Pop().value_or("<none>"), blob);
  EXPECT_EQ(seen.text.Pop().value_or("<none>"), "ping 2");

  (*session)->Close("done");
  std::optional<Status> client_end = seen.closed.Pop();
  ASSERT_TRUE(client_end.has_value());
  EXPECT_TRUE(client_end->ok()) << client_end->ToString();
  std::optional<Status> server_end = server_closed_.Pop();
  ASSERT_TRUE(server_end.has_value());
  EXPECT_TRUE(server_end->ok()) << server_end->ToString();
}

// Writes complete inside the call while the socket takes them and wait
// for the loop once it is full (eager_stream.h); across both, messages
// arrive whole and in order. The reader shares the writer's loop, so the
// socket fills again and again.
TEST_P(WsTest, ABurstOfLargeMessagesArrivesWholeAndInOrder) {
  constexpr int kMessages = 120;
  Seen seen;
  auto session = Connect(Client(), "/burst/" + std::to_string(kMessages), &seen);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  for (int i = 0; i < kMessages; ++i) {
    std::optional<std::string> got = seen.binary.Pop();
    ASSERT_TRUE(got.has_value()) << "message " << i << " never came";
    ASSERT_EQ(got->size(), BurstMessage(i).size()) << "message " << i;
    ASSERT_TRUE(*got == BurstMessage(i)) << "message " << i << " differs";
  }
  (*session)->Close("done");
  EXPECT_TRUE(seen.closed.Pop().has_value());
}

TEST_P(WsTest, TokenInHeaderOrQueryElseUpgradeRefused) {
  for (const std::string& token : {std::string(), std::string(64, 'f')}) {
    Seen seen;
    auto r = Connect(Client(token), "/ws/x", &seen);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated) << r.status().ToString();
  }
  // Browsers cannot set headers on a WebSocket: ?token= is accepted where
  // the route says so, and refused elsewhere (tokens in URLs end up in logs).
  Seen refused;
  EXPECT_EQ(Connect(Client(""), "/ws/browser?token=" + kWsToken, &refused).status().code(),
            StatusCode::kUnauthenticated);
  EXPECT_EQ(Connect(Client(), "/ws/browser?token=" + kWsToken, &refused).status().code(),
            StatusCode::kUnauthenticated);
  Seen seen;
  auto r = Connect(Client(""), "/browser/browser?token=" + kWsToken, &seen);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(seen.text.Pop().value_or("<none>"), "hello browser");
  Seen nowhere;
  EXPECT_EQ(Connect(Client(), "/nowhere", &nowhere).status().code(), StatusCode::kNotFound);
  // `seen` must hear its close before it goes out of scope.
  (*r)->Close("done");
  EXPECT_TRUE(seen.closed.Pop().has_value());
}

TEST_P(WsTest, OversizedMessageClosesOnlyThatConnection) {
  Seen bad, good;
  auto b = Connect(Client(), "/ws/bad", &bad);
  auto g = Connect(Client(), "/ws/good", &good);
  ASSERT_TRUE(b.ok() && g.ok());
  ASSERT_TRUE(bad.text.Pop().has_value());
  ASSERT_TRUE(good.text.Pop().has_value());

  (*b)->SendText(std::string(2048, 'z'));
  std::optional<Status> server_end = server_closed_.Pop();
  ASSERT_TRUE(server_end.has_value());
  EXPECT_EQ(server_end->code(), StatusCode::kResourceExhausted) << server_end->ToString();
  std::optional<Status> bad_end = bad.closed.Pop();
  ASSERT_TRUE(bad_end.has_value());
  EXPECT_FALSE(bad_end->ok());

  (*g)->SendText("still here");
  EXPECT_EQ(good.text.Pop().value_or("<none>"), "still here");
  (*b)->SendText("into the void");  // dropped: the session is closed

  // `good` must hear its close before it goes out of scope: its callbacks
  // run on the loop thread until then.
  (*g)->Close("done");
  EXPECT_TRUE(good.closed.Pop().has_value());
}

// Hostile input: a frame that declares 2^63 bytes (and sends none of them) is
// refused at its header: close 1009 and the connection ends at once, not
// held open while the server waits for the bytes.
TEST_P(WsTest, FrameDeclaringMoreThanTheLimitIsClosedAtItsHeader) {
  if (tls()) GTEST_SKIP() << "raw frames are written over plain TCP";
  int fd = testing::ConnectRaw(server_->port());
  ASSERT_GE(fd, 0);
  const std::string upgrade =
      "GET /ws/raw HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + kWsToken +
      "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
  ASSERT_EQ(::write(fd, upgrade.data(), upgrade.size()), static_cast<ssize_t>(upgrade.size()));
  // A client sends frames once the upgrade is answered.
  std::string reply;
  while (reply.find("\r\n\r\n") == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 20'000), 1) << "no answer to the upgrade: " << reply;
    char buf[4096];
    ssize_t n = ::read(fd, buf, sizeof(buf));
    ASSERT_GT(n, 0) << reply;
    reply.append(buf, static_cast<size_t>(n));
  }
  EXPECT_EQ(reply.rfind("HTTP/1.1 101", 0), 0u) << reply;
  // Binary, final; masked, 64-bit length 2^63; the mask key; no payload.
  const unsigned char frame[] = {0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4};
  ASSERT_EQ(::write(fd, frame, sizeof(frame)), static_cast<ssize_t>(sizeof(frame)));
  std::optional<std::string> rest = testing::ReadUntilClosed(fd, std::chrono::seconds(5));
  ::close(fd);
  ASSERT_TRUE(rest.has_value()) << "the connection is still open";
  reply += *rest;
  // The close frame: opcode 8, code 1009 (message too big).
  EXPECT_NE(reply.find(std::string("\x88\x02\x03\xf1", 4)), std::string::npos);
  std::optional<Status> server_end = server_closed_.Pop();
  ASSERT_TRUE(server_end.has_value());
  EXPECT_EQ(server_end->code(), StatusCode::kResourceExhausted) << server_end->ToString();
}

TEST_P(WsTest, ServerStopDropsClients) {
  Seen seen;
  auto s = Connect(Client(), "/ws/w", &seen);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(seen.text.Pop().has_value());
  loop_thread_->Call([this] { server_->Stop(); });
  std::optional<Status> end = seen.closed.Pop();
  ASSERT_TRUE(end.has_value());
  EXPECT_FALSE(end->ok());
  Seen again;
  EXPECT_EQ(Connect(Client(), "/ws/w", &again).status().code(), StatusCode::kUnavailable);
}

TEST_P(WsTest, RequestThenWebSocketUsesOneConnection) {
  Seen seen;
  Inbox<Response> answers;
  Inbox<Result<std::shared_ptr<WsSession>>> opened;
  const ClientRequest post = PostJobs("beta");
  loop_.Post([&, o = Client()] {
    RequestThenWebSocket(
        loop_, o, post,
        [&](const Response& r) -> Result<std::string> {
          answers.Push(r);
          return std::string("/ws/from-") + (r.body.find("beta") != std::string::npos ? "beta" : "?");
        },
        [&](Result<std::shared_ptr<WsSession>> r) {
          if (r.ok()) seen.Attach(**r);
          opened.Push(std::move(r));
        });
  });
  std::optional<Response> answer = answers.Pop();
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->status, 201);
  EXPECT_EQ(answer->body, R"({"name":"beta"})");
  auto session = opened.Pop();
  ASSERT_TRUE(session.has_value());
  ASSERT_TRUE(session->ok()) << session->status().ToString();
  EXPECT_EQ(seen.text.Pop().value_or("<none>"), "hello from-beta");
  // The same client address and port on both sides: one connection (and,
  // with TLS, one handshake) carried the request and the stream.
  std::optional<std::string> http_peer = http_remotes_.Pop();
  std::optional<std::string> ws_peer = ws_remotes_.Pop();
  ASSERT_TRUE(http_peer.has_value() && ws_peer.has_value());
  EXPECT_EQ(*http_peer, *ws_peer);
  std::shared_ptr<WsSession> open = **session;
  open->SendText("still open");
  EXPECT_EQ(seen.text.Pop().value_or("<none>"), "still open");
  open->Close("done");
  EXPECT_TRUE(seen.closed.Pop().has_value());
}

TEST_P(WsTest, RequestThenWebSocketEndsWhereThenFails) {
  Inbox<Status> result;
  const ClientRequest post = PostJobs("gamma");
  loop_.Post([&, o = Client()] {
    RequestThenWebSocket(
        loop_, o, post, [](const Response&) -> Result<std::string> { return NotFound("no such job"); },
        [&](Result<std::shared_ptr<WsSession>> r) { result.Push(r.ok() ? Status::Ok() : r.status()); });
  });
  std::optional<Status> status = result.Pop();
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->code(), StatusCode::kNotFound);
  EXPECT_EQ(status->message(), "no such job");
  EXPECT_TRUE(http_remotes_.Pop().has_value());  // the request did reach the server
}

TEST_P(WsTest, RequestThenWebSocketRefusedTokenIsReported) {
  Inbox<Status> result;
  bool then_ran = false;
  const ClientRequest post = PostJobs("");
  loop_.Post([&, o = Client(std::string(64, 'f'))] {
    RequestThenWebSocket(
        loop_, o, post,
        [&](const Response& r) -> Result<std::string> {
          then_ran = true;
          RETURN_IF_ERROR(StatusFromResponse(r));
          return std::string("/ws/x");
        },
        [&](Result<std::shared_ptr<WsSession>> r) { result.Push(r.ok() ? Status::Ok() : r.status()); });
  });
  std::optional<Status> status = result.Pop();
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->code(), StatusCode::kUnauthenticated) << status->ToString();
  EXPECT_TRUE(then_ran);
}

INSTANTIATE_TEST_SUITE_P(TlsAndPlain, WsTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Tls" : "Plain"; });

TEST(WsTlsTest, PinnedFingerprintMismatchIsRefused) {
  TempDir state, other;
  Result<TlsIdentity> impostor = LoadOrCreateTlsIdentity(other.path());
  ASSERT_TRUE(impostor.ok());
  EventLoop loop;
  Server server(loop, LoopbackServerOptions(state.path(), kWsToken));
  bool opened = false;
  server.WebSocketRoute("/ws", [&](std::shared_ptr<WsSession>, const Request&) { opened = true; });
  ASSERT_TRUE(server.Start().ok());

  ClientOptions c = ClientOf(server, kWsToken);
  Inbox<Status> result;
  for (const std::string& fp : {impostor->fingerprint, std::string()}) {
    c.fingerprint = fp;
    ConnectWebSocket(loop, c, "/ws", [&](Result<std::shared_ptr<WsSession>> r) {
      result.Push(r.ok() ? Status::Ok() : r.status());
    });
  }
  LoopThread thread(loop);
  std::optional<Status> first = result.Pop();
  std::optional<Status> second = result.Pop();
  ASSERT_TRUE(first.has_value() && second.has_value());
  // The empty-fingerprint failure is reported first (no network involved).
  EXPECT_EQ(first->code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(second->code(), StatusCode::kFailedPrecondition);
  const std::string& mismatch = first->message().find(impostor->fingerprint) != std::string::npos
                                    ? first->message()
                                    : second->message();
  EXPECT_NE(mismatch.find(impostor->fingerprint), std::string::npos);
  EXPECT_NE(mismatch.find(server.fingerprint()), std::string::npos);
  thread.Call([&] { server.Stop(); });
  EXPECT_FALSE(opened);
}

}  // namespace
}  // namespace drover::net

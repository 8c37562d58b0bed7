// The HTTP server and the blocking client against each other on loopback,
// over TLS and plain TCP.

#include "net/server.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "net/client_tls.h"
#include "net/http_client.h"
#include "net/net_test_util.h"
#include "net/tls_identity.h"
#include "net/token.h"

namespace drover::net {
namespace {

using testing::ClientOf;
using testing::ConnectRaw;
using testing::LoopbackServerOptions;
using testing::LoopThread;
using testing::ReadUntilClosed;
using testing::TempDir;

const std::string kServerToken(64, 'a');

class ServerTest : public ::testing::TestWithParam<bool> {
 protected:
  bool tls() const { return GetParam(); }

  ServerOptions Options() {
    ServerOptions o = LoopbackServerOptions(state_.path(), kServerToken, tls());
    o.limits.max_body_bytes = 4096;
    o.limits.handshake_timeout = Millis(300);
    return o;
  }

  void StartServer() {
    server_ = std::make_unique<Server>(loop_, Options());
    server_->Route("GET", "/api/v1/echo/{id}", [](const Request& r, Responder done) {
      nlohmann::json j = {{"id", r.path_params.at("id")},
                          {"q", r.query.count("q") ? r.query.at("q") : ""},
                          {"method", r.method}};
      done(JsonResponse(j.dump()));
    });
    server_->Route("POST", "/api/v1/echo", [](const Request& r, Responder done) {
      Response res;
      res.content_type = "text/plain";
      res.body = r.body;
      done(std::move(res));
    });
    // Answers later, from a timer, as a handler waiting on the store would.
    server_->Route("GET", "/api/v1/later", [this](const Request&, Responder done) {
      auto timer = std::make_shared<Timer>(loop_);
      timer->ArmAfter(Millis(5), [timer, done] { done(JsonResponse(R"({"late":true})")); });
    });
    server_->Route("GET", "/api/v1/forgetful", [](const Request&, Responder) {});
    // Echoes the body in an error message, as handlers that name bad input do.
    server_->Route("POST", "/api/v1/complain", [](const Request& r, Responder done) {
      done(ErrorResponse(400, StatusCode::kInvalidArgument, "bad input: " + r.body));
    });
    server_->Route("GET", "/index.html", [](const Request&, Responder done) {
      Response res;
      res.content_type = "text/html";
      res.body = "<html></html>";
      done(std::move(res));
    });
    server_->AllowPublic("/index.html");
    Status s = server_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
    loop_thread_ = std::make_unique<LoopThread>(loop_);
  }

  void TearDown() override {
    if (loop_thread_) loop_thread_->Call([this] { server_->Stop(); });
    loop_thread_.reset();
    server_.reset();
  }

  ClientOptions Client(const std::string& token = kServerToken) {
    return ClientOf(*server_, token, tls());
  }

  TempDir state_;
  EventLoop loop_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<LoopThread> loop_thread_;
};

TEST_P(ServerTest, RestRoundTrip) {
  StartServer();
  EXPECT_EQ(server_->fingerprint().empty(), !tls());
  HttpClient client(Client());
  Result<Response> r = client.Get("/api/v1/echo/12?q=a%20b");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->content_type, "application/json");
  auto j = nlohmann::json::parse(r->body);
  EXPECT_EQ(j["id"], "12");
  EXPECT_EQ(j["q"], "a b");

  std::string body(3000, 'x');
  body[7] = '\0';
  Result<Response> p = client.Post("/api/v1/echo", body);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->status, 200);
  EXPECT_EQ(p->body, body);
}

TEST_P(ServerTest, HandlersMayAnswerLaterAndForgottenAnswersBecome500) {
  StartServer();
  HttpClient client(Client());
  Result<Response> later = client.Get("/api/v1/later");
  ASSERT_TRUE(later.ok()) << later.status().ToString();
  EXPECT_EQ(later->body, R"({"late":true})");
  Result<Response> forgot = client.Get("/api/v1/forgetful");
  ASSERT_TRUE(forgot.ok());
  EXPECT_EQ(forgot->status, 500);
  EXPECT_EQ(StatusFromResponse(*forgot).code(), StatusCode::kInternal);
}

TEST_P(ServerTest, MissingOrWrongTokenGets401WithJsonError) {
  StartServer();
  for (const std::string& token : {std::string(), std::string(64, 'b')}) {
    HttpClient client(Client(token));
    Result<Response> r = client.Get("/api/v1/echo/1");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, 401);
    auto j = nlohmann::json::parse(r->body);
    EXPECT_EQ(j["error"]["code"], "unauthenticated");
    EXPECT_FALSE(j["error"]["message"].get<std::string>().empty());
    EXPECT_EQ(StatusFromResponse(*r).code(), StatusCode::kUnauthenticated);
  }
  // A public path needs no token.
  HttpClient anonymous(Client(""));
  Result<Response> page = anonymous.Get("/index.html");
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->body, "<html></html>");
}

TEST_P(ServerTest, UnknownPathAndWrongMethodAndOversizedBody) {
  StartServer();
  HttpClient client(Client());
  EXPECT_EQ(client.Get("/api/v1/nothing")->status, 404);
  ClientRequest del;
  del.method = "DELETE";
  del.target = "/api/v1/echo/3";
  EXPECT_EQ(client.Send(del)->status, 405);
  Result<Response> big = client.Post("/api/v1/echo", std::string(5000, 'y'));
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ(big->status, 413);
  EXPECT_EQ(StatusFromResponse(*big).code(), StatusCode::kResourceExhausted);
  // The server is unharmed.
  EXPECT_EQ(client.Get("/api/v1/echo/4")->status, 200);
}

TEST_P(ServerTest, GarbageAndHalfOpenConnectionsDoNotDisturbGoodClients) {
  StartServer();
  int garbage = ConnectRaw(server_->port());
  int silent = ConnectRaw(server_->port());
  ASSERT_GE(garbage, 0);
  ASSERT_GE(silent, 0);
  const char junk[] = "\x16\x03\x01 this is not HTTP\r\n\r\n";
  ASSERT_GT(::write(garbage, junk, sizeof(junk) - 1), 0);

  HttpClient client(Client());
  Result<Response> r = client.Get("/api/v1/echo/5");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);

  // The server closes both bad connections by itself: the garbage at once
  // (plain HTTP answers 400 first), the silent one at the handshake timeout.
  std::optional<std::string> garbage_reply = ReadUntilClosed(garbage);
  ASSERT_TRUE(garbage_reply.has_value());
  if (!tls()) {
    EXPECT_EQ(garbage_reply->rfind("HTTP/1.1 400", 0), 0u) << *garbage_reply;
  }
  EXPECT_TRUE(ReadUntilClosed(silent).has_value());
  ::close(garbage);
  ::close(silent);
  EXPECT_EQ(client.Get("/api/v1/echo/6")->status, 200);
}

// Issue 18: "GET /assets/%FF" with no token aborted the server (nlohmann
// type_error.316 serialising the 404 message that named the path).
TEST_P(ServerTest, BytesThatAreNotTextGet400AndValidJson) {
  StartServer();
  HttpClient client(Client());
  HttpClient anonymous(Client(""));
  for (const std::string& target :
       {std::string("/index.html/%FF"), std::string("/%FF"), std::string("/api/v1/echo/%FF"),
        std::string("/api/v1/echo/1?q=%FF"), std::string("/api/v1/echo/1?%C0%AF=1"),
        std::string("/api/v1/echo/%00"), std::string("/api/v1/echo/a%0Ab")}) {
    for (HttpClient* c : {&client, &anonymous}) {
      Result<Response> r = c->Get(target);
      ASSERT_TRUE(r.ok()) << target << ": " << r.status().ToString();
      EXPECT_EQ(r->status, 400) << target << ": " << r->body;
      auto j = nlohmann::json::parse(r->body, nullptr, false);
      ASSERT_FALSE(j.is_discarded()) << r->body;
      EXPECT_EQ(j["error"]["code"], "invalid_argument");
    }
  }
  // A handler's error message that echoes a body with 0xFF: valid JSON.
  Result<Response> complaint = client.Post("/api/v1/complain", "\xff\xfe");
  ASSERT_TRUE(complaint.ok()) << complaint.status().ToString();
  EXPECT_EQ(complaint->status, 400);
  EXPECT_EQ(StatusFromResponse(*complaint).message(), "bad input: \xef\xbf\xbd\xef\xbf\xbd");
  // Text that is UTF-8 passes.
  Result<Response> ok = client.Get("/api/v1/echo/caf%C3%A9");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(nlohmann::json::parse(ok->body)["id"], "caf\xc3\xa9");
}

TEST_P(ServerTest, MalformedChunkedBodyIsAnswered400) {
  if (tls()) GTEST_SKIP() << "the raw request is written over plain TCP";
  StartServer();
  int fd = ConnectRaw(server_->port());
  ASSERT_GE(fd, 0);
  const std::string request = "POST /api/v1/echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                              kServerToken +
                              "\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n";
  ASSERT_EQ(::write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  std::optional<std::string> reply = ReadUntilClosed(fd);
  ::close(fd);
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->rfind("HTTP/1.1 400", 0), 0u) << *reply;
  EXPECT_NE(reply->find("malformed HTTP request"), std::string::npos) << *reply;
}

TEST_P(ServerTest, ClosedPortIsUnavailable) {
  StartServer();
  ClientOptions o = Client();
  loop_thread_->Call([this] { server_->Stop(); });
  Result<Response> r = HttpClient(o).Get("/api/v1/echo/1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find(std::to_string(o.port)), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(TlsAndPlain, ServerTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Tls" : "Plain"; });

TEST(ServerTlsTest, PinnedFingerprintMismatchIsRefusedNamingBoth) {
  TempDir state, other;
  Result<TlsIdentity> impostor = LoadOrCreateTlsIdentity(other.path());
  ASSERT_TRUE(impostor.ok());
  EventLoop loop;
  Server server(loop, LoopbackServerOptions(state.path(), kServerToken));
  bool handled = false;
  server.Route("GET", "/x", [&](const Request&, Responder done) {
    handled = true;
    done(JsonResponse("{}"));
  });
  ASSERT_TRUE(server.Start().ok());
  LoopThread thread(loop);

  ClientOptions c = ClientOf(server, kServerToken);
  c.fingerprint = impostor->fingerprint;
  Result<Response> r = HttpClient(c).Get("/x");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find(server.fingerprint()), std::string::npos);
  EXPECT_NE(r.status().message().find(impostor->fingerprint), std::string::npos);

  c.fingerprint = "";
  EXPECT_EQ(HttpClient(c).Get("/x").status().code(), StatusCode::kFailedPrecondition);

  // The upper-case colon form people copy from openssl works too.
  std::string colons;
  for (size_t i = 0; i < 64; i += 2) {
    if (!colons.empty()) colons += ':';
    colons += server.fingerprint().substr(i, 2);
  }
  for (char& ch : colons) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  c.fingerprint = colons;
  Result<Response> ok = HttpClient(c).Get("/x");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->status, 200);
  thread.Call([&] { server.Stop(); });
  EXPECT_TRUE(handled);
}

TEST(ServerTlsTest, ALaterConnectionResumesTheSessionAndIsStillPinned) {
  TempDir state, other;
  Result<TlsIdentity> impostor = LoadOrCreateTlsIdentity(other.path());
  ASSERT_TRUE(impostor.ok());
  EventLoop loop;
  Server server(loop, LoopbackServerOptions(state.path(), kServerToken));
  server.Route("GET", "/x", [&](const Request&, Responder done) { done(JsonResponse("{}")); });
  ASSERT_TRUE(server.Start().ok());
  LoopThread thread(loop);

  ClientOptions c = ClientOf(server, kServerToken);
  const long before = ClientSessionsResumed();
  for (int i = 0; i < 3; ++i) {
    Result<Response> r = HttpClient(c).Get("/x");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, 200);
  }
  // The first makes the session, the later ones resume it.
  EXPECT_GE(ClientSessionsResumed() - before, 2);
  // A client pinned to another certificate gets no session of this one,
  // and is refused as before.
  c.fingerprint = impostor->fingerprint;
  EXPECT_EQ(HttpClient(c).Get("/x").status().code(), StatusCode::kFailedPrecondition);
  thread.Call([&] { server.Stop(); });
}

TEST(ServerTlsTest, RestartKeepsTheFingerprint) {
  TempDir state;
  EventLoop loop;
  const ServerOptions o = LoopbackServerOptions(state.path(), kServerToken);
  std::string first;
  {
    Server server(loop, o);
    ASSERT_TRUE(server.Start().ok());
    first = server.fingerprint();
  }
  Server again(loop, o);
  ASSERT_TRUE(again.Start().ok());
  EXPECT_EQ(again.fingerprint(), first);
  EXPECT_EQ(first.size(), 64u);
}

// Idle connections without the token are capped per listener; at the cap
// the oldest is closed, so the newest (a worker, a client) gets in.
TEST(ServerLimitsTest, ConnectionsWithoutTheTokenAreCappedOldestOut) {
  TempDir state;
  EventLoop loop;
  ServerOptions o = LoopbackServerOptions(state.path(), kServerToken, /*tls=*/false);
  o.limits.max_unauthenticated_connections = 4;
  o.limits.handshake_timeout = Seconds(60);  // only the cap closes them here
  Server server(loop, o);
  server.Route("GET", "/x", [](const Request&, Responder done) { done(JsonResponse("{}")); });
  ASSERT_TRUE(server.Start().ok());
  LoopThread thread(loop);

  std::vector<int> idle;
  for (int i = 0; i < 6; ++i) idle.push_back(ConnectRaw(server.port()));
  // The two oldest are pushed out by the four after them.
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(ReadUntilClosed(idle[i]).has_value()) << "connection " << i;
  }
  // A client with the token is served (pushing out one more while it has
  // not sent its request yet).
  Result<Response> r = HttpClient(ClientOf(server, kServerToken, false)).Get("/x");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(ReadUntilClosed(idle[2]).has_value());
  // The newest idle ones are still open: nothing to read, no hang-up.
  for (int i = 3; i < 6; ++i) {
    pollfd p{idle[i], POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 0), 0) << "connection " << i;
  }
  for (int fd : idle) ::close(fd);
  thread.Call([&] { server.Stop(); });
}

TEST(ServerInMemoryTest, AnswersAsAConnectionWould) {
  EventLoop loop;
  ServerOptions o;
  o.tls = false;
  o.token = kServerToken;
  o.limits.max_body_bytes = 16;
  Server server(loop, o);
  server.Route("POST", "/x/{id}", [](const Request& r, Responder done) {
    done(TextResponse(r.path_params.at("id") + ":" + r.body));
  });
  server.WebSocketRoute("/ws", [](std::shared_ptr<WsSession>, const Request&) {});
  auto answer = [&](const std::string& raw) {
    std::optional<Response> out;
    bool called = false;
    server.AnswerInMemory(raw, [&](std::optional<Response> r) {
      called = true;
      out = std::move(r);
    });
    EXPECT_TRUE(called) << raw;
    return out;
  };
  const std::string auth = "Authorization: Bearer " + kServerToken + "\r\n";
  std::optional<Response> r = answer("POST /x/7 HTTP/1.1\r\n" + auth + "Content-Length: 2\r\n\r\nhi");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "7:hi");
  EXPECT_EQ(answer("POST /x/7 HTTP/1.1\r\n\r\n")->status, 401);
  EXPECT_EQ(answer("POST /x/%FF HTTP/1.1\r\n" + auth + "\r\n")->status, 400);
  EXPECT_EQ(answer("GET /y HTTP/1.1\r\n" + auth + "\r\n")->status, 404);
  EXPECT_EQ(answer("GET /x/1 HTTP/1.1\r\n" + auth + "\r\n")->status, 405);
  EXPECT_EQ(answer("POST /x/1 HTTP/1.1\r\n" + auth + "Content-Length: 99\r\n\r\n")->status, 413);
  EXPECT_EQ(answer("POST /x/1 HTTP/1.1\r\n" + auth +
                   "Transfer-Encoding: chunked\r\n\r\nzz\r\n")->status,
            400);
  EXPECT_EQ(answer("GET /ws HTTP/1.1\r\n" + auth +
                   "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")->status,
            101);
  // Incomplete: the server would wait, then drop the connection unanswered.
  EXPECT_FALSE(answer("POST /x/1 HTTP/1.1\r\n" + auth + "Content-Length: 5\r\n\r\nab").has_value());
  EXPECT_FALSE(answer("GET /x").has_value());
}

TEST(ServerStartTest, RefusesEmptyTokenAndBadAddress) {
  EventLoop loop;
  ServerOptions o;
  o.tls = false;
  o.port = 0;
  EXPECT_EQ(Server(loop, o).Start().code(), StatusCode::kInvalidArgument);
  o.token = kServerToken;
  o.bind_address = "not-an-ip";
  EXPECT_EQ(Server(loop, o).Start().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace drover::net

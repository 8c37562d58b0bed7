// The HTTP server and the blocking client against each other on loopback,
// over TLS and plain TCP.

#include "net/server.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

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

// "GET /assets/%FF" with no token once aborted the server (nlohmann
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

// ---- Files as response bodies (Response::file_path), the body byte
// counters and HttpClient::Download.

// `size` bytes that differ from one offset to the next (a file served with
// an offset error would not compare equal).
std::string FileContent(size_t size) {
  std::string out(size, '\0');
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < size; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    out[i] = static_cast<char>(x);
  }
  return out;
}

void WriteFile(const std::string& path, const std::string& content) {
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(std::fwrite(content.data(), 1, content.size(), f), content.size());
  ASSERT_EQ(std::fclose(f), 0);
}

// SHA-256 fed piece by piece, as a download sink would.
class StreamHash {
 public:
  StreamHash() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr); }
  ~StreamHash() { EVP_MD_CTX_free(ctx_); }
  StreamHash(const StreamHash&) = delete;
  StreamHash& operator=(const StreamHash&) = delete;
  void Add(std::string_view bytes) { EVP_DigestUpdate(ctx_, bytes.data(), bytes.size()); }
  std::string Hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_, md, &len);
    std::string out;
    char buf[3];
    for (unsigned int i = 0; i < len; ++i) {
      std::snprintf(buf, sizeof(buf), "%02x", md[i]);
      out += buf;
    }
    return out;
  }

 private:
  EVP_MD_CTX* ctx_;
};

std::string HashOf(std::string_view bytes) {
  StreamHash h;
  h.Add(bytes);
  return h.Hex();
}

constexpr size_t kFileBytes = 3 * 1024 * 1024;

// GET /files/{name} answers with the file `name` of `dir` (which may be
// missing); GET /big-error with a 100 KiB error body.
void ServeFiles(Server& server, LoopThread& loop, const std::string& dir) {
  loop.Call([&server, dir] {
    server.Route("GET", "/files/{name}", [dir](const Request& r, Responder done) {
      Response res;
      res.content_type = "application/octet-stream";
      res.file_path = dir + "/" + r.path_params.at("name");
      res.body = "ignored";
      res.headers["X-File"] = r.path_params.at("name");
      done(std::move(res));
    });
    server.Route("GET", "/big-error", [](const Request&, Responder done) {
      done(TextResponse(std::string(100 * 1024, 'e'), 500));
    });
  });
}

// Waits until `counter()` reaches `want`. The server counts a body once its
// write completed, which may be just after the client has read it.
template <class F>
uint64_t AwaitAtLeast(LoopThread& loop, F counter, uint64_t want) {
  const auto deadline = std::chrono::steady_clock::now() + testing::kWait;
  while (counter() < want && std::chrono::steady_clock::now() < deadline) loop.Call([] {});
  return counter();
}

TEST_P(ServerTest, FileResponseIsStreamedFromDiskByteExact) {
  StartServer();
  ServeFiles(*server_, *loop_thread_, state_.path());
  const std::string content = FileContent(kFileBytes);
  WriteFile(state_ / "blob", content);
  ASSERT_TRUE(std::filesystem::create_directory(state_ / "dir"));

  HttpClient client(Client());
  Result<Response> r = client.Get("/files/blob");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->content_type, "application/octet-stream");
  EXPECT_EQ(r->headers["content-length"], std::to_string(kFileBytes));
  EXPECT_EQ(r->headers["x-file"], "blob");
  ASSERT_EQ(r->body.size(), content.size());
  EXPECT_TRUE(r->body == content);

  // A missing file, and a directory, are 404 with our error body; the
  // connection serves on.
  for (const char* target : {"/files/missing", "/files/dir"}) {
    Result<Response> missing = client.Get(target);
    ASSERT_TRUE(missing.ok()) << missing.status().ToString();
    EXPECT_EQ(missing->status, 404) << target;
    EXPECT_EQ(StatusFromResponse(*missing).code(), StatusCode::kNotFound) << missing->body;
    EXPECT_EQ(missing->body.find(state_.path()), std::string::npos) << "the path is not sent";
  }
  EXPECT_EQ(client.Get("/api/v1/echo/7")->status, 200);
}

TEST_P(ServerTest, BodyByteCountersCountRequestAndResponseBodies) {
  StartServer();
  ServeFiles(*server_, *loop_thread_, state_.path());
  WriteFile(state_ / "blob", FileContent(kFileBytes));
  auto sent = [this] { return server_->body_bytes_sent(); };
  auto received = [this] { return server_->body_bytes_received(); };
  EXPECT_EQ(sent(), 0u);
  EXPECT_EQ(received(), 0u);

  HttpClient client(Client());
  const std::string body(3000, 'x');
  ASSERT_EQ(client.Post("/api/v1/echo", body)->status, 200);
  EXPECT_EQ(AwaitAtLeast(*loop_thread_, sent, 3000), 3000u);
  EXPECT_EQ(received(), 3000u);

  ASSERT_EQ(client.Get("/files/blob")->status, 200);
  EXPECT_EQ(AwaitAtLeast(*loop_thread_, sent, 3000 + kFileBytes), 3000 + kFileBytes);
  EXPECT_EQ(received(), 3000u);  // a GET has no body
}

TEST_P(ServerTest, DownloadStreamsTheBodyToTheSinkInChunks) {
  StartServer();
  ServeFiles(*server_, *loop_thread_, state_.path());
  const std::string content = FileContent(kFileBytes);
  WriteFile(state_ / "blob", content);

  ClientOptions o = Client();
  o.max_response_bytes = 1024;  // does not apply to a streamed body
  HttpClient client(o);
  StreamHash hash;
  size_t bytes = 0, chunks = 0, largest = 0;
  ClientRequest request;
  request.target = "/files/blob";
  Result<Response> r = client.Download(request, [&](std::string_view chunk) {
    hash.Add(chunk);
    bytes += chunk.size();
    ++chunks;
    largest = std::max(largest, chunk.size());
    return Status::Ok();
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(r->body.empty());
  EXPECT_EQ(r->headers["content-length"], std::to_string(kFileBytes));
  EXPECT_EQ(r->headers["x-file"], "blob");
  EXPECT_EQ(bytes, kFileBytes);
  EXPECT_EQ(hash.Hex(), HashOf(content));
  EXPECT_LE(largest, 256u * 1024);
  EXPECT_GE(chunks, kFileBytes / (256 * 1024));

  // A string body downloads as well.
  std::string echoed;
  Result<Response> e =
      client.Download(ClientRequest{.method = "POST", .target = "/api/v1/echo", .body = "hello"},
                      [&](std::string_view chunk) {
                        echoed.append(chunk);
                        return Status::Ok();
                      });
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(echoed, "hello");
}

TEST_P(ServerTest, DownloadStopsAtTheSinksError) {
  StartServer();
  ServeFiles(*server_, *loop_thread_, state_.path());
  WriteFile(state_ / "blob", FileContent(kFileBytes));

  HttpClient client(Client());
  int calls = 0;
  ClientRequest request;
  request.target = "/files/blob";
  Result<Response> r = client.Download(request, [&](std::string_view) {
    ++calls;
    return calls == 2 ? Status(StatusCode::kDataLoss, "disk full") : Status::Ok();
  });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(r.status().message(), "disk full");
  EXPECT_EQ(calls, 2);
  // The server drops the abandoned transfer and serves on.
  EXPECT_EQ(client.Get("/api/v1/echo/8")->status, 200);
}

TEST_P(ServerTest, DownloadOfAnErrorReturnsItsBodyWithoutTheSink) {
  StartServer();
  ServeFiles(*server_, *loop_thread_, state_.path());
  HttpClient client(Client());
  bool called = false;
  auto sink = [&](std::string_view) {
    called = true;
    return Status::Ok();
  };
  ClientRequest request;
  request.target = "/files/missing";
  Result<Response> r = client.Download(request, sink);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(StatusFromResponse(*r).code(), StatusCode::kNotFound) << r->body;

  // An error body over 64 KiB is cut there.
  request.target = "/big-error";
  Result<Response> big = client.Download(request, sink);
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ(big->status, 500);
  EXPECT_EQ(big->body, std::string(64 * 1024, 'e'));
  EXPECT_FALSE(called);

  // Without a token: 401, the body explains.
  HttpClient stranger(Client(std::string(64, 'b')));
  Result<Response> denied = stranger.Download(request, sink);
  ASSERT_TRUE(denied.ok()) << denied.status().ToString();
  EXPECT_EQ(StatusFromResponse(*denied).code(), StatusCode::kUnauthenticated);
  EXPECT_FALSE(called);
}

// A peer that answers with a header and part of the body, then goes silent:
// Download's timeout is on progress, so it gives up after options.timeout
// without a byte, having handed over what came.
TEST(DownloadTimeoutTest, StalledBodyIsDeadlineExceeded) {
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  std::thread peer([listener] {
    int fd = ::accept(listener, nullptr, nullptr);
    if (fd < 0) return;
    std::string request;
    char buf[4096];
    while (request.find("\r\n\r\n") == std::string::npos) {
      ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n <= 0) break;
      request.append(buf, static_cast<size_t>(n));
    }
    const std::string answer = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789";
    if (::write(fd, answer.data(), answer.size()) < 0) {
      ::close(fd);
      return;
    }
    ReadUntilClosed(fd);  // silent until the client gives up
    ::close(fd);
  });

  ClientOptions o;
  o.host = "127.0.0.1";
  o.port = ntohs(addr.sin_port);
  o.tls = false;
  o.token = kServerToken;
  o.timeout = Millis(300);
  HttpClient client(o);
  std::string got;
  ClientRequest request;
  request.target = "/files/blob";
  Result<Response> r = client.Download(request, [&](std::string_view chunk) {
    got.append(chunk);
    return Status::Ok();
  });
  peer.join();
  ::close(listener);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
  EXPECT_EQ(got, "0123456789");
}

}  // namespace
}  // namespace drover::net

// Server::UploadRoute and HttpClient::Upload against each other on
// loopback, over TLS and plain TCP: bodies streamed to a file and hashed on
// the way, limits, the token, and no file left behind by a refused or
// broken upload.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "net/http_client.h"
#include "net/net_test_util.h"
#include "net/server.h"
#include "net/sha256.h"

namespace drover::net {
namespace {

using testing::ClientOf;
using testing::ConnectRaw;
using testing::LoopbackServerOptions;
using testing::LoopThread;
using testing::ReadUntilClosed;
using testing::TempDir;

const std::string kToken(64, 'b');
constexpr uint64_t kMaxUpload = 8 << 20;

std::string ShaOf(std::string_view bytes) {
  Sha256 sha;
  sha.Update(bytes);
  return sha.HexDigest();
}

// Entries of `dir` (names), sorted.
std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class UploadTest : public ::testing::TestWithParam<bool> {
 protected:
  bool tls() const { return GetParam(); }

  void SetUp() override {
    std::filesystem::create_directories(uploads_);
    ServerOptions o = LoopbackServerOptions(state_.path(), kToken, tls());
    o.limits.max_body_bytes = 4096;  // uploads are not held to it
    server_ = std::make_unique<Server>(loop_, o);
    // Keeps what it got as "<dir>/kept-<name>" and answers its size and hash.
    server_->UploadRoute("PUT", "/files/{name}", uploads_, kMaxUpload,
                         [this](const Request& r, const Upload& up, Responder done) {
                           EXPECT_TRUE(r.body.empty());
                           EXPECT_TRUE(std::filesystem::exists(up.path));
                           const std::string name = r.path_params.at("name");
                           if (name != "drop") {
                             std::filesystem::rename(up.path, uploads_ + "/kept-" + name);
                           }
                           done(JsonResponse("{\"size\":" + std::to_string(up.size) +
                                             ",\"sha256\":\"" + up.sha256 + "\"}"));
                         });
    server_->Route("GET", "/files/{name}",
                   [](const Request&, Responder done) { done(JsonResponse("{}")); });
    Status s = server_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
    loop_thread_ = std::make_unique<LoopThread>(loop_);
  }

  void TearDown() override {
    if (loop_thread_) loop_thread_->Call([this] { server_->Stop(); });
    loop_thread_.reset();
    server_.reset();
  }

  ClientOptions Client(const std::string& token = kToken) {
    return ClientOf(*server_, token, tls());
  }

  std::string WriteFile(const std::string& name, const std::string& bytes) {
    const std::string path = files_ / name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  ClientRequest Put(const std::string& target) {
    ClientRequest r;
    r.method = "PUT";
    r.target = target;
    r.content_type = "application/octet-stream";
    return r;
  }

  TempDir state_;
  TempDir files_;
  std::string uploads_ = state_ / "uploads";
  EventLoop loop_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<LoopThread> loop_thread_;
};

TEST_P(UploadTest, BodyArrivesAsAFileWithItsSizeAndHash) {
  // Larger than the route's in-memory limit and than one piece (1 MiB).
  std::string bytes(3 * (1 << 20) + 17, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 31 + i / 7);
  const std::string path = WriteFile("big", bytes);
  HttpClient client(Client());
  Result<Response> r = client.Upload(Put("/files/big"), path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->body,
            "{\"size\":" + std::to_string(bytes.size()) + ",\"sha256\":\"" + ShaOf(bytes) + "\"}");
  EXPECT_EQ(ReadAll(uploads_ + "/kept-big"), bytes);
  EXPECT_EQ(Entries(uploads_), std::vector<std::string>{"kept-big"});
  EXPECT_EQ(server_->body_bytes_received(), bytes.size());
}

TEST_P(UploadTest, EmptyBodyIsAnEmptyFile) {
  const std::string path = WriteFile("empty", "");
  HttpClient client(Client());
  Result<Response> r = client.Upload(Put("/files/empty"), path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_NE(r->body.find(ShaOf("")), std::string::npos);
  EXPECT_EQ(ReadAll(uploads_ + "/kept-empty"), "");
}

TEST_P(UploadTest, WhatTheHandlerLeavesIsRemoved) {
  const std::string path = WriteFile("x", "some bytes");
  HttpClient client(Client());
  Result<Response> r = client.Upload(Put("/files/drop"), path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(Entries(uploads_).empty());
}

TEST_P(UploadTest, WrongTokenIsRefusedBeforeTheBody) {
  const std::string path = WriteFile("x", std::string(100000, 'x'));
  HttpClient client(Client(std::string(64, 'c')));
  Result<Response> r = client.Upload(Put("/files/x"), path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 401);
  EXPECT_TRUE(Entries(uploads_).empty());
}

TEST_P(UploadTest, OverTheRouteLimitIs413AndLeavesNothing) {
  const std::string path = WriteFile("huge", std::string(kMaxUpload + 1, 'h'));
  HttpClient client(Client());
  Result<Response> r = client.Upload(Put("/files/huge"), path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(StatusFromResponse(*r).code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(Entries(uploads_).empty());
}

TEST_P(UploadTest, OtherMethodsOfThePathAreOrdinaryRoutes) {
  HttpClient client(Client());
  Result<Response> r = client.Get("/files/x");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "{}");
}

TEST_P(UploadTest, MissingFileIsAnError) {
  HttpClient client(Client());
  Result<Response> r = client.Upload(Put("/files/x"), files_ / "absent");
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
}

// A full disk: the partial file goes and the client is told why (507), or,
// when the server closed before the client had sent the rest, the upload
// fails; either way nothing is left (a 1 MiB tmpfs as the directory, root).
TEST_P(UploadTest, AFullDiskIs507AndLeavesNothing) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount a 1 MiB tmpfs";
  if (::mount("tmpfs", uploads_.c_str(), "tmpfs", 0, "size=1m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here (" << std::strerror(errno) << ")";
  }
  struct Unmount {
    std::string dir;
    ~Unmount() { ::umount2(dir.c_str(), MNT_DETACH); }
  } unmount{uploads_};
  const std::string path = WriteFile("big", std::string(3 << 20, 'f'));
  HttpClient client(Client());
  Result<Response> r = client.Upload(Put("/files/big"), path);
  if (r.ok()) {
    EXPECT_EQ(r->status, 507) << r->body;
    EXPECT_NE(r->body.find("no space left on device"), std::string::npos) << r->body;
  }
  EXPECT_TRUE(Entries(uploads_).empty());
  // The server is still there for the next one.
  Result<Response> after = client.Upload(Put("/files/small"), WriteFile("small", "ok"));
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->status, 200);
}

INSTANTIATE_TEST_SUITE_P(TlsAndPlain, UploadTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "tls" : "plain"; });

// A peer that goes away mid-body, and one without Content-Length: nothing
// is left in the directory (plain TCP, raw bytes).
TEST(UploadRawTest, BrokenAndChunkedUploadsLeaveNoFile) {
  TempDir state;
  const std::string uploads = state / "uploads";
  std::filesystem::create_directories(uploads);
  EventLoop loop;
  ServerOptions o = LoopbackServerOptions(state.path(), kToken, /*tls=*/false);
  Server server(loop, o);
  testing::Inbox<int> handled;
  server.UploadRoute("PUT", "/files/{name}", uploads, kMaxUpload,
                     [&](const Request&, const Upload&, Responder done) {
                       handled.Push(1);
                       done(JsonResponse("{}"));
                     });
  ASSERT_TRUE(server.Start().ok());
  auto loop_thread = std::make_unique<LoopThread>(loop);

  const std::string head = "PUT /files/a HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + kToken +
                           "\r\nContent-Length: 100000\r\n\r\n";
  int fd = ConnectRaw(server.port());
  ASSERT_GE(fd, 0);
  const std::string partial = head + std::string(5000, 'p');
  ASSERT_EQ(::write(fd, partial.data(), partial.size()), static_cast<ssize_t>(partial.size()));
  // The temporary file exists while the body comes in.
  for (int i = 0; i < 2000 && Entries(uploads).empty(); ++i) ::usleep(1000);
  EXPECT_EQ(Entries(uploads).size(), 1u);
  ::close(fd);
  loop_thread->Call([&] { return 0; });
  for (int i = 0; i < 2000 && !Entries(uploads).empty(); ++i) ::usleep(1000);
  EXPECT_TRUE(Entries(uploads).empty());

  fd = ConnectRaw(server.port());
  ASSERT_GE(fd, 0);
  const std::string chunked = "PUT /files/b HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                              kToken +
                              "\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
  ASSERT_EQ(::write(fd, chunked.data(), chunked.size()), static_cast<ssize_t>(chunked.size()));
  std::optional<std::string> answer = ReadUntilClosed(fd);
  ::close(fd);
  ASSERT_TRUE(answer.has_value());
  EXPECT_NE(answer->find("411"), std::string::npos) << *answer;
  EXPECT_TRUE(Entries(uploads).empty());
  EXPECT_FALSE(handled.Pop(std::chrono::milliseconds(1)).has_value());

  loop_thread->Call([&] { server.Stop(); });
  loop_thread.reset();
}

}  // namespace
}  // namespace drover::net

// The dashboard's static routes: what DashboardResponse answers for a table
// of files, and, through a real ServerShell on 127.0.0.1 (TLS), that / and
// /assets/... need no token while the API still does.

#include "server/dashboard.h"

#include <gtest/gtest.h>

#include <regex>

#include "server/server_test_util.h"

namespace drover::server {
namespace {

using testing::LoopThread;
using testing::TempDir;

constexpr EmbeddedFile kFiles[] = {
    {"index.html", "text/html; charset=utf-8", "<html>dash</html>"},
    {"assets/index-abc.js", "text/javascript; charset=utf-8", "console.log(1)"},
};

TEST(DashboardResponseTest, IndexIsNotCachedAndAssetsAreImmutable) {
  std::optional<net::Response> index = DashboardResponse(kFiles, "/");
  ASSERT_TRUE(index.has_value());
  EXPECT_EQ(index->status, 200);
  EXPECT_EQ(index->body, "<html>dash</html>");
  EXPECT_EQ(index->content_type, "text/html; charset=utf-8");
  EXPECT_EQ(index->headers.at("Cache-Control"), "no-cache");
  EXPECT_EQ(DashboardResponse(kFiles, "/index.html")->body, "<html>dash</html>");

  std::optional<net::Response> js = DashboardResponse(kFiles, "/assets/index-abc.js");
  ASSERT_TRUE(js.has_value());
  EXPECT_EQ(js->status, 200);
  EXPECT_EQ(js->body, "console.log(1)");
  EXPECT_EQ(js->content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(js->headers.at("Cache-Control"), "public, max-age=31536000, immutable");
}

TEST(DashboardResponseTest, UnknownAssetIs404AndOtherPathsAreNotOurs) {
  std::optional<net::Response> missing = DashboardResponse(kFiles, "/assets/gone.js");
  ASSERT_TRUE(missing.has_value());
  EXPECT_EQ(missing->status, 404);
  EXPECT_NE(missing->body.find("/assets/gone.js"), std::string::npos);
  EXPECT_FALSE(DashboardResponse(kFiles, "/api/v1/jobs").has_value());
  EXPECT_FALSE(DashboardResponse(kFiles, "/assetsx").has_value());
}

TEST(DashboardResponseTest, WithoutABuiltDashboardTheIndexSaysSo) {
  std::optional<net::Response> index = DashboardResponse({}, "/");
  ASSERT_TRUE(index.has_value());
  EXPECT_EQ(index->status, 200);
  EXPECT_NE(index->body.find("DROVER_WEB=OFF"), std::string::npos);
  EXPECT_EQ(DashboardResponse({}, "/assets/index.js")->status, 404);
}

// The embedded build itself, served by a real server without a token.
TEST(DashboardServerTest, ServesTheEmbeddedPageWithoutTokenButNotTheApi) {
  TempDir dir;
  net::EventLoop loop;
  LoopThread thread(loop);
  ServerConfig cfg;
  cfg.state_dir = dir / "state";
  cfg.bind_address = "127.0.0.1";
  cfg.port = 0;
  cfg.tls = true;
  cfg.access_file = "-";
  auto shell = thread.Call([&] { return ServerShell::Start(loop, cfg); });
  ASSERT_TRUE(shell.ok()) << shell.status().ToString();

  net::ClientOptions anonymous;
  anonymous.port = (*shell)->port();
  anonymous.tls = true;
  anonymous.fingerprint = (*shell)->fingerprint();
  anonymous.timeout = Seconds(20);

  Result<net::Response> index = net::HttpClient(anonymous).Get("/");
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  EXPECT_EQ(index->status, 200);
  EXPECT_EQ(index->content_type, "text/html; charset=utf-8");
  EXPECT_NE(index->body.find("<title>Drover</title>"), std::string::npos) << index->body;

  if (!DashboardFiles().empty()) {
    // Every asset the page names is served with its type and a long cache.
    std::smatch m;
    ASSERT_TRUE(std::regex_search(index->body, m, std::regex(R"(/assets/[A-Za-z0-9_.-]+\.js)")))
        << index->body;
    Result<net::Response> js = net::HttpClient(anonymous).Get(m.str());
    ASSERT_TRUE(js.ok()) << js.status().ToString();
    EXPECT_EQ(js->status, 200);
    EXPECT_EQ(js->content_type, "text/javascript; charset=utf-8");
    EXPECT_EQ(js->headers["cache-control"], "public, max-age=31536000, immutable");
    EXPECT_GT(js->body.size(), 1000u);
  }

  Result<net::Response> api = net::HttpClient(anonymous).Get("/api/v1/workers");
  ASSERT_TRUE(api.ok()) << api.status().ToString();
  EXPECT_EQ(api->status, 401);

  thread.Call([&] {
    (*shell)->Stop();
    shell->reset();
  });
}

}  // namespace
}  // namespace drover::server

// The token and the pinned certificate, with real processes over TLS.
#include <gtest/gtest.h>

#include "cluster.h"
#include "net/http_client.h"

namespace drover::testing {
namespace {

const std::string kWrongToken(64, '0');

TEST(SecurityTest, WrongTokenIsRefusedForClientsAndWorkers) {
  Cluster c;
  c.StartServer();
  // A raw request: HTTP 401.
  net::ClientOptions options = c.Api().options();
  options.token = kWrongToken;
  net::HttpClient http(options);
  Result<net::Response> r = http.Get("/api/v1/jobs");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 401) << r->body;

  // The CLI says so in one line and fails.
  RunResult status = c.Drover({"status", "--token", kWrongToken});
  EXPECT_EQ(status.status, 1) << status.output;
  EXPECT_NE(status.output.find("drover: "), std::string::npos) << status.output;

  // A worker with the wrong token is turned away (and logs why).
  Process worker({c.binary(), "worker", "--access", c.access_file(), "--token", kWrongToken,
                  "--name", "intruder", "--workdir", c.dir() + "/work", "--isolation", "none",
                  "--run-as-root"});
  EXPECT_TRUE(worker.WaitForLine("nauthenticated", In(kStartTimeout))) << worker.output();
  EXPECT_TRUE(c.Get("/api/v1/workers")["workers"].empty());
}

TEST(SecurityTest, ServerWithAnotherCertificateIsRefusedByTheClient) {
  Cluster c;
  c.StartServer();
  RunResult status = c.Drover({"status", "--fingerprint", std::string(64, 'a')});
  EXPECT_EQ(status.status, 1) << status.output;
  EXPECT_NE(status.output.find("fingerprint"), std::string::npos) << status.output;
  // The right one works.
  RunResult ok = c.Drover({"status"});
  EXPECT_EQ(ok.status, 0) << ok.output;
  EXPECT_NE(ok.output.find("no jobs"), std::string::npos) << ok.output;
}

}  // namespace
}  // namespace drover::testing

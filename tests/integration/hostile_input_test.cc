// Hostile input against a real `drover server`: requests with
// bytes that are not text, with and without the token, over TLS and over
// the local socket; a NUL byte in a command; a token in the worker
// channel's URL; and a flood of idle connections against a small limit on
// open files. Each time the server answers (or sheds the connection), keeps
// serving, and stays quiet and cheap.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cluster.h"
#include "net/http_client.h"

namespace drover::testing {
namespace {

// Over TCP + TLS to the cluster's server, with `token`.
net::ClientOptions Tcp(Cluster& c, const std::string& token) {
  net::ClientOptions o = c.Api().options();
  o.local_socket.clear();
  o.token = token;
  return o;
}

// Over the local socket (plain HTTP), with `token`.
net::ClientOptions Local(Cluster& c, const std::string& token) {
  net::ClientOptions o = c.Api().options();
  o.local_socket = c.dir() + "/state/api.sock";
  o.token = token;
  return o;
}

net::ClientRequest Upgrade(const std::string& target) {
  net::ClientRequest r;
  r.target = target;
  r.headers = {{"Connection", "Upgrade"},
               {"Upgrade", "websocket"},
               {"Sec-WebSocket-Version", "13"},
               {"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}};
  return r;
}

net::ClientRequest Get(const std::string& target) {
  net::ClientRequest r;
  r.target = target;
  return r;
}

net::ClientRequest Post(const std::string& target, std::string body) {
  net::ClientRequest r;
  r.method = "POST";
  r.target = target;
  r.body = std::move(body);
  return r;
}

// The server process is alive and answers an authenticated request.
void ExpectServing(Cluster& c, const std::string& after) {
  ASSERT_FALSE(c.server()->Wait(In(std::chrono::milliseconds(0))).has_value())
      << "the server died after " << after << ":\n"
      << c.server()->output();
  Result<net::Response> r = net::HttpClient(Tcp(c, c.Api().options().token)).Get("/api/v1/jobs");
  ASSERT_TRUE(r.ok()) << after << ": " << r.status().ToString();
  EXPECT_EQ(r->status, 200) << after << ": " << r->body;
}

TEST(HostileInputTest, BytesThatAreNotTextGet4xxAndTheServerKeepsServing) {
  Cluster c;
  c.StartServer();
  const std::string token = c.Api().options().token;
  struct Case {
    std::string what;
    net::ClientOptions options;
    net::ClientRequest request;
  };
  const std::string bad_job = "{\"name\":\"j\xff\",\"task\":[{\"command\":[\"true\"]}]}";
  const std::vector<Case> cases = {
      {"GET /assets/%FF without a token", Tcp(c, ""), Get("/assets/%FF")},
      {"GET /assets/ with a raw 0xFF", Tcp(c, ""), Get("/assets/\xff")},
      {"WebSocket upgrade to /%FF without a token", Tcp(c, ""), Upgrade("/%FF")},
      {"WebSocket upgrade to /%FF on the local socket", Local(c, ""), Upgrade("/%FF")},
      {"WebSocket upgrade to /%FF with the token", Tcp(c, token), Upgrade("/%FF")},
      {"GET /api/v1/jobs?state=%FF", Tcp(c, token), Get("/api/v1/jobs?state=%FF")},
      {"GET /api/v1/jobs?%FF=1", Tcp(c, token), Get("/api/v1/jobs?%FF=1")},
      {"GET /api/v1/jobs/%FF", Tcp(c, token), Get("/api/v1/jobs/%FF")},
      {"GET /api/v1/jobs/%00", Local(c, token), Get("/api/v1/jobs/%00")},
      {"POST /api/v1/jobs with 0xFF in the body", Tcp(c, token), Post("/api/v1/jobs", "\xff")},
      {"POST /api/v1/jobs with 0xFF in a name", Local(c, token), Post("/api/v1/jobs", bad_job)},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    Result<net::Response> r = net::HttpClient(k.options).Send(k.request);
    ASSERT_TRUE(r.ok()) << r.status().ToString() << "\n" << c.server()->output();
    EXPECT_GE(r->status, 400) << r->body;
    EXPECT_LT(r->status, 500) << r->body;
    // The error body is JSON, so valid UTF-8, whatever the request held.
    EXPECT_FALSE(nlohmann::json::parse(r->body, nullptr, false).is_discarded()) << r->body;
    ExpectServing(c, k.what);
  }
}

TEST(HostileInputTest, NulInACommandIsRefusedNamingTheField) {
  Cluster c;
  c.StartServer();
  c.StartWorker("w1");
  const std::string marker = c.dir() + "/ran";
  // Through the API: 400 naming the field, nothing queued.
  Result<net::Response> r = net::HttpClient(Tcp(c, c.Api().options().token))
                                .Post("/api/v1/jobs", R"({"name":"j","task":[{"command":)"
                                                      R"(["touch",")" + marker +
                                                          R"(\u0000x"]}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 400) << r->body;
  nlohmann::json error = nlohmann::json::parse(r->body, nullptr, false)["error"];
  EXPECT_EQ(error["field"], "task[0].command[1]") << r->body;
  EXPECT_NE(error["message"].get<std::string>().find("NUL byte"), std::string::npos) << r->body;

  // Through a job file: the CLI says where.
  const std::string file = c.WriteFile(
      "nul.toml", "name = \"j\"\n[[task]]\ncommand = [\"touch\", \"" + marker + "\\u0000x\"]\n");
  RunResult run = c.Drover({"run", file});
  EXPECT_EQ(run.status, 2) << run.output;  // invalid input
  EXPECT_NE(run.output.find("task[0].command[1]: NUL byte"), std::string::npos) << run.output;
  EXPECT_TRUE(c.Get("/api/v1/jobs")["jobs"].empty());
  EXPECT_NE(::access(marker.c_str(), F_OK), 0) << "the cut command ran";
}

TEST(HostileInputTest, TheWorkerChannelRefusesATokenInItsUrl) {
  Cluster c;
  c.StartServer();
  const std::string token = c.Api().options().token;
  Result<net::Response> worker =
      net::HttpClient(Tcp(c, "")).Send(Upgrade("/api/v1/worker?token=" + token));
  ASSERT_TRUE(worker.ok()) << worker.status().ToString();
  EXPECT_EQ(worker->status, 401) << worker->body;
  EXPECT_NE(worker->body.find("?token= is refused on /api/v1/worker"), std::string::npos)
      << worker->body;
  // Refused even next to a right header: the URL has been sent already.
  worker = net::HttpClient(Tcp(c, token)).Send(Upgrade("/api/v1/worker?token=" + token));
  ASSERT_TRUE(worker.ok()) << worker.status().ToString();
  EXPECT_EQ(worker->status, 401) << worker->body;

  // The dashboard's event stream still takes it (browsers have no other way).
  Result<net::Response> events =
      net::HttpClient(Tcp(c, "")).Send(Upgrade("/api/v1/events?token=" + token));
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  EXPECT_EQ(events->status, 101) << events->body;
  // And a worker with the token in its header attaches.
  c.StartWorker("w1");
}

// A TCP connection to 127.0.0.1:port that sends nothing; -1 on failure.
int ConnectLoopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// CPU seconds (user + system) the process `pid` has used.
double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Fields after the command name (which may hold spaces) in parentheses.
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// More idle connections than the server may open files.
// Before the fix the accept loop spun on EMFILE (10 s of CPU in 14 s),
// logged a line per try (148 MB) and stalled every client.
TEST(HostileInputTest, IdleConnectionsBeyondTheFileLimitNeitherSpinNorLockOut) {
  Cluster c;
  Process& server = c.StartServer();
  // The test holds the connections: it needs the files for them.
  rlimit mine{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &mine), 0);
  mine.rlim_cur = mine.rlim_max;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &mine), 0);
  // The server may open 64 files from now on: far fewer than the idle
  // connections below (it raised its soft limit at start, so it does not
  // know; that is the case of a busy machine's lower hard limit, too).
  const rlimit small{64, 64};
  ASSERT_EQ(::prlimit(server.pid(), RLIMIT_NOFILE, &small, nullptr), 0) << std::strerror(errno);

  const double cpu_before = CpuSeconds(server.pid());
  const size_t log_before = server.output().size();
  std::vector<int> idle;
  for (int i = 0; i < 300; ++i) {
    int fd = ConnectLoopback(c.port());
    ASSERT_GE(fd, 0) << "connection " << i << ": " << std::strerror(errno);
    idle.push_back(fd);
  }
  // A few seconds with every connection open, reading the server's output
  // meanwhile (a full pipe would stop a spinning server from spinning).
  EXPECT_FALSE(server.WaitForLine("no such line", In(std::chrono::seconds(3))));
  const double idle_cpu = CpuSeconds(server.pid()) - cpu_before;

  // The local socket still serves a client with the token...
  const auto start = std::chrono::steady_clock::now();
  Result<net::Response> status =
      net::HttpClient(Local(c, c.Api().options().token)).Get("/api/v1/status");
  const auto local_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - start)
                            .count();
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(status->status, 200) << status->body;
  // ... and a worker gets through the crowd on the TCP port and runs a task.
  c.StartWorker("w1");
  RunResult job = c.Drover({"submit", "--wait", "--", "true"});
  EXPECT_EQ(job.status, 0) << job.output;
  for (int fd : idle) ::close(fd);

  EXPECT_FALSE(server.WaitForLine("no such line", In(std::chrono::milliseconds(200))));
  const size_t log_bytes = server.output().size() - log_before;
  std::cout << "idle connections: server CPU " << idle_cpu << " s in 3 s; local request "
            << local_ms << " ms; " << log_bytes << " bytes of log" << std::endl;
  EXPECT_LT(idle_cpu, 0.5) << "the accept loop spins";
  EXPECT_LT(log_bytes, 64u * 1024) << server.output().substr(log_before, 2000);
}

}  // namespace
}  // namespace drover::testing

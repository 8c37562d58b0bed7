// Several `drover server --redis` with real processes: a standby serves
// reads from the journal it follows, sends writers (307) and workers (a
// refusal naming the leader) to the leader; workers and clients given
// several addresses ride out a kill -9 of the leader; a leader paused past
// its lease (SIGSTOP) with tasks queued is replaced and, continued, assigns
// nothing: every task runs once.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include <nlohmann/json.hpp>

#include "net/http_client.h"
#include "tests/integration/cluster.h"
#include "tests/redis_integration/redis_cluster.h"

namespace drover::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A server on `port` (so that it advertises 127.0.0.1:port), on the
// cluster's state directory (token, certificate and server-id shared, as
// copied to a standby host), writing its access file to `access`.
std::vector<std::string> ServerOn(const Cluster& c, uint16_t port,
                                  const std::vector<std::string>& flags,
                                  const std::string& access) {
  std::vector<std::string> argv = {c.binary(),     "server",
                                   "--bind",       "127.0.0.1",
                                   "--port",       std::to_string(port),
                                   "--state-dir",  c.dir() + "/state",
                                   "--access-file", access};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return argv;
}

std::string Address(uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

// An access file naming `addresses` ("a:1,b:2"), with the cluster's token
// and fingerprint; returns its path.
std::string WriteAccess(const Cluster& c, const std::string& name, const std::string& addresses) {
  nlohmann::json access = ReadJson(c.access_file());
  access["address"] = addresses;
  const std::string path = c.dir() + "/" + name;
  std::ofstream(path) << access.dump();
  std::filesystem::permissions(path, std::filesystem::perms::owner_read |
                                         std::filesystem::perms::owner_write);
  return path;
}

// Options for one server only (no alternates): what it answers itself.
net::ClientOptions Only(const Cluster& c, uint16_t port) {
  const nlohmann::json access = ReadJson(c.access_file());
  net::ClientOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.token = access["token"];
  o.fingerprint = access["fingerprint"];
  o.timeout = seconds(10);
  return o;
}

// A Redis, a cluster on it, and a leader on port `a` and a standby on port
// `b` of the cluster's state directory, both on ports known before they
// start (the leader advertises its own), started and ready.
struct LeaderAndStandby {
  std::unique_ptr<TestRedisServer> redis;
  std::vector<std::string> flags;  // of both servers
  std::unique_ptr<Cluster> cluster;
  uint16_t a = 0;
  uint16_t b = 0;
  std::unique_ptr<Process> leader;
  std::unique_ptr<Process> standby;
};

void StartLeaderAndStandby(LeaderAndStandby* servers) {
  servers->redis = StartRedis();
  ASSERT_NE(servers->redis, nullptr);
  servers->flags = RedisFlags(*servers->redis, {}, "9s");
  servers->cluster = std::make_unique<Cluster>(servers->flags);
  const Cluster& c = *servers->cluster;
  const std::vector<std::string>& flags = servers->flags;
  Result<int> port_a = FreePort();
  Result<int> port_b = FreePort();
  ASSERT_TRUE(port_a.ok() && port_b.ok());
  ASSERT_NE(*port_a, *port_b);
  servers->a = static_cast<uint16_t>(*port_a);
  servers->b = static_cast<uint16_t>(*port_b);
  servers->leader = std::make_unique<Process>(ServerOn(c, servers->a, flags, c.access_file()));
  ASSERT_TRUE(servers->leader->WaitForLine("drover: listening on " + Address(servers->a),
                                           In(kStartTimeout)))
      << servers->leader->output();
  servers->standby =
      std::make_unique<Process>(ServerOn(c, servers->b, flags, c.dir() + "/standby-access.json"));
  ASSERT_TRUE(servers->standby->WaitForLine(
      "drover: standby serving reads on port " + std::to_string(servers->b), In(kStartTimeout)))
      << servers->standby->output();
}

// The standby's copy catches up by itself (it reads Redis every 250 ms):
// checks `pred` until it holds or `timeout` passed. Polling is what a
// client of a standby does; the bound checked is the standby's promise.
bool Eventually(const std::function<bool()>& pred, milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(50));
  }
  return true;
}

RunResult DroverWith(const Cluster& c, const std::string& access, std::vector<std::string> args) {
  std::vector<std::string> argv = {c.binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunToEnd(argv, In(kJobTimeout), {"DROVER_ACCESS=" + access});
}

int RunsIn(const std::string& path) { return static_cast<int>(Lines(path).size()); }

TEST(RedisStandbyTest, StandbyServesReadsSendsWritersAndWorkersToTheLeaderAndTakesOver) {
  LeaderAndStandby servers;
  ASSERT_NO_FATAL_FAILURE(StartLeaderAndStandby(&servers));
  Cluster& c = *servers.cluster;
  const uint16_t a = servers.a;
  const uint16_t b = servers.b;
  Process& leader = *servers.leader;
  Process& standby = *servers.standby;
  const nlohmann::json access = ReadJson(c.access_file());
  const std::string b_first = WriteAccess(c, "b-first.json", Address(b) + "," + Address(a));

  // A worker given both addresses, the standby first: refused there with
  // the leader's address, it attaches to the leader.
  Process& worker = c.StartWorker(
      "duo", {"--server", Address(b) + "," + Address(a), "--token", access["token"],
              "--fingerprint", access["fingerprint"], "--cpus", "0-1"});
  EXPECT_NE(worker.output().find("this server is a standby; the leader is at " + Address(a)),
            std::string::npos)
      << worker.output();

  // A write to the standby: 307 to the leader, with the leader in the body.
  {
    Result<net::Response> r = net::HttpClient(Only(c, b)).Post("/api/v1/jobs", "{}");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, 307) << r->body;
    EXPECT_EQ(r->headers["location"], "https://" + Address(a) + "/api/v1/jobs");
    nlohmann::json body = nlohmann::json::parse(r->body, nullptr, false);
    EXPECT_EQ(body["error"]["leader"], Address(a)) << r->body;
    EXPECT_EQ(body["error"]["code"], "unavailable") << r->body;
  }
  // A browser at the standby's address (no token: the dashboard's page is
  // public) is sent to the leader's dashboard.
  {
    net::ClientOptions anonymous = Only(c, b);
    anonymous.token.clear();
    Result<net::Response> r = net::HttpClient(anonymous).Get("/");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, 307) << r->body;
    EXPECT_EQ(r->headers["location"], "https://" + Address(a) + "/");
  }
  // The CLI, standby first, follows the redirect.
  const std::string go = c.dir() + "/go";
  const std::string runs = c.dir() + "/runs.";
  const uint64_t job = SubmittedJob(
      DroverWith(c, b_first, Submit({"--name", "hold", "--array", "0-3"}, HoldingTask(runs, go))));
  ASSERT_GT(job, 0u);
  {
    EventTap tap(c.Api().options(), job);
    ASSERT_TRUE(tap.WaitForTasksIn("running", 2));
  }

  // Reads from the standby: its copy of the job catches up (every 250 ms;
  // 10 s only bounds a loaded machine), and each answer states its age,
  // within the 2 s bound.
  cli::ApiClient on_b(Only(c, b));
  const std::string job_path = "/api/v1/jobs/" + std::to_string(job);
  ASSERT_TRUE(Eventually(
      [&] {
        Result<nlohmann::json> j = on_b.Get(job_path);
        if (!j.ok() || (*j)["tasks"].size() != 4) return false;
        int running = 0;
        for (const auto& t : (*j)["tasks"]) running += t["state"] == "running";
        return running == 2;
      },
      milliseconds(10000)))
      << on_b.Get(job_path).status().ToString() << "\n" << standby.output();
  Result<nlohmann::json> status = on_b.Get("/api/v1/status");
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ((*status)["role"], "standby") << status->dump(2);
  EXPECT_EQ((*status)["leader"], Address(a)) << status->dump(2);
  EXPECT_EQ((*status)["tasks"]["running"], 2) << status->dump(2);
  Result<nlohmann::json> task = on_b.Get("/api/v1/tasks/" + std::to_string(job) + ".0");
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  EXPECT_EQ((*task)["state"], "running") << task->dump(2);
  ASSERT_TRUE(Eventually(
      [&] {
        Result<nlohmann::json> w = on_b.Get("/api/v1/workers");
        return w.ok() && w->dump().find("\"duo\"") != std::string::npos;
      },
      milliseconds(10000)))
      << on_b.Get("/api/v1/workers").status().ToString();
  {
    Result<net::Response> r = net::HttpClient(Only(c, b)).Get("/api/v1/jobs");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->headers["x-drover-role"], "standby");
    EXPECT_EQ(r->headers["x-drover-leader"], Address(a));
    EXPECT_LE(std::stoi(r->headers["x-drover-lag-ms"]), 2000);
  }
  // The CLI reads through the standby too.
  RunResult listed = DroverWith(c, b_first, {"status", std::to_string(job)});
  EXPECT_EQ(listed.status, 0) << listed.output;

  // kill -9 of the leader: the standby takes over on its own address, the
  // worker re-attaches through its list, and a client whose first address
  // is the dead leader goes on through the second.
  leader.Signal(SIGKILL);
  ASSERT_TRUE(leader.Wait(In(kStartTimeout)).has_value());
  ASSERT_TRUE(standby.WaitForLine("drover: listening on " + Address(b), In(seconds(30))))
      << standby.output();
  ASSERT_TRUE(worker.WaitForLine("attached as worker", In(seconds(30)))) << worker.output();
  const std::string a_first = WriteAccess(c, "a-first.json", Address(a) + "," + Address(b));
  const uint64_t after = SubmittedJob(DroverWith(
      c, a_first,
      Submit({"--name", "after"}, {"sh", "-c", "echo run >> " + c.dir() + "/after.runs"})));
  ASSERT_GT(after, 0u);
  std::ofstream(go) << "go\n";
  for (uint64_t j : {job, after}) {
    RunResult wait = DroverWith(c, a_first, {"wait", std::to_string(j)});
    EXPECT_EQ(wait.status, 0) << wait.output << "\nstandby:\n" << standby.output();
  }
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(RunsIn(runs + std::to_string(i)), 1) << "task " << i;
  }
  EXPECT_EQ(RunsIn(c.dir() + "/after.runs"), 1);
  RunResult done = DroverWith(c, a_first, {"status", std::to_string(job), "--json"});
  ASSERT_EQ(done.status, 0) << done.output;
  nlohmann::json info = nlohmann::json::parse(done.output, nullptr, false);
  ASSERT_EQ(info["tasks"].size(), 4u) << done.output;
  for (const nlohmann::json& t : info["tasks"]) {
    EXPECT_EQ(t["state"], "succeeded") << t.dump(2);
    EXPECT_EQ(t["attempt"], 1) << "re-attached, not re-run: " << t.dump(2) << "\nstandby:\n"
                               << standby.output() << "\nworker:\n" << worker.output();
  }
}

// SIGSTOP of the leader with tasks queued on a one-core worker: the
// standby takes over and assigns the queued tasks; the old leader,
// continued, steps down without assigning anything: each task ran once.
TEST(RedisStandbyTest, PausedLeaderIsReplacedAndNoTaskRunsTwice) {
  auto redis = StartRedis();
  ASSERT_NE(redis, nullptr);
  // Leader lease 5 s; workers fence after 14.6 s without contact, well
  // after the takeover.
  const std::vector<std::string> flags = RedisFlags(*redis, {}, "15s");
  Cluster c(flags);
  Process& leader = c.StartServer();
  const uint16_t a = c.port();
  Result<int> free_port = FreePort();
  ASSERT_TRUE(free_port.ok()) << free_port.status().ToString();
  const uint16_t b = static_cast<uint16_t>(*free_port);
  Process standby(ServerOn(c, b, flags, c.dir() + "/standby-access.json"));
  ASSERT_TRUE(standby.WaitForLine("drover: standby; the leader is", In(kStartTimeout)))
      << standby.output();
  const nlohmann::json access = ReadJson(c.access_file());
  Process& worker = c.StartWorker(
      "solo", {"--server", Address(a) + "," + Address(b), "--token", access["token"],
               "--fingerprint", access["fingerprint"], "--cpus", "0"});

  const std::string runs = c.dir() + "/runs.";
  const int kTasks = 6;
  const uint64_t job = SubmittedJob(
      c.Drover(Submit({"--name", "queued", "--array", "0-" + std::to_string(kTasks - 1)},
                      RecordingTask(runs, "sleep 0.3"))));
  ASSERT_GT(job, 0u);
  {
    EventTap tap(c.Api().options(), job);
    ASSERT_TRUE(tap.WaitForTasksIn("running", 1));
  }
  leader.Signal(SIGSTOP);
  ASSERT_TRUE(standby.WaitForLine("drover: listening on " + Address(b), In(seconds(30))))
      << standby.output();
  ASSERT_TRUE(worker.WaitForLine("attached as worker", In(seconds(30)))) << worker.output();

  const std::string b_first = WriteAccess(c, "b-first.json", Address(b) + "," + Address(a));
  RunResult wait = DroverWith(c, b_first, {"wait", std::to_string(job)});
  EXPECT_EQ(wait.status, 0) << wait.output << "\nstandby:\n" << standby.output();

  leader.Signal(SIGCONT);
  std::optional<int> status = leader.Wait(In(seconds(30)));
  ASSERT_TRUE(status.has_value()) << leader.output();
  EXPECT_EQ(*status, 1) << leader.output();
  EXPECT_NE(leader.output().find("no longer the leader"), std::string::npos) << leader.output();

  RunResult final_state = DroverWith(c, b_first, {"status", std::to_string(job), "--json"});
  ASSERT_EQ(final_state.status, 0) << final_state.output;
  nlohmann::json info = nlohmann::json::parse(final_state.output, nullptr, false);
  ASSERT_EQ(info["tasks"].size(), static_cast<size_t>(kTasks)) << final_state.output;
  for (const nlohmann::json& t : info["tasks"]) {
    EXPECT_EQ(t["state"], "succeeded") << t.dump(2);
    EXPECT_EQ(t["attempt"], 1) << "assigned once: " << t.dump(2);
  }
  for (int i = 0; i < kTasks; ++i) {
    EXPECT_EQ(RunsIn(runs + std::to_string(i)), 1) << "task " << i;
  }
}

// `submit --wait` naming one server takes its one-connection path (post,
// then follow on the same connection). Given only a standby, the 307 ends
// that path with nothing submitted, and the command goes the usual way,
// which follows the redirect: one job, on the leader, waited for.
TEST(RedisStandbyTest, SubmitWaitGivenOnlyTheStandbyIsSentToTheLeaderOnce) {
  LeaderAndStandby servers;
  ASSERT_NO_FATAL_FAILURE(StartLeaderAndStandby(&servers));
  Cluster& c = *servers.cluster;
  const uint16_t a = servers.a;
  const uint16_t b = servers.b;
  c.StartWorker("solo");

  const std::string b_only = WriteAccess(c, "b-only.json", Address(b));
  RunResult waited = DroverWith(c, b_only, {"submit", "--wait", "--", "true"});
  ASSERT_EQ(waited.status, 0) << waited.output;
  Result<nlohmann::json> jobs = cli::ApiClient(Only(c, a)).Get("/api/v1/jobs");
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ((*jobs)["jobs"].size(), 1u) << jobs->dump(2);
  const nlohmann::json& job = (*jobs)["jobs"][0];
  EXPECT_EQ(waited.output.substr(0, waited.output.find('\n')), job["id"].dump()) << waited.output;
  Result<nlohmann::json> info =
      cli::ApiClient(Only(c, a)).Get("/api/v1/jobs/" + job["id"].dump());
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  ASSERT_EQ((*info)["tasks"].size(), 1u) << info->dump(2);
  EXPECT_EQ((*info)["tasks"][0]["state"], "succeeded") << info->dump(2);
}

// A standby takes each user's own token, with its role, as the leader does
// (it reads the users file of the shared state directory again when it
// changes): a user added on the leader reads from the standby, a viewer is
// refused an admin route there, and once revoked the user's token is
// refused there too.
TEST(RedisStandbyTest, StandbyTakesUsersTokensAndForgetsRevokedOnes) {
  LeaderAndStandby servers;
  ASSERT_NO_FATAL_FAILURE(StartLeaderAndStandby(&servers));
  Cluster& c = *servers.cluster;
  const uint16_t b = servers.b;
  auto add = [&](const std::string& name, const std::string& role) {
    const std::string path = c.dir() + "/" + name + ".access.json";
    RunResult r = c.Drover({"user", "add", name, "--role", role, "--out", path});
    EXPECT_EQ(r.status, 0) << r.output;
    return ReadJson(path)["token"].get<std::string>();
  };
  const std::string ana = add("ana", "user");
  const std::string vera = add("vera", "viewer");
  auto on_b = [&](const std::string& token, const std::string& path) {
    net::ClientOptions o = Only(c, b);
    o.token = token;
    Result<net::Response> r = net::HttpClient(o).Get(path);
    return r.ok() ? r->status : -1;
  };
  // Fresh once the standby has read the journal (every 250 ms).
  ASSERT_TRUE(Eventually([&] { return on_b(ana, "/api/v1/jobs") == 200; }, milliseconds(10000)))
      << on_b(ana, "/api/v1/jobs");
  EXPECT_EQ(on_b(vera, "/api/v1/jobs"), 200);
  EXPECT_EQ(on_b(vera, "/api/v1/audit"), 403);  // admins only, there too
  EXPECT_EQ(on_b(std::string(64, 'f'), "/api/v1/jobs"), 401);
  EXPECT_EQ(on_b(ReadJson(c.access_file())["token"], "/api/v1/jobs"), 200);  // the cluster's
  RunResult revoke = c.Drover({"user", "revoke", "ana"});
  ASSERT_EQ(revoke.status, 0) << revoke.output;
  EXPECT_EQ(on_b(ana, "/api/v1/jobs"), 401);
}

}  // namespace
}  // namespace drover::testing

// `drover server --redis`: real drover processes on loopback against a
// private redis-server — restart from the journal stream, reconciliation of
// deleted and planted lease keys, and a Redis restart (AOF) mid-run.
#include "tests/redis/redis_server.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "tests/integration/cluster.h"
#include "tests/redis_integration/redis_cluster.h"
#include "tests/redis_integration/redis_client.h"

namespace drover::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr milliseconds kEventWait(20000);

// The one lease key of `task` (lease:{worker}:slot:{task}), with prefix.
std::string SlotKey(RedisClient& cli, const std::string& task) {
  std::vector<std::string> keys = cli.Keys("drover:lease:*:slot:" + task);
  EXPECT_EQ(keys.size(), 1u) << task;
  return keys.empty() ? "" : keys.front();
}

TEST(RedisServerTest, RestartedServerRestoresEveryJobFromRedis) {
  auto redis = StartRedis();
  ASSERT_NE(redis, nullptr);
  Cluster c(RedisFlags(*redis));
  c.StartServer();
  HeldJobs jobs;
  ASSERT_NO_FATAL_FAILURE(StartHeldJobs(c, &jobs));
  c.KillServer(SIGKILL);
  // Nothing was kept on disk: the journal is the Redis stream.
  EXPECT_FALSE(std::filesystem::exists(c.dir() + "/state/store/journal"));
  RedisClient cli(redis->port());
  EXPECT_NE(cli.Run({"XLEN", "drover:journal"}), "0");

  c.StartServer();
  FinishHeldJobs(c, jobs);
  // Every lease was released in the end.
  EXPECT_TRUE(cli.Keys("drover:lease:*").empty())
      << ::testing::PrintToString(cli.Keys("drover:lease:*")) << "\nDEBUG:\n"
      << c.Get("/api/v1/tasks/" + std::to_string(jobs.hold) + ".1").dump(2) << c.Get("/api/v1/tasks/" + std::to_string(jobs.hold) + ".0").dump(2) << cli.Run({"HGETALL", "drover:lease:1:slot:1.1"}) << (c.server()->WaitForLine("zzzz", In(seconds(2))), c.server()->output());
}

TEST(RedisServerTest, ReconciliationRepairsDeletedAndPlantedLeases) {
  auto redis = StartRedis();
  ASSERT_NE(redis, nullptr);
  RedisClient cli(redis->port());
  // Every class of event, for the watcher (the server adds what it needs).
  ASSERT_EQ(cli.Run({"CONFIG", "SET", "notify-keyspace-events", "KEA"}), "OK");
  Cluster c(RedisFlags(*redis, {"--reconcile-interval", "300ms"}));
  c.StartServer();
  c.StartWorker("duo", {"--cpus", "0-1"});
  const std::string go = c.dir() + "/go";
  const std::string runs = c.dir() + "/runs.";
  const uint64_t job =
      SubmittedJob(c.Drover(Submit({"--name", "hold", "--array", "0-1"}, HoldingTask(runs, go))));
  ASSERT_GT(job, 0u);
  const std::string keep = std::to_string(job) + ".0";
  const std::string lose = std::to_string(job) + ".1";
  EventTap tap(c.Api().options(), job);
  ASSERT_TRUE(tap.WaitForTasksIn("running", 2));
  const std::string keep_key = SlotKey(cli, keep);
  const std::string lose_key = SlotKey(cli, lose);
  ASSERT_FALSE(keep_key.empty());
  ASSERT_FALSE(lose_key.empty());
  KeyEvents events(redis->port());

  // Task without lease (its `del` seen): claimed again at once, same owner.
  const std::string owner = cli.Run({"HGET", keep_key, "owner"});
  ASSERT_EQ(cli.Run({"DEL", keep_key}), "1");
  ASSERT_TRUE(events.WaitFor("hset", keep_key, kEventWait)) << c.server()->output();
  EXPECT_EQ(cli.Run({"HGET", keep_key, "owner"}), owner);

  // Task without lease, the deletion unseen (notifications off): the next
  // pass claims it again.
  ASSERT_EQ(cli.Run({"CONFIG", "SET", "notify-keyspace-events", ""}), "OK");
  ASSERT_EQ(cli.Run({"DEL", keep_key}), "1");
  ASSERT_EQ(cli.Run({"CONFIG", "SET", "notify-keyspace-events", "KEA"}), "OK");
  if (cli.Run({"EXISTS", keep_key}) == "0") {
    ASSERT_TRUE(events.WaitFor("hset", keep_key, kEventWait)) << c.server()->output();
  }
  EXPECT_EQ(cli.Run({"HGET", keep_key, "owner"}), owner);

  // Lease without task (as a crashed server's would be): released.
  const std::string planted = "drover:lease:99:gpu:0";
  ASSERT_EQ(cli.Run({"HSET", planted, "owner", "nobody", "ttl", "60000"}), "2");
  ASSERT_EQ(cli.Run({"PEXPIRE", planted, "60000"}), "1");
  ASSERT_TRUE(events.WaitFor("del", planted, kEventWait)) << c.server()->output();

  // Task whose lease someone else holds: killed (no retries: it fails),
  // and the intruder's lease, a lease without task, is released after.
  ASSERT_EQ(cli.Run({"HSET", lose_key, "owner", "intruder"}), "0");
  ASSERT_TRUE(tap.WaitForState(lose, "failed", 1)) << c.server()->output();
  ASSERT_TRUE(events.WaitFor("del", lose_key, kEventWait)) << c.server()->output();

  std::ofstream(go) << "go\n";
  RunResult wait = c.Drover({"wait", std::to_string(job)});
  nlohmann::json t = c.Get("/api/v1/tasks/" + keep);
  EXPECT_EQ(t["state"], "succeeded") << t.dump(2);
  EXPECT_EQ(t["attempt"], 1) << t.dump(2);
  EXPECT_EQ(Lines(runs + "0"), std::vector<std::string>{"run"});
  EXPECT_EQ(Lines(runs + "1"), std::vector<std::string>{"run"});
  EXPECT_EQ(c.Get("/api/v1/tasks/" + lose)["state"], "failed");
}

TEST(RedisServerTest, RedisRestartedMidRunLosesNothingAndRunsNothingTwice) {
  auto redis = StartRedis({"--appendonly", "yes", "--appendfsync", "always"});
  ASSERT_NE(redis, nullptr);
  // The outage must stay shorter than the leader lease (5 s).
  Cluster c(RedisFlags(*redis, {}, "15s"));
  c.StartServer();
  Process& duo = c.StartWorker("duo", {"--cpus", "0-1"});
  const std::string runs = c.dir() + "/runs.";
  const int kTasks = 16;
  const uint64_t job =
      SubmittedJob(c.Drover(Submit({"--name", "many", "--array", "0-" + std::to_string(kTasks - 1)},
                                   RecordingTask(runs, "sleep 0.2"))));
  ASSERT_GT(job, 0u);
  {
    EventTap tap(c.Api().options(), job);
    // Mid-run: some done, two running, the rest queued.
    ASSERT_TRUE(tap.WaitForTasksIn("succeeded", 3));
  }
  ASSERT_TRUE(redis->Restart().ok());
  ASSERT_TRUE(c.server()->WaitForLine("redis: reconnected", In(seconds(30))))
      << c.server()->output();
  RunResult wait = c.Drover({"wait", std::to_string(job)});
  EXPECT_EQ(wait.status, 0) << wait.output << "\nserver:\n" << c.server()->output();
  for (int i = 0; i < kTasks; ++i) {
    EXPECT_EQ(Lines(runs + std::to_string(i)), std::vector<std::string>{"run"}) << "task " << i;
  }

  // Nothing lost from the journal either: a restarted server agrees once
  // the worker is back. (The last end may not be durable yet when `wait`
  // returns: events go out before their records are, and the worker keeps
  // each result until the server acknowledges it as durable, so it reports
  // it again on re-attaching; it logs the attachment after the server
  // handled that report.)
  c.KillServer(SIGKILL);
  c.StartServer();
  ASSERT_TRUE(duo.WaitForLine("attached as worker", In(kStartTimeout))) << duo.output();
  nlohmann::json info = c.Get("/api/v1/jobs/" + std::to_string(job));
  ASSERT_EQ(info["tasks"].size(), static_cast<size_t>(kTasks)) << info.dump(2);
  for (const nlohmann::json& t : info["tasks"]) EXPECT_EQ(t["state"], "succeeded") << t.dump(2);
}

// Two `drover server --redis` on one state directory (token, certificate
// and server-id shared, as standbys on other hosts would have them copied)
// and one port: the standby waits for the leader lease; kill -9 of the
// leader with 200 short tasks in flight; the standby takes over, the worker
// re-attaches, every task ends succeeded and ran exactly once.
TEST(RedisServerTest, StandbyTakesOverFromAKilledLeaderAndEveryTaskRunsOnce) {
  auto redis = StartRedis();
  ASSERT_NE(redis, nullptr);
  const std::vector<std::string> flags = RedisFlags(*redis, {}, "9s");
  Cluster c(flags);
  c.StartServer();
  std::vector<std::string> argv = {c.binary(),     "server",           "--bind",
                                   "127.0.0.1",    "--port",           std::to_string(c.port()),
                                   "--state-dir",  c.dir() + "/state", "--access-file",
                                   c.access_file()};
  argv.insert(argv.end(), flags.begin(), flags.end());
  Process standby(argv);
  ASSERT_TRUE(standby.WaitForLine("drover: standby; the leader is", In(kStartTimeout)))
      << standby.output();
  c.StartWorker("duo", {"--cpus", "0-1"});
  const std::string runs = c.dir() + "/runs.";
  const int kTasks = 200;
  const uint64_t job =
      SubmittedJob(c.Drover(Submit({"--name", "many", "--array", "0-" + std::to_string(kTasks - 1)},
                                   RecordingTask(runs, "sleep 0.05"))));
  ASSERT_GT(job, 0u);
  {
    EventTap tap(c.Api().options(), job);
    ASSERT_TRUE(tap.WaitForTasksIn("succeeded", 30));
  }
  const auto killed = std::chrono::steady_clock::now();
  c.KillServer(SIGKILL);
  ASSERT_TRUE(standby.WaitForLine("drover: listening on 127.0.0.1:", In(seconds(30))))
      << standby.output();
  const auto takeover =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - killed);
  std::cout << "takeover: " << takeover.count() << " ms after kill -9 (leader ttl 3000 ms)"
            << std::endl;
  EXPECT_LE(takeover, milliseconds(3000 + 1000 + 2000))  // TTL + 1 s + start under load
      << standby.output();

  RunResult wait = c.Drover({"wait", std::to_string(job)});
  EXPECT_EQ(wait.status, 0) << wait.output << "\nstandby:\n" << standby.output();
  nlohmann::json info = c.Get("/api/v1/jobs/" + std::to_string(job));
  ASSERT_EQ(info["tasks"].size(), static_cast<size_t>(kTasks)) << info.dump(2);
  int twice = 0;
  for (const nlohmann::json& t : info["tasks"]) {
    EXPECT_EQ(t["state"], "succeeded") << t.dump(2);
    const std::string index = std::to_string(t["array_index"].get<int64_t>());
    twice += Lines(runs + index).size() != 1;
  }
  EXPECT_EQ(twice, 0) << "tasks that did not run exactly once";
}

// A leader paused past its lease (SIGSTOP) while a standby takes over:
// woken (SIGCONT), its first renewal, claim or append is refused by the
// leader check and it steps down — exit status 1 — instead of going on.
TEST(RedisServerTest, PausedLeaderStepsDownWhenItWakes) {
  auto redis = StartRedis();
  ASSERT_NE(redis, nullptr);
  const std::vector<std::string> flags = RedisFlags(*redis, {}, "3s");
  Cluster c(flags);
  Process& leader = c.StartServer();
  c.StartWorker("solo", {"--cpus", "0"});
  const std::string go = c.dir() + "/go";
  const std::string runs = c.dir() + "/runs.";
  const uint64_t job =
      SubmittedJob(c.Drover(Submit({"--name", "hold", "--array", "0-3"}, HoldingTask(runs, go))));
  ASSERT_GT(job, 0u);
  {
    EventTap tap(c.Api().options(), job);
    ASSERT_TRUE(tap.WaitForTasksIn("running", 1));
  }
  // The standby listens elsewhere: the paused leader keeps its port.
  std::vector<std::string> argv = {c.binary(),      "server",
                                   "--bind",        "127.0.0.1",
                                   "--port",        "0",
                                   "--state-dir",   c.dir() + "/state",
                                   "--access-file", c.dir() + "/standby-access.json"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  Process standby(argv);
  ASSERT_TRUE(standby.WaitForLine("drover: standby; the leader is", In(kStartTimeout)))
      << standby.output();
  RedisClient cli(redis->port());
  const std::string leader_id = cli.Run({"HGET", "drover:leader", "owner"});

  leader.Signal(SIGSTOP);
  ASSERT_TRUE(standby.WaitForLine("drover: listening on 127.0.0.1:", In(seconds(30))))
      << standby.output();
  const std::string new_leader = cli.Run({"HGET", "drover:leader", "owner"});
  EXPECT_NE(new_leader, leader_id);

  leader.Signal(SIGCONT);
  std::optional<int> status = leader.Wait(In(seconds(30)));
  ASSERT_TRUE(status.has_value()) << leader.output();
  EXPECT_EQ(*status, 1) << leader.output();
  EXPECT_NE(leader.output().find("no longer the leader"), std::string::npos) << leader.output();
  EXPECT_EQ(cli.Run({"HGET", "drover:leader", "owner"}), new_leader);
  std::ofstream(go) << "go\n";
}

}  // namespace
}  // namespace drover::testing

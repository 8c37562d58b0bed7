// A worker's re-attach is the truth about it: a
// worker killed and started again under its name, and `drover up`
// restarted, get their lost tasks back at once, not at lease expiry; and
// what a process with only the cluster token may claim in its hello (18.6).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <iostream>
#include <mutex>
#include <thread>

#include "cluster.h"
#include "net/event_loop.h"
#include "net/ws_client.h"
#include "proto/messages.h"

namespace drover::testing {
namespace {

using Clock = std::chrono::steady_clock;

// A task whose first attempt records its pid and holds (exec sleep 120);
// any later attempt ends at once with "attempt N" as its result.
std::vector<std::string> FirstAttemptHolds(const std::string& pids) {
  return {"sh", "-c",
          "if [ \"$DROVER_ATTEMPT\" = 1 ]; then echo $$ >> " + pids +
              "; exec sleep 120; fi; echo attempt $DROVER_ATTEMPT > \"$DROVER_RESULT\""};
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The default lease TTL (30 s): without the re-attach rule the task would
// read "running" until its lease expired at the earliest (or forever while
// the worker renews it), so finishing within this bound proves the rule.
constexpr std::chrono::seconds kWellUnderTheTtl(10);

TEST(ReattachTest, AWorkerKilledAndStartedAgainUnderItsNameGetsItsTaskBackAtOnce) {
  Cluster c;  // default timing: heartbeat 2 s, lease TTL 30 s
  c.StartServer();
  Process& first = c.StartWorker("w1", {"--cpus", "0"});
  const std::string pids = c.dir() + "/pids";
  const uint64_t job =
      SubmittedJob(c.Drover(Submit({"--name", "victim"}, FirstAttemptHolds(pids))));
  ASSERT_GT(job, 0u);
  const std::string task = std::to_string(job) + ".0";
  EventTap tap(c.Api().options(), job);
  ASSERT_TRUE(tap.WaitForState(task, "running", 1));

  first.Signal(SIGKILL);
  ASSERT_TRUE(first.Wait(In(kStartTimeout)).has_value());
  c.StartWorker("w1", {"--cpus", "0"});  // returns once it attached
  const Clock::time_point attached = Clock::now();
  const bool done = tap.WaitFor(
      [&](const std::vector<cli::TaskEventView>& events) {
        for (const auto& e : events) {
          if (e.task == task && e.to == "succeeded") return true;
        }
        return false;
      },
      kWellUnderTheTtl);
  const double took = Seconds(Clock::now() - attached);
  KillRecorded(pids);
  ASSERT_TRUE(done) << "still not done " << kWellUnderTheTtl.count()
                    << " s after the re-attach: " << c.Get("/api/v1/tasks/" + task).dump(2)
                    << "\nserver:\n"
                    << c.server()->output();
  std::cout << "re-attach -> succeeded (attempt 2): " << took << " s\n";
  nlohmann::json t = c.Get("/api/v1/tasks/" + task);
  EXPECT_EQ(t["attempt"], 2) << t.dump(2);
  EXPECT_EQ(t["outcome"]["result"], "attempt 2\n") << t.dump(2);
}

TEST(ReattachTest, DroverUpRestartedRunsItsLostTasksAtOnce) {
  Cluster c;
  const std::string state = c.dir() + "/state";
  const std::vector<std::string> argv = {c.binary(),      "up",
                                         "--workers",     "2",
                                         "--port",        "0",
                                         "--state-dir",   state,
                                         "--access-file", c.access_file(),
                                         "--isolation",   "none"};
  const std::string pids = c.dir() + "/pids";
  uint64_t job = 0;
  {
    Process up(argv);
    ASSERT_TRUE(up.WaitForLine("drover: listening on", In(kStartTimeout))) << up.output();
    job = SubmittedJob(
        c.Drover(Submit({"--name", "held", "--array", "0-1"}, FirstAttemptHolds(pids))));
    ASSERT_GT(job, 0u);
    EventTap tap(c.Api().options(), job);
    ASSERT_TRUE(tap.WaitForTasksIn("running", 2));
    // A submission is answered once its record is durable, and records
    // become durable in order: after this, both assignments are too (else
    // the restart would see the tasks queued, which is another case).
    ASSERT_GT(SubmittedJob(c.Drover({"submit", "--name", "barrier", "--", "true"})), 0u);
    up.Signal(SIGKILL);
    ASSERT_TRUE(up.Wait(In(kStartTimeout)).has_value());
  }
  Process up(argv);
  ASSERT_TRUE(up.WaitForLine("drover: listening on", In(kStartTimeout))) << up.output();
  const Clock::time_point back = Clock::now();
  EventTap tap(c.Api().options(), job);
  const bool done = tap.WaitFor(
      [&](const std::vector<cli::TaskEventView>& events) {
        size_t succeeded = 0;
        for (const auto& e : events) succeeded += e.to == "succeeded" ? 1 : 0;
        return succeeded == 2;
      },
      kWellUnderTheTtl);
  const double took = Seconds(Clock::now() - back);
  KillRecorded(pids);
  ASSERT_TRUE(done) << "not done " << kWellUnderTheTtl.count() << " s after the restart: "
                    << c.Get("/api/v1/jobs/" + std::to_string(job)).dump(2) << "\n"
                    << up.output();
  std::cout << "drover up restart -> both tasks succeeded (attempt 2): " << took << " s\n";
  for (int i = 0; i < 2; ++i) {
    nlohmann::json t = c.Get("/api/v1/tasks/" + std::to_string(job) + "." + std::to_string(i));
    EXPECT_EQ(t["attempt"], 2) << t.dump(2);
  }
  up.Signal(SIGTERM);
  EXPECT_EQ(up.Wait(In(kStartTimeout)), 0) << up.output();
}

// A worker restarted with another size takes the new offer at once, and
// `drover workers` flags the change.
TEST(ReattachTest, AWorkerRestartedWithAnotherSizeIsTakenAtItsNewSize) {
  Cluster c;
  c.StartServer();
  Process& first = c.StartWorker("gA", {"--cpus", "0"});
  first.Signal(SIGKILL);
  ASSERT_TRUE(first.Wait(In(kStartTimeout)).has_value());
  c.StartWorker("gA", {"--cpus", "0-1"});
  nlohmann::json workers = c.Get("/api/v1/workers");
  ASSERT_EQ(workers["workers"].size(), 1u) << workers.dump(2);
  EXPECT_EQ(workers["workers"][0]["cpu_cores"], nlohmann::json::array({0, 1})) << workers.dump(2);
  EXPECT_EQ(workers["workers"][0]["offer_changes"], 1) << workers.dump(2);
  RunResult listed = c.Drover({"workers"});
  EXPECT_EQ(listed.status, 0) << listed.output;
  EXPECT_NE(listed.output.find("offer changed"), std::string::npos) << listed.output;
  EXPECT_NE(listed.output.find("2/2 free"), std::string::npos) << listed.output;
}

// --- hostile hellos --------------------------------------------------------

// One hello sent on the worker channel with the cluster token, over a raw
// WebSocket; the server's first answer (or "closed: ..." / "timeout").
std::string AnswerTo(const net::ClientOptions& options, const std::string& hello) {
  net::EventLoop loop;
  std::mutex mu;
  std::condition_variable cv;
  std::string answer;
  std::shared_ptr<net::WsSession> session;
  auto answered = [&](std::string text) {
    std::lock_guard<std::mutex> lock(mu);
    if (answer.empty()) answer = std::move(text);
    cv.notify_all();
  };
  net::ConnectWebSocket(
      loop, options, "/api/v1/worker", [&](Result<std::shared_ptr<net::WsSession>> s) {
        if (!s.ok()) return answered("connect failed: " + s.status().ToString());
        session = *s;
        session->OnText([&](std::string text) { answered(std::move(text)); });
        session->OnClose([&](const Status& why) { answered("closed: " + why.ToString()); });
        session->SendText(hello);
      });
  std::thread thread([&] { loop.Run(); });
  {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, kStartTimeout, [&] { return !answer.empty(); })) answer = "timeout";
  }
  loop.Post([&] {
    if (session) session->Close("test over");
    session.reset();
    loop.Stop();
  });
  thread.join();
  return answer;
}

// A hello as a worker named `name` with identity `key` and one core.
proto::Hello MakeHello(const std::string& name, const std::string& key) {
  proto::Hello hello;
  hello.worker_name = name;
  hello.key = key;
  hello.resources.name = name;
  hello.resources.cpu_cores = {0};
  hello.resources.mem_bytes = 1ull << 30;
  return hello;
}

std::string Encoded(const proto::Hello& hello) {
  return proto::Encode(proto::WorkerMessage{hello});
}

TEST(ReattachTest, AHelloWithTheTokenCannotTakeANameForgeResultsOrClaimAbsurdResources) {
  Cluster c;
  c.StartServer();
  c.StartWorker("real", {"--cpus", "0"});
  // A queued task no worker here can run (four cores).
  const uint64_t job =
      SubmittedJob(c.Drover({"submit", "--name", "target", "--cpus", "4", "--", "true"}));
  ASSERT_GT(job, 0u);
  const std::string task = std::to_string(job) + ".0";
  const net::ClientOptions options = c.Api().options();
  const std::string key(64, 'e');

  // 1. Another key for an attached worker's name: refused, and the real
  // worker keeps its connection.
  std::string answer = AnswerTo(options, Encoded(MakeHello("real", key)));
  EXPECT_NE(answer.find("permission_denied"), std::string::npos) << answer;
  EXPECT_NE(answer.find("belongs to another worker"), std::string::npos) << answer;
  nlohmann::json workers = c.Get("/api/v1/workers");
  ASSERT_EQ(workers["workers"].size(), 1u) << workers.dump(2);
  EXPECT_FALSE(workers["workers"][0]["lost"].get<bool>()) << workers.dump(2);

  // 2. Absurd resources: a thousand GPUs, a million cores.
  proto::Hello big = MakeHello("big", key);
  for (uint32_t i = 0; i < 1000; ++i) {
    big.resources.gpus.push_back(
        core::GpuDevice{i, "GPU-" + std::to_string(i), "A100", 80ull << 30});
  }
  answer = AnswerTo(options, Encoded(big));
  EXPECT_NE(answer.find("1000 GPUs; at most 64"), std::string::npos) << answer;
  big = MakeHello("big", key);
  for (uint32_t i = 0; i < 1'000'000; ++i) big.resources.cpu_cores.push_back(i + 1);
  answer = AnswerTo(options, Encoded(big));
  EXPECT_NE(answer.find("cores; at most 4096"), std::string::npos) << answer;

  // 3. A finished attempt 7 of the queued task, never given to it.
  proto::Hello forger = MakeHello("forger", key);
  forger.finished.push_back(proto::FinishedTask{TaskId{job, 0}, 7, {}, TimeFromMicros(1)});
  answer = AnswerTo(options, Encoded(forger));
  EXPECT_NE(answer.find("hello_ack"), std::string::npos) << answer;
  nlohmann::json t = c.Get("/api/v1/tasks/" + task);
  EXPECT_EQ(t["state"], "queued") << t.dump(2);
  EXPECT_EQ(c.Get("/api/v1/workers")["workers"].size(), 2u) << "real and forger, not big";
}

}  // namespace
}  // namespace drover::testing

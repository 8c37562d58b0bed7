// Checkpoints that follow a task (docs/design.md, "Data plane"):
// a worker saves $DROVER_CHECKPOINT_DIR to the server's file store while
// the task runs (--checkpoint-every) and when an attempt ends, and the next
// attempt, on any worker, starts from the latest saved set.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cluster.h"
#include "net/http_client.h"

namespace drover::testing {
namespace {

// The content of checkpoint file `name` of `task` as the server holds it
// (GET /api/v1/files/{sha256}); nullopt while there is none.
std::optional<std::string> SavedFile(Cluster& c, const std::string& task, const std::string& name) {
  const nlohmann::json t = c.Get("/api/v1/tasks/" + task);
  const nlohmann::json checkpoint = t.value("checkpoint", nlohmann::json());
  if (!checkpoint.is_object()) return std::nullopt;
  for (const nlohmann::json& f : checkpoint["files"]) {
    if (f["name"] != name) continue;
    net::HttpClient http(c.Api().options());
    Result<net::Response> got = http.Get("/api/v1/files/" + f["sha256"].get<std::string>());
    if (!got.ok() || got->status != 200) return std::nullopt;
    return got->body;
  }
  return std::nullopt;
}

// Polls the server until `pred` holds (at most kJobTimeout).
bool Eventually(const std::function<bool()>& pred) {
  const auto deadline = std::chrono::steady_clock::now() + kJobTimeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Counts to 60, one step per 0.2 s, keeping the step in
// $DROVER_CHECKPOINT_DIR/step (written atomically); starts from the saved
// step, and says where it started in its result. Its process group's id
// goes to <dir>/pid-<attempt>.
std::string Counter(const std::string& dir) {
  return "d=\"$DROVER_CHECKPOINT_DIR\"; s=0; [ -f \"$d/step\" ] && s=$(cat \"$d/step\"); "
         "start=$s; echo $$ > " +
         dir + "/pid.tmp && mv " + dir + "/pid.tmp " + dir +
         "/pid-$DROVER_ATTEMPT; "
         "while [ $s -lt 60 ]; do s=$((s+1)); echo $s > \"$d/step.tmp\"; "
         "mv \"$d/step.tmp\" \"$d/step\"; sleep 0.2; done; "
         "echo start=$start > \"$DROVER_RESULT\"";
}

// The acceptance scenario: the worker and the task's process tree are
// killed (-9) mid-run; the retry, on the other worker, resumes from the
// step the first worker saved while the task ran.
TEST(CheckpointTest, AKilledWorkersTaskResumesOnAnotherFromTheSavedStep) {
  Cluster c(kFastLoss);
  c.StartServer();
  Process& w1 = c.StartWorker("w1", {"--checkpoint-every", "200ms"});
  const uint64_t job = Post(c, {{"name", "counter"},
                                {"task",
                                 {{{"id", "count"},
                                   {"command", {"sh", "-c", Counter(c.dir())}},
                                   {"retries", 2},
                                   {"retry_backoff", "100ms"}}}}});
  ASSERT_GT(job, 0u);
  const std::string task = std::to_string(job) + ".0";
  // The server holds a saved step of 3 or more (read back from its store).
  ASSERT_TRUE(Eventually([&] {
    std::optional<std::string> step = SavedFile(c, task, "step");
    return step && std::atoi(step->c_str()) >= 3;
  })) << c.Get("/api/v1/tasks/" + task).dump(2)
      << w1.output();
  const nlohmann::json saved = c.Get("/api/v1/tasks/" + task)["checkpoint"];
  EXPECT_EQ(saved["attempt"], 1) << saved.dump(2);
  RunResult status = c.Drover({"status", task});
  EXPECT_NE(status.output.find("checkpoint (attempt 1"), std::string::npos) << status.output;

  c.StartWorker("w2", {"--checkpoint-every", "200ms"});
  const pid_t group = std::atoi(ReadText(c.dir() + "/pid-1").c_str());
  ASSERT_GT(group, 0);
  w1.Signal(SIGKILL);
  ::kill(-group, SIGKILL);
  ASSERT_TRUE(w1.Wait(In(kStartTimeout)).has_value());

  RunResult wait = c.Drover({"wait", std::to_string(job)});
  const nlohmann::json t = c.Get("/api/v1/tasks/" + task);
  ASSERT_EQ(wait.status, 0) << wait.output << t.dump(2);
  EXPECT_EQ(t["state"], "succeeded") << t.dump(2);
  EXPECT_GE(t["attempt"].get<int>(), 2) << t.dump(2);
  const std::string result = t["outcome"]["result"];
  ASSERT_TRUE(result.starts_with("start=")) << t.dump(2);
  const int start = std::atoi(result.c_str() + 6);
  EXPECT_GE(start, 3) << t.dump(2);
  EXPECT_LT(start, 60) << t.dump(2);
  const nlohmann::json& attempts = t["attempts"];
  ASSERT_GE(attempts.size(), 2u) << t.dump(2);
  EXPECT_NE(attempts[0]["worker"], attempts.back()["worker"]) << t.dump(2);
}

// An attempt that fails (exit 1) saves its checkpoint as it ends; the
// retry, placed on the other worker (the first one drained), sees it.
// Neither worker saves while tasks run (--checkpoint-every 0).
TEST(CheckpointTest, AFailedAttemptsCheckpointReachesTheRetryElsewhere) {
  Cluster c;
  c.StartServer();
  c.StartWorker("a", {"--checkpoint-every", "0"});
  c.StartWorker("b", {"--checkpoint-every", "0"});
  const std::string go = c.dir() + "/go";
  const std::string dir = c.dir();
  const std::string script =
      "d=\"$DROVER_CHECKPOINT_DIR\"; "
      "if [ \"$DROVER_ATTEMPT\" = 1 ]; then mkdir -p \"$d/sub\"; "
      "echo from-attempt-1 > \"$d/sub/state\"; echo $$ > " +
      dir + "/pid.tmp && mv " + dir + "/pid.tmp " + dir + "/pid-1; while [ ! -f " + go +
      " ]; do sleep 0.05; done; exit 1; fi; "
      "cat \"$d/sub/state\" > \"$DROVER_RESULT\"; echo again >> \"$d/sub/state\"";
  const uint64_t job = Post(c, {{"name", "flaky"},
                                {"task",
                                 {{{"id", "flaky"},
                                   {"command", {"sh", "-c", script}},
                                   {"retries", 1},
                                   {"retry_backoff", "100ms"}}}}});
  ASSERT_GT(job, 0u);
  const std::string task = std::to_string(job) + ".0";
  ASSERT_TRUE(Eventually([&] { return std::filesystem::exists(dir + "/pid-1"); }));
  const nlohmann::json running = c.Get("/api/v1/tasks/" + task);
  const uint64_t first = running["worker"].get<uint64_t>();
  ASSERT_TRUE(c.Api().Post("/api/v1/workers/" + std::to_string(first) + "/drain").ok());
  std::ofstream(go) << "go";

  RunResult wait = c.Drover({"wait", std::to_string(job)});
  const nlohmann::json t = c.Get("/api/v1/tasks/" + task);
  ASSERT_EQ(wait.status, 0) << wait.output << t.dump(2);
  EXPECT_EQ(t["outcome"]["result"], "from-attempt-1\n") << t.dump(2);
  EXPECT_EQ(t["attempt"], 2) << t.dump(2);
  EXPECT_NE(t["worker"].get<uint64_t>(), first) << t.dump(2);
  // The manifest names the file under its directory, saved by attempt 1.
  const nlohmann::json& checkpoint = t["checkpoint"];
  ASSERT_TRUE(checkpoint.is_object()) << t.dump(2);
  EXPECT_EQ(checkpoint["attempt"], 1);
  EXPECT_EQ(checkpoint["files"][0]["name"], "sub/state");
}

}  // namespace
}  // namespace drover::testing

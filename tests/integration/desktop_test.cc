// Idle-desktop mode with real processes: a worker whose owner's input is a
// file the test touches (--idle-source file:PATH). The owner's return
// freezes the running task at once and stops the server from placing
// more there; a quiet owner gets the task resumed; an owner who stays gets
// it vacated (its vacate signal, so it saves a checkpoint), requeued without
// using a retry, and resumed from that checkpoint when the owner leaves.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cluster.h"

namespace drover::testing {
namespace {

// The state letter of /proc/PID/status ("S", "T", "D", ...); "" when gone.
std::string ProcState(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("State:", 0) == 0) {
      const size_t at = line.find_first_not_of(" \t", 6);
      return at == std::string::npos ? "" : line.substr(at, 1);
    }
  }
  return "";
}

// Polls `pred` until it holds or `timeout` passes (a condition with a
// deadline, not a sleep standing in for one).
template <typename Pred>
bool Eventually(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

// The owner touches the keyboard: the file's modification time is now.
void OwnerInput(const std::string& path) {
  std::ofstream(path, std::ios::app) << "x";
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), nullptr, 0), 0);
}

// The first line of a file; "" if there is none yet.
std::string FirstLine(const std::string& path) {
  std::vector<std::string> lines = Lines(path);
  return lines.empty() ? "" : lines[0];
}

// A task that writes its pid to DIR/pid, and with a checkpoint left by an
// earlier attempt says so in its result and ends; otherwise it runs until
// DIR/go exists, saving a checkpoint when SIGUSR1 asks it to leave.
// Submitted through the API; returns the job id (0 on failure).
uint64_t SubmitDeskJob(Cluster& c) {
  const std::string dir = c.dir();
  const std::string script =
      "echo $$ > " + dir +
      "/pid\n"
      "if [ -f \"$DROVER_CHECKPOINT_DIR/step\" ]; then\n"
      "  echo \"resumed at step $(cat \"$DROVER_CHECKPOINT_DIR/step\")\" > \"$DROVER_RESULT\"\n"
      "  exit 0\n"
      "fi\n"
      "trap 'echo 42 > \"$DROVER_CHECKPOINT_DIR/step\"; exit 3' USR1\n"
      "while [ ! -e " +
      dir + "/go ]; do sleep 0.02; done\n";
  const nlohmann::json spec = {{"name", "desk"},
                               {"task",
                                {{{"id", "sim"},
                                  {"vacate_signal", "SIGUSR1"},
                                  {"vacate_grace", "20s"},
                                  {"command", script}}}}};
  Result<nlohmann::json> posted = c.Api().Post("/api/v1/jobs", spec.dump());
  EXPECT_TRUE(posted.ok()) << posted.status().ToString();
  return posted.ok() ? (*posted)["id"].get<uint64_t>() : 0;
}

TEST(DesktopTest, TheOwnersReturnFreezesTheTaskAndAQuietOwnerGetsItResumed) {
  Cluster c;
  c.StartServer();
  const std::string owner = c.dir() + "/owner";
  // Only the owner file counts: the load of the tests that run beside this
  // one must not look like an owner at the machine.
  Process& ws = c.StartWorker(
      "ws", {"--desktop", "--idle-source", "file:" + owner, "--idle-after", "1s", "--resume-after",
             "500ms", "--suspend-for", "1h", "--max-outside-load", "1000"});
  ASSERT_TRUE(ws.WaitForLine("owner away for 1s: offering work", In(kStartTimeout))) << ws.output();
  // The server hears it on the same connection before anything placed
  // after this line: `drover workers` says so.
  ASSERT_TRUE(Eventually([&] {
    return c.Drover({"workers"}).output.find("ready (owner away, since") != std::string::npos;
  }));
  const uint64_t job = SubmitDeskJob(c);
  ASSERT_GT(job, 0u);
  const std::string task = std::to_string(job) + ".0";
  EventTap tap(c.Api().options(), job);
  ASSERT_TRUE(tap.WaitForState(task, "running", 1));
  ASSERT_TRUE(Eventually([&] { return !FirstLine(c.dir() + "/pid").empty(); }));
  const std::string pid = FirstLine(c.dir() + "/pid");

  // Stopped where it is: SIGSTOP without a cgroup freezer (this cluster's
  // workers run with --isolation none). The owner keeps typing until the
  // test has seen it, so a loaded machine cannot hide the stop.
  ASSERT_TRUE(Eventually([&] {
    OwnerInput(owner);
    return ProcState(pid) == "T";
  })) << ProcState(pid);
  ASSERT_TRUE(ws.WaitForLine("tasks frozen", In(kStartTimeout))) << ws.output();
  RunResult workers = c.Drover({"workers"});
  EXPECT_NE(workers.output.find("paused (owner present; offers work after 1s idle, since"),
            std::string::npos)
      << workers.output;
  // Quiet for --resume-after: it goes on, and ends normally.
  ASSERT_TRUE(Eventually([&] { return ProcState(pid) != "T"; })) << ProcState(pid);
  std::ofstream(c.dir() + "/go") << "go\n";
  ASSERT_TRUE(tap.WaitForState(task, "succeeded", 1));
  // The worker's freeze time reaches the server's metrics.
  Result<std::string> metrics = c.Api().GetText("/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();
  EXPECT_NE(metrics->find("drover_owner_freeze_seconds_count 1\n"), std::string::npos) << *metrics;
}

TEST(DesktopTest, AnOwnerWhoStaysGetsTheTaskVacatedAndItResumesFromItsCheckpoint) {
  Cluster c;
  c.StartServer();
  const std::string owner = c.dir() + "/owner";
  // Vacated 1.5 s after the owner's input; offering again 4 s after it.
  Process& ws = c.StartWorker(
      "ws", {"--desktop", "--idle-source", "file:" + owner, "--idle-after", "4s", "--resume-after",
             "1h", "--suspend-for", "1500ms", "--max-outside-load", "1000"});
  ASSERT_TRUE(ws.WaitForLine("offering work", In(kStartTimeout))) << ws.output();
  const uint64_t job = SubmitDeskJob(c);
  ASSERT_GT(job, 0u);
  const std::string task = std::to_string(job) + ".0";
  EventTap tap(c.Api().options(), job);
  ASSERT_TRUE(tap.WaitForState(task, "running", 1));
  ASSERT_TRUE(Eventually([&] { return !FirstLine(c.dir() + "/pid").empty(); }));
  const std::string pid = FirstLine(c.dir() + "/pid");

  OwnerInput(owner);
  // Frozen, as the worker says (the stop lasts only --suspend-for: on a
  // loaded machine a poll of its state could miss it).
  ASSERT_TRUE(ws.WaitForLine("tasks frozen", In(kStartTimeout))) << ws.output();
  // Vacated: SIGUSR1, the checkpoint saved, back to the queue; resumed
  // from the checkpoint once the owner is away again (attempt 2).
  ASSERT_TRUE(tap.WaitForState(task, "queued", 1));
  ASSERT_TRUE(tap.WaitForState(task, "succeeded", 2));
  nlohmann::json t = c.Get("/api/v1/tasks/" + task);
  EXPECT_EQ(t["attempt"], 2) << t.dump(2);
  EXPECT_EQ(t["outcome"]["result"], "resumed at step 42\n") << t.dump(2);
  RunResult status = c.Drover({"status", task});
  EXPECT_NE(status.output.find("preempted: owner returned on ws"), std::string::npos)
      << status.output;
  EXPECT_EQ(status.output.find("retry"), std::string::npos) << "a vacated attempt used a retry:\n"
                                                            << status.output;
  nlohmann::json attempts = t["attempts"];
  ASSERT_EQ(attempts.size(), 2u) << t.dump(2);
  EXPECT_EQ(attempts[0]["state"], "preempted") << t.dump(2);
}

}  // namespace
}  // namespace drover::testing

// Faults with real processes: a worker killed mid-task, the server killed
// mid-run and restarted, a journal with a torn tail.
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include <gtest/gtest.h>

#include "cluster.h"

namespace drover::testing {
namespace {

TEST(RecoveryTest, WorkerKilledMidTaskTaskRunsAgainElsewhereWithAttempt2) {
  Cluster c(kFastLoss);
  c.StartServer();
  Process& first = c.StartWorker("first");
  const std::string pids = c.dir() + "/pids";
  // Attempt 1 blocks (recording its pid so the orphan can be cleaned up);
  // attempt 2 succeeds at once.
  const uint64_t job = SubmittedJob(c.Drover(
      {"submit", "--name", "victim", "--", "sh", "-c",
       "if [ \"$DROVER_ATTEMPT\" = 1 ]; then echo $$ >> " + pids +
           "; exec sleep 120; fi; echo attempt $DROVER_ATTEMPT > \"$DROVER_RESULT\""}));
  ASSERT_GT(job, 0u);
  const std::string task = std::to_string(job) + ".0";
  EventTap tap(c.Api().options(), job);
  ASSERT_TRUE(tap.WaitForState(task, "running", 1));

  c.StartWorker("second");
  first.Signal(SIGKILL);
  ASSERT_TRUE(first.Wait(In(kStartTimeout)).has_value());

  RunResult wait = c.Drover({"wait", std::to_string(job)});
  KillRecorded(pids);
  EXPECT_EQ(wait.status, 0) << wait.output;
  nlohmann::json t = c.Get("/api/v1/tasks/" + task);
  EXPECT_EQ(t["state"], "succeeded") << t.dump(2);
  EXPECT_EQ(t["attempt"], 2) << t.dump(2);
  EXPECT_EQ(t["outcome"]["result"], "attempt 2\n") << t.dump(2);
  nlohmann::json workers = c.Get("/api/v1/workers");
  for (const nlohmann::json& w : workers["workers"]) {
    if (w["name"] == "second") {
      EXPECT_EQ(t["worker"], w["id"]) << workers.dump(2);
    }
  }
}

TEST(RecoveryTest, ServerKilledMidRunRestoresJobsAndReattachesRunningTasks) {
  // An outage shorter than the lease TTL loses nothing and reruns nothing
  // (DESIGN.md section 4); a TTL far above a restart on a loaded machine
  // keeps this test about that case, not about fencing.
  Cluster c({"--heartbeat", "500ms", "--lease-ttl", "20s"});
  c.StartServer();
  HeldJobs jobs;
  ASSERT_NO_FATAL_FAILURE(StartHeldJobs(c, &jobs));
  c.KillServer(SIGKILL);
  c.StartServer();
  // Both jobs come back from the journal; the running task is re-attached.
  FinishHeldJobs(c, jobs);
}

// Assignments go to workers before their records are durable. The test hook
// DROVER_TEST_FREEZE_JOURNAL stops the journal once its file exists, so
// every assignment and result after that is lost with the server's kill -9:
// the restarted server must adopt what the worker reports (results of
// attempts it never saw assigned, attempts still running on their own
// cores) and run nothing twice.
TEST(RecoveryTest, AssignmentsTheJournalNeverSawAreAdoptedAfterAServerCrash) {
  // Without queue-ahead, so that the assignments of 2-5 are made after the
  // freeze (queue_ahead_test.cc covers a restart with tasks queued ahead).
  Cluster c({"--heartbeat", "500ms", "--lease-ttl", "20s", "--no-queue-ahead"});
  const std::string freeze = c.dir() + "/freeze";
  Process& first = c.StartServer({"DROVER_TEST_FREEZE_JOURNAL=" + freeze});
  c.StartWorker("duo", {"--cpus", "0,1"});
  const std::string go1 = c.dir() + "/go1";
  const std::string go2 = c.dir() + "/go2";
  const std::string runs = c.dir() + "/runs.";
  // Two at a time: 0 and 1 wait for go1, 2 and 3 end at once, 4 and 5 wait
  // for go2.
  const uint64_t job = SubmittedJob(c.Drover(
      {"submit", "--name", "frozen", "--array", "0-5", "--", "sh", "-c",
       "echo run >> " + runs + "$DROVER_TASK_INDEX; i=$DROVER_TASK_INDEX; "
       "if [ $i -lt 2 ]; then g=" + go1 + "; elif [ $i -ge 4 ]; then g=" + go2 +
           "; else exit 0; fi; while [ ! -e $g ]; do sleep 0.05; done"}));
  ASSERT_GT(job, 0u);
  const std::string prefix = std::to_string(job) + ".";
  {
    EventTap tap(c.Api().options(), job);
    ASSERT_TRUE(tap.WaitForState(prefix + "0", "running", 1));
    ASSERT_TRUE(tap.WaitForState(prefix + "1", "running", 1));
    // From here on nothing reaches the disk: the ends of 0-3 and the
    // assignments of 2-5 are known only to the worker when the server dies.
    std::ofstream(freeze) << "freeze\n";
    std::ofstream(go1) << "go\n";
    ASSERT_TRUE(tap.WaitForState(prefix + "4", "running", 1));
    ASSERT_TRUE(tap.WaitForState(prefix + "5", "running", 1));
  }
  EXPECT_TRUE(first.WaitForLine("the journal is frozen", In(kStartTimeout))) << first.output();
  c.KillServer(SIGKILL);
  std::filesystem::remove(freeze);

  Process& second = c.StartServer();
  for (int i = 2; i < 6; ++i) {
    EXPECT_TRUE(second.WaitForLine("adopted " + prefix + std::to_string(i) + "#1",
                                   In(kStartTimeout)))
        << "task " << i << " not adopted:\n" << second.output();
  }
  std::ofstream(go2) << "go\n";
  RunResult wait = c.Drover({"wait", std::to_string(job)});
  EXPECT_EQ(wait.status, 0) << wait.output << "\nserver:\n" << second.output();
  ExpectEachTaskRanOnceInAttempt1(c, job, runs, 6);
}

// The gap a restart's placement hold closes: another worker is back first
// (here the only worker that ran anything is stopped with SIGSTOP while the
// server restarts), and the task whose assignment the journal never saw must
// not be placed there: it still runs on the stopped worker, which adopts it
// once it is back.
TEST(RecoveryTest, ATaskTheJournalLostIsNotPlacedOnAnotherWorkerBackFirst) {
  // Without queue-ahead, so that 1's assignment is made after the freeze.
  Cluster c({"--heartbeat", "500ms", "--lease-ttl", "20s", "--no-queue-ahead"});
  const std::string freeze = c.dir() + "/freeze";
  Process& first = c.StartServer({"DROVER_TEST_FREEZE_JOURNAL=" + freeze});
  Process& uno = c.StartWorker("uno", {"--cpus", "0"});
  const std::string go1 = c.dir() + "/go1";
  const std::string go2 = c.dir() + "/go2";
  const std::string runs = c.dir() + "/runs.";
  // One at a time: 0 waits for go1, 1 for go2.
  const uint64_t job = SubmittedJob(c.Drover(
      {"submit", "--name", "lost", "--array", "0-1", "--", "sh", "-c",
       "echo run >> " + runs + "$DROVER_TASK_INDEX; if [ $DROVER_TASK_INDEX = 0 ]; then g=" +
           go1 + "; else g=" + go2 + "; fi; while [ ! -e $g ]; do sleep 0.05; done"}));
  ASSERT_GT(job, 0u);
  const std::string prefix = std::to_string(job) + ".";
  {
    EventTap tap(c.Api().options(), job);
    ASSERT_TRUE(tap.WaitForState(prefix + "0", "running", 1));
    std::ofstream(freeze) << "freeze\n";
    std::ofstream(go1) << "go\n";
    ASSERT_TRUE(tap.WaitForState(prefix + "1", "running", 1));
  }
  EXPECT_TRUE(first.WaitForLine("the journal is frozen", In(kStartTimeout))) << first.output();
  uno.Signal(SIGSTOP);
  c.KillServer(SIGKILL);
  std::filesystem::remove(freeze);

  Process& second = c.StartServer();
  c.StartWorker("other", {"--cpus", "1"});
  ASSERT_TRUE(second.WaitForLine("(other) joined", In(kStartTimeout))) << second.output();
  nlohmann::json held = c.Get("/api/v1/tasks/" + prefix + "1");
  EXPECT_EQ(held["state"], "queued") << held.dump(2);
  EXPECT_EQ(held["explain"], "held: server restarted, waiting for workers to re-attach (0 of 1)")
      << held.dump(2);

  uno.Signal(SIGCONT);
  EXPECT_TRUE(second.WaitForLine("adopted " + prefix + "1#1", In(kStartTimeout)))
      << second.output();
  std::ofstream(go2) << "go\n";
  RunResult wait = c.Drover({"wait", std::to_string(job)});
  EXPECT_EQ(wait.status, 0) << wait.output << "\nserver:\n" << second.output();
  nlohmann::json t = c.Get("/api/v1/tasks/" + prefix + "1");
  EXPECT_EQ(t["state"], "succeeded") << t.dump(2);
  EXPECT_EQ(t["attempt"], 1) << "adopted, not re-run: " << t.dump(2);
  EXPECT_EQ(Lines(runs + "1"), std::vector<std::string>{"run"}) << "ran twice";
}

// Only workers that were attached (and not declared lost) when the server
// died can hold an assignment its journal never saw; a restart waits for
// those, not for every machine that ever joined. With a settle far longer
// than the job's timeout, a wait for a retired worker would fail this test.
TEST(RecoveryTest, ARestartDoesNotWaitForAWorkerDeclaredLostBefore) {
  Cluster c({"--heartbeat", "200ms", "--lease-ttl", "2s", "--restore-settle", "30m"});
  Process& first = c.StartServer();
  Process& retired = c.StartWorker("retired", {"--cpus", "1"});
  retired.Signal(SIGKILL);
  ASSERT_TRUE(first.WaitForLine("declaring it lost", In(kStartTimeout))) << first.output();
  c.StartWorker("current", {"--cpus", "1"});
  c.KillServer(SIGKILL);

  Process& second = c.StartServer();
  ASSERT_TRUE(second.WaitForLine("(current)", In(kStartTimeout))) << second.output();
  const uint64_t job = SubmittedJob(c.Drover({"submit", "--name", "after", "--", "true"}));
  ASSERT_GT(job, 0u);
  RunResult wait = c.Drover({"wait", std::to_string(job)});
  EXPECT_EQ(wait.status, 0) << wait.output << "\nserver:\n" << second.output();
}

// A task that failed once and then succeeded lists both attempts, with
// each one's worker, times, exit and reason, in the API and in `drover
// status TASK`; the list comes back from the journal after a restart.
TEST(RecoveryTest, EveryAttemptOfARetriedTaskIsListedAndSurvivesARestart) {
  Cluster c;
  c.StartServer();
  Process& w = c.StartWorker("w");
  const nlohmann::json spec = {
      {"name", "flaky"},
      {"task",
       {{{"id", "flaky"},
         {"command", {"sh", "-c", "exit $(( DROVER_ATTEMPT == 1 ? 3 : 0 ))"}},
         {"retries", 1},
         {"retry_backoff", "100ms"}}}}};
  Result<nlohmann::json> posted = c.Api().Post("/api/v1/jobs", spec.dump());
  ASSERT_TRUE(posted.ok()) << posted.status().ToString();
  const std::string job = std::to_string((*posted)["id"].get<uint64_t>());
  RunResult wait = c.Drover({"wait", job});
  ASSERT_EQ(wait.status, 0) << wait.output;

  auto check = [&](const nlohmann::json& task) {
    const nlohmann::json& attempts = task["attempts"];
    ASSERT_EQ(attempts.size(), 2u) << task.dump(2);
    EXPECT_EQ(attempts[0]["attempt"], 1);
    EXPECT_EQ(attempts[0]["state"], "retried");
    EXPECT_EQ(attempts[0]["outcome"]["exit_code"], 3) << task.dump(2);
    EXPECT_NE(attempts[0]["reason"].get<std::string>().find("exit code 3"), std::string::npos)
        << task.dump(2);
    EXPECT_FALSE(attempts[0]["started_at"].is_null()) << task.dump(2);
    EXPECT_EQ(attempts[1]["attempt"], 2);
    EXPECT_EQ(attempts[1]["state"], "succeeded");
    EXPECT_EQ(attempts[1]["reason"], "") << task.dump(2);
    EXPECT_EQ(attempts[1]["worker"], attempts[0]["worker"]);
    // What it ran on stays after the end.
    ASSERT_TRUE(task["cores"].is_array()) << task.dump(2);
    EXPECT_EQ(task["cores"].size(), 1u) << task.dump(2);
  };
  check(c.Get("/api/v1/tasks/" + job + ".0"));
  RunResult status = c.Drover({"status", job + ".0"});
  EXPECT_EQ(status.status, 0) << status.output;
  EXPECT_NE(status.output.find("attempts:"), std::string::npos) << status.output;
  EXPECT_NE(status.output.find("retried"), std::string::npos) << status.output;
  const size_t cores_row = status.output.find("\ncores ");
  ASSERT_NE(cores_row, std::string::npos) << status.output;
  const std::string row = status.output.substr(cores_row + 1, status.output.find('\n', cores_row + 1) - cores_row - 1);
  EXPECT_EQ(row.find(" -"), std::string::npos) << row;

  c.KillServer(SIGKILL);
  c.StartServer();
  // An end not yet durable at the kill comes back with the worker's report.
  ASSERT_TRUE(w.WaitForLine("attached as worker", In(kStartTimeout))) << w.output();
  check(c.Get("/api/v1/tasks/" + job + ".0"));
}

// The journal file(s) under the state dir, largest first.
std::string JournalFile(const std::string& state) {
  std::string best;
  uintmax_t best_size = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(state + "/store")) {
    if (e.is_regular_file() && e.file_size() > best_size &&
        e.path().filename().string().find("journal") != std::string::npos) {
      best = e.path().string();
      best_size = e.file_size();
    }
  }
  return best;
}

TEST(RecoveryTest, TornJournalTailIsDiscardedAndReportedAndNothingBeforeItIsLost) {
  Cluster c;
  c.StartServer();
  const uint64_t first = SubmittedJob(c.Drover({"submit", "--name", "one", "--", "true"}));
  const uint64_t second = SubmittedJob(c.Drover({"submit", "--name", "two", "--", "true"}));
  ASSERT_GT(second, first);
  c.KillServer(SIGTERM);

  const std::string journal = JournalFile(c.dir() + "/state");
  ASSERT_FALSE(journal.empty());
  // A record cut in the middle: its header promises more bytes than follow.
  const uintmax_t size = std::filesystem::file_size(journal);
  {
    std::ofstream out(journal, std::ios::app | std::ios::binary);
    const char partial[] = {0x40, 0x00, 0x00, 0x00, 0x12, 0x34, 0x56, 0x78, 'j', 'o', 'b'};
    out.write(partial, sizeof partial);
  }
  ASSERT_GT(std::filesystem::file_size(journal), size);

  Process& server = c.StartServer();
  EXPECT_TRUE(server.WaitForLine("bytes discarded", In(kStartTimeout))) << server.output();
  nlohmann::json status = c.Get("/api/v1/status");
  EXPECT_GT(status["journal_discarded_bytes"].get<uint64_t>(), 0u) << status.dump(2);
  nlohmann::json jobs = c.Get("/api/v1/jobs");
  ASSERT_EQ(jobs["jobs"].size(), 2u) << jobs.dump(2);
  EXPECT_EQ(jobs["jobs"][0]["name"], "one");
  EXPECT_EQ(jobs["jobs"][1]["name"], "two");
  // And the server keeps working on the repaired journal.
  EXPECT_GT(SubmittedJob(c.Drover({"submit", "--name", "three", "--", "true"})), second);
}

}  // namespace
}  // namespace drover::testing

// `drover submit --wait` with real processes over TLS: the job and its end
// travel on one connection (cli/streams.h SubmitAndFollowJob), and the
// exit status is the job's outcome.
#include <signal.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "cluster.h"

namespace drover::testing {
namespace {

// The job id `submit --wait` printed on its first line; 0 when none.
uint64_t FirstLineJob(const RunResult& r) {
  const std::string first = r.output.substr(0, r.output.find('\n'));
  if (first.empty() || first.find_first_not_of("0123456789") != std::string::npos) return 0;
  return std::stoull(first);
}

TEST(SubmitWaitTest, ReturnsOnlyOnceEveryTaskEndedWithTheJobsOutcome) {
  Cluster c;
  c.StartServer();
  c.StartWorker("w1");

  // Each of the three tasks leaves a file as its last act: when --wait
  // returns, all three must be there and the server must agree.
  const std::string marks = c.dir() + "/mark.";
  RunResult ok = c.Drover({"submit", "--wait", "--array", "0-2", "--", "sh", "-c",
                           "echo done > " + marks + "{index}"});
  ASSERT_EQ(ok.status, 0) << ok.output;
  const uint64_t job = FirstLineJob(ok);
  ASSERT_GT(job, 0u) << ok.output;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Lines(marks + std::to_string(i)), std::vector<std::string>{"done"}) << i;
  }
  nlohmann::json info = c.Get("/api/v1/jobs/" + std::to_string(job));
  ASSERT_EQ(info["tasks"].size(), 3u) << info.dump(2);
  for (const nlohmann::json& t : info["tasks"]) EXPECT_EQ(t["state"], "succeeded") << t.dump();

  // A failing task: exit status 1 and a line saying what failed.
  RunResult failed = c.Drover({"submit", "--wait", "--", "false"});
  EXPECT_EQ(failed.status, 1) << failed.output;
  const uint64_t failed_job = FirstLineJob(failed);
  ASSERT_GT(failed_job, job) << failed.output;
  EXPECT_NE(failed.output.find("job " + std::to_string(failed_job) + ": 1 failed"),
            std::string::npos)
      << failed.output;

  // A command that does not exist: the task says so, not "exit code -1".
  RunResult missing = c.Drover({"submit", "--wait", "--", "no-such-command-drover-test"});
  EXPECT_EQ(missing.status, 1) << missing.output;
  const uint64_t missing_job = FirstLineJob(missing);
  ASSERT_GT(missing_job, failed_job) << missing.output;
  nlohmann::json task = c.Get("/api/v1/tasks/" + std::to_string(missing_job) + ".0");
  EXPECT_EQ(task["reason"], "command not found: no-such-command-drover-test") << task.dump(2);
  EXPECT_EQ(task["outcome"]["result"], "") << task.dump(2);
}

TEST(SubmitWaitTest, RefusedSubmissionIsReportedAndSubmitsNothing) {
  Cluster c;
  c.StartServer();
  // The server refuses the token on the request itself: one line, exit 1,
  // and no job.
  RunResult refused = c.Drover({"submit", "--wait", "--token", std::string(64, '0'), "--", "true"});
  EXPECT_EQ(refused.status, 1) << refused.output;
  EXPECT_NE(refused.output.find("drover: "), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("token"), std::string::npos) << refused.output;
  EXPECT_EQ(FirstLineJob(refused), 0u) << refused.output;
  EXPECT_TRUE(c.Get("/api/v1/jobs")["jobs"].empty());

  // A server that cannot be reached: the same, naming the address.
  const std::string address = "127.0.0.1:" + std::to_string(c.port());
  c.KillServer(SIGKILL);
  RunResult unreachable = c.Drover({"submit", "--wait", "--", "true"});
  EXPECT_EQ(unreachable.status, 1) << unreachable.output;
  EXPECT_NE(unreachable.output.find(address), std::string::npos) << unreachable.output;
}

// A job no attached worker could run is still queued (a worker that fits
// may join), and the submitter is told why at once.
TEST(SubmitWaitTest, ASubmissionNoWorkerCouldRunIsQueuedWithAWarning) {
  Cluster c;
  c.StartServer();
  RunResult alone = c.Drover({"submit", "--", "true"});
  ASSERT_EQ(alone.status, 0) << alone.output;
  EXPECT_NE(alone.output.find("drover: warning: job 1: no workers are connected"),
            std::string::npos)
      << alone.output;

  c.StartWorker("w1");
  RunResult huge = c.Drover({"submit", "--cpus", "100000", "--", "true"});
  ASSERT_EQ(huge.status, 0) << huge.output;
  EXPECT_NE(huge.output.find("drover: warning: job 2: task group true: no worker is large "
                             "enough for cpus=100000"),
            std::string::npos)
      << huge.output;
  EXPECT_EQ(c.Get("/api/v1/jobs/2")["tasks"][0]["state"], "queued");

  // What some worker can run gets no warning.
  RunResult fits = c.Drover({"submit", "--wait", "--", "true"});
  ASSERT_EQ(fits.status, 0) << fits.output;
  EXPECT_EQ(fits.output.find("warning"), std::string::npos) << fits.output;
}

// Ctrl-C (or a TERM from a script) ends a waiting client at once; the job
// goes on without it.
TEST(SubmitWaitTest, AnInterruptEndsTheWaitAndLeavesTheJob) {
  Cluster c;
  c.StartServer();
  c.StartWorker("w1");
  int job = 0;
  for (int signo : {SIGINT, SIGTERM}) {
    ++job;
    Process wait({c.binary(), "submit", "--wait", "--cpus", "100000", "--", "true"},
                 {"DROVER_ACCESS=" + c.access_file()});
    // Its warning comes once the job is in, as it starts following it.
    ASSERT_TRUE(wait.WaitForLine("drover: warning: job " + std::to_string(job), In(kStartTimeout)))
        << wait.output();
    wait.Signal(signo);
    EXPECT_EQ(wait.Wait(In(kStartTimeout)), 128 + signo) << wait.output();
    EXPECT_EQ(c.Get("/api/v1/jobs/" + std::to_string(job))["tasks"][0]["state"], "queued");
  }
}

}  // namespace
}  // namespace drover::testing

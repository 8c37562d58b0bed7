// Per-user quotas set with `drover server --quota`: what a user may run at
// once is capped, the waiting task says why, and the status shows the limits.
#include <gtest/gtest.h>

#include "cluster.h"

namespace drover::testing {
namespace {

TEST(QuotaTest, ServerQuotaCapsAUsersRunningTasksAndExplainSaysWhy) {
  Cluster c({"--quota", "ana:tasks=1", "--quota", "*:gpus=2"});
  c.StartServer();
  c.StartWorker("w", {"--cpus", "0-1"});
  // Room for both tasks: only the quota holds one back.
  RunResult ana =
      c.Drover({"submit", "--user", "ana", "--array", "0-1", "--", "sleep", "60"});
  const uint64_t job = SubmittedJob(ana);
  ASSERT_GT(job, 0u) << ana.output;
  const std::string j = std::to_string(job);
  EventTap tap(c.Api().options(), job);
  ASSERT_TRUE(tap.WaitForTasksIn("running", 1));

  // The other task waits on ana's quota, not on room: the worker has it.
  nlohmann::json running = c.Get("/api/v1/tasks/" + j + ".0");
  const std::string waiting_id = running["state"] == "running" ? j + ".1" : j + ".0";
  nlohmann::json waiting = c.Get("/api/v1/tasks/" + waiting_id);
  EXPECT_EQ(waiting["state"], "queued") << waiting.dump(2);
  EXPECT_EQ(waiting["explain"], "quota: user ana at 1/1 tasks") << waiting.dump(2);

  nlohmann::json status = c.Get("/api/v1/status");
  EXPECT_EQ(status["quotas"]["ana"], (nlohmann::json{{"tasks", 1}})) << status.dump(2);
  EXPECT_EQ(status["quotas"]["*"], (nlohmann::json{{"gpus", "2"}})) << status.dump(2);
  EXPECT_EQ(c.Drover({"cancel", j}).status, 0);
}

TEST(QuotaTest, MalformedQuotaIsRefusedByName) {
  Cluster c;
  RunResult r = c.Drover({"server", "--port", "0", "--state-dir", c.dir() + "/s", "--quota",
                          "ana:gpu=1"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--quota ana:gpu=1: unknown limit \"gpu\""), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace drover::testing

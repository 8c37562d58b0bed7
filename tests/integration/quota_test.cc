// Per-user quotas set with `drover server --quota` or in the server's
// config file ([quota.USER] tables, re-read on SIGHUP): what a user may run
// at once is capped, the waiting task says why, `drover quota` shows limits
// and use, and a malformed file is refused at start and ignored on reload.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>

#include "cluster.h"

namespace drover::testing {
namespace {

TEST(QuotaTest, ServerQuotaCapsAUsersRunningTasksAndExplainSaysWhy) {
  Cluster c({"--quota", "ana:tasks=1", "--quota", "*:gpus=2"});
  c.StartServer();
  c.StartWorker("w", {"--cpus", "0-1"});
  // Room for both tasks: only the quota holds one back.
  RunResult ana = c.Drover({"submit", "--user", "ana", "--array", "0-1", "--", "sleep", "60"});
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
  EXPECT_EQ(waiting["explain"], "quota: tasks 1/1 for ana") << waiting.dump(2);

  nlohmann::json status = c.Get("/api/v1/status");
  EXPECT_EQ(status["quotas"]["ana"], (nlohmann::json{{"tasks", 1}})) << status.dump(2);
  EXPECT_EQ(status["quotas"]["*"], (nlohmann::json{{"gpus", "2"}})) << status.dump(2);
  EXPECT_EQ(c.Drover({"cancel", j}).status, 0);
}

TEST(QuotaTest, MalformedQuotaIsRefusedByName) {
  Cluster c;
  RunResult r =
      c.Drover({"server", "--port", "0", "--state-dir", c.dir() + "/s", "--quota", "ana:gpu=1"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--quota ana:gpu=1: unknown limit \"gpu\""), std::string::npos)
      << r.output;
}

// A directory for a file the server's flags name before the Cluster (and
// its directory) exists.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/drover_quota_XXXXXX";
    if (mkdtemp(tmpl) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string Write(const std::string& name, const std::string& text) const {
    const std::string file = path_ + "/" + name;
    // Replaced whole (a new file renamed over the old), as an editor or a
    // config tool would, so a reload never reads it half written.
    std::ofstream(file + ".new") << text;
    std::filesystem::rename(file + ".new", file);
    return file;
  }

 private:
  std::string path_;
};

// The first task of `job` in `state`, from the API.
std::string TaskIn(Cluster& c, uint64_t job, const std::string& state) {
  nlohmann::json info = c.Get("/api/v1/jobs/" + std::to_string(job));
  for (const nlohmann::json& t : info["tasks"]) {
    if (t["state"] == state) return t["id"].get<std::string>();
  }
  return "";
}

TEST(QuotaTest, ConfigFileQuotaHoldsATaskAndASighupReloadReleasesIt) {
  TempDir etc;
  const std::string config = etc.Write("drover.toml", "[quota.ana]\ngpus = 2\n");
  Cluster c({"--config", config});
  c.StartServer();
  c.StartWorker("gpus", {},
                {"FAKE_NVML_DEVICES=4", "LD_LIBRARY_PATH=" + std::string(FAKE_NVML_DIR),
                 "DROVER_LOCK_DIR=" + c.dir()});
  const std::string go = c.dir() + "/go";
  const std::vector<std::string> gpu_task = {"--gpus", "1", "--cpus", "0.25"};
  std::vector<std::string> flags = gpu_task;
  flags.insert(flags.end(), {"--user", "ana", "--array", "0-2"});
  const uint64_t ana = SubmittedJob(c.Drover(Submit(flags, HoldingTask(c.dir() + "/a", go))));
  ASSERT_GT(ana, 0u);
  flags = gpu_task;
  flags.insert(flags.end(), {"--user", "bob"});
  const uint64_t bob = SubmittedJob(c.Drover(Submit(flags, HoldingTask(c.dir() + "/b", go))));
  ASSERT_GT(bob, 0u);

  // Bob's task runs on the fourth GPU while ana's third waits on her quota.
  EventTap ana_tap(c.Api().options(), ana);
  EventTap bob_tap(c.Api().options(), bob);
  ASSERT_TRUE(ana_tap.WaitForTasksIn("running", 2));
  ASSERT_TRUE(bob_tap.WaitForTasksIn("running", 1));
  const std::string third = TaskIn(c, ana, "queued");
  ASSERT_FALSE(third.empty());
  nlohmann::json held = c.Get("/api/v1/tasks/" + third);
  EXPECT_EQ(held["explain"], "quota: gpus 2/2 for ana") << held.dump(2);
  RunResult status = c.Drover({"status", third});
  EXPECT_NE(status.output.find("quota: gpus 2/2 for ana"), std::string::npos) << status.output;
  RunResult quota = c.Drover({"quota", "ana"});
  ASSERT_EQ(quota.status, 0) << quota.output;
  EXPECT_NE(quota.output.find("gpus 2/2"), std::string::npos) << quota.output;
  nlohmann::json quotas = c.Get("/api/v1/quotas");
  ASSERT_EQ(quotas["users"].size(), 2u) << quotas.dump(2);
  EXPECT_EQ(quotas["users"][0]["name"], "ana");
  EXPECT_EQ(quotas["users"][0]["limits"], (nlohmann::json{{"gpus", "2"}}));
  EXPECT_EQ(quotas["users"][0]["use"]["gpus"], "2");
  EXPECT_EQ(quotas["users"][0]["use"]["queued"], 1);
  EXPECT_EQ(quotas["users"][1]["name"], "bob");
  EXPECT_EQ(quotas["users"][1]["default"], true);

  // Raised in the file and reloaded: the third starts without anything
  // else happening.
  etc.Write("drover.toml", "[quota.ana]\ngpus = 3\n");
  c.server()->Signal(SIGHUP);
  std::optional<std::string> reloaded =
      c.server()->WaitForLine("quotas reloaded from", In(kStartTimeout));
  ASSERT_TRUE(reloaded) << c.server()->output();
  EXPECT_NE(reloaded->find(config + ": 1 user, 0 groups; changed: ana"), std::string::npos)
      << *reloaded;
  ASSERT_TRUE(ana_tap.WaitForTasksIn("running", 3));
  EXPECT_NE(c.Drover({"quota", "ana"}).output.find("gpus 3/3"), std::string::npos);

  // A malformed file: the error names file and line, the quotas stay.
  etc.Write("drover.toml", "[quota.ana]\ngpus = 1\ncpu = 4\n");
  c.server()->Signal(SIGHUP);
  std::optional<std::string> refused =
      c.server()->WaitForLine("quotas not reloaded", In(kStartTimeout));
  ASSERT_TRUE(refused) << c.server()->output();
  EXPECT_NE(refused->find(config + ":3:1: [quota.ana] cpu: unknown key"), std::string::npos)
      << *refused;
  EXPECT_EQ(c.Get("/api/v1/status")["quotas"]["ana"], (nlohmann::json{{"gpus", "3"}}));
  EXPECT_NE(c.Drover({"quota", "ana"}).output.find("gpus 3/3"), std::string::npos);

  std::ofstream(go).put('\n');
  ASSERT_TRUE(ana_tap.WaitForTasksIn("succeeded", 3));
  ASSERT_TRUE(bob_tap.WaitForTasksIn("succeeded", 1));
}

TEST(QuotaTest, AMalformedConfigFileStopsTheServerNamingFileAndLine) {
  Cluster c;
  const std::string bad =
      c.WriteFile("bad.toml", "[server]\nport = 0\n[quota.ana]\nmem = \"64G\"\n");
  RunResult r = c.Drover({"server", "--state-dir", c.dir() + "/s", "--config", bad});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find(bad + ":4:1: [quota.ana] mem: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ambiguous"), std::string::npos) << r.output;
  // `drover config check` reads the tables as the server does.
  RunResult check = c.Drover({"config", "check", bad});
  EXPECT_EQ(check.status, 2) << check.output;
  EXPECT_NE(check.output.find(bad + ":4:1: [quota.ana] mem: "), std::string::npos) << check.output;
  const std::string twice = c.WriteFile(
      "twice.toml", "[group.a]\nmembers = [\"ana\"]\n[group.b]\nmembers = [\"bob\", \"ana\"]\n");
  RunResult two = c.Drover({"config", "check", twice});
  EXPECT_EQ(two.status, 2) << two.output;
  EXPECT_NE(two.output.find(twice + ":4:1: [group.b] members: ana is already a member of group a"),
            std::string::npos)
      << two.output;
}

TEST(QuotaTest, ASubmissionPastTheQueuedLimitIsRefusedSayingWhy) {
  TempDir etc;
  const std::string config = etc.Write("drover.toml", "[quota.\"*\"]\nqueued = 2\n");
  Cluster c({"--config", config});
  c.StartServer();  // no worker: everything stays queued
  RunResult first = c.Drover({"submit", "--user", "ana", "--", "true"});
  ASSERT_GT(SubmittedJob(first), 0u) << first.output;
  RunResult refused = c.Drover({"submit", "--user", "ana", "--array", "0-1", "--", "true"});
  EXPECT_NE(refused.status, 0);
  EXPECT_NE(refused.output.find("quota: queued tasks 1/2 for ana (this job adds 2)"),
            std::string::npos)
      << refused.output;
  // Another user has a count of their own.
  EXPECT_GT(SubmittedJob(c.Drover({"submit", "--user", "bob", "--array", "0-1", "--", "true"})),
            0u);
}

}  // namespace
}  // namespace drover::testing

// Output retention with real processes (docs/design.md, "Data plane"): a
// worker keeps a finished job's outputs in its cache, where no other file
// can evict them, until `drover server --keep-outputs` has passed since the
// job ended, across a restart of the worker; then the server releases them,
// they give way to new files, and `drover get` says they were released. A
// worker that was away when its job was released hears it as it attaches.
//
// The cache holds 3 MiB and each output is 2 MiB: two outputs never fit
// together, so the second one enters the cache only if the first one may
// be evicted.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cluster.h"

namespace drover::testing {
namespace {

const std::vector<std::string> kSmallCache = {"--cache-size", "3MiB"};

// Submits a task (with `flags`) that writes 2 MiB of random bytes to the
// output `name` and waits for it; its job id (0 and a test failure when it did not succeed).
uint64_t WriteOutput(Cluster& c, const std::string& name, std::vector<std::string> flags = {}) {
  const uint64_t job = SubmittedJob(c.Drover(
      Submit(std::move(flags),
             {"sh", "-c", "head -c 2097152 /dev/urandom > \"$DROVER_OUTPUT_DIR/" + name + "\""})));
  EXPECT_GT(job, 0u);
  if (job == 0) return 0;
  RunResult wait = c.Drover({"wait", std::to_string(job)});
  EXPECT_EQ(wait.status, 0) << wait.output;
  return job;
}

// What GET /api/v1/tasks/{task}/outputs answers when the outputs were
// released (its error message); empty while they are listed.
std::string ReleasedMessage(Cluster& c, const std::string& task) {
  Result<nlohmann::json> listed = c.Api().Get("/api/v1/tasks/" + task + "/outputs");
  if (listed.ok()) return "";
  return listed.status().message();
}

// `drover get TASK -o DIR` succeeded and wrote the file with the hash the
// server recorded for it.
void ExpectDownloads(Cluster& c, const std::string& task, const std::string& dir) {
  RunResult get = c.Drover({"get", task, "-o", dir});
  ASSERT_EQ(get.status, 0) << get.output;
  const nlohmann::json t = c.Get("/api/v1/tasks/" + task);
  const nlohmann::json& outputs = t["outcome"]["outputs"];
  ASSERT_EQ(outputs.size(), 1u) << t.dump(2);
  RunResult sum = RunToEnd(
      {"/bin/sh", "-c",
       "sha256sum < " + dir + "/" + outputs[0]["name"].get<std::string>() + " | cut -d' ' -f1"},
      In(kStartTimeout));
  EXPECT_EQ(sum.output, outputs[0]["sha256"].get<std::string>() + "\n");
}

TEST(OutputRetentionTest, AFinishedJobsOutputsStayUntilKeepOutputsThenGiveWay) {
  Cluster c({"--keep-outputs", "30s"});
  c.StartServer();
  Process* a = &c.StartWorker("a", kSmallCache);
  const uint64_t first = WriteOutput(c, "first.bin");
  ASSERT_GT(first, 0u);
  const std::string first_task = std::to_string(first) + ".0";

  // Killed and started again on the same work directory: still kept.
  a->Signal(SIGKILL);
  ASSERT_TRUE(a->Wait(In(kStartTimeout)).has_value());
  a = &c.StartWorker("a", kSmallCache);

  // A second output cannot push the first out: it is refused by the cache
  // (the task still succeeds; that output is just not served).
  const uint64_t second = WriteOutput(c, "second.bin");
  ASSERT_GT(second, 0u);
  EXPECT_TRUE(
      a->WaitForLine("kept for unreleased jobs (drover server --keep-outputs)", In(kStartTimeout)))
      << a->output();
  ASSERT_EQ(ReleasedMessage(c, first_task), "")
      << "released before the test could look: the machine is too slow for a 30 s keep";
  ExpectDownloads(c, first_task, c.dir() + "/got-first");

  // 30 s after the job ended the server releases it on its timer.
  ASSERT_TRUE(
      a->WaitForLine("released the outputs of job(s) " + std::to_string(first), In(kJobTimeout)))
      << a->output() << c.server()->output();
  const std::string note = "outputs of " + first_task + " were released 30s after job " +
                           std::to_string(first) + " ended (drover server --keep-outputs)";
  EXPECT_EQ(ReleasedMessage(c, first_task), note);
  RunResult get = c.Drover({"get", first_task, "-o", c.dir() + "/got-again"});
  EXPECT_NE(get.status, 0);
  EXPECT_NE(get.output.find("drover: " + note), std::string::npos) << get.output;

  // Released, the first output gives way to a third one, which is served.
  const uint64_t third = WriteOutput(c, "third.bin");
  ASSERT_GT(third, 0u);
  ExpectDownloads(c, std::to_string(third) + ".0", c.dir() + "/got-third");
}

// The worker stops before its job ends (another task of the job waits for
// a worker b), so the release happens while it is away.
TEST(OutputRetentionTest, AWorkerAwayWhenItsJobWasReleasedHearsItAsItAttaches) {
  Cluster c({"--keep-outputs", "2s"});
  c.StartServer();
  const std::vector<std::string> on_a = {"--cache-size", "3MiB", "--label", "node=a"};
  Process* a = &c.StartWorker("a", on_a);
  const uint64_t job = Post(
      c,
      {{"name", "away"},
       {"task",
        {{{"id", "make"},
          {"resources", {{"labels", {{"node", "a"}}}}},
          {"command", "head -c 2097152 /dev/urandom > $DROVER_OUTPUT_DIR/first.bin"}},
         {{"id", "later"}, {"resources", {{"labels", {{"node", "b"}}}}}, {"command", "true"}}}}});
  ASSERT_GT(job, 0u);
  const std::string made = std::to_string(job) + ".0";
  EventTap tap(c.Api().options(), job);
  ASSERT_TRUE(tap.WaitForState(made, "succeeded"));
  a->Signal(SIGTERM);
  ASSERT_TRUE(a->Wait(In(kStartTimeout)).has_value());

  c.StartWorker("b", {"--label", "node=b"});
  RunResult wait = c.Drover({"wait", std::to_string(job)});
  ASSERT_EQ(wait.status, 0) << wait.output;
  // The server's answer says released once 2 s have passed (polled).
  const auto deadline = std::chrono::steady_clock::now() + kJobTimeout;
  while (ReleasedMessage(c, made).empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // polling a condition
  }
  ASSERT_NE(ReleasedMessage(c, made), "");

  a = &c.StartWorker("a", on_a);
  ASSERT_TRUE(
      a->WaitForLine("released the outputs of job(s) " + std::to_string(job), In(kStartTimeout)))
      << a->output() << c.server()->output();
  const uint64_t second = WriteOutput(c, "second.bin", {"--label", "node=a"});
  ASSERT_GT(second, 0u);
  ExpectDownloads(c, std::to_string(second) + ".0", c.dir() + "/got-second");
}

}  // namespace
}  // namespace drover::testing
